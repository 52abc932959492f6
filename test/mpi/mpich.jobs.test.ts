import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFile, jobScript, leftoverSegments, okRanks, repoRoot } from '../helpers/jobs.js';
import { tempDir } from '../helpers/temp.js';

/**
 * topocoll/mpi and `transport: mpi` under MPICH: the addon built against MPICH (`npm run
 * build:mpi -- --mpi mpich` → build/mpich/Release/topocoll_mpi.node, loaded through
 * TOPOCOLL_MPI_ADDON) in jobs started by MPICH's Hydra (Debian's mpiexec.mpich, beside Open
 * MPI's mpirun): the addon's own checks (test/mpi/jobs/mpi-basics.mjs), topocoll over MPI against
 * MPI's collectives (mpi-collectives.mjs), every collective with `transport: mpi` against the
 * job's own references (test/jobs/collectives.mjs) on emulated nodes through Hydra's MPMD form,
 * sub-communicators over MPI, and init() over TCP finding its ranks through Hydra's variables
 * (test/jobs/launch-check.mjs). Each job runs with a TMPDIR of its own, which must be empty
 * afterwards, as /dev/shm must be. Needs `npm run build` and that addon.
 */
const addon = join(repoRoot, 'build', 'mpich', 'Release', 'topocoll_mpi.node');
const openMpiAddon = join(repoRoot, 'build', 'mpi', 'Release', 'topocoll_mpi.node');
/** The shared libraries `file` links (ldd), or '' if it is missing. */
const linked = (file: string) => (existsSync(file) ? spawnSync('ldd', [file], { encoding: 'utf8' }).stdout : '');
// The default build is Open MPI's where mpicc is (its own tests need it: mpi-addon.jobs.test.ts).
const openMpiBuilt = /libmpi\.so/.test(linked(openMpiAddon));
const MPIEXEC = 'mpiexec.mpich';
const haveMpiexec = spawnSync(MPIEXEC, ['--version'], { encoding: 'utf8' }).status === 0;
const built = existsSync(addon);
// Where MPI is required (CI with TOPOCOLL_REQUIRE_MPI=1), a missing addon or mpiexec fails below instead of skipping.
const required = process.env.TOPOCOLL_REQUIRE_MPI === '1';
const skip = !required && (!haveMpiexec || !built);
if (skip) {
  console.warn(
    `mpich.jobs.test.ts: SKIPPING the MPICH jobs: ${!haveMpiexec ? `${MPIEXEC} is not installed (Debian: mpich)` : `${addon} is not built (npm run build:mpi -- --mpi mpich; Debian: libmpich-dev)`}`,
  );
}

const mpiJobs = join(repoRoot, 'test', 'mpi', 'jobs');

/**
 * `mpiexec.mpich -bind-to core -n P -env TOPOCOLL_NODE node0 node <nodeArgs> : -n P -env
 * TOPOCOLL_NODE node1 …`: one context per entry of `perNode` (ranks in blocks); a single entry
 * without node names when `named` is false. Hydra hands every rank the whole environment, here
 * the MPICH addon (unless `env` names another) and a TMPDIR of the job's own, which the result
 * says whether it is empty after the job.
 */
function mpiexec(perNode: number[], nodeArgs: string[], env: Record<string, string> = {}, options: { named?: boolean; timeoutMs?: number } = {}) {
  const named = options.named ?? true;
  const contexts = perNode.flatMap((np, i) => [
    ...(i > 0 ? [':'] : []),
    '-n',
    String(np),
    ...(named ? ['-env', 'TOPOCOLL_NODE', `node${i}`] : []),
    process.execPath,
    ...nodeArgs,
  ]);
  const tmp = tempDir('topocoll-mpich-job-');
  const r = spawnSync(MPIEXEC, ['-bind-to', 'core', ...contexts], {
    encoding: 'utf8',
    cwd: repoRoot,
    timeout: options.timeoutMs ?? 30_000,
    env: { ...process.env, TOPOCOLL_MPI_ADDON: addon, ...env, TMPDIR: tmp },
  });
  const lines = String(r.stdout)
    .split('\n')
    .filter((l) => l !== '');
  return { ...r, lines, leftInTmp: readdirSync(tmp), out: `status ${r.status} signal ${r.signal}\n${String(r.stdout)}\n${String(r.stderr)}` };
}

