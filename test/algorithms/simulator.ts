import { StepKind, type Schedule, type Step } from '../../src/algorithms/schedule.js';
import type { GroupPlan } from '../../src/groups/plan.js';

/**
 * Runs every rank's schedule together over the strictest transport: rendezvous. A Send completes
 * only when its peer executes the matching Recv/RecvReduce naming the sender (and vice versa); a
 * rank blocks on its current step until then. Matching a Send with a step of another kind, or a
 * different level, is recorded as an error (the executor would see a mismatched header).
 */
export interface Simulation<V> {
  /** Every rank executed every step. */
  finished: boolean;
  /** Ranks blocked forever, with the step they are stuck on. */
  stuck: { rank: number; step: Step }[];
  errors: string[];
  values: V[];
  /** Messages delivered, as [from, to, level]. */
  messages: [number, number, number][];
}

export function simulate<V>(
  schedules: readonly Schedule[],
  initial: (rank: number) => V,
  /** The new value of the receiver of a Recv (bcast) or RecvReduce (reduce). */
  deliver: (kind: StepKind, receiver: V, sent: V) => V,
): Simulation<V> {
  const n = schedules.length;
  const pc = new Int32Array(n);
  const values = Array.from({ length: n }, (_, r) => initial(r));
  const errors: string[] = [];
  const messages: [number, number, number][] = [];
  const current = (r: number): Step | undefined => schedules[r]!.steps[pc[r]!];
  const queue: number[] = [];
  for (let r = 0; r < n; r++) queue.push(r);
  while (queue.length > 0) {
    const a = queue.pop()!;
    const s = current(a);
    if (s === undefined) continue;
    const b = s.peer;
    if (!Number.isInteger(b) || b < 0 || b >= n || b === a) {
      errors.push(`rank ${a} step ${pc[a]}: bad peer ${b}`);
      pc[a] = schedules[a]!.steps.length; // abandon; shows up as an error, not a hang
      continue;
    }
    const t = current(b);
    if (t === undefined || t.peer !== a) continue; // b is busy elsewhere or done: a waits
    const [sender, receiver, ss, rs] = s.kind === StepKind.Send ? [a, b, s, t] : [b, a, t, s];
    if (ss.kind !== StepKind.Send || rs.kind === StepKind.Send) {
      // two sends (or two receives) facing each other: blocks forever on a rendezvous transport
      continue;
    }
    if (ss.level !== rs.level) errors.push(`send ${sender}→${receiver} on level ${ss.level} met a receive on level ${rs.level}`);
    values[receiver] = deliver(rs.kind, values[receiver]!, values[sender]!);
    messages.push([sender, receiver, ss.level]);
    pc[a]!++;
    pc[b]!++;
    queue.push(a, b);
  }
  const stuck: { rank: number; step: Step }[] = [];
  for (let r = 0; r < n; r++) {
    const s = current(r);
    if (s !== undefined) stuck.push({ rank: r, step: s });
  }
  return { finished: stuck.length === 0, stuck, errors, values, messages };
}

/** Every step's peer is a member of the group of level `step.level` in the rank's chain. */
export function outOfGroupSteps(plan: GroupPlan, schedules: readonly Schedule[]): string[] {
  const bad: string[] = [];
  schedules.forEach((s, rank) => {
    const chain = plan.chain(rank);
    for (const step of s.steps) {
      const level = plan.levels[step.level];
      const g = chain.find((c) => c.level === level);
      if (g === undefined || !g.members.includes(step.peer)) bad.push(`rank ${rank} → ${step.peer} on level ${step.level} (${level})`);
    }
  });
  return bad;
}

/** A reduce value: which ranks contributed (bitwise or), the plain sum of 2^rank, and how many contributions. */
export interface Contribution {
  or: bigint;
  sum: bigint;
  count: number;
}

export const contributionOf = (rank: number): Contribution => ({ or: 1n << BigInt(rank), sum: 1n << BigInt(rank), count: 1 });

export function combine(a: Contribution, b: Contribution): Contribution {
  return { or: a.or | b.or, sum: a.sum + b.sum, count: a.count + b.count };
}
