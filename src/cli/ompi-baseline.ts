import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { PACKAGE_ROOT } from '../util/package-root.js';
import type { BenchRow, BenchSettings } from './bench-worker.js';

/**
 * Open MPI's own collectives, measured by bench/ompi/coll_latency.c at the same process count
 * and sizes, so `topocoll bench` prints both from one run. Absent Open MPI, there is no baseline
 * and the bench says so.
 */

const harnessSource = join(PACKAGE_ROOT, 'bench/ompi/coll_latency.c');
const harnessBinary = join(PACKAGE_ROOT, 'build/bench/coll_latency');

function has(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/** Why there is no baseline, or undefined when there can be one (building the harness if needed). */
export function ompiUnavailable(): string | undefined {
  if (!has('mpirun')) return 'Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev)';
  const built = existsSync(harnessBinary) ? statSync(harnessBinary).mtimeMs : -1;
  if (!existsSync(harnessSource)) return built >= 0 ? undefined : `the harness source ${harnessSource} is not in this installation`;
  // Rebuilt when the source is newer: an old binary would not understand newer arguments.
  if (built >= statSync(harnessSource).mtimeMs) return undefined;
  if (!has('mpicc')) return 'mpicc is not installed (apt-get install libopenmpi-dev)';
  mkdirSync(dirname(harnessBinary), { recursive: true });
  execFileSync('mpicc', ['-O2', '-o', harnessBinary, harnessSource], { stdio: 'inherit' });
  return undefined;
}

export interface OmpiRun {
  rows: BenchRow[];
  version: string;
}

/** Runs one collective's sweep under mpirun; `mca` selects components (e.g. han). */
export function runOmpi(collective: string, ranks: number, settings: BenchSettings, mca: string[] = []): OmpiRun {
  const args = [
    '--oversubscribe',
    '--bind-to',
    'core:overload-allowed',
    '-np',
    String(ranks),
    ...mca,
    harnessBinary,
    collective,
    String(settings.minBytes),
    String(settings.maxBytes),
    String(settings.itersSmall),
    String(settings.itersLarge),
    String(settings.largeBytes),
    // The same warm-up calls as bench-worker's measure() (which goes on for 20 ms at least, for
    // V8's compiler; Open MPI has none), and the same repeats.
    String(Math.max(200, Math.floor(settings.itersSmall / 5))),
    String(settings.repeats),
  ];
  const r = spawnSync('mpirun', args, {
    encoding: 'utf8',
    env: { ...process.env, OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' },
    timeout: 600_000,
  });
  if (r.status !== 0) throw new Error(`mpirun ${args.join(' ')} failed (${r.status}): ${r.stderr.slice(0, 2000)}`);
  const rows: BenchRow[] = [];
  let version = '';
  for (const line of r.stdout.split('\n')) {
    if (line.startsWith('#')) {
      version = line.replace(/^#\s*/, '');
      continue;
    }
    const f = line.trim().split(/\s+/);
    if (f.length < 5) continue;
    rows.push({ collective, mode: 'ompi', bytes: Number(f[0]), avgUs: Number(f[1]), minUs: Number(f[2]), maxUs: Number(f[3]), iterations: Number(f[4]) });
  }
  return { rows, version };
}
