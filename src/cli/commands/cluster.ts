import { spawn } from 'node:child_process';
import { closeSync, realpathSync, writeSync } from 'node:fs';
import { resolve } from 'node:path';
import { runningClusters, resolveCluster, runInHost } from '../../cluster/agent.js';
import { checkClusterSupport, coveredByHostTmpfs, processStartTime } from '../../cluster/build.js';
import { keepCluster } from '../../cluster/keeper.js';
import { describePlan, parseRates, planCluster, shorthandNetwork, type ClusterPlan } from '../../cluster/plan.js';
import { checkClusterName, DEFAULT_CLUSTER_NAME, keeperAlive, readState, stateFile, type ClusterState } from '../../cluster/state.js';
import { TopocollError } from '../../errors.js';
import { readNetworkFile } from '../../topology/network/index.js';
import { PACKAGE_ROOT } from '../../util/package-root.js';
import { parseByteSize, parseCommandArgs, parseNonNegativeInt, usageError } from '../args.js';
import type { CliIo } from '../io.js';

export const clusterHelp = `topocoll cluster — an emulated cluster of hosts made of Linux namespaces (root only)

Usage: topocoll cluster up [--name N] (--network F | --leaves L --hosts H) [--rate LEVEL=RATE,…]
                           [--subnet CIDR] [--tmpfs SIZE] [--keep DIR]… [--foreground]
       topocoll cluster exec [--name N] HOST [--] [COMMAND [ARGS…]]
       topocoll cluster status [--name N]
       topocoll cluster down [--name N]

up: every node of the network becomes a host with its own network namespace (eth0 on its leaf
switch's bridge, one address on one subnet), host name, IPC namespace, /dev/shm and /tmp (tmpfs)
and an /etc/hosts naming every host; every switch is a bridge, joined to its parent's. Prints
the hosts and the agent command for mpirun and mpiexec. The cluster is kept by a detached keeper
process until "cluster down" (or, with --foreground, by this process until SIGINT or SIGTERM);
when its keeper dies, however, everything of the cluster goes with it.

  --name N          the cluster's name (default "default"; $TOPOCOLL_CLUSTER for exec, status, down)
  --network F       node-to-switch file or Slurm topology.conf (as "topocoll run --network")
  --leaves L        shorthand without a file: L leaf switches under one spine…
  --hosts H         …with H hosts each, named node0 … node(L·H−1)
  --rate R          link rates per level with tc's tbf: leaf=10gbit,spine=1gbit (or switch<N>=…)
  --subnet CIDR     the hosts' addresses (default 10.99.0.0/16; host i gets the (i+1)-th)
  --tmpfs SIZE      size of each host's /dev/shm and /tmp (default 256MiB)
  --keep DIR        a directory under /tmp or /dev/shm that stays visible inside the hosts
                    (topocoll's own directory is kept when it is under /tmp)
  --foreground      keep the cluster in this process instead of a detached keeper

exec: runs COMMAND (default: $SHELL) inside HOST (its network, host name, IPC and mounts) with
this terminal and environment, plus TOPOCOLL_CLUSTER, which the agent reads. Run mpirun or
mpiexec this way inside one host: the machine itself has no address on the cluster's bridges.

down: takes the cluster down and waits until nothing of it is left.
`;

const UP_OPTIONS = {
  name: { type: 'string' },
  network: { type: 'string' },
  leaves: { type: 'string' },
  hosts: { type: 'string' },
  rate: { type: 'string' },
  subnet: { type: 'string' },
  tmpfs: { type: 'string' },
  keep: { type: 'string', multiple: true },
  foreground: { type: 'boolean' },
  // The detached keeper `up` starts: it reports through descriptor 3, then closes it.
  keeper: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

/** The marker after which the detached keeper's report is complete and the cluster is up. */
const READY = 'topocoll-cluster-keeper: ready\n';

export async function clusterCommand(argv: string[], io: CliIo): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'up':
      return up(rest, io);
    case 'down':
      return down(rest, io);
    case 'exec':
      return exec(rest, io);
    case 'status':
      return status(rest, io);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      io.stdout(clusterHelp);
      return sub === undefined ? 1 : 0;
    default:
      throw usageError('cluster', `unknown subcommand "${sub}": it is one of up, exec, status, down`);
  }
}

