import { describe, expect, it } from 'vitest';
import {
  STEP_WORDS,
  StepKind,
  RANK_BLOCKS,
  WHOLE,
  blockElements,
  decodeSteps,
  encodeSchedule,
  hasExchanges,
  rankBlock,
  type Schedule,
  type Step,
} from '../../src/algorithms/schedule.js';

describe('encodeSchedule (format v2, 12 words per step)', () => {
  it('writes [kind, peer, level, group, first, count, of, peer2, first2, count2, order, everyRankCombines] per step, in order', () => {
    const s: Schedule = {
      collective: 'reduce',
      root: 3,
      steps: [
        { kind: StepKind.RecvReduce, peer: 7, level: 0, order: 0 },
        { kind: StepKind.RecvReduce, peer: 12, level: 2, order: 1, range: { first: 2, count: 3, of: 8 } },
        { kind: StepKind.Send, peer: 3, level: 1 },
      ],
    };
    const words = encodeSchedule(s);
    expect(words).toBeInstanceOf(Int32Array);
    expect(STEP_WORDS).toBe(12);
    expect([...words]).toEqual(
      [
        [3, 7, 0, 0, 0, 1, 1, -1, 0, 0, 0, 0],
        [3, 12, 2, 0, 2, 3, 8, -1, 0, 0, 1, 0],
        [1, 3, 1, 0, 0, 1, 1, -1, 0, 0, 0, 0],
      ].flat(),
    );
    expect(decodeSteps(words)).toEqual(s.steps);
  });

  it('keeps the numeric kinds the C++ side expects', () => {
    expect(StepKind).toEqual({
      Send: 1,
      Recv: 2,
      RecvReduce: 3,
      ShmBcast: 4,
      SendRecv: 5,
      SendRecvReduce: 6,
      ShmReduce: 7,
      ShmAllreduce: 8,
      ShmAllgather: 9,
      ShmAreaBcast: 10,
      ShmAreaReduce: 11,
      ShmWindowAllreduce: 12,
      Put: 13,
      AwaitPut: 14,
      CountDone: 15,
      AwaitDone: 16,
      ShmWindowAllgather: 17,
      ShmAreaCall: 18,
    });
    expect(encodeSchedule({ collective: 'bcast', root: 0, steps: [] })).toHaveLength(0);
  });

  it('round-trips every kind of step, with and without ranges', () => {
    const steps: Step[] = [
      { kind: StepKind.Send, peer: 1, level: 0 },
      { kind: StepKind.Send, peer: 1, level: 0, range: { first: 0, count: 2, of: 4 } },
      { kind: StepKind.Recv, peer: 2, level: 1, range: { first: 3, count: 1, of: 4 } },
      { kind: StepKind.RecvReduce, peer: 4, level: 3, order: 1 },
      { kind: StepKind.ShmBcast, peer: 3, level: 1, group: 2 },
      { kind: StepKind.ShmBcast, peer: 0, level: 0, group: 0, range: { first: 1, count: 1, of: 2 } },
      { kind: StepKind.SendRecv, peer: 5, level: 2, range: { first: 1, count: 1, of: 3 }, peer2: 6, range2: { first: 0, count: 1 } },
      { kind: StepKind.SendRecv, peer: 5, level: 2, peer2: 5, range2: { first: 0, count: 1 } },
      { kind: StepKind.SendRecvReduce, peer: 7, level: 0, range: { first: 2, count: 2, of: 4 }, peer2: 7, range2: { first: 0, count: 2 }, order: 0 },
      { kind: StepKind.SendRecvReduce, peer: 7, level: 0, peer2: 8, range2: { first: 0, count: 1 }, order: 1 },
      { kind: StepKind.ShmReduce, peer: 2, level: 1, group: 9 },
      { kind: StepKind.ShmAllreduce, peer: -1, level: 0 },
      { kind: StepKind.ShmAllreduce, peer: -1, level: 0, everyRankCombines: true },
      { kind: StepKind.ShmAllgather, peer: -1, level: 0 },
      { kind: StepKind.ShmAllgather, peer: -1, level: 0, everyRankCombines: true },
      { kind: StepKind.ShmWindowAllgather, peer: -1, level: 0 },
      { kind: StepKind.ShmWindowAllgather, peer: -1, level: 0, everyRankCombines: true },
    ];
    const words = encodeSchedule({ collective: 'bcast', root: 0, steps });
    expect(words).toHaveLength(steps.length * STEP_WORDS);
    expect(decodeSteps(words)).toEqual(steps);
    // a shared-memory step carries its group id in the fourth word
    expect([...words.subarray(4 * STEP_WORDS, 5 * STEP_WORDS)]).toEqual([4, 3, 1, 2, 0, 1, 1, -1, 0, 0, 0, 0]);
    // an exchange carries peer2 and range2 in words 7 … 9 and the order in word 10
    expect([...words.subarray(8 * STEP_WORDS, 9 * STEP_WORDS)]).toEqual([6, 7, 0, 0, 2, 2, 4, 7, 0, 2, 0, 0]);
    // the shared allreduce's protocol is the last word
    expect([...words.subarray(12 * STEP_WORDS, 13 * STEP_WORDS)]).toEqual([8, -1, 0, 0, 0, 1, 1, -1, 0, 0, 0, 1]);
  });

  it("round-trips rank-block ranges (of 0), rank 0's block included, in the same word layout", () => {
    const steps: Step[] = [
      { kind: StepKind.Send, peer: 1, level: 0, range: rankBlock(0) },
      { kind: StepKind.Recv, peer: 2, level: 1, range: rankBlock(7) },
      { kind: StepKind.SendRecv, peer: 3, level: 2, range: rankBlock(0), peer2: 4, range2: { first: 0, count: 1 } },
      { kind: StepKind.SendRecv, peer: 3, level: 2, range: rankBlock(12), peer2: 4, range2: { first: 5, count: 1 } },
    ];
    expect(rankBlock(9)).toEqual({ first: 9, count: 1, of: RANK_BLOCKS });
    expect(RANK_BLOCKS).toBe(0);
    const words = encodeSchedule({ collective: 'allgather', root: 0, steps });
    expect(decodeSteps(words)).toEqual(steps);
    expect([...words.subarray(0, STEP_WORDS)]).toEqual([1, 1, 0, 0, 0, 1, 0, -1, 0, 0, 0, 0]);
    expect([...words.subarray(3 * STEP_WORDS, 4 * STEP_WORDS)]).toEqual([5, 3, 2, 0, 12, 1, 0, 4, 5, 1, 0, 0]);
  });

  it('cuts segments into blocks the same way on both sides, empty blocks included', () => {
    expect(blockElements(10, 0, 1, 1)).toEqual([0, 10]);
    expect(blockElements(10, 1, 2, 4)).toEqual([2, 7]);
    expect(blockElements(3, 0, 1, 8)).toEqual([0, 0]);
    expect(blockElements(3, 7, 1, 8)).toEqual([2, 3]);
    // the blocks of one segment partition it
    for (const n of [0, 1, 3, 7, 64]) {
      for (const of of [1, 2, 3, 5, 8, 16]) {
        let end = 0;
        for (let b = 0; b < of; b++) {
          const [s, e] = blockElements(n, b, 1, of);
          expect(s).toBe(end);
          end = e;
        }
        expect(end).toBe(n);
      }
    }
    expect(WHOLE).toEqual({ first: 0, count: 1, of: 1 });
  });

  it('tells schedules with exchanges apart', () => {
    expect(hasExchanges({ collective: 'bcast', root: 0, steps: [{ kind: StepKind.Send, peer: 1, level: 0 }] })).toBe(false);
    expect(
      hasExchanges({
        collective: 'reduce',
        root: 0,
        steps: [{ kind: StepKind.SendRecvReduce, peer: 1, level: 0, peer2: 1, range2: { first: 0, count: 1 }, order: 0 }],
      }),
    ).toBe(true);
  });
});
