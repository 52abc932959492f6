import { TopocollError } from '../errors.js';
import type { GroupGatherAlgorithm } from './algorithm-choice.js';
import { binomialTree } from './binomial-tree.js';
import { checkPosition, GroupStepWriter, type GroupView } from './group-steps.js';
import { rankBlock, type Step } from './schedule.js';

export type { GroupGatherAlgorithm } from './algorithm-choice.js';

/**
 * Gather and scatter among one group, on rank blocks (schedule.ts, "Rank blocks"): position i
 * contributes (gather) or is owed (scatter) the blocks of the global ranks `holds(i)`, ascending
 * (at the bottom of a hierarchy its own rank; higher up everything it stands for below the
 * group). The member at position `root` (the group's destination or source) ends with every
 * position's blocks (gather), or starts with them and hands each position its own (scatter).
 * Every step moves exactly one rank block, so a block lands at its own place in B and nothing is
 * reordered; the root's own holds move nowhere.
 *
 * - `flat`: gather — every other position sends its blocks to the root, which receives them
 *   position by position, ascending; scatter — the root sends each other position its blocks,
 *   in the same order.
 * - `binomial`: the binomial tree rooted at the root (binomial-tree.ts). A position's **subtree
 *   blocks** are the holds of every position of its subtree, ascending. Gather — a position
 *   receives the subtree blocks of each child, smallest subtree first (as a reduce), then sends
 *   its own subtree blocks to its parent; scatter — a position receives its subtree blocks from
 *   its parent, then sends each child the child's subtree blocks, largest subtree first (as a
 *   bcast). ⌈log2 n⌉ rounds; the root sends or receives every block once.
 * - n = 1: no steps.
 *
 * Sender and receiver derive the same block lists from `holds` alone, in ascending rank order, so
 * the k-th message between two positions meets the k-th receive. Deadlock freedom with rendezvous
 * sends: a gather position waits only on its subtree, which waits on nobody above it; a scatter
 * position waits only on its parent. Every step's `level` is `view.level`; peers are global
 * ranks (`view.members`).
 */
export function groupGatherSteps(
  algorithm: GroupGatherAlgorithm,
  view: GroupView,
  root: number,
  me: number,
  holds: (position: number) => readonly number[],
): Step[] {
  const n = checkGroup(view, root, me);
  const w = new GroupStepWriter(view);
  if (n === 1) return w.steps;
  if (algorithm === 'flat') {
    if (me !== root) for (const r of holds(me)) w.send(root, rankBlock(r));
    else for (let p = 0; p < n; p++) if (p !== root) for (const r of holds(p)) w.recv(p, rankBlock(r));
    return w.steps;
  }
  if (algorithm !== 'binomial') badAlgorithm(algorithm);
  const node = binomialTree(n, root, me);
  // Listed largest subtree first; a gather waits for the smallest first.
  for (let k = node.children.length - 1; k >= 0; k--) {
    const child = node.children[k]!;
    for (const r of subtreeBlocks(n, root, child, holds)) w.recv(child, rankBlock(r));
  }
  if (node.parent >= 0) for (const r of subtreeBlocks(n, root, me, holds)) w.send(node.parent, rankBlock(r));
  return w.steps;
}

/** The mirror of groupGatherSteps: the root starts with every position's blocks and each position ends with its own. */
export function groupScatterSteps(
  algorithm: GroupGatherAlgorithm,
  view: GroupView,
  root: number,
  me: number,
  holds: (position: number) => readonly number[],
): Step[] {
  const n = checkGroup(view, root, me);
  const w = new GroupStepWriter(view);
  if (n === 1) return w.steps;
  if (algorithm === 'flat') {
    if (me !== root) for (const r of holds(me)) w.recv(root, rankBlock(r));
    else for (let p = 0; p < n; p++) if (p !== root) for (const r of holds(p)) w.send(p, rankBlock(r));
    return w.steps;
  }
  if (algorithm !== 'binomial') badAlgorithm(algorithm);
  const node = binomialTree(n, root, me);
  if (node.parent >= 0) for (const r of subtreeBlocks(n, root, me, holds)) w.recv(node.parent, rankBlock(r));
  for (const child of node.children) for (const r of subtreeBlocks(n, root, child, holds)) w.send(child, rankBlock(r));
  return w.steps;
}

function checkGroup(view: GroupView, root: number, me: number): number {
  const n = view.members.length;
  checkPosition(n, root, 'gather or scatter root');
  checkPosition(n, me, 'own');
  return n;
}

/** The holds of every position of the binomial subtree headed by `head`, ascending. */
function subtreeBlocks(n: number, root: number, head: number, holds: (position: number) => readonly number[]): number[] {
  const out: number[] = [];
  const collect = (p: number): void => {
    out.push(...holds(p));
    for (const c of binomialTree(n, root, p).children) collect(c);
  };
  collect(head);
  return out.sort((a, b) => a - b);
}

function badAlgorithm(a: never): never {
  throw new TopocollError('ECONFIG', `"${String(a)}" is not a gather or scatter algorithm`, { hint: 'Use flat or binomial.' });
}
