import {
  allgatherSchedules,
  allreduceSchedules,
  bcastSchedule,
  gatherSchedule,
  reduceSchedule,
  reduceScatterSchedules,
  reductionOrder,
  scatterSchedule,
  type AllgatherOptions,
  type AllreduceOptions,
  type BcastOptions,
  type GatherOptions,
  type ReduceOptions,
  type ReduceScatterOptions,
} from '../../src/algorithms/hierarchical.js';
import { StepKind, type Schedule, type Step } from '../../src/algorithms/schedule.js';
import type { Group, GroupPlan } from '../../src/groups/plan.js';
import { range } from '../helpers/placements.js';
import { combineTerms, contribution, outOfGroupSteps, simulate, termProblems, type Simulation, type Transport } from './simulator.js';

/**
 * Whole-plan checks of bcast, reduce and allreduce schedules by simulation; each returns the
 * problems found (empty when correct), so loops over many configurations stay fast.
 */
export interface SimRun {
  elements: number;
  segments: number;
  transport: Transport;
}

export const ONE_ELEMENT: SimRun[] = [{ elements: 1, segments: 1, transport: 'rendezvous' }];

/** Element counts below and above the block counts, two segments, both transports. */
export const SEVERAL_RUNS: SimRun[] = [
  { elements: 1, segments: 1, transport: 'rendezvous' },
  { elements: 3, segments: 2, transport: 'eager' },
  { elements: 7, segments: 1, transport: 'rendezvous' },
  { elements: 64, segments: 1, transport: 'eager' },
];

/** A shared-memory engine id for every group of the plan (the simulator does not care which node a group is on). */
export function shmRegistry(plan: GroupPlan): { shmGroup: (g: Group) => number | undefined; members: Map<number, readonly number[]> } {
  const ids = new Map<Group, number>();
  const members = new Map<number, readonly number[]>();
  for (const groups of plan.groups.values()) {
    for (const g of groups) {
      ids.set(g, ids.size + 1);
      members.set(ids.size, g.members);
    }
  }
  return { shmGroup: (g) => ids.get(g), members };
}

const ranksOf = (plan: GroupPlan): number[] => range(0, plan.size - 1);

function runProblems(sim: Simulation<string>, where: string): string[] {
  const problems = sim.errors.map((e) => `${where}: ${e}`);
  if (!sim.finished) problems.push(`${where}: deadlock, stuck ${sim.stuck.map((s) => `${s.rank}@${s.step.kind}→${s.step.peer}`).join(' ')}`);
  return problems;
}

const describeRun = (r: SimRun): string => `${r.elements}×${r.segments} ${r.transport}`;

function eachElement(r: SimRun, f: (segment: number, element: number, at: number) => void): void {
  for (let s = 0; s < r.segments; s++) for (let e = 0; e < r.elements; e++) f(s, e, s * r.elements + e);
}

/** A bcast from `root`: every rank ends with the root's data, nobody sends what it does not hold. */
export function bcastProblems(plan: GroupPlan, root: number, options: BcastOptions, runs: readonly SimRun[], shm?: Map<number, readonly number[]>): string[] {
  const schedules = ranksOf(plan).map((r) => bcastSchedule(plan, r, root, options));
  const problems = outOfGroupSteps(plan, schedules);
  schedules.forEach((s, r) => {
    if (s.collective !== 'bcast' || s.root !== root) problems.push(`rank ${r}: schedule says ${s.collective} from ${s.root}`);
    if (r === root && s.steps.some((x) => x.kind === StepKind.Recv)) problems.push(`the root receives`);
    if (s.steps.some((x) => x.kind === StepKind.RecvReduce || x.kind === StepKind.SendRecvReduce || x.kind === StepKind.ShmReduce))
      problems.push(`rank ${r} reduces in a bcast`);
  });
  for (const run of runs) {
    const where = `bcast root ${root} ${describeRun(run)}`;
    const sim = simulate(schedules, { ...run, shmGroups: shm, initial: (r, e, s) => (r === root ? contribution(root, e, s) : undefined) });
    problems.push(...runProblems(sim, where));
    sim.buffers.forEach((b, r) =>
      eachElement(run, (s, e, at) => {
        if (b[at] !== contribution(root, e, s)) problems.push(`${where}: rank ${r} element ${e} holds ${b[at]}`);
      }),
    );
  }
  return problems;
}

