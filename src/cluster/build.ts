/**
 * Builds a planned cluster out of Linux namespaces and takes it down again.
 *
 * Every namespace is held by a process and by nothing else (no `ip netns add` name, no bind
 * mount of a namespace file), so none can outlive its processes:
 * - the switch holder (`unshare --net`) holds the namespace of every bridge and switch port;
 * - one holder per host (`unshare --net --uts --ipc --mount`) holds its network, host name,
 *   System V IPC and mount namespaces, with tmpfs on /dev/shm and /tmp, its own /etc/hosts and
 *   a sysfs of its own network namespace on /sys;
 * - the cleaner, in the root namespaces and its own session, kills on SIGTERM every process in any
 *   of the cluster's network or mount namespaces (the holders and whatever was started inside a
 *   host) and removes the state file.
 * Holders get SIGKILL and the cleaner SIGTERM when the owner (the process that called
 * `startCluster`) dies, however it dies (PR_SET_PDEATHSIG, through setpriv). Once every process in
 * a namespace is gone the kernel frees it, and with a network namespace its veth ends and bridges;
 * with a mount namespace its mounts. The root namespace never gets an interface or a mount.
 *
 * Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2 and util-linux (unshare, nsenter, setpriv).
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { TopocollError } from '../errors.js';
import { etcHostsText, tbfBurstBytes, uplinkLevel, type ClusterPlan, type LinkRate, type PlannedHost } from './plan.js';

export interface ClusterOptions {
  /** Size of each host's /dev/shm and /tmp (tmpfs), bytes; default 256 MiB. */
  tmpfsBytes?: number;
  /** Each host's /etc/hosts names every host; itself as its address or as 127.0.1.1 (Debian's way). Default 'address'. */
  etcHosts?: 'address' | 'loopback' | 'none';
  /**
   * Directories under /tmp or /dev/shm that stay visible at the same path inside every host (the
   * hosts' own tmpfs covers them otherwise), e.g. a checkout under /tmp. At most 6.
   */
  keep?: string[];
  /** Time allowed for setting up, ms; default 30 s. */
  setupTimeoutMs?: number;
  /** A file the cleaner removes when the cluster goes if it names the cleaner (`"cleanerPid": <pid>,`: the state file of `cluster up`). */
  stateFile?: string;
}

export interface RunningHost extends PlannedHost {
  /** The holder of its namespaces: `nsenter --target <pid>` enters the host. */
  pid: number;
  /** The holder's start time (/proc/<pid>/stat), which tells it from a later process of the same pid. */
  startTime: number;
}

export interface RunningCluster {
  readonly plan: ClusterPlan;
  readonly hosts: readonly RunningHost[];
  readonly switchPid: number;
  readonly cleanerPid: number;
  /** Inode numbers of the cluster's network and mount namespaces (what the cleaner sweeps). */
  readonly namespaces: { net: number[]; mnt: number[] };
  /** Kills every process of the cluster (holders and everything started in a host) and waits until they are gone. */
  destroy(): Promise<void>;
  /** For exit handlers: the same, without waiting (the kernel completes it). */
  destroySync(): void;
}

/** The tools a cluster needs, each with the Debian package that has it. */
const TOOLS: [string, string][] = [
  ['ip', 'iproute2'],
  ['tc', 'iproute2'],
  ['unshare', 'util-linux'],
  ['nsenter', 'util-linux'],
  ['setpriv', 'util-linux'],
  ['setsid', 'util-linux'],
  ['find', 'findutils'],
];

/** An error that means "this system does not allow it", as opposed to a bug. */
const REFUSAL =
  /not permitted|permission denied|EPERM|EACCES|not supported|unknown (option|command)|No such file or directory|cannot open|Unknown device type/i;

