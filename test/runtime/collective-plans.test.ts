import { describe, expect, it } from 'vitest';
import { formatAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { preservesRankOrder } from '../../src/algorithms/hierarchical.js';
import { validateConfig } from '../../src/config/load.js';
import type { TopocollConfigInput } from '../../src/config/schema.js';
import { planGroups, type Group } from '../../src/groups/plan.js';
import type { RankPlacement } from '../../src/topology/types.js';
import { decodeSteps, StepKind, type Step } from '../../src/algorithms/schedule.js';
import {
  EVERY_RANK_COMBINES_MAX_RANKS,
  exchangeLimitsOf,
  isNodeLocal,
  MAX_SIZE_BUCKET,
  shmAllreduceProtocol,
  sizeRuns,
  type Choice,
} from '../../src/algorithms/selection.js';
import { CollectivePlans, rankOrderedPlan, SHM_ALLREDUCE_MAX_BYTES } from '../../src/runtime/collective-plans.js';
import { thrown } from '../helpers/thrown.js';
import { byCore, coreLocality, range } from '../helpers/placements.js';

/** The choices of collective-plans.ts as plain functions of configuration and plan. */
const config = (input: TopocollConfigInput = {}) => validateConfig(input);
/** The every-rank area allgather's largest block by default (routing.sharedArea, from the machine profile). */
const SHM_ALLGATHER_EVERY_RANK_MAX_BYTES = config().routing.sharedArea.everyRankAllgatherMaxBytes;
// 4 nodes × 4 ranks, 2 sockets of 2 cores: socket, node and world levels.
const placements = byCore(['a', 'b', 'c', 'd'], 4, 2);
const plan = planGroups(placements);
const groupAt = (level: string): Group => plan.groups.get(level as never)![0]!;

describe('CollectivePlans and the Selector', () => {
  /** Rank 0's plans over the 4 × 4 job (several nodes: no one-node shared area), and what it registered. */
  function plans4x4(input: TopocollConfigInput = {}, eagerBytes = 65536) {
    const registered: Int32Array[] = [];
    const plans = new CollectivePlans({
      plan,
      orderedPlan: plan,
      rank: 0,
      config: config(input),
      shmGroups: new Map(
        [...plan.groups.values()]
          .flat()
          .filter((g) => isNodeLocal(plan, g))
          .map((g, i) => [g, i]),
      ),
      exchangeLimits: exchangeLimitsOf(eagerBytes),
      oversubscribed: false,
      cores: 4,
      register: (encoded) => registered.push(encoded) - 1,
    });
    return { plans, registered };
  }
  const groups = [...plan.groups.values()].flat();
  /** Two choices that build the same schedules: every group's algorithms, the allreduce's shape, the segments. */
  const sameChoice = (a: Choice, b: Choice): boolean =>
    groups.every(
      (g) =>
        formatAlgorithm(a.bcast(g)) === formatAlgorithm(b.bcast(g)) &&
        formatAlgorithm(a.reduce(g)) === formatAlgorithm(b.reduce(g)) &&
        a.allgather(g) === b.allgather(g),
    ) && JSON.stringify([a.allreduce, a.segmentBytes]) === JSON.stringify([b.allreduce, b.segmentBytes]);
  const buckets = range(0, MAX_SIZE_BUCKET);

  it('shares schedules between size buckets with equal choices: one registration per distinct choice', () => {
    const { plans, registered } = plans4x4();
    const ids = buckets.map((b) => plans.bcast(0, 2 ** b, 1).bcast);
    const choices = buckets.map((b) => plans.selector.chooseBucket(b));
    for (const i of buckets) {
      for (const j of buckets) expect(ids[i] === ids[j]).toBe(sameChoice(choices[i]!, choices[j]!));
    }
    const distinct = new Set(ids).size;
    expect(registered.length).toBe(distinct);
    expect(distinct).toBeGreaterThan(1);
    expect(distinct).toBeLessThan(buckets.length);
    // found again without registering, for any size of the bucket (2^(b−1) + 1 … 2^b)
    for (const b of buckets.slice(2)) expect(plans.bcast(0, 2 ** (b - 1) + 1, 1).bcast).toBe(ids[b]);
    expect(registered.length).toBe(distinct);
    // allreduce: its two phases per distinct choice
    const before = registered.length;
    const allreduceIds = buckets.map((b) => {
      const call = plans.allreduce(2 ** b, 4, true);
      return `${call.reduce}/${call.bcast}`;
    });
    expect(registered.length - before).toBe(2 * new Set(allreduceIds).size);
    for (const i of buckets) for (const j of buckets) if (ids[i] === ids[j]) expect(allreduceIds[i]).toBe(allreduceIds[j]);
  });

  it("gives each call its choice's segment, in elements", () => {
    const { plans } = plans4x4();
    for (const b of [0, 10, 16, 20, 24, 26]) {
      const bytes = 2 ** b;
      const c = plans.selector.choose(bytes);
      const elements = (seg: number) => (seg === 0 ? 0 : Math.max(1, Math.floor(seg / 4)));
      expect(plans.bcast(1, bytes, 4).segment).toBe(elements(c.segmentBytes.bcast));
      expect(plans.reduce(1, bytes, 4, true).segment).toBe(elements(c.segmentBytes.reduce));
      expect(plans.allreduce(bytes, 4, true).segment).toBe(elements(c.segmentBytes.allreduce));
      const a = plans.allgather(bytes, 4, bytes / 16);
      expect([a.segment, a.bcastSegment]).toEqual([elements(c.segmentBytes.allgather), elements(c.segmentBytes.allgatherBcast)]);
    }
  });

  it("describes a group's algorithms as runs of sizes, as the Selector chooses them", () => {
    const { plans } = plans4x4();
    for (const g of groups) {
      const d = plans.describe(g);
      for (const [runs, pick] of [
        [d.bcast, (c: Choice) => formatAlgorithm(c.bcast(g))],
        [d.reduce, (c: Choice) => formatAlgorithm(c.reduce(g))],
        [d.allgather, (c: Choice) => c.allgather(g)],
      ] as const) {
        expect(runs[runs.length - 1]!.upToBytes).toBeNull();
        for (let i = 1; i < runs.length; i++) expect(runs[i]!.algorithm).not.toBe(runs[i - 1]!.algorithm);
        // every bucket's algorithm is its run's: the first run whose bound holds it
        for (const b of buckets) {
          const run = runs.find((r) => r.upToBytes === null || 2 ** b <= r.upToBytes)!;
          expect(run.algorithm).toBe(pick(plans.selector.chooseBucket(b)));
        }
      }
      expect(d.barrier).toBe(formatAlgorithm(plans.selector.chooseBucket(0).barrier(g)));
    }
    // configured: one run
    const fixed = plans4x4({ bcast: { levels: { world: 'knomial:4' } } }).plans.describe(groupAt('world'));
    expect(fixed.bcast).toEqual([{ upToBytes: null, algorithm: 'knomial:4' }]);
    expect(plans.explain('reduce', 3000)).toEqual(plans.selector.explain('reduce', 3000));
    for (const collective of ['reduce-scatter', 'scan', 'exscan'] as const)
      expect(plans.explain(collective, 3000)).toEqual(plans.selector.explain(collective, 3000));
  });

  it('takes the configured algorithm of a level, and refuses shm on a level that spans nodes (ECONFIG naming it) before any schedule exists', () => {
    const { plans } = plans4x4({ bcast: { levels: { node: 'knomial:4' } }, reduce: { levels: { socket: 'flat' } } });
    for (const b of buckets) {
      expect(formatAlgorithm(plans.selector.chooseBucket(b).bcast(groupAt('node')))).toBe('knomial:4');
      expect(formatAlgorithm(plans.selector.chooseBucket(b).reduce(groupAt('socket')))).toBe('flat');
    }
    expect(thrown(() => plans4x4({ reduce: { levels: { world: 'shm' } } }), 'ECONFIG').message).toMatch(
      /reduce\.levels\.world: shm works only inside a node, and the world group world spans nodes/,
    );
  });

  it('knows which groups are node-local', () => {
    expect(isNodeLocal(plan, groupAt('node'))).toBe(true);
    expect(isNodeLocal(plan, groupAt('world'))).toBe(false);
  });
});

/** Rank 0's CollectivePlans for a job on `placed`, and the schedules it registered (by id). */
function rankZeroPlans(placed: RankPlacement[], input: TopocollConfigInput, oversubscribed: boolean): { plans: CollectivePlans; registered: Int32Array[] } {
  const p = planGroups(placed);
  const perNode = placed.filter((x) => x.node === placed[0]!.node).length;
  const registered: Int32Array[] = [];
  const plans = new CollectivePlans({
    plan: p,
    orderedPlan: p,
    rank: 0,
    config: config(input),
    shmGroups: new Map(
      [...p.groups.values()]
        .flat()
        .filter((g) => isNodeLocal(p, g))
        .map((g, i) => [g, i]),
    ),
    exchangeLimits: exchangeLimitsOf(Infinity),
    oversubscribed,
    // a core per rank, or half as many
    cores: oversubscribed ? Math.max(1, perNode >> 1) : perNode,
    register: (encoded) => registered.push(encoded) - 1,
  });
  return { plans, registered };
}

describe('the one-node shared-memory allreduce', () => {
  /** The schedules rank 0 registers for allreduces of each size, decoded. */
  function allreduceSteps(
    placed: RankPlacement[],
    input: TopocollConfigInput,
    sizes: number[],
    oversubscribed = false,
  ): { shm: CollectivePlans['shmAllreduce']; steps: Step[][] } {
    const { plans, registered } = rankZeroPlans(placed, input, oversubscribed);
    const steps = sizes.map((bytes) => {
      const call = plans.allreduce(bytes, 4, true);
      return [...decodeSteps(registered[call.reduce]!), ...decodeSteps(registered[call.bcast]!)];
    });
    return { shm: plans.shmAllreduce, steps };
  }
  const oneNode = byCore(['a'], 4, 2);
  const everyRank = { kind: StepKind.ShmAllreduce, peer: -1, level: 0, everyRankCombines: true };
  const lastArrival = { kind: StepKind.ShmAllreduce, peer: -1, level: 0 };

  it('takes allreduces of up to 8 KiB in a job on one node: one ShmAllreduce step, nothing else', () => {
    const { shm, steps } = allreduceSteps(oneNode, {}, [0, 4, SHM_ALLREDUCE_MAX_BYTES]);
    expect(shm).toBe('every-rank');
    for (const s of steps) expect(s).toEqual([everyRank]);
  });

  it('has every rank combine while each has a core, up to 8 ranks; else the last to arrive', () => {
    expect(allreduceSteps(oneNode, {}, [4], true)).toEqual({ shm: 'last-arrival', steps: [[lastArrival]] });
    expect(allreduceSteps(byCore(['a'], 8, 8), {}, [4]).shm).toBe('every-rank');
    expect(allreduceSteps(byCore(['a'], 9, 9), {}, [4]).shm).toBe('last-arrival');
    expect(shmAllreduceProtocol(true, EVERY_RANK_COMBINES_MAX_RANKS, false)).toBe('every-rank');
    expect(shmAllreduceProtocol(true, EVERY_RANK_COMBINES_MAX_RANKS + 1, false)).toBe('last-arrival');
  });

  it('takes the protocol the configuration names, whatever the cores', () => {
    expect(allreduceSteps(oneNode, { allreduce: { shm: 'every-rank' } }, [4], true)).toEqual({ shm: 'every-rank', steps: [[everyRank]] });
    expect(allreduceSteps(byCore(['a'], 2, 2), { allreduce: { shm: 'last-arrival' } }, [4])).toEqual({ shm: 'last-arrival', steps: [[lastArrival]] });
  });

  it('leaves larger messages, jobs on several nodes, one-rank jobs and allreduce.shm: false to the schedules', () => {
    const larger = allreduceSteps(oneNode, {}, [SHM_ALLREDUCE_MAX_BYTES + 4]).steps[0]!;
    expect(larger.some((s) => s.kind === StepKind.ShmAllreduce)).toBe(false);
    expect(larger.length).toBeGreaterThan(0);
    for (const [placed, input] of [
      [placements, {}],
      [byCore(['a'], 1, 2), {}],
      [oneNode, { allreduce: { shm: false } }],
    ] as [RankPlacement[], TopocollConfigInput][]) {
      const { shm, steps } = allreduceSteps(placed, input, [4]);
      expect(shm).toBe(false);
      expect(steps[0]!.some((s) => s.kind === StepKind.ShmAllreduce)).toBe(false);
    }
  });
});

describe('the one-node shared area, whole calls: gather, scatter, reduce-scatter, alltoall, scans', () => {
  const oneNode = byCore(['a'], 4, 4);
  /** The first phase's steps and the second phase's id rank 0 registers for each collective of `bytes` in all (alltoall: bytes / 4 per block). */
  function areaSteps(placed: RankPlacement[], input: TopocollConfigInput, bytes: number, root: number, oversubscribed = false) {
    const { plans, registered } = rankZeroPlans(placed, input, oversubscribed);
    const steps = (id: number) => (id >= 0 ? decodeSteps(registered[id]!) : []);
    const area = (id: number) => steps(id).length === 1 && steps(id)[0]!.kind === StepKind.ShmAreaCall;
    const gather = plans.rooted('gather', root, bytes, 4).gather;
    const scatter = plans.rooted('scatter', root, bytes, 4).gather;
    const reduceScatter = plans.reduceScatter(bytes, 4, false);
    const alltoall = plans.alltoall(bytes / 4, false).gather;
    const alltoallv = plans.alltoall(bytes / 4, true).gather;
    const scan = plans.scan(bytes, 4).reduce;
    return {
      plans,
      steps,
      ids: { gather, scatter, reduceScatter: reduceScatter.gather, alltoall, scan },
      taken: [gather, scatter, reduceScatter.gather, alltoall, alltoallv, scan].map(area),
      second: steps(reduceScatter.bcast),
    };
  }

  it('takes calls of up to 8 KiB in all: one ShmAreaCall step naming the root (0 for the unrooted), any operator, never alltoallv', () => {
    for (const root of [0, 3]) {
      for (const bytes of [0, 16, SHM_ALLREDUCE_MAX_BYTES]) {
        const { steps, ids, taken, second } = areaSteps(oneNode, {}, bytes, root);
        expect(taken).toEqual([true, true, true, true, false, true]);
        expect(steps(ids.gather)).toEqual([{ kind: StepKind.ShmAreaCall, peer: root, level: 0 }]);
        expect(steps(ids.scatter)).toEqual([{ kind: StepKind.ShmAreaCall, peer: root, level: 0 }]);
        for (const id of [ids.reduceScatter, ids.alltoall, ids.scan]) expect(steps(id)).toEqual([{ kind: StepKind.ShmAreaCall, peer: 0, level: 0 }]);
        // The reduce-scatter's second phase: nothing (the addon needs one).
        expect(second).toEqual([]);
      }
    }
    const { plans } = areaSteps(oneNode, {}, 8, 0);
    // By the whole vector (alltoall: one rank's send), as explain() takes it.
    for (const collective of ['gather', 'scatter', 'reduce-scatter', 'alltoall', 'scan', 'exscan'] as const) {
      expect(plans.takesArea(collective, SHM_ALLREDUCE_MAX_BYTES)).toBe(true);
      expect(plans.takesArea(collective, SHM_ALLREDUCE_MAX_BYTES + 4)).toBe(false);
    }
  });

  it('leaves larger calls, several nodes, more ranks than cores and configured algorithms to their schedules', () => {
    const none = [false, false, false, false, false, false];
    expect(areaSteps(oneNode, {}, SHM_ALLREDUCE_MAX_BYTES + 16, 0).taken).toEqual(none);
    expect(areaSteps(placements, {}, 16, 0).taken).toEqual(none);
    expect(areaSteps(oneNode, {}, 16, 0, true).taken).toEqual(none);
    expect(areaSteps(oneNode, { allreduce: { shm: 'every-rank' } }, 16, 0, true).taken).toEqual([true, true, true, true, false, true]);
    expect(areaSteps(oneNode, { allreduce: { shm: false } }, 16, 0).taken).toEqual(none);
    expect(areaSteps(oneNode, { gather: { levels: { node: 'flat' } } }, 16, 0).taken).toEqual([false, true, true, true, false, true]);
    expect(areaSteps(oneNode, { scatter: { levels: { node: 'binomial' } } }, 16, 0).taken).toEqual([true, false, false, true, false, true]);
    expect(areaSteps(oneNode, { reduceScatter: { top: 'ring' } }, 16, 0).taken).toEqual([true, true, false, true, false, true]);
    expect(areaSteps(oneNode, { reduce: { levels: { node: 'flat' } } }, 16, 0).taken).toEqual([true, true, false, true, false, true]);
    expect(areaSteps(oneNode, { alltoall: { algorithm: 'bruck' } }, 16, 0).taken).toEqual([true, true, true, false, false, true]);
  });
});

describe('the one-node shared area, one way: small bcasts and reduces', () => {
  /** The steps rank 0 registers for a bcast and a reduce of `bytes` from/to `root`, decoded. */
  function oneWaySteps(placed: RankPlacement[], input: TopocollConfigInput, bytes: number, root: number, oversubscribed = false) {
    const { plans, registered } = rankZeroPlans(placed, input, oversubscribed);
    const b = plans.bcast(root, bytes, 4);
    const bcast = { reduce: b.reduce, steps: decodeSteps(registered[b.bcast]!), segment: b.segment };
    const r = plans.reduce(root, bytes, 4, false);
    const reduce = { bcast: r.bcast, steps: decodeSteps(registered[r.reduce]!), segment: r.segment };
    return { bcast, reduce, flags: [plans.shmBcast, plans.shmReduce] };
  }
  const oneNode = byCore(['a'], 4, 4);

  it('takes bcasts and reduces of up to 8 KiB: one step naming the root, one schedule per root', () => {
    for (const root of [0, 3]) {
      for (const bytes of [0, 4, SHM_ALLREDUCE_MAX_BYTES]) {
        const { bcast, reduce, flags } = oneWaySteps(oneNode, {}, bytes, root);
        expect(flags).toEqual([true, true]);
        expect(bcast).toEqual({ reduce: -1, steps: [{ kind: StepKind.ShmAreaBcast, peer: root, level: 0 }], segment: 0 });
        expect(reduce).toEqual({ bcast: -1, steps: [{ kind: StepKind.ShmAreaReduce, peer: root, level: 0 }], segment: 0 });
      }
    }
    const { plans, registered } = rankZeroPlans(oneNode, {}, false);
    const first = plans.bcast(2, 8, 4).bcast;
    expect(plans.bcast(2, 16, 4).bcast).toBe(first);
    expect(plans.bcast(1, 8, 4).bcast).not.toBe(first);
    expect(registered.length).toBe(2);
  });

  it('follows the every-rank protocol: forced by allreduce.shm it applies with more ranks than cores too', () => {
    expect(oneWaySteps(oneNode, {}, 8, 0, true).flags).toEqual([false, false]);
    expect(oneWaySteps(oneNode, { allreduce: { shm: 'every-rank' } }, 8, 0, true).flags).toEqual([true, true]);
    expect(oneWaySteps(oneNode, { allreduce: { shm: 'last-arrival' } }, 8, 0).flags).toEqual([false, false]);
  });

  it("shows the area in each level's bcast and reduce runs (levels()) up to 8 KiB, and only where the calls take it", () => {
    const runs = (placed: RankPlacement[], input: TopocollConfigInput, oversubscribed = false) => {
      const { plans } = rankZeroPlans(placed, input, oversubscribed);
      const group = planGroups(placed).chain(0).at(-1)!;
      const d = plans.describe(group);
      const groups = {
        bcast: sizeRuns(plans.selector, (c) => formatAlgorithm(c.bcast(group))),
        reduce: sizeRuns(plans.selector, (c) => formatAlgorithm(c.reduce(group))),
      };
      return { d, groups, flags: [plans.shmBcast, plans.shmReduce] };
    };
    const { d, groups } = runs(oneNode, {});
    for (const collective of ['bcast', 'reduce'] as const) {
      expect(d[collective][0]).toEqual({ upToBytes: SHM_ALLREDUCE_MAX_BYTES, algorithm: 'area' });
      expect(d[collective].slice(1)).toEqual(groups[collective].filter((r) => r.upToBytes === null || r.upToBytes > SHM_ALLREDUCE_MAX_BYTES));
      expect(d[collective].at(-1)!.upToBytes).toBeNull();
    }
    // Where a call does not take the area, neither do its runs.
    for (const [placed, input, oversubscribed] of [
      [placements, {}, false],
      [oneNode, {}, true],
      [oneNode, { bcast: { shm: false } }, false],
      [oneNode, { reduce: { levels: { node: 'flat' } } }, false],
    ] as [RankPlacement[], TopocollConfigInput, boolean][]) {
      const r = runs(placed, input, oversubscribed);
      expect(r.d.bcast[0]!.algorithm === 'area').toBe(r.flags[0]);
      expect(r.d.reduce[0]!.algorithm === 'area').toBe(r.flags[1]);
      if (!r.flags[0]) expect(r.d.bcast).toEqual(r.groups.bcast);
      if (!r.flags[1]) expect(r.d.reduce).toEqual(r.groups.reduce);
    }
  });

  it('leaves larger messages, several nodes, configured levels and bcast.shm / reduce.shm: false to the levels', () => {
    const larger = oneWaySteps(oneNode, {}, SHM_ALLREDUCE_MAX_BYTES + 4, 0);
    expect(larger.bcast.steps.some((s) => s.kind === StepKind.ShmAreaBcast)).toBe(false);
    expect(larger.reduce.steps.some((s) => s.kind === StepKind.ShmAreaReduce)).toBe(false);
    expect(oneWaySteps(placements, {}, 8, 0).flags).toEqual([false, false]);
    expect(oneWaySteps(oneNode, { bcast: { shm: false } }, 8, 0).flags).toEqual([false, true]);
    expect(oneWaySteps(oneNode, { reduce: { shm: false } }, 8, 0).flags).toEqual([true, false]);
    expect(oneWaySteps(oneNode, { bcast: { levels: { node: 'binomial' } }, reduce: { levels: { node: 'flat' } } }, 8, 0).flags).toEqual([false, false]);
    expect(oneWaySteps(oneNode, { allreduce: { shm: false } }, 8, 0).flags).toEqual([false, false]);
  });
});

describe('the one-node shared-memory allgather', () => {
  /** What rank 0 registers for allgathers of `block` bytes per rank, decoded: [gather steps, bcast steps]. */
  function allgatherSteps(
    placed: RankPlacement[],
    input: TopocollConfigInput,
    block: number,
    oversubscribed = false,
  ): { shm: CollectivePlans['shmAllgather']; gather: Step[]; bcast: Step[]; segment: number } {
    const { plans, registered } = rankZeroPlans(placed, input, oversubscribed);
    const call = plans.allgather(block * placed.length, 4, block);
    return {
      shm: plans.shmAllgather,
      gather: decodeSteps(registered[call.gather]!),
      bcast: decodeSteps(registered[call.bcast]!),
      segment: call.segment + call.bcastSegment,
    };
  }
  const oneNode = byCore(['a'], 4, 2);
  const everyRank = { kind: StepKind.ShmAllgather, peer: -1, level: 0, everyRankCombines: true };
  const lastArrival = { kind: StepKind.ShmAllgather, peer: -1, level: 0 };

  it('takes blocks of up to 4 KiB in a job on one node while ranks have cores: one ShmAllgather step, no bcast, whole columns', () => {
    for (const block of [0, 4, SHM_ALLGATHER_EVERY_RANK_MAX_BYTES]) {
      expect(allgatherSteps(oneNode, {}, block)).toEqual({ shm: 'every-rank', gather: [everyRank], bcast: [], segment: 0 });
    }
    // The total does not matter, only the largest block (allgatherv).
    expect(allgatherSteps(byCore(['a'], 8, 8), {}, SHM_ALLGATHER_EVERY_RANK_MAX_BYTES).gather).toEqual([everyRank]);
    const larger = allgatherSteps(oneNode, {}, SHM_ALLGATHER_EVERY_RANK_MAX_BYTES + 4);
    expect(larger.gather.some((s) => s.kind === StepKind.ShmAllgather)).toBe(false);
    expect(larger.gather.length).toBeGreaterThan(0);
  });

  it('takes every size with the last-arrival protocol (more ranks than cores, or configured)', () => {
    for (const block of [4, SHM_ALLGATHER_EVERY_RANK_MAX_BYTES + 4, 4 << 20]) {
      expect(allgatherSteps(oneNode, {}, block, true)).toEqual({ shm: 'last-arrival', gather: [lastArrival], bcast: [], segment: 0 });
      expect(allgatherSteps(oneNode, { allgather: { shm: 'last-arrival' } }, block).gather).toEqual([lastArrival]);
    }
  });

  it('picks its protocol as the allreduce does, or as allgather.shm names it', () => {
    expect(allgatherSteps(oneNode, { allgather: { shm: 'every-rank' } }, 4, true).gather).toEqual([everyRank]);
    expect(allgatherSteps(byCore(['a'], 9, 9), {}, 4).shm).toBe('last-arrival');
    // Its own setting: the allreduce's does not turn it off.
    expect(allgatherSteps(oneNode, { allreduce: { shm: false } }, 4).gather).toEqual([everyRank]);
  });

  it("shows the area in each level's allgather runs (levels()): up to 4 KiB per rank with every-rank, every size with last-arrival", () => {
    const runs = (placed: RankPlacement[], input: TopocollConfigInput, oversubscribed = false) => {
      const { plans } = rankZeroPlans(placed, input, oversubscribed);
      const group = planGroups(placed).chain(0).at(-1)!;
      return { described: plans.describe(group).allgather, groups: sizeRuns(plans.selector, (c) => c.allgather(group)) };
    };
    const { described, groups } = runs(oneNode, {});
    const area = SHM_ALLGATHER_EVERY_RANK_MAX_BYTES * oneNode.length;
    expect(described[0]).toEqual({ upToBytes: area, algorithm: 'area' });
    // Above it, the groups' own runs, unchanged (the one that straddles the bound starts after it).
    expect(described.slice(1)).toEqual(groups.filter((r) => r.upToBytes === null || r.upToBytes > area));
    expect(described.at(-1)!.upToBytes).toBeNull();
    expect(runs(oneNode, {}, true).described).toEqual([{ upToBytes: null, algorithm: 'area' }]);
    expect(runs(oneNode, { allgather: { shm: 'last-arrival' } }).described).toEqual([{ upToBytes: null, algorithm: 'area' }]);
    for (const [placed, input] of [
      [placements, {}],
      [oneNode, { allgather: { shm: false } }],
      [oneNode, { allgather: { levels: { node: 'ring' } } }],
    ] as [RankPlacement[], TopocollConfigInput][]) {
      const r = runs(placed, input);
      expect(r.described).toEqual(r.groups);
      expect(r.described.some((x) => x.algorithm === 'area')).toBe(false);
    }
  });

  it('plans the window allgather as one ShmWindowAllgather step with the area protocol of the job, on one node only', () => {
    for (const [oversubscribed, everyRankCombines] of [
      [false, true],
      [true, false],
    ] as const) {
      const { plans, registered } = rankZeroPlans(oneNode, {}, oversubscribed);
      const call = plans.windowAllgather()!;
      expect(call.windowed).toBe(true);
      expect(decodeSteps(registered[call.gather]!)).toEqual([
        { kind: StepKind.ShmWindowAllgather, peer: -1, level: 0, ...(everyRankCombines ? { everyRankCombines } : {}) },
      ]);
      expect(decodeSteps(registered[call.bcast]!)).toEqual([]);
      // Ordinary allgathers are not tagged as window calls.
      expect(plans.allgather(64, 4, 32).windowed).not.toBe(true);
    }
    expect(rankZeroPlans(placements, {}, false).plans.windowAllgather()).toBeUndefined();
  });

  it('leaves several nodes, one rank, configured levels and allgather.shm: false to the schedules', () => {
    for (const [placed, input] of [
      [placements, {}],
      [byCore(['a'], 1, 2), {}],
      [oneNode, { allgather: { shm: false } }],
      [oneNode, { allgather: { levels: { node: 'ring' } } }],
    ] as [RankPlacement[], TopocollConfigInput][]) {
      const r = allgatherSteps(placed, input, 4, true);
      expect(r.shm).toBe(false);
      expect(r.gather.some((s) => s.kind === StepKind.ShmAllgather)).toBe(false);
    }
  });
});

describe('rankOrderedPlan', () => {
  it('is the plan itself when its groups keep rank order', () => {
    expect(preservesRankOrder(plan)).toBe(true);
    expect(rankOrderedPlan(plan, placements, {})).toBe(plan);
  });

  it('drops the levels inside a node when cores interleave the ranks', () => {
    // Two ranks per core, wrapped: ranks 0, 2 on core 0 and 1, 3 on core 1 of each node.
    const wrapped: RankPlacement[] = ['a', 'b'].flatMap((node, k) => [0, 1, 2, 3].map((j) => ({ rank: k * 4 + j, node, locality: coreLocality(j % 2, 2) })));
    const interleaved = planGroups(wrapped);
    expect(preservesRankOrder(interleaved)).toBe(false);
    const ordered = rankOrderedPlan(interleaved, wrapped, {});
    expect(preservesRankOrder(ordered)).toBe(true);
    expect(ordered.levels).toEqual(['node', 'world']);
  });

  it('falls back to one world group when even the nodes interleave the ranks', () => {
    const roundRobin: RankPlacement[] = [0, 1, 2, 3].map((rank) => ({ rank, node: rank % 2 === 0 ? 'a' : 'b', locality: coreLocality(rank >> 1, 2) }));
    const ordered = rankOrderedPlan(planGroups(roundRobin), roundRobin, {});
    expect(ordered.levels).toEqual(['world']);
    expect(ordered.chain(3).map((g) => g.members)).toEqual([[0, 1, 2, 3]]);
  });
});

describe("the reduce-scatter's top group", () => {
  /** Rank 0's peers in the block phase of a reduce-scatter of `bytes` among `n` ranks each on a node of its own. */
  function topPeers(n: number, bytes: number, input: TopocollConfigInput = {}): number[] {
    const placed = byCore(
      range(0, n - 1).map((i) => `n${i}`),
      1,
      1,
    );
    const { plans, registered } = rankZeroPlans(placed, input, false);
    const call = plans.reduceScatter(bytes, 8, true);
    const steps = decodeSteps(registered[call.bcast]!);
    return [...new Set(steps.filter((s) => s.kind === StepKind.SendRecvReduce).map((s) => s.peer))];
  }

  it("runs the selector's choice: recursive halving among 8 (peers 4, 2, 1), the ring among 6 on 64 MiB (sends to 1)", () => {
    expect(
      rankZeroPlans(
        byCore(
          range(0, 7).map((i) => `n${i}`),
          1,
          1,
        ),
        {},
        false,
      ).plans.selector.choose(4096).reduceScatterTop,
    ).toBe('recursive-halving');
    expect(topPeers(8, 4096)).toEqual([4, 2, 1]);
    expect(topPeers(6, 64 << 20)).toEqual([1]);
  });

  it('runs reduceScatter.top when configured: the ring among 8 (sends to 1), recursive halving among 6 on 64 MiB (the fold first)', () => {
    expect(topPeers(8, 4096, { reduceScatter: { top: 'ring' } })).toEqual([1]);
    expect(topPeers(6, 64 << 20, { reduceScatter: { top: 'recursive-halving' } })).not.toEqual([1]);
  });
});

describe('the one-node alltoall form', () => {
  /** The step kinds rank 0 registers for an alltoall of `block` bytes per block among 8 ranks of one node. */
  function kinds(block: number, input: TopocollConfigInput): { joined: boolean; steps: number } {
    // Without the shared area, which would take the small ones whole.
    const { plans, registered } = rankZeroPlans(byCore(['a'], 8, 4), { ...input, allreduce: { shm: false } }, false);
    const steps = decodeSteps(registered[plans.alltoall(block, false).gather]!);
    // Bruck packs every round's blocks into joined exchanges; pairwise exchanges one block with each peer.
    return { joined: steps.some((s) => s.joined), steps: steps.length };
  }

  it('runs alltoall.algorithm when configured, at any block size; auto: Bruck for tiny blocks, pairwise for large ones', () => {
    expect(kinds(8, {}).joined).toBe(true);
    expect(kinds(1 << 20, {}).joined).toBe(false);
    expect(kinds(8, { alltoall: { algorithm: 'pairwise' } })).toEqual(kinds(1 << 20, {}));
    expect(kinds(1 << 20, { alltoall: { algorithm: 'bruck' } })).toEqual(kinds(8, {}));
  });
});
