/**
 * The keeper: the process that owns a cluster `cluster up` made. Every holder of the cluster's
 * namespaces is its child and dies with it (src/cluster/build.ts), so the cluster lives exactly as
 * long as the keeper: until SIGTERM, SIGINT or SIGHUP (then it takes the cluster down and exits)
 * or until it is killed (then the kernel and the cleaner do).
 */
import { PACKAGE_ROOT } from '../util/package-root.js';
import { processStartTime, startCluster, type ClusterOptions, type RunningCluster } from './build.js';
import type { ClusterPlan } from './plan.js';
import { createState, removeOwnState, type ClusterState } from './state.js';

/** The agent's path (an executable file, built from src/cli/cluster-agent.ts). */
export const AGENT_PATH = `${PACKAGE_ROOT}dist/cli/cluster-agent.js`;

export interface KeptCluster {
  state: ClusterState;
  cluster: RunningCluster;
  /** Resolves once a signal has taken the cluster down. */
  done: Promise<void>;
}

/** Builds the cluster, writes its state file, and keeps it until this process is signalled. */
export async function keepCluster(name: string, plan: ClusterPlan, path: string, opts: ClusterOptions): Promise<KeptCluster> {
  const cluster = await startCluster(plan, { ...opts, stateFile: path });
  // A signal or an exit while setting up would leave the state file half-written: both are handled from here on.
  const exitHandler = (): void => {
    cluster.destroySync();
    removeOwnState(path, process.pid);
  };
  process.on('exit', exitHandler);
  const state = clusterStateOf(name, plan, cluster, opts.keep ?? []);
  try {
    createState(path, state);
  } catch (e) {
    process.off('exit', exitHandler);
    await cluster.destroy();
    throw e;
  }
  // Signal handlers alone do not keep Node's event loop alive (the holders are unref'd).
  const alive = setInterval(() => {}, 1 << 30);
  const done = new Promise<void>((resolve) => {
    const stop = (): void => {
      for (const s of SIGNALS) process.off(s, stop);
      void cluster.destroy().then(() => {
        clearInterval(alive);
        process.off('exit', exitHandler);
        removeOwnState(path, process.pid);
        resolve();
      });
    };
    for (const s of SIGNALS) process.on(s, stop);
  });
  return { state, cluster, done };
}

/** The state file's content for a cluster this process owns (its keeper). */
export function clusterStateOf(name: string, plan: ClusterPlan, cluster: RunningCluster, keep: readonly string[]): ClusterState {
  return {
    version: 1,
    name,
    keeper: { pid: process.pid, startTime: processStartTime(process.pid)! },
    cleanerPid: cluster.cleanerPid,
    hosts: cluster.hosts.map((h) => ({ name: h.name, address: h.address, pid: h.pid, startTime: h.startTime, leaf: plan.switches[h.leaf]!.name })),
    switches: plan.switches.map((s) => ({ name: s.name, level: s.level, ...(s.parent !== undefined ? { parent: plan.switches[s.parent]!.name } : {}) })),
    subnetPrefix: plan.prefixLength,
    keep: [...keep],
    namespaces: cluster.namespaces,
    agent: AGENT_PATH,
  };
}

const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;
