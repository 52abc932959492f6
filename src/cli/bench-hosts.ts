import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { checkClusterSupport, coveredByHostTmpfs, enterHostArgv, startCluster, type RunningCluster } from '../cluster/build.js';
import { AGENT_PATH, clusterStateOf } from '../cluster/keeper.js';
import { planCluster, shorthandNetwork, type ClusterPlan } from '../cluster/plan.js';
import { createState, removeOwnState, stateFile } from '../cluster/state.js';
import { TopocollError } from '../errors.js';
import { usageError } from './args.js';
import { PACKAGE_ROOT } from '../util/package-root.js';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import type { BenchRow, BenchSettings } from './bench-worker.js';
import type { CliIo } from './io.js';
import { libraryOf, peerLabel, peerUnavailable, runPeer, type AcrossHosts, type PeerName } from './mpi-peers.js';

/**
 * `topocoll bench --hosts LEAVES×HOSTS×RANKS`: the latency table across an emulated cluster
 * (src/cluster/): LEAVES leaf switches under one spine, HOSTS hosts on each, RANKS ranks on each
 * host. In one run, beside each other:
 * - topocoll with its levels as configured (`auto`) and with every level above the node switched
 *   off (`flat`: one group of node leaders over TCP), its ranks started the torchrun way (RANK,
 *   WORLD_SIZE, MASTER_ADDR = the first host) inside their hosts, the network file describing the
 *   cluster's switches;
 * - the MPI libraries asked for, each started by its own launcher inside the first host, which
 *   starts the other hosts' ranks through the cluster's remote-shell agent;
 * - the link's own capacity between two hosts on different leaves (iperf3, a plain TCP stream),
 *   against which allreduce's bandwidth is read.
 * The hosts share this machine's cores: when the ranks outnumber them, Open MPI runs with
 * mpi_yield_when_idle as its documentation prescribes, and topocoll's ranks find it out themselves
 * (they compare kernels, docs/architecture.md §6).
 */

export interface HostsShape {
  leaves: number;
  hostsPerLeaf: number;
  ranksPerHost: number;
}

/** `2x2x1` or `2×2×1`: leaves, hosts per leaf, ranks per host. */
export function parseHostsShape(text: string): HostsShape {
  const parts = text.split(/[x×]/).map((p) => p.trim());
  const [leaves, hostsPerLeaf, ranksPerHost] = parts.map(Number);
  const ok = (n: number | undefined) => n !== undefined && Number.isInteger(n) && n >= 1 && n <= 64;
  if (parts.length !== 3 || !ok(leaves) || !ok(hostsPerLeaf) || !ok(ranksPerHost) || leaves! * hostsPerLeaf! * ranksPerHost! < 2) {
    throw usageError(
      'bench',
      `--hosts takes LEAVES×HOSTS×RANKS (each 1…64, at least 2 ranks in all; 2x2x2: 2 leaf switches, 2 hosts on each, 2 ranks on each host), got "${text}"`,
    );
  }
  return { leaves: leaves!, hostsPerLeaf: hostsPerLeaf!, ranksPerHost: ranksPerHost! };
}

export const describeShape = (s: HostsShape) => `${s.leaves}×${s.hostsPerLeaf}×${s.ranksPerHost}`;

/** The cluster's node-to-switch file, as topocoll reads it: each host, its leaf, the leaf's parents. */
export function networkFileText(plan: ClusterPlan): string {
  return plan.hosts
    .map((h) => {
      const path: string[] = [];
      for (let s: number | undefined = h.leaf; s !== undefined; s = plan.switches[s]!.parent) path.push(plan.switches[s]!.name);
      return `${h.name} ${path.join(' ')}`;
    })
    .join('\n')
    .concat('\n');
}

export interface HostsRun {
  rows: BenchRow[];
  /** Bytes per second of one TCP stream between two hosts on different leaves (undefined: not measured, `linkNote` says why). */
  linkBytesPerSecond?: number;
  linkNote: string;
  notes: string[];
  oversubscribed: boolean;
}

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** Variables of the surrounding environment that would make a rank detect another launcher. */
const LAUNCHER_VARS = /^(TOPOCOLL_|OMPI_|PMIX_|PRTE_|SLURM|RANK$|WORLD_SIZE$|LOCAL_RANK$|LOCAL_WORLD_SIZE$|MASTER_|HYDRA_|PMI_)/;

