import { binomialTree } from './binomial-tree.js';
import { StepKind, type Schedule, type Step } from './schedule.js';

/**
 * S1's one-sided binomial bcast (../shared/design/seeds.md, S1) as one rank's schedule over the
 * communicator's ranks, whatever their nodes: the binomial tree of binomialTree() rooted at
 * `root` (S1's PutLoop: shifted rank v = (rank − root) mod p, children v + 2^k below v's lowest
 * set bit). A non-root waits for its parent's put, then every rank puts the data into each
 * child — largest subtree first, so the bcast takes ⌈log2 p⌉ stages, as S1's estimate counts —
 * and a non-root counts itself done at the root; the root's call ends once every other rank has
 * (RMABcastFlush). The level of every step is 0: the tree ignores the plan's levels.
 */
export function oneSidedBcastSchedule(size: number, root: number, rank: number, pollMicros = 0): Schedule {
  const node = binomialTree(size, root, rank);
  const steps: Step[] = [];
  const poll = pollMicros > 0 ? { pollMicros } : {};
  if (node.parent >= 0) steps.push({ kind: StepKind.AwaitPut, peer: node.parent, level: 0, ...poll });
  for (const child of node.children) steps.push({ kind: StepKind.Put, peer: child, level: 0 });
  if (node.parent >= 0) steps.push({ kind: StepKind.CountDone, peer: root, level: 0 });
  else steps.push({ kind: StepKind.AwaitDone, peer: root, level: 0, ...poll });
  return { collective: 'bcast', root, steps };
}
