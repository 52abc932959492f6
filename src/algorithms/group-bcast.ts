import { TopocollError } from '../errors.js';
import { formatAlgorithm, type BcastAlgorithm } from './algorithm-choice.js';
import { binomialSubtreeSize, binomialTree } from './binomial-tree.js';
import { blocks, checkPosition, GroupStepWriter, requireShmGroup, type GroupView } from './group-steps.js';
import { knomialTree } from './knomial-tree.js';
import type { Step } from './schedule.js';

/**
 * Bcast inside one group: the member at position `source` has the data in B; afterwards every
 * member has the whole segment. The steps of the member at position `me`:
 * - `flat`: the source sends to every other member in turn (relative positions 1 … n−1);
 * - `binomial`, `knomial:K`: a tree rooted at the source; receive from the parent, then send to
 *   the children, largest subtree first;
 * - `scatter-allgather` (van de Geijn): blocks of `of = n`, block v belonging to relative
 *   position v (relative to the source). A binomial scatter — every node receives the blocks of
 *   its whole subtree, a contiguous relative range, from its parent in one Recv and sends its
 *   children their sub-ranges — then a ring allgather: n − 1 SendRecv steps, step t sending
 *   block v − t to relative v + 1 and receiving block v − t − 1 from v − 1 (mod n). The ring
 *   works for any n; the source takes part like everyone else (it receives blocks it already
 *   holds, which keeps every step a plain exchange);
 * - `shm`: one ShmBcast step for every member, through the shared-memory engine; only for a group
 *   the rank registered with it (`options.shmGroup`), else ECONFIG — silently switching to
 *   another algorithm on some ranks only would hang the group.
 */
export interface GroupBcastOptions {
  /** The id under which the rank registered this group with the shared-memory engine. */
  shmGroup?: number;
}

export function groupBcastSteps(algorithm: BcastAlgorithm, view: GroupView, source: number, me: number, options: GroupBcastOptions = {}): Step[] {
  const n = view.members.length;
  checkPosition(n, source, 'bcast source');
  checkPosition(n, me, 'own');
  const w = new GroupStepWriter(view);
  if (algorithm === 'shm') {
    w.shmBcast(source, requireShmGroup(view, options.shmGroup));
    return w.steps;
  }
  if (n === 1) return w.steps;
  if (algorithm === 'flat') flatBcast(w, n, source, me);
  else if (algorithm === 'scatter-allgather') scatterAllgather(w, n, source, me);
  else if (algorithm === 'binomial') treeBcast(w, n, 2, source, me);
  else if (typeof algorithm === 'object') treeBcast(w, n, algorithm.knomial, source, me);
  else badAlgorithm(algorithm);
  return w.steps;
}

function flatBcast(w: GroupStepWriter, n: number, source: number, me: number): void {
  if (me !== source) w.recv(source);
  else for (let v = 1; v < n; v++) w.send((source + v) % n);
}

function treeBcast(w: GroupStepWriter, n: number, radix: number, source: number, me: number): void {
  const node = radix === 2 ? binomialTree(n, source, me) : knomialTree(n, radix, source, me);
  if (node.parent >= 0) w.recv(node.parent);
  for (const c of node.children) w.send(c);
}

function scatterAllgather(w: GroupStepWriter, n: number, source: number, me: number): void {
  const relative = (p: number): number => (p - source + n) % n;
  const absolute = (v: number): number => (v + source) % n;
  const v = relative(me);
  // Scatter: a subtree of the binomial tree is a contiguous range of relative positions, and
  // block b belongs to relative position b, so each message is one contiguous block range.
  const node = binomialTree(n, source, me);
  if (node.parent >= 0) w.recv(node.parent, blocks(v, binomialSubtreeSize(n, source, me), n));
  for (const c of node.children) w.send(c, blocks(relative(c), binomialSubtreeSize(n, source, c), n));
  // Ring allgather: at step t, relative v forwards the block it got at step t − 1 (its own at t = 0).
  for (let t = 0; t < n - 1; t++) {
    w.sendRecv(absolute(v + 1), blocks((v - t + n) % n, 1, n), absolute(v - 1 + n), { first: (v - t - 1 + 2 * n) % n, count: 1 });
  }
}

function badAlgorithm(a: never): never {
  throw new TopocollError('ECONFIG', `"${formatAlgorithm(a)}" is not a bcast algorithm`, { hint: 'Use flat, binomial, knomial:K, scatter-allgather or shm.' });
}
