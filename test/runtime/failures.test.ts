import { describe, expect, it } from 'vitest';
import { jobScript, leftoverSegments, runJob } from '../helpers/jobs.js';

/** Failure behaviour of real jobs started with `topocoll run`. */
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
    ['4 ranks on one node, a 2 MiB shared-memory bcast (the dead reader holds a set)', ['-n', '4'], 4, 'bcast'],
    ['6 ranks on 3 emulated nodes (the failure crosses TCP)', ['-n', '6', '--nodes', '3'], 6, 'allreduce'],
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
  for (const kind of ['count', 'dtype', 'op', 'root', 'collective']) {
    for (const nodes of [1, 2]) {
      it(`${kind} differs on rank 1 (${nodes} node${nodes > 1 ? 's' : ''})`, async () => {
        const r = run(['-n', '4', '--nodes', String(nodes), jobScript('mismatch.mjs'), kind]);
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
