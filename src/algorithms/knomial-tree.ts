import { TopocollError } from '../errors.js';
import type { BinomialNode } from './binomial-tree.js';

/** One position's place in a k-nomial tree; the same shape as a binomial node. */
export type KnomialNode = BinomialNode;

/**
 * The k-nomial tree over group positions 0 … size−1 rooted at `rootIndex`, seen from `index`
 * (k = `radix` ≥ 2; k = 2 is `binomialTree`, node for node and in the same child order).
 *
 * With the relative position v = (index − root + size) mod size written in base k: the parent is
 * v with its lowest nonzero digit cleared; the children are v + i·k^j for i = 1 … k−1 and every
 * k^j below v's lowest nonzero digit (every j for v = 0) while v + i·k^j < size. The child
 * v + i·k^j heads the relative positions v + i·k^j … min(v + (i+1)·k^j, size) − 1 — a contiguous
 * range of relative positions, which scatters and ordered reductions rely on. Children are
 * listed largest subtree first (ties: larger k^j, then larger i first), the order a bcast sends
 * in; a reduce receives in the reverse order.
 */
export function knomialTree(size: number, radix: number, rootIndex: number, index: number): KnomialNode {
  checkTreeArguments(size, radix, rootIndex, index);
  const v = (index - rootIndex + size) % size;
  const absolute = (relative: number): number => (relative + rootIndex) % size;
  const lowest = lowestDigitPower(v, radix, size);
  const parent = v === 0 ? -1 : absolute(v - (Math.floor(v / lowest) % radix) * lowest);
  const kids: { relative: number; subtree: number }[] = [];
  for (let power = 1; power < lowest && v + power < size; power *= radix) {
    for (let i = 1; i < radix && v + i * power < size; i++) {
      kids.push({ relative: v + i * power, subtree: Math.min(power, size - v - i * power) });
    }
  }
  // Built in increasing (k^j, i); a stable sort by size descending after reversing keeps larger ones first on ties.
  kids.reverse().sort((a, b) => b.subtree - a.subtree);
  return { parent, children: kids.map((c) => absolute(c.relative)) };
}

/** Number of positions in the subtree headed by `index` (itself included). */
export function knomialSubtreeSize(size: number, radix: number, rootIndex: number, index: number): number {
  checkTreeArguments(size, radix, rootIndex, index);
  const v = (index - rootIndex + size) % size;
  if (v === 0) return size;
  return Math.min(lowestDigitPower(v, radix, size), size - v);
}

/** k^j of v's lowest nonzero base-k digit; for v = 0 the first power of k that reaches size. */
function lowestDigitPower(v: number, radix: number, size: number): number {
  let power = 1;
  if (v === 0) {
    while (power < size) power *= radix;
    return power;
  }
  while (Math.floor(v / power) % radix === 0) power *= radix;
  return power;
}

function checkTreeArguments(size: number, radix: number, rootIndex: number, index: number): void {
  if (!Number.isInteger(size) || size < 1) {
    throw new TopocollError('EINVAL', `k-nomial tree size ${size} is not a positive integer`);
  }
  if (!Number.isInteger(radix) || radix < 2) {
    throw new TopocollError('EINVAL', `k-nomial tree radix ${radix} is not an integer ≥ 2`);
  }
  for (const [name, value] of [
    ['root', rootIndex],
    ['index', index],
  ] as const) {
    if (!Number.isInteger(value) || value < 0 || value >= size) {
      throw new TopocollError('EINVAL', `k-nomial tree ${name} ${value} is outside 0…${size - 1}`);
    }
  }
}
