import { describe, expect, it } from 'vitest';
import { coveredBelow, gatherCoverage, gatherSchedule, scatterSchedule } from '../../src/algorithms/hierarchical.js';
import { groupGatherSteps, groupScatterSteps, type GroupGatherAlgorithm } from '../../src/algorithms/group-gather.js';
import { groupReduceScatterSteps } from '../../src/algorithms/group-reduce-scatter.js';
import { positionView } from '../../src/algorithms/group-steps.js';
import { StepKind } from '../../src/algorithms/schedule.js';
import type { Group, GroupPlan } from '../../src/groups/plan.js';
import { range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';
import { ALLGATHER_RUNS, gatherScatterProblems, reduceScatterProblems } from './collective-checks.js';
import { byLevel, PLANS, randomPlans } from './plan-shapes.js';

const ALGORITHMS: GroupGatherAlgorithm[] = ['flat', 'binomial'];

function choices(plan: GroupPlan): { name: string; gatherAlgorithm: (g: Group) => GroupGatherAlgorithm }[] {
  return [
    ...ALGORITHMS.map((a) => ({ name: a, gatherAlgorithm: () => a })),
    { name: 'flat / binomial / flat by level', gatherAlgorithm: byLevel<GroupGatherAlgorithm>(plan, 'flat', 'binomial', 'flat') },
  ];
}

function checkPlan(plan: GroupPlan, roots: readonly number[], runs = ALLGATHER_RUNS): string[] {
  const problems: string[] = [];
  for (const c of choices(plan)) {
    for (const root of roots) problems.push(...gatherScatterProblems(plan, root, { gatherAlgorithm: c.gatherAlgorithm }, runs).map((x) => `${c.name}: ${x}`));
  }
  return problems;
}

describe('group gather and scatter', () => {
  it('n = 1…12, every root and algorithm: the root receives (sends) each other position’s blocks once, in ascending rank order per pair', () => {
    for (const algorithm of ALGORITHMS) {
      for (let n = 1; n <= 12; n++) {
        const view = positionView(n);
        // position i holds ranks 2i and 2i + 1 (two blocks each)
        const holds = (i: number) => [2 * i, 2 * i + 1];
        for (let root = 0; root < n; root++) {
          const gathered = range(0, n - 1).flatMap((me) => groupGatherSteps(algorithm, view, root, me, holds).map((s) => ({ me, s })));
          const atRoot = gathered.filter(({ me, s }) => me === root && s.kind === StepKind.Recv).map(({ s }) => s.range!.first);
          expect(atRoot.sort((a, b) => a - b)).toEqual(range(0, 2 * n - 1).filter((r) => r !== 2 * root && r !== 2 * root + 1));
          const scattered = range(0, n - 1).flatMap((me) => groupScatterSteps(algorithm, view, root, me, holds).map((s) => ({ me, s })));
          const fromRoot = scattered.filter(({ me, s }) => me === root && s.kind === StepKind.Send).map(({ s }) => s.range!.first);
          expect(fromRoot.sort((a, b) => a - b)).toEqual(atRoot);
          if (algorithm === 'flat') expect(gathered.every(({ me, s }) => me === root || s.peer === root)).toBe(true);
        }
      }
    }
  });

  it('an algorithm it does not know is ECONFIG; positions outside the group are EINVAL', () => {
    const view = positionView(4);
    expect(thrown(() => groupGatherSteps('ring' as GroupGatherAlgorithm, view, 0, 1, (i) => [i])).code).toBe('ECONFIG');
    expect(thrown(() => groupScatterSteps('flat', view, 4, 1, (i) => [i])).code).toBe('EINVAL');
    expect(thrown(() => groupGatherSteps('flat', view, 0, -1, (i) => [i])).code).toBe('EINVAL');
  });
});

describe('hierarchical gather and scatter', () => {
  it('6 plan shapes × p = 1…20, every root, flat, binomial and mixed by level: the root gathers every block, every rank gets its own, in-group messages only', () => {
    const problems: string[] = [];
    for (const { name, plan } of PLANS) problems.push(...checkPlan(plan, range(0, plan.size - 1), ALLGATHER_RUNS.slice(0, 1)).map((x) => `${name}: ${x}`));
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('random plans (shuffled ranks, unequal nodes, switches): three roots each, several block sizes and segments, both transports', () => {
    const problems: string[] = [];
    randomPlans(12, 0x9a7e).forEach((plan, k) => {
      const roots = [...new Set([0, plan.size - 1, (k * 7) % plan.size])];
      problems.push(...checkPlan(plan, roots).map((x) => `random plan ${k} (p ${plan.size}): ${x}`));
    });
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('with root 0 a member stands for what it covers below its group; with any root the sets form a tree whose root stands for everyone', () => {
    for (const { plan } of PLANS.filter((x) => x.plan.size > 1)) {
      const stands = gatherCoverage(plan, 0);
      for (const groups of plan.groups.values())
        for (const g of groups) for (const m of g.members) if (m !== g.leader) expect(stands(m)).toEqual(coveredBelow(plan, m, g));
      for (const root of [0, plan.size - 1]) expect(gatherCoverage(plan, root)(root)).toEqual(range(0, plan.size - 1));
    }
  });

  it('a job of one rank has no steps; a root outside the job is EINVAL', () => {
    const one = PLANS.find((x) => x.plan.size === 1)!.plan;
    expect(gatherSchedule(one, 0, 0).steps).toEqual([]);
    expect(scatterSchedule(one, 0, 0).steps).toEqual([]);
    const four = PLANS.find((x) => x.plan.size === 4)!.plan;
    expect(thrown(() => gatherSchedule(four, 0, 4)).code).toBe('EINVAL');
  });
});

describe('hierarchical reduce-scatter (commutative)', () => {
  it('6 plan shapes × p = 1…20 and random plans: every rank ends with every contribution to its own block once, in-group messages only', () => {
    const problems: string[] = [];
    for (const { name, plan } of PLANS) {
      for (const scatter of ['flat', 'binomial'] as const)
        problems.push(...reduceScatterProblems(plan, { gatherAlgorithm: () => scatter }, ALLGATHER_RUNS.slice(0, 1)).map((x) => `${name}, ${scatter}: ${x}`));
    }
    randomPlans(8, 0x5ca7).forEach((plan, k) => {
      problems.push(...reduceScatterProblems(plan, { reduceAlgorithm: () => 'flat' }, ALLGATHER_RUNS).map((x) => `random plan ${k}: ${x}`));
    });
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('the top group by recursive halving: the same plans, every top group size 1 … 20 (folds where it is no power of two)', () => {
    const problems: string[] = [];
    for (const { name, plan } of PLANS) {
      for (const scatter of ['flat', 'binomial'] as const)
        problems.push(
          ...reduceScatterProblems(plan, { gatherAlgorithm: () => scatter, reduceScatterTop: 'recursive-halving' }, ALLGATHER_RUNS.slice(0, 1)).map(
            (x) => `${name}, ${scatter}: ${x}`,
          ),
        );
    }
    randomPlans(8, 0x5ca7).forEach((plan, k) => {
      problems.push(
        ...reduceScatterProblems(plan, { reduceAlgorithm: () => 'flat', reduceScatterTop: 'recursive-halving' }, ALLGATHER_RUNS).map(
          (x) => `random plan ${k}: ${x}`,
        ),
      );
    });
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('recursive halving among one group: log2 n rounds of n/2, n/4, … 1 blocks (n − 1 exchanges in all); the fold sends every block and gets its own back', () => {
    for (const n of [2, 4, 8, 16]) {
      const view = positionView(n);
      for (let me = 0; me < n; me++) {
        const steps = groupReduceScatterSteps('recursive-halving', view, me, (i) => [i]);
        expect(steps.map((s) => s.kind)).toEqual(Array(n - 1).fill(StepKind.SendRecvReduce));
        // the last block in is its own; the peers are me XOR n/2, …, me XOR 1
        expect(steps[n - 2]!.range2!.first).toBe(me);
        const peers = [...new Set(steps.map((s) => s.peer))];
        expect(peers).toEqual(Array.from({ length: Math.log2(n) }, (_, j) => me ^ (n >> (j + 1))));
      }
    }
    // 6 = 4 + 2: positions 0 and 2 fold into 1 and 3, send all 6 blocks, receive their own
    const six = positionView(6);
    const folded = groupReduceScatterSteps('recursive-halving', six, 2, (i) => [i]);
    expect(folded.map((s) => [s.kind, s.peer])).toEqual([...Array(6).fill([StepKind.Send, 3]), [StepKind.Recv, 3]]);
    expect(folded.at(-1)!.range!.first).toBe(2);
    const partner = groupReduceScatterSteps('recursive-halving', six, 3, (i) => [i]);
    expect(partner.slice(0, 6).every((s) => s.kind === StepKind.RecvReduce && s.peer === 2)).toBe(true);
    expect(partner.at(-1)).toMatchObject({ kind: StepKind.Send, peer: 2, range: { first: 2 } });
    expect(groupReduceScatterSteps('recursive-halving', positionView(1), 0, (i) => [i])).toEqual([]);
  });

  it('the ring among one group: n − 1 rounds, the last one bringing each position its own block', () => {
    for (let n = 1; n <= 9; n++) {
      const view = positionView(n);
      for (let me = 0; me < n; me++) {
        const steps = groupReduceScatterSteps('ring', view, me, (i) => [i]);
        expect(steps).toHaveLength(n - 1);
        // the last block in is its own
        if (n > 1) expect(steps[n - 2]!.range2?.first ?? steps[n - 2]!.range!.first).toBe(me);
      }
    }
  });
});
