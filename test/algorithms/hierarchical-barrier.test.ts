import { describe, expect, it } from 'vitest';
import type { GroupBarrierAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { barrierSchedules, topGroup } from '../../src/algorithms/hierarchical.js';
import { StepKind, type Step } from '../../src/algorithms/schedule.js';
import { planGroups, type Group, type GroupPlan } from '../../src/groups/plan.js';
import { coreLocality, range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';
import { barrierProblems, barrierRunProblems } from './barrier-check.js';
import { byLevel, PLANS, randomPlans, s3Plan } from './plan-shapes.js';

const CT = (k: number): GroupBarrierAlgorithm => ({ combiningTree: k });
const UNIFORM: GroupBarrierAlgorithm[] = ['central-counter', CT(2), CT(3), CT(4), 'dissemination'];
const name = (a: GroupBarrierAlgorithm): string => (typeof a === 'string' ? a : `combining-tree:${a.combiningTree}`);

/** Uniform choices, the default, and mixes by level (low / middle / top). */
function choices(plan: GroupPlan): { name: string; barrierAlgorithm?: (g: Group) => GroupBarrierAlgorithm }[] {
  const mixes: [GroupBarrierAlgorithm, GroupBarrierAlgorithm, GroupBarrierAlgorithm][] = [
    ['central-counter', CT(3), 'dissemination'],
    ['dissemination', 'central-counter', CT(4)],
    [CT(2), 'dissemination', 'central-counter'],
    [CT(4), CT(3), CT(2)],
  ];
  return [
    { name: 'default' },
    ...UNIFORM.map((a) => ({ name: name(a), barrierAlgorithm: () => a })),
    ...mixes.map((m) => ({ name: m.map(name).join(' / ') + ' by level', barrierAlgorithm: byLevel(plan, ...m) })),
  ];
}

function checkPlan(plan: GroupPlan): string[] {
  return choices(plan).flatMap((c) => barrierProblems(plan, { barrierAlgorithm: c.barrierAlgorithm }).map((x) => `${c.name}: ${x}`));
}

describe('hierarchical barrier, simulated', () => {
  it('6 plan shapes × p = 1…20, every algorithm and mixes by level, both transports: every exit follows every entry, in-group messages only', () => {
    const problems: string[] = [];
    for (const { name, plan } of PLANS) problems.push(...checkPlan(plan).map((x) => `${name}: ${x}`));
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('random placements: shuffled ranks, unequal nodes, random switches (40 plans)', () => {
    const problems: string[] = [];
    randomPlans(40, 20240611).forEach((plan, i) => problems.push(...checkPlan(plan).map((x) => `plan ${i} (${plan.size} ranks): ${x}`)));
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('S3 in small (72 ranks, 4 levels) and ranks interleaved over 3 nodes', () => {
    const plans = [
      s3Plan(12, 6, 3, 4),
      planGroups(range(0, 17).map((rank) => ({ rank, node: `n${rank % 3}`, locality: coreLocality(Math.floor(rank / 3), 3) }))),
    ];
    for (const plan of plans) {
      expect(plan.levels.length).toBeGreaterThanOrEqual(2);
      expect(checkPlan(plan).slice(0, 10)).toEqual([]);
    }
  });

  it('the S3 example (64 nodes × 36 ranks, 2304 ranks, 4 levels), every rank simulated: dissemination on top, central counters inside nodes', () => {
    const plan = s3Plan(64, 36, 18, 16);
    expect(plan.levels.length).toBe(4);
    const mixes: [GroupBarrierAlgorithm, GroupBarrierAlgorithm, GroupBarrierAlgorithm][] = [
      ['central-counter', CT(4), 'dissemination'],
      [CT(2), 'dissemination', 'central-counter'],
    ];
    for (const m of mixes) expect(barrierProblems(plan, { barrierAlgorithm: byLevel(plan, ...m) }).slice(0, 10)).toEqual([]);
  });

  it('the checker rejects a hierarchical barrier whose lower releases do not wait', () => {
    const plan = s3Plan(4, 6, 3, 2);
    const both = range(0, plan.size - 1).map((r) =>
      barrierSchedules(plan, r, { barrierAlgorithm: byLevel<GroupBarrierAlgorithm>(plan, 'central-counter', CT(2), 'dissemination') }),
    );
    const whole = both.map((b) => [...b.arrive.steps, ...b.release.steps]);
    expect(barrierRunProblems(whole, 'rendezvous')).toEqual([]);
    // leave out every release: messages left over and exits that know too little
    expect(
      barrierRunProblems(
        both.map((b) => b.arrive.steps),
        'eager',
      ).some((p) => /finishes without knowing/.test(p)),
    ).toBe(true);
    // the top group's members send their releases down before their own (top) release arrives: only a non-dissemination top has one
    const flat = range(0, plan.size - 1).map((r) => barrierSchedules(plan, r, { barrierAlgorithm: () => 'central-counter' }));
    const early = flat.map((b) => {
      const top = b.release.steps.filter((s) => s.kind === StepKind.Recv && s.level === plan.levels.length - 1);
      return [...b.arrive.steps, ...b.release.steps.filter((s) => !top.includes(s)), ...top];
    });
    const problems = barrierRunProblems(early, 'eager');
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.every((p) => /finishes without knowing/.test(p))).toBe(true);
  });
});

describe('hierarchical barrier schedules by hand', () => {
  const send = (peer: number, level: number): Step => ({ kind: StepKind.Send, peer, level });
  const recv = (peer: number, level: number): Step => ({ kind: StepKind.Recv, peer, level });
  const exchange = (to: number, from: number, level: number): Step => ({
    kind: StepKind.SendRecv,
    peer: to,
    level,
    peer2: from,
    range2: { first: 0, count: 1 },
  });
  // ranks round-robin over two nodes: node groups {0, 2, 4} and {1, 3, 5}, world {0, 1}
  const plan = planGroups(range(0, 5).map((rank) => ({ rank, node: `n${rank % 2}`, locality: '' })));
  const L = { node: 0, world: 1 };

  it('default combining-tree:2: node groups gather to their leaders, the leaders meet at the top, releases come back down', () => {
    expect(plan.levels).toEqual(['node', 'world']);
    expect(barrierSchedules(plan, 0)).toEqual({
      arrive: { collective: 'reduce', root: 0, steps: [recv(2, L.node), recv(4, L.node), recv(1, L.world)] },
      release: { collective: 'bcast', root: 0, steps: [send(1, L.world), send(4, L.node), send(2, L.node)] },
    });
    expect(barrierSchedules(plan, 1).arrive.steps).toEqual([recv(3, L.node), recv(5, L.node), send(0, L.world)]);
    expect(barrierSchedules(plan, 1).release.steps).toEqual([recv(0, L.world), send(5, L.node), send(3, L.node)]);
    expect(barrierSchedules(plan, 5)).toEqual({
      arrive: { collective: 'reduce', root: 0, steps: [send(1, L.node)] },
      release: { collective: 'bcast', root: 0, steps: [recv(1, L.node)] },
    });
  });

  it('dissemination on top needs no release there; a dissemination below the top still releases from its leader', () => {
    const top = topGroup(plan)!;
    const options = { barrierAlgorithm: (g: Group): GroupBarrierAlgorithm => (g === top ? 'dissemination' : 'central-counter') };
    expect(barrierSchedules(plan, 1, options)).toEqual({
      arrive: { collective: 'reduce', root: 0, steps: [recv(3, L.node), recv(5, L.node), exchange(0, 0, L.world)] },
      release: { collective: 'bcast', root: 0, steps: [send(3, L.node), send(5, L.node)] },
    });
    const below = { barrierAlgorithm: (): GroupBarrierAlgorithm => 'dissemination' };
    expect(barrierSchedules(plan, 4, below)).toEqual({
      arrive: { collective: 'reduce', root: 0, steps: [exchange(0, 2, L.node), exchange(2, 0, L.node)] },
      release: { collective: 'bcast', root: 0, steps: [recv(0, L.node)] },
    });
  });

  it('a job of one rank has no steps; a bad rank or algorithm is rejected', () => {
    const one = planGroups([{ rank: 0, node: 'a', locality: '' }]);
    expect(barrierSchedules(one, 0, { barrierAlgorithm: () => 'central-counter' })).toEqual({
      arrive: { collective: 'reduce', root: 0, steps: [] },
      release: { collective: 'bcast', root: 0, steps: [] },
    });
    thrown(() => barrierSchedules(plan, 6), 'EINVAL');
    thrown(() => barrierSchedules(plan, 0, { barrierAlgorithm: () => CT(1) }), 'ECONFIG');
  });
});
