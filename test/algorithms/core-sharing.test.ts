import { describe, expect, it } from 'vitest';
import { coreBoundUs, groupCores, memberCores, someMachineShared, memberWorkCounts, workCounts, workUs } from '../../src/algorithms/core-sharing.js';
import { predictGroupAllgatherUs, predictGroupReduceUs, type LevelCosts } from '../../src/algorithms/cost-model.js';
import { exchangeLimitsOf, Selector } from '../../src/algorithms/selection.js';
import { validateConfig } from '../../src/config/load.js';
import { planGroups } from '../../src/groups/plan.js';
import { byCore } from '../helpers/placements.js';

/** core-sharing.ts: a group's work counted on its schedule, and the bound it puts on predictions where members share cores. */

const costs: LevelCosts = { link: { L: 2, os: 0.5, or: 0.25, g: 0.5, G: 0.001, Gx: 0.002 }, combineBytesPerUs: 1000 };

describe('work counts, by hand', () => {
  it('flat and binomial bcast of 4: 3 sends, 3 whole receives; flat reduce also combines 3 messages', () => {
    expect(workCounts('bcast', 'flat', 4)).toEqual({ sends: 3, receives: 3, receivedPerByte: 3, combinedPerByte: 0 });
    expect(workCounts('bcast', 'binomial', 4)).toEqual({ sends: 3, receives: 3, receivedPerByte: 3, combinedPerByte: 0 });
    expect(workCounts('reduce', 'flat', 4)).toEqual({ sends: 3, receives: 3, receivedPerByte: 3, combinedPerByte: 3 });
  });

  it('rabenseifner reduce of 4: halving exchanges 4 × (1/2 + 1/4) combined, then the gather 1/4 + 1/4 + 1/2 to the root', () => {
    const w = workCounts('reduce', 'rabenseifner', 4);
    expect(w.combinedPerByte).toBeCloseTo(3, 12);
    expect(w.receivedPerByte).toBeCloseTo(4, 12);
    expect(w.sends).toBe(8 + 3);
    expect(w.receives).toBe(8 + 3);
  });

  it('barriers of 4: dissemination 2 rounds × 4 exchanges (no release, as its formula); central counter and combining tree 3 up, 3 down', () => {
    expect(workCounts('barrier', 'dissemination', 4)).toMatchObject({ sends: 8, receives: 8 });
    expect(workCounts('barrier', 'central-counter', 4)).toMatchObject({ sends: 6, receives: 6 });
    expect(workCounts('barrier', { combiningTree: 2 }, 4)).toMatchObject({ sends: 6, receives: 6 });
  });

  it('ring allgather of 4: 3 rounds × 4 exchanges of one block; the S0 shm bcast: one copy in, n − 1 wake-ups and copies out', () => {
    expect(workCounts('allgather', 'ring', 4)).toEqual({ sends: 12, receives: 12, receivedPerByte: 12, combinedPerByte: 0 });
    expect(workCounts('bcast', 'shm', 4)).toEqual({ sends: 1, receives: 3, receivedPerByte: 4, combinedPerByte: 0 });
  });

  it('ring reduce-scatter of 4: 3 rounds × 4 exchanges of one share, each combined', () => {
    expect(workCounts('reduce-scatter', 'ring', 4)).toEqual({ sends: 12, receives: 12, receivedPerByte: 12, combinedPerByte: 12 });
    for (const w of memberWorkCounts('reduce-scatter', 'ring', 4)) expect(w).toEqual({ sends: 3, receives: 3, receivedPerByte: 3, combinedPerByte: 3 });
    // recursive halving of 4: the same 3 shares each, in 2 rounds; of 3: the fold's 3 shares to position 1, and its share back
    expect(workCounts('reduce-scatter', 'recursive-halving', 4)).toEqual({ sends: 12, receives: 12, receivedPerByte: 12, combinedPerByte: 12 });
    expect(memberWorkCounts('reduce-scatter', 'recursive-halving', 3)[0]).toEqual({ sends: 3, receives: 1, receivedPerByte: 1, combinedPerByte: 0 });
  });

  it('a group of one does no work', () => {
    expect(workUs('allreduce', 'rabenseifner', 1, 1 << 20, costs)).toBe(0);
  });
});

