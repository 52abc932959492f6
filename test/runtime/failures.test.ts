import { describe, expect, it } from 'vitest';
import { configFile, jobScript, leftoverSegments, runJob } from '../helpers/jobs.js';

/** Failure behaviour of real jobs started with `topocoll run`. */
// Small one-node allreduces with every rank combining (by default only while each rank has a core).
const everyRank = ['--config', configFile('allreduce: { shm: every-rank }\nallgather: { shm: every-rank }\n')];

function run(args: string[]) {
  const r = runJob(['--timeout', '5', ...args], 120_000);
  const caught = new Map<number, string>();
  const finished: number[] = [];
  for (const line of r.stdout.split('\n')) {
    const m = /^rank (\d+) caught (E[A-Z]+): /.exec(line);
    if (m) caught.set(Number(m[1]), m[2]!);
    const f = /^rank (\d+) finished$/.exec(line);
    if (f) finished.push(Number(f[1]));
  }
  return { status: r.status, signal: r.signal, caught, finished, stdout: r.stdout, stderr: r.stderr };
}

describe('a rank killed with SIGKILL in the middle of a collective', () => {
  for (const [name, args, n, collective] of [
    ['4 ranks on one node, allreduce', ['-n', '4'], 4, 'allreduce'],
    ['4 ranks on one node, allreduce, every rank combining', ['-n', '4', ...everyRank], 4, 'allreduce'],
    ['4 ranks on one node, a 2 MiB shared-memory bcast (the dead reader holds a set)', ['-n', '4'], 4, 'bcast'],
    ['6 ranks on 3 emulated nodes (the failure crosses TCP)', ['-n', '6', '--nodes', '3'], 6, 'allreduce'],
    ['4 ranks on one node, a 256 KiB-per-rank allgather', ['-n', '4'], 4, 'allgather'],
    ['6 ranks on 3 emulated nodes, a 256 KiB-per-rank allgather', ['-n', '6', '--nodes', '3'], 6, 'allgather'],
  ] as const) {
    it(`${name}: every survivor gets EPEERLOST, the launcher fails, /dev/shm is clean`, async () => {
      const r = run([...args, jobScript('peer-dies.mjs'), collective]);
      expect(r.signal).toBeNull(); // the launcher itself was not killed by the test timeout
      expect(r.status).toBe(128 + 9);
      expect(r.stderr).toMatch(new RegExp(`rank ${n - 1} was killed by SIGKILL`));
      expect([...r.caught.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: n - 1 }, (_, i) => i));
      expect(new Set(r.caught.values())).toEqual(new Set(['EPEERLOST']));
      expect(await leftoverSegments()).toEqual([]);
    });
  }
});

describe('mismatched calls across ranks give errors, not hangs or wrong data', () => {
  for (const kind of ['count', 'dtype', 'op', 'root', 'collective', 'allgather-count', 'allgatherv-counts', 'allgather-collective', 'allgather-shm-or-not']) {
    for (const [where, args] of [
      ['1 node', ['--nodes', '1']],
      ['2 nodes', ['--nodes', '2']],
      ['1 node, every rank combining', ['--nodes', '1', ...everyRank]],
    ] as const) {
      it(`${kind} differs on rank 1 (${where})`, async () => {
        const r = run(['-n', '4', ...args, jobScript('mismatch.mjs'), kind]);
        expect(r.signal).toBeNull();
        expect(r.status).not.toBe(0);
        // No rank may get through both barriers after the mismatched call.
        expect(r.finished).toEqual([]);
        expect(r.caught.size).toBe(4);
        // The ranks that see the mismatch report it as such; the rest learn of the abort.
        expect([...r.caught.values()]).toContain('EMISMATCH');
        for (const code of r.caught.values()) expect(['EMISMATCH', 'EPEERLOST']).toContain(code);
        expect(await leftoverSegments()).toEqual([]);
      });
    }
  }
});
