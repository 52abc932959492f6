import { describe, expect, it } from 'vitest';
import { expectEveryRankOk, jobScript, leftoverSegments, okRanks, repoRoot, runFailureJob, runJob, runJobOverSocketLayer } from '../helpers/jobs.js';

/**
 * Gather, gatherv, scatter, scatterv, the reduce-scatters, scan, exscan, alltoall and alltoallv in real jobs (`topocoll run`): seeded random cases in one
 * job per placement, every result checked against blocks the ranks recompute
 * (test/jobs/gather-scatter.mjs), over TCP and over a JavaScript host layer (against MPI's own
 * results over transport: mpi: test/mpi/jobs/mpi-collectives.mjs); argument errors, mismatches and a killed rank
 * (test/jobs/gather-scatter-faults.mjs).
 */
const job = jobScript('gather-scatter.mjs');
const faults = jobScript('gather-scatter-faults.mjs');
const fourNodes = `${repoRoot}test/fixtures/network/four-nodes.txt`;

describe('gather, scatter, alltoall and reduce-scatter across real processes: 300 seeded cases per job (all forms, datatypes, operators, roots, IN_PLACE, zero counts, every per-level algorithm)', () => {
  for (const [name, args] of [
    ['1 rank', ['-n', '1']],
    ['2 ranks', ['-n', '2']],
    ['5 ranks on one node (2 or 3 per core)', ['-n', '5']],
    ['5 ranks on 2 emulated nodes (3 + 2)', ['-n', '5', '--nodes', '2']],
    ['7 ranks on 3 emulated nodes (3 + 2 + 2)', ['-n', '7', '--nodes', '3']],
    ['9 ranks on 4 emulated nodes under leaf and spine switches', ['-n', '9', '--nodes', '4', '--network', fourNodes]],
  ] as const) {
    it(name, async () => {
      await expectEveryRankOk(runJob([...args, job]), Number(args[1]));
    });
  }

  it('5 ranks on 2 emulated nodes over a JavaScript host layer (createCommunicator; Promise and request forms)', async () => {
    await expectEveryRankOk(runJobOverSocketLayer(['-n', '5', '--nodes', '2', job, '--layer', 'socket', '--cases', '30'], 120_000), 5);
  });

  it("7 ranks round-robin over 3 nodes (3 + 2 + 2, a node's ranks not consecutive) over the JavaScript host layer", async () => {
    await expectEveryRankOk(runJobOverSocketLayer(['-n', '7', job, '--layer', 'socket', '--round-robin', '3', '--cases', '30'], 120_000), 7);
  });
});

describe('scan and exscan only: 100 seeded cases per job (every operator, datatype, form, IN_PLACE; checked against the left fold in rank order)', () => {
  const scans = ['--kinds', 'scan,exscan', '--cases', '20'];
  for (const [name, args] of [
    ['1 rank', ['-n', '1']],
    ['5 ranks on one node', ['-n', '5']],
    ['5 ranks on 2 emulated nodes (3 + 2)', ['-n', '5', '--nodes', '2']],
    ['7 ranks on 3 emulated nodes (3 + 2 + 2)', ['-n', '7', '--nodes', '3']],
    ['9 ranks on 4 emulated nodes under leaf and spine switches', ['-n', '9', '--nodes', '4', '--network', fourNodes]],
  ] as const) {
    it(name, async () => {
      await expectEveryRankOk(runJob([...args, job, ...scans]), Number(args[1]));
    });
  }

  for (const [n, nodes] of [
    ['5', '2'],
    ['7', '3'],
  ] as const) {
    it(`${n} ranks on ${nodes} emulated nodes over a JavaScript host layer (built-in operators; Promise and request forms)`, async () => {
      await expectEveryRankOk(runJobOverSocketLayer(['-n', n, '--nodes', nodes, job, '--layer', 'socket', ...scans], 120_000), Number(n));
    });
  }
});

describe('gather, scatter, reduce-scatter and scan failures', () => {
  it('every argument error, in every form, is EINVAL on the rank that makes it before anything is sent (4 ranks on 2 emulated nodes)', async () => {
    const r = runJob(['-n', '4', '--nodes', '2', faults, 'args']);
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.status).toBe(0);
    expect(okRanks(r.lines)).toEqual([0, 1, 2, 3]);
  });

  for (const kind of [
    'root',
    'count',
    'counts',
    'collective',
    'dtype',
    'reduce-scatter-op',
    'reduce-scatter-counts',
    'scan-exscan',
    'scan-op',
    'alltoall-count',
    'alltoallv-counts',
  ]) {
    it(`a ${kind} that differs on rank 1 → an error on every rank, no hang and no rank finishing (4 ranks on 2 emulated nodes)`, async () => {
      const r = runFailureJob(['-n', '4', '--nodes', '2', faults, 'mismatch', kind]);
      expect(r.signal).toBeNull();
      expect(r.status).not.toBe(0);
      expect(r.finished).toEqual([]);
      expect(r.caught.size).toBe(4);
      expect([...r.caught.values()]).toContain('EMISMATCH');
      for (const code of r.caught.values()) expect(['EMISMATCH', 'EPEERLOST']).toContain(code);
      // The message names what differs: both roots of a gather.
      if (kind === 'root') expect(r.stdout).toMatch(/EMISMATCH: .*gather\(count=\d+, int32, root=[01]\).*gather\(count=\d+, int32, root=[01]\)/);
      expect(await leftoverSegments()).toEqual([]);
    });
  }

  for (const [kind, args, n] of [
    ['gather', ['-n', '4'], 4],
    ['scatter', ['-n', '6', '--nodes', '3'], 6],
    ['reduce-scatter', ['-n', '5', '--nodes', '2'], 5],
    ['alltoall', ['-n', '5', '--nodes', '2'], 5],
  ] as const) {
    it(`a rank SIGKILLed in a large ${kind} (${args.join(' ')}): every survivor gets EPEERLOST, /dev/shm is clean`, async () => {
      const r = runFailureJob([...args, faults, 'dies', kind]);
      expect(r.signal).toBeNull();
      expect(r.status).toBe(128 + 9);
      expect(r.stderr).toMatch(new RegExp(`rank ${n - 1} was killed by SIGKILL`));
      expect([...r.caught.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: n - 1 }, (_, i) => i));
      expect(new Set(r.caught.values())).toEqual(new Set(['EPEERLOST']));
      expect(await leftoverSegments()).toEqual([]);
    });
  }
});