/** Refuses (ENOTSUP) when the cluster cannot be made here: not root, or a tool missing. */
export function checkClusterSupport(): void {
  if (process.platform !== 'linux') throw new TopocollError('ENOTSUP', 'an emulated cluster needs Linux namespaces');
  if (process.getuid?.() !== 0) {
    throw new TopocollError('ENOTSUP', 'an emulated cluster needs root (it creates namespaces, bridges and mounts)', {
      hint: 'Run it with sudo, or as root in a container started with --privileged.',
    });
  }
  for (const [tool, pkg] of TOOLS) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) {
      throw new TopocollError('ENOTSUP', `${tool} is not installed`, { hint: `Install it (Debian: apt-get install ${pkg}).` });
    }
  }
}

function run(cmd: string, args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, [...args], { encoding: 'utf8', timeout: 20_000 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout);
      const message = `${cmd} ${args.join(' ')}: ${stderr.trim() || err.message}`;
      reject(
        REFUSAL.test(message)
          ? new TopocollError('ENOTSUP', message, {
              hint: 'The emulated cluster needs root and a kernel with network, mount, UTS and IPC namespaces, veth, bridge and tbf.',
            })
          : new Error(message),
      );
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}

/**
 * Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); undefined when the process
 * is gone or a zombie (an exited process whose parent has not reaped it yet: a detached keeper's
 * parent is init, which may take a while).
 */
export function processStartTime(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[0] === 'Z' || fields[0] === 'X' ? undefined : Number(fields[19]);
  } catch {
    return undefined;
  }
}

/** The inode of a process's namespace of one kind (`net`, `mnt`, …). */
function namespaceInode(pid: number, kind: string): number {
  return Number(/\[(\d+)\]/.exec(readlinkSync(`/proc/${pid}/ns/${kind}`))![1]);
}

/** Single quotes for sh. */
function shq(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

const MAX_KEPT = 6;

/** Starts a holder and resolves with its pid once it has printed `ready <pid>`. */
function startHolder(argv: string[], what: string, timeoutMs: number): Promise<ChildProcess & { pid: number }> {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const fail = (why: string): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      const message = `${what}: ${why}${err ? `: ${err.trim()}` : ''}`;
      reject(
        REFUSAL.test(message)
          ? new TopocollError('ENOTSUP', message, { hint: 'The emulated cluster needs root and a kernel with network, mount, UTS and IPC namespaces.' })
          : new Error(message),
      );
    };
    const timer = setTimeout(() => fail(`not ready within ${timeoutMs} ms`), timeoutMs);
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /ready (\d+)\n/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      // setpriv, unshare (without --fork) and setsid (not a group leader) exec: the pid printed is the child's own.
      if (Number(m[1]) !== child.pid) return fail(`printed pid ${m[1]}, not its own ${child.pid}`);
      // A holder writes nothing more; its pipes must not keep the owner's event loop alive.
      child.stdout.destroy();
      child.stderr.destroy();
      child.unref();
      resolve(child as ChildProcess & { pid: number });
    });
    child.on('error', (e) => fail(e.message));
    child.on('exit', (code, signal) => fail(`exited (${code ?? signal}) before it was ready`));
  });
}

/** The script of a host's holder: host name, /etc/hosts, tmpfs mounts, kept directories; then it sleeps. */
function hostHolderScript(name: string, etcHosts: string | undefined, tmpfsBytes: number, keep: readonly string[]): string {
  // sysfs shows the network devices of the namespace that mounts it: without its own, a host's
  // /sys/class/net would be the machine's (UCX, for one, reads its devices' attributes there).
  const lines = ['set -e', `hostname ${shq(name)}`, 'mount -t sysfs sysfs /sys'];
  // Before /tmp is covered: the file lives in the owner's temporary directory.
  if (etcHosts !== undefined) lines.push(`mount --bind ${shq(etcHosts)} /etc/hosts`);
  // Kept directories are opened before the tmpfs mounts cover them and bound back through the
  // descriptors (mount -c: the /proc path must not be resolved by name).
  keep.forEach((dir, i) => lines.push(`exec ${3 + i}< ${shq(dir)}`));
  lines.push(`mount -t tmpfs -o size=${tmpfsBytes},mode=1777 tmpfs /dev/shm`, `mount -t tmpfs -o size=${tmpfsBytes},mode=1777 tmpfs /tmp`);
  keep.forEach((dir, i) => lines.push(`mkdir -p ${shq(dir)}`, `mount -c --bind /proc/$$/fd/${3 + i} ${shq(dir)}`, `exec ${3 + i}<&-`));
  lines.push('echo "ready $$"', 'exec sleep infinity');
  return lines.join('\n');
}

