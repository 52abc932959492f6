import { describe, expect, it } from 'vitest';
import { STEP_WORDS, StepKind, decodeSteps, encodeSchedule, type Schedule } from '../../src/algorithms/schedule.js';

describe('encodeSchedule', () => {
  it('writes [kind, peer, level, 0] per step, in order', () => {
    const s: Schedule = {
      collective: 'reduce',
      root: 3,
      steps: [
        { kind: StepKind.RecvReduce, peer: 7, level: 0 },
        { kind: StepKind.RecvReduce, peer: 12, level: 2 },
        { kind: StepKind.Send, peer: 3, level: 1 },
      ],
    };
    const words = encodeSchedule(s);
    expect(words).toBeInstanceOf(Int32Array);
    expect(STEP_WORDS).toBe(4);
    expect([...words]).toEqual([3, 7, 0, 0, 3, 12, 2, 0, 1, 3, 1, 0]);
    expect(decodeSteps(words)).toEqual(s.steps);
  });

  it('keeps the numeric kinds the C++ side expects', () => {
    expect(StepKind).toEqual({ Send: 1, Recv: 2, RecvReduce: 3, ShmBcast: 4 });
    expect(encodeSchedule({ collective: 'bcast', root: 0, steps: [] })).toHaveLength(0);
    // A shared-memory step carries its group id in the fourth word, and decodes back.
    const words = encodeSchedule({ collective: 'bcast', root: 3, steps: [{ kind: StepKind.ShmBcast, peer: 3, level: 1, group: 2 }] });
    expect([...words]).toEqual([4, 3, 1, 2]);
    expect(decodeSteps(words)).toEqual([{ kind: StepKind.ShmBcast, peer: 3, level: 1, group: 2 }]);
  });
});
