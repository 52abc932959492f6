/**
 * The step format shared with the C++ executor. A schedule is, for one rank and one collective
 * call, the ordered point-to-point steps it performs; the executor runs them in order, each step
 * blocking until it completes. Buffers are implicit: a bcast moves the one user buffer, a reduce
 * sends the rank's accumulator after every `RecvReduce` has been folded into it.
 */

/** What a step does. A plain object rather than a `const enum` so isolated transpilers agree. */
export const StepKind = {
  /** Send the current buffer (bcast: the data; reduce: the accumulated partial result) to `peer`. */
  Send: 1,
  /** Receive the data from `peer` into the buffer (bcast). */
  Recv: 2,
  /** Receive a partial result from `peer` and reduce it into the accumulator (reduce). */
  RecvReduce: 3,
  /**
   * Broadcast inside a group of one node through the shared-memory engine (S0): every member
   * runs this one step; `peer` is the group's source, `group` its id registered with the engine.
   */
  ShmBcast: 4,
} as const;
export type StepKind = (typeof StepKind)[keyof typeof StepKind];

export interface Step {
  kind: StepKind;
  /** Global rank of the other side. */
  peer: number;
  /** Index into `plan.levels` of the group the step runs in; for diagnostics and message headers. */
  level: number;
  /** ShmBcast: the group id the rank registered with the engine. */
  group?: number;
}

export type CollectiveKind = 'bcast' | 'reduce';

export interface Schedule {
  collective: CollectiveKind;
  root: number;
  steps: Step[];
}

/** Int32 words per encoded step: kind, peer, level, group (ShmBcast; else 0). */
export const STEP_WORDS = 4;

/** The form the C++ executor receives: `[kind, peer, level, group]` per step, in order. */
export function encodeSchedule(s: Schedule): Int32Array {
  const out = new Int32Array(s.steps.length * STEP_WORDS);
  s.steps.forEach((step, i) => {
    out[i * STEP_WORDS] = step.kind;
    out[i * STEP_WORDS + 1] = step.peer;
    out[i * STEP_WORDS + 2] = step.level;
    out[i * STEP_WORDS + 3] = step.group ?? 0;
  });
  return out;
}

/** Inverse of `encodeSchedule`, for tests and diagnostics. */
export function decodeSteps(words: Int32Array): Step[] {
  const steps: Step[] = [];
  for (let i = 0; i + STEP_WORDS <= words.length; i += STEP_WORDS) {
    const step: Step = { kind: words[i]! as StepKind, peer: words[i + 1]!, level: words[i + 2]! };
    if (step.kind === StepKind.ShmBcast) step.group = words[i + 3]!;
    steps.push(step);
  }
  return steps;
}
