import { describe, expect, it } from 'vitest';
import type { GroupAllgatherAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { allgatherAlcd, averageLogicalDistance, groupAllgatherRounds, groupAllgatherSteps } from '../../src/algorithms/group-allgather.js';
import type { GroupView } from '../../src/algorithms/group-steps.js';
import { StepKind, rankBlock, type Schedule, type Step } from '../../src/algorithms/schedule.js';
import { range } from '../helpers/placements.js';
import { prng } from '../helpers/prng.js';
import { thrown } from '../helpers/thrown.js';
import { simulate, type Transport } from './simulator.js';

const ALGORITHMS: GroupAllgatherAlgorithm[] = ['ring', 'recursive-doubling', 'bruck', 'neighbor-exchange', 'shm'];
/** The shared-memory engine id every case's group runs `shm` with (the other algorithms ignore it). */
const SHM_ID = 5;

/** Elements per rank block and segment, segments and transports every case is run with. */
const RUNS: { e: number; segments: number; transport: Transport }[] = [
  { e: 1, segments: 1, transport: 'eager' },
  { e: 1, segments: 1, transport: 'rendezvous' },
  { e: 2, segments: 2, transport: 'rendezvous' },
  { e: 3, segments: 1, transport: 'eager' },
];
/** Above 32 members (to keep the test quick): one run per transport. */
const LARGE_RUNS = [RUNS[1]!, { e: 2, segments: 2, transport: 'eager' as const }];

/** One allgather case: a group among `ranks` global ranks and what each position holds. */
interface Case {
  name: string;
  ranks: number;
  view: GroupView;
  holds: number[][];
}

/** Position i = rank i, holding its own block: the paper's setting. */
function own(n: number): Case {
  return { name: 'own blocks', ranks: n, view: { members: range(0, n - 1), level: 0 }, holds: range(0, n - 1).map((i) => [i]) };
}

/**
 * Members scattered over 2n + 3 ranks (not consecutive, not starting at 0), on level 2; 2n blocks
 * of arbitrary ranks dealt at random, so members hold none, one or several (as leaders higher up
 * a hierarchy do, or more unevenly), and some ranks' blocks are held by nobody.
 */
function scattered(n: number, seed: number): Case {
  const random = prng(seed * 1000 + n);
  const ranks = 2 * n + 3;
  const shuffled = range(0, ranks - 1).sort(() => random() - 0.5);
  const members = shuffled.slice(0, n).sort((a, b) => a - b);
  const holds: number[][] = members.map(() => []);
  for (const b of range(0, ranks - 1)
    .sort(() => random() - 0.5)
    .slice(0, 2 * n))
    holds[Math.floor(random() * n)]!.push(b);
  if (n > 1) holds[n - 1] = []; // at least one member holding nothing
  for (const h of holds) h.sort((a, b) => a - b);
  return { name: `scattered ${seed}`, ranks, view: { members, level: 2, label: 'test group' }, holds };
}

/** Every member's blocks: 2n + 1 ranks, position i holding the contiguous run it covers (a hierarchy with consecutive ranks). */
function leaders(n: number): Case {
  const holds: number[][] = [];
  let next = 0;
  for (let i = 0; i < n; i++) {
    const size = 1 + (i % 3) + (i === 0 ? 1 : 0);
    holds.push(range(next, next + size - 1));
    next += size;
  }
  const members = holds.map((h) => h[0]!);
  return { name: 'leaders of runs', ranks: next, view: { members, level: 1 }, holds };
}

const value = (rank: number, element: number, segment: number): string => `${rank}:${segment}:${element}`;

/** Simulates every member's steps together; the problems found. */
function problems(algorithm: GroupAllgatherAlgorithm, c: Case): string[] {
  const n = c.view.members.length;
  const positionOf = new Map(c.view.members.map((r, i) => [r, i]));
  const steps = c.view.members.map((_, me) => groupAllgatherSteps(algorithm, c.view, me, (i) => c.holds[i]!, { shmGroup: SHM_ID }));
  const kinds: number[] = algorithm === 'shm' ? [StepKind.ShmBcast] : [StepKind.Send, StepKind.Recv, StepKind.SendRecv];
  const schedules: Schedule[] = range(0, c.ranks - 1).map((r) => ({
    collective: 'allgather',
    root: 0,
    steps: positionOf.has(r) ? steps[positionOf.get(r)!]! : [],
  }));
  const union = c.holds.flat().sort((a, b) => a - b);
  const found: string[] = [];
  // every step moves one rank block, on the group's level, to or from a member
  steps.forEach((list, me) => {
    for (const s of list) {
      if (s.level !== c.view.level) found.push(`position ${me}: a step on level ${s.level}`);
      if (s.range?.of !== 0 || s.range.count !== 1) found.push(`position ${me}: range ${JSON.stringify(s.range)}`);
      if (s.kind === StepKind.SendRecv && s.range2?.count !== 1) found.push(`position ${me}: range2 ${JSON.stringify(s.range2)}`);
      if (!kinds.includes(s.kind)) found.push(`position ${me}: step kind ${s.kind}`);
      if (s.kind === StepKind.ShmBcast && s.group !== SHM_ID) found.push(`position ${me}: shm group ${s.group}`);
    }
    // each missing block arrives exactly once (a publication of another member is read)
    const mine = c.view.members[me];
    const receives = (s: Step): number[] =>
      s.kind === StepKind.Recv || (s.kind === StepKind.ShmBcast && s.peer !== mine) ? [s.range!.first] : s.kind === StepKind.SendRecv ? [s.range2!.first] : [];
    const received = list.flatMap(receives).sort((a, b) => a - b);
    const missing = union.filter((r) => !c.holds[me]!.includes(r));
    if (received.join(',') !== missing.join(',')) found.push(`position ${me} receives ${received.join(',')}, misses ${missing.join(',')}`);
  });
  for (const run of n > 32 ? LARGE_RUNS : RUNS) {
    const where = `e ${run.e} × ${run.segments} ${run.transport}`;
    const elements = c.ranks * run.e;
    const initial = (rank: number, element: number, segment: number): string | undefined => {
      const block = Math.floor(element / run.e);
      const me = positionOf.get(rank);
      return me !== undefined && c.holds[me]!.includes(block) ? value(block, element % run.e, segment) : undefined;
    };
    const shmGroups = new Map([[SHM_ID, c.view.members]]);
    const sim = simulate(schedules, { elements, segments: run.segments, transport: run.transport, rankBlockElements: run.e, initial, shmGroups });
    found.push(...sim.errors.map((e) => `${where}: ${e}`));
    if (!sim.finished) found.push(`${where}: stuck ${sim.stuck.map((s) => `${s.rank}@${s.step.kind}`).join(' ')}`);
    for (const [rank, me] of positionOf) {
      for (let s = 0; s < run.segments; s++) {
        for (const b of union) {
          for (let k = 0; k < run.e; k++) {
            const got = sim.buffers[rank]![s * elements + b * run.e + k];
            if (got !== value(b, k, s)) found.push(`${where}: position ${me} (rank ${rank}) block ${b} element ${k} segment ${s} holds ${got}`);
          }
        }
      }
    }
  }
  return found.map((p) => `n ${n}, ${c.name}: ${p}`);
}

describe('group allgather', () => {
  it.each(ALGORITHMS)(
    '%s: every member ends with every block, each missing block received once (n = 1…64; own, scattered and uneven holds; both transports, 1–3 elements per block, 1–2 segments)',
    (algorithm) => {
      const found: string[] = [];
      for (let n = 1; n <= 64; n++) {
        for (const c of [own(n), scattered(n, 1), scattered(n, 2), leaders(n)]) found.push(...problems(algorithm, c));
        if (found.length > 0) break;
      }
      expect(found.slice(0, 10)).toEqual([]);
    },
  );

  it('takes the number of rounds of each algorithm', () => {
    const rounds = (a: GroupAllgatherAlgorithm, n: number) =>
      Math.max(...range(0, n - 1).map((me) => groupAllgatherRounds(a, own(n).view, me, (i) => [i], { shmGroup: 0 }).length));
    for (let n = 2; n <= 40; n++) {
      const log = Math.ceil(Math.log2(n));
      const floorLog = Math.floor(Math.log2(n));
      expect(rounds('ring', n), `ring ${n}`).toBe(n - 1);
      expect(rounds('bruck', n), `bruck ${n}`).toBe(log);
      expect(rounds('recursive-doubling', n), `recursive-doubling ${n}`).toBe(2 ** floorLog === n ? floorLog : floorLog + 2);
      expect(rounds('neighbor-exchange', n), `neighbor-exchange ${n}`).toBe(n % 2 === 0 ? n / 2 : (n + 3) / 2);
      expect(rounds('shm', n), `shm ${n}`).toBe(n);
    }
  });

  const ex = (to: number, block: number, from: number, block2: number, level = 0): Step => ({
    kind: StepKind.SendRecv,
    peer: to,
    level,
    range: rankBlock(block),
    peer2: from,
    range2: { first: block2, count: 1 },
  });
  const send = (to: number, block: number, level = 0): Step => ({ kind: StepKind.Send, peer: to, level, range: rankBlock(block) });
  const recv = (from: number, block: number, level = 0): Step => ({ kind: StepKind.Recv, peer: from, level, range: rankBlock(block) });
  const view = (n: number): GroupView => own(n).view;
  const mine = (i: number) => [i];

  it('ring: forward what came in the round before, own block first', () => {
    expect(groupAllgatherSteps('ring', view(4), 1, mine)).toEqual([ex(2, 1, 0, 0), ex(2, 0, 0, 3), ex(2, 3, 0, 2)]);
  });

  it('pairs blocks while both sides have some, then sends (or receives) the rest, in ascending rank', () => {
    // members 10, 20, 30 holding {1, 2, 3}, {}, {4}: ring round 0 at 20 receives 1, 2, 3 and sends nothing
    const v: GroupView = { members: [10, 20, 30], level: 3 };
    const holds = (i: number) => [[1, 2, 3], [], [4]][i]!;
    expect(groupAllgatherSteps('ring', v, 1, holds)).toEqual([
      recv(10, 1, 3),
      recv(10, 2, 3),
      recv(10, 3, 3),
      ex(30, 1, 10, 4, 3),
      send(30, 2, 3),
      send(30, 3, 3),
    ]);
    expect(groupAllgatherSteps('ring', v, 0, holds)).toEqual([ex(20, 1, 30, 4, 3), send(20, 2, 3), send(20, 3, 3), send(20, 4, 3)]);
  });

  it('bruck: round k sends i … i + 2^k − 1 to i − 2^k, the last round only what the receiver lacks; no rotation', () => {
    // n = 5 at position 0: rounds send {0} → 4, {0, 1} → 3, {0} → 1 (c = 1)
    expect(groupAllgatherSteps('bruck', view(5), 0, mine)).toEqual([ex(4, 0, 1, 1), ex(3, 0, 2, 2), ex(3, 1, 2, 3), ex(1, 0, 4, 4)]);
  });

  it('recursive doubling over 6: (0, 1) and (2, 3) fold, four active positions double, the partners get it all back', () => {
    // active indices 0, 1, 2, 3 at positions 0, 2, 4, 5
    expect(groupAllgatherSteps('recursive-doubling', view(6), 1, mine)).toEqual([send(0, 1), ...[0, 2, 3, 4, 5].map((b) => recv(0, b))]);
    expect(groupAllgatherSteps('recursive-doubling', view(6), 0, mine)).toEqual([
      recv(1, 1),
      ex(2, 0, 2, 2),
      ex(2, 1, 2, 3),
      ex(4, 0, 4, 4),
      ex(4, 1, 4, 5),
      send(4, 2),
      send(4, 3),
      ...[0, 2, 3, 4, 5].map((b) => send(1, b)),
    ]);
    expect(groupAllgatherSteps('recursive-doubling', view(6), 5, mine)).toEqual([ex(4, 5, 4, 4), ex(2, 4, 2, 0), ex(2, 5, 2, 1), recv(2, 2), recv(2, 3)]);
  });

  it('neighbor exchange over 6: right, left, right, passing on the pair received last', () => {
    // position 2 (pair 1): 3, then 1 (receives pair 0), then 3 (sends pair 0, receives pair 2)
    expect(groupAllgatherSteps('neighbor-exchange', view(6), 2, mine)).toEqual([
      ex(3, 2, 3, 3),
      ex(1, 2, 1, 0),
      ex(1, 3, 1, 1),
      ex(3, 0, 3, 4),
      ex(3, 1, 3, 5),
    ]);
    // position 0 wraps to 5 in the left rounds
    expect(groupAllgatherSteps('neighbor-exchange', view(6), 0, mine)).toEqual([
      ex(1, 0, 1, 1),
      ex(5, 0, 5, 4),
      ex(5, 1, 5, 5),
      ex(1, 4, 1, 2),
      ex(1, 5, 1, 3),
    ]);
  });

  it('neighbor exchange over 5 (S2, odd): 4 hands its block to 3 and drops out, 0 … 3 run the even scheme, 3 sends 4 the rest', () => {
    expect(groupAllgatherSteps('neighbor-exchange', view(5), 4, mine)).toEqual([send(3, 4), ...[0, 1, 2, 3].map((b) => recv(3, b))]);
    expect(groupAllgatherSteps('neighbor-exchange', view(5), 3, mine)).toEqual([
      recv(4, 4),
      ex(2, 3, 2, 2),
      send(2, 4),
      ex(0, 2, 0, 0),
      ex(0, 3, 0, 1),
      send(0, 4),
      ...[0, 1, 2, 3].map((b) => send(4, b)),
    ]);
    expect(groupAllgatherSteps('neighbor-exchange', view(5), 0, mine)).toEqual([ex(1, 0, 1, 1), ex(3, 0, 3, 2), ex(3, 1, 3, 3), recv(3, 4)]);
  });

  it('shm: every member runs the same list, each position publishing its blocks in turn, ascending', () => {
    // members 10, 20, 30 holding {1, 2, 3}, {}, {4}, engine id 9
    const v: GroupView = { members: [10, 20, 30], level: 3, label: 'test group' };
    const holds = (i: number) => [[3, 1, 2], [], [4]][i]!;
    const pub = (source: number, block: number): Step => ({ kind: StepKind.ShmBcast, peer: source, level: 3, group: 9, range: rankBlock(block) });
    const list = [pub(10, 1), pub(10, 2), pub(10, 3), pub(30, 4)];
    for (const me of [0, 1, 2]) expect(groupAllgatherSteps('shm', v, me, holds, { shmGroup: 9 })).toEqual(list);
    // one round per position, the empty one included
    expect(groupAllgatherRounds('shm', v, 1, holds, { shmGroup: 9 })).toEqual([list.slice(0, 3), [], [list[3]]]);
  });

  it('shm through the simulator with publications that wait for every reader: members that publish out of turn deadlock, a reader of the wrong block is caught', () => {
    const members = [0, 1];
    const pub = (source: number, block: number): Step => ({ kind: StepKind.ShmBcast, peer: source, level: 0, group: 1, range: rankBlock(block) });
    const run = (lists: Step[][], transport: Transport) =>
      simulate(
        lists.map((steps) => ({ collective: 'allgather', root: 0, steps })),
        {
          elements: 2,
          rankBlockElements: 1,
          transport,
          shmGroups: new Map([[1, members]]),
          initial: (r, e) => (e === r ? `b${r}` : undefined),
        },
      );
    const good = run(
      [
        [pub(0, 0), pub(1, 1)],
        [pub(0, 0), pub(1, 1)],
      ],
      'rendezvous',
    );
    expect(good.errors).toEqual([]);
    expect(good.buffers).toEqual([
      ['b0', 'b1'],
      ['b0', 'b1'],
    ]);
    // each publishes first, then reads the other's: fine with buffering, a deadlock without
    const crossed = [
      [pub(0, 0), pub(1, 1)],
      [pub(1, 1), pub(0, 0)],
    ];
    expect(run(crossed, 'eager').finished).toBe(true);
    expect(run(crossed, 'rendezvous').finished).toBe(false);
    const wrong = run([[pub(0, 0)], [{ ...pub(0, 0), range: rankBlock(1) }]], 'eager');
    expect(wrong.errors.join('\n')).toMatch(/publishes blocks 0\+1\/0, the reader expects 1\+1\/0/);
  });

  it('one member: no steps', () => {
    for (const a of ALGORITHMS) expect(groupAllgatherSteps(a, { members: [7], level: 1 }, 0, () => [7, 8], { shmGroup: 1 })).toEqual([]);
  });

  it('rejects shm without an engine id, unknown algorithms, bad positions and blocks held twice', () => {
    expect(thrown(() => groupAllgatherSteps('shm', view(3), 0, mine), 'ECONFIG').message).toMatch(/not registered with the shared-memory engine/);
    thrown(() => groupAllgatherSteps('shm', view(1), 0, mine), 'ECONFIG');
    expect(groupAllgatherSteps('shm', view(3), 0, mine, { shmGroup: 0 })).toHaveLength(3);
    thrown(() => groupAllgatherSteps('binomial' as GroupAllgatherAlgorithm, view(3), 0, mine), 'ECONFIG');
    thrown(() => groupAllgatherSteps('ring', view(3), 3, mine), 'EINVAL');
    expect(thrown(() => groupAllgatherSteps('ring', view(3), 0, (i) => (i === 2 ? [1] : [i])), 'EINVAL').message).toMatch(
      /positions 1 and 2 both hold the block of rank 1/,
    );
    thrown(() => groupAllgatherSteps('ring', view(3), 0, (i) => [i - 0.5]), 'EINVAL');
  });
});

describe('average logical communication distance (S2)', () => {
  const close = (a: number, b: number) => Math.abs(a - b) < 1e-12;

  it('ring: 2 − 2/n for every n (n − 1 rounds of n − 1 messages at distance 1 and one at n − 1)', () => {
    expect(allgatherAlcd('ring', 4)).toBe(1.5);
    expect(allgatherAlcd('ring', 5)).toBe(1.6);
    for (let n = 2; n <= 64; n++) expect(close(allgatherAlcd('ring', n), 2 - 2 / n), `n ${n}`).toBe(true);
    expect(allgatherAlcd('ring', 1)).toBe(0);
  });

  it('neighbor exchange: 2 − 2/n when 4 divides n, else 2 − 4/n + 4/n² for even n; by hand for 4, 6 and odd 5', () => {
    // n = 4: round 0 four messages at 1; round 1 0↔3 at 3 twice, 1↔2 at 1 twice: 12 / 8
    expect(allgatherAlcd('neighbor-exchange', 4)).toBe(1.5);
    // n = 6: 6 at 1; 0↔5 twice at 5 and four at 1; 6 at 1: 26 / 18
    expect(close(allgatherAlcd('neighbor-exchange', 6), 26 / 18)).toBe(true);
    // n = 5: 4 → 3 (1), the scheme over 4 (12 over 8 messages), 3 → 4 (1): 14 / 10
    expect(close(allgatherAlcd('neighbor-exchange', 5), 1.4)).toBe(true);
    for (let n = 2; n <= 64; n += 2) {
      const expected = n % 4 === 0 ? 2 - 2 / n : 2 - 4 / n + 4 / n ** 2;
      expect(close(allgatherAlcd('neighbor-exchange', n), expected), `n ${n}`).toBe(true);
    }
  });

  it('recursive doubling: (n − 1)/log2 n for powers of two', () => {
    expect(allgatherAlcd('recursive-doubling', 4)).toBe(1.5);
    for (const n of [2, 4, 8, 16, 32, 64]) expect(close(allgatherAlcd('recursive-doubling', n), (n - 1) / Math.log2(n)), `n ${n}`).toBe(true);
  });

  it('bruck: Σ_k 2·2^k·(n − 2^k) / (n·⌈log2 n⌉), k < ⌈log2 n⌉; (4n − 6 + 2/n)/(3·log2 n) for powers of two', () => {
    expect(allgatherAlcd('bruck', 4)).toBe(1.75);
    for (let n = 2; n <= 64; n++) {
      const rounds = Math.ceil(Math.log2(n));
      let sum = 0;
      for (let k = 0; k < rounds; k++) sum += 2 * 2 ** k * (n - 2 ** k);
      expect(close(allgatherAlcd('bruck', n), sum / (n * rounds)), `n ${n}`).toBe(true);
    }
    for (const n of [4, 8, 16, 32]) expect(close(allgatherAlcd('bruck', n), (4 * n - 6 + 2 / n) / (3 * Math.log2(n))), `n ${n}`).toBe(true);
  });

  it('shm: a publication counts as a message from its source to every other member, (n + 1)/3 over own blocks', () => {
    expect(allgatherAlcd('shm', 1)).toBe(0);
    // n = 3: distances 1, 2 | 1, 1 | 2, 1 over 6 messages
    expect(close(allgatherAlcd('shm', 3), 8 / 6)).toBe(true);
    for (let n = 2; n <= 64; n++) {
      expect(close(allgatherAlcd('shm', n), (n + 1) / 3), `n ${n}`).toBe(true);
      expect(close(allgatherAlcd('shm', n, 'block'), (n + 1) / 3), `n ${n} per block`).toBe(true);
    }
    // per block: a source of two blocks sends each to every other member
    const v: GroupView = { members: [3, 50, 90], level: 0 };
    const rounds = v.members.map((_, me) => groupAllgatherRounds('shm', v, me, (i) => (i === 0 ? [3, 4] : [v.members[i]!]), { shmGroup: 2 }));
    expect(averageLogicalDistance(v, rounds)).toBe(8 / 6);
    expect(averageLogicalDistance(v, rounds, 'block')).toBe(11 / 8);
  });

  it("per block: every step counts, so neighbour exchange's two-block messages weigh double", () => {
    // n = 4: 4 single blocks at 1, then 1↔2 four blocks at 1 and 0↔3 four at 3: 20 / 12
    expect(close(allgatherAlcd('neighbor-exchange', 4, 'block'), 20 / 12)).toBe(true);
    expect(allgatherAlcd('ring', 8, 'block')).toBe(allgatherAlcd('ring', 8));
  });

  it('counts positions, not ranks, and one message per round and receiver', () => {
    const v: GroupView = { members: [3, 50, 90], level: 0 };
    const rounds = v.members.map((_, me) => groupAllgatherRounds('ring', v, me, (i) => [v.members[i]!, 100 + i]));
    // 2 rounds × 3 messages: 0→1, 1→2 at 1, 2→0 at 2
    expect(averageLogicalDistance(v, rounds)).toBe(4 / 3);
    expect(averageLogicalDistance(v, rounds, 'block')).toBe(4 / 3);
  });
});
