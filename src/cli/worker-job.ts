import { fileURLToPath } from 'node:url';
import { launch, type BindPolicy } from './launcher.js';
import type { CliIo } from './io.js';

/**
 * A measuring job of the CLI (bench, tune): ranks of a worker script started by the launcher,
 * its settings in one environment variable, its results as JSON lines on stdout. Other output
 * goes to the user; the launcher's wrap-around notice is only noted (a table says it).
 */
export interface WorkerJob {
  ranks: number;
  bind: BindPolicy;
  nodes?: number;
  /** A node-to-switch file or Slurm topology.conf (with emulated nodes: their switches). */
  network?: string;
  config?: string;
  /** The worker module beside this file, e.g. `bench-worker.js`. */
  worker: string;
  /** The environment variable the worker reads its settings from. */
  settingsVariable: string;
  settings: unknown;
  io: CliIo;
}

export async function runWorkerJob(job: WorkerJob): Promise<{ code: number; records: unknown[]; oversubscribed: boolean }> {
  const records: unknown[] = [];
  let oversubscribed = false;
  const code = await launch({
    ranks: job.ranks,
    bind: job.bind,
    nodes: job.nodes,
    network: job.network,
    config: job.config,
    output: 'lines',
    script: fileURLToPath(new URL(job.worker, import.meta.url)),
    args: [],
    env: { ...job.io.env, [job.settingsVariable]: JSON.stringify(job.settings) },
    stdout: (line) => {
      if (line.startsWith('{')) records.push(JSON.parse(line));
      else job.io.stdout(line);
    },
    stderr: (line) => {
      if (/binding wraps around/.test(line)) oversubscribed = true;
      else job.io.stderr(line);
    },
  });
  return { code, records, oversubscribed };
}
