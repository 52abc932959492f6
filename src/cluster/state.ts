/**
 * The state file of a cluster that `cluster up` keeps running: what `down`, `exec` and the agent
 * need (the keeper's pid, each host's holder pid and address). It lives under /run/topocoll/
 * (tmpfs: gone at reboot, like the cluster), which the hosts see too since they share the file
 * system outside /tmp and /dev/shm — the agent reads it from inside a host.
 *
 * The file is removed by the cluster's cleaner when the cluster goes, whatever ends the keeper;
 * a file whose keeper is no longer running (both killed at once) counts as absent and is removed
 * by the next command that reads it.
 */
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { TopocollError } from '../errors.js';
import { processStartTime } from './build.js';

export interface ClusterStateHost {
  name: string;
  address: string;
  /** The holder of its namespaces. */
  pid: number;
  startTime: number;
  leaf: string;
}

export interface ClusterState {
  version: 1;
  name: string;
  /** The process that owns the cluster: everything goes when it ends. */
  keeper: { pid: number; startTime: number };
  cleanerPid: number;
  hosts: ClusterStateHost[];
  switches: { name: string; level: number; parent?: string }[];
  subnetPrefix: number;
  /** Directories under /tmp kept visible in the hosts. */
  keep: string[];
  /** Inodes of its network and mount namespaces. */
  namespaces: { net: number[]; mnt: number[] };
  /** The rsh agent for mpirun and mpiexec. */
  agent: string;
}

export const DEFAULT_CLUSTER_NAME = 'default';
const NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/;

export function checkClusterName(name: string): string {
  if (!NAME.test(name)) throw new TopocollError('EINVAL', `cluster name "${name}" must be 1 to 32 letters, digits, '_' or '-'`);
  return name;
}

/** The directory of state files: $TOPOCOLL_CLUSTER_DIR, else /run/topocoll. */
export function stateDir(env: NodeJS.ProcessEnv): string {
  return env.TOPOCOLL_CLUSTER_DIR || '/run/topocoll';
}

export function stateFile(env: NodeJS.ProcessEnv, name: string): string {
  return join(stateDir(env), `cluster-${checkClusterName(name)}.json`);
}

/**
 * Creates the state file, written whole under another name and then linked into place, so a
 * reader never sees half a file and of two keepers of one name only the first gets it (EINVAL
 * for the second).
 */
export function createState(path: string, state: ClusterState): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o644 });
  try {
    linkSync(tmp, path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST')
      throw new TopocollError('EINVAL', `cluster "${state.name}" is already up (${path})`, { hint: 'Give another --name.' });
    throw e;
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Removes the state file if this keeper wrote it (a later keeper of the same name may have replaced a stale one). */
export function removeOwnState(path: string, keeperPid: number): void {
  try {
    if ((JSON.parse(readFileSync(path, 'utf8')) as Partial<ClusterState>).keeper?.pid === keeperPid) rmSync(path, { force: true });
  } catch {
    /* gone already, or not a state file: not ours */
  }
}

/** Whether the process that wrote `keeper` still runs (not a later process with its pid). */
export function keeperAlive(state: ClusterState): boolean {
  return processStartTime(state.keeper.pid) === state.keeper.startTime;
}

/**
 * The state of a running cluster, or undefined when none of that name is up (a stale file is
 * removed on the way).
 */
export function readState(path: string): ClusterState | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  let state: ClusterState;
  try {
    state = JSON.parse(text) as ClusterState;
  } catch (cause) {
    throw new TopocollError('ECONFIG', `${path} is not a cluster state file`, { cause, hint: 'Remove it if no cluster of that name runs.' });
  }
  if (state.version !== 1 || !Array.isArray(state.hosts))
    throw new TopocollError('ECONFIG', `${path} is not a cluster state file of this version`, { hint: 'Remove it if no cluster of that name runs.' });
  if (!keeperAlive(state)) {
    rmSync(path, { force: true });
    return undefined;
  }
  return state;
}

/** The state of cluster `name`, or EINVAL naming what to do. */
export function requireState(env: NodeJS.ProcessEnv, name: string): ClusterState {
  const path = stateFile(env, name);
  const state = readState(path);
  if (state === undefined)
    throw new TopocollError('EINVAL', `no cluster named "${name}" is up (no ${path})`, { hint: 'Start one with "topocoll cluster up".' });
  return state;
}

export function hostOf(state: ClusterState, host: string): ClusterStateHost {
  const h = state.hosts.find((x) => x.name === host);
  if (h === undefined)
    throw new TopocollError('EINVAL', `cluster "${state.name}" has no host "${host}"`, { hint: `Its hosts are ${state.hosts.map((x) => x.name).join(', ')}.` });
  if (processStartTime(h.pid) !== h.startTime)
    throw new TopocollError('EPEERLOST', `host ${host} of cluster "${state.name}" is gone (its holder ${h.pid} no longer runs)`, {
      hint: 'Take the cluster down and up again.',
    });
  return h;
}
