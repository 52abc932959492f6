import { describe, expect, it } from 'vitest';
import type { BcastAlgorithm, GroupAllgatherAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { allgatherSchedules, allreduceSchedules, coveredBelow, topGroup } from '../../src/algorithms/hierarchical.js';
import { StepKind, rankBlock, type Step } from '../../src/algorithms/schedule.js';
import { planGroups, type Group, type GroupPlan, type RankPlacement } from '../../src/groups/plan.js';
import { parseSimpleNetworkFile } from '../../src/topology/network/simple-file.js';
import { byCore, coreLocality, pad, range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';
import { ALLGATHER_RUNS, allgatherProblems, shmRegistry } from './collective-checks.js';

/** Deterministic PRNG (mulberry32). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const unbound = (ranks: number[], nodeOf: (r: number) => string): RankPlacement[] => ranks.map((rank) => ({ rank, node: nodeOf(rank), locality: '' }));

/** The plan shapes of hierarchical-algorithms.test.ts. */
const SHAPES: { name: string; plan: (p: number) => GroupPlan }[] = [
  { name: 'world only', plan: (p) => planGroups(unbound(range(0, p - 1), (r) => `n${r}`)) },
  { name: 'one node', plan: (p) => planGroups(unbound(range(0, p - 1), () => 'a')) },
  { name: 'nodes of 3', plan: (p) => planGroups(unbound(range(0, p - 1), (r) => `n${Math.floor(r / 3)}`)) },
  { name: 'nodes of 5', plan: (p) => planGroups(unbound(range(0, p - 1), (r) => `n${Math.floor(r / 5)}`)) },
  {
    name: 'uneven sockets/nodes',
    plan: (p) => {
      const sizes = [4, 1, 3, 2];
      const placements: RankPlacement[] = [];
      for (let k = 0; placements.length < p; k++) {
        for (let j = 0; j < sizes[k % 4]! && placements.length < p; j++) placements.push({ rank: placements.length, node: `n${k}`, locality: coreLocality(j, 2) });
      }
      return planGroups(placements);
    },
  },
  // ranks round-robin over two nodes: the ranks of a node are not consecutive
  { name: 'interleaved', plan: (p) => planGroups(range(0, p - 1).map((rank) => ({ rank, node: `n${rank % 2}`, locality: coreLocality(Math.floor(rank / 2), 2) }))) },
];

const PLANS = SHAPES.flatMap((shape) => range(1, 20).map((p) => ({ name: `${shape.name}, p ${p}`, plan: shape.plan(p) })));

/** Shuffled ranks over unequal nodes with random cores and switches, as in hierarchical.test.ts. */
function randomPlans(count: number, seed: number): GroupPlan[] {
  const random = prng(seed);
  const pick = (n: number) => Math.floor(random() * n);
  const plans: GroupPlan[] = [];
  for (let trial = 0; trial < count; trial++) {
    const nodes = range(0, pick(6)).map((k) => `h${k}`);
    const perNode = nodes.map(() => 1 + pick(6));
    const size = perNode.reduce((a, b) => a + b, 0);
    const ranks = range(0, size - 1);
    for (let i = ranks.length - 1; i > 0; i--) {
      const j = pick(i + 1);
      [ranks[i], ranks[j]] = [ranks[j]!, ranks[i]!];
    }
    const placements: RankPlacement[] = [];
    let next = 0;
    nodes.forEach((node, k) => {
      const cores = range(0, 7).sort(() => random() - 0.5).slice(0, perNode[k]);
      for (const c of cores) placements.push({ rank: ranks[next++]!, node, locality: random() < 0.9 ? coreLocality(c, 4) : '' });
    });
    const spineOfLeaf = ['spine0', 'spine0', 'spine1', undefined];
    const lines = nodes.map((n) => {
      const leaf = pick(4);
      return [n, `leaf${leaf}`, spineOfLeaf[leaf]].filter((x) => x !== undefined).join(' ');
    });
    const network = random() < 0.7 ? parseSimpleNetworkFile(lines.join('\n'), 'net') : undefined;
    plans.push(planGroups(placements, { network, disabled: random() < 0.3 ? ['socket'] : [] }));
  }
  return plans;
}

/** An algorithm per level: the lowest level gets `low`, the top one `top`, the others `middle`. */
function byLevel<A>(plan: GroupPlan, low: A, middle: A, top: A): (g: Group) => A {
  const last = plan.levels.length - 1;
  return (g) => {
    const i = plan.levels.indexOf(g.level);
    return i === last ? top : i === 0 ? low : middle;
  };
}

const ALGORITHMS: GroupAllgatherAlgorithm[] = ['ring', 'recursive-doubling', 'bruck', 'neighbor-exchange'];

/** Allgather algorithm choices (uniform, and mixed by level) with a bcast choice for the second phase. */
function choices(plan: GroupPlan): { name: string; allgatherAlgorithm: (g: Group) => GroupAllgatherAlgorithm; bcastAlgorithm?: (g: Group) => BcastAlgorithm }[] {
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
  ];
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
    randomPlans(40, 20240611).forEach((plan, i) => problems.push(...checkPlan(plan, ALLGATHER_RUNS.slice(0, 2)).map((x) => `plan ${i} (${plan.size} ranks): ${x}`)));
    expect(problems.slice(0, 10)).toEqual([]);
  });

  const s3 = (nodes: number, ppn: number, perSocket: number, perLeaf: number) => {
    const names = range(1, nodes).map((i) => `node${pad(i)}`);
    const network = parseSimpleNetworkFile(names.map((n, i) => `${n} sw1${Math.floor(i / perLeaf) + 1} sw21`).join('\n'), 'net.txt');
    return planGroups(byCore(names, ppn, perSocket), { network });
  };
  const larger: [string, GroupPlan][] = [
    ['S3 in small (72 ranks, 4 levels)', s3(12, 6, 3, 4)],
    ['interleaved over 3 nodes (18 ranks)', planGroups(range(0, 17).map((rank) => ({ rank, node: `n${rank % 3}`, locality: coreLocality(Math.floor(rank / 3), 3) })))],
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

  it('each group gathers what its members cover, blocks at their rank\'s place; the leaders\' top group then swaps whole nodes', () => {
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

  it('a job of one rank has no steps; shm allgather is rejected', () => {
    const one = planGroups([{ rank: 0, node: 'a', locality: '' }]);
    expect(allgatherSchedules(one, 0)).toEqual({ gather: { collective: 'allgather', root: 0, steps: [] }, bcast: { collective: 'bcast', root: 0, steps: [] } });
    thrown(() => allgatherSchedules(plan, 0, { allgatherAlgorithm: () => 'shm' as GroupAllgatherAlgorithm }), 'ECONFIG');
    thrown(() => allgatherSchedules(plan, 6), 'EINVAL');
  });
});
