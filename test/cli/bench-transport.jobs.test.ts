import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { benchCharts, parseBenchJson, type ReportRow } from '../../src/cli/bench-report.js';
import { tempDir } from '../helpers/temp.js';
import { repoRoot } from './helpers.js';

/**
 * `topocoll bench --transport tcp|mpi|tcp,mpi`: the same bench job under topocoll's launcher
 * (TCP between emulated nodes) and under mpirun (transport: mpi, one app context per emulated
 * node), rows told apart by their transport, and the refusal before anything runs when mpirun or
 * topocoll/mpi is missing. Needs `npm run build` and, for the runs, topocoll/mpi (npm run build:mpi).
 */
const main = `${repoRoot}dist/cli/main.js`;
const addon = process.env.TOPOCOLL_MPI_ADDON ?? join(repoRoot, 'build', 'mpi', 'Release', 'topocoll_mpi.node');
const haveMpirun = spawnSync('mpirun', ['--version'], { encoding: 'utf8' }).status === 0;
const required = process.env.TOPOCOLL_REQUIRE_MPI === '1';
const skip = !required && (!haveMpirun || !existsSync(addon));
if (skip) console.warn('bench-transport.jobs.test.ts: SKIPPING the MPI runs: mpirun or topocoll/mpi (npm run build:mpi) is missing');

function bench(args: string[], env: NodeJS.ProcessEnv = process.env) {
  const r = spawnSync(process.execPath, [main, 'bench', ...args], { encoding: 'utf8', timeout: 60_000, env });
  return { ...r, out: `status ${r.status} signal ${r.signal}\n${r.stdout}\n${r.stderr}` };
}

const SHORT = ['--min', '8', '--max', '64', '--iterations', '50', '--no-mpi'];

