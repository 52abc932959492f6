import { describe, expect, it } from 'vitest';
import { expectEveryRankOk, jobScript, leftoverSegments, runJob, runJobOverSocketLayer } from '../helpers/jobs.js';

/**
 * Sub-communicators (comm.split, comm.dup) in jobs started by `topocoll run`: test/jobs/split.mjs
 * splits by parity (children spanning the emulated nodes), by node with one rank left out, dups,
 * interleaves parent and children (Promise calls started in different orders on different
 * ranks), dups a child, closes children and goes on with the parent — every result checked
 * against what the rank computes from the parent ranks, colors and keys.
 */
const job = jobScript('split.mjs');

describe('split and dup, checked collectives on every sub-communicator', () => {
  for (const [name, args] of [
    ['1 rank', ['-n', '1']],
    ['4 ranks on one node', ['-n', '4']],
    ['4 ranks on 2 emulated nodes (TCP between them)', ['-n', '4', '--nodes', '2']],
    ['5 ranks on 3 emulated nodes', ['-n', '5', '--nodes', '3']],
  ] as const) {
    it(name, async () => {
      await expectEveryRankOk(runJob([...args, job], 120_000), Number(args[1]));
    });
  }

  it('4 ranks on 2 emulated nodes over a JavaScript layer (createCommunicator; children on the same layer)', async () => {
    await expectEveryRankOk(runJobOverSocketLayer(['-n', '4', '--nodes', '2', job, '--layer', 'socket'], 120_000), 4);
  });
});

describe('a split that goes wrong fails on every rank, in bounded time', () => {
  const caught = (lines: readonly string[], rank: number) => lines.find((l) => l.startsWith(`rank ${rank} caught `)) ?? '(nothing)';
  for (const where of [
    ['-n', '3'],
    ['-n', '4', '--nodes', '2'],
  ]) {
    const n = Number(where[1]);
    const on = where.length > 2 ? '2 emulated nodes' : 'one node';
    it(`${on}: a rank in another collective of the same shape → EMISMATCH everywhere`, () => {
      const r = runJob([...where, job, '--fault', 'mismatch'], 60_000);
      for (let rank = 0; rank < n; rank++) expect(caught(r.lines, rank), r.stdout).toMatch(/caught EMISMATCH: /);
    });
    it(`${on}: a rank dies instead of splitting → EPEERLOST on every survivor`, () => {
      const r = runJob([...where, job, '--fault', 'die'], 60_000);
      for (let rank = 0; rank < n - 1; rank++) expect(caught(r.lines, rank), r.stdout).toMatch(/caught EPEERLOST: /);
    });
    it(`${on}: a bad color → EINVAL on that rank before anything is sent, EPEERLOST on the others once it exits`, async () => {
      const r = runJob([...where, job, '--fault', 'color'], 60_000);
      expect(caught(r.lines, 0), r.stdout).toMatch(/caught EINVAL: .*split: color must be undefined or an integer in 0 … 2\^31 − 1, got -5/);
      for (let rank = 1; rank < n; rank++) expect(caught(r.lines, rank), r.stdout).toMatch(/caught EPEERLOST: .*rank 0/);
      expect(await leftoverSegments()).toEqual([]);
    });
  }
});
