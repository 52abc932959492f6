import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { TopocollError } from '../errors.js';
import { PACKAGE_ROOT } from '../util/package-root.js';
import type { CliIo } from './io.js';
import type { BindPolicy } from './launcher.js';
import type { Pt2ptRow, Pt2ptSettings } from './pt2pt-worker.js';
import { runWorkerJob } from './worker-job.js';

/**
 * `topocoll bench --pt2pt`: OSU's osu_latency and osu_bw between two ranks (src/cli/pt2pt-worker.ts),
 * on one node and on two emulated nodes, beside Open MPI's point-to-point at the same sizes,
 * iterations and window (bench/ompi/pt2pt.c: shared memory on one node; `--mca btl self,tcp`
 * for the two emulated nodes, which Open MPI cannot otherwise emulate).
 */
export interface Pt2ptBench {
  bind: BindPolicy;
  settings: Pt2ptSettings;
  /** Measure Open MPI too. */
  mpi: boolean;
  io: CliIo;
}

interface Placement {
  label: string;
  nodes?: number;
  mca: string[];
}

const PLACEMENTS: Placement[] = [
  { label: 'one node', mca: [] },
  { label: '2 emulated nodes', nodes: 2, mca: ['--mca', 'btl', 'self,tcp'] },
];

const harness = join(PACKAGE_ROOT, 'bench/ompi/pt2pt.c');
const binary = join(PACKAGE_ROOT, 'build/bench/pt2pt');

/** Why Open MPI cannot be measured (undefined: it can; the harness is built if need be). */
function ompiUnavailable(): string | undefined {
  if (spawnSync('sh', ['-c', 'command -v mpirun'], { stdio: 'ignore' }).status !== 0) return 'mpirun is not installed (apt-get install openmpi-bin)';
  if (existsSync(binary) && (!existsSync(harness) || statSync(binary).mtimeMs >= statSync(harness).mtimeMs)) return undefined;
  if (!existsSync(harness)) return `the harness source ${harness} is not in this installation`;
  if (spawnSync('sh', ['-c', 'command -v mpicc'], { stdio: 'ignore' }).status !== 0) return 'mpicc is not installed (apt-get install libopenmpi-dev)';
  mkdirSync(dirname(binary), { recursive: true });
  execFileSync('mpicc', ['-O2', '-o', binary, harness], { stdio: 'inherit' });
  return undefined;
}

function runOmpi(placement: Placement, settings: Pt2ptSettings): { rows: Pt2ptRow[]; version: string } {
  const args = ['--allow-run-as-root', '--oversubscribe', '--bind-to', 'core:overload-allowed', ...placement.mca, '-np', '2', binary];
  const r = spawnSync('mpirun', [...args, String(settings.iterations), String(settings.window), ...settings.sizes.map(String)], {
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (r.status !== 0)
    throw new TopocollError('EINVAL', `topocoll bench --pt2pt: Open MPI's harness failed (exit ${r.status}): ${String(r.stderr).split('\n')[0]}`);
  const rows: Pt2ptRow[] = [];
  let version = '';
  for (const line of String(r.stdout).split('\n')) {
    const m = /^(latency|bandwidth) (\d+) ([\d.]+)$/.exec(line);
    if (m) rows.push({ test: m[1] as Pt2ptRow['test'], bytes: Number(m[2]), value: Number(m[3]) });
    else if (line.startsWith('# pt2pt ')) version = line.slice(8).split(',')[0]!;
  }
  return { rows, version };
}

const fmtBytes = (b: number): string => (b >= 1 << 20 ? `${b / (1 << 20)} MiB` : b >= 1024 ? `${b / 1024} KiB` : `${b} B`);
const fmt = (v: number | undefined, digits: number): string => (v === undefined ? '–' : v.toFixed(digits));

/** Runs the benchmark and prints a table per placement; the exit code. */
export async function benchPt2pt(bench: Pt2ptBench): Promise<number> {
  const { io, settings } = bench;
  const why = bench.mpi ? ompiUnavailable() : 'not asked for (--no-mpi)';
  for (const placement of PLACEMENTS) {
    io.stderr(`topocoll bench --pt2pt: topocoll, ${placement.label}\n`);
    const job = await runWorkerJob({
      ranks: 2,
      bind: bench.bind,
      nodes: placement.nodes,
      worker: 'pt2pt-worker.js',
      settingsVariable: 'TOPOCOLL_PT2PT',
      settings,
      io: { ...io, stderr: (line) => io.stderr(`${line}\n`) },
    });
    if (job.code !== 0) {
      io.stderr(`topocoll bench --pt2pt: the job failed (exit ${job.code})\n`);
      return job.code;
    }
    const mine = job.records as Pt2ptRow[];
    let ompi: Pt2ptRow[] = [];
    let note = `no Open MPI baseline: ${why}`;
    if (why === undefined) {
      io.stderr(`topocoll bench --pt2pt: Open MPI, ${placement.label}\n`);
      const run = runOmpi(placement, settings);
      ompi = run.rows;
      note = `Open MPI: ${run.version}${placement.mca.length > 0 ? ` (${placement.mca.slice(1).join(' ')})` : ''}`;
    }
    const cell = (rows: Pt2ptRow[], test: Pt2ptRow['test'], bytes: number) => rows.find((r) => r.test === test && r.bytes === bytes)?.value;
    const lines = [
      `point-to-point, 2 ranks, ${placement.label} (${note})`,
      'bytes       latency µs   Open MPI µs   ×        bandwidth MB/s   Open MPI MB/s   %',
    ];
    for (const bytes of settings.sizes) {
      const lat = cell(mine, 'latency', bytes);
      const olat = cell(ompi, 'latency', bytes);
      const bw = cell(mine, 'bandwidth', bytes);
      const obw = cell(ompi, 'bandwidth', bytes);
      lines.push(
        [
          fmtBytes(bytes).padEnd(11),
          fmt(lat, 1).padStart(10),
          fmt(olat, 2).padStart(13),
          (lat !== undefined && olat !== undefined ? (lat / olat).toFixed(1) : '–').padStart(7),
          fmt(bw, bw !== undefined && bw < 10 ? 2 : 0).padStart(17),
          fmt(obw, obw !== undefined && obw < 10 ? 2 : 0).padStart(15),
          (bw !== undefined && obw !== undefined ? ((100 * bw) / obw).toFixed(0) : '–').padStart(5),
        ].join(' '),
      );
    }
    io.stdout(`${lines.join('\n')}\n\n`);
  }
  return 0;
}
