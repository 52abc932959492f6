import { describe, expect, it } from 'vitest';
import { preservesRankOrder } from '../../src/algorithms/hierarchical.js';
import { scanSchedule, scanSlots } from '../../src/algorithms/scan.js';
import { StepKind } from '../../src/algorithms/schedule.js';
import { planGroups, type GroupPlan } from '../../src/groups/plan.js';
import { rankOrderedPlan } from '../../src/runtime/collective-plans.js';
import { range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';
import { SHAPES, randomPlans, s3Plan } from './plan-shapes.js';
import { combineTerms, contribution, outOfGroupSteps, simulate, termProblems } from './simulator.js';

/** The plan a scan runs on: the shape's rank-ordered plan (what CollectivePlans hands scanSchedule). */
const ordered = (plan: GroupPlan): GroupPlan => rankOrderedPlan(plan, plan.placements, {});

/** Every shape for p = 1 … 33 (flat, one node, two levels, three uneven levels, interleaved), S3's four levels, random plans. */
const PLANS: { name: string; plan: GroupPlan }[] = [
  ...SHAPES.flatMap((shape) => range(1, 33).map((p) => ({ name: `${shape.name}, p ${p}`, plan: ordered(shape.plan(p)) }))),
  ...[
    [3, 4, 2, 2],
    [5, 5, 2, 2],
    [11, 3, 2, 2],
    [4, 8, 4, 3],
  ].map(([n, ppn, s, l]) => ({ name: `S3 ${n}×${ppn}`, plan: s3Plan(n!, ppn!, s!, l!) })),
  ...randomPlans(40, 7).map((plan, i) => ({ name: `random ${i}`, plan: ordered(plan) })),
];

/** Simulates the scan of `plan` (e elements, both transports) with terms that keep the order; the problems found. */
function scanProblems(name: string, plan: GroupPlan): string[] {
  const p = plan.size;
  const slots = scanSlots(plan);
  const schedules = range(0, p - 1).map((r) => scanSchedule(plan, r));
  const problems = outOfGroupSteps(plan, schedules).map((x) => `${name}: out of group: ${x}`);
  if (!preservesRankOrder(plan)) problems.push(`${name}: the plan does not keep the rank order`);
  for (const [e, transport] of [
    [1, 'rendezvous'],
    [3, 'eager'],
  ] as const) {
    const where = `${name}, e ${e}, ${transport}`;
    const sim = simulate(schedules, {
      elements: slots * e,
      transport,
      combine: combineTerms,
      anyRangeOfSameLength: true,
      // slot 0 holds the input; the others hold nothing yet
      initial: (r, i) => (i < e ? contribution(r, i, 0) : undefined),
    });
    problems.push(...sim.errors.map((x) => `${where}: ${x}`));
    if (!sim.finished) problems.push(`${where}: deadlock at ranks ${sim.stuck.map((s) => s.rank).join(', ')}`);
    for (let r = 0; r < p; r++) {
      for (let i = 0; i < e; i++) {
        // What the executor makes of the last slot: E for exscan, E op x for scan (rank 0: x).
        const exclusive = sim.buffers[r]![(slots - 1) * e + i];
        const inclusive = r === 0 ? contribution(0, i, 0) : exclusive === undefined ? undefined : combineTerms(exclusive, contribution(r, i, 0));
        problems.push(...termProblems(inclusive, 0, i, range(0, r), false).map((x) => `${where}: scan at rank ${r}: ${x}`));
        if (r > 0) problems.push(...termProblems(exclusive, 0, i, range(0, r - 1), false).map((x) => `${where}: exscan at rank ${r}: ${x}`));
      }
    }
  }
  return problems;
}

describe('hierarchical scan and exscan', () => {
  it('6 shapes × p = 1…33, S3 plans, random plans, both transports: scan x0…xr, exscan x0…x(r−1), each in rank order, in-group messages only', () => {
    const problems = PLANS.flatMap(({ name, plan }) => scanProblems(name, plan));
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('nodes of 4 at p = 12: doubling and rotation in the groups, the totals to the leaders, E down', () => {
    const plan = planGroups(range(0, 11).map((rank) => ({ rank, node: `n${Math.floor(rank / 4)}`, locality: '' })));
    expect(plan.levels).toEqual(['node', 'world']);
    const steps = (r: number) => scanSchedule(plan, r).steps.map((s) => [s.kind, s.peer, s.range!.first]);
    const { Send, Recv, RecvReduce } = StepKind;
    // rank 5, the second of node 1: doubling (δ 1, 2), rotation, then E(4) on the left of X
    expect(steps(5)).toEqual([
      [Send, 6, 0],
      [RecvReduce, 4, 0],
      [Send, 7, 0],
      [Send, 6, 0],
      [Recv, 4, 2],
      [RecvReduce, 4, 2],
    ]);
    // rank 4 leads node 1: doubling, rotation (the node's total into slot 1), then the world's
    // doubling (without rank 8, the top group's last member) and rotation on slot 1, E from
    // rank 0 and E down to its node
    expect(steps(4)).toEqual([
      [Send, 5, 0],
      [Send, 6, 0],
      [Send, 5, 0],
      [Recv, 7, 1],
      [RecvReduce, 0, 1],
      [Send, 8, 1],
      [Recv, 0, 2],
      [Send, 5, 2],
      [Send, 6, 2],
      [Send, 7, 2],
    ]);
    // rank 0 sends nothing down: its members' X are their E
    expect(steps(0).filter(([, , slot]) => slot === 2)).toEqual([]);
    expect(scanSchedule(plan, 7).steps.every((s) => s.range!.of === 3)).toBe(true);
    expect(thrown(() => scanSchedule(plan, 12)).code).toBe('EINVAL');
  });
});