describe('the bound', () => {
  it('prices the counts on the link: flat reduce of 4, 1000 bytes = 3·0.5 + 3·(0.25 + 2) + 1000·(3·0.001 + 3/1000)', () => {
    expect(workUs('reduce', 'flat', 4, 1000, costs)).toBeCloseTo(1.5 + 6.75 + 6, 12);
  });

  it('applies only when the members outnumber their cores, and then is the work shared among the cores when that exceeds the span', () => {
    const span = predictGroupReduceUs('flat', 4, 1000, costs);
    expect(coreBoundUs(span, 'reduce', 'flat', 4, 1000, costs, 4)).toBe(span);
    expect(coreBoundUs(span, 'reduce', 'flat', 4, 1000, costs, Infinity)).toBe(span);
    expect(coreBoundUs(span, 'reduce', 'flat', 4, 1000, costs, 1)).toBeCloseTo(Math.max(span, 14.25), 12);
    expect(coreBoundUs(1e6, 'reduce', 'flat', 4, 1000, costs, 1)).toBe(1e6);
  });

  it('counts the distinct CPUs of the members per host; a member with unknown CPUs leaves the group unbounded', () => {
    const cpus = [
      { machine: 'a', cpus: [0] },
      { machine: 'a', cpus: [1] },
      { machine: 'a', cpus: [0] },
      { machine: 'b', cpus: [0] },
      { machine: 'a', cpus: [] },
    ];
    expect(groupCores([0, 2], cpus)).toBe(1);
    expect(groupCores([0, 1, 2], cpus)).toBe(2);
    expect(groupCores([0, 3], cpus)).toBe(2);
    expect(groupCores([0, 4], cpus)).toBe(Infinity);
    // Each member's one CPU as an index (same host and CPU, same index); none unless every member has exactly one.
    expect(memberCores([0, 1, 2, 3], cpus)).toEqual([0, 1, 0, 2]);
    expect(memberCores([0, 4], cpus)).toBeUndefined();
    expect(
      memberCores(
        [0, 1],
        [
          { machine: 'a', cpus: [0] },
          { machine: 'a', cpus: [0, 1] },
        ],
      ),
    ).toBeUndefined();
  });

  it("counts each member's share: the flat reduce's root receives and combines all three, the others send once", () => {
    const [root, ...others] = memberWorkCounts('reduce', 'flat', 4);
    expect(root).toEqual({ sends: 0, receives: 3, receivedPerByte: 3, combinedPerByte: 3 });
    for (const w of others) expect(w).toEqual({ sends: 1, receives: 0, receivedPerByte: 0, combinedPerByte: 0 });
    // The S0 bcast: the source copies in, each reader is woken and copies out.
    expect(memberWorkCounts('bcast', 'shm', 3)).toEqual([
      { sends: 1, receives: 0, receivedPerByte: 1, combinedPerByte: 0 },
      { sends: 0, receives: 1, receivedPerByte: 1, combinedPerByte: 0 },
      { sends: 0, receives: 1, receivedPerByte: 1, combinedPerByte: 0 },
    ]);
  });

  it("with members bound to one core each, is no less than the most loaded core's work: the root's core carries the flat reduce", () => {
    // 4 members on 2 cores, root and member 2 on core 0: core 0 does 3 receives with their
    // combining and one send, core 1 two sends.
    const bytes = 1000;
    const rootCore = 3 * (0.25 + 2) + bytes * (3 * 0.001 + 3 / 1000) + 0.5;
    expect(coreBoundUs(0, 'reduce', 'flat', 4, bytes, costs, 2, [0, 1, 0, 1])).toBeCloseTo(rootCore, 12);
    expect(rootCore).toBeGreaterThan(workUs('reduce', 'flat', 4, bytes, costs) / 2);
    // Recursive doubling's allgather loads both cores alike: the average.
    const ring = workUs('allgather', 'recursive-doubling', 4, bytes, costs);
    expect(coreBoundUs(0, 'allgather', 'recursive-doubling', 4, bytes, costs, 2, [0, 1, 0, 1])).toBeCloseTo(ring / 2, 12);
    // Without the members' cores: the average only.
    expect(coreBoundUs(0, 'reduce', 'flat', 4, bytes, costs, 2)).toBeCloseTo(workUs('reduce', 'flat', 4, bytes, costs) / 2, 12);
  });
});

