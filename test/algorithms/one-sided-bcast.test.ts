import { describe, expect, it } from 'vitest';
import { oneSidedBcastSchedule } from '../../src/algorithms/one-sided-bcast.js';
import { decodeSteps, encodeSchedule, StepKind } from '../../src/algorithms/schedule.js';
import { simulate } from './simulator.js';

const ceilLog2 = (n: number) => (n <= 1 ? 0 : Math.ceil(Math.log2(n)));

/** Every rank's one-sided schedule run together: the root's elements, three of them, to every rank. */
function run(size: number, root: number, transport: 'eager' | 'rendezvous') {
  const schedules = Array.from({ length: size }, (_, r) => oneSidedBcastSchedule(size, root, r));
  return simulate(schedules, { elements: 3, initial: (r, e) => (r === root ? `v${e}` : undefined), transport });
}

describe('S1 one-sided bcast schedules', () => {
  it('reach every rank from every root, p = 1 … 17, puts eager and rendezvous', () => {
    for (let p = 1; p <= 17; p++) {
      for (let root = 0; root < p; root++) {
        for (const transport of ['eager', 'rendezvous'] as const) {
          const sim = run(p, root, transport);
          expect(sim.errors, `p ${p} root ${root} ${transport}`).toEqual([]);
          expect(sim.finished, `p ${p} root ${root}`).toBe(true);
          for (let r = 0; r < p; r++) expect(sim.buffers[r]).toEqual(['v0', 'v1', 'v2']);
        }
      }
    }
  });

  it('puts to the largest subtree first, so the data reaches the last rank after ⌈log2 p⌉ puts', () => {
    // onSend counts a sender's puts (CountDone too, after its puts: it never feeds a receive)
    for (const p of [2, 3, 5, 8, 9, 13, 16]) {
      const schedules = Array.from({ length: p }, (_, r) => oneSidedBcastSchedule(p, 0, r));
      const arrival = new Array<number>(p).fill(0);
      const sent = new Array<number>(p).fill(0);
      simulate(schedules, {
        elements: 1,
        initial: (r) => (r === 0 ? 1 : undefined),
        onSend: (from) => arrival[from]! + ++sent[from]!,
        onReceive: (at, _from, token) => {
          if (arrival[at] === 0 && at !== 0) arrival[at] = token as number;
        },
      });
      expect(Math.max(...arrival), `p ${p}`).toBe(ceilLog2(p));
    }
  });

  it('has the shape S1 describes: wait for the parent, put to the children, count done at the root', () => {
    // p = 6, root 2: relative ranks 0…5 are 2, 3, 4, 5, 0, 1
    expect(oneSidedBcastSchedule(6, 2, 2).steps.map((s) => [s.kind, s.peer])).toEqual([
      [StepKind.Put, 0],
      [StepKind.Put, 4],
      [StepKind.Put, 3],
      [StepKind.AwaitDone, 2],
    ]);
    expect(oneSidedBcastSchedule(6, 2, 4).steps.map((s) => [s.kind, s.peer])).toEqual([
      [StepKind.AwaitPut, 2],
      [StepKind.Put, 5],
      [StepKind.CountDone, 2],
    ]);
    expect(oneSidedBcastSchedule(1, 0, 0).steps.map((s) => s.kind)).toEqual([StepKind.AwaitDone]);
  });

  it('carries the poll sleep through the encoded form', () => {
    const s = oneSidedBcastSchedule(4, 1, 3, 50);
    expect(decodeSteps(encodeSchedule(s))).toEqual(s.steps);
    expect(s.steps.filter((x) => x.pollMicros === 50).map((x) => x.kind)).toEqual([StepKind.AwaitPut]);
    expect(oneSidedBcastSchedule(4, 1, 1, 50).steps.at(-1)).toEqual({ kind: StepKind.AwaitDone, peer: 1, level: 0, pollMicros: 50 });
  });

  it('the simulator rejects a rank that does not wait for its parent', () => {
    const schedules = Array.from({ length: 4 }, (_, r) => oneSidedBcastSchedule(4, 0, r));
    schedules[3] = { ...schedules[3]!, steps: schedules[3]!.steps.filter((s) => s.kind !== StepKind.AwaitPut) };
    const sim = simulate(schedules, { elements: 1, initial: (r) => (r === 0 ? 1 : undefined) });
    expect(sim.errors.join('\n')).toMatch(/never received|CountDone|does not hold/);
  });
});
