/**
 * The remote-shell agent of an emulated cluster (dist/cli/cluster-agent.js): what `mpirun --mca
 * plm_rsh_agent` and `mpiexec -launcher ssh -launcher-exec` call instead of ssh. It runs the
 * command words with `sh -c` inside the named host. The cluster is the one named by
 * $TOPOCOLL_CLUSTER (which `cluster exec` sets for the launcher it starts), else the only one up.
 *
 * The agent is one executable path without arguments because Hydra's -launcher-exec takes one
 * file name (it does not split words), and a name that both launchers accept keeps the two
 * command lines alike.
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { constants } from 'node:os';
import { TopocollError } from '../errors.js';
import { enterHostArgv } from './build.js';
import { parseRshArgs } from './rsh-args.js';
import { DEFAULT_CLUSTER_NAME, hostOf, readState, requireState, stateDir, stateFile, type ClusterState } from './state.js';

/** The running clusters' names. */
export function runningClusters(env: NodeJS.ProcessEnv): string[] {
  let files: string[];
  try {
    files = readdirSync(stateDir(env));
  } catch {
    return [];
  }
  return files.flatMap((f) => {
    const m = /^cluster-(.+)\.json$/.exec(f);
    return m && readState(stateFile(env, m[1]!)) !== undefined ? [m[1]!] : [];
  });
}

/** The cluster a command means: the named one, else $TOPOCOLL_CLUSTER, else `default`, else the only one up. */
export function resolveCluster(env: NodeJS.ProcessEnv, name: string | undefined): ClusterState {
  const chosen = name ?? env.TOPOCOLL_CLUSTER;
  if (chosen !== undefined) return requireState(env, chosen);
  const running = runningClusters(env);
  if (running.includes(DEFAULT_CLUSTER_NAME) || running.length !== 1) return requireState(env, DEFAULT_CLUSTER_NAME);
  return requireState(env, running[0]!);
}

/**
 * Runs `argv` inside a host with the caller's stdio and environment (plus TOPOCOLL_CLUSTER);
 * resolves with its exit code (128 + signal number when killed). Signals the caller gets are
 * passed on, so the command ends as it would under ssh.
 */
export function runInHost(state: ClusterState, host: string, argv: readonly string[], env: NodeJS.ProcessEnv, cwd: string): Promise<number> {
  const h = hostOf(state, host);
  const [cmd, ...args] = enterHostArgv(h.pid, argv, cwd, state.keep);
  const child = spawn(cmd!, args, {
    stdio: 'inherit',
    env: { ...env, TOPOCOLL_CLUSTER: state.name },
  });
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
  const handlers = (['SIGINT', 'SIGTERM', 'SIGHUP'] as const).map((s) => [s, forward(s)] as const);
  for (const [s, f] of handlers) process.on(s, f);
  return new Promise((resolve, reject) => {
    child.on('error', (e) => reject(new TopocollError('ENOTSUP', `cannot enter host ${host}: ${e.message}`, { cause: e })));
    child.on('exit', (code, signal) => {
      for (const [s, f] of handlers) process.off(s, f);
      resolve(code ?? 128 + (signal === null ? 0 : constants.signals[signal]));
    });
  });
}

/** The agent's main: `agent [ssh options] host command…`. */
export async function agentMain(argv: readonly string[], env: NodeJS.ProcessEnv, cwd: string): Promise<number> {
  try {
    const call = parseRshArgs(argv);
    if (call.command === '')
      throw new TopocollError('EINVAL', 'cluster agent: no command given', { hint: 'For a shell in a host use "topocoll cluster exec <host>".' });
    return await runInHost(resolveCluster(env, undefined), call.host, ['sh', '-c', call.command], env, cwd);
  } catch (e) {
    if (e instanceof TopocollError) {
      process.stderr.write(`topocoll cluster agent: ${e.message}\n`);
      return 255; // what ssh returns when it cannot reach the host
    }
    throw e;
  }
}
