import { describe, expect, it } from 'vitest';
import { expectEveryRankOk, jobScript, leftoverSegments, runJob } from '../helpers/jobs.js';

/**
 * Shared windows (comm.allocShared, sharedQuery, freeShared) in jobs started by `topocoll run`:
 * test/jobs/windows.mjs allocates windows of every datatype with a length per rank, reads every
 * local rank's part, runs bcast (the readers copying straight out of the root's window), reduce,
 * allreduce, allgather (every other block copied straight out of its owner's window), a request
 * and a Promise twin on windows against its own reference, and
 * checks misuse, the shm budget (ENOMEM), freeing and close().
 */
const job = jobScript('windows.mjs');

describe('shared windows', () => {
  for (const [name, args] of [
    ['1 rank', ['-n', '1']],
    ['2 ranks on one node (a core each)', ['-n', '2']],
    ['4 ranks on one node', ['-n', '4']],
    ['3 ranks on 2 emulated nodes (a window per node)', ['-n', '3', '--nodes', '2']],
    ['5 ranks on 3 emulated nodes', ['-n', '5', '--nodes', '3']],
  ] as const) {
    it(name, async () => {
      await expectEveryRankOk(runJob([...args, job], 180_000), Number(args[1]));
      expect(await leftoverSegments()).toEqual([]);
    });
  }

  it('a rank SIGKILLed after allocating: the survivors’ window bcast throws EPEERLOST, nothing is left in /dev/shm', async () => {
    const r = runJob(['-n', '3', job, '--fault', 'die'], 60_000);
    for (const rank of [0, 1])
      expect(r.lines.find((l) => l.startsWith(`rank ${rank} caught`)) ?? '(nothing)', r.stdout + r.stderr).toMatch(/caught EPEERLOST: /);
    expect(await leftoverSegments()).toEqual([]);
  });

  for (const [fault, what] of [
    ['mixed', 'the root bcasts out of a window, the others into ordinary memory'],
    ['mixed-allreduce', 'an allreduce into windows on every rank but one'],
    ['mixed-allgather', 'an allgather out of windows on every rank but one'],
  ]) {
    it(`${what} → EMISMATCH on every rank`, async () => {
      const r = runJob(['-n', '3', job, '--fault', fault!], 60_000);
      for (const rank of [0, 1, 2]) {
        expect(r.lines.find((l) => l.startsWith(`rank ${rank} caught`)) ?? '(nothing)', r.stdout + r.stderr).toMatch(/caught EMISMATCH: /);
      }
      expect(await leftoverSegments()).toEqual([]);
    });
  }
});
