import { describe, expect, it } from 'vitest';
import { scanSchedule } from '../../src/algorithms/scan.js';
import { StepKind } from '../../src/algorithms/schedule.js';
import { range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';
import { combineTerms, contribution, simulate, termProblems } from './simulator.js';

/** scan.ts by simulation: every rank's inclusive or exclusive value, each contribution once and in rank order. */
describe('recursive-doubling scan and exscan', () => {
  it('p = 1…33, both transports, several elements: scan x0…xr, exscan x0…x(r−1), in rank order', () => {
    const problems: string[] = [];
    for (let p = 1; p <= 33; p++) {
      for (const exclusive of [false, true]) {
        for (const [e, transport] of [
          [1, 'rendezvous'],
          [3, 'eager'],
        ] as const) {
          const sim = simulate(
            range(0, p - 1).map((r) => scanSchedule(p, r, exclusive)),
            { elements: e, transport, combine: combineTerms, initial: contribution },
          );
          const where = `p ${p} ${exclusive ? 'exscan' : 'scan'} e ${e} ${transport}`;
          problems.push(...sim.errors.map((x) => `${where}: ${x}`));
          if (!sim.finished) problems.push(`${where}: deadlock`);
          for (let r = exclusive ? 1 : 0; r < p; r++) {
            for (let i = 0; i < e; i++) {
              problems.push(...termProblems(sim.buffers[r]![i], 0, i, range(0, exclusive ? r - 1 : r), false).map((x) => `${where}: rank ${r}: ${x}`));
            }
          }
        }
      }
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('⌈log2 p⌉ rounds (exscan: one more, the shift): a rank sends only upward and receives only from below', () => {
    const scan = scanSchedule(13, 6, false).steps;
    expect(scan.filter((s) => s.kind === StepKind.Send).map((s) => s.peer)).toEqual([7, 8, 10]);
    expect(scan.filter((s) => s.kind === StepKind.RecvReduce).map((s) => s.peer)).toEqual([5, 4, 2]);
    const exscan = scanSchedule(13, 6, true).steps;
    expect(exscan.map((s) => [s.kind, s.peer])).toEqual([
      [StepKind.Send, 7],
      [StepKind.Recv, 5],
      [StepKind.Send, 7],
      [StepKind.RecvReduce, 5],
      [StepKind.Send, 8],
      [StepKind.RecvReduce, 4],
      [StepKind.Send, 10],
      [StepKind.RecvReduce, 2],
    ]);
    expect(scanSchedule(13, 0, true).steps.map((s) => [s.kind, s.peer])).toEqual([[StepKind.Send, 1]]);
    expect(thrown(() => scanSchedule(4, 4, false)).code).toBe('EINVAL');
  });
});
