import { describe, expect, it } from 'vitest';
import { expectEveryRankOk, jobScript, leftoverSegments, okRanks, runJob, runJobOverSocketLayer } from '../helpers/jobs.js';

/**
 * Non-blocking collectives as requests (comm.i*: test(), wait(), await) in jobs started by
 * `topocoll run`: test/jobs/requests.mjs keeps six requests of every kind in flight at once,
 * completes them by test() alone (no event-loop turn), wait(), await and with blocking calls and
 * Promise twins between them, checks call order and every result against its own reference.
 */
const job = jobScript('requests.mjs');

describe('requests: several collectives in flight, completed by test(), wait() and await', () => {
  for (const [name, args] of [
    ['1 rank', ['-n', '1']],
    ['3 ranks on one node', ['-n', '3']],
    ['4 ranks on 2 emulated nodes (TCP between them)', ['-n', '4', '--nodes', '2']],
    ['5 ranks on 3 emulated nodes', ['-n', '5', '--nodes', '3']],
  ] as const) {
    it(name, async () => {
      await expectEveryRankOk(runJob([...args, job], 120_000), Number(args[1]));
    });
  }

  it('4 ranks on 2 emulated nodes over a JavaScript layer (wait() refused, test() polled with the event loop free)', async () => {
    await expectEveryRankOk(runJobOverSocketLayer(['-n', '4', '--nodes', '2', job, '--layer', 'socket'], 120_000), 4);
  });
});

describe('requests that go wrong', () => {
  const outcome = (lines: readonly string[], rank: number, request: number) =>
    lines.find((l) => l.startsWith(`rank ${rank} request ${request} `)) ?? '(nothing)';

  it('bad arguments throw EINVAL at the call, before anything is queued; the communicator goes on', () => {
    const r = runJob(['-n', '2', job, '--fault', 'args'], 60_000);
    expect(r.status, r.stderr).toBe(0);
    for (const rank of [0, 1]) {
      const caught = r.lines.filter((l) => l.startsWith(`rank ${rank} caught `));
      expect(caught, r.stdout).toHaveLength(4);
      for (const line of caught) expect(line).toMatch(/caught EINVAL: /);
    }
    expect(okRanks(r.lines), r.stderr).toEqual([0, 1]);
  });

  it('a buffer released while a request is pending: a resizable ArrayBuffer → EINVAL at the call; a transfer of one copies it or throws, and the request still fills it', () => {
    const r = runJob(['-n', '3', '--nodes', '2', job, '--fault', 'release'], 60_000);
    expect(r.status, r.stderr).toBe(0);
    for (const rank of [0, 1, 2]) {
      const caught = r.lines.filter((l) => l.startsWith(`rank ${rank} caught `));
      expect(caught, r.stdout).toHaveLength(3);
      for (const line of caught) expect(line).toMatch(/caught EINVAL: .*resizable ArrayBuffer/);
    }
    expect(okRanks(r.lines), r.stderr).toEqual([0, 1, 2]);
  });

  for (const where of [
    ['-n', '3'],
    ['-n', '4', '--nodes', '2'],
  ]) {
    const n = Number(where[1]);
    const on = where.length > 2 ? '2 emulated nodes' : 'one node';
    it(`${on}: a rank SIGKILLed with requests in flight → the survivors' test(), wait() and await throw EPEERLOST, in bounded time`, async () => {
      const r = runJob([...where, job, '--fault', 'die'], 60_000);
      for (let rank = 0; rank < n - 1; rank++) expect(outcome(r.lines, rank, 2), r.stdout).toMatch(/caught EPEERLOST: /);
      expect(await leftoverSegments()).toEqual([]);
    });
  }

  it('one node: rank 0 in an iallreduce where the others are in an ibcast of the same bytes → EMISMATCH on every rank', () => {
    const r = runJob(['-n', '3', job, '--fault', 'mismatch'], 60_000);
    for (let rank = 0; rank < 3; rank++) expect(outcome(r.lines, rank, 1), r.stdout).toMatch(/caught EMISMATCH: /);
  });
});
