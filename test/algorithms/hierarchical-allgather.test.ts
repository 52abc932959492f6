import { describe, expect, it } from 'vitest';
import type { BcastAlgorithm, GroupAllgatherAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { allgatherSchedules, allreduceSchedules, coveredBelow, topGroup } from '../../src/algorithms/hierarchical.js';
import { StepKind, rankBlock, type Step } from '../../src/algorithms/schedule.js';
import { planGroups, type Group, type GroupPlan } from '../../src/groups/plan.js';
import type { RankPlacement } from '../../src/topology/types.js';
import { isNodeLocal } from '../../src/algorithms/selection.js';
import { coreLocality, range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';
import { ALLGATHER_RUNS, allgatherProblems, shmRegistry } from './collective-checks.js';
import { byLevel, PLANS, randomPlans, s3Plan } from './plan-shapes.js';

const unbound = (ranks: number[], nodeOf: (r: number) => string): RankPlacement[] => ranks.map((rank) => ({ rank, node: nodeOf(rank), locality: '' }));

const ALGORITHMS: GroupAllgatherAlgorithm[] = ['ring', 'recursive-doubling', 'bruck', 'neighbor-exchange'];

/** Allgather algorithm choices (uniform, and mixed by level) with a bcast choice for the second phase. */
function choices(
  plan: GroupPlan,
): { name: string; allgatherAlgorithm: (g: Group) => GroupAllgatherAlgorithm; bcastAlgorithm?: (g: Group) => BcastAlgorithm }[] {
  return [
    ...ALGORITHMS.map((a) => ({ name: a, allgatherAlgorithm: () => a })),
    {
      name: 'neighbor-exchange / bruck / recursive-doubling by level, shm / knomial:3 / scatter-allgather bcasts',
      allgatherAlgorithm: byLevel<GroupAllgatherAlgorithm>(plan, 'neighbor-exchange', 'bruck', 'recursive-doubling'),
      bcastAlgorithm: byLevel<BcastAlgorithm>(plan, 'shm', { knomial: 3 }, 'scatter-allgather'),
    },
    {
      name: 'recursive-doubling / ring / neighbor-exchange by level, flat bcasts',
      allgatherAlgorithm: byLevel<GroupAllgatherAlgorithm>(plan, 'recursive-doubling', 'ring', 'neighbor-exchange'),
      bcastAlgorithm: () => 'flat',
    },
    // the shared-memory allgather at every level inside a node, the ring or recursive doubling between
    {
      name: 'shm inside nodes, ring between, shm / binomial bcasts',
      allgatherAlgorithm: (g) => (isNodeLocal(plan, g) ? 'shm' : 'ring'),
      bcastAlgorithm: (g) => (isNodeLocal(plan, g) ? 'shm' : 'binomial'),
    },
    {
      name: 'shm inside nodes, recursive-doubling between, flat bcasts',
      allgatherAlgorithm: (g) => (isNodeLocal(plan, g) ? 'shm' : 'recursive-doubling'),
      bcastAlgorithm: () => 'flat',
    },
  ];
}

/** Engine ids for the node-local groups only (as the runtime registers them). */
function nodeLocalShm(plan: GroupPlan): { shmGroup: (g: Group) => number | undefined; members: Map<number, readonly number[]> } {
  const ids = new Map<Group, number>();
  const members = new Map<number, readonly number[]>();
  for (const g of [...plan.groups.values()].flat()) {
    if (!isNodeLocal(plan, g)) continue;
    ids.set(g, ids.size + 1);
    members.set(ids.size, g.members);
  }
  return { shmGroup: (g) => ids.get(g), members };
}

function checkPlan(plan: GroupPlan, runs = ALLGATHER_RUNS): string[] {
  const shm = shmRegistry(plan);
  const problems: string[] = [];
  for (const c of choices(plan)) {
    const options = { allgatherAlgorithm: c.allgatherAlgorithm, bcastAlgorithm: c.bcastAlgorithm, shmGroup: shm.shmGroup };
    problems.push(...allgatherProblems(plan, options, runs, shm.members).map((x) => `${c.name}: ${x}`));
    // the bcast phase is reduce-allreduce-bcast's, with the same bcast choices
    for (let r = 0; r < plan.size; r++) {
      const mine = allgatherSchedules(plan, r, options).bcast;
      const allreduce = allreduceSchedules(plan, r, { ...options, variant: 'reduce-allreduce-bcast' }).bcast;
      if (JSON.stringify(mine) !== JSON.stringify(allreduce)) problems.push(`${c.name}: rank ${r}'s bcast phase differs from reduce-allreduce-bcast's`);
    }
  }
  return problems;
}

describe('hierarchical allgather', () => {
  it('6 plan shapes × p = 1…20, every algorithm and mixes by level: every rank ends with every block in rank order, in-group messages only', () => {
    const problems: string[] = [];
    for (const { name, plan } of PLANS) problems.push(...checkPlan(plan).map((x) => `${name}: ${x}`));
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('random placements: shuffled ranks, unequal nodes, random switches (40 plans)', () => {
    const problems: string[] = [];
    randomPlans(40, 20240611).forEach((plan, i) =>
      problems.push(...checkPlan(plan, ALLGATHER_RUNS.slice(0, 2)).map((x) => `plan ${i} (${plan.size} ranks): ${x}`)),
    );
    expect(problems.slice(0, 10)).toEqual([]);
  });

  const s3 = s3Plan;
  const larger: [string, GroupPlan][] = [
    ['S3 in small (72 ranks, 4 levels)', s3(12, 6, 3, 4)],
    [
      'interleaved over 3 nodes (18 ranks)',
      planGroups(range(0, 17).map((rank) => ({ rank, node: `n${rank % 3}`, locality: coreLocality(Math.floor(rank / 3), 3) }))),
    ],
  ];
  it.each(larger)('%s', (_name, plan) => {
    expect(plan.levels.length).toBeGreaterThanOrEqual(2);
    expect(checkPlan(plan).slice(0, 10)).toEqual([]);
  });

  it('the S3 example (64 nodes × 36 ranks, 2304 ranks, 4 levels), every rank simulated', () => {
    const plan = s3(64, 36, 18, 16);
    const shm = shmRegistry(plan);
    const options = {
      allgatherAlgorithm: byLevel<GroupAllgatherAlgorithm>(plan, 'ring', 'neighbor-exchange', 'recursive-doubling'),
      bcastAlgorithm: byLevel<BcastAlgorithm>(plan, 'shm', 'binomial', 'binomial'),
      shmGroup: shm.shmGroup,
    };
    expect(allgatherProblems(plan, options, ALLGATHER_RUNS.slice(0, 1), shm.members).slice(0, 10)).toEqual([]);
    // the top group (the spine) gathers 576 blocks per member
    expect(coveredBelow(plan, 576, topGroup(plan)!)).toEqual(range(576, 1151));
  });
});

describe('allgather schedules by hand', () => {
  const L = { node: 0, world: 1 };
  const ex = (to: number, block: number, from: number, block2: number, level: number): Step => ({
    kind: StepKind.SendRecv,
    peer: to,
    level,
    range: rankBlock(block),
    peer2: from,
    range2: { first: block2, count: 1 },
  });
  // ranks round-robin over two nodes: node groups {0, 2, 4} and {1, 3, 5}, world {0, 1}
  const plan = planGroups(unbound(range(0, 5), (r) => `n${r % 2}`));

  it("each group gathers what its members cover, blocks at their rank's place; the leaders' top group then swaps whole nodes", () => {
    expect(plan.levels).toEqual(['node', 'world']);
    expect(coveredBelow(plan, 1, topGroup(plan)!)).toEqual([1, 3, 5]);
    const at0 = allgatherSchedules(plan, 0);
    expect(at0.gather).toEqual({
      collective: 'allgather',
      root: 0,
      steps: [ex(2, 0, 4, 4, L.node), ex(2, 4, 4, 2, L.node), ex(1, 0, 1, 1, L.world), ex(1, 2, 1, 3, L.world), ex(1, 4, 1, 5, L.world)],
    });
    expect(allgatherSchedules(plan, 3).gather.steps).toEqual([ex(5, 3, 1, 1, L.node), ex(5, 1, 1, 5, L.node)]);
    // the bcast phase: node groups from their leaders, the world group left out
    expect(at0.bcast.collective).toBe('bcast');
    expect(at0.bcast.steps.every((s) => s.level === L.node && s.kind === StepKind.Send && s.range === undefined)).toBe(true);
    expect(allgatherSchedules(plan, 3).bcast.steps).toEqual([{ kind: StepKind.Recv, peer: 1, level: L.node }]);
  });

  it('a job of one rank has no steps; shm allgather in a group without an engine id is rejected', () => {
    const one = planGroups([{ rank: 0, node: 'a', locality: '' }]);
    expect(allgatherSchedules(one, 0)).toEqual({ gather: { collective: 'allgather', root: 0, steps: [] }, bcast: { collective: 'bcast', root: 0, steps: [] } });
    thrown(() => allgatherSchedules(plan, 0, { allgatherAlgorithm: () => 'shm' }), 'ECONFIG');
    // the node groups have ids, the world group (across nodes) has none
    const shm = nodeLocalShm(plan);
    const message = thrown(() => allgatherSchedules(plan, 0, { allgatherAlgorithm: () => 'shm', shmGroup: shm.shmGroup }), 'ECONFIG').message;
    expect(message).toMatch(/world group/);
    thrown(() => allgatherSchedules(plan, 6), 'EINVAL');
  });

  it("shm in the node groups: the group's own engine id, every member publishing its own block in turn, the world group exchanging as before", () => {
    const shm = nodeLocalShm(plan);
    const options = { allgatherAlgorithm: (g: Group) => (g.level === 'node' ? ('shm' as const) : ('ring' as const)), shmGroup: shm.shmGroup };
    const node0 = plan.chain(0)[0]!;
    const id = shm.shmGroup(node0)!;
    const pub = (source: number): Step => ({ kind: StepKind.ShmBcast, peer: source, level: L.node, group: id, range: rankBlock(source) });
    const nodeSteps = [pub(0), pub(2), pub(4)];
    expect(allgatherSchedules(plan, 0, options).gather.steps).toEqual([
      ...nodeSteps,
      ex(1, 0, 1, 1, L.world),
      ex(1, 2, 1, 3, L.world),
      ex(1, 4, 1, 5, L.world),
    ]);
    expect(allgatherSchedules(plan, 2, options).gather.steps).toEqual(nodeSteps);
    expect(allgatherSchedules(plan, 3, options).gather.steps.map((s) => [s.peer, s.group, s.range!.first])).toEqual([
      [1, shm.shmGroup(plan.chain(1)[0]!), 1],
      [3, shm.shmGroup(plan.chain(1)[0]!), 3],
      [5, shm.shmGroup(plan.chain(1)[0]!), 5],
    ]);
  });
});
