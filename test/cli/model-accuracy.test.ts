import { describe, expect, it } from 'vitest';
import { cellsOf, formatSummary, summarise } from '../../src/cli/model-accuracy.js';
import { candidatesOf, runsOf, type ModelRow } from '../../src/cli/model-worker.js';
import type { Explanation } from '../../src/algorithms/selection.js';

const row = (candidate: string, runs: string, predictedUs: number, roundsUs: number[], bytes = 64): ModelRow => ({
  collective: 'bcast',
  bytes,
  candidate,
  runs,
  predictedUs,
  measuredUs: roundsUs[0]!,
  roundsUs,
});

/** `topocoll bench --model`'s arithmetic: configurations pooled by what they run, the summary's three figures. */
describe('the cost model bench: cells and summary', () => {
  it("takes each row's least round, a configuration's rows by their median, and compares auto with the fastest configuration", () => {
    const cells = cellsOf([
      row('auto', 'node binomial', 2, [30, 10]),
      row('node binomial', 'node binomial', 2, [12, 11]),
      row("auto's algorithms, segment none", 'node binomial', 2, [14, 40, 13]),
      row('node flat', 'node flat', 3, [9, 90, 9.5]),
    ]);
    expect(cells).toHaveLength(1);
    const [c] = cells;
    expect(c!.configurations).toHaveLength(2);
    // auto's rows' least rounds 10, 11, 13: median 11.
    expect(c!.auto.names).toEqual(['auto', 'node binomial', "auto's algorithms, segment none"]);
    expect(c!.auto.measuredUs).toBe(11);
    expect(c!.best.runs).toBe('node flat');
    expect(c!.best.measuredUs).toBe(9);
    expect(c!.ratio).toBeCloseTo(11 / 9, 12);
    expect(c!.auto.rowsUs).toEqual([10, 11, 13]);
    expect(c!.best.rowsUs).toEqual([9]);
  });

  it("reports the measurement's repeatability: auto's row against every other row of its configuration", () => {
    const s = summarise(
      cellsOf([
        // Auto's row 10 against 10.9 (within 10 %) and 11.5 (not); the rows need not come in order.
        row('x', 'a', 1, [10.9], 4),
        row('auto', 'a', 1, [10], 4),
        row('z', 'a', 1, [11.5], 4),
        // 12 against 10: not.
        row('auto', 'a', 1, [12], 16),
        row("auto's algorithms, segment none", 'a', 1, [10, 30], 16),
        // Auto's configuration run once: no pair.
        row('auto', 'a', 1, [10], 64),
        row('y', 'b', 1, [10], 64),
      ]),
    );
    expect(s.repeated).toBe(3);
    expect(s.repeatedWithin10).toBe(1);
    expect(formatSummary(s)).toMatch(/auto's configuration against itself in other rows: within 10 % in 1\/3 pairs$/);
  });

  it('counts the cells within 10 %, the worst ratio and the summed loss; prediction errors over every configuration', () => {
    const cells = cellsOf([row('auto', 'a', 10, [10], 4), row('x', 'b', 10, [10.5], 4), row('auto', 'a', 5, [20], 16), row('x', 'b', 40, [10], 16)]);
    const s = summarise(cells);
    expect(s.cells).toBe(2);
    expect(s.within10).toBe(1);
    expect(s.worstRatio).toBe(2);
    expect(s.worst?.bytes).toBe(16);
    // (10 + 20) / (10 + 10) − 1.
    expect(s.loss).toBeCloseTo(0.5, 12);
    // Errors |p/m − 1|: 0, 0.0476…, 0.75, 3 → median (0.0476 + 0.75) / 2.
    expect(s.medianError).toBeCloseTo((1 - 10 / 10.5 + 0.75) / 2, 12);
    expect(s.withinFactor2).toBe(0.5);
    expect(formatSummary(s)).toMatch(/^auto within 10 % of the best in 1\/2 cells \(50 %\); worst auto\/best 2\.00 \(bcast 16 B\); summed loss 50 %/);
  });

  it('refuses a cell without its auto row', () => {
    expect(() => cellsOf([row('x', 'a', 1, [1])])).toThrow(/no auto row for bcast 64 B/);
  });
});

const level = (name: string, candidates: string[], chosen: string): Explanation['levels'][number] => ({
  level: name,
  groupSize: 2,
  link: 'shm',
  linkParameters: { L: 1, os: 0.1, or: 0.1, g: 0.2, G: 0.001, Gx: 0.002 },
  configured: false,
  candidates: candidates.map((algorithm) => ({ algorithm, us: 1 })),
  chosen,
});

describe('the cost model bench: candidates', () => {
  const bcast: Explanation = {
    collective: 'bcast',
    bytes: 65536,
    levels: [level('node', ['flat', 'binomial', 'shm'], 'shm'), level('world', ['flat', 'binomial'], 'binomial')],
    segments: [],
    segmentBytes: 16384,
    predictedUs: 5,
  };

  it('every combination of the levels’ candidates with the model’s segment, then the model’s algorithms at every segment below the size', () => {
    const list = candidatesOf('bcast', bcast, 65536);
    expect(list.slice(0, 6).map((c) => c.name)).toEqual([
      'node flat, world flat',
      'node flat, world binomial',
      'node binomial, world flat',
      'node binomial, world binomial',
      'node shm, world flat',
      'node shm, world binomial',
    ]);
    expect(list[1]!.config).toEqual({ bcast: { levels: { node: 'flat', world: 'binomial' }, segment: 'auto' } });
    expect(list.slice(6).map((c) => c.name)).toEqual([
      "auto's algorithms, segment none",
      "auto's algorithms, segment 8192",
      "auto's algorithms, segment 16384",
      "auto's algorithms, segment 32768",
    ]);
    expect(list[8]!.config).toEqual({ bcast: { levels: { node: 'shm', world: 'binomial' }, segment: 16384 } });
    expect(runsOf(bcast, 65536)).toBe('node shm, world one message (2); segment 16384');
    expect(runsOf(bcast, 16384)).toBe('node shm, world one message (2); segment none');
    expect(
      runsOf(
        {
          ...bcast,
          levels: [
            { ...bcast.levels[0]!, groupSize: 4 },
            { ...bcast.levels[1]!, groupSize: 3 },
          ],
        },
        65536,
      ),
    ).toBe('node shm, world binomial; segment 16384');
  });

  it('allreduce: three shapes over paired lower-level algorithms (auto’s own pair added), the model’s shape at every segment', () => {
    const e: Explanation = {
      collective: 'allreduce',
      bytes: 16384,
      levels: [
        level('node (reduce)', ['flat', 'binomial'], 'flat'),
        level('world (reduce)', ['flat', 'binomial'], 'binomial'),
        level('node (bcast)', ['flat', 'binomial', 'shm'], 'shm'),
        level('world (bcast)', ['flat', 'binomial'], 'binomial'),
      ],
      allreduce: [],
      allreduceShape: 'reduce-allreduce-bcast, top rabenseifner',
      segments: [],
      segmentBytes: 0,
      predictedUs: 5,
    };
    const list = candidatesOf('allreduce', e, 16384);
    // node: 5 families + auto's (flat, shm); world: 4 families (no shm between nodes). reduce-bcast: 6 × 4 pairs;
    // reduce-allreduce-bcast's top group (world) runs its own allreduce: 6 node pairs per top algorithm; then 2 segments.
    expect(list).toHaveLength(6 * 4 + 2 * 6 + 2);
    expect(list.filter((c) => c.name.startsWith('node flat/shm')).map((c) => c.name)).toEqual([
      'node flat/shm, world flat/flat; reduce-bcast',
      'node flat/shm, world binomial/binomial; reduce-bcast',
      'node flat/shm, world knomial:4/knomial:4; reduce-bcast',
      'node flat/shm, world rabenseifner/scatter-allgather; reduce-bcast',
      'node flat/shm; reduce-allreduce-bcast, top recursive-doubling',
      'node flat/shm; reduce-allreduce-bcast, top rabenseifner',
    ]);
    // The top group's pair stays auto's.
    expect(list.find((c) => c.name === 'node binomial/shm; reduce-allreduce-bcast, top rabenseifner')!.config).toEqual({
      reduce: { levels: { node: 'binomial', world: 'binomial' } },
      bcast: { levels: { node: 'shm', world: 'binomial' } },
      allreduce: { algorithm: 'reduce-allreduce-bcast', top: 'rabenseifner', segment: 'auto' },
    });
    expect(list[list.length - 1]!.config).toEqual({
      reduce: { levels: { node: 'flat', world: 'binomial' } },
      bcast: { levels: { node: 'shm', world: 'binomial' } },
      allreduce: { algorithm: 'reduce-allreduce-bcast', top: 'rabenseifner', segment: 8192 },
    });
  });

  it('barrier: every combination, no segments', () => {
    const e: Explanation = {
      collective: 'barrier',
      bytes: 0,
      levels: [level('node', ['central-counter', 'dissemination'], 'dissemination'), level('world', ['combining-tree:2', 'dissemination'], 'dissemination')],
      segments: [],
      segmentBytes: 0,
      predictedUs: 5,
    };
    const list = candidatesOf('barrier', e, 0);
    expect(list.map((c) => c.name)).toEqual([
      'node central-counter, world combining-tree:2',
      'node central-counter, world dissemination',
      'node dissemination, world combining-tree:2',
      'node dissemination, world dissemination',
    ]);
    expect(list[0]!.config).toEqual({ barrier: { levels: { node: 'central-counter', world: 'combining-tree:2' } } });
    expect(runsOf(e, 0)).toBe('node dissemination, world dissemination');
    // In groups of two the central counter and the combining trees send the same two messages.
    expect(runsOf({ ...e, levels: [level('node', [], 'central-counter'), level('world', [], 'combining-tree:3')] }, 0)).toBe(
      'node up and down (2), world up and down (2)',
    );
  });
});