/**
 * A reduce to `root`: the root ends with every rank's contribution exactly once per element, in
 * `reductionOrder(plan)` when the operator does not commute.
 */
export function reduceProblems(plan: GroupPlan, root: number, options: ReduceOptions, runs: readonly SimRun[], shm?: Map<number, readonly number[]>): string[] {
  const schedules = ranksOf(plan).map((r) => reduceSchedule(plan, r, root, options));
  const problems = outOfGroupSteps(plan, schedules);
  schedules.forEach((s, r) => {
    if (s.collective !== 'reduce' || s.root !== root) problems.push(`rank ${r}: schedule says ${s.collective} to ${s.root}`);
  });
  const ordered = options.commutative === false;
  const expected = ordered ? reductionOrder(plan) : ranksOf(plan);
  for (const run of runs) {
    const where = `reduce root ${root} ${describeRun(run)}`;
    const sim = simulate(schedules, { ...run, shmGroups: shm, initial: contribution, combine: combineTerms });
    problems.push(...runProblems(sim, where));
    eachElement(run, (s, e, at) => problems.push(...termProblems(sim.buffers[root]![at], s, e, expected, !ordered).map((p) => `${where}: ${p}`)));
  }
  return problems;
}

/**
 * Whether the rank's B holds its reduce-phase result afterwards: a rank whose steps only hand
 * its data on (Send, a ShmReduce to another member) reads its input directly and never writes B.
 */
function writesB(s: Schedule, rank: number): boolean {
  const handsOn = (x: Step) => x.kind === StepKind.Send || (x.kind === StepKind.ShmReduce && x.peer !== rank);
  return s.steps.length === 0 || !s.steps.every(handsOn);
}

/**
 * An allreduce: the reduce phase, then the bcast phase on the same B (undefined where the reduce
 * phase never wrote it). Every rank ends with the same term (bitwise the same result), each
 * contribution exactly once, in `reductionOrder(plan)` when the operator does not commute.
 */
export function allreduceProblems(plan: GroupPlan, options: AllreduceOptions, runs: readonly SimRun[], shm?: Map<number, readonly number[]>): string[] {
  const both = ranksOf(plan).map((r) => allreduceSchedules(plan, r, options));
  const problems = [
    ...outOfGroupSteps(
      plan,
      both.map((b) => b.reduce),
    ),
    ...outOfGroupSteps(
      plan,
      both.map((b) => b.bcast),
    ),
  ];
  if (!both.every((b) => b.reduce.root === 0 && b.bcast.root === 0 && b.reduce.collective === 'reduce' && b.bcast.collective === 'bcast'))
    problems.push('phases are not reduce/bcast at 0');
  const ordered = options.commutative === false;
  const expected = ordered ? reductionOrder(plan) : ranksOf(plan);
  for (const run of runs) {
    const where = `allreduce ${describeRun(run)}`;
    const reduced = simulate(
      both.map((b) => b.reduce),
      { ...run, shmGroups: shm, initial: contribution, combine: combineTerms },
    );
    problems.push(...runProblems(reduced, `${where} reduce phase`));
    const spread = simulate(
      both.map((b) => b.bcast),
      {
        ...run,
        shmGroups: shm,
        initial: (r, e, s) => (writesB(both[r]!.reduce, r) ? reduced.buffers[r]![s * run.elements + e] : undefined),
      },
    );
    problems.push(...runProblems(spread, `${where} bcast phase`));
    eachElement(run, (s, e, at) => {
      const first = spread.buffers[0]![at];
      problems.push(...termProblems(first, s, e, expected, !ordered).map((p) => `${where}: ${p}`));
      spread.buffers.forEach((b, r) => {
        if (b[at] !== first) problems.push(`${where}: rank ${r} element ${e} differs from rank 0`);
      });
    });
  }
  return problems;
}

/** An allgather run: `e` elements per rank block and segment (a segment holds p·e), segments, transport. */
export interface AllgatherRun {
  e: number;
  segments: number;
  transport: Transport;
}

/** Blocks of one and several elements, two segments, both transports. */
export const ALLGATHER_RUNS: AllgatherRun[] = [
  { e: 1, segments: 1, transport: 'rendezvous' },
  { e: 2, segments: 2, transport: 'eager' },
  { e: 3, segments: 1, transport: 'rendezvous' },
];

