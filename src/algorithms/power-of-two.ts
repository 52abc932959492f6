import { blocks, orderFor, type GroupStepWriter } from './group-steps.js';

/**
 * What recursive halving and recursive doubling need: a power-of-two number of members, and the
 * block ranges halving leaves each of them with.
 *
 * **Fold.** With n' = 2^⌊log2 n⌋ and rem = n − n', the first 2·rem positions pair up as
 * (2i, 2i+1); one of each pair hands its whole B to the other and sits out (the even one keeps
 * unless the caller names a position that must keep, e.g. a reduce's destination). The n' that
 * keep are the **active indices** 0 … n'−1 in position order: pair i → index i, position
 * p ≥ 2·rem → index p − rem. Each active index therefore stands for a contiguous run of one or
 * two positions, in position order — what lets the exchanges keep a non-commutative order.
 *
 * **Halving.** Step j = 0, 1, …, log2 n' − 1 pairs index i with i XOR 2^j (distances increasing:
 * 1, 2, 4, …). Before step j, i and its partner both work on the block range R_j(i) (R_0 is all
 * n' blocks); i keeps the lower half R_{j+1}(i) when bit j of i is 0, else the upper half. After
 * step j, i's data on R_{j+1}(i) combines the aligned run of 2^(j+1) indices containing i, so every
 * exchange combines two adjacent runs, the lower one on the left. (Distances decreasing, the more
 * common textbook order, would combine interleaved indices.) After all steps index i owns one
 * block, bit-reversed i; doubling with distances 2^(k−1), …, 2, 1 undoes the halving.
 */
export interface PowerOfTwoFold {
  /** Members n. */
  size: number;
  /** Active indices n' = 2^⌊log2 n⌋. */
  active: number;
  /** Active index of position `p`; −1 for a position that sits out. */
  indexOf(p: number): number;
  /** Position that holds active index `i`. */
  positionOf: (i: number) => number;
  /** The other position of p's pair, or −1 when p is not in a pair. */
  partnerOf(p: number): number;
}

/** The fold of n members; `keep` (a position) stays active when given. */
export function powerOfTwoFold(n: number, keep = -1): PowerOfTwoFold {
  let active = 1;
  while (active * 2 <= n) active *= 2;
  const paired = 2 * (n - active);
  const inPair = (p: number): boolean => p >= 0 && p < paired;
  const partnerOf = (p: number): number => (inPair(p) ? p ^ 1 : -1);
  const keeps = (p: number): boolean => {
    if (!inPair(p)) return true;
    if (inPair(keep) && keep >> 1 === p >> 1) return p === keep; // the pair of `keep`
    return p % 2 === 0;
  };
  return {
    size: n,
    active,
    partnerOf,
    indexOf: (p) => (!keeps(p) ? -1 : inPair(p) ? p >> 1 : p - paired / 2),
    positionOf: (i) => {
      if (i >= paired / 2) return i + paired / 2;
      return keeps(2 * i) ? 2 * i : 2 * i + 1;
    },
  };
}

/** log2 of a power of two. */
export function log2(powerOfTwo: number): number {
  return 31 - Math.clz32(powerOfTwo);
}

/** R_steps(index): the blocks (of `active`) index `index` holds after `steps` halving steps. */
export function halvingRange(index: number, steps: number, active: number): { first: number; count: number } {
  let first = 0;
  let count = active;
  for (let j = 0; j < steps; j++) {
    count /= 2;
    if (((index >> j) & 1) === 1) first += count;
  }
  return { first, count };
}

/**
 * Reduce-scatter by recursive halving, for active index `i`: at step j it sends the partner's
 * half of R_j and combines the partner's data into its own half (lower index on the left).
 */
export function writeHalving(w: GroupStepWriter, fold: PowerOfTwoFold, i: number): void {
  const n = fold.active;
  for (let j = 0; 1 << j < n; j++) {
    const q = i ^ (1 << j);
    const theirs = halvingRange(q, j + 1, n);
    w.sendRecvReduce(fold.positionOf(q), blocks(theirs.first, theirs.count, n), fold.positionOf(q), halvingRange(i, j + 1, n), orderFor(q < i));
  }
}

/**
 * Allgather by recursive doubling that undoes `writeHalving`: distances 2^(k−1), …, 1; at each
 * step the two partners swap their ranges and both hold the union.
 */
export function writeDoubling(w: GroupStepWriter, fold: PowerOfTwoFold, i: number): void {
  const n = fold.active;
  for (let j = log2(n) - 1; j >= 0; j--) {
    const q = i ^ (1 << j);
    const mine = halvingRange(i, j + 1, n);
    w.sendRecv(fold.positionOf(q), blocks(mine.first, mine.count, n), fold.positionOf(q), halvingRange(q, j + 1, n));
  }
}
