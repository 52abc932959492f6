import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFile, jobScript, leftoverSegments, okRanks, repoRoot, runJob } from '../helpers/jobs.js';

/**
 * init() with `transport: mpi` under real mpirun: the job's setup and its messages between nodes
 * go over MPI_COMM_WORLD (topocoll/mpi), shared memory inside nodes. Nodes are emulated the way
 * docs/guide/messaging-layers.md shows: mpirun's MPMD form gives each block of ranks its
 * TOPOCOLL_NODE. Every collective is checked against references the job computes itself (test/jobs/collectives.mjs);
 * a rank SIGKILLed mid-job leaves every survivor an error (test/mpi/jobs/mpi-rank-dies.mjs);
 * sub-communicators over MPI (test/jobs/split.mjs, test/mpi/jobs/mpi-split.mjs).
 * Needs `npm run build` and topocoll/mpi's addon (npm run build:mpi).
 */
const addon = process.env.TOPOCOLL_MPI_ADDON ?? join(repoRoot, 'build', 'mpi', 'Release', 'topocoll_mpi.node');
const haveMpirun = spawnSync('mpirun', ['--version'], { encoding: 'utf8' }).status === 0;
const required = process.env.TOPOCOLL_REQUIRE_MPI === '1';
const skip = !required && (!haveMpirun || !existsSync(addon));
if (skip) console.warn('mpi-transport.jobs.test.ts: SKIPPING: mpirun or topocoll/mpi (npm run build:mpi) is missing');

const rankDies = join(repoRoot, 'test', 'mpi', 'jobs', 'mpi-rank-dies.mjs');

/**
 * `mpirun … -np P -x TOPOCOLL_NODE=node0 node script … : -np P -x TOPOCOLL_NODE=node1 …`: one
 * app context per emulated node, `perNode[i]` ranks on node i (ranks in blocks).
 */
function mpirunOnNodes(perNode: number[], script: string, args: string[], env: Record<string, string>, options: string[] = [], timeoutMs = 120_000) {
  const contexts = perNode.flatMap((np, i) => [
    ...(i > 0 ? [':'] : []),
    '-np',
    String(np),
    '-x',
    `TOPOCOLL_NODE=node${i}`,
    ...Object.keys(env).flatMap((k) => ['-x', k]),
    process.execPath,
    script,
    ...args,
  ]);
  const r = spawnSync('mpirun', ['--allow-run-as-root', '--oversubscribe', '--bind-to', 'core:overload-allowed', ...options, ...contexts], {
    encoding: 'utf8',
    cwd: repoRoot,
    timeout: timeoutMs,
    env: { ...process.env, ...env },
  });
  const lines = String(r.stdout)
    .split('\n')
    .filter((l) => l !== '');
  return { ...r, lines, out: `status ${r.status} signal ${r.signal}\n${String(r.stdout)}\n${String(r.stderr)}` };
}