describe.skipIf(skip)('topocoll bench --transport under mpirun', () => {
  it('tcp,mpi: 4 ranks on 2 emulated nodes, both transports measured, rows and charts told apart', () => {
    const dir = tempDir('topocoll-transport-');
    const r = bench(['allreduce', '-n', '4', '--nodes', '2', '--transport', 'tcp,mpi', ...SHORT, '--json', '--report', dir]);
    expect(r.status, r.out).toBe(0);
    const rows = parseBenchJson(r.stdout, 'stdout');
    for (const transport of ['tcp', 'mpi'] as const) {
      for (const mode of ['sync', 'async']) {
        const mine = rows.filter((x) => x.collective === 'allreduce' && x.mode === mode && x.transport === transport);
        expect(
          mine.map((x) => x.bytes),
          r.out,
        ).toEqual([8, 16, 32, 64]);
        for (const x of mine) {
          expect(x.nodes).toBe(2);
          expect(x.ranks).toBe(4);
          // Sane: above zero, below a tenth of a second per call, the average between the ranks' extremes.
          expect(x.avgUs).toBeGreaterThan(0);
          expect(x.avgUs).toBeLessThan(100_000);
          expect(x.minUs).toBeLessThanOrEqual(x.avgUs * (1 + 1e-9));
          expect(x.maxUs).toBeGreaterThanOrEqual(x.avgUs * (1 - 1e-9));
        }
      }
    }
    const chart = readFileSync(join(dir, 'allreduce-p4-nodes2.svg'), 'utf8');
    expect(chart).toContain('allreduce, 4 ranks, on 2 emulated nodes, TCP and MPI between them');
    for (const series of ['topocoll sync (TCP)', 'topocoll sync (MPI)', 'topocoll async (TCP)', 'topocoll async (MPI)']) {
      expect(chart).toContain(`data-series="${series}"`);
    }
  });

  it('the table puts the transports side by side, and Open MPI (one node) beside them', () => {
    const r = bench(['barrier', '-n', '2', '--nodes', '2', '--transport', 'mpi,tcp', '--iterations', '50', '--min', '8', '--max', '8']);
    expect(r.status, r.out).toBe(0);
    expect(r.stdout).toMatch(/# barrier, 2 ranks on 2 emulated nodes, MPI and TCP between them: latency/);
    expect(r.stdout).toMatch(/bytes\s+mpi sync\s+tcp sync\s+mpi async\s+tcp async\s+mpi \/ tcp\s+Open MPI\s+mpi sync \/ OMPI\s+tcp sync \/ OMPI/);
    expect(r.stdout).toMatch(/^\s+0(\s+\d+(?:\.\d+)?){8}$/m);
    expect(r.stdout).toMatch(/# baseline: .*Open MPI.*\(one node: it cannot emulate nodes\)/);
  });
});

describe('topocoll bench --transport mpi without what it needs', () => {
  it.skipIf(!haveMpirun && !required)('topocoll/mpi does not load: ECONFIG naming the fix, before anything runs', () => {
    const r = bench(['allreduce', '-n', '4', '--nodes', '2', '--transport', 'tcp,mpi', ...SHORT], { ...process.env, TOPOCOLL_MPI_ADDON: '/nonexistent' });
    expect(r.status, r.out).toBe(1);
    expect(r.stderr).toMatch(/ECONFIG: transport mpi: topocoll\/mpi's addon does not load \(TOPOCOLL_MPI_ADDON=\/nonexistent\)/);
    expect(r.stderr).toMatch(/npm run build:mpi/);
    // Not even the TCP job ran.
    expect(r.stdout).toBe('');
  });

  it('no mpirun on PATH: ECONFIG naming the fix', () => {
    const bin = tempDir('topocoll-path-');
    symlinkSync(process.execPath, join(bin, 'node'));
    const r = bench(['allreduce', '-n', '2', '--transport', 'mpi', ...SHORT], { ...process.env, PATH: bin });
    expect(r.status, r.out).toBe(1);
    expect(r.stderr).toMatch(/ECONFIG: transport mpi: mpirun is not on PATH\. Install Open MPI/);
    expect(r.stdout).toBe('');
  });

  it('--transport is checked and goes with the latency run only', () => {
    expect(bench(['-n', '2', '--transport', 'udp']).stderr).toMatch(/--transport must be one of tcp, mpi, got "udp"/);
    expect(bench(['bcast', '--sweep', '--transport', 'tcp']).stderr).toMatch(/--transport goes with the latency run/);
  });
});

describe('charts of rows with a transport', () => {
  const row = (transport: 'tcp' | 'mpi' | undefined, mode: string, bytes: number, avgUs: number): ReportRow => ({
    collective: 'bcast',
    mode,
    bytes,
    avgUs,
    minUs: avgUs,
    maxUs: avgUs,
    iterations: 10,
    ranks: 4,
    nodes: 2,
    ...(transport ? { transport } : {}),
  });

  it('one chart per job, a series per transport, Open MPI marked as one node', () => {
    const rows = [8, 16].flatMap((b) => [row('tcp', 'sync', b, 5), row('mpi', 'sync', b, 1), row(undefined, 'ompi', b, 0.5)]);
    const [chart, ...more] = benchCharts(rows);
    expect(more).toEqual([]);
    expect(chart!.file).toBe('bcast-p4-nodes2.svg');
    expect(chart!.svg).toContain('bcast, 4 ranks, on 2 emulated nodes, TCP and MPI between them');
    expect([...chart!.svg.matchAll(/<g class="series" data-series="([^"]+)"/g)].map((m) => m[1])).toEqual([
      'topocoll sync (TCP)',
      'topocoll sync (MPI)',
      'Open MPI (one node)',
    ]);
  });

  it('rows without a transport are TCP: their charts are as before', () => {
    const [chart] = benchCharts([row(undefined, 'sync', 8, 5), row(undefined, 'sync', 16, 6)]);
    expect(chart!.svg).toContain('<title>bcast, 4 ranks, on 2 emulated nodes</title>');
    expect(chart!.svg).toContain('data-series="topocoll sync"');
  });

  it('a transport other than tcp or mpi is not a row', () => {
    const line = JSON.stringify({ ...row('tcp', 'sync', 8, 1), transport: 'udp' });
    expect(() => parseBenchJson(line, 'x.jsonl')).toThrow(/x\.jsonl:1 is not a row/);
  });
});
