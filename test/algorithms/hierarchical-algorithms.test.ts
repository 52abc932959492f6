import { describe, expect, it } from 'vitest';
import { formatAlgorithm, type AllreduceAlgorithm, type BcastAlgorithm, type ReduceAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import {
  ScheduleCache,
  allreduceSchedules,
  bcastSchedule,
  preservesRankOrder,
  reduceSchedule,
  reductionOrder,
  topGroup,
  type AllreduceVariant,
} from '../../src/algorithms/hierarchical.js';
import { StepKind, encodeSchedule, type Step } from '../../src/algorithms/schedule.js';
import { planGroups, type Group, type GroupPlan } from '../../src/groups/plan.js';
import type { RankPlacement } from '../../src/topology/types.js';
import { parseSimpleNetworkFile } from '../../src/topology/network/simple-file.js';
import { byCore, coreLocality, pad, range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';
import { allreduceProblems, bcastProblems, reduceProblems, SEVERAL_RUNS, shmRegistry } from './collective-checks.js';

// ---- plans of 1 … 9 ranks in several shapes ----

const unbound = (ranks: number[], nodeOf: (r: number) => string): RankPlacement[] => ranks.map((rank) => ({ rank, node: nodeOf(rank), locality: '' }));

const SHAPES: { name: string; plan: (p: number) => GroupPlan }[] = [
  // one level: a world group of single-rank nodes, or one node without locality
  { name: 'world only', plan: (p) => planGroups(unbound(range(0, p - 1), (r) => `n${r}`)) },
  { name: 'one node', plan: (p) => planGroups(unbound(range(0, p - 1), () => 'a')) },
  // two levels: nodes of three or five ranks, no locality
  { name: 'nodes of 3', plan: (p) => planGroups(unbound(range(0, p - 1), (r) => `n${Math.floor(r / 3)}`)) },
  { name: 'nodes of 5', plan: (p) => planGroups(unbound(range(0, p - 1), (r) => `n${Math.floor(r / 5)}`)) },
  // three levels, uneven: nodes of 4, 1, 3, 2, … ranks with two cores per socket
  {
    name: 'uneven sockets/nodes',
    plan: (p) => {
      const sizes = [4, 1, 3, 2];
      const placements: RankPlacement[] = [];
      for (let k = 0; placements.length < p; k++) {
        for (let j = 0; j < sizes[k % 4]! && placements.length < p; j++)
          placements.push({ rank: placements.length, node: `n${k}`, locality: coreLocality(j, 2) });
      }
      return planGroups(placements);
    },
  },
  // ranks round-robin over two nodes: the hierarchy does not follow rank order
  {
    name: 'interleaved',
    plan: (p) => planGroups(range(0, p - 1).map((rank) => ({ rank, node: `n${rank % 2}`, locality: coreLocality(Math.floor(rank / 2), 2) }))),
  },
];

const PLANS = SHAPES.flatMap((shape) => range(1, 9).map((p) => ({ name: `${shape.name}, p ${p}`, plan: shape.plan(p) })));

/** An algorithm per level: the lowest level gets `low`, the top one `top`, the others `middle`. */
function byLevel<A>(plan: GroupPlan, low: A, middle: A, top: A): (g: Group) => A {
  const last = plan.levels.length - 1;
  return (g) => {
    const i = plan.levels.indexOf(g.level);
    return i === last ? top : i === 0 ? low : middle;
  };
}

const BCAST: BcastAlgorithm[] = ['flat', 'binomial', { knomial: 3 }, { knomial: 4 }, 'scatter-allgather', 'shm'];
const REDUCE: ReduceAlgorithm[] = ['flat', 'binomial', { knomial: 3 }, 'rabenseifner', 'shm'];

// ---- the matrix ----

describe('hierarchical schedules with per-group algorithms (6 plan shapes × p = 1…9, every root)', () => {
  it('the plan shapes have the levels they are meant to', () => {
    const levels = (name: string, p: number) => PLANS.find((x) => x.name === `${name}, p ${p}`)!.plan.levels;
    expect(levels('world only', 5)).toEqual(['node', 'world']); // single-rank nodes: no node groups
    expect(levels('one node', 5)).toEqual(['node']);
    expect(levels('nodes of 3', 7)).toEqual(['node', 'world']);
    expect(levels('uneven sockets/nodes', 9)).toEqual(['socket', 'node', 'world']);
    // ordered reductions are checked against reductionOrder: rank order except for interleaved ranks
    for (const { name, plan } of PLANS) expect(preservesRankOrder(plan), name).toBe(!name.startsWith('interleaved') || plan.size <= 2);
  });

  const bcastCases = [...BCAST.map((a) => [formatAlgorithm(a), a] as const), ['shm / knomial:3 / scatter-allgather by level', undefined] as const];
  it.each(bcastCases)('bcast, %s', (_name, algorithm) => {
    const problems: string[] = [];
    for (const { name, plan } of PLANS) {
      const shm = shmRegistry(plan);
      const bcastAlgorithm = algorithm === undefined ? byLevel<BcastAlgorithm>(plan, 'shm', { knomial: 3 }, 'scatter-allgather') : () => algorithm;
      for (let root = 0; root < plan.size; root++) {
        problems.push(...bcastProblems(plan, root, { bcastAlgorithm, shmGroup: shm.shmGroup }, SEVERAL_RUNS, shm.members).map((x) => `${name}: ${x}`));
      }
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });

  const reduceCases = [...REDUCE.map((a) => [formatAlgorithm(a), a] as const), ['shm / flat / rabenseifner by level', undefined] as const].flatMap(
    ([name, a]) => [true, false].map((commutative) => [name, commutative, a] as const),
  );
  it.each(reduceCases)('reduce, %s, commutative %s', (_name, commutative, algorithm) => {
    const problems: string[] = [];
    for (const { name, plan } of PLANS) {
      const shm = shmRegistry(plan);
      const reduceAlgorithm = algorithm === undefined ? byLevel<ReduceAlgorithm>(plan, 'shm', 'flat', 'rabenseifner') : () => algorithm;
      for (let root = 0; root < plan.size; root++) {
        problems.push(
          ...reduceProblems(plan, root, { reduceAlgorithm, commutative, shmGroup: shm.shmGroup }, SEVERAL_RUNS, shm.members).map((x) => `${name}: ${x}`),
        );
      }
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });

  const allreduceCases = (['reduce-bcast', 'reduce-allreduce-bcast'] as AllreduceVariant[]).flatMap((variant) =>
    (['recursive-doubling', 'rabenseifner'] as AllreduceAlgorithm[]).flatMap((top) => [true, false].map((commutative) => [variant, top, commutative] as const)),
  );
  it.each(allreduceCases)('allreduce %s, top %s, commutative %s: the same bits everywhere', (variant, top, commutative) => {
    const problems: string[] = [];
    for (const { name, plan } of PLANS) {
      const shm = shmRegistry(plan);
      const choices: [string, ReduceAlgorithm | undefined, BcastAlgorithm][] = [
        ['binomial', 'binomial', 'binomial'],
        ['rabenseifner / scatter-allgather', 'rabenseifner', 'scatter-allgather'],
        ['by level', undefined, 'flat'],
      ];
      for (const [choice, reduce, bcast] of choices) {
        const reduceAlgorithm = reduce === undefined ? byLevel<ReduceAlgorithm>(plan, 'shm', { knomial: 3 }, 'flat') : () => reduce;
        const options = { variant, top, commutative, reduceAlgorithm, bcastAlgorithm: () => bcast, shmGroup: shm.shmGroup };
        problems.push(...allreduceProblems(plan, options, SEVERAL_RUNS, shm.members).map((x) => `${name}, ${choice}: ${x}`));
      }
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });
});

describe('larger plans with mixed per-level algorithms (sampled roots)', () => {
  const s3Small = (() => {
    const names = range(1, 12).map((i) => `node${pad(i)}`);
    const network = parseSimpleNetworkFile(names.map((n, i) => `${n} sw1${Math.floor(i / 4) + 1} sw21`).join('\n'), 'net.txt');
    return planGroups(byCore(names, 6, 3), { network });
  })();
  const missingSwitches = (() => {
    const network = parseSimpleNetworkFile(['n1 leafA spine', 'n2 leafA spine', 'n3 leafB spine', 'n4 leafC', 'n5 leafC'].join('\n'), 'net');
    return planGroups(
      ['n1', 'n2', 'n3', 'n4', 'n5'].flatMap((node, k) => range(0, 2).map((j) => ({ rank: k * 3 + j, node, locality: coreLocality(j, 2) }))),
      { network },
    );
  })();
  const interleaved = planGroups(range(0, 17).map((rank) => ({ rank, node: `n${rank % 3}`, locality: coreLocality(Math.floor(rank / 3), 3) })));
  const plans: [string, GroupPlan][] = [
    ['S3 in small (72 ranks, 4 levels)', s3Small],
    ['nodes missing switches', missingSwitches],
    ['interleaved over 3 nodes', interleaved],
  ];

  it.each(plans)('%s', (_name, plan) => {
    expect(plan.levels.length).toBeGreaterThanOrEqual(3);
    const shm = shmRegistry(plan);
    const roots = [...new Set([0, 1, Math.floor(plan.size / 2), plan.size - 2, plan.size - 1])];
    const bcastAlgorithm = byLevel<BcastAlgorithm>(plan, 'shm', { knomial: 4 }, 'scatter-allgather');
    const reduceAlgorithm = byLevel<ReduceAlgorithm>(plan, 'shm', 'flat', 'rabenseifner');
    const problems: string[] = [];
    for (const commutative of [true, false]) {
      const options = { bcastAlgorithm, reduceAlgorithm, commutative, shmGroup: shm.shmGroup };
      for (const root of roots) {
        problems.push(...bcastProblems(plan, root, options, SEVERAL_RUNS, shm.members));
        problems.push(...reduceProblems(plan, root, options, SEVERAL_RUNS, shm.members));
      }
      for (const top of ['recursive-doubling', 'rabenseifner'] as const) {
        problems.push(...allreduceProblems(plan, { ...options, variant: 'reduce-allreduce-bcast', top }, SEVERAL_RUNS, shm.members));
      }
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });
});

// ---- the S3 example, by hand ----

describe('per-group algorithms on the S3 example (64 nodes × 36 ranks)', () => {
  const names = range(1, 64).map((i) => `node${pad(i)}`);
  const network = parseSimpleNetworkFile(names.map((n, i) => `${n} sw1${Math.floor(i / 16) + 1} sw21`).join('\n'), 'net.txt');
  const plan = planGroups(byCore(names, 36, 18), { network });
  const L = { socket: 0, node: 1, switch1: 2, switch2: 3 };
  const send = (peer: number, level: number): Step => ({ kind: StepKind.Send, peer, level });
  const recv = (peer: number, level: number): Step => ({ kind: StepKind.Recv, peer, level });
  const red = (peer: number, level: number, order: 0 | 1 = 0): Step => ({ kind: StepKind.RecvReduce, peer, level, order });
  const exchange = (peer: number, level: number, order: 0 | 1): Step => ({
    kind: StepKind.SendRecvReduce,
    peer,
    level,
    peer2: peer,
    range2: { first: 0, count: 1 },
    order,
  });

  it('follows rank order: ranks are mapped by core', () => {
    expect(preservesRankOrder(plan)).toBe(true);
    expect(topGroup(plan)!.members).toEqual([0, 576, 1152, 1728]);
  });

  it("a commutative reduce takes R's children at R's place: 36 for root 38 reduces 37 before its node and leaf groups", () => {
    // 36 is relative 16 in the socket tree rooted at 38 (position 2): child relative 17 = rank 37
    expect(reduceSchedule(plan, 36, 38).steps).toEqual([
      red(37, L.socket),
      red(54, L.node),
      ...[72, 108, 180, 324].map((p) => red(p, L.switch1)),
      send(38, L.socket),
    ]);
  });

  it('an ordered reduce to 37 goes up to 0 in rank order, then down the groups covering 37', () => {
    const ordered = { commutative: false };
    // 0: its groups bottom-up, children in rank order, then the result to 36 (the source of switch1)
    expect(reduceSchedule(plan, 0, 37, ordered).steps).toEqual([
      ...[1, 2, 4, 8, 16].map((p) => red(p, L.socket)),
      red(18, L.node),
      ...[36, 72, 144, 288].map((p) => red(p, L.switch1)),
      ...[576, 1152].map((p) => red(p, L.switch2)),
      send(36, L.switch1),
    ]);
    expect(reduceSchedule(plan, 36, 37, ordered).steps).toEqual([
      ...[37, 38, 40, 44, 52].map((p) => red(p, L.socket)),
      red(54, L.node),
      send(0, L.switch1),
      recv(0, L.switch1),
      send(37, L.socket),
    ]);
    expect(reduceSchedule(plan, 37, 37, ordered).steps).toEqual([send(36, L.socket), recv(36, L.socket)]);
    expect(reduceSchedule(plan, 38, 37, ordered).steps).toEqual([red(39, L.socket), send(36, L.socket)]);
  });

  it('reduce-allreduce-bcast: the spine group exchanges by recursive doubling, everyone else as for root 0', () => {
    const options = { variant: 'reduce-allreduce-bcast' as const };
    const at0 = allreduceSchedules(plan, 0, options);
    expect(at0.reduce.steps.slice(-2)).toEqual([exchange(576, L.switch2, 0), exchange(1152, L.switch2, 0)]);
    expect(at0.bcast.steps).toEqual(bcastSchedule(plan, 0, 0).steps.filter((s) => s.level !== L.switch2));
    const at1728 = allreduceSchedules(plan, 1728, options);
    expect(at1728.reduce.steps.slice(-2)).toEqual([exchange(1152, L.switch2, 1), exchange(576, L.switch2, 1)]);
    expect(at1728.bcast.steps.some((s) => s.level === L.switch2)).toBe(false);
    // below the top group: the same steps as reduce-bcast
    for (const r of [1, 18, 36, 37, 577]) expect(allreduceSchedules(plan, r, options)).toEqual(allreduceSchedules(plan, r));
  });

  it("a shm group id alone keeps today's choice: shm where there is one, binomial elsewhere", () => {
    const shmGroup = (g: Group) => (g.level === 'socket' ? 100 + g.leader : undefined);
    expect(bcastSchedule(plan, 1, 0, { shmGroup }).steps).toEqual([{ kind: StepKind.ShmBcast, peer: 0, level: L.socket, group: 100 }]);
    expect(bcastSchedule(plan, 18, 0, { shmGroup }).steps[0]).toEqual(recv(0, L.node));
    const e = thrown(() => bcastSchedule(plan, 18, 0, { shmGroup, bcastAlgorithm: () => 'shm' }), 'ECONFIG');
    expect(e.message).toMatch(/shm chosen for node group node01/);
    thrown(() => reduceSchedule(plan, 0, 0, { reduceAlgorithm: () => 'shm' }), 'ECONFIG');
  });
});

describe('reductionOrder', () => {
  it("is rank order when ranks follow the hierarchy, and the hierarchy's order when they do not", () => {
    expect(reductionOrder(planGroups(byCore(['a', 'b'], 4, 2)))).toEqual(range(0, 7));
    const interleaved = planGroups(range(0, 5).map((rank) => ({ rank, node: `n${rank % 2}`, locality: '' })));
    expect(reductionOrder(interleaved)).toEqual([0, 2, 4, 1, 3, 5]);
    expect(preservesRankOrder(interleaved)).toBe(false);
    expect(reductionOrder(planGroups([{ rank: 0, node: 'a', locality: '' }]))).toEqual([0]);
  });
});

describe('ScheduleCache with algorithm choices', () => {
  const plan = planGroups(byCore(['a', 'b', 'c'], 4, 2));
  const options = {
    variant: 'reduce-allreduce-bcast' as const,
    top: 'rabenseifner' as const,
    reduceAlgorithm: () => 'rabenseifner' as const,
    bcastAlgorithm: () => 'scatter-allgather' as const,
  };

  it('builds with its configuration; commutative and ordered reduces are different schedules', () => {
    const cache = new ScheduleCache(plan, 2, options);
    expect(cache.bcast(2)).toEqual(bcastSchedule(plan, 2, 2, options));
    const commutative = cache.reduce(2);
    const ordered = cache.reduce(2, { commutative: false });
    expect(commutative).toEqual(reduceSchedule(plan, 2, 2, options));
    expect(ordered).toEqual(reduceSchedule(plan, 2, 2, { ...options, commutative: false }));
    expect(ordered).not.toEqual(commutative);
    expect(cache.reduce(2, { commutative: false })).toBe(ordered);
    expect(cache.get('bcast', 2, { commutative: false })).toBe(cache.bcast(2));
    expect(cache.allreduce()).toEqual(allreduceSchedules(plan, 2, options));
    expect(cache.allreduce({ commutative: false })).toEqual(allreduceSchedules(plan, 2, { ...options, commutative: false }));
    expect(cache.allreduce({ commutative: false }).bcast).toBe(cache.allreduce().bcast);
    expect(cache.size).toBe(6);
  });

  it('caches the encoded allreduce phases', () => {
    const cache = new ScheduleCache(plan, 0, options);
    const e = cache.allreduceEncoded();
    expect([...e.reduce]).toEqual([...encodeSchedule(allreduceSchedules(plan, 0, options).reduce)]);
    expect([...e.bcast]).toEqual([...encodeSchedule(allreduceSchedules(plan, 0, options).bcast)]);
    expect(cache.allreduceEncoded().reduce).toBe(e.reduce);
    expect(cache.getEncoded('reduce', 3, { commutative: false })).toBe(cache.getEncoded('reduce', 3, { commutative: false }));
  });
});
