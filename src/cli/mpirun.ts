import { spawn, spawnSync } from 'node:child_process';
import { constants } from 'node:os';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { TopocollError } from '../errors.js';
import { discoverMachine } from '../topology/discover.js';
import { PACKAGE_ROOT } from '../util/package-root.js';
import { bindings, jobLayout, type LaunchOptions } from './launcher.js';

/**
 * The ranks of a job started by Open MPI's mpirun instead of topocoll's launcher, for jobs whose
 * configuration says `transport: mpi`. Emulated nodes take mpirun's MPMD form, one app context
 * per node, so ranks come in the same blocks as under the launcher:
 * `mpirun … -np 2 -x TOPOCOLL_NODE=node0 node script : -np 2 -x TOPOCOLL_NODE=node1 node script`.
 */

export type MpirunOptions = Pick<LaunchOptions, 'ranks' | 'bind' | 'nodes' | 'config' | 'script' | 'args' | 'env' | 'stdout' | 'stderr'>;

/**
 * What the launcher hands its ranks and mpirun must not: a rank that finds TOPOCOLL_RANK takes
 * the launcher's variables over MPI's, and a TOPOCOLL_NODE of the caller would put every rank on
 * one node.
 */
const LAUNCHER_VARIABLES = [
  'TOPOCOLL_RANK',
  'TOPOCOLL_SIZE',
  'TOPOCOLL_LOCAL_RANK',
  'TOPOCOLL_LOCAL_SIZE',
  'TOPOCOLL_RENDEZVOUS',
  'TOPOCOLL_TOKEN',
  'TOPOCOLL_NODE',
  'TOPOCOLL_NETWORK',
  'TOPOCOLL_TIMEOUT_MS',
];

/**
 * Throws ECONFIG, saying how to fix it, unless Open MPI's mpirun is on PATH and topocoll/mpi's
 * addon loads. The addon is tried in a child process with the job's environment: that is where
 * the ranks will look for it (TOPOCOLL_MPI_ADDON), and this process stays free of the MPI library.
 */
export function checkMpirunJob(env: NodeJS.ProcessEnv): void {
  const version = spawnSync('mpirun', ['--version'], { encoding: 'utf8', env });
  if (version.error !== undefined || version.status !== 0) {
    throw new TopocollError('ECONFIG', 'transport mpi: mpirun is not on PATH', {
      hint: 'Install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev), then "npm run build:mpi" in the topocoll package; or use --transport tcp.',
    });
  }
  if (!/Open MPI|OpenRTE/.test(version.stdout)) {
    throw new TopocollError('ECONFIG', `transport mpi: the mpirun on PATH is not Open MPI's (${version.stdout.split('\n')[0]!.trim()})`, {
      hint: "The bench starts emulated nodes with Open MPI's MPMD options (-x NAME=VALUE); put Open MPI's mpirun first on PATH, or use --transport tcp.",
    });
  }
  const mpiModule = new URL('../mpi.js', import.meta.url).href;
  const probe = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `import { mpiAvailable } from ${JSON.stringify(mpiModule)}; process.exitCode = mpiAvailable() ? 0 : 3;`],
    { encoding: 'utf8', env },
  );
  if (probe.status !== 0) {
    const where = env.TOPOCOLL_MPI_ADDON ? `TOPOCOLL_MPI_ADDON=${env.TOPOCOLL_MPI_ADDON}` : join(PACKAGE_ROOT, 'build/mpi/Release/topocoll_mpi.node');
    throw new TopocollError('ECONFIG', `transport mpi: topocoll/mpi's addon does not load (${where})`, {
      hint: 'Build it with "npm run build:mpi" in the topocoll package (needs mpicc: apt-get install libopenmpi-dev), or use --transport tcp.',
    });
  }
}

/**
 * Runs the job under mpirun and resolves to its exit code (128 + the signal's number when mpirun
 * was killed). Output comes line by line, as the launcher's `lines` output. mpirun ends the whole
 * job when a rank fails. SIGINT and SIGTERM are passed on to mpirun, which stops its ranks.
 */
export async function launchUnderMpirun(options: MpirunOptions): Promise<number> {
  const layout = jobLayout(options.ranks, options.nodes);
  // The same warning as the launcher's when ranks share cores (callers note it): mpirun's
  // core:overload-allowed then puts rank r on core r mod the cores, as the launcher does.
  if (options.bind !== 'none') bindings(discoverMachine({ env: options.env }), options.bind, layout, options.stderr);
  const env: NodeJS.ProcessEnv = { ...options.env, OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' };
  for (const name of LAUNCHER_VARIABLES) delete env[name];
  if (options.config !== undefined) env.TOPOCOLL_CONFIG = options.config;
  // Every TOPOCOLL_ variable goes to the ranks by name (-x NAME takes its value from here), so
  // settings in JSON need no quoting on mpirun's command line.
  const exported = Object.keys(env).filter((name) => name.startsWith('TOPOCOLL_'));
  const contexts = layout.localSizes.flatMap((count, node) => [
    ...(node > 0 ? [':'] : []),
    '-np',
    String(count),
    ...(options.nodes !== undefined ? ['-x', `TOPOCOLL_NODE=node${node}`] : []),
    ...exported.flatMap((name) => ['-x', name]),
    process.execPath,
    options.script,
    ...options.args,
  ]);
  const bindTo = options.bind === 'none' ? 'none' : `${options.bind}:overload-allowed`;
  const child = spawn('mpirun', ['--oversubscribe', '--bind-to', bindTo, ...contexts], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  createInterface({ input: child.stdout }).on('line', (line) => options.stdout(`${line}\n`));
  createInterface({ input: child.stderr }).on('line', (line) => options.stderr(`${line}\n`));
  const onSignal = (signal: NodeJS.Signals) => child.kill(signal);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await new Promise<number>((resolve) => {
      child.on('error', (e) => {
        options.stderr(`topocoll: cannot start mpirun: ${e.message}\n`);
        resolve(127);
      });
      child.on('close', (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 1)));
    });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
