import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { jobScript, leftoverSegments, repoRoot } from '../helpers/jobs.js';
import { runTorchrunJob } from '../helpers/torchrun.js';

/**
 * Jobs started the way cluster users start them — Open MPI's mpirun and the torchrun variables —
 * 10 in a row each (50 jobs in all: a start that fails now and then shows), every rank
 * checking rank, size and results (test/jobs/launch-check.mjs). Slurm's srun: slurm.jobs.test.ts.
 * Hosts made of namespaces: hosts.jobs.test.ts.
 */
const JOBS = 10;

function leftovers(): string[] {
  const uid = process.getuid?.() ?? 0;
  return readdirSync(tmpdir()).filter((n) => n.startsWith(`topocoll-${uid}-`));
}

const mpirun = spawnSync('mpirun', ['--version'], { encoding: 'utf8' });
const haveMpirun = mpirun.status === 0;
if (!haveMpirun) console.warn('launchers.jobs.test.ts: SKIPPING the mpirun jobs: mpirun is not installed (Debian: openmpi-bin)');

describe.skipIf(!haveMpirun)('mpirun (Open MPI)', () => {
  for (const np of [2, 3, 4]) {
    it(`mpirun -np ${np} node app.mjs: ${JOBS} jobs in a row`, async () => {
      for (let job = 0; job < JOBS; job++) {
        // As root (CI) mpirun wants --allow-run-as-root; more ranks than cores need --oversubscribe.
        const r = spawnSync('mpirun', ['--allow-run-as-root', '--oversubscribe', '-np', String(np), process.execPath, jobScript('launch-check.mjs')], {
          encoding: 'utf8',
          cwd: repoRoot,
          timeout: 60_000,
          env: { ...process.env, OMPI_MCA_rmaps_base_oversubscribe: '1' },
        });
        const out = `job ${job}: status ${r.status} signal ${r.signal}\n${r.stdout}\n${r.stderr}`;
        expect(r.signal, out).toBeNull(); // no hang (the 60 s bound)
        expect(r.status, out).toBe(0);
        for (let rank = 0; rank < np; rank++) expect(r.stdout, out).toContain(`rank ${rank} ok`);
      }
      expect(await leftoverSegments()).toEqual([]);
      expect(leftovers()).toEqual([]);
    }, 600_000);
  }
});

describe('the torchrun variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)', () => {
  for (const [what, env] of [
    ['without TOPOCOLL_TOKEN (rank 0 makes one and leaves it in a private file)', {}],
    ['with TOPOCOLL_TOKEN', { TOPOCOLL_TOKEN: 'a6f0c3e2b1d4957f8e7a6b5c4d3e2f10' }],
  ] as const) {
    it(`3 ranks, ${what}: ${JOBS} jobs in a row`, async () => {
      for (let job = 0; job < JOBS; job++) {
        const ranks = await runTorchrunJob(3, jobScript('launch-check.mjs'), [], { env, timeoutMs: 60_000 });
        const out = `job ${job}:\n` + ranks.map((o) => `rank ${o.rank}: code ${o.code} signal ${o.signal}\n${o.stdout}${o.stderr}`).join('\n');
        for (const o of ranks) {
          expect(o.code, out).toBe(0);
          expect(o.stdout, out).toContain(`rank ${o.rank} ok`);
        }
      }
      expect(await leftoverSegments()).toEqual([]);
      expect(leftovers()).toEqual([]);
    }, 600_000);
  }

  it('a rank whose rendezvous runs on another machine without TOPOCOLL_TOKEN gets ECONFIG asking for it', async () => {
    // Rank 0 is simulated by any server on MASTER_PORT with no private file beside it.
    const { createServer } = await import('node:net');
    const server = createServer((s) => s.destroy());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as { port: number }).port;
    try {
      const r = spawnSync(
        process.execPath,
        ['--input-type=module', '-e', `import { init } from 'topocoll'; try { await init(); } catch (e) { console.log(e.code + ' ' + e.message); }`],
        {
          encoding: 'utf8',
          cwd: repoRoot,
          timeout: 30_000,
          env: { ...process.env, RANK: '1', WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port), TOPOCOLL_TOKEN: '' },
        },
      );
      expect(r.stdout).toMatch(/^ECONFIG .*another machine.*TOPOCOLL_TOKEN/);
    } finally {
      server.close();
    }
  });
});
