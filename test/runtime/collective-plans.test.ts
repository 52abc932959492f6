import { describe, expect, it } from 'vitest';
import { formatAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { preservesRankOrder } from '../../src/algorithms/hierarchical.js';
import { validateConfig } from '../../src/config/load.js';
import type { TopocollConfigInput } from '../../src/config/schema.js';
import { planGroups, type Group } from '../../src/groups/plan.js';
import type { RankPlacement } from '../../src/topology/types.js';
import { decodeSteps, StepKind, type Step } from '../../src/algorithms/schedule.js';
import { AUTO_SEGMENT_BYTES, chooseForClass, EVERY_RANK_COMBINES_MAX_RANKS, isNodeLocal, shmAllreduceProtocol } from '../../src/algorithms/selection.js';
import { CollectivePlans, rankOrderedPlan, SHM_ALLREDUCE_MAX_BYTES, SHM_ALLGATHER_EVERY_RANK_MAX_BYTES } from '../../src/runtime/collective-plans.js';
import { thrown } from '../helpers/thrown.js';
import { byCore, coreLocality } from '../helpers/placements.js';

/** The choices of collective-plans.ts as plain functions of configuration and plan. */
const config = (input: TopocollConfigInput = {}) => validateConfig(input);
// 4 nodes × 4 ranks, 2 sockets of 2 cores: socket, node and world levels.
const placements = byCore(['a', 'b', 'c', 'd'], 4, 2);
const plan = planGroups(placements);
const groupAt = (level: string): Group => plan.groups.get(level as never)![0]!;

describe('chooseForClass', () => {
  it('auto: shm bcast and binomial reduce inside a node; between nodes binomial, and for large messages in groups of 4 scatter-allgather and rabenseifner', () => {
    const small = chooseForClass(config(), plan, 'small', 65536);
    const large = chooseForClass(config(), plan, 'large', 65536);
    expect(plan.levels).toEqual(['socket', 'node', 'world']);
    for (const level of ['socket', 'node']) {
      expect(formatAlgorithm(small.bcast(groupAt(level)))).toBe('shm');
      expect(formatAlgorithm(large.reduce(groupAt(level)))).toBe('binomial');
    }
    expect(formatAlgorithm(small.bcast(groupAt('world')))).toBe('binomial');
    expect(formatAlgorithm(large.bcast(groupAt('world')))).toBe('scatter-allgather');
    expect(formatAlgorithm(large.reduce(groupAt('world')))).toBe('rabenseifner');
    expect(small.allreduce).toEqual({ variant: 'reduce-allreduce-bcast', top: 'recursive-doubling' });
    expect(large.allreduce).toEqual({ variant: 'reduce-allreduce-bcast', top: 'rabenseifner' });
  });

  it('segments: none for small messages; for large ones 64 KiB, at most the eager limit where schedules exchange', () => {
    const small = chooseForClass(config(), plan, 'small', 16384);
    expect(small.segmentBytes.bcast).toBe(0);
    const large = chooseForClass(config(), plan, 'large', 16384);
    expect(AUTO_SEGMENT_BYTES).toBe(65536);
    // world uses scatter-allgather / rabenseifner for large messages: exchanges.
    // Allgather's gather phase always exchanges; its bcast phase follows bcast's algorithms.
    expect(large.segmentBytes).toEqual({ bcast: 16384, reduce: 16384, allreduce: 16384, allgather: 16384, allgatherBcast: 16384 });
    const noExchanges = chooseForClass(
      config({ bcast: { levels: { world: 'binomial' } }, reduce: { levels: { world: 'binomial' } }, allreduce: { algorithm: 'reduce-bcast' } }),
      plan,
      'large',
      16384,
    );
    expect(noExchanges.segmentBytes).toEqual({ bcast: 65536, reduce: 65536, allreduce: 65536, allgather: 16384, allgatherBcast: 65536 });
    const fixed = chooseForClass(config({ bcast: { segment: '8KiB', levels: { world: 'binomial' } } }), plan, 'small', 16384);
    expect(fixed.segmentBytes.bcast).toBe(8192);
  });

  it('takes the configured algorithm of a level, and refuses shm on a level that spans nodes (ECONFIG naming it)', () => {
    const c = chooseForClass(config({ bcast: { levels: { node: 'knomial:4' } }, reduce: { levels: { socket: 'flat' } } }), plan, 'small', 65536);
    expect(formatAlgorithm(c.bcast(groupAt('node')))).toBe('knomial:4');
    expect(formatAlgorithm(c.reduce(groupAt('socket')))).toBe('flat');
    // Found while choosing, before any schedule exists.
    expect(thrown(() => chooseForClass(config({ reduce: { levels: { world: 'shm' } } }), plan, 'small', 65536), 'ECONFIG').message).toMatch(
      /reduce\.levels\.world: shm works only inside a node/,
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
    eagerBytes: Infinity,
    oversubscribed,
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