export async function benchAcrossHosts(
  shape: HostsShape,
  settings: BenchSettings,
  peers: readonly PeerName[],
  io: CliIo,
  step: (what: string) => void,
  configText = '',
): Promise<HostsRun> {
  checkClusterSupport();
  const plan = planCluster(shorthandNetwork(shape.leaves, shape.hostsPerLeaf));
  const size = plan.hosts.length * shape.ranksPerHost;
  const oversubscribed = size > cpus().length;
  const dir = mkdtempSync(join('/tmp', 'topocoll-bench-hosts-'));
  const keep = [dir, ...coveredByHostTmpfs([PACKAGE_ROOT])];
  const name = `bench-${process.pid}`;
  const path = stateFile(io.env, name);
  let cluster: RunningCluster | undefined;
  // However the run ends: the cluster, its state file and the run's directory go. A signal ends
  // the process without running the finally below, so it cleans up the same way, then dies of it.
  const destroy = () => {
    cluster?.destroySync();
    removeOwnState(path, process.pid);
    rmSync(dir, { recursive: true, force: true });
  };
  const onSignal = (signal: NodeJS.Signals) => {
    destroy();
    for (const s of STOP_SIGNALS) process.off(s, onSignal);
    process.kill(process.pid, signal);
  };
  process.once('exit', destroy);
  for (const s of STOP_SIGNALS) process.on(s, onSignal);
  try {
    step(`cluster ${describeShape(shape)} up`);
    cluster = await startCluster(plan, { keep, stateFile: path });
    createState(path, clusterStateOf(name, plan, cluster, keep));
    const network = join(dir, 'network.txt');
    writeFileSync(network, networkFileText(plan));
    const rows: BenchRow[] = [];
    for (const mode of ['auto', 'flat'] as const) {
      step(`topocoll ${mode} (${size} ranks on ${plan.hosts.length} hosts)`);
      const config = join(dir, `${mode}.yaml`);
      writeFileSync(config, hostsConfigText(configText, network, mode));
      const got = await runTopocoll(cluster, shape, config, settings, io);
      // The memcpy rows once (the job measures them in each mode); flat's own rows renamed.
      rows.push(...(mode === 'auto' ? got : got.filter((r) => r.collective !== 'memcpy').map((r) => ({ ...r, mode: `${r.mode} flat` }))));
    }
    const notes: string[] = [];
    const first = cluster.hosts[0]!;
    const across: AcrossHosts = {
      hosts: cluster.hosts.map((h) => h.name),
      perHost: shape.ranksPerHost,
      agent: AGENT_PATH,
      iface: 'eth0',
      enter: (argv) => enterHostArgv(first.pid, argv, PACKAGE_ROOT, keep),
      // Each host has its own /tmp: a TMPDIR elsewhere under /tmp is not in it.
      env: { TOPOCOLL_CLUSTER: name, TMPDIR: '/tmp' },
    };
    for (const peer of peers) {
      const why = peerUnavailable(peer);
      if (why !== undefined) {
        notes.push(`no ${peerLabel(peer)}: ${why}`);
        continue;
      }
      let version = '';
      for (const collective of settings.collectives) {
        step(`${peerLabel(peer)} ${collective} (${size} ranks on ${plan.hosts.length} hosts)`);
        const run = await runPeer(peer, collective, size, settings, oversubscribed, across);
        rows.push(...run.rows);
        version = run.version;
      }
      notes.push(`${peerLabel(peer)}: ${libraryOf(version)}`);
    }
    step('the link between two leaves (iperf3)');
    const link = linkCapacity(cluster, keep);
    return { rows, notes, oversubscribed, ...link };
  } finally {
    process.off('exit', destroy);
    for (const s of STOP_SIGNALS) process.off(s, onSignal);
    await cluster?.destroy();
    removeOwnState(path, process.pid);
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The ranks' configuration: `base` (the user's YAML, `--config`; '' for the defaults) with the
 * cluster's network file, and for `flat` no level above the node (the switches off; auto keeps
 * the levels as `base` has them).
 */
