import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout: jobs, dist/ and node_modules/ must stay reachable inside the hosts. */
const REPO_ROOT = realpathSync(fileURLToPath(new URL('../..', import.meta.url)));
/** The checkout's path when it lies under /tmp (a clone there, as CI may make): the hosts' own
 *  /tmp would cover it, so the holder binds it back at the same path. */
const REPO_UNDER_TMP = !relative('/tmp', REPO_ROOT).startsWith('..') && REPO_ROOT !== '/tmp' ? REPO_ROOT : undefined;

/**
 * "Hosts" made of Linux namespaces, for jobs that should see what a cluster gives them: every
 * host has its own network namespace with one address on a private bridge, its own host name
 * (UTS namespace) and its own /dev/shm and /tmp (tmpfs mounts in its own mount namespace).
 *
 * Layout of one `createHosts(n)` call with id `tch-<pid>-<hex>`:
 * - netns `<id>-sw`: the switch — bridge `br0` and the switch ends `p0 … p(n-1)` of the veths.
 *   The root namespace gets no interface, address or route.
 * - netns `<id>-h<i>`: host i — `lo` up and `eth0` (the other veth end) with 10.77.X.(i+1)/24,
 *   X random per call. Each call has its own bridge, so calls cannot reach each other.
 * - one holder process per host, `sleep infinity` in that netns after `unshare --uts --mount`,
 *   `hostname`, tmpfs mounts on /dev/shm and /tmp, and with `etcHosts` a bind mount of its own
 *   /etc/hosts (the file is unlinked once mounted: the mount keeps it). The holder keeps the UTS and mount
 *   namespaces alive between jobs, so what a job leaves in /dev/shm or /tmp stays visible
 *   (through /proc/<holder>/root) until `destroy()`. A checkout under /tmp is bound back at its
 *   own path inside the host's /tmp (the only thing there besides what jobs leave).
 * Every process of a host is started with `nsenter --target <holder> --mount --uts --net`.
 *
 * Cleanup: `destroy()`; the process's 'exit' event (synchronous); PR_SET_PDEATHSIG (SIGKILL)
 * on holders and spawned processes, so they die with the test process even when it is killed;
 * and each call first deletes the namespaces of earlier calls whose test process is gone.
 */

export interface Host {
  index: number;
  /** Its host name (what `hostname` and `os.hostname()` return inside it). */
  name: string;
  /** Its IPv4 address on the bridge. */
  address: string;
  netns: string;
  /** The process that holds its UTS and mount namespaces. */
  holderPid: number;
}

export interface HostsOptions {
  /** Size of each host's /dev/shm and /tmp (tmpfs), bytes; default 256 MiB. */
  tmpfsBytes?: number;
  /** Time allowed for setting up, ms; default 20 s. */
  setupTimeoutMs?: number;
  /**
   * Give every host an /etc/hosts naming all hosts, its own name as 127.0.1.1 as Debian's
   * installer writes it (so a host name resolves, and on its own host to loopback). Default
   * false: host names resolve nowhere, as in containers without DNS.
   */
  etcHosts?: boolean;
}

export interface SpawnInHostOptions {
  env?: NodeJS.ProcessEnv;
  /** Working directory (resolved in the test's namespace: hosts share the file system outside /dev/shm and /tmp). */
  cwd?: string;
  /** Bind the process to these CPUs (`taskset -c` list, e.g. "1" or "0-1"). */
  cpus?: string;
}

export interface HostRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface Hosts {
  readonly id: string;
  readonly hosts: readonly Host[];
  /** Starts `cmd args` inside host i; stdio piped. Its pid is the command's own (nsenter, setpriv and taskset exec). */
  spawn(i: number, cmd: string, args: readonly string[], opts?: SpawnInHostOptions): ChildProcess;
  /**
   * Runs `cmd args` inside host i to completion (SIGKILL after timeoutMs, default 60 s, or as
   * soon as `killWhen` settles, if it is given).
   */
  run(i: number, cmd: string, args: readonly string[], opts?: SpawnInHostOptions & { timeoutMs?: number; killWhen?: Promise<unknown> }): Promise<HostRun>;
  /** A TCP port nothing listens on in host i (asked from its kernel, then released). */
  freePort(i: number): Promise<number>;
  /** Names in host i's private /dev/shm and /tmp. */
  listShm(i: number): string[];
  listTmp(i: number): string[];
  /** Kills every process of every host and deletes the namespaces (and with them the veths and the bridge). */
  destroy(): Promise<void>;
}

const PREFIX = 'tch-';
const OWN_NAME = /^tch-(\d+)-[0-9a-f]+-(sw|h\d+)$/;

/** An error that means "this sandbox does not allow it", as opposed to a bug in the harness. */
function isRefusal(message: string): boolean {
  return /not permitted|permission denied|EPERM|EACCES|ENOENT|not supported|unknown (option|command)|No such file or directory|cannot open/i.test(message);
}

interface CmdError extends Error {
  stderr?: string;
}

