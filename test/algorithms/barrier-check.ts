import type { GroupBarrierAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { groupBarrierSteps } from '../../src/algorithms/group-barrier.js';
import type { GroupView } from '../../src/algorithms/group-steps.js';
import { barrierSchedules, type BarrierOptions } from '../../src/algorithms/hierarchical.js';
import { StepKind, type Schedule, type Step } from '../../src/algorithms/schedule.js';
import type { GroupPlan } from '../../src/groups/plan.js';
import { outOfGroupSteps, simulate, type Transport } from './simulator.js';

/**
 * Barrier checks by simulation. Every rank runs its steps (for a barrier call: the arrive phase,
 * then the release phase, as one list) with zero-byte messages on the simulator's transports,
 * and causality is tracked with one bit per rank: rank r starts knowing only "r entered the
 * barrier"; a message carries what its sender knew when it posted it, and a receive adds that
 * to the receiver's knowledge (a rendezvous Send completing teaches the sender nothing). The
 * barrier property: when a rank has done its last step, it knows that every rank entered — every
 * entry lies in the causal past of every exit. Also: every rank finishes, no message is left
 * over or mismatched (simulator errors), steps are Send/Recv/SendRecv of the whole (empty)
 * segment.
 */
export const BARRIER_TRANSPORTS: readonly Transport[] = ['eager', 'rendezvous'];

/** Problems of one run of `steps[r]` for every rank r on `transport`; empty when it is a correct barrier. */
export function barrierRunProblems(steps: readonly (readonly Step[])[], transport: Transport, where = transport): string[] {
  const p = steps.length;
  const words = Math.ceil(p / 32);
  const knows = Array.from({ length: p }, (_, r) => {
    const bits = new Uint32Array(words);
    bits[r >>> 5] = 1 << (r & 31);
    return bits;
  });
  const problems: string[] = [];
  steps.forEach((list, r) => {
    for (const s of list) {
      if (s.kind !== StepKind.Send && s.kind !== StepKind.Recv && s.kind !== StepKind.SendRecv)
        problems.push(`${where}: rank ${r} has a step of kind ${s.kind}`);
      if (s.range !== undefined || (s.range2 !== undefined && (s.range2.first !== 0 || s.range2.count !== 1)))
        problems.push(`${where}: rank ${r} has a step with a partial range`);
    }
  });
  const schedules: Schedule[] = steps.map((list) => ({ collective: 'bcast', root: 0, steps: [...list] }));
  const sim = simulate<never>(schedules, {
    elements: 0,
    transport,
    initial: () => undefined,
    onSend: (from) => knows[from]!.slice(),
    onReceive: (at, _from, token) => {
      const mine = knows[at]!;
      const theirs = token as Uint32Array;
      for (let w = 0; w < words; w++) mine[w]! |= theirs[w]!;
    },
  });
  problems.push(...sim.errors.map((e) => `${where}: ${e}`));
  if (!sim.finished)
    problems.push(
      `${where}: deadlock, stuck ${sim.stuck
        .slice(0, 8)
        .map((s) => `${s.rank}@${s.step.kind}→${s.step.peer}`)
        .join(' ')}`,
    );
  else {
    for (let r = 0; r < p && problems.length < 20; r++) {
      const missing: number[] = [];
      for (let s = 0; s < p && missing.length < 5; s++) if ((knows[r]![s >>> 5]! & (1 << (s & 31))) === 0) missing.push(s);
      if (missing.length > 0)
        problems.push(`${where}: rank ${r} finishes without knowing that rank(s) ${missing.join(', ')}${missing.length === 5 ? ', …' : ''} entered`);
    }
  }
  return problems;
}

/** A group of n members (global ranks 0 … n−1, level 0) running `algorithm`: arrive then release (or, with `arriveOnly`, arrive alone). */
export function groupBarrierProblems(
  algorithm: GroupBarrierAlgorithm,
  n: number,
  options: { arriveOnly?: boolean; transports?: readonly Transport[] } = {},
): string[] {
  const view: GroupView = { members: Array.from({ length: n }, (_, i) => i), level: 0 };
  const steps = view.members.map((_, me) => {
    const parts = groupBarrierSteps(algorithm, view, me);
    return options.arriveOnly === true ? parts.arrive : [...parts.arrive, ...parts.release];
  });
  return (options.transports ?? BARRIER_TRANSPORTS).flatMap((t) => barrierRunProblems(steps, t));
}

/**
 * A hierarchical barrier over `plan`: both phases with root 0 (arrive `reduce`, release
 * `bcast`), every message inside a group, and the run checks above on both transports.
 */
export function barrierProblems(plan: GroupPlan, options: BarrierOptions, transports: readonly Transport[] = BARRIER_TRANSPORTS): string[] {
  const both = Array.from({ length: plan.size }, (_, r) => barrierSchedules(plan, r, options));
  const problems = [
    ...outOfGroupSteps(
      plan,
      both.map((b) => b.arrive),
    ),
    ...outOfGroupSteps(
      plan,
      both.map((b) => b.release),
    ),
  ];
  if (!both.every((b) => b.arrive.root === 0 && b.release.root === 0 && b.arrive.collective === 'reduce' && b.release.collective === 'bcast')) {
    problems.push('phases are not reduce/bcast at 0');
  }
  const steps = both.map((b) => [...b.arrive.steps, ...b.release.steps]);
  for (const t of transports) problems.push(...barrierRunProblems(steps, t));
  return problems;
}