/**
 * An allgather: the gather phase on rank blocks (every rank starting with its own block), then
 * the bcast phase on the same B. Every rank ends with every rank's block at its place in rank
 * order; every message stays in a group; no rank receives a block twice in the gather phase; the
 * gather phase only moves rank blocks, the bcast phase only ordinary ranges.
 */
export function allgatherProblems(plan: GroupPlan, options: AllgatherOptions, runs: readonly AllgatherRun[], shm?: Map<number, readonly number[]>): string[] {
  const p = plan.size;
  const both = ranksOf(plan).map((r) => allgatherSchedules(plan, r, options));
  const problems = [
    ...outOfGroupSteps(
      plan,
      both.map((b) => b.gather),
    ),
    ...outOfGroupSteps(
      plan,
      both.map((b) => b.bcast),
    ),
  ];
  if (!both.every((b) => b.gather.root === 0 && b.bcast.root === 0 && b.gather.collective === 'allgather' && b.bcast.collective === 'bcast'))
    problems.push('phases are not allgather/bcast at 0');
  both.forEach((b, r) => {
    if (b.gather.steps.some((s) => s.range?.of !== 0)) problems.push(`rank ${r}: a gather step without a rank block`);
    if (b.bcast.steps.some((s) => s.range?.of === 0)) problems.push(`rank ${r}: a bcast step with a rank block`);
    // a shm allgather's publications of other ranks are read: received too
    const received = b.gather.steps.flatMap((s) =>
      s.kind === StepKind.Recv || (s.kind === StepKind.ShmBcast && s.peer !== r) ? [s.range!.first] : s.kind === StepKind.SendRecv ? [s.range2!.first] : [],
    );
    if (new Set(received).size !== received.length || received.includes(r)) problems.push(`rank ${r}: receives a block twice or its own`);
  });
  for (const run of runs) {
    const where = `allgather e ${run.e} × ${run.segments} ${run.transport}`;
    const elements = p * run.e;
    const common = { elements, segments: run.segments, transport: run.transport, shmGroups: shm };
    const own = (r: number, element: number, segment: number) => (Math.floor(element / run.e) === r ? contribution(r, element % run.e, segment) : undefined);
    const gathered = simulate(
      both.map((b) => b.gather),
      { ...common, rankBlockElements: run.e, initial: own },
    );
    problems.push(...runProblems(gathered, `${where} gather phase`));
    const spread = simulate(
      both.map((b) => b.bcast),
      { ...common, initial: (r, e, s) => gathered.buffers[r]![s * elements + e] },
    );
    problems.push(...runProblems(spread, `${where} bcast phase`));
    spread.buffers.forEach((b, r) => {
      for (let s = 0; s < run.segments; s++) {
        for (let e = 0; e < elements; e++) {
          const expected = contribution(Math.floor(e / run.e), e % run.e, s);
          if (b[s * elements + e] !== expected && problems.length < 50)
            problems.push(`${where}: rank ${r} segment ${s} element ${e} holds ${b[s * elements + e]}, expected ${expected}`);
        }
      }
    });
  }
  return problems;
}

/**
 * A gather to `root` and a scatter from it, on rank blocks: the gather starts with every rank's
 * own block and ends with every block at its place at the root; the scatter starts with every
 * block at the root and ends with every rank's own block at its place there. Every message stays
 * in a group, every step moves one rank block, no rank receives a block twice, its own only in a
 * scatter (every rank but the root), and no rank sends a block it does not hold (the simulator's
 * check).
 */
