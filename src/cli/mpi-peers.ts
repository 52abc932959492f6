import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { usageError } from './args.js';
import { PACKAGE_ROOT } from '../util/package-root.js';
import { sizesOf, type BenchRow, type BenchSettings } from './bench-worker.js';

/**
 * The MPI libraries `topocoll bench` measures beside topocoll, each with its own collectives at
 * the same process count and sizes (bench/ompi/coll_latency.c, built once per library), so one
 * run prints all of them:
 * - `ompi`: Open MPI with its defaults, which serve a communicator's collectives with coll/tuned
 *   (flat algorithms chosen by fixed rules);
 * - `ompi-han`: Open MPI with coll/han, its hierarchical component, selected as its documentation
 *   says (`coll_han_priority` above tuned's);
 * - `mpich`: MPICH's `mpiexec` with its defaults (ch4 with shared memory inside a node).
 * With more ranks than cores, Open MPI runs with `mpi_yield_when_idle`, as its documentation
 * prescribes for oversubscribed nodes; MPICH has no such setting and polls.
 * A row's `mode` is the peer's name.
 */
export const PEER_NAMES = ['ompi', 'ompi-han', 'mpich'] as const;
export type PeerName = (typeof PEER_NAMES)[number];

/**
 * A job across hosts (`topocoll bench --hosts`): the launcher runs in the first host and starts
 * the ranks of every host through a remote-shell agent, as over ssh.
 */
export interface AcrossHosts {
  /** The hosts' names, each running `perHost` ranks (in blocks, host by host). */
  hosts: readonly string[];
  perHost: number;
  /** The program `mpirun` and `mpiexec` call instead of ssh. */
  agent: string;
  /** The hosts' interface to each other. */
  iface: string;
  /** The command line that runs `argv` inside the first host. */
  enter(argv: readonly string[]): string[];
  /** Variables the launcher and the agent need beside the caller's (the cluster's name). */
  env?: Record<string, string>;
}

interface PeerSpec {
  /** Table and chart label. */
  label: string;
  /** The library's compiler wrapper and launcher (Debian's names for each). */
  compiler: string;
  launcher: string;
  /** The harness binary this library's build goes to. */
  binary: string;
  /** Launcher arguments before the program: on this machine, or across the hosts of `across`. */
  launch(ranks: number, oversubscribed: boolean, across?: AcrossHosts): string[];
  install: string;
}

const harnessSource = join(PACKAGE_ROOT, 'bench/ompi/coll_latency.c');
const hostList = (across: AcrossHosts) => across.hosts.map((h) => `${h}:${across.perHost}`).join(',');
// Across hosts: the daemons started through the agent one by one (no tree spawn: the agent is
// not ssh, and a daemon cannot start others), TCP between the hosts on their own interface and
// shared memory inside each.
// Hosts that share one machine's cores each bind their first rank to core 0: across hosts the
// ranks run unbound, as topocoll's do there, and the kernel spreads them.
const ompiLaunch = (mca: string[]) => (ranks: number, oversubscribed: boolean, across?: AcrossHosts) => [
  '--oversubscribe',
  '--bind-to',
  across === undefined ? 'core:overload-allowed' : 'none',
  '-np',
  String(ranks),
  ...(across === undefined
    ? []
    : [
        '--host',
        hostList(across),
        ...['--mca', 'plm_rsh_agent', across.agent, '--mca', 'plm_rsh_no_tree_spawn', '1'],
        ...['--mca', 'btl', 'self,vader,tcp', '--mca', 'btl_tcp_if_include', across.iface, '--mca', 'oob_tcp_if_include', across.iface],
      ]),
  ...(oversubscribed ? ['--mca', 'mpi_yield_when_idle', '1'] : []),
  ...mca,
];

const PEERS: Record<PeerName, PeerSpec> = {
  ompi: {
    label: 'Open MPI',
    compiler: 'mpicc.openmpi',
    launcher: 'mpirun.openmpi',
    binary: join(PACKAGE_ROOT, 'build/bench/coll_latency'),
    launch: ompiLaunch([]),
    install: 'apt-get install openmpi-bin libopenmpi-dev',
  },
  'ompi-han': {
    label: 'Open MPI han',
    compiler: 'mpicc.openmpi',
    launcher: 'mpirun.openmpi',
    binary: join(PACKAGE_ROOT, 'build/bench/coll_latency'),
    launch: ompiLaunch(['--mca', 'coll_han_priority', '100']),
    install: 'apt-get install openmpi-bin libopenmpi-dev',
  },
  mpich: {
    label: 'MPICH',
    compiler: 'mpicc.mpich',
    launcher: 'mpiexec.mpich',
    binary: join(PACKAGE_ROOT, 'build/bench/coll_latency-mpich'),
    // Hydra binds round-robin over the cores, more than one rank a core when they outnumber them.
    launch: (ranks, _oversubscribed, across) => [
      ...(across === undefined ? [] : ['-launcher', 'ssh', '-launcher-exec', across.agent, '-hosts', hostList(across), '-iface', across.iface]),
      '-n',
      String(ranks),
      ...(across === undefined ? ['-bind-to', 'core'] : []),
    ],
    install: 'apt-get install mpich libmpich-dev',
  },
};

/** The label a peer's column and chart series carry. */
export function peerLabel(name: PeerName): string {
  return PEERS[name].label;
}