describe.skipIf(skip)('init() with transport: mpi under mpirun', () => {
  for (const perNode of [
    [2, 2],
    [1, 1, 1],
  ]) {
    const np = perNode.reduce((a, b) => a + b, 0);
    it(`every collective on ${perNode.length} emulated nodes (${perNode.join('+')} ranks), with no rendezvous reachable`, async () => {
      // A rendezvous address nobody listens at: init() over TCP would fail to connect to it;
      // over MPI nothing looks at it.
      const env = { TOPOCOLL_CONFIG: configFile('transport: mpi\n'), TOPOCOLL_RENDEZVOUS: '127.0.0.1:1', TOPOCOLL_TOKEN: 'unused' };
      const r = mpirunOnNodes(perNode, jobScript('collectives.mjs'), ['--quick'], env);
      expect(r.signal, r.out).toBeNull(); // no hang (the time limit)
      expect(r.status, r.out).toBe(0);
      expect(okRanks(r.lines), r.out).toEqual(Array.from({ length: np }, (_, i) => i));
      expect(await leftoverSegments()).toEqual([]);
    });
  }

  it('point-to-point messages (test/jobs/messages.mjs: every case, storms included) on 2 emulated nodes over MPI', () => {
    const env = { TOPOCOLL_CONFIG: configFile('transport: mpi\n') };
    const r = mpirunOnNodes([2, 2], jobScript('messages.mjs'), [], env);
    expect(r.signal, r.out).toBeNull();
    expect(r.status, r.out).toBe(0);
    for (let k = 1; k <= 7; k++) expect(r.lines.filter((l) => new RegExp(`^rank \\d case ${k} ok \\d+$`).test(l)).length, r.out).toBe(4);
  });

  it('split and dup over MPI (test/jobs/split.mjs on 2+3 emulated nodes): children on the same MPI communicator, tags of their own', async () => {
    const env = { TOPOCOLL_CONFIG: configFile('transport: mpi\n') };
    const r = mpirunOnNodes([2, 3], jobScript('split.mjs'), [], env);
    expect(r.signal, r.out).toBeNull();
    expect(r.status, r.out).toBe(0);
    expect(okRanks(r.lines), r.out).toEqual([0, 1, 2, 3, 4]);
    expect(await leftoverSegments()).toEqual([]);
  });

  it("createCommunicator over MPI's split and split() of a topocoll communicator over MPI: the same ranks, bit for bit MPI's results", () => {
    const r = mpirunOnNodes([2, 3], join(repoRoot, 'test', 'mpi', 'jobs', 'mpi-split.mjs'), [], {});
    expect(r.signal, r.out).toBeNull();
    expect(r.status, r.out).toBe(0);
    expect(okRanks(r.lines), r.out).toEqual([0, 1, 2, 3, 4]);
  });

  it('the same job over TCP fails on that rendezvous address (the check above is not vacuous)', () => {
    const env = { TOPOCOLL_CONFIG: configFile('transport: tcp\ntimeouts: { initMs: 3000 }\n'), TOPOCOLL_RENDEZVOUS: '127.0.0.1:1', TOPOCOLL_TOKEN: 'unused' };
    const r = mpirunOnNodes([1, 1], jobScript('collectives.mjs'), ['--quick'], env);
    expect(r.signal, r.out).toBeNull();
    expect(r.status, r.out).not.toBe(0);
    expect(okRanks(r.lines), r.out).toEqual([]);
  });

  it('a rank SIGKILLed mid-job: each survivor gets EPEERLOST (a rank of its node died) or an abort notice over MPI', async () => {
    // --enable-recovery: mpirun lets the survivors run on after a rank's death (by default it
    // kills the job at once), so what topocoll tells them can be checked.
    const env = { TOPOCOLL_CONFIG: configFile('transport: mpi\ntimeouts: { collectiveMs: 20000 }\n') };
    const r = mpirunOnNodes([2, 2], rankDies, ['3', '50'], env, ['--enable-recovery']);
    expect(r.signal, r.out).toBeNull();
    for (const rank of [0, 1, 2]) {
      const line = r.lines.find((l) => l.startsWith(`rank ${rank} `));
      // Not the watchdog (20 s): rank 2 sees its node-mate die, the others get its abort.
      expect(line, r.out).toMatch(new RegExp(`^rank ${rank} caught EPEERLOST in call 50 after \\d+ ms`));
    }
    expect(r.out).not.toMatch(/WRONG|hung/);
    expect(await leftoverSegments()).toEqual([]);
  });

  it('a rank alone on its node SIGKILLed: the survivors get the watchdog ETIMEDOUT naming the tag (MPI does not report the death)', () => {
    const env = { TOPOCOLL_CONFIG: configFile('transport: mpi\ntimeouts: { collectiveMs: 3000 }\n') };
    const r = mpirunOnNodes([1, 1, 1], rankDies, ['2', '50'], env, ['--enable-recovery']);
    expect(r.signal, r.out).toBeNull();
    for (const rank of [0, 1]) {
      const line = r.lines.find((l) => l.startsWith(`rank ${rank} `));
      expect(line, r.out).toMatch(new RegExp(`^rank ${rank} caught (ETIMEDOUT|EPEERLOST) in call 50 .*(point-to-point layer|stopped the collective)`));
    }
    expect(r.lines.filter((l) => / caught ETIMEDOUT /.test(l)).length, r.out).toBeGreaterThan(0);
  });

  it('a rank SIGKILLed under plain mpirun: mpirun ends the job, nobody hangs or finishes', () => {
    const env = { TOPOCOLL_CONFIG: configFile('transport: mpi\n') };
    const r = mpirunOnNodes([1, 1, 1], rankDies, ['1', '20'], env, [], 60_000);
    expect(r.signal, r.out).toBeNull();
    expect(r.status, r.out).not.toBe(0);
    expect(r.out).not.toMatch(/ ok \d+|WRONG|hung/);
  });

  it('transport: mpi in a job of `topocoll run`: ECONFIG before anything is sent (MPI does not know those ranks)', () => {
    const r = runJob(['-n', '2', '--config', configFile('transport: mpi\n'), jobScript('collectives.mjs'), '--quick'], 60_000);
    expect(r.status, r.stderr).not.toBe(0);
    expect(r.stderr).toMatch(/ECONFIG.*transport: mpi: MPI says rank 0 of 1, the launcher's variables rank \d of 2/);
  });
});
