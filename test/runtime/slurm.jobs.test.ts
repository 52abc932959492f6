import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobScript, leftoverSegments, repoRoot } from '../helpers/jobs.js';
import { slurmUnavailable, startSlurmCluster, type SlurmCluster } from '../helpers/slurm.js';

/**
 * topocoll jobs started the way cluster users start them, `srun -n P node app.mjs`, on a
 * one-node Slurm cluster this file starts itself (test/helpers/slurm.ts). Each job size runs
 * RUNS times in a row; every run must end with every rank's `ok`, exit status 0, within
 * JOB_LIMIT_MS (a hang bound, far above the 1–2 s a job takes), and leave nothing behind.
 */
const RUNS = 10;
const JOB_LIMIT_MS = 60_000;

const unavailable = slurmUnavailable();
if (unavailable !== undefined) {
  // Skipped, not failed: only a machine without the packages lands here (CI installs them).
  console.warn(`\n*** SKIPPING test/runtime/slurm.jobs.test.ts: ${unavailable} ***\n`);
}

/** Rendezvous files topocoll keys by Slurm job (tmpdir()/topocoll-<uid>-slurm-<job>.<step>…). */
function slurmRendezvousFiles(): string[] {
  const dirs = [...new Set([tmpdir(), '/tmp'])];
  return dirs.flatMap((d) =>
    readdirSync(d)
      .filter((n) => n.startsWith('topocoll-') && n.includes('slurm-'))
      .map((n) => `${d}/${n}`),
  );
}

describe.skipIf(unavailable !== undefined)('srun starts topocoll jobs on a one-node Slurm cluster', () => {
  let cluster: SlurmCluster;
  let filesBefore: Set<string>;

  beforeAll(async () => {
    filesBefore = new Set(slurmRendezvousFiles());
    const started = Date.now();
    const c = await startSlurmCluster();
    // slurmUnavailable() said the packages are here, so a skip now would be a contradiction.
    if ('skip' in c) throw new Error(c.skip);
    cluster = c;
    console.log(`Slurm cluster up in ${Date.now() - started} ms (node ${c.nodeName}, ${c.cpus} CPUs, ${c.dir})`);
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 30_000);

  // p = 3 exceeds the 2 CPUs of the CI machine: Slurm runs such a step only with --overcommit.
  const jobs: [string, string[]][] = [
    ['srun -n 2', ['-n', '2']],
    ['srun --overcommit -n 3', ['--overcommit', '-n', '3']],
  ];

  it.each(jobs)(
    `%s node test/jobs/launch-check.mjs, ${RUNS} times in a row`,
    async (_name, srunArgs) => {
      const size = Number(srunArgs[srunArgs.length - 1]);
      const want = Array.from({ length: size }, (_, r) => `rank ${r} ok`);
      const times: number[] = [];
      for (let run = 1; run <= RUNS; run++) {
        const r = await cluster.srun([...srunArgs, process.execPath, jobScript('launch-check.mjs')], { cwd: repoRoot, timeoutMs: JOB_LIMIT_MS });
        const context = `run ${run} of ${RUNS}: srun ${srunArgs.join(' ')} → status ${r.status}, signal ${r.signal}, ${r.ms} ms${r.timedOut ? ' (killed: over the limit)' : ''}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}\n${r.timedOut || r.status !== 0 ? cluster.logTail() : ''}`;
        expect(r.timedOut, context).toBe(false);
        expect(r.status, context).toBe(0);
        expect([...r.lines].sort(), context).toEqual(want);
        times.push(r.ms);
      }
      console.log(
        `srun ${srunArgs.join(' ')}: ${RUNS} jobs, ${times.reduce((a, b) => a + b, 0)} ms in all, ${Math.min(...times)}–${Math.max(...times)} ms each`,
      );

      // Nothing left behind: no job, no slurmstepd or rank, no shared segment, no rendezvous file.
      let queue = cluster.queue();
      for (let i = 0; i < 50 && queue.length > 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
        queue = cluster.queue();
      }
      expect(queue, 'jobs still in squeue').toEqual([]);
      let stray = cluster.strayProcesses();
      for (let i = 0; i < 50 && stray.length > 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
        stray = cluster.strayProcesses();
      }
      expect(stray, 'processes of finished jobs still running').toEqual([]);
      expect(await leftoverSegments()).toEqual([]);
      expect(slurmRendezvousFiles().filter((f) => !filesBefore.has(f))).toEqual([]);
    },
    RUNS * (JOB_LIMIT_MS + 10_000),
  );
});