function sh(cmd: string, args: readonly string[], timeoutMs = 10_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, [...args], { encoding: 'utf8', timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) {
        const e: CmdError = new Error(`${cmd} ${args.join(' ')}: ${stderr.trim() || err.message}`);
        e.stderr = stderr;
        reject(e);
      } else resolve(stdout);
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function listNetns(): string[] {
  try {
    return readdirSync('/run/netns');
  } catch {
    return [];
  }
}

/** Kills (SIGKILL) every process in a netns and deletes it; synchronous, for exit paths; never throws. */
function removeNetnsSync(ns: string): void {
  const pids = spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).stdout ?? '';
  for (const p of pids.split('\n').filter((l) => /^\d+$/.test(l))) {
    try {
      process.kill(Number(p), 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  spawnSync('ip', ['netns', 'del', ns]);
}

/** Namespaces of earlier calls whose test process is gone (killed before it could clean up). */
function sweepStale(): void {
  for (const ns of listNetns()) {
    const m = OWN_NAME.exec(ns);
    if (m && Number(m[1]) !== process.pid && !alive(Number(m[1]))) removeNetnsSync(ns);
  }
}

export async function createHosts(n: number, opts: HostsOptions = {}): Promise<Hosts | { skip: string }> {
  if (!(Number.isInteger(n) && n >= 1 && n <= 200)) throw new Error(`createHosts: n must be 1..200, got ${n}`);
  const tmpfs = opts.tmpfsBytes ?? 256 * 1024 * 1024;
  const setupTimeoutMs = opts.setupTimeoutMs ?? 20_000;
  for (const tool of ['ip', 'unshare', 'nsenter', 'setpriv', 'taskset']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return { skip: `${tool} is not installed (apt-get install iproute2 util-linux)` };
  }
  sweepStale();

  const hex = randomBytes(3).toString('hex');
  const id = `${PREFIX}${process.pid}-${hex}`;
  const sw = `${id}-sw`;
  const subnet = `10.77.${1 + (randomBytes(1)[0]! % 254)}`;
  const created: string[] = [];
  const holders: ChildProcess[] = [];
  const spawned = new Set<ChildProcess>();
  const hosts: Host[] = [];
  const names = Array.from({ length: n }, (_, i) => `host${i}-${hex}`);
  const addressOf = (i: number): string => `${subnet}.${i + 1}`;
  // Written before the holders start, bind-mounted by them, removed once they are all ready.
  const etcDir = opts.etcHosts ? mkdtempSync(join(tmpdir(), `${id}-etc-`)) : undefined;
  if (etcDir !== undefined) {
    names.forEach((_, i) => {
      const lines = ['127.0.0.1 localhost', `127.0.1.1 ${names[i]}`, ...names.flatMap((name, j) => (j === i ? [] : [`${addressOf(j)} ${name}`]))];
      writeFileSync(join(etcDir, `hosts${i}`), `${lines.join('\n')}\n`);
    });
  }

  const cleanupSync = (): void => {
    for (const c of [...spawned, ...holders]) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    for (const ns of created) removeNetnsSync(ns);
  };
  process.on('exit', cleanupSync);

  try {
    await sh('ip', ['netns', 'add', sw]);
    created.push(sw);
    await sh('ip', ['-n', sw, 'link', 'set', 'lo', 'up']);
    await sh('ip', ['-n', sw, 'link', 'add', 'br0', 'type', 'bridge']);
    await sh('ip', ['-n', sw, 'link', 'set', 'br0', 'up']);
    for (let i = 0; i < n; i++) {
      const ns = `${id}-h${i}`;
      await sh('ip', ['netns', 'add', ns]);
      created.push(ns);
      // Both ends are created directly in their namespaces: the root namespace never holds them.
      await sh('ip', ['link', 'add', `p${i}`, 'netns', sw, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      await sh('ip', ['-n', sw, 'link', 'set', `p${i}`, 'master', 'br0', 'up']);
      await sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
      await sh('ip', ['-n', ns, 'addr', 'add', `${addressOf(i)}/24`, 'dev', 'eth0']);
      await sh('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      const holder = await startHolder(ns, names[i]!, tmpfs, etcDir && join(etcDir, `hosts${i}`), setupTimeoutMs);
      holders.push(holder.child);
      hosts.push({ index: i, name: names[i]!, address: addressOf(i), netns: ns, holderPid: holder.pid });
    }
    if (etcDir !== undefined) rmSync(etcDir, { recursive: true });
  } catch (e) {
    if (etcDir !== undefined) rmSync(etcDir, { recursive: true, force: true });
    cleanupSync();
    process.off('exit', cleanupSync);
    const message = (e as Error).message;
    if (isRefusal(message)) return { skip: `Linux namespaces are not available here: ${message}` };
    throw e;
  }

  const hostAt = (i: number): Host => {
    const h = hosts[i];
    if (h === undefined) throw new Error(`no host ${i} (there are ${hosts.length})`);
    return h;
  };

  const spawnIn = (i: number, cmd: string, args: readonly string[], o: SpawnInHostOptions = {}): ChildProcess => {
    const h = hostAt(i);
    const argv = ['--target', String(h.holderPid), '--mount', '--uts', '--net', `--wd=${o.cwd ?? process.cwd()}`, '--', 'setpriv', '--pdeathsig', 'KILL'];
    if (o.cpus !== undefined) argv.push('taskset', '-c', o.cpus);
    argv.push(cmd, ...args);
    const child = spawn('nsenter', argv, { env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    spawned.add(child);
    child.on('exit', () => spawned.delete(child));
    return child;
  };

  const runIn = (
    i: number,
    cmd: string,
    args: readonly string[],
    o: SpawnInHostOptions & { timeoutMs?: number; killWhen?: Promise<unknown> } = {},
  ): Promise<HostRun> => {
    const t0 = performance.now();
    const child = spawnIn(i, cmd, args, o);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 60_000);
    // After the child's exit, kill() does nothing.
    void o.killWhen?.finally(() => child.kill('SIGKILL'));
    return new Promise((resolve, reject) => {
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      // 'close' (not 'exit'): every byte of its output has been read.
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal, stdout, stderr, ms: performance.now() - t0 });
      });
    });
  };

  let destroyed: Promise<void> | undefined;
  return {
    id,
    hosts,
    spawn: spawnIn,
    run: runIn,
    async freePort(i) {
      const r = await runIn(i, process.execPath, [
        '-e',
        "const s=require('net').createServer().listen(0,'0.0.0.0',()=>{console.log(s.address().port);s.close()})",
      ]);
      const port = Number(r.stdout.trim());
      if (r.code !== 0 || !(port > 0)) throw new Error(`freePort in host ${i}: ${r.stderr || r.stdout}`);
      return port;
    },
    listShm: (i) => readdirSync(`/proc/${hostAt(i).holderPid}/root/dev/shm`),
    listTmp: (i) =>
      readdirSync(`/proc/${hostAt(i).holderPid}/root/tmp`).filter(
        (name) => REPO_UNDER_TMP === undefined || name !== relative('/tmp', REPO_UNDER_TMP).split(sep)[0],
      ),
    destroy() {
      destroyed ??= (async () => {
        const exits = [...spawned, ...holders]
          .filter((c) => c.exitCode === null && c.signalCode === null)
          .map(
            (c) =>
              new Promise<void>((resolve) => {
                c.once('exit', () => resolve());
                c.ref(); // holders are unref'd: their exit must keep the loop alive until it is seen
                c.kill('SIGKILL');
              }),
          );
        await Promise.all(exits);
        // Descendants a job started in a host (not our direct children) are still in its netns.
        cleanupSync();
        process.off('exit', cleanupSync);
      })();
      return destroyed;
    },
  };
}

/** Starts the holder of a host's UTS and mount namespaces and waits until its mounts are in place. */
function startHolder(
  ns: string,
  name: string,
  tmpfsBytes: number,
  etcHosts: string | undefined,
  timeoutMs: number,
): Promise<{ child: ChildProcess; pid: number }> {
  // `ip netns exec`, setpriv and unshare (without --fork) all exec, so "$$" is the holder's pid
  // and also the child's pid; it is printed only once hostname and both mounts succeeded.
  const script = [
    'set -e',
    'hostname "$1"',
    // Before /tmp is covered: the file lives in the test's /tmp.
    ...(etcHosts !== undefined ? ['mount --bind "$2" /etc/hosts'] : []),
    `mount -t tmpfs -o size=${tmpfsBytes},mode=1777 tmpfs /dev/shm`,
    // A checkout under /tmp: the holder's working directory keeps it reachable through
    // /proc/$$/cwd after /tmp is covered (-c: mount must not resolve that path by name).
    ...(REPO_UNDER_TMP !== undefined ? ['cd "$3"'] : []),
    `mount -t tmpfs -o size=${tmpfsBytes},mode=1777 tmpfs /tmp`,
    ...(REPO_UNDER_TMP !== undefined ? ['mkdir -p "$3"', 'mount -c --bind "/proc/$$/cwd" "$3"', 'cd /'] : []),
    'echo "ready $$"',
    'exec sleep infinity',
  ].join('\n');
  const child = spawn(
    'ip',
    [
      'netns',
      'exec',
      ns,
      'setpriv',
      '--pdeathsig',
      'KILL',
      'unshare',
      '--uts',
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      script,
      'holder',
      name,
      etcHosts ?? '',
      REPO_UNDER_TMP ?? '',
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const fail = (why: string): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`host holder in ${ns}: ${why}${err ? `: ${err.trim()}` : ''}`));
    };
    const timer = setTimeout(() => fail(`not ready within ${timeoutMs} ms`), timeoutMs);
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /ready (\d+)\n/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      const pid = Number(m[1]);
      if (pid !== child.pid) {
        fail(`holder pid ${pid} is not the spawned pid ${child.pid}`);
        return;
      }
      // The holder writes nothing more; its pipes must not keep the test's event loop alive.
      child.stdout!.destroy();
      child.stderr!.destroy();
      child.unref();
      resolve({ child, pid });
    });
    child.on('error', (e) => fail(e.message));
    child.on('exit', (code, signal) => fail(`exited (${code ?? signal}) before it was ready`));
  });
}
