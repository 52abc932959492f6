import { describe, expect, it } from 'vitest';
import {
  StepDefault,
  StepKind,
  StepWord,
  stepHasCount2,
  stepHasEveryRankCombines,
  stepHasFirst2,
  stepHasGroup,
  stepHasJoined,
  stepHasOrder,
  stepHasPeer2,
  stepHasPollMicros,
} from '../src/abi.generated.js';
import { STEP_WORDS, WHOLE, decodeSteps, encodeSchedule, rankBlock, type Step } from '../src/algorithms/schedule.js';
import { nativeStepRoundTrip, type NativeStep } from '../src/native.js';

/**
 * Both sides' step codecs on one list: TypeScript encodes steps of every kind
 * (encodeSchedule), the addon decodes the words (DecodeSteps, native/src/engine/step.h, as setPlan
 * does) and encodes what it decoded again (EncodeSteps). Field by field, the addon must hold
 * what each step says — the fields its kind carries as given, every other at its default — and
 * give back the same words. native/test/step_test.cc checks the C++ codec on its own.
 */

const KINDS = Object.values(StepKind);

/** A step of `kind` with a range and every field its kind carries, each unlike its default. */
function full(kind: StepKind, i: number): Step {
  const step: Step = { kind, peer: 10 + i, level: i % 3, range: { first: 1, count: 2, of: 5 } };
  if (stepHasGroup(kind)) step.group = 20 + i;
  if (stepHasPollMicros(kind)) step.pollMicros = 30 + i;
  if (stepHasPeer2(kind)) {
    step.peer2 = 40 + i;
    step.range2 = { first: 3, count: 2 };
  }
  if (stepHasOrder(kind)) step.order = 1;
  if (stepHasJoined(kind)) step.joined = true;
  if (stepHasEveryRankCombines(kind)) step.everyRankCombines = true;
  return step;
}

/** Every field of `step` as the addon should hold it: what the step gives where its kind carries the field, else the default. */
function fields(step: Step): NativeStep {
  const { kind } = step;
  const range = step.range ?? WHOLE;
  const carried = (has: (k: StepKind) => boolean, value: number | undefined, fallback: number): number => (has(kind) ? (value ?? fallback) : fallback);
  return {
    kind,
    peer: step.peer,
    level: step.level,
    group: carried(stepHasGroup, step.group, StepDefault.group),
    pollMicros: carried(stepHasPollMicros, step.pollMicros, StepDefault.pollMicros),
    first: range.first,
    count: range.count,
    of: range.of,
    peer2: carried(stepHasPeer2, step.peer2, StepDefault.peer2),
    first2: carried(stepHasFirst2, step.range2?.first, StepDefault.first2),
    count2: carried(stepHasCount2, step.range2?.count, StepDefault.count2),
    order: carried(stepHasOrder, step.order, StepDefault.order),
    joined: stepHasJoined(kind) && step.joined === true,
    everyRankCombines: stepHasEveryRankCombines(kind) && step.everyRankCombines === true,
  };
}

const fullSteps = KINDS.map((kind, i) => full(kind, i));
const steps: Step[] = [
  ...fullSteps,
  // Every kind with nothing but what every step has: the other fields at their defaults.
  ...KINDS.map((kind, i) => ({ kind, peer: 50 + i, level: 0 })),
  // Rank blocks (of 0), rank 0's among them.
  { kind: StepKind.Send, peer: 1, level: 0, range: rankBlock(0) },
  { kind: StepKind.SendRecv, peer: 3, level: 2, range: rankBlock(12), peer2: 4, range2: { first: 5, count: 1 } },
  { kind: StepKind.ShmBcast, peer: 2, level: 1, group: 0, range: rankBlock(7) },
  // The values besides 1 that the other fields take.
  { kind: StepKind.RecvReduce, peer: 6, level: 1, order: 0 },
  { kind: StepKind.ShmAllreduce, peer: -1, level: 0, everyRankCombines: false },
  { kind: StepKind.AwaitDone, peer: 0, level: 0, pollMicros: 0 },
];

describe('the step codecs of TypeScript and the addon agree', () => {
  const words = encodeSchedule({ collective: 'bcast', root: 0, steps });
  const native = nativeStepRoundTrip(words);

  it('the list has a step of every kind, the encoding a word per field', () => {
    expect(new Set(steps.map((s) => s.kind))).toEqual(new Set(KINDS));
    expect(words).toHaveLength(steps.length * STEP_WORDS);
    expect(native.steps).toHaveLength(steps.length);
  });

  it('the addon decodes every field of every step as TypeScript encoded it', () => {
    steps.forEach((step, i) => {
      expect({ step: i, ...native.steps[i] }).toEqual({ step: i, ...fields(step) });
    });
  });

  it("the addon's own encoding of what it decoded is TypeScript's, word for word", () => {
    expect([...native.words]).toEqual([...words]);
  });

  it('TypeScript decodes its own encoding back', () => {
    expect(decodeSteps(encodeSchedule({ collective: 'bcast', root: 0, steps: fullSteps }))).toEqual(fullSteps);
  });

  it('the word the group and pollMicros share holds each for its own kinds, and the addon reads each into its own field', () => {
    const bcast = steps.findIndex((s) => s.kind === StepKind.ShmBcast);
    const awaitPut = steps.findIndex((s) => s.kind === StepKind.AwaitPut);
    const send = steps.findIndex((s) => s.kind === StepKind.Send);
    expect(StepWord.group).toBe(StepWord.pollMicros);
    expect(words[bcast * STEP_WORDS + StepWord.group]).toBe(steps[bcast]!.group);
    expect(words[awaitPut * STEP_WORDS + StepWord.pollMicros]).toBe(steps[awaitPut]!.pollMicros);
    expect(words[send * STEP_WORDS + StepWord.group]).toBe(StepDefault.group);
    expect(native.steps[bcast]).toMatchObject({ group: steps[bcast]!.group, pollMicros: StepDefault.pollMicros });
    expect(native.steps[awaitPut]).toMatchObject({ group: StepDefault.group, pollMicros: steps[awaitPut]!.pollMicros });
  });
});
