import { describe, expect, it } from 'vitest';
import { type AllreduceAlgorithm, type BcastAlgorithm, type ReduceAlgorithm, formatAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { groupAllreduceSteps } from '../../src/algorithms/group-allreduce.js';
import { groupBcastSteps } from '../../src/algorithms/group-bcast.js';
import { groupReduceSteps } from '../../src/algorithms/group-reduce.js';
import type { GroupView } from '../../src/algorithms/group-steps.js';
import { halvingRange, powerOfTwoFold } from '../../src/algorithms/power-of-two.js';
import { StepKind, type Schedule, type Step } from '../../src/algorithms/schedule.js';
import { range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';
import { combineTerms, contribution, simulate, termProblems, type SimulationOptions, type Transport } from './simulator.js';

/** A group of n members that are ranks 0 … n−1 (position = rank), on level 0. */
const view = (n: number): GroupView => ({ members: range(0, n - 1), level: 0 });
const SHM_ID = 5;
const shmGroups = (n: number) => new Map([[SHM_ID, range(0, n - 1)]]);
const asSchedules = (n: number, steps: (me: number) => Step[]): Schedule[] => range(0, n - 1).map((me) => ({ collective: 'bcast', root: 0, steps: steps(me) }));

/** Element counts (including fewer elements than blocks), segments and transports every run is tried with. */
const RUNS: { elements: number; segments: number; transport: Transport }[] = [
  { elements: 1, segments: 1, transport: 'eager' },
  { elements: 3, segments: 1, transport: 'rendezvous' },
  { elements: 7, segments: 2, transport: 'eager' },
  { elements: 64, segments: 1, transport: 'rendezvous' },
];

function run(
  n: number,
  schedules: Schedule[],
  options: Omit<SimulationOptions<string>, 'elements' | 'segments' | 'transport'>,
  check: (buffers: (string | undefined)[][], elements: number, segments: number) => string[],
): string[] {
  const problems: string[] = [];
  for (const r of RUNS) {
    const sim = simulate(schedules, { ...options, ...r, shmGroups: shmGroups(n) });
    const where = `${r.elements} elements × ${r.segments}, ${r.transport}`;
    problems.push(...sim.errors.map((e) => `${where}: ${e}`));
    if (!sim.finished) problems.push(`${where}: stuck ${sim.stuck.map((s) => s.rank).join(',')}`);
    else problems.push(...check(sim.buffers, r.elements, r.segments).map((p) => `${where}: ${p}`));
  }
  return problems;
}

const forEachElement = (elements: number, segments: number, f: (segment: number, element: number, at: number) => void): void => {
  for (let s = 0; s < segments; s++) for (let e = 0; e < elements; e++) f(s, e, s * elements + e);
};

const BCAST: BcastAlgorithm[] = ['flat', 'binomial', { knomial: 3 }, { knomial: 4 }, 'scatter-allgather', 'shm'];
const REDUCE: ReduceAlgorithm[] = ['flat', 'binomial', { knomial: 3 }, 'rabenseifner', 'shm'];
const ALLREDUCE: AllreduceAlgorithm[] = ['recursive-doubling', 'rabenseifner'];
/** Algorithms whose result is in position order whatever `commutative` says. */
const alwaysOrdered = (a: ReduceAlgorithm): boolean => a === 'flat' || a === 'rabenseifner' || a === 'shm';

describe('group bcast', () => {
  it.each(BCAST.map((a) => [formatAlgorithm(a), a] as const))(
    "%s: every member ends with the source's data, never sending what it does not hold (n = 1…17, every source)",
    (_name, algorithm) => {
      const problems: string[] = [];
      for (let n = 1; n <= 17; n++) {
        for (let source = 0; source < n; source++) {
          const schedules = asSchedules(n, (me) => groupBcastSteps(algorithm, view(n), source, me, { shmGroup: SHM_ID }));
          const initial = (rank: number, e: number, s: number) => (rank === source ? contribution(source, e, s) : undefined);
          const found = run(n, schedules, { initial }, (buffers, elements, segments) => {
            const bad: string[] = [];
            buffers.forEach((b, rank) =>
              forEachElement(elements, segments, (s, e, at) => {
                if (b[at] !== contribution(source, e, s)) bad.push(`rank ${rank} element ${e}: ${b[at]}`);
              }),
            );
            return bad;
          });
          problems.push(...found.map((p) => `n ${n} source ${source}: ${p}`));
        }
      }
      expect(problems.slice(0, 10)).toEqual([]);
    },
  );

  it('trees send n − 1 whole messages; the source of a flat bcast sends them all', () => {
    for (const algorithm of ['flat', 'binomial', { knomial: 3 }] as BcastAlgorithm[]) {
      const steps = range(0, 9).map((me) => groupBcastSteps(algorithm, view(10), 4, me));
      expect(steps.flat().filter((s) => s.kind === StepKind.Send)).toHaveLength(9);
      expect(steps.flat().every((s) => s.range === undefined)).toBe(true);
    }
    expect(groupBcastSteps('flat', view(4), 2, 2).map((s) => s.peer)).toEqual([3, 0, 1]);
  });

  it('scatter-allgather: a binomial scatter of source-relative blocks of n, then a ring', () => {
    const v = { members: [10, 11, 12, 13], level: 2 };
    const ring = (to: number, block: number, from: number, block2: number): Step => ({
      kind: StepKind.SendRecv,
      peer: to,
      level: 2,
      range: { first: block, count: 1, of: 4 },
      peer2: from,
      range2: { first: block2, count: 1 },
    });
    // source at position 1: relative v = position − 1; blocks 2…3 go to relative 2 (position 3), block 1 to relative 1
    expect(groupBcastSteps('scatter-allgather', v, 1, 1)).toEqual([
      { kind: StepKind.Send, peer: 13, level: 2, range: { first: 2, count: 2, of: 4 } },
      { kind: StepKind.Send, peer: 12, level: 2, range: { first: 1, count: 1, of: 4 } },
      ring(12, 0, 10, 3),
      ring(12, 3, 10, 2),
      ring(12, 2, 10, 1),
    ]);
    expect(groupBcastSteps('scatter-allgather', v, 1, 3)).toEqual([
      { kind: StepKind.Recv, peer: 11, level: 2, range: { first: 2, count: 2, of: 4 } },
      { kind: StepKind.Send, peer: 10, level: 2, range: { first: 3, count: 1, of: 4 } },
      ring(10, 2, 12, 1),
      ring(10, 1, 12, 0),
      ring(10, 0, 12, 3),
    ]);
  });

  it('shm: one ShmBcast step per member naming the source; ECONFIG without an engine group', () => {
    expect(groupBcastSteps('shm', { members: [3, 8], level: 1 }, 1, 0, { shmGroup: 7 })).toEqual([{ kind: StepKind.ShmBcast, peer: 8, level: 1, group: 7 }]);
    const e = thrown(() => groupBcastSteps('shm', { members: [3, 8], level: 1, label: 'node group n1' }, 0, 1), 'ECONFIG');
    expect(e.message).toMatch(/shm chosen for node group n1, which is not registered/);
  });

  it('rejects bad positions and algorithms', () => {
    thrown(() => groupBcastSteps('flat', view(3), 3, 0), 'EINVAL');
    thrown(() => groupBcastSteps('flat', view(3), 0, -1), 'EINVAL');
    thrown(() => groupBcastSteps('rabenseifner' as BcastAlgorithm, view(3), 0, 0), 'ECONFIG');
    thrown(() => groupBcastSteps({ knomial: 1 }, view(3), 0, 0), 'EINVAL');
  });
});

describe('group reduce', () => {
  const cases = REDUCE.flatMap((a) => [true, false].map((commutative) => [formatAlgorithm(a), commutative, a] as const));

  it.each(cases)('%s (commutative %s): the destination gets every member exactly once (n = 1…17, every destination)', (_name, commutative, algorithm) => {
    const ordered = !commutative || alwaysOrdered(algorithm);
    const problems: string[] = [];
    for (let n = 1; n <= 17; n++) {
      for (let d = 0; d < n; d++) {
        const schedules = asSchedules(n, (me) => groupReduceSteps(algorithm, view(n), d, me, { commutative, shmGroup: SHM_ID }));
        const found = run(n, schedules, { initial: contribution, combine: combineTerms }, (buffers, elements, segments) => {
          const bad: string[] = [];
          forEachElement(elements, segments, (s, e, at) => bad.push(...termProblems(buffers[d]![at], s, e, range(0, n - 1), !ordered)));
          return bad;
        });
        problems.push(...found.map((p) => `n ${n} destination ${d}: ${p}`));
      }
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it("commutative trees are today's binomial reduce: rooted at the destination, smallest subtree first", () => {
    // 5 members, destination 0: children 2 (subtree 2), 4, 1 → received 1, 4, 2
    expect(groupReduceSteps('binomial', view(5), 0, 0).map((s) => [s.kind, s.peer, s.order])).toEqual([1, 4, 2].map((p) => [StepKind.RecvReduce, p, 0]));
    expect(groupReduceSteps('binomial', view(5), 0, 3)).toEqual([{ kind: StepKind.Send, peer: 2, level: 0 }]);
  });

  it('ordered trees are rooted at position 0, take children in position order, then hand the result to the destination', () => {
    expect(groupReduceSteps('binomial', view(5), 3, 0, { commutative: false })).toEqual([
      ...[1, 2, 4].map((peer) => ({ kind: StepKind.RecvReduce, peer, level: 0, order: 0 })),
      { kind: StepKind.Send, peer: 3, level: 0 },
    ]);
    expect(groupReduceSteps('binomial', view(5), 3, 3, { commutative: false })).toEqual([
      { kind: StepKind.Send, peer: 2, level: 0 },
      { kind: StepKind.Recv, peer: 0, level: 0 },
    ]);
  });

  it('flat: the destination takes the members above it (B op X), then those below (X op B)', () => {
    expect(groupReduceSteps('flat', view(4), 2, 2).map((s) => [s.peer, s.order])).toEqual([
      [3, 0],
      [1, 1],
      [0, 1],
    ]);
    expect(groupReduceSteps('flat', view(4), 2, 0)).toEqual([{ kind: StepKind.Send, peer: 2, level: 0 }]);
  });

  it('rabenseifner over 5: fold (0, 1), halving with distances 1, 2, gather to the destination', () => {
    // active indices 0, 1, 2, 3 at positions 0, 2, 3, 4; index i ends with block bit-reversed i
    expect(groupReduceSteps('rabenseifner', view(5), 0, 1)).toEqual([{ kind: StepKind.Send, peer: 0, level: 0 }]);
    expect(groupReduceSteps('rabenseifner', view(5), 0, 0)).toEqual([
      { kind: StepKind.RecvReduce, peer: 1, level: 0, order: 0 },
      { kind: StepKind.SendRecvReduce, peer: 2, level: 0, range: { first: 2, count: 2, of: 4 }, peer2: 2, range2: { first: 0, count: 2 }, order: 0 },
      { kind: StepKind.SendRecvReduce, peer: 3, level: 0, range: { first: 1, count: 1, of: 4 }, peer2: 3, range2: { first: 0, count: 1 }, order: 0 },
      { kind: StepKind.Recv, peer: 3, level: 0, range: { first: 1, count: 1, of: 4 } },
      { kind: StepKind.Recv, peer: 2, level: 0, range: { first: 2, count: 2, of: 4 } },
    ]);
    // destination 1 keeps its pair instead of 0, and combines as X op B
    expect(groupReduceSteps('rabenseifner', view(5), 1, 0)).toEqual([{ kind: StepKind.Send, peer: 1, level: 0 }]);
    expect(groupReduceSteps('rabenseifner', view(5), 1, 1)[0]).toEqual({ kind: StepKind.RecvReduce, peer: 0, level: 0, order: 1 });
  });

  it('shm: one ShmReduce step per member naming the destination; ECONFIG without an engine group', () => {
    expect(groupReduceSteps('shm', { members: [3, 8], level: 1 }, 1, 0, { shmGroup: 7 })).toEqual([{ kind: StepKind.ShmReduce, peer: 8, level: 1, group: 7 }]);
    thrown(() => groupReduceSteps('shm', view(2), 0, 1), 'ECONFIG');
    thrown(() => groupReduceSteps('scatter-allgather' as ReduceAlgorithm, view(2), 0, 1), 'ECONFIG');
  });
});

describe('group allreduce', () => {
  it.each(ALLREDUCE)('%s: every member ends with the same bits, in position order (n = 1…17)', (algorithm) => {
    const problems: string[] = [];
    for (let n = 1; n <= 17; n++) {
      const schedules = asSchedules(n, (me) => groupAllreduceSteps(algorithm, view(n), me));
      const found = run(n, schedules, { initial: contribution, combine: combineTerms }, (buffers, elements, segments) => {
        const bad: string[] = [];
        forEachElement(elements, segments, (s, e, at) => {
          bad.push(...termProblems(buffers[0]![at], s, e, range(0, n - 1), false));
          buffers.forEach((b, rank) => {
            if (b[at] !== buffers[0]![at]) bad.push(`rank ${rank} element ${e} differs from rank 0: ${b[at]} vs ${buffers[0]![at]}`);
          });
        });
        return bad;
      });
      problems.push(...found.map((p) => `n ${n}: ${p}`));
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('recursive doubling over 3: fold (0, 1), one exchange, unfold', () => {
    const whole = { first: 0, count: 1 };
    expect(groupAllreduceSteps('recursive-doubling', view(3), 0)).toEqual([
      { kind: StepKind.RecvReduce, peer: 1, level: 0, order: 0 },
      { kind: StepKind.SendRecvReduce, peer: 2, level: 0, peer2: 2, range2: whole, order: 0 },
      { kind: StepKind.Send, peer: 1, level: 0 },
    ]);
    expect(groupAllreduceSteps('recursive-doubling', view(3), 2)).toEqual([
      { kind: StepKind.SendRecvReduce, peer: 0, level: 0, peer2: 0, range2: whole, order: 1 },
    ]);
    expect(groupAllreduceSteps('recursive-doubling', view(3), 1)).toEqual([
      { kind: StepKind.Send, peer: 0, level: 0 },
      { kind: StepKind.Recv, peer: 0, level: 0 },
    ]);
  });

  it('rejects a bad algorithm', () => {
    thrown(() => groupAllreduceSteps('binomial' as AllreduceAlgorithm, view(4), 0), 'ECONFIG');
  });
});

describe('power-of-two fold and halving ranges', () => {
  it('folds the first 2·(n − 2^k) positions in pairs, keeping the even one or the named one', () => {
    const fold = powerOfTwoFold(7);
    expect(fold.active).toBe(4);
    expect(range(0, 6).map(fold.indexOf)).toEqual([0, -1, 1, -1, 2, -1, 3]);
    expect(range(0, 3).map(fold.positionOf)).toEqual([0, 2, 4, 6]);
    expect(range(0, 6).map(fold.partnerOf)).toEqual([1, 0, 3, 2, 5, 4, -1]);
    const keep3 = powerOfTwoFold(7, 3);
    expect(range(0, 6).map(keep3.indexOf)).toEqual([0, -1, -1, 1, 2, -1, 3]);
    expect(range(0, 3).map(keep3.positionOf)).toEqual([0, 3, 4, 6]);
    expect(range(0, 7).map(powerOfTwoFold(8, 5).indexOf)).toEqual(range(0, 7));
  });

  it('halving leaves index i with block bit-reversed i, each range the half of the one before', () => {
    expect(range(0, 7).map((i) => halvingRange(i, 3, 8).first)).toEqual([0, 4, 2, 6, 1, 5, 3, 7]);
    expect(halvingRange(5, 1, 8)).toEqual({ first: 4, count: 4 });
    expect(halvingRange(5, 0, 8)).toEqual({ first: 0, count: 8 });
  });
});