function planFromOptions(values: { network?: string; leaves?: string; hosts?: string; rate?: string; subnet?: string }, io: CliIo): ClusterPlan {
  const shorthand = values.leaves !== undefined || values.hosts !== undefined;
  if (shorthand === (values.network !== undefined)) {
    throw usageError('cluster', 'up: give either --network FILE or --leaves L --hosts H (e.g. cluster up --leaves 2 --hosts 2)');
  }
  const net = shorthand
    ? shorthandNetwork(parseNonNegativeInt('cluster up', 'leaves', values.leaves ?? '1'), parseNonNegativeInt('cluster up', 'hosts', values.hosts ?? '1'))
    : readNetworkFile(resolve(io.cwd, values.network!));
  return planCluster(net, { subnet: values.subnet, rates: values.rate !== undefined ? parseRates(values.rate) : undefined });
}

function summary(state: ClusterState, plan: ClusterPlan, path: string, foreground: boolean): string {
  const names = state.hosts.map((h) => h.name);
  const first = names[0]!;
  const nameOpt = state.name === DEFAULT_CLUSTER_NAME ? '' : ` --name ${state.name}`;
  const root = process.getuid?.() === 0 ? '--allow-run-as-root ' : '';
  const n = names.length;
  return [
    `cluster "${state.name}" up: ${n} hosts, ${plan.switches.length} switches (keeper pid ${state.keeper.pid}, state ${path})`,
    describePlan(plan).trimEnd(),
    `agent: ${state.agent}`,
    `  Open MPI: topocoll cluster exec${nameOpt} ${first} -- mpirun ${root}--host ${names.join(',')} --mca plm_rsh_agent ${state.agent} --mca plm_rsh_no_tree_spawn 1 -np ${n} PROGRAM`,
    `  MPICH:    topocoll cluster exec${nameOpt} ${first} -- mpiexec.mpich -hosts ${names.join(',')} -launcher ssh -launcher-exec ${state.agent} -n ${n} PROGRAM`,
    `  torchrun variables: MASTER_ADDR=${first} (${state.hosts[0]!.address}) on every host, each rank started with "topocoll cluster exec${nameOpt} HOST --"`,
    foreground ? 'SIGINT or SIGTERM takes it down.' : `down: topocoll cluster down${nameOpt}`,
    '',
  ].join('\n');
}

async function up(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs('cluster up', argv, UP_OPTIONS, false, ['keeper']);
  if (values.help) {
    io.stdout(clusterHelp);
    return 0;
  }
  const name = checkClusterName(values.name ?? DEFAULT_CLUSTER_NAME);
  const path = stateFile(io.env, name);
  const plan = planFromOptions(values, io);
  const tmpfsBytes = values.tmpfs !== undefined ? parseByteSize('cluster up', 'tmpfs', values.tmpfs) : undefined;
  checkClusterSupport();
  if (readState(path) !== undefined)
    throw new TopocollError('EINVAL', `cluster "${name}" is already up (${path})`, {
      hint: `Take it down first ("topocoll cluster down${name === DEFAULT_CLUSTER_NAME ? '' : ` --name ${name}`}") or give another --name.`,
    });
  // The agent and jobs run from this package inside the hosts: it stays visible when under /tmp.
  const keep = [...(values.keep ?? []).map((d) => resolve(io.cwd, d)), ...coveredByHostTmpfs([realpathSync(PACKAGE_ROOT)])];

  if (!values.foreground && !values.keeper) return startDetachedKeeper(argv, io);

  // The keeper reports through descriptor 3 (its stdout and stderr are /dev/null once detached).
  const report = values.keeper ? (t: string) => writeSync(3, t) : io.stdout;
  try {
    const kept = await keepCluster(name, plan, path, { tmpfsBytes, keep });
    report(summary(kept.state, plan, path, !!values.foreground && !values.keeper));
    if (values.keeper) {
      report(READY);
      closeSync(3);
    }
    await kept.done;
    if (!values.keeper) io.stdout(`cluster "${name}" down\n`);
    return 0;
  } catch (e) {
    if (!values.keeper) throw e;
    report(`${e instanceof TopocollError ? e.message : String((e as Error).stack ?? e)}\n`);
    return 1;
  }
}

/**
 * `up` without --foreground: the same command line as a keeper in its own session (no terminal
 * to hang up on it), which reports on a pipe and closes it once the cluster is up.
 */
