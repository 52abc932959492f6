import { TopocollError } from '../errors.js';
import { formatAlgorithm, type ReduceAlgorithm } from './algorithm-choice.js';
import { binomialTree } from './binomial-tree.js';
import { blocks, checkPosition, GroupStepWriter, orderFor, requireShmGroup, type GroupView } from './group-steps.js';
import { knomialTree } from './knomial-tree.js';
import { halvingRange, log2, powerOfTwoFold, writeHalving } from './power-of-two.js';
import type { Step } from './schedule.js';

/**
 * Reduce inside one group: afterwards the member at position `destination` holds, in B, the
 * reduction of every member's B. The steps of the member at position `me`:
 * - `flat`: the destination receives-and-reduces from d+1, …, n−1 (B op X), then from d−1, …, 0
 *   (X op B): B always covers a contiguous run of positions, so the result is in position order
 *   for any destination;
 * - `binomial`, `knomial:K`, commutative (the default): the tree rooted at the destination,
 *   children received smallest subtree first (the reverse of the bcast order), then one Send to
 *   the parent. That order is neither position order nor a rotation of it (with a truncated
 *   subtree the last-received child's run lies below an earlier one's), so these steps are only
 *   right for commutative operators; their order flags are 0 (the child's positions lie after
 *   the parent's relative to the destination);
 * - `binomial`, `knomial:K`, `commutative: false`: the tree rooted at position 0, children
 *   received in position order (each child's subtree is the run just above what the parent
 *   holds: B op X), then, when the destination is not 0, position 0 sends the result to it;
 * - `rabenseifner`: fold to a power of two (`powerOfTwoFold`, the destination's pair keeping at
 *   the destination), reduce-scatter by recursive halving with distances 1, 2, 4, … (blocks of
 *   `of = n'`), then a binomial gather of the reduced blocks to the destination's index: at
 *   j = k−1, …, 0 (relabelled index i' = i XOR dest), i' with bit j set and no higher bits sends
 *   its range to i XOR 2^j and leaves; lower i' receive. Position order for any destination;
 * - `shm`: one ShmReduce step for every member, through the shared-memory engine, which
 *   combines in member order; only for a group the rank registered with it (`options.shmGroup`),
 *   else ECONFIG (as for `shm` bcasts).
 */
export interface GroupReduceOptions {
  /** Whether the operator is commutative (default true); false forces position order. */
  commutative?: boolean;
  /** The id under which the rank registered this group with the shared-memory engine. */
  shmGroup?: number;
}

export function groupReduceSteps(algorithm: ReduceAlgorithm, view: GroupView, destination: number, me: number, options: GroupReduceOptions = {}): Step[] {
  const n = view.members.length;
  checkPosition(n, destination, 'reduce destination');
  checkPosition(n, me, 'own');
  const w = new GroupStepWriter(view);
  if (algorithm === 'shm') {
    w.shmReduce(destination, requireShmGroup(view, options.shmGroup));
    return w.steps;
  }
  if (n === 1) return w.steps;
  const commutative = options.commutative ?? true;
  if (algorithm === 'flat') flatReduce(w, n, destination, me);
  else if (algorithm === 'rabenseifner') rabenseifnerReduce(w, n, destination, me);
  else if (algorithm === 'binomial') treeReduce(w, n, 2, destination, me, commutative);
  else if (typeof algorithm === 'object') treeReduce(w, n, algorithm.knomial, destination, me, commutative);
  else badAlgorithm(algorithm);
  return w.steps;
}

function flatReduce(w: GroupStepWriter, n: number, d: number, me: number): void {
  if (me !== d) {
    w.send(d);
    return;
  }
  for (let p = d + 1; p < n; p++) w.recvReduce(p, orderFor(false));
  for (let p = d - 1; p >= 0; p--) w.recvReduce(p, orderFor(true));
}

function treeReduce(w: GroupStepWriter, n: number, radix: number, d: number, me: number, commutative: boolean): void {
  const tree = (root: number) => (radix === 2 ? binomialTree(n, root, me) : knomialTree(n, radix, root, me));
  if (commutative) {
    const node = tree(d);
    // Listed largest subtree first; a reduce waits for the smallest first.
    for (let k = node.children.length - 1; k >= 0; k--) w.recvReduce(node.children[k]!, orderFor(false));
    if (node.parent >= 0) w.send(node.parent);
    return;
  }
  const node = tree(0);
  for (const c of [...node.children].sort((a, b) => a - b)) w.recvReduce(c, orderFor(false));
  if (node.parent >= 0) w.send(node.parent);
  if (d !== 0 && me === 0) w.send(d);
  if (d !== 0 && me === d) w.recv(0);
}

function rabenseifnerReduce(w: GroupStepWriter, n: number, d: number, me: number): void {
  const fold = powerOfTwoFold(n, d);
  const partner = fold.partnerOf(me);
  const i = fold.indexOf(me);
  if (i < 0) {
    w.send(partner);
    return;
  }
  if (partner >= 0) w.recvReduce(partner, orderFor(partner < me));
  writeHalving(w, fold, i);
  // Gather to the destination's index t over the relabelled indices i' = i XOR t.
  const k = log2(fold.active);
  const relabelled = i ^ fold.indexOf(d);
  for (let j = k - 1; j >= 0; j--) {
    const q = i ^ (1 << j);
    if (relabelled < 1 << j) {
      const theirs = halvingRange(q, j + 1, fold.active);
      w.recv(fold.positionOf(q), blocks(theirs.first, theirs.count, fold.active));
    } else if (relabelled < 2 << j) {
      const mine = halvingRange(i, j + 1, fold.active);
      w.send(fold.positionOf(q), blocks(mine.first, mine.count, fold.active));
      return;
    }
  }
}

function badAlgorithm(a: never): never {
  throw new TopocollError('ECONFIG', `"${formatAlgorithm(a)}" is not a reduce algorithm`, { hint: 'Use flat, binomial, knomial:K or rabenseifner.' });
}