export function gatherScatterProblems(plan: GroupPlan, root: number, options: GatherOptions, runs: readonly AllgatherRun[]): string[] {
  const p = plan.size;
  const gathers = ranksOf(plan).map((r) => gatherSchedule(plan, r, root, options));
  const scatters = ranksOf(plan).map((r) => scatterSchedule(plan, r, root, options));
  const problems = [...outOfGroupSteps(plan, gathers), ...outOfGroupSteps(plan, scatters)];
  for (const [name, schedules] of [
    ['gather', gathers],
    ['scatter', scatters],
  ] as const) {
    schedules.forEach((s, r) => {
      if (s.collective !== name || s.root !== root) problems.push(`rank ${r}: ${name} schedule says ${s.collective} at ${s.root}`);
      if (s.steps.some((x) => x.range?.of !== 0 || (x.kind !== StepKind.Send && x.kind !== StepKind.Recv)))
        problems.push(`rank ${r}: a ${name} step that is not a Send or Recv of a rank block`);
      const received = s.steps.filter((x) => x.kind === StepKind.Recv).map((x) => x.range!.first);
      // A scatter hands every rank but the root its own block; a gather never sends a rank its own.
      const ownExpected = name === 'scatter' && r !== root;
      if (new Set(received).size !== received.length) problems.push(`rank ${r}: ${name} receives a block twice`);
      if (received.includes(r) !== ownExpected) problems.push(`rank ${r}: ${name} ${ownExpected ? 'never receives' : 'receives'} its own block`);
    });
  }
  for (const run of runs) {
    const where = `root ${root}, e ${run.e} × ${run.segments} ${run.transport}`;
    const elements = p * run.e;
    const common = { elements, segments: run.segments, transport: run.transport, rankBlockElements: run.e };
    const value = (element: number, segment: number): string => contribution(Math.floor(element / run.e), element % run.e, segment);
    const gathered = simulate(gathers, { ...common, initial: (r, e, s) => (Math.floor(e / run.e) === r ? value(e, s) : undefined) });
    problems.push(...runProblems(gathered, `${where} gather`));
    const scattered = simulate(scatters, { ...common, initial: (r, e, s) => (r === root ? value(e, s) : undefined) });
    problems.push(...runProblems(scattered, `${where} scatter`));
    for (let s = 0; s < run.segments; s++) {
      for (let e = 0; e < elements; e++) {
        const at = s * elements + e;
        const owner = Math.floor(e / run.e);
        if (gathered.buffers[root]![at] !== value(e, s) && problems.length < 50)
          problems.push(`${where} gather: the root's element ${e} of segment ${s} is ${gathered.buffers[root]![at]}`);
        if (scattered.buffers[owner]![at] !== value(e, s) && problems.length < 50)
          problems.push(`${where} scatter: rank ${owner}'s element ${e} of segment ${s} is ${scattered.buffers[owner]![at]}`);
      }
    }
  }
  return problems;
}

/**
 * A reduce-scatter (commutative operator): the reduce phase on the whole vector, then the phase
 * of rank blocks on the same B. Every rank ends with every rank's contribution to its own block
 * exactly once; every message stays in a group.
 */
export function reduceScatterProblems(
  plan: GroupPlan,
  options: ReduceScatterOptions,
  runs: readonly AllgatherRun[],
  shm?: Map<number, readonly number[]>,
): string[] {
  const p = plan.size;
  const both = ranksOf(plan).map((r) => reduceScatterSchedules(plan, r, options));
  const problems = [
    ...outOfGroupSteps(
      plan,
      both.map((b) => b.reduce),
    ),
    ...outOfGroupSteps(
      plan,
      both.map((b) => b.blocks),
    ),
  ];
  both.forEach((b, r) => {
    if (b.blocks.steps.some((s) => s.range?.of !== 0)) problems.push(`rank ${r}: a step of the block phase without a rank block`);
  });
  for (const run of runs) {
    const where = `reduce-scatter e ${run.e} × ${run.segments} ${run.transport}`;
    const elements = p * run.e;
    const common = { elements, segments: run.segments, transport: run.transport, shmGroups: shm };
    const reduced = simulate(
      both.map((b) => b.reduce),
      { ...common, initial: contribution, combine: combineTerms },
    );
    problems.push(...runProblems(reduced, `${where} reduce phase`));
    const scattered = simulate(
      both.map((b) => b.blocks),
      { ...common, rankBlockElements: run.e, combine: combineTerms, initial: (r, e, s) => reduced.buffers[r]![s * elements + e] },
    );
    problems.push(...runProblems(scattered, `${where} block phase`));
    for (let r = 0; r < p; r++) {
      for (let s = 0; s < run.segments; s++) {
        for (let i = 0; i < run.e; i++) {
          const e = r * run.e + i;
          problems.push(...termProblems(scattered.buffers[r]![s * elements + e], s, e, ranksOf(plan), true).map((x) => `${where}: rank ${r}: ${x}`));
        }
      }
    }
  }
  return problems;
}