/**
 * The cleaner: on SIGTERM (sent by `destroy`, or by the kernel when the owner dies) it kills every
 * process whose network or mount namespace is one of the cluster's, until none is left, then
 * removes the state file. Its own `sleep` dies with it.
 */
function cleanerScript(net: number[], mnt: number[]): string {
  const match = [...net.map((n) => `-lname 'net:\\[${n}\\]'`), ...mnt.map((n) => `-lname 'mnt:\\[${n}\\]'`)].join(' -o ');
  return [
    'state=$1',
    'sweep() {',
    `  find /proc/[0-9]*/ns/net /proc/[0-9]*/ns/mnt -maxdepth 0 \\( ${match} \\) 2>/dev/null | sed -n 's|^/proc/\\([0-9]*\\)/.*|\\1|p' | sort -u`,
    '}',
    'cleanup() {',
    "  trap '' TERM INT HUP",
    '  i=0',
    '  while [ $i -lt 100 ]; do',
    '    pids=$(sweep)',
    '    [ -z "$pids" ] && break',
    '    kill -9 $pids 2>/dev/null || true',
    '    i=$((i + 1))',
    '    sleep 0.02',
    '  done',
    // Only a state file naming this cleaner is its cluster's (another keeper of the name may have made one since).
    '  [ -n "$state" ] && grep -qF "\\"cleanerPid\\": $$," "$state" 2>/dev/null && rm -f "$state"',
    '  kill -9 $sleeper 2>/dev/null',
    '  exit 0',
    '}',
    "trap 'cleanup' TERM INT HUP",
    'echo "ready $$"',
    // A trapped signal ends `wait` at once; a sleep killed by someone else is started again.
    'while :; do',
    '  setpriv --pdeathsig KILL sleep infinity &',
    '  sleeper=$!',
    '  wait $sleeper',
    'done',
  ].join('\n');
}

/** `tc` lines that shape a device's egress to a rate. */
function tbf(dev: string, rate: LinkRate): string {
  return `qdisc add dev ${dev} root tbf rate ${rate.text} burst ${tbfBurstBytes(rate)} latency 20ms`;
}

/** Whether a path lies in (or is) a directory. */
function within(path: string, dir: string): boolean {
  const r = relative(dir, path);
  return r === '' || (!r.startsWith('..') && !r.startsWith('/'));
}

/** Of `dirs`, those a host's own /tmp or /dev/shm would cover. */
export function coveredByHostTmpfs(dirs: readonly string[]): string[] {
  return dirs.filter((d) => within(d, '/tmp') || within(d, '/dev/shm'));
}

