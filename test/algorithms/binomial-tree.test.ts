import { describe, expect, it } from 'vitest';
import { binomialSubtreeSize, binomialTree } from '../../src/algorithms/binomial-tree.js';
import { TopocollError } from '../../src/errors.js';

const ceilLog2 = (n: number) => (n <= 1 ? 0 : Math.ceil(Math.log2(n)));

/** Every position's node of the tree (size, root). */
const treeOf = (size: number, root: number) => Array.from({ length: size }, (_, i) => binomialTree(size, root, i));

/**
 * A bcast over the tree with one send per position per round, children in the listed order: the
 * round each position receives in (root: 0) and how often it received.
 */
function simulateBcast(size: number, root: number): { round: number[]; received: number[] } {
  const tree = treeOf(size, root);
  const round = new Array<number>(size).fill(-1);
  const received = new Array<number>(size).fill(0);
  round[root] = 0;
  const queue = [root];
  while (queue.length > 0) {
    const p = queue.shift()!;
    tree[p]!.children.forEach((c, k) => {
      received[c]!++;
      round[c] = round[p]! + k + 1;
      queue.push(c);
    });
  }
  return { round, received };
}

describe('binomialTree', () => {
  it('a binomial bcast over 13 ranks rooted at 5 reaches everyone exactly once', () => {
    const { received, round } = simulateBcast(13, 5);
    expect(received.map((n, i) => (i === 5 ? n + 1 : n))).toEqual(new Array(13).fill(1));
    expect(Math.max(...round)).toBe(4);
    // relative 0 (position 5): children 8, 4, 2, 1 relative → positions 0, 9, 7, 6 (sizes 5, 4, 2, 1)
    expect(binomialTree(13, 5, 5)).toEqual({ parent: -1, children: [0, 9, 7, 6] });
    // relative 12 (position 4): parent 8 (position 0), no children
    expect(binomialTree(13, 5, 4)).toEqual({ parent: 0, children: [] });
  });

  it('is the classic tree for a power of two, largest subtree first', () => {
    expect(treeOf(8, 0)).toEqual([
      { parent: -1, children: [4, 2, 1] },
      { parent: 0, children: [] },
      { parent: 0, children: [3] },
      { parent: 2, children: [] },
      { parent: 0, children: [6, 5] },
      { parent: 4, children: [] },
      { parent: 4, children: [7] },
      { parent: 6, children: [] },
    ]);
  });

  it('sends to the larger subtree first when the last one is truncated', () => {
    // size 5: relative 4 heads {4} (1), relative 2 heads {2,3} (2), relative 1 heads {1} (1).
    expect(binomialTree(5, 0, 0).children).toEqual([2, 4, 1]);
    expect(binomialTree(1, 0, 0)).toEqual({ parent: -1, children: [] });
  });

  it('is consistent for every size 1…64 and every root', () => {
    const problems: string[] = [];
    const check = (ok: boolean, what: string) => {
      if (!ok) problems.push(what);
    };
    let trees = 0;
    for (let size = 1; size <= 64; size++) {
      for (let root = 0; root < size; root++) {
        trees++;
        const at = `size ${size} root ${root}`;
        const tree = treeOf(size, root);
        const parents = new Array<number>(size).fill(0);
        tree.forEach((node, i) => {
          if (i === root) check(node.parent === -1, `${at}: root has parent ${node.parent}`);
          else {
            check(node.parent >= 0 && node.parent < size, `${at}: ${i} has parent ${node.parent}`);
            // parent/children consistent: i is listed exactly once among its parent's children
            check(tree[node.parent]?.children.filter((c) => c === i).length === 1, `${at}: ${i} not a child of its parent`);
          }
          for (const c of node.children) {
            check(tree[c]!.parent === i, `${at}: child ${c} of ${i} has parent ${tree[c]!.parent}`);
            parents[c]!++;
          }
          // children: largest subtree first; their subtrees partition the rest of i's subtree
          const sizes = node.children.map((c) => binomialSubtreeSize(size, root, c));
          check(
            sizes.every((n, k) => k === 0 || n <= sizes[k - 1]!),
            `${at}: children of ${i} not largest subtree first`,
          );
          check(sizes.reduce((a, b) => a + b, 0) + 1 === binomialSubtreeSize(size, root, i), `${at}: subtree of ${i}`);
        });
        // each non-root has exactly one parent, the root none
        parents.forEach((n, i) => check(n === (i === root ? 0 : 1), `${at}: ${i} is the child of ${n} positions`));
        // hop depth never exceeds ceil(log2 size); the bcast takes exactly ceil(log2 size) rounds
        const depthOf = (i: number): number => (i === root ? 0 : 1 + depthOf(tree[i]!.parent));
        const depth = Math.max(...tree.map((_, i) => depthOf(i)));
        check(depth <= ceilLog2(size), `${at}: depth ${depth}`);
        const { received, round } = simulateBcast(size, root);
        received.forEach((n, i) => check(n === (i === root ? 0 : 1), `${at}: ${i} received ${n} times`));
        check(Math.max(...round) === ceilLog2(size), `${at}: ${Math.max(...round)} rounds`);
      }
    }
    expect(trees).toBe((64 * 65) / 2);
    expect(problems).toEqual([]);
  });

  it('has hop depth ceil(log2 size) when size is a power of two', () => {
    for (const size of [1, 2, 4, 8, 16, 32, 64]) {
      for (let root = 0; root < size; root++) {
        const tree = treeOf(size, root);
        const depthOf = (i: number): number => (i === root ? 0 : 1 + depthOf(tree[i]!.parent));
        expect(Math.max(...tree.map((_, i) => depthOf(i)))).toBe(ceilLog2(size));
      }
    }
  });

  it('rejects bad arguments', () => {
    expect(() => binomialTree(0, 0, 0)).toThrow(TopocollError);
    expect(() => binomialTree(4, 4, 0)).toThrow(/root 4 is outside 0…3/);
    expect(() => binomialTree(4, 0, -1)).toThrow(/index -1/);
  });
});