export function hostsConfigText(base: string, network: string, mode: 'auto' | 'flat'): string {
  const parsed: unknown = base.trim() === '' ? {} : parseYaml(base);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new TopocollError('ECONFIG', 'the configuration given to bench --hosts is not a YAML mapping');
  }
  const config: Record<string, unknown> = { ...(parsed as Record<string, unknown>), network: { source: 'file', file: network } };
  if (mode === 'flat') {
    const levels = (config.levels ?? {}) as Record<string, unknown>;
    config.levels = { ...levels, switch1: { enabled: false }, switch2: { enabled: false } };
  }
  return stringifyYaml(config);
}

/** Starts every rank of bench-worker.js in its host the torchrun way; resolves with rank 0's rows. */
async function runTopocoll(cluster: RunningCluster, shape: HostsShape, config: string, settings: BenchSettings, io: CliIo): Promise<BenchRow[]> {
  // dist/cli/, found from the package root: the CLI runs from the bundle (scripts/bundle.mjs).
  const worker = join(PACKAGE_ROOT, 'dist/cli/bench-worker.js');
  const size = cluster.hosts.length * shape.ranksPerHost;
  const base = Object.fromEntries(Object.entries(io.env).filter(([k]) => !LAUNCHER_VARS.test(k)));
  const token = randomBytes(16).toString('hex');
  const keep = coveredByHostTmpfs([PACKAGE_ROOT]);
  const records: BenchRow[] = [];
  const failures: string[] = [];
  const runs: Promise<void>[] = [];
  let rank = 0;
  for (const host of cluster.hosts) {
    for (let j = 0; j < shape.ranksPerHost; j++, rank++) {
      const r = rank;
      const [cmd, ...args] = enterHostArgv(host.pid, [process.execPath, worker], PACKAGE_ROOT, keep);
      const child = spawn(cmd!, args, {
        env: {
          ...base,
          RANK: String(r),
          WORLD_SIZE: String(size),
          LOCAL_RANK: String(j),
          LOCAL_WORLD_SIZE: String(shape.ranksPerHost),
          MASTER_ADDR: cluster.hosts[0]!.address,
          MASTER_PORT: '29500',
          TOPOCOLL_TOKEN: token,
          TOPOCOLL_CONFIG: config,
          TOPOCOLL_BENCH: JSON.stringify(settings),
          TMPDIR: '/tmp',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
      runs.push(
        new Promise((resolve) => {
          child.on('close', (code, signal) => {
            for (const line of out.split('\n')) if (line.startsWith('{')) records.push(JSON.parse(line) as BenchRow);
            if (code !== 0) failures.push(`rank ${r} on ${host.name} ended with ${code ?? signal}: ${err.trim().slice(0, 2000)}`);
            resolve();
          });
        }),
      );
    }
  }
  await Promise.all(runs);
  if (failures.length > 0) throw new TopocollError('EINVAL', `topocoll bench --hosts: topocoll's job failed\n${failures.join('\n')}`);
  return records.filter((x) => typeof x === 'object' && 'collective' in x);
}

/** One TCP stream from the first host to the last (another leaf when there are several), 2 s. */
function linkCapacity(cluster: RunningCluster, keep: readonly string[]): { linkBytesPerSecond?: number; linkNote: string } {
  if (spawnSync('sh', ['-c', 'command -v iperf3'], { stdio: 'ignore' }).status !== 0) {
    return { linkNote: 'no link capacity: iperf3 is not installed (apt-get install iperf3)' };
  }
  const from = cluster.hosts[0]!;
  const to = cluster.hosts.at(-1)!;
  const [scmd, ...sargs] = enterHostArgv(to.pid, ['iperf3', '--server', '--one-off', '--port', '5201'], '/', keep);
  // iperf3 makes a temporary file: in the hosts' own /tmp.
  const env = { ...process.env, TMPDIR: '/tmp' };
  const server = spawn(scmd!, sargs, { stdio: 'ignore', env });
  try {
    const [ccmd, ...cargs] = enterHostArgv(from.pid, ['sh', '-c', `sleep 0.3; iperf3 --client ${to.address} --port 5201 --time 2 --json`], '/', keep);
    const r = spawnSync(ccmd!, cargs, { encoding: 'utf8', timeout: 30_000, env });
    const report = JSON.parse(r.stdout) as { end?: { sum_received?: { bits_per_second?: number } } };
    const bits = report.end?.sum_received?.bits_per_second;
    if (bits === undefined) return { linkNote: `no link capacity: iperf3 said ${r.stdout.slice(0, 200)}${r.stderr.slice(0, 200)}` };
    return { linkBytesPerSecond: bits / 8, linkNote: `link ${from.name} → ${to.name}: ${(bits / 8e9).toFixed(2)} GB/s (iperf3, one TCP stream, 2 s)` };
  } catch (e) {
    return { linkNote: `no link capacity: ${(e as Error).message}` };
  } finally {
    server.kill('SIGKILL');
  }
}

/**
 * The tables: per collective, topocoll auto and flat, each library, auto against the fastest
 * library and against flat; for allreduce also its bandwidth (bytes / time) as a share of the link's.
 */
export function formatHostsTables(run: HostsRun, shape: HostsShape, settings: BenchSettings, peers: readonly PeerName[]): string {
  const size = shape.leaves * shape.hostsPerLeaf * shape.ranksPerHost;
  const fmt = (v: number | undefined) => (v === undefined ? '-' : v < 10 ? v.toFixed(2) : v < 1000 ? v.toFixed(1) : v.toFixed(0));
  const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b ? (a / b).toFixed(2) : '-');
  const measured = peers.filter((p) => run.rows.some((r) => r.mode === p));
  const out: string[] = [];
  for (const collective of settings.collectives) {
    const mine = run.rows.filter((r) => r.collective === collective);
    const cell = (mode: string, bytes: number) => mine.find((r) => r.mode === mode && r.bytes === bytes)?.avgUs;
    const sizes = [...new Set(mine.map((r) => r.bytes))].sort((a, b) => a - b);
    const bandwidth = collective === 'allreduce' && run.linkBytesPerSecond !== undefined;
    out.push(
      '',
      `# ${collective}, ${size} ranks on ${shape.leaves * shape.hostsPerLeaf} hosts (${shape.leaves} leaves × ${shape.hostsPerLeaf} hosts × ${shape.ranksPerHost} ranks)${run.oversubscribed ? ", the hosts sharing this machine's cores" : ''}: latency in µs per call, average over ranks${bandwidth ? '; link: bytes / time as a share of one TCP stream between two leaves' : ''}`,
    );
    const header = [
      'bytes',
      'topocoll auto',
      'topocoll flat',
      ...measured.map(peerLabel),
      ...(measured.length > 0 ? ['auto / best MPI'] : []),
      'auto / flat',
      ...(bandwidth ? ['link'] : []),
    ];
    const table = [header];
    for (const bytes of sizes) {
      const auto = cell('sync', bytes);
      const times = measured.map((p) => cell(p, bytes)).filter((t): t is number => t !== undefined);
      const best = times.length > 0 ? Math.min(...times) : undefined;
      table.push([
        String(bytes),
        fmt(auto),
        fmt(cell('sync flat', bytes)),
        ...measured.map((p) => fmt(cell(p, bytes))),
        ...(measured.length > 0 ? [ratio(auto, best)] : []),
        ratio(auto, cell('sync flat', bytes)),
        ...(bandwidth ? [auto === undefined ? '-' : `${((bytes / (auto * 1e-6) / run.linkBytesPerSecond!) * 100).toFixed(0)} %`] : []),
      ]);
    }
    const widths = header.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
    for (const r of table) out.push(r.map((v, c) => v.padStart(widths[c]!)).join('  '));
  }
  out.push('', `# ${run.linkNote}`);
  if (run.notes.length > 0) out.push(`# baseline: ${run.notes.join('; ')}`);
  return out.join('\n') + '\n';
}
