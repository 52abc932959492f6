import { describe, expect, it } from 'vitest';
import { expectEveryRankOk, jobScript, leftoverSegments, runJob } from '../helpers/jobs.js';

/**
 * S1's one-sided binomial bcast (bcast.algorithm `one-sided`) in jobs started by `topocoll run`:
 * test/jobs/one-sided.mjs runs it from every root on shared windows — requests polled with
 * test(), Sync calls, Promise twins, five datatypes, 0 … 1 MiB + odd, six requests in flight —
 * and checks every result against the root's pattern; faults: a forwarder killed while puts are
 * in flight, a buffer at another offset of its window part, ordinary memory on one rank.
 */
const job = jobScript('one-sided.mjs');

describe('one-sided bcast (S1)', () => {
  // p = 1 … 9 on 1 … 4 emulated nodes: ranks alone on their node (puts as messages), nodes of
  // several ranks (puts into windows), and both in one tree.
  for (const [p, nodes] of [
    [1, 1],
    [2, 1],
    [2, 2],
    [3, 3],
    [4, 1],
    [5, 2],
    [6, 4],
    [7, 3],
    [8, 4],
    [9, 1],
    [9, 4],
  ] as const) {
    it(`${p} rank(s) on ${nodes} emulated node(s)`, async () => {
      const args = nodes > 1 ? ['-n', String(p), '--nodes', String(nodes)] : ['-n', String(p)];
      await expectEveryRankOk(runJob([...args, job], 240_000), p);
      expect(await leftoverSegments()).toEqual([]);
    });
  }

  it('with S1’s polling (bcast.pollMicros 50) instead of the doorbell, 4 ranks on 2 emulated nodes', async () => {
    await expectEveryRankOk(runJob(['-n', '4', '--nodes', '2', job, '--poll-us', '50'], 240_000), 4);
  });

  for (const [name, args] of [
    ['one node', ['-n', '4']],
    ['2 emulated nodes', ['-n', '4', '--nodes', '2']],
  ] as const) {
    it(`${name}: a forwarder SIGKILLed while puts are in flight → EPEERLOST on every survivor, nothing left in /dev/shm`, async () => {
      const r = runJob([...args, job, '--fault', 'die'], 60_000);
      for (const rank of [0, 2, 3])
        expect(r.lines.find((l) => l.startsWith(`rank ${rank} caught`)) ?? '(nothing)', r.stdout + r.stderr).toMatch(/caught EPEERLOST: /);
      expect(await leftoverSegments()).toEqual([]);
    });
  }

  it('a buffer at another offset of its window part → EMISMATCH on every rank, and the parent wrote nothing', async () => {
    const r = runJob(['-n', '4', job, '--fault', 'offset'], 60_000);
    for (const rank of [0, 1, 2, 3]) {
      expect(r.lines.find((l) => l.startsWith(`rank ${rank} caught`)) ?? '(nothing)', r.stdout + r.stderr).toMatch(/caught EMISMATCH: /);
    }
    expect(r.lines, r.stdout).toContain('rank 1 window untouched');
    expect(await leftoverSegments()).toEqual([]);
  });

  for (const [fault, what] of [
    ['mixed', 'ordinary memory on one rank, windows on the others'],
    ['root-ordinary', 'ordinary memory at the root, windows on the others'],
    ['windows', 'another window on one rank'],
  ] as const) {
    for (const where of [
      ['-n', '4'],
      ['-n', '4', '--nodes', '2'],
    ]) {
      const on = where.length > 2 ? '2 emulated nodes' : 'one node';
      it(`${on}: ${what} → EMISMATCH on every rank`, async () => {
        const r = runJob([...where, job, '--fault', fault], 60_000);
        for (const rank of [0, 1, 2, 3]) {
          expect(r.lines.find((l) => l.startsWith(`rank ${rank} caught`)) ?? '(nothing)', r.stdout + r.stderr).toMatch(/caught EMISMATCH: /);
        }
        expect(await leftoverSegments()).toEqual([]);
      });
    }
  }
});
