import { describe, expect, it } from 'vitest';
import type { GroupBarrierAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { predictBarrierUs } from '../../src/algorithms/barrier-model.js';
import {
  ceilLog2,
  exchangeUs,
  oneSidedBcastUs,
  p2pUs,
  duplexShare,
  pipelineUs,
  predictGroupAllgatherUs,
  predictGroupAllreduceUs,
  predictGroupBarrierUs,
  predictGroupBcastUs,
  predictGroupGatherUs,
  predictGroupReduceScatterUs,
  predictAlltoallGroupUs,
  predictBruckAlltoallUs,
  predictPairwiseAlltoallUs,
  predictGroupReduceUs,
  predictGroupScanUs,
  predictGroupScatterUs,
  scanFinishUs,
  sendUs,
  type LevelCosts,
  type LinkModel,
} from '../../src/algorithms/cost-model.js';
import { thrown } from '../helpers/thrown.js';

/**
 * Every formula of cost-model.ts against values computed by hand from its docstring (the
 * arithmetic is in the comments), on one simple link:
 *   L = 1, o_s = 0.5, o_r = 0.25, g = 0.75, G = 0.01, Gx = 0.02; combine at 100 bytes/µs.
 * So for b bytes:
 *   p2p(b)      = 0.5 + 0.01b + 1 + 0.25 = 1.75 + 0.01b
 *   send(b)     = max(0.75, 0.5 + 0.01b)
 *   exchange(b) = 0.5 + 1 + 0.25 + 0.02b = 1.75 + 0.02b
 *   combine(b)  = b / 100
 * Most cases take m = 100 bytes: p2p(100) = 2.75, send(100) = 1.5, exchange(100) = 3.75,
 * combine(100) = 1.
 */
const link: LinkModel = { L: 1, os: 0.5, or: 0.25, g: 0.75, G: 0.01, Gx: 0.02 };
const costs: LevelCosts = { link, combineBytesPerUs: 100 };
/** Floating point: G = 0.01 is not exact in binary. */
const close = (got: number, want: number) => expect(got).toBeCloseTo(want, 9);

describe('the point-to-point terms', () => {
  it('p2p, send and exchange', () => {
    close(p2pUs(link, 0), 1.75); // 0.5 + 0 + 1 + 0.25
    close(p2pUs(link, 100), 2.75); // 0.5 + 1 + 1 + 0.25
    close(sendUs(link, 0), 0.75); // max(0.75, 0.5): the gap
    close(sendUs(link, 20), 0.75); // max(0.75, 0.5 + 0.2)
    close(sendUs(link, 40), 0.9); // max(0.75, 0.5 + 0.4)
    close(sendUs(link, 100), 1.5); // max(0.75, 0.5 + 1)
    close(exchangeUs(link, 0), 1.75); // 0.5 + 1 + 0.25
    close(exchangeUs(link, 100), 3.75); // 1.75 + 100·0.02
  });

  it('ceilLog2', () => {
    expect([1, 2, 3, 4, 5, 8, 9, 16, 17].map(ceilLog2)).toEqual([0, 1, 2, 2, 3, 3, 4, 4, 5]);
  });
});

describe('bcast', () => {
  const bcast = (a: Parameters<typeof predictGroupBcastUs>[0], n: number, m = 100) => predictGroupBcastUs(a, n, m, costs);

  it('flat: (n − 2)·send(m) + p2p(m)', () => {
    close(bcast('flat', 1), 0); // nobody to send to
    close(bcast('flat', 2), 2.75); // 0·1.5 + 2.75
    close(bcast('flat', 4), 5.75); // 2·1.5 + 2.75
    close(bcast('flat', 5), 7.25); // 3·1.5 + 2.75
    close(bcast('flat', 8), 11.75); // 6·1.5 + 2.75
  });

  it('binomial: on the tree, each child p2p(m) after its send starts, sends send(m) apart', () => {
    close(bcast('binomial', 1), 0);
    close(bcast('binomial', 2), 2.75); // 0 → 1: 2.75
    // n = 4: 0 sends to 2 (ready 2.75), then to 1 (1.5 + 2.75 = 4.25); 2 sends to 3 (2.75 + 2.75 = 5.5)
    close(bcast('binomial', 4), 5.5);
    // n = 5: 0's children by subtree, larger first: 2 (subtree 2), 4 (1), 1 (1):
    //   2 ready 2.75, 4 ready 1.5 + 2.75 = 4.25, 1 ready 3 + 2.75 = 5.75; 2 → 3 ready 5.5
    close(bcast('binomial', 5), 5.75);
    // n = 8: 0 → 4 (2.75), 2 (4.25), 1 (5.75); 4 → 6 (5.5), 5 (2.75 + 1.5 + 2.75 = 7);
    //   6 → 7 (8.25); 2 → 3 (7) — the docstring's k·p2p(m) = 3·2.75 = 8.25
    close(bcast('binomial', 8), 8.25);
    // the docstring's k·p2p(m) for n = 2^k while send(m) ≤ p2p(m), m = 0 too (send = g = 0.75 ≤ 1.75)
    for (const k of [4, 5, 6]) {
      close(bcast('binomial', 2 ** k), k * 2.75);
      close(bcast('binomial', 2 ** k, 0), k * 1.75);
    }
  });

  it('knomial:4: the 4-nomial tree the same way', () => {
    const k4 = { knomial: 4 };
    close(bcast(k4, 1), 0);
    close(bcast(k4, 2), 2.75);
    // n = 4: 0 sends to 3, 2, 1 (all subtree 1): ready 2.75, 4.25, 5.75 (= flat)
    close(bcast(k4, 4), 5.75);
    // n = 5: 0's children 4, 3, 2, 1 (subtrees all 1): the fourth ready 3·1.5 + 2.75 = 7.25
    close(bcast(k4, 5), 7.25);
    // n = 8: 0 → 4 (subtree 4) ready 2.75, then 3, 2, 1 (last 7.25); 4 → 7, 6, 5: 5.5, 7, 2.75 + 3 + 2.75 = 8.5
    close(bcast(k4, 8), 8.5);
  });

  it('scatter-allgather: binomial scatter of subtree·m/n bytes, then (n − 1)·exchange(m/n)', () => {
    close(bcast('scatter-allgather', 1), 0);
    // n = 2, blocks of 50: scatter p2p(50) = 2.25; ring 1·exchange(50) = 1.75 + 1 = 2.75
    close(bcast('scatter-allgather', 2), 5);
    // n = 4, blocks of 25: 0 → 2 (50 B) ready 2.25; 0 → 1 (25 B) at send(50) = 1: 1 + p2p(25) = 1 + 2 = 3;
    //   2 → 3 (25 B) 2.25 + 2 = 4.25. Ring 3·exchange(25) = 3·2.25 = 6.75. 4.25 + 6.75
    close(bcast('scatter-allgather', 4), 11);
    // n = 5, blocks of 20: 0 → 2 (subtree 2, 40 B) ready p2p(40) = 2.15; 0 → 4 (20 B) at send(40) = 0.9:
    //   0.9 + p2p(20) = 0.9 + 1.95 = 2.85; 0 → 1 at 0.9 + send(20) = 1.65: 3.6; 2 → 3: 2.15 + 1.95 = 4.1.
    //   Ring 4·exchange(20) = 4·2.15 = 8.6. 4.1 + 8.6
    close(bcast('scatter-allgather', 5), 12.7);
    // n = 8, blocks of 12.5: 0 → 4 (50 B) 2.25; 0 → 2 (25 B) at 1: 3; 0 → 1 (12.5 B) at 1 + 0.75: 1.75 + 1.875 = 3.625;
    //   4 → 6 (25 B) 2.25 + 2 = 4.25; 4 → 5 at 2.25 + 0.75: 3 + 1.875 = 4.875; 6 → 7: 4.25 + 1.875 = 6.125;
    //   2 → 3: 3 + 1.875 = 4.875. Ring 7·exchange(12.5) = 7·2 = 14. 6.125 + 14
    close(bcast('scatter-allgather', 8), 20.125);
  });
});

describe('reduce', () => {
  const reduce = (a: Parameters<typeof predictGroupReduceUs>[0], n: number) => predictGroupReduceUs(a, n, 100, costs);

  it('flat: p2p(m) + combine(m) + (n − 2)·(max(g, o_r + m·G) + combine(m))', () => {
    close(reduce('flat', 1), 0);
    close(reduce('flat', 2), 3.75); // 2.75 + 1
    close(reduce('flat', 4), 8.25); // 2.75 + 1 + 2·(max(0.75, 0.25 + 1) + 1) = 3.75 + 2·2.25
    close(reduce('flat', 6), 12.75); // 3.75 + 4·2.25
  });

  it('binomial and knomial:4: on the tree, children smallest subtree first, each o_s + m·G + L after its finish', () => {
    // a child's data arrives finish + 0.5 + 1 + 1 = finish + 2.5 after; taking the first costs
    // o_r + combine = 0.25 + 1 = 1.25, each further one max(g, o_r + m·G) + combine = 1.25 + 1 = 2.25
    // n = 4: 1 (leaf) arrives 2.5, taken by 3.75; 2 takes 3 by 3.75, arrives 6.25, taken by 6.25 + 2.25 = 8.5
    close(reduce('binomial', 4), 8.5);
    // n = 6: children of 0: 4 (subtree 2), 2 (2), 1 (1), taken 1, 2, 4: 1 by 3.75, 2 (finish 3.75,
    //   arrives 6.25) by 8.5, 4 (takes 5 by 3.75, arrives 6.25) by max(8.5, 6.25) + 2.25 = 10.75
    close(reduce('binomial', 6), 10.75);
    // knomial:4, n = 4: three leaves arriving at 2.5, taken one after another: 3.75, 6, 8.25 (= flat)
    close(reduce({ knomial: 4 }, 4), 8.25);
  });

  it('rabenseifner: fold when rem > 0, recursive halving, binomial gather', () => {
    // n = 4: halving exchange(50) + combine(50) = 2.75 + 0.5 = 3.25, exchange(25) + combine(25) = 2.25 + 0.25 = 2.5;
    //   gather p2p(25) + p2p(50) = 2 + 2.25 = 4.25. 3.25 + 2.5 + 4.25
    close(reduce('rabenseifner', 4), 10);
    // n = 6 (n' = 4, rem 2): fold p2p(100) + combine(100) = 3.75, then as n = 4
    close(reduce('rabenseifner', 6), 13.75);
  });
});

describe('allreduce among the top group', () => {
  const allreduce = (a: Parameters<typeof predictGroupAllreduceUs>[0], n: number) => predictGroupAllreduceUs(a, n, 100, costs);

  it('recursive-doubling: fold 2·p2p(m) + combine(m) when rem > 0, log2 n′·(exchange(m) + combine(m))', () => {
    close(allreduce('recursive-doubling', 1), 0);
    close(allreduce('recursive-doubling', 2), 4.75); // 3.75 + 1
    close(allreduce('recursive-doubling', 4), 9.5); // 2·(3.75 + 1)
    close(allreduce('recursive-doubling', 6), 16); // 2·2.75 + 1 + 9.5
  });

  it('rabenseifner: the same fold, Σ (exchange(m/2^j) + combine(m/2^j)) + Σ exchange(m/2^j)', () => {
    close(allreduce('rabenseifner', 2), 6); // 2·exchange(50) + combine(50) = 5.5 + 0.5
    close(allreduce('rabenseifner', 4), 10.75); // (2·2.75 + 0.5) + (2·2.25 + 0.25) = 6 + 4.75
    close(allreduce('rabenseifner', 6), 17.25); // 6.5 + 10.75
  });
});

describe('allgather (b = 100 bytes per member)', () => {
  const allgather = (a: Parameters<typeof predictGroupAllgatherUs>[0], n: number) => predictGroupAllgatherUs(a, n, 100, costs);

  it('ring: (n − 1)·exchange(b)', () => {
    close(allgather('ring', 1), 0);
    close(allgather('ring', 4), 11.25); // 3·3.75
    close(allgather('ring', 5), 15); // 4·3.75
    close(allgather('ring', 6), 18.75); // 5·3.75
  });

  it('recursive-doubling: Σ exchange(2^k·b·n/n′), with p2p(b) and p2p((n − 1)·b) when rem > 0', () => {
    close(allgather('recursive-doubling', 4), 9.5); // exchange(100) + exchange(200) = 3.75 + 5.75
    // n = 5: p2p(100) + p2p(400) = 2.75 + 5.75; exchange(125) + exchange(250) = 4.25 + 6.75
    close(allgather('recursive-doubling', 5), 19.5);
    // n = 6: p2p(100) + p2p(500) = 2.75 + 6.75; exchange(150) + exchange(300) = 4.75 + 7.75
    close(allgather('recursive-doubling', 6), 22);
  });

  it('bruck: Σ_{k < lg} exchange(min(2^k, n − 2^k)·b)', () => {
    close(allgather('bruck', 4), 9.5); // exchange(100) + exchange(200)
    close(allgather('bruck', 5), 13.25); // exchange(100) + exchange(200) + exchange(100) = 3.75 + 5.75 + 3.75
    close(allgather('bruck', 6), 15.25); // exchange(100) + exchange(200) + exchange(200)
  });

  it('neighbor-exchange: exchange(b) + (n/2 − 1)·exchange(2b); odd n: p2p(b), the even scheme on n − 1, p2p((n − 1)·b)', () => {
    close(allgather('neighbor-exchange', 2), 3.75); // exchange(100)
    close(allgather('neighbor-exchange', 4), 9.5); // 3.75 + 1·5.75
    close(allgather('neighbor-exchange', 5), 18); // 2.75 + 9.5 + p2p(400) = 5.75
    close(allgather('neighbor-exchange', 6), 15.25); // 3.75 + 2·5.75
  });
});

describe("reduce-scatter (b = bytes of each member's share)", () => {
  it('ring: (n − 1)·(exchange(b) + combine(b))', () => {
    close(predictGroupReduceScatterUs('ring', 1, 100, costs), 0);
    close(predictGroupReduceScatterUs('ring', 2, 50, costs), 3.25); // 1·(exchange(50) + combine(50)) = 2.75 + 0.5
    close(predictGroupReduceScatterUs('ring', 4, 100, costs), 14.25); // 3·(3.75 + 1)
    close(predictGroupReduceScatterUs('ring', 5, 100, costs), 19); // 4·4.75
    // the ring allgather's exchanges of the same shares, and a combine of each received share
    close(predictGroupReduceScatterUs('ring', 4, 100, costs), predictGroupAllgatherUs('ring', 4, 100, costs) + 3 * 1);
  });
});

describe('reduce-scatter by recursive halving', () => {
  it('Σ (exchange(m/2^j) + combine(m/2^j)), m = n·b; with rem > 0 the fold p2p(m) + combine(m) first and p2p(b) last', () => {
    close(predictGroupReduceScatterUs('recursive-halving', 1, 100, costs), 0);
    close(predictGroupReduceScatterUs('recursive-halving', 2, 100, costs), 4.75); // exchange(100) + combine(100): the ring's one round
    // n = 4, m = 400: (exchange(200) + combine(200)) + (exchange(100) + combine(100)) = (5.75 + 2) + (3.75 + 1); the ring: 14.25
    close(predictGroupReduceScatterUs('recursive-halving', 4, 100, costs), 12.5);
    // n = 6, m = 600, n' = 4: fold p2p(600) + combine(600) = 7.75 + 6, halving (7.75 + 3) + (4.75 + 1.5), p2p(100) = 2.75 back
    close(predictGroupReduceScatterUs('recursive-halving', 6, 100, costs), 33.5);
  });
});

describe('scan (m = 100 bytes, the whole vector)', () => {
  // p2p(100) = 2.75, combine(100) = 1, send(100) = 1.5
  it('the top group: lg(n − 1)·(p2p(m) + combine(m)) + p2p(m), the shift (its last member stays out of the doubling)', () => {
    close(predictGroupScanUs(1, 100, costs, true), 0);
    close(predictGroupScanUs(2, 100, costs, true), 2.75); // 0·3.75 + 2.75
    close(predictGroupScanUs(4, 100, costs, true), 10.25); // 2·3.75 + 2.75
    close(predictGroupScanUs(5, 100, costs, true), 10.25); // 2·3.75 + 2.75
    close(predictGroupScanUs(6, 100, costs, true), 14); // 3·3.75 + 2.75
  });

  it('a group below: also p2p(m) of its total to the leader, and the prefix down: (n − 2)·send(m) + p2p(m) + combine(m)', () => {
    close(predictGroupScanUs(1, 100, costs, false), 0);
    close(predictGroupScanUs(2, 100, costs, false), 13); // 6.5 + 2.75 + (0 + 2.75 + 1)
    close(predictGroupScanUs(5, 100, costs, false), 25); // 14 + 2.75 + (3·1.5 + 2.75 + 1)
  });

  it("scan's own combine at the end, which exscan has not", () => {
    close(scanFinishUs(false, 100, costs), 1);
    close(scanFinishUs(true, 100, costs), 0);
  });
});

describe('barrier', () => {
  it("is S4's formula on the level's link", () => {
    // dissemination, P = 5: max(f_r = 0.75, f_s = 0.75, 1.75)·3
    close(predictGroupBarrierUs('dissemination', 5, costs), 5.25);
    // central counter, P = 5: 2·1.75 + 3·0.75 + 3·0.75
    close(predictGroupBarrierUs('central-counter', 5, costs), 8);
    // combining-tree:2, P = 4: (0.5 + 1 + 0 + 0.25)·2 + 0.5 + 1·max(0.75, 1.75) + 1 + 0.25
    close(predictGroupBarrierUs({ combiningTree: 2 }, 4, costs), 7);
    close(predictGroupBarrierUs('dissemination', 1, costs), 0);
    for (const a of ['central-counter', { combiningTree: 3 }, 'dissemination'] as GroupBarrierAlgorithm[]) {
      for (const n of [2, 7, 16]) expect(predictGroupBarrierUs(a, n, costs)).toBe(predictBarrierUs(a, n, link));
    }
  });
});

describe('pipelineUs', () => {
  it('the stages once, then the slowest stage once per further segment', () => {
    expect(pipelineUs([1, 3, 2], 4)).toBe(15); // 6 + 3·3
    expect(pipelineUs([1, 3, 2], 1)).toBe(6);
    expect(pipelineUs([2, 2], 3)).toBe(8); // 4 + 2·2
    expect(pipelineUs([5], 0)).toBe(5); // no further segments below one
    expect(pipelineUs([], 3)).toBe(0);
  });

  it('a pair of stages on the same links paces as their sum where the cores copy both ways, as the slower where the link is full duplex', () => {
    const both = { first: 0, second: 2 };
    expect(pipelineUs([2, 1, 3], 4, [{ ...both, shared: 1 }])).toBe(6 + 3 * 5);
    expect(pipelineUs([2, 1, 3], 4, [{ ...both, shared: 0.5 }])).toBe(6 + 3 * 3);
    expect(pipelineUs([2, 1, 3], 4, [{ ...both, shared: 0.75 }])).toBe(6 + 3 * 3.75);
    expect(pipelineUs([1, 9, 2], 4, [{ ...both, shared: 1 }])).toBe(12 + 3 * 9); // an unpaired stage still paces
    const on = (G: number, Gx: number) => duplexShare({ ...link, G, Gx });
    expect([on(1, 2), on(1, 1), on(1, 3), on(1, 0.2), on(0, 1)]).toEqual([1, 0.5, 1, 0.5, 0.5]);
  });
});

describe('shm', () => {
  /** A stand-in S0 engine: 10 + bytes/100 + n µs. */
  const shm = (bytes: number, n: number) => 10 + bytes / 100 + n;
  const local = (cores?: number): LevelCosts => ({ link, combineBytesPerUs: 100, shmBcastUs: shm, cores });

  it("bcast: the level's S0 bcast; allgather: n of them", () => {
    close(predictGroupBcastUs('shm', 4, 100, local()), 15); // 10 + 1 + 4
    close(predictGroupAllgatherUs('shm', 4, 100, local()), 60); // 4·15
  });

  it('reduce: two notification rounds, one copy, (n − 1)·m combined by up to n cores', () => {
    // 2·shm(0, 4) + shm(100, 2) + 3·100/cores/100 = 2·14 + 13 + 3/cores
    close(predictGroupReduceUs('shm', 4, 100, local(2)), 42.5); // 41 + 1.5
    close(predictGroupReduceUs('shm', 4, 100, local()), 44); // no cores given: one
    close(predictGroupReduceUs('shm', 4, 100, local(8)), 41.75); // at most n = 4 cores: 0.75
  });

  it('needs the S0 model: EINVAL where the group is not inside one node', () => {
    for (const f of [
      () => predictGroupBcastUs('shm', 4, 100, costs),
      () => predictGroupReduceUs('shm', 4, 100, costs),
      () => predictGroupAllgatherUs('shm', 4, 100, costs),
    ]) {
      expect(thrown(f, 'EINVAL').message).toMatch(/shm needs a group inside one node/);
    }
    // one member: nothing to do, whatever the algorithm
    expect(predictGroupBcastUs('shm', 1, 100, costs)).toBe(0);
  });
});

describe('bad arguments', () => {
  const calls: ((n: number, bytes: number) => number)[] = [
    (n, b) => predictGroupBcastUs('binomial', n, b, costs),
    (n, b) => predictGroupReduceUs('binomial', n, b, costs),
    (n, b) => predictGroupAllreduceUs('recursive-doubling', n, b, costs),
    (n, b) => predictGroupAllgatherUs('ring', n, b, costs),
    (n, b) => predictGroupReduceScatterUs('ring', n, b, costs),
    (n, b) => predictGroupScanUs(n, b, costs, false),
  ];

  it('EINVAL on a group size that is not a positive integer, and on bytes not finite and ≥ 0', () => {
    for (const f of calls) {
      for (const n of [0, -1, 1.5, NaN]) expect(thrown(() => f(n, 100), 'EINVAL').message).toMatch(/group size .* is not a positive integer/);
      for (const b of [-1, NaN, Infinity]) expect(thrown(() => f(4, b), 'EINVAL').message).toMatch(/bytes is not a finite size/);
    }
    thrown(() => predictGroupBarrierUs('dissemination', 0, costs), 'EINVAL');
  });

  it('EINVAL on an algorithm without a formula', () => {
    expect(thrown(() => predictGroupBcastUs('ring' as never, 4, 100, costs), 'EINVAL').message).toMatch(/no formula for bcast algorithm "ring"/);
    expect(thrown(() => predictGroupReduceUs('ring' as never, 4, 100, costs), 'EINVAL').message).toMatch(/reduce/);
    expect(thrown(() => predictGroupAllreduceUs('shm' as never, 4, 100, costs), 'EINVAL').message).toMatch(/allreduce/);
    expect(thrown(() => predictGroupAllgatherUs('binomial' as never, 4, 100, costs), 'EINVAL').message).toMatch(/allgather/);
    expect(thrown(() => predictGroupReduceScatterUs('bruck' as never, 4, 100, costs), 'EINVAL').message).toMatch(/reduce-scatter/);
  });
});

describe('one pattern, one prediction', () => {
  // A knomial:4 tree among 4 (or 5) members is the flat tree — every member sends straight to the
  // root — so both formulas must give the same time.
  it('a knomial:4 reduce among 4 is the flat reduce', () => {
    close(predictGroupReduceUs({ knomial: 4 }, 4, 100, costs), predictGroupReduceUs('flat', 4, 100, costs));
  });

  it('a knomial:4 bcast among 4 or 5 is the flat bcast', () => {
    for (const n of [4, 5]) close(predictGroupBcastUs({ knomial: 4 }, n, 100, costs), predictGroupBcastUs('flat', n, 100, costs));
  });
});

describe("S1's one-sided bcast estimate", () => {
  // t = (o + 2q + L + o_r)·⌈log2 p⌉ + o_s + L + max(0, m − 1)·G·⌈log2 p⌉, o = o_s, q = max(o, g).
  // On `link`: q = max(0.5, 0.75) = 0.75, a stage 0.5 + 1.5 + 1 + 0.25 = 3.25, the tail
  // o_s + L = 1.5; 1 MiB: (1048576 − 1)·0.01 = 10485.75 per stage.
  const MiB = 1 << 20;

  it('p = 1 costs nothing', () => {
    close(oneSidedBcastUs(link, 1, 1), 0);
    close(oneSidedBcastUs(link, 1, MiB), 0);
  });

  it('1 byte: no G term', () => {
    close(oneSidedBcastUs(link, 2, 1), 4.75); // 3.25·1 + 1.5
    close(oneSidedBcastUs(link, 5, 1), 11.25); // 3.25·3 + 1.5
    close(oneSidedBcastUs(link, 8, 1), 11.25); // ⌈log2 8⌉ = ⌈log2 5⌉ = 3
    close(oneSidedBcastUs(link, 2, 0), 4.75); // m − 1 taken as 0
  });

  it('1 MiB: (m − 1)·G per stage', () => {
    close(oneSidedBcastUs(link, 2, MiB), 10490.5); // 4.75 + 10485.75
    close(oneSidedBcastUs(link, 5, MiB), 31468.5); // 11.25 + 3·10485.75
    close(oneSidedBcastUs(link, 8, MiB), 31468.5);
  });

  it('q is the larger of o and g', () => {
    // o_s = 1 > g: q = 1, a stage 1 + 2 + 1 + 0.25 = 4.25, the tail 1 + 1 = 2.
    close(oneSidedBcastUs({ ...link, os: 1 }, 2, 1), 6.25);
    close(oneSidedBcastUs({ ...link, os: 1 }, 8, 1), 14.75); // 4.25·3 + 2
  });

  it('EINVAL on a bad p or size', () => {
    thrown(() => oneSidedBcastUs(link, 0, 1), 'EINVAL');
    thrown(() => oneSidedBcastUs(link, 2, -1), 'EINVAL');
  });
});

describe('gather and scatter', () => {
  const gather = (a: 'flat' | 'binomial', n: number, b = 100) => predictGroupGatherUs(a, n, b, costs);
  const scatter = (a: 'flat' | 'binomial', n: number, b = 100) => predictGroupScatterUs(a, n, b, costs);

  it('flat: gather p2p(b) + (n − 2)·max(g, o_r + b·G); scatter (n − 2)·send(b) + p2p(b)', () => {
    close(gather('flat', 1), 0);
    close(gather('flat', 2), 2.75); // p2p(100)
    close(gather('flat', 4), 5.25); // 2.75 + 2·max(0.75, 0.25 + 1)
    close(scatter('flat', 4), 5.75); // 2·1.5 + 2.75
  });

  it('binomial on the tree, each message carrying its subtree (n = 4: children 2 with 2 blocks, 1 with 1; 2 has child 3)', () => {
    close(gather('binomial', 2), 2.75); // child 1 arrives at 0.5 + 1 + 1, taken in o_r
    // child 1 first: 2.5 + 0.25 = 2.75; rank 2 done at 2.75 (its child 3 likewise), its 200 bytes
    // arrive at 2.75 + 0.5 + 2 + 1 = 6.25, taken in max(0.75, 0.25 + 2) = 2.25 → 8.5
    close(gather('binomial', 4), 8.5);
    // 200 bytes to 2 (ready at p2p(200) = 3.75; the root's next send after send(200) = 2.5), 100
    // to 1 (ready 2.5 + 2.75 = 5.25); 2 sends 100 to 3: 3.75 + 2.75 = 6.5
    close(scatter('binomial', 4), 6.5);
    // the scatter half of scatter-allgather: its bcast of m = n·b less the ring's (n − 1) exchanges of b
    close(scatter('binomial', 8), predictGroupBcastUs('scatter-allgather', 8, 800, costs) - 7 * exchangeUs(link, 100));
  });

  it('an algorithm without a formula is EINVAL', () => {
    expect(thrown(() => predictGroupGatherUs('ring' as 'flat', 4, 8, costs)).code).toBe('EINVAL');
  });
});

describe('alltoall', () => {
  const c = { link: { L: 2, os: 0.5, or: 0.5, g: 0.2, G: 0.001, Gx: 0.002 }, combineBytesPerUs: 1000 };
  it('pairwise: (n − 1) exchanges of a block; a group of one costs nothing', () => {
    expect(predictPairwiseAlltoallUs(1, 100, c)).toBe(0);
    expect(predictPairwiseAlltoallUs(5, 100, c)).toBeCloseTo(4 * (0.5 + 2 + 0.5 + 100 * 0.002), 12);
    expect(predictAlltoallGroupUs([3], 5, 100, c, false)).toBe(0);
  });
  it("a hierarchical group's part: blocks up and down through the leader, then its cross exchange", () => {
    // Two members of one rank each, no rank outside: the cross exchange alone.
    expect(predictAlltoallGroupUs([1, 1], 0, 100, c, true)).toBeCloseTo(0.5 + 2 + 0.5 + 0.2, 12);
    // Two leaders of 3 ranks each at the top: 9 blocks each way, sent then received.
    const take = Math.max(0.2, 0.5 + 100 * 0.001);
    expect(predictAlltoallGroupUs([3, 3], 0, 100, c, false)).toBeCloseTo(9 * (take + take) + 2, 12);
    // A node of 3 under it: 2·3 blocks up and down.
    const p2p = 0.5 + 100 * 0.001 + 2 + 0.5;
    expect(predictAlltoallGroupUs([1, 1, 1], 3, 100, c, true)).toBeCloseTo(2 * p2p + 6 * take + 6 * take + 2 * (0.5 + 2 + 0.5 + 0.2), 12);
  });
});

describe('alltoall bundles and Bruck', () => {
  const c = { link: { L: 2, os: 0.5, or: 0.5, g: 0.2, G: 0.001, Gx: 0.002 }, combineBytesPerUs: 1000 };
  it('bundles: one message per list, every bundled byte copied in and out', () => {
    // Two leaders of 3 ranks each: one step of 9 blocks each way.
    const pair = 9 * 100;
    const take = Math.max(0.2, 0.5 + pair * 0.001);
    const send = Math.max(0.2, 0.5 + pair * 0.001);
    expect(predictAlltoallGroupUs([3, 3], 0, 100, c, false, true)).toBeCloseTo(send + take + 2 + (2 * pair) / 1000, 12);
    expect(predictAlltoallGroupUs([3, 3], 0, 100, c, false, true)).toBeLessThan(predictAlltoallGroupUs([3, 3], 0, 100, c, false));
  });
  it('bruck: a round per bit, the blocks whose distance has it', () => {
    // n = 4: rounds of distances {1, 3} and {2, 3}.
    const round = 0.5 + 2 + 0.5 + 200 * 0.002 + 400 / 1000;
    expect(predictBruckAlltoallUs(4, 100, c)).toBeCloseTo(2 * round, 12);
    expect(predictBruckAlltoallUs(1, 100, c)).toBe(0);
  });
});