export async function startCluster(plan: ClusterPlan, opts: ClusterOptions = {}): Promise<RunningCluster> {
  checkClusterSupport();
  const tmpfsBytes = opts.tmpfsBytes ?? 256 * 1024 * 1024;
  const timeoutMs = opts.setupTimeoutMs ?? 30_000;
  const keep = coveredByHostTmpfs(opts.keep ?? []).filter((d, i, all) => all.indexOf(d) === i);
  if (keep.length > MAX_KEPT)
    throw new TopocollError('EINVAL', `at most ${MAX_KEPT} directories under /tmp or /dev/shm can be kept in the hosts, got ${keep.length}`);
  for (const d of keep) {
    if (!statSync(d, { throwIfNoEntry: false })?.isDirectory()) throw new TopocollError('EINVAL', `--keep ${d} is not a directory`);
  }
  const etcMode = opts.etcHosts ?? 'address';

  const children: ChildProcess[] = [];
  let cleaner: ChildProcess | undefined;
  // Written before the holders start, bind-mounted by them, removed once all are mounted.
  const etcDir = etcMode !== 'none' ? mkdtempSync(join(tmpdir(), 'topocoll-cluster-')) : undefined;
  const killAll = (): void => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  try {
    const sw = await startHolder(
      ['setpriv', '--pdeathsig', 'KILL', 'unshare', '--net', 'sh', '-c', 'echo "ready $$"; exec sleep infinity'],
      'switch namespace holder',
      timeoutMs,
    );
    children.push(sw);
    // Started together; every holder that started is known to killAll before any failure is thrown.
    const started = await Promise.allSettled(
      plan.hosts.map((h) => {
        let etcFile: string | undefined;
        if (etcDir !== undefined) {
          etcFile = join(etcDir, `hosts${h.index}`);
          writeFileSync(etcFile, etcHostsText(plan, h.index, etcMode === 'loopback' ? 'loopback' : 'address'));
        }
        const script = hostHolderScript(h.name, etcFile, tmpfsBytes, keep);
        const argv = ['setpriv', '--pdeathsig', 'KILL', 'unshare', '--net', '--uts', '--ipc', '--mount', '--propagation', 'private', 'sh', '-c', script];
        return startHolder(argv, `holder of host ${h.name}`, timeoutMs);
      }),
    );
    for (const s of started) if (s.status === 'fulfilled') children.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    const hosts: RunningHost[] = plan.hosts.map((h, i) => {
      const pid = (started[i] as PromiseFulfilledResult<ChildProcess & { pid: number }>).value.pid;
      return { ...h, pid, startTime: processStartTime(pid)! };
    });
    if (etcDir !== undefined) rmSync(etcDir, { recursive: true, force: true });

    const namespaces = {
      net: [namespaceInode(sw.pid, 'net'), ...hosts.map((h) => namespaceInode(h.pid, 'net'))],
      mnt: hosts.map((h) => namespaceInode(h.pid, 'mnt')),
    };
    // The cleaner exists before any link does: from here on, a failure or the owner's death is cleaned up by it.
    cleaner = await startHolder(
      ['setsid', 'setpriv', '--pdeathsig', 'TERM', 'sh', '-c', cleanerScript(namespaces.net, namespaces.mnt), 'cleaner', opts.stateFile ?? ''],
      'cluster cleaner',
      timeoutMs,
    );

    // The switch namespace: bridges, the uplinks between them, and a port per host.
    const swBatch: string[] = ['link set lo up'];
    const swTc: string[] = [];
    for (const s of plan.switches) swBatch.push(`link add ${s.bridge} type bridge`, `link set ${s.bridge} up`);
    for (const s of plan.switches) {
      if (s.uplink === undefined) continue;
      const parent = plan.switches[s.parent!]!;
      swBatch.push(
        `link add ${s.uplink.uplink} type veth peer name ${s.uplink.downlink}`,
        `link set ${s.uplink.uplink} master ${s.bridge} up`,
        `link set ${s.uplink.downlink} master ${parent.bridge} up`,
      );
      const rate = plan.rates.get(uplinkLevel(plan, s));
      if (rate) swTc.push(tbf(s.uplink.uplink, rate), tbf(s.uplink.downlink, rate));
    }
    // Both ends of a host's link are created directly in their namespaces (the root namespace never holds them).
    await run('ip', ['-batch', '-'], hosts.map((h) => `link add ${h.port} netns ${sw.pid} type veth peer name eth0 netns ${h.pid}\n`).join(''));
    for (const h of hosts) {
      const leaf = plan.switches[h.leaf]!;
      swBatch.push(`link set ${h.port} master ${leaf.bridge} up`);
      const rate = plan.rates.get(leaf.level);
      if (rate) swTc.push(tbf(h.port, rate));
    }
    const inNet = (pid: number): string[] => ['--target', String(pid), '--net'];
    await run('nsenter', [...inNet(sw.pid), 'ip', '-batch', '-'], `${swBatch.join('\n')}\n`);
    if (swTc.length > 0) await run('nsenter', [...inNet(sw.pid), 'tc', '-batch', '-'], `${swTc.join('\n')}\n`);
    for (const h of hosts) {
      await run(
        'nsenter',
        [...inNet(h.pid), 'ip', '-batch', '-'],
        ['link set lo up', `addr add ${h.address}/${plan.prefixLength} dev eth0`, 'link set eth0 up', ''].join('\n'),
      );
      const rate = plan.rates.get(plan.switches[h.leaf]!.level);
      if (rate) await run('nsenter', [...inNet(h.pid), 'tc', '-batch', '-'], `${tbf('eth0', rate)}\n`);
    }

    const theCleaner = cleaner;
    let destroyed: Promise<void> | undefined;
    const exited = (c: ChildProcess): Promise<void> =>
      c.exitCode !== null || c.signalCode !== null
        ? Promise.resolve()
        : new Promise((resolve) => {
            c.once('exit', () => resolve());
            // Holders are unref'd: their exit must keep the loop alive until it is seen.
            c.ref();
          });
    return {
      plan,
      hosts,
      switchPid: sw.pid,
      cleanerPid: theCleaner.pid!,
      namespaces,
      destroy() {
        destroyed ??= (async () => {
          const all = [...children, theCleaner].map(exited);
          theCleaner.kill('SIGTERM');
          await exited(theCleaner);
          // The cleaner has killed every holder; a holder it could not see (none expected) goes now.
          killAll();
          await Promise.all(all);
        })();
        return destroyed;
      },
      destroySync() {
        theCleaner.kill('SIGTERM');
        killAll();
      },
    };
  } catch (e) {
    if (etcDir !== undefined) rmSync(etcDir, { recursive: true, force: true });
    cleaner?.kill('SIGTERM');
    killAll();
    throw e;
  }
}

