import { describe, expect, it } from 'vitest';
import {
  chooseTree,
  fragmentTable,
  notifyTime,
  parseTree,
  predictBcastUs,
  treeChildren,
  type BcastShape,
  type ShmCostModel,
} from '../../src/algorithms/shm-bcast-model.js';
import { thrown } from '../helpers/thrown.js';

const model: ShmCostModel = { copyBytesPerUs: 10000, largeCopyBytesPerUs: 5000, largeBytes: 8 << 20, notifyUs: 0.5, fragmentUs: 0.1, callUs: 0.2 };
const shape = (over: Partial<BcastShape> = {}): BcastShape => ({
  queueBytes: 64 * 4096,
  minFragment: 4096,
  sets: 2,
  tree: { kind: 'flat', radix: 2 },
  ...over,
});

describe('notification trees', () => {
  it('reach every rank exactly once for every shape and size', () => {
    for (const tree of ['flat', 'chain', 'kary:2', 'kary:3', 'knomial:2', 'knomial:3', 'knomial:4'].map(parseTree)) {
      for (let n = 1; n <= 40; n++) {
        const seen = new Array<number>(n).fill(0);
        const visit = (v: number) => {
          seen[v]!++;
          for (const c of treeChildren(tree, n, v)) visit(c);
        };
        visit(0);
        expect(
          seen.every((x) => x === 1),
          `${tree.kind}:${tree.radix} n=${n}`,
        ).toBe(true);
      }
    }
  });

  it('knomial:2 is the binomial tree, largest subtree first', () => {
    expect(treeChildren(parseTree('binomial'), 8, 0)).toEqual([4, 2, 1]);
    expect(treeChildren(parseTree('knomial:3'), 9, 0)).toEqual([3, 6, 1, 2]);
    expect(treeChildren(parseTree('kary:2'), 7, 1)).toEqual([3, 4]);
  });

  it('notification time: flat is sequential, chain is a line, binomial is logarithmic', () => {
    expect(notifyTime(parseTree('flat'), 8, 1)).toBe(7);
    expect(notifyTime(parseTree('chain'), 8, 1)).toBe(7);
    expect(notifyTime(parseTree('binomial'), 8, 1)).toBe(3);
    expect(notifyTime(parseTree('flat'), 1, 1)).toBe(0);
  });

  it('rejects unknown tree names with ECONFIG', () => {
    expect(thrown(() => parseTree('star'), 'ECONFIG').message).toMatch(/unknown notification tree "star"/);
    thrown(() => parseTree('kary:1'), 'ECONFIG');
  });
});

describe('the S0 time model', () => {
  it('inline messages cost notification only', () => {
    expect(predictBcastUs(model, 8, 2, 2, shape(), 4096)).toBeCloseTo(0.2 + 0.5);
    expect(predictBcastUs(model, 8, 1, 2, shape(), 4096)).toBe(0);
  });

  it('grows with the message and is dominated by copying for large ones', () => {
    const t1 = predictBcastUs(model, 1 << 20, 2, 2, shape(), 65536);
    const t4 = predictBcastUs(model, 4 << 20, 2, 2, shape(), 65536);
    expect(t4).toBeGreaterThan(3.5 * t1);
    expect(t1).toBeGreaterThan((1 << 20) / model.copyBytesPerUs);
  });

  it('with one set the root waits for a full drain each round; two sets overlap (m > S·f)', () => {
    const m = 8 * 64 * 4096; // eight times the queue
    expect(predictBcastUs(model, m, 4, 2, shape({ sets: 1 }), 4096)).toBeGreaterThan(predictBcastUs(model, m, 4, 2, shape({ sets: 2 }), 4096));
  });

  it('messages beyond largeBytes copy at the memory-bound rate', () => {
    const at = (m: number) => predictBcastUs(model, m, 2, 2, shape({ queueBytes: 64 << 20 }), 1 << 20) / m;
    // Half the rate: close to twice the time per byte (less for the pipeline fill of the smaller one).
    expect(at(16 << 20)).toBeGreaterThan(1.6 * at(4 << 20));
  });

  it('oversubscribed readers share the cores', () => {
    expect(predictBcastUs(model, 1 << 20, 8, 2, shape(), 65536)).toBeGreaterThan(predictBcastUs(model, 1 << 20, 8, 8, shape(), 65536));
  });

  it('chooses bigger fragments for bigger messages, within the queue', () => {
    const table = fragmentTable(model, 2, 2, shape());
    expect(table).toHaveLength(27);
    for (let i = 1; i < table.length; i++) expect(table[i]!).toBeGreaterThanOrEqual(table[i - 1]!);
    expect(Math.max(...table)).toBeLessThanOrEqual((64 * 4096) / 2);
    expect(table[26]!).toBeGreaterThan(4096);
  });

  it('chooses a flat tree for two ranks and a logarithmic one for many', () => {
    const base = { queueBytes: 1 << 20, minFragment: 4096, sets: 2 };
    expect(chooseTree(model, 2, 2, base).kind).toBe('flat');
    expect(['knomial', 'kary']).toContain(chooseTree(model, 32, 32, base).kind);
  });
});