/** Exit 0 within the time limit, every rank's `rank R ok` line, nothing left in the job's TMPDIR or /dev/shm. */
async function expectRanksOk(r: ReturnType<typeof mpiexec>, np: number): Promise<void> {
  expect(r.signal, r.out).toBeNull(); // no hang (the time limit)
  expect(r.status, r.out).toBe(0);
  expect(r.out).not.toMatch(/UCX\s+WARN/); // UCX logs to stdout; e.g. an environment variable this UCX does not know
  for (let rank = 0; rank < np; rank++) expect(r.lines, r.out).toContainEqual(expect.stringMatching(new RegExp(`^rank ${rank} ok( \\d+)?$`)));
  expect(r.leftInTmp, r.out).toEqual([]);
  expect(await leftoverSegments()).toEqual([]);
}

describe.skipIf(skip)('MPICH: topocoll/mpi built against MPICH, jobs under mpiexec.mpich (Hydra)', () => {
  it('is built, and mpiexec.mpich is installed', () => {
    expect(built, `${addon} is missing: run npm run build:mpi -- --mpi mpich`).toBe(true);
    expect(haveMpiexec, `${MPIEXEC} is not installed`).toBe(true);
    // The MPICH build links MPICH, not what mpicc points to.
    expect(linked(addon)).toMatch(/libmpich\.so/);
    expect(linked(addon)).not.toMatch(/libmpi\.so/);
  });

  it('TOPOCOLL_MPI_ADDON is taken relative to the working directory; one naming no file is EINVAL naming the variable', () => {
    const script = [
      "import { initMpi, mpiAvailable } from 'topocoll/mpi';",
      'console.log(`available ${mpiAvailable()}`);',
      'try { initMpi(); } catch (e) { console.log(`${e.code} ${e.message}`); }',
    ].join('\n');
    const run = (path: string) =>
      spawnSync(process.execPath, ['--input-type=module', '-e', script], {
        encoding: 'utf8',
        cwd: repoRoot,
        timeout: 30_000,
        env: { ...process.env, TOPOCOLL_MPI_ADDON: path },
      });
    const relative = run(join('build', 'mpich', 'Release', 'topocoll_mpi.node'));
    expect(relative.stdout, relative.stderr).toMatch(/^available true$/m);
    const missing = run(join('build', 'mpich', 'Release', 'no-such.node'));
    expect(missing.stdout, missing.stderr).toMatch(/^available false$/m);
    expect(missing.stdout).toMatch(
      /EINVAL .*topocoll\/mpi is not built at \/.*build\/mpich\/Release\/no-such\.node \(TOPOCOLL_MPI_ADDON\).*npm run build:mpi -- --mpi/s,
    );
  });

  for (const np of [1, 2, 4]) {
    it(`mpiexec.mpich -n ${np}: rank and size, messages, truncation, split/dup and MPI's reference collectives`, async () => {
      await expectRanksOk(mpiexec([np], [join(mpiJobs, 'mpi-basics.mjs')], {}, { named: false }), np);
    });
  }

  it("UCX leaves libc's mmap and brk unpatched (its bistro hooks crash V8 now and then)", async () => {
    const r = mpiexec([2], [join(mpiJobs, 'mpi-basics.mjs')], { UCX_MEM_LOG_LEVEL: 'info' }, { named: false });
    await expectRanksOk(r, 2);
    expect(r.out).toMatch(/failed to install mmap events/);
    expect(r.out).not.toMatch(/mmap installed events/);
  });

  it('alone (an MPI singleton), and a job that ends with process.exit(0)', async () => {
    const tmp = tempDir('topocoll-mpich-job-');
    const alone = spawnSync(process.execPath, [join(mpiJobs, 'mpi-basics.mjs')], {
      encoding: 'utf8',
      cwd: repoRoot,
      timeout: 30_000,
      env: { ...process.env, TOPOCOLL_MPI_ADDON: addon, TMPDIR: tmp },
    });
    expect(alone.status, `${alone.stdout}\n${alone.stderr}`).toBe(0);
    expect(alone.stdout).toContain('rank 0 ok');
    expect(readdirSync(tmp)).toEqual([]);
    await expectRanksOk(mpiexec([2], [join(mpiJobs, 'mpi-basics.mjs'), 'exit'], {}, { named: false }), 2);
  });

  it('abortMpi(3) ends a job of one rank with exit code 3 (MPICH exits from inside MPI_Abort)', () => {
    const script = "import { abortMpi, initMpi } from 'topocoll/mpi'; initMpi(); abortMpi(3);";
    const r = mpiexec([1], ['--input-type=module', '-e', script], {}, { named: false });
    expect(r.signal, r.out).toBeNull(); // it used to hang in the atexit handler
    expect(r.status, r.out).toBe(3);
  });

  it("createCommunicator over MPICH's world on 2+2 emulated nodes: every result bit for bit MPI's (or, for unsigned min/max, the inputs')", async () => {
    await expectRanksOk(mpiexec([4], [join(mpiJobs, 'mpi-collectives.mjs'), '2'], {}, { named: false, timeoutMs: 120_000 }), 4);
  }, 150_000);

  it('transport: mpi, every collective on 2+2 emulated nodes against the references of the job, with no rendezvous reachable', async () => {
    const env = { TOPOCOLL_CONFIG: configFile('transport: mpi\n'), TOPOCOLL_RENDEZVOUS: '127.0.0.1:1', TOPOCOLL_TOKEN: 'unused' };
    const r = mpiexec([2, 2], [jobScript('collectives.mjs'), '--quick'], env, { timeoutMs: 120_000 });
    expect(okRanks(r.lines), r.out).toEqual([0, 1, 2, 3]);
    await expectRanksOk(r, 4);
  }, 150_000);

  it('transport: mpi, split and dup on 2+3 emulated nodes (test/jobs/split.mjs)', async () => {
    const r = mpiexec([2, 3], [jobScript('split.mjs')], { TOPOCOLL_CONFIG: configFile('transport: mpi\n') }, { timeoutMs: 60_000 });
    expect(okRanks(r.lines), r.out).toEqual([0, 1, 2, 3, 4]);
    await expectRanksOk(r, 5);
  });

  it("createCommunicator over MPICH's split, and split() of a topocoll communicator over it (test/mpi/jobs/mpi-split.mjs, 2+3 nodes)", async () => {
    const r = mpiexec([2, 3], [join(mpiJobs, 'mpi-split.mjs')], {}, { timeoutMs: 60_000 });
    expect(okRanks(r.lines), r.out).toEqual([0, 1, 2, 3, 4]);
    await expectRanksOk(r, 5);
  });

  it.skipIf(!openMpiBuilt)('the Open MPI build under mpiexec.mpich: transport: mpi fails with ECONFIG (MPI sees a world of one, Hydra two ranks)', () => {
    const r = mpiexec(
      [2],
      [jobScript('collectives.mjs'), '--quick'],
      { TOPOCOLL_CONFIG: configFile('transport: mpi\n'), TOPOCOLL_MPI_ADDON: openMpiAddon },
      { named: false },
    );
    expect(r.signal, r.out).toBeNull();
    expect(r.status, r.out).not.toBe(0);
    expect(r.stderr).toMatch(/ECONFIG.*transport: mpi: MPI says rank 0 of 1, the launcher's variables rank \d of 2.*MPICH's mpiexec/);
  });

  it("init() over TCP under mpiexec.mpich -n 3: rank and size from Hydra's variables, the rendezvous file keyed by its proxy", async () => {
    await expectRanksOk(mpiexec([3], [jobScript('launch-check.mjs')], {}, { named: false }), 3);
  });
});