function startDetachedKeeper(argv: string[], io: CliIo): Promise<number> {
  const main = `${PACKAGE_ROOT}dist/cli/main.js`;
  const child = spawn(process.execPath, [main, 'cluster', 'up', ...argv, '--keeper'], {
    detached: true,
    stdio: ['ignore', 'ignore', 'ignore', 'pipe'],
    env: io.env,
    cwd: io.cwd,
  });
  const channel = child.stdio[3] as NodeJS.ReadableStream;
  let text = '';
  channel.setEncoding('utf8');
  channel.on('data', (d: string) => (text += d));
  return new Promise((resolvePromise, reject) => {
    child.on('error', reject);
    channel.on('end', () => {
      if (text.endsWith(READY)) {
        io.stdout(text.slice(0, -READY.length));
        child.unref();
        resolvePromise(0);
        return;
      }
      const finish = (code: number | null) => {
        io.stderr(`topocoll cluster up: ${text}`);
        resolvePromise(code === 0 || code === null ? 1 : code);
      };
      if (child.exitCode !== null || child.signalCode !== null) finish(child.exitCode);
      else child.once('exit', finish);
    });
  });
}

function nameOption(argv: string[], command: string): { name?: string; rest: string[]; help: boolean } {
  let name: string | undefined;
  let help = false;
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--name') name = argv[++i];
    else if (a.startsWith('--name=')) name = a.slice('--name='.length);
    else if (a === '--help' || a === '-h') help = true;
    else if (a.startsWith('-') && a !== '--') throw usageError(`cluster ${command}`, `unknown option ${a}`);
    else break;
    if (name === '') throw usageError(`cluster ${command}`, '--name needs a value');
  }
  return { name: name === undefined ? undefined : checkClusterName(name), rest: argv.slice(i), help };
}

async function exec(argv: string[], io: CliIo): Promise<number> {
  const { name, rest, help } = nameOption(argv, 'exec');
  if (help) {
    io.stdout(clusterHelp);
    return 0;
  }
  const [host, ...tail] = rest;
  if (host === undefined || host === '--') throw usageError('cluster', 'exec: no host given (e.g. cluster exec node0 -- hostname)');
  const command = tail[0] === '--' ? tail.slice(1) : tail;
  const state = resolveCluster(io.env, name);
  return runInHost(state, host, command.length > 0 ? command : [io.env.SHELL || '/bin/sh'], io.env, io.cwd);
}

function status(argv: string[], io: CliIo): number {
  const { name, rest, help } = nameOption(argv, 'status');
  if (help || rest.length > 0) {
    io.stdout(clusterHelp);
    return help ? 0 : 1;
  }
  if (name === undefined && io.env.TOPOCOLL_CLUSTER === undefined) {
    const running = runningClusters(io.env);
    if (running.length === 0) {
      io.stdout('no cluster is up\n');
      return 0;
    }
    if (running.length > 1) {
      io.stdout(`clusters up: ${running.join(', ')}\n`);
      return 0;
    }
  }
  const state = resolveCluster(io.env, name);
  const lines = state.hosts.map((h) => `  ${h.name}  ${h.address}/${state.subnetPrefix}  ${h.leaf}  (holder pid ${h.pid})`);
  io.stdout(
    `cluster "${state.name}": ${state.hosts.length} hosts, ${state.switches.length} switches, keeper pid ${state.keeper.pid}\n${lines.join('\n')}\nagent: ${state.agent}\n`,
  );
  return 0;
}

async function down(argv: string[], io: CliIo): Promise<number> {
  const { name, rest, help } = nameOption(argv, 'down');
  if (help || rest.length > 0) {
    io.stdout(clusterHelp);
    return help ? 0 : 1;
  }
  const state = resolveCluster(io.env, name);
  const path = stateFile(io.env, state.name);
  const t0 = performance.now();
  process.kill(state.keeper.pid, 'SIGTERM');
  // The keeper exits once the cleaner has killed every process of the cluster; if it does not
  // within the limit, SIGKILL ends it and the kernel runs the cleaner (its death signal).
  const gone = (pid: number, limitMs: number): Promise<boolean> =>
    new Promise((done) => {
      const tick = setInterval(() => {
        const alive = processStartTime(pid) !== undefined;
        if (!alive || performance.now() - t0 > limitMs) {
          clearInterval(tick);
          done(!alive);
        }
      }, 10);
    });
  if (!(await gone(state.keeper.pid, 20_000)) && keeperAlive(state)) process.kill(state.keeper.pid, 'SIGKILL');
  await gone(state.cleanerPid, 40_000);
  if (readState(path) !== undefined)
    throw new TopocollError('ETIMEDOUT', `cluster "${state.name}" is still up after 40 s`, { hint: `Its keeper is pid ${state.keeper.pid}.` });
  io.stdout(
    `cluster "${state.name}" down: ${state.hosts.length} hosts and ${state.switches.length} switches removed in ${Math.round(performance.now() - t0)} ms\n`,
  );
  return 0;
}
