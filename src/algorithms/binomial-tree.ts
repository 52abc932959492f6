import { TopocollError } from '../errors.js';

/** One position's place in a binomial tree over the positions 0 … size−1 of a group. */
export interface BinomialNode {
  /** Group position of the parent; −1 at the root. */
  parent: number;
  /** Group positions of the children, largest subtree first (the order a bcast sends in). */
  children: number[];
}

/**
 * The binomial tree over group positions 0 … size−1 rooted at `rootIndex`, seen from `index`.
 * With the relative position v = (index − root + size) mod size: the parent is v with its lowest
 * set bit cleared; the children are v + 2^k for every 2^k below v's lowest set bit (every k for
 * v = 0) while v + 2^k < size. The child v + 2^k heads the subtree of the positions
 * v + 2^k … min(v + 2^(k+1), size) − 1, itself a binomial tree; children are listed by subtree
 * size, largest first (ties: larger k first), which makes a bcast finish in ceil(log2 size)
 * rounds. A reduce receives in the reverse order (smallest subtree first).
 */
export function binomialTree(size: number, rootIndex: number, index: number): BinomialNode {
  if (!Number.isInteger(size) || size < 1) {
    throw new TopocollError('EINVAL', `binomial tree size ${size} is not a positive integer`);
  }
  for (const [name, value] of [
    ['root', rootIndex],
    ['index', index],
  ] as const) {
    if (!Number.isInteger(value) || value < 0 || value >= size) {
      throw new TopocollError('EINVAL', `binomial tree ${name} ${value} is outside 0…${size - 1}`);
    }
  }
  const v = (index - rootIndex + size) % size;
  const absolute = (relative: number): number => (relative + rootIndex) % size;
  const parent = v === 0 ? -1 : absolute(v & (v - 1));
  // 2^k must stay below v's lowest set bit; for the root any power of two below size.
  const limit = v === 0 ? size : v & -v;
  const kids: { relative: number; subtree: number }[] = [];
  for (let bit = 1; bit < limit && v + bit < size; bit *= 2) {
    kids.push({ relative: v + bit, subtree: Math.min(bit, size - v - bit) });
  }
  // Built in increasing k; a stable sort by size descending after reversing keeps larger k first on ties.
  kids.reverse().sort((a, b) => b.subtree - a.subtree);
  return { parent, children: kids.map((c) => absolute(c.relative)) };
}

/** Number of positions in the subtree headed by `index` (itself included). */
export function binomialSubtreeSize(size: number, rootIndex: number, index: number): number {
  const v = (index - rootIndex + size) % size;
  if (v === 0) return size;
  return Math.min(v & -v, size - v);
}