describe('the Selector with ranks sharing cores', () => {
  // One node of 8 ranks in 2 groups of 4 (2 sockets of 4 cores), every rank of a socket bound to one CPU: 4 members per core.
  const plan = planGroups(byCore(['a'], 8, 4));
  const socket = plan.groups.get('socket' as never)![0]!;
  const config = validateConfig({});
  const shared = new Selector(config, plan, exchangeLimitsOf(Infinity), {
    cores: 2,
    oversubscribed: true,
    cpus: plan.placements.map((p) => ({ machine: 'a', cpus: [p.rank < 4 ? 0 : 1] })),
  });
  const ownCores = new Selector(config, plan, exchangeLimitsOf(Infinity), { cores: 2, oversubscribed: true });

  it("predicts no group below its work on its one core, and the choice follows: a 4 MiB reduce's exchanges give way to a tree", () => {
    expect(socket.members).toEqual([0, 1, 2, 3]);
    expect(shared.cores(socket)).toBe(1);
    expect(ownCores.cores(socket)).toBe(Infinity);
    const bytes = 4 << 20;
    const costs = { link: shared.link(socket).link, combineBytesPerUs: config.model.combineBytesPerUs };
    for (const c of shared.pick('reduce', socket, bytes).all) {
      const a = c.algorithm === 'knomial:4' ? { knomial: 4 } : c.algorithm;
      expect(c.us, c.algorithm).toBeGreaterThanOrEqual(workUs('reduce', a as never, 4, bytes, costs) - 1e-9);
    }
    expect(ownCores.pick('reduce', socket, bytes).algorithm).toBe('rabenseifner');
    expect(shared.pick('reduce', socket, bytes).algorithm).not.toBe('rabenseifner');
  });

  it('breaks a tie at the work bound by the shorter chain: recursive doubling (2 rounds) before ring (3), both 12 messages of one block', () => {
    // 4 emulated nodes of one rank on one host of 2 cores (rank r on CPU r mod 2): the world group spans the nodes.
    const four = planGroups(byCore(['a', 'b', 'c', 'd'], 1, 1));
    const world = [...four.groups.values()].flat().find((g) => g.members.length === 4)!;
    const turns = new Selector(config, four, exchangeLimitsOf(Infinity), {
      cores: 2,
      oversubscribed: true,
      cpus: four.placements.map((p) => ({ machine: 'h', cpus: [p.rank % 2] })),
    });
    const bytes = 64;
    const costs = { link: turns.link(world).link, combineBytesPerUs: config.model.combineBytesPerUs };
    const { all, algorithm } = turns.pick('allgather', world, bytes);
    const us = (name: string) => all.find((c) => c.algorithm === name)!.us;
    expect(us('ring')).toBeCloseTo(us('recursive-doubling'), 9);
    expect(predictGroupAllgatherUs('recursive-doubling', 4, bytes, costs)).toBeLessThan(predictGroupAllgatherUs('ring', 4, bytes, costs));
    expect(algorithm).toBe('recursive-doubling');
  });

  it('barriers: every candidate bounded by its work; dissemination (n·log2 n messages) loses to a tree there', () => {
    const b = shared.barrierOf(socket);
    expect(b.all.map((c) => c.algorithm)).toContain('dissemination');
    expect(b.algorithm).not.toBe('dissemination');
  });
});

describe('hosts that share cores: the exchange limit between them', () => {
  const config = validateConfig({});
  const four = planGroups(byCore(['a', 'b', 'c', 'd'], 1, 1));
  const world = [...four.groups.values()].flat().find((g) => g.members.length === 4)!;
  const limits = { apart: Infinity, mixed: 65472 };
  const selector = (cpus: { machine: string; cpus: number[] }[]) => new Selector(config, four, limits, { cores: 2, oversubscribed: false, cpus });

  it('someMachineShared: a machine whose ranks outnumber the CPUs they may run on, whichever hosts they are', () => {
    expect(someMachineShared([0, 1, 2, 3].map((r) => ({ machine: `m${r >> 1}`, cpus: [r % 2] })))).toBe(false);
    expect(someMachineShared([0, 1, 2].map(() => ({ machine: 'm', cpus: [0, 1] })))).toBe(true);
    expect(someMachineShared([0, 1, 2].map((r) => ({ machine: 'm', cpus: [r % 2] })))).toBe(true);
    expect(someMachineShared([0, 1, 2].map(() => ({ machine: 'm', cpus: [] })))).toBe(false);
  });

  it("one rank per node: apart on machines of their own, mixed where the nodes share one machine's cores", () => {
    expect(selector(four.placements.map((p) => ({ machine: p.node, cpus: [0] }))).exchangeLimit(world)).toBe(Infinity);
    expect(selector(four.placements.map((p) => ({ machine: 'h', cpus: [p.rank % 2] }))).exchangeLimit(world)).toBe(65472);
  });
});
