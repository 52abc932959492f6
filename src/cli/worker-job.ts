import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../config/load.js';
import { PACKAGE_ROOT } from '../util/package-root.js';
import { TopocollError } from '../errors.js';
import type { TopocollConfig } from '../config/schema.js';
import { launch, type BindPolicy } from './launcher.js';
import { launchUnderMpirun } from './mpirun.js';
import type { CliIo } from './io.js';

/**
 * A measuring job of the CLI (bench, tune): ranks of a worker script started by the launcher,
 * its settings in one environment variable, its results as JSON lines on stdout. Other output
 * goes to the user; the launcher's wrap-around notice is only noted (a table says it).
 */
export interface WorkerJob {
  ranks: number;
  bind: BindPolicy;
  /** Each rank's CPUs outright, instead of `bind` (the launcher's `cpus`; not under mpirun). */
  cpus?: readonly (readonly number[])[];
  nodes?: number;
  /** A node-to-switch file or Slurm topology.conf (with emulated nodes: their switches). */
  network?: string;
  config?: string;
  /**
   * What carries the messages between nodes. `mpi`: the ranks run under Open MPI's mpirun with
   * a configuration of `transport: mpi`; `tcp`: under topocoll's launcher with one of `transport:
   * tcp`. Either way the rest of the configuration is `config` (else TOPOCOLL_CONFIG, else the
   * defaults). Undefined: the launcher with `config` as it is.
   */
  transport?: TopocollConfig['transport'];
  /** The worker module beside this file, e.g. `bench-worker.js`. */
  worker: string;
  /** The environment variable the worker reads its settings from. */
  settingsVariable: string;
  settings: unknown;
  io: CliIo;
}

export async function runWorkerJob(job: WorkerJob): Promise<{ code: number; records: unknown[]; oversubscribed: boolean }> {
  if (job.transport === 'mpi' && job.cpus !== undefined) throw new TopocollError('EINVAL', 'a job under mpirun takes --bind, not CPU sets');
  const records: unknown[] = [];
  let oversubscribed = false;
  const dir = mkdtempSync(join(tmpdir(), 'topocoll-job-'));
  try {
    const options = {
      ranks: job.ranks,
      bind: job.bind,
      cpus: job.cpus,
      nodes: job.nodes,
      network: job.network,
      config: configForTransport(job, dir),
      output: 'lines' as const,
      // dist/cli/, found from the package root: the CLI runs from the bundle (scripts/bundle.mjs).
      script: join(PACKAGE_ROOT, 'dist/cli', job.worker),
      args: [],
      env: { ...job.io.env, [job.settingsVariable]: JSON.stringify(job.settings) },
      stdout: (line: string) => {
        if (line.startsWith('{')) records.push(JSON.parse(line));
        else job.io.stdout(line);
      },
      stderr: (line: string) => {
        if (/binding wraps around/.test(line)) oversubscribed = true;
        else job.io.stderr(line);
      },
    };
    const code = job.transport === 'mpi' ? await launchUnderMpirun(options) : await launch(options);
    return { code, records, oversubscribed };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The configuration file the ranks get: `job.config` itself, unless its transport is not the one
 * asked for; then, in `dir`, the same configuration (validated, every default filled in, paths
 * absolute) with that transport. Under mpirun the network file goes in it too: ranks read
 * TOPOCOLL_NETWORK only from topocoll's launcher.
 */
function configForTransport(job: WorkerJob, dir: string): string | undefined {
  if (job.transport === undefined) return job.config;
  const base = resolveConfig(job.config, job.io.env);
  const network = job.transport === 'mpi' && job.network !== undefined;
  if (base.transport === job.transport && !network) return job.config;
  const config: TopocollConfig = {
    ...base,
    transport: job.transport,
    ...(network ? { network: { source: 'file' as const, file: job.network! } } : {}),
  };
  const file = join(dir, `transport-${job.transport}.yaml`);
  // JSON is YAML; the validated object reads back as itself.
  writeFileSync(file, JSON.stringify(config, null, 2) + '\n');
  return file;
}
