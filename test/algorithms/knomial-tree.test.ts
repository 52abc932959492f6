import { describe, expect, it } from 'vitest';
import { binomialSubtreeSize, binomialTree } from '../../src/algorithms/binomial-tree.js';
import { knomialSubtreeSize, knomialTree } from '../../src/algorithms/knomial-tree.js';
import { TopocollError } from '../../src/errors.js';

const ceilLog = (n: number, k: number) => {
  let rounds = 0;
  for (let reach = 1; reach < n; reach *= k) rounds++;
  return rounds;
};

describe('knomialTree', () => {
  it('is the binomial tree for radix 2, node for node and in the same child order', () => {
    for (let size = 1; size <= 40; size++) {
      for (let root = 0; root < size; root++) {
        for (let i = 0; i < size; i++) {
          expect(knomialTree(size, 2, root, i)).toEqual(binomialTree(size, root, i));
          expect(knomialSubtreeSize(size, 2, root, i)).toBe(binomialSubtreeSize(size, root, i));
        }
      }
    }
  });

  it('radix 3 over 9 ranks rooted at 0: children by digit, largest subtree first', () => {
    expect(knomialTree(9, 3, 0, 0)).toEqual({ parent: -1, children: [6, 3, 2, 1] });
    expect(knomialTree(9, 3, 0, 3)).toEqual({ parent: 0, children: [5, 4] });
    expect(knomialTree(9, 3, 0, 5)).toEqual({ parent: 3, children: [] });
    expect(knomialTree(9, 3, 0, 8)).toEqual({ parent: 6, children: [] });
    // rooted at 4: relative positions shift
    expect(knomialTree(9, 3, 4, 7)).toEqual({ parent: 4, children: [0, 8] });
  });

  it('is a consistent tree for radix 3…6, sizes 1…40, every root: contiguous subtrees, depth ≤ ⌈log_k n⌉', () => {
    const problems: string[] = [];
    for (let k = 3; k <= 6; k++) {
      for (let size = 1; size <= 40; size++) {
        for (let root = 0; root < size; root++) {
          const at = `k ${k} size ${size} root ${root}`;
          const rel = (i: number) => (i - root + size) % size;
          const tree = Array.from({ length: size }, (_, i) => knomialTree(size, k, root, i));
          tree.forEach((node, i) => {
            if ((node.parent === -1) !== (i === root)) problems.push(`${at}: ${i} parent ${node.parent}`);
            if (node.parent >= 0 && !tree[node.parent]!.children.includes(i)) problems.push(`${at}: ${i} not a child of its parent`);
            const sizes = node.children.map((c) => knomialSubtreeSize(size, k, root, c));
            if (sizes.some((s, j) => j > 0 && s > sizes[j - 1]!)) problems.push(`${at}: children of ${i} not largest first`);
            // the children's subtrees tile i's subtree just above i, in relative positions
            const runs = node.children.map((c) => [rel(c), rel(c) + knomialSubtreeSize(size, k, root, c)] as const).sort((a, b) => a[0] - b[0]);
            let next = rel(i) + 1;
            for (const [from, to] of runs) {
              if (from !== next) problems.push(`${at}: subtree of ${i} not contiguous`);
              next = to;
            }
            if (next !== rel(i) + knomialSubtreeSize(size, k, root, i)) problems.push(`${at}: subtree of ${i} has the wrong size`);
          });
          const depth = (i: number): number => (i === root ? 0 : 1 + depth(tree[i]!.parent));
          const deepest = Math.max(...tree.map((_, i) => depth(i)));
          if (deepest > ceilLog(size, k)) problems.push(`${at}: depth ${deepest}`);
        }
      }
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('rejects bad arguments', () => {
    expect(() => knomialTree(0, 3, 0, 0)).toThrow(TopocollError);
    expect(() => knomialTree(4, 1, 0, 0)).toThrow(/radix 1 is not an integer ≥ 2/);
    expect(() => knomialTree(4, 3, 4, 0)).toThrow(/root 4 is outside 0…3/);
    expect(() => knomialSubtreeSize(4, 3, 0, 9)).toThrow(/index 9/);
  });
});