/**
 * Kills every process in the given network or mount namespaces (by inode), for a cluster whose
 * owner and cleaner are both gone; returns how many it killed.
 */
export function sweepNamespaces(net: readonly number[], mnt: readonly number[]): number {
  const wanted = new Set([...net.map((n) => `net:[${n}]`), ...mnt.map((n) => `mnt:[${n}]`)]);
  let killed = 0;
  for (let round = 0; round < 100; round++) {
    let found = 0;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
      for (const kind of ['net', 'mnt']) {
        let link: string;
        try {
          link = readlinkSync(`/proc/${entry}/ns/${kind}`);
        } catch {
          continue;
        }
        if (wanted.has(link)) {
          found++;
          try {
            process.kill(Number(entry), 'SIGKILL');
            killed++;
          } catch {
            /* gone meanwhile */
          }
          break;
        }
      }
    }
    if (found === 0) break;
    spawnSync('sleep', ['0.02']);
  }
  return killed;
}

/**
 * The nsenter command line that runs `argv` inside a host (its network, UTS, IPC and mount
 * namespaces), in `cwd` when the host sees it (else /), killed when the caller dies.
 */
export function enterHostArgv(pid: number, argv: readonly string[], cwd: string, keep: readonly string[] = []): string[] {
  const seen = coveredByHostTmpfs([cwd]).length === 0 || keep.some((k) => within(cwd, k));
  return [
    'nsenter',
    '--target',
    String(pid),
    '--net',
    '--uts',
    '--ipc',
    '--mount',
    `--wd=${seen ? cwd : '/'}`,
    '--',
    'setpriv',
    '--pdeathsig',
    'KILL',
    ...argv,
  ];
}
