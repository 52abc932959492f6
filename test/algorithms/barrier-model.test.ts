import { describe, expect, it } from 'vitest';
import type { GroupBarrierAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { chooseBarrier, DEFAULT_BARRIER_CANDIDATES, predictBarrierUs, type LogP } from '../../src/algorithms/barrier-model.js';
import { range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';

const CT = (k: number): GroupBarrierAlgorithm => ({ combiningTree: k });
const name = (a: GroupBarrierAlgorithm): string => (typeof a === 'string' ? a : `combining-tree:${a.combiningTree}`);

/** o_r > g: f_r = 1.5, f_s = max(1, 0.5) = 1, t_s = o_s + L + o_r = 4.5. */
const LOW_GAP: LogP = { L: 2, os: 1, or: 1.5, g: 0.5 };
/** g dominates: f_r = f_s = t_s = 5, o_s + L + o_r = 1.6. */
const HIGH_GAP: LogP = { L: 1, os: 0.3, or: 0.3, g: 5 };
/** S4's parameters for its fig. 6 (L = 125.6, o_r = 123.8, o_s = 0.43, g = 0.22). */
const PAPER: LogP = { L: 125.6, os: 0.43, or: 123.8, g: 0.22 };

describe("predictBarrierUs: S4's LogP formulas", () => {
  it('hand-computed values, P = 8 and 5 with o_r > g', () => {
    // central counter: 2·4.5 + 6·1.5 + 6·1
    expect(predictBarrierUs('central-counter', 8, LOW_GAP)).toBeCloseTo(24, 12);
    // combining-tree:2: (1 + 2 + 0 + 1.5)·3 + 1 + 2·4.5 + 2 + 1.5
    expect(predictBarrierUs(CT(2), 8, LOW_GAP)).toBeCloseTo(27, 12);
    // combining-tree:4: (1 + 2 + 1.5·2 + 1.5)·log4 8 + 1 + 2·4.5 + 2 + 1.5 = 7.5·1.5 + 13.5
    expect(predictBarrierUs(CT(4), 8, LOW_GAP)).toBeCloseTo(24.75, 12);
    // dissemination: max(1.5, 1, 4.5)·3
    expect(predictBarrierUs('dissemination', 8, LOW_GAP)).toBeCloseTo(13.5, 12);
    // P = 5: real-valued logarithms in the tree, ⌈log2 5⌉ = 3 rounds of dissemination
    expect(predictBarrierUs(CT(2), 5, LOW_GAP)).toBeCloseTo(4.5 * Math.log2(5) + 1 + 4.5 * (Math.log2(5) - 1) + 3.5, 12);
    expect(predictBarrierUs('dissemination', 5, LOW_GAP)).toBeCloseTo(13.5, 12);
    expect(predictBarrierUs('central-counter', 5, LOW_GAP)).toBeCloseTo(9 + 3 * 1.5 + 3 * 1, 12);
    expect(chooseBarrier(8, LOW_GAP)).toMatchObject({ algorithm: 'dissemination', predictedUs: 13.5 });
  });

  it('hand-computed values with a dominant gap: combining-tree:2 beats dissemination at P = 4', () => {
    expect(predictBarrierUs('central-counter', 4, HIGH_GAP)).toBeCloseTo(3.2 + 10 + 10, 12);
    expect(predictBarrierUs(CT(2), 4, HIGH_GAP)).toBeCloseTo(1.6 * 2 + 0.3 + 5 + 1.3, 12); // 9.8
    expect(predictBarrierUs(CT(3), 4, HIGH_GAP)).toBeCloseTo(((1.6 + 5) * Math.log(4)) / Math.log(3) + 0.3 + 5 + 1.3, 12);
    expect(predictBarrierUs('dissemination', 4, HIGH_GAP)).toBe(10);
    const choice = chooseBarrier(4, HIGH_GAP);
    expect(choice.algorithm).toEqual(CT(2));
    expect(choice.predictedUs).toBeCloseTo(9.8, 12);
    expect(choice.all.map((c) => name(c.algorithm))).toEqual(DEFAULT_BARRIER_CANDIDATES.map(name));
  });

  it('P = 1 costs nothing; P = 2 is one message up and one down (central counter, combining-tree:2) or one exchange', () => {
    for (const a of DEFAULT_BARRIER_CANDIDATES) for (const p of [LOW_GAP, HIGH_GAP, PAPER]) expect(predictBarrierUs(a, 1, p)).toBe(0);
    for (const p of [LOW_GAP, HIGH_GAP, PAPER]) {
      const message = p.os + p.L + p.or;
      expect(predictBarrierUs('central-counter', 2, p)).toBeCloseTo(2 * message, 12);
      expect(predictBarrierUs(CT(2), 2, p)).toBeCloseTo(2 * message, 12);
      expect(predictBarrierUs('dissemination', 2, p)).toBeCloseTo(Math.max(p.or, p.os, p.g, message), 12);
    }
  });

  it('predictions grow with P', () => {
    for (const a of DEFAULT_BARRIER_CANDIDATES) {
      for (const p of [LOW_GAP, HIGH_GAP, PAPER]) {
        const t = range(1, 200).map((P) => predictBarrierUs(a, P, p));
        expect(t.every((x, i) => i === 0 || x >= t[i - 1]!)).toBe(true);
      }
    }
  });

  it('rejects bad P, LogP parameters and algorithms', () => {
    thrown(() => predictBarrierUs('dissemination', 0, LOW_GAP), 'EINVAL');
    thrown(() => predictBarrierUs('dissemination', 2.5, LOW_GAP), 'EINVAL');
    thrown(() => predictBarrierUs('dissemination', 4, { ...LOW_GAP, g: -1 }), 'EINVAL');
    thrown(() => predictBarrierUs('dissemination', 4, { ...LOW_GAP, L: Number.NaN }), 'EINVAL');
    thrown(() => predictBarrierUs(CT(1), 4, LOW_GAP), 'ECONFIG');
    thrown(() => predictBarrierUs('binomial' as unknown as GroupBarrierAlgorithm, 4, LOW_GAP), 'ECONFIG');
    thrown(() => chooseBarrier(4, LOW_GAP, []), 'EINVAL');
  });
});

describe('chooseBarrier: AdaptiveBarrierLogP', () => {
  it('ties go to the candidate listed first', () => {
    // P = 2: central counter and combining-tree:2 both predict 2(o_s + L + o_r)
    const slowExchange: LogP = { L: 2, os: 1, or: 1, g: 20 };
    expect(chooseBarrier(2, slowExchange).algorithm).toBe('central-counter');
    expect(chooseBarrier(2, slowExchange, [CT(2), 'central-counter', 'dissemination']).algorithm).toEqual(CT(2));
    expect(chooseBarrier(2, slowExchange, ['dissemination']).algorithm).toBe('dissemination');
  });

  it("S4's own parameters (fig. 6): the formulas predict dissemination for every P = 2…100, about half a combining tree's time", () => {
    for (let P = 2; P <= 100; P++) {
      const choice = chooseBarrier(P, PAPER);
      expect(choice.algorithm).toBe('dissemination');
      const tree = Math.min(...choice.all.filter((c) => typeof c.algorithm === 'object').map((c) => c.predictedUs));
      expect(choice.predictedUs / tree).toBeLessThan(0.68);
    }
    // the central counter is the slowest from P = 13 on (below, combining-tree:2's two log2 P phases are)
    for (let P = 13; P <= 100; P++)
      expect(Math.max(...chooseBarrier(P, PAPER).all.map((c) => c.predictedUs))).toBe(predictBarrierUs('central-counter', P, PAPER));
  });

  it("S4's qualitative result needs a gap above o_s + L + o_r: then a combining tree below ~20 processes, dissemination above", () => {
    const tree: number[] = [];
    for (let P = 2; P <= 2000; P++) {
      const choice = chooseBarrier(P, HIGH_GAP);
      if (choice.algorithm !== 'dissemination') {
        // P = 2: the central counter ties combining-tree:2 and is listed first
        expect(choice.algorithm).toEqual(P === 2 ? 'central-counter' : CT(2));
        tree.push(P);
      }
    }
    // a sawtooth: dissemination's ⌈log2 P⌉ rounds jump just above each power of two, the tree's real-valued log2 P does not
    expect(tree).toEqual([2, 3, 4, 5, 6, 9, 10, 11, 17, 18, 19, 33]);
    // with typical cluster values (o and L of a few µs, a smaller gap) dissemination everywhere
    for (let P = 2; P <= 2000; P++) expect(chooseBarrier(P, LOW_GAP).algorithm).toBe('dissemination');
  });
});
