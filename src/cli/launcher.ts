import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { loadConfigFile, resolveConfig } from '../config/load.js';
import { TopocollError } from '../errors.js';
import { setThreadAffinity } from '../native.js';
import { discoverMachine, MACHINE_HANDOFF_ENV, machineHandoff } from '../topology/discover.js';
import type { MachineTopology } from '../topology/types.js';
import { createJobToken } from '../runtime/rendezvous/protocol.js';
import { RendezvousServer } from '../runtime/rendezvous/server.js';
import { removeJobSegments } from '../runtime/segment-name.js';

/**
 * `topocoll run`: starts N Node processes on this machine, binds them, hands each its part of
 * the job through the environment, and supervises them like mpirun: output optionally tagged
 * with the rank, SIGINT/SIGTERM forwarded, the first non-zero exit code returned, and the rest
 * stopped when one fails — after a grace period in which the survivors can report the failure
 * themselves (they get EPEERLOST).
 */

export type BindPolicy = 'core' | 'numa' | 'socket' | 'none';

export interface LaunchOptions {
  ranks: number;
  bind: BindPolicy;
  /**
   * The CPUs of each rank, given outright (instead of `bind`): `topocoll tune` puts two ranks on
   * one core to measure links between ranks that take turns on a core.
   */
  cpus?: readonly (readonly number[])[];
  /** Emulated compute nodes (separate shared-memory domains, TCP between them); undefined = the real node. */
  nodes?: number;
  config?: string;
  network?: string;
  /**
   * `inherit`: ranks write to this process's stdout/stderr; `tagged`: each line prefixed with
   * `[rank] `; `lines`: untagged lines passed to stdout/stderr (for callers that parse them).
   */
  output: 'inherit' | 'tagged' | 'lines';
  /** Init and failure-report timeout handed to the ranks, in milliseconds. */
  timeoutMs?: number;
  script: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

/**
 * How long survivors get to report a failure before they are stopped, beyond the init timeout
 * (a rank that fails during init leaves the others waiting at most that long).
 */
const GRACE_EXTRA_MS = 2_000;
const KILL_AFTER_TERM_MS = 2_000;

export async function launch(options: LaunchOptions): Promise<number> {
  const { ranks } = options;
  const layout = jobLayout(ranks, options.nodes);
  // The configuration is checked here too, before any rank starts: the init timeout sets the grace.
  const initMs = options.timeoutMs ?? (options.config !== undefined ? loadConfigFile(options.config) : resolveConfig(undefined, options.env)).timeouts.initMs;
  if (options.cpus !== undefined && options.cpus.length !== ranks) {
    throw new TopocollError('EINVAL', `${options.cpus.length} CPU sets for ${ranks} ranks`);
  }
  let cpuSets = options.cpus;
  // The machine lstopo described for the binding, for the ranks (discover.ts, MACHINE_HANDOFF_ENV).
  let machineJson: string | undefined;
  if (cpuSets === undefined && options.bind !== 'none') {
    const machine = discoverMachine({ env: options.env });
    cpuSets = bindings(machine, options.bind, layout, options.stderr);
    machineJson = machineHandoff(machine);
  }

  const token = createJobToken();
  const server = await RendezvousServer.listen({ token, ranks });
  const children: ChildProcess[] = [];
  let firstFailure: number | undefined;
  let stopTimer: NodeJS.Timeout | undefined;
  const exited = new Set<number>();

  const stopAll = (signal: NodeJS.Signals) => {
    children.forEach((c, rank) => {
      if (exited.has(rank)) return;
      c.kill(signal);
      // A stopped rank (SIGSTOP, a debugger) receives the signal only once it runs again.
      if (signal !== 'SIGKILL') c.kill('SIGCONT');
    });
  };
  // After a failure, ranks that are all stopped cannot report anything: no need to wait the grace.
  let stoppedCheck: NodeJS.Timeout | undefined;
  const stopIfAllStopped = () => {
    const running = children.filter((_, rank) => !exited.has(rank));
    if (running.length > 0 && running.every((c) => c.pid !== undefined && isStopped(c.pid))) stopAll('SIGKILL');
  };
  const onSignal = (signal: NodeJS.Signals) => {
    firstFailure ??= signal === 'SIGINT' ? 130 : 143;
    stopAll(signal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const done = new Promise<void>((resolve) => {
      for (let rank = 0; rank < ranks; rank++) {
        const child = spawnRank(options, rank, layout, token, server.address.port, cpuSets?.[rank], machineJson);
        children.push(child);
        child.on('exit', (code, signal) => {
          exited.add(rank);
          const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
          server.rankExited(rank, `its process ${how} before its init completed`);
          const failed = code !== 0;
          if (failed && firstFailure === undefined) {
            firstFailure = code ?? 128 + signalNumber(signal);
            options.stderr(`topocoll run: rank ${rank} ${how}; stopping the job\n`);
            const grace = initMs + GRACE_EXTRA_MS;
            stoppedCheck = setInterval(stopIfAllStopped, 200);
            stopTimer = setTimeout(() => {
              stopAll('SIGTERM');
              stopTimer = setTimeout(() => stopAll('SIGKILL'), KILL_AFTER_TERM_MS);
            }, grace);
          }
          if (exited.size === ranks) resolve();
        });
      }
    });
    await done;
  } finally {
    if (stopTimer) clearTimeout(stopTimer);
    if (stoppedCheck) clearInterval(stoppedCheck);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await server.close();
    removeJobSegments(token);
  }
  return firstFailure ?? 0;
}

export interface NodeLayout {
  /** Node index of each rank (blocks: node k holds consecutive ranks). */
  nodeOf: number[];
  /** Index of each rank among its node's ranks. */
  localOf: number[];
  localSizes: number[];
}

/** `-n` and `--nodes` checked (EINVAL), and the ranks laid out over the (emulated) nodes. */
export function jobLayout(ranks: number, nodes: number | undefined): NodeLayout {
  if (!Number.isInteger(ranks) || ranks < 1) throw new TopocollError('EINVAL', `-n must be a positive integer, got ${ranks}`);
  if (nodes !== undefined && (!Number.isInteger(nodes) || nodes < 1 || nodes > ranks)) {
    throw new TopocollError('EINVAL', `--nodes must be between 1 and the number of ranks (${ranks}), got ${nodes}`);
  }
  return nodeLayout(ranks, nodes ?? 1);
}

/** Ranks in blocks over the nodes; the first N mod K nodes get one rank more. */
export function nodeLayout(ranks: number, nodes: number): NodeLayout {
  const base = Math.floor(ranks / nodes);
  const extra = ranks % nodes;
  const nodeOf: number[] = [];
  const localOf: number[] = [];
  const localSizes: number[] = [];
  for (let k = 0; k < nodes; k++) {
    const count = base + (k < extra ? 1 : 0);
    localSizes.push(count);
    for (let j = 0; j < count; j++) {
      nodeOf.push(k);
      localOf.push(j);
    }
  }
  return { nodeOf, localOf, localSizes };
}

/**
 * The CPUs of each rank: rank r gets core (or NUMA node / package) r mod the units. The emulated
 * nodes all run on this machine, so ranks are spread over its cores as one set: binding by the
 * node-local index put local rank 0 of every emulated node on core 0, and two ranks linked by
 * TCP then shared one core while the others stood idle.
 */
export function bindings(machine: MachineTopology, bind: Exclude<BindPolicy, 'none'>, layout: NodeLayout, warn: (t: string) => void): number[][] {
  const kind = bind === 'core' ? 'core' : bind;
  const units = (machine.objects[kind] ?? (kind === 'core' ? machine.objects.pu : undefined) ?? []).filter((u) => u.pus.length > 0);
  if (units.length === 0) {
    throw new TopocollError('EINVAL', `--bind ${bind}: this machine (${machine.source}) reports no ${kind} with CPUs`, {
      hint: 'Use --bind core or --bind none.',
    });
  }
  const ranks = layout.nodeOf.length;
  if (ranks > units.length) {
    warn(
      `topocoll run: ${ranks} ranks on ${units.length} ${kind === 'core' ? 'cores' : `${kind} units`}: binding wraps around (rank r → ${kind} r mod ${units.length})\n`,
    );
  }
  return layout.nodeOf.map((_, r) => units[r % units.length]!.pus);
}

function spawnRank(
  options: LaunchOptions,
  rank: number,
  layout: NodeLayout,
  token: string,
  port: number,
  cpus: readonly number[] | undefined,
  machineJson: string | undefined,
): ChildProcess {
  const env: NodeJS.ProcessEnv = {
    ...options.env,
    TOPOCOLL_RANK: String(rank),
    TOPOCOLL_SIZE: String(options.ranks),
    TOPOCOLL_LOCAL_RANK: String(layout.localOf[rank]),
    TOPOCOLL_LOCAL_SIZE: String(layout.localSizes[layout.nodeOf[rank]!]),
    TOPOCOLL_RENDEZVOUS: `127.0.0.1:${port}`,
    TOPOCOLL_TOKEN: token,
  };
  if (options.nodes !== undefined) env.TOPOCOLL_NODE = `node${layout.nodeOf[rank]}`;
  if (options.config !== undefined) env.TOPOCOLL_CONFIG = options.config;
  if (options.network !== undefined) env.TOPOCOLL_NETWORK = options.network;
  if (options.timeoutMs !== undefined) env.TOPOCOLL_TIMEOUT_MS = String(options.timeoutMs);
  if (machineJson !== undefined) env[MACHINE_HANDOFF_ENV] = machineJson;
  const piped = options.output !== 'inherit';
  const stdio = piped ? (['ignore', 'pipe', 'pipe'] as const) : (['ignore', 'inherit', 'inherit'] as const);
  // The child inherits the affinity of the thread that forks it: bind this thread for the spawn.
  const previous = cpus !== undefined ? setThreadAffinity(cpus) : undefined;
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, [options.script, ...options.args], { env, stdio: [...stdio] });
  } finally {
    if (previous !== undefined) setThreadAffinity(previous);
  }
  if (piped) {
    const tag = options.output === 'tagged' ? `[${rank}] ` : '';
    createInterface({ input: child.stdout! }).on('line', (line) => options.stdout(`${tag}${line}\n`));
    createInterface({ input: child.stderr! }).on('line', (line) => options.stderr(`${tag}${line}\n`));
  }
  child.on('error', (e) => options.stderr(`topocoll run: cannot start rank ${rank}: ${e.message}\n`));
  return child;
}

/** Whether the process is stopped (state T or t in /proc/<pid>/stat). */
function isStopped(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'T' || state === 't';
  } catch {
    return false;
  }
}

function signalNumber(signal: NodeJS.Signals | null): number {
  const numbers: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15 };
  return (signal && numbers[signal]) || 1;
}
