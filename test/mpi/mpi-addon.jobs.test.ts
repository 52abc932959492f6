import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/jobs.js';

/**
 * topocoll/mpi (native/mpi, src/mpi.ts) in real MPI jobs: test/mpi/jobs/mpi-basics.mjs checks
 * rank and size, the native layer's External, message order per tag, copied sends, truncated
 * receives, split and dup, and MPI's reference collectives against values it computes, under
 * mpirun at 1, 2 and 4 ranks and alone (an MPI singleton); test/mpi/jobs/mpi-collectives.mjs runs
 * topocoll's collectives over MPI between emulated nodes (createCommunicator) and compares them
 * bit for bit with MPI's own. Needs `npm run build` and the addon (npm run build:mpi).
 */
const job = join(repoRoot, 'test', 'mpi', 'jobs', 'mpi-basics.mjs');
const collectives = join(repoRoot, 'test', 'mpi', 'jobs', 'mpi-collectives.mjs');
const addon = process.env.TOPOCOLL_MPI_ADDON ?? join(repoRoot, 'build', 'mpi', 'Release', 'topocoll_mpi.node');
const haveMpirun = spawnSync('mpirun', ['--version'], { encoding: 'utf8' }).status === 0;
const built = existsSync(addon);
// Where MPI is required (CI with TOPOCOLL_REQUIRE_MPI=1), a missing addon or mpirun fails below instead of skipping.
const required = process.env.TOPOCOLL_REQUIRE_MPI === '1';
const skip = !required && (!haveMpirun || !built);
if (skip) {
  console.warn(
    `mpi-addon.jobs.test.ts: SKIPPING the MPI jobs: ${!haveMpirun ? 'mpirun is not installed (Debian: openmpi-bin)' : `${addon} is not built (npm run build:mpi)`}`,
  );
}

function mpirun(np: number, args: string[] = []) {
  // As root (CI) mpirun wants --allow-run-as-root; more ranks than cores need --oversubscribe.
  return spawnSync('mpirun', ['--allow-run-as-root', '--oversubscribe', '-np', String(np), process.execPath, job, ...args], {
    encoding: 'utf8',
    cwd: repoRoot,
    timeout: 30_000,
    env: { ...process.env, OMPI_MCA_rmaps_base_oversubscribe: '1' },
  });
}

function expectRanksOk(r: ReturnType<typeof spawnSync>, np: number): void {
  const out = `status ${r.status} signal ${r.signal}\n${String(r.stdout)}\n${String(r.stderr)}`;
  expect(r.signal, out).toBeNull(); // no hang (the time limit)
  expect(r.status, out).toBe(0);
  for (let rank = 0; rank < np; rank++) expect(String(r.stdout), out).toContain(`rank ${rank} ok`);
}

describe.skipIf(skip)('topocoll/mpi under mpirun (Open MPI)', () => {
  it('is built, and mpirun is installed', () => {
    expect(built, `${addon} is missing: run npm run build:mpi`).toBe(true);
    expect(haveMpirun, 'mpirun is not installed').toBe(true);
  });

  for (const np of [1, 2, 4]) {
    it(`mpirun -np ${np}: messages, split/dup and the reference collectives`, () => {
      expectRanksOk(mpirun(np), np);
    });
  }

  for (const [np, ppn] of [
    [4, 2],
    [3, 1],
  ] as const) {
    it(`mpirun -np ${np}, ${ppn} rank(s) per emulated node: topocoll over MPI, bit for bit against MPI's collectives`, () => {
      // `--mca op ^avx`: Open MPI 4.1's AVX operators saturate 8- and 16-bit integer sums of 16
      // elements or more instead of wrapping (open-mpi/ompi#8045, closed "wontfix"), so they are
      // not a reference for them; its plain C operators are.
      const args = ['--allow-run-as-root', '--oversubscribe', '--mca', 'op', '^avx', '-np', String(np), process.execPath, collectives, String(ppn)];
      const r = spawnSync('mpirun', args, {
        encoding: 'utf8',
        cwd: repoRoot,
        timeout: 60_000,
      });
      expectRanksOk(r, np);
    });
  }

  it('alone, without mpirun (an MPI singleton)', () => {
    const r = spawnSync(process.execPath, [job], { encoding: 'utf8', cwd: repoRoot, timeout: 30_000 });
    expectRanksOk(r, 1);
  });

  it('a job that ends with process.exit(0) finalizes MPI (mpirun reports no error)', () => {
    const r = mpirun(2, ['exit']);
    expectRanksOk(r, 2);
    expect(String(r.stderr)).not.toMatch(/exiting improperly/); // what mpirun says of a rank that never called MPI_Finalize
  });
});

describe('topocoll/mpi without its addon', () => {
  it('mpiAvailable() is false and initMpi() throws EINVAL saying how to build it', () => {
    const script = [
      "import { initMpi, mpiAvailable } from 'topocoll/mpi';",
      'console.log(`available ${mpiAvailable()}`);',
      'try { initMpi(); } catch (e) { console.log(`${e.code} ${e.message}`); }',
    ].join('\n');
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      cwd: repoRoot,
      timeout: 30_000,
      env: { ...process.env, TOPOCOLL_MPI_ADDON: join(repoRoot, 'build', 'mpi', 'no-such-addon.node') },
    });
    const out = `${r.stdout}\n${r.stderr}`;
    expect(r.status, out).toBe(0);
    expect(r.stdout, out).toContain('available false');
    expect(r.stdout, out).toMatch(/EINVAL .*topocoll\/mpi is not built .*no-such-addon\.node.*npm run build:mpi/s);
  });
});