/** `--peers LIST`: names from PEER_NAMES, or `all`. */
export function parsePeers(text: string): PeerName[] {
  if (text === 'all') return [...PEER_NAMES];
  const names = text.split(',').map((s) => s.trim());
  for (const name of names) {
    if (!(PEER_NAMES as readonly string[]).includes(name)) {
      throw usageError('bench', `--peers: unknown peer "${name}" (peers: ${PEER_NAMES.join(', ')}, or all)`);
    }
  }
  return [...new Set(names as PeerName[])];
}

function has(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

// Debian names each library's wrapper and launcher after it (mpicc.openmpi, mpiexec.mpich); a
// single MPI installed from elsewhere has only the plain names.
function command(name: string): string {
  if (has(name)) return name;
  const plain = name.replace(/\.(openmpi|mpich)$/, '');
  return plain;
}

/** Why `peer` cannot be measured here, or undefined when it can (building its harness if needed). */
export function peerUnavailable(name: PeerName): string | undefined {
  const peer = PEERS[name];
  const launcher = command(peer.launcher);
  if (!has(launcher)) return `${peer.label}: ${peer.launcher} is not installed (${peer.install})`;
  const built = existsSync(peer.binary) ? statSync(peer.binary).mtimeMs : -1;
  if (!existsSync(harnessSource)) return built >= 0 ? undefined : `${peer.label}: the harness source ${harnessSource} is not in this installation`;
  // Rebuilt when the source is newer: an old binary would not understand newer arguments.
  if (built >= statSync(harnessSource).mtimeMs) return undefined;
  const compiler = command(peer.compiler);
  if (!has(compiler)) return `${peer.label}: ${peer.compiler} is not installed (${peer.install})`;
  mkdirSync(dirname(peer.binary), { recursive: true });
  execFileSync(compiler, ['-O2', '-o', peer.binary, harnessSource], { stdio: 'inherit' });
  return undefined;
}

/** "Open MPI v4.1.4, package: …" (the harness's version line): the library and its version alone. */
export function libraryOf(version: string): string {
  return version.split(',')[0]!.replace(/\s+/g, ' ');
}

export interface PeerRun {
  rows: BenchRow[];
  /** The library's own description of itself (the harness's first comment line). */
  version: string;
}

/**
 * Runs one collective's sweep of `peer`, `ranks` processes on this machine or across the hosts of
 * `across`. `oversubscribed`: the ranks outnumber the cores they share.
 */
export async function runPeer(
  name: PeerName,
  collective: string,
  ranks: number,
  settings: BenchSettings,
  oversubscribed = false,
  across?: AcrossHosts,
): Promise<PeerRun> {
  const peer = PEERS[name];
  const args = [
    ...peer.launch(ranks, oversubscribed, across),
    peer.binary,
    collective,
    String(settings.minBytes),
    String(settings.maxBytes),
    String(settings.itersSmall),
    String(settings.itersLarge),
    String(settings.largeBytes),
    // The same warm-up calls as bench-worker's measure() (which goes on for 20 ms at least, for
    // V8's compiler; the MPI libraries have none), and the same repeats.
    String(Math.max(200, Math.floor(settings.itersSmall / 5))),
    String(settings.repeats),
  ];
  const [launcher, ...argv] = across === undefined ? [command(peer.launcher), ...args] : across.enter([command(peer.launcher), ...args]);
  const expected = collective === 'barrier' ? 1 : sizesOf(settings).length;
  const r = await runLauncher(launcher!, argv, { ...process.env, ...across?.env, OMPI_ALLOW_RUN_AS_ROOT: '1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: '1' }, expected);
  if (r.code !== 0 && !r.complete) throw new Error(`${launcher} ${argv.join(' ')} failed (${r.code}): ${r.stderr.slice(0, 2000)}`);
  const rows: BenchRow[] = [];
  let version = '';
  for (const line of r.stdout.split('\n')) {
    if (line.startsWith('# coll_latency')) {
      // "# coll_latency allreduce p=4 Open MPI v4.1.4, package: …": the library's part.
      version = line.replace(/^# coll_latency \S+ p=\d+ /, '').trim();
      continue;
    }
    if (line.startsWith('#')) continue;
    const f = line.trim().split(/\s+/);
    if (f.length < 5) continue;
    rows.push({ collective, mode: name, bytes: Number(f[0]), avgUs: Number(f[1]), minUs: Number(f[2]), maxUs: Number(f[3]), iterations: Number(f[4]) });
  }
  return { rows, version };
}

/** Data rows of the harness's output so far (`<bytes> <avg> <min> <max> <iterations>`). */
const dataRows = (text: string) => text.split('\n').filter((l) => /^\d+ \S+ \S+ \S+ \d+$/.test(l.trim())).length;

/**
 * Runs a launcher in a process group of its own. Once the harness has printed all `expected` rows
 * the launcher gets GRACE_MS to end; then its group is killed and the rows stand (`complete`):
 * MPICH 4.0 over TCP can hang in MPI_Finalize with every result printed. Ten minutes at most.
 */
function runLauncher(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  expected: number,
): Promise<{ code: number | null; stdout: string; stderr: string; complete: boolean }> {
  const GRACE_MS = 15_000;
  const LIMIT_MS = 600_000;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let complete = false;
    let grace: NodeJS.Timeout | undefined;
    const kill = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const limit = setTimeout(kill, LIMIT_MS);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      if (!complete && dataRows(stdout) >= expected) {
        complete = true;
        grace = setTimeout(kill, GRACE_MS);
      }
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(limit);
      if (grace !== undefined) clearTimeout(grace);
      resolve({ code, stdout, stderr, complete });
    });
  });
}
