import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, realpathSync } from 'node:fs';
import { relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { enterHostArgv, startCluster, type RunningCluster } from '../../src/cluster/build.js';
import { planCluster } from '../../src/cluster/plan.js';
import { isTopocollError } from '../../src/errors.js';
import type { NetworkTopology } from '../../src/topology/network/index.js';

/** The checkout: jobs, dist/ and node_modules/ must stay reachable inside the hosts. */
const REPO_ROOT = realpathSync(fileURLToPath(new URL('../..', import.meta.url)));
/** The checkout's path when it lies under /tmp (a clone there, as CI may make): the hosts' own
 *  /tmp would cover it, so the holder binds it back at the same path. */
const REPO_UNDER_TMP = !relative('/tmp', REPO_ROOT).startsWith('..') && REPO_ROOT !== '/tmp' ? REPO_ROOT : undefined;

/**
 * "Hosts" made of Linux namespaces, for jobs that should see what a cluster gives them: every
 * host has its own network namespace with one address on a private bridge, its own host name
 * (UTS namespace), its own System V IPC (IPC namespace) and its own /dev/shm and /tmp (tmpfs
 * mounts in its own mount namespace).
 *
 * A thin layer over `topocoll cluster`'s module (src/cluster/build.ts, which documents the
 * layout): one `createHosts(n)` call is a cluster of one leaf switch with n hosts named
 * `host<i>-<hex>` at 10.77.X.(i+1)/24, X random per call; each call has its own bridge in its own
 * namespace, so calls cannot reach each other, and the root namespace gets no interface, address
 * or route. A holder process per host keeps its namespaces alive between jobs, so what a job
 * leaves in /dev/shm or /tmp stays visible (through /proc/<holder>/root) until `destroy()`. A
 * checkout under /tmp is bound back at its own path inside the host's /tmp (the only thing there
 * besides what jobs leave).
 * Every process of a host is started with `nsenter --target <holder> --net --uts --ipc --mount`.
 *
 * Cleanup: `destroy()`; the process's 'exit' event (synchronous); and, however the test process
 * dies, PR_SET_PDEATHSIG on holders and spawned processes and the cluster's cleaner, which kills
 * whatever else still runs in a host. Nothing is named (no `ip netns add`), so nothing outlives
 * the test process.
 */

export interface Host {
  index: number;
  /** Its host name (what `hostname` and `os.hostname()` return inside it). */
  name: string;
  /** Its IPv4 address on the bridge. */
  address: string;
  /** Its network namespace, `net:[<inode>]`. */
  netns: string;
  /** The process that holds its namespaces. */
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

/** Makes n hosts on one bridge (a cluster of one leaf switch, src/cluster/), or says why it cannot. */
export async function createHosts(n: number, opts: HostsOptions = {}): Promise<Hosts | { skip: string }> {
  if (!(Number.isInteger(n) && n >= 1 && n <= 200)) throw new Error(`createHosts: n must be 1..200, got ${n}`);
  if (spawnSync('sh', ['-c', 'command -v taskset']).status !== 0) return { skip: 'taskset is not installed (apt-get install util-linux)' };
  const hex = randomBytes(3).toString('hex');
  const id = `tch-${process.pid}-${hex}`;
  const names = Array.from({ length: n }, (_, i) => `host${i}-${hex}`);
  const net: NetworkTopology = { source: id, levels: 1, nodes: new Map(names.map((node) => [node, { node, switches: ['sw'] }])), warnings: [] };
  // Each call has its own subnet and its own bridge (in its own namespace), so calls cannot reach each other.
  const plan = planCluster(net, { subnet: `10.77.${1 + (randomBytes(1)[0]! % 254)}.0/24` });
  const keep = REPO_UNDER_TMP !== undefined ? [REPO_UNDER_TMP] : [];
  let cluster: RunningCluster;
  try {
    cluster = await startCluster(plan, {
      tmpfsBytes: opts.tmpfsBytes ?? 256 * 1024 * 1024,
      setupTimeoutMs: opts.setupTimeoutMs ?? 20_000,
      etcHosts: opts.etcHosts ? 'loopback' : 'none',
      keep,
    });
  } catch (e) {
    if (isTopocollError(e, 'ENOTSUP')) return { skip: `Linux namespaces are not available here: ${e.message}` };
    throw e;
  }
  const hosts: Host[] = cluster.hosts.map((h, i) => ({
    index: i,
    name: h.name,
    address: h.address,
    netns: `net:[${cluster.namespaces.net[i + 1]}]`,
    holderPid: h.pid,
  }));
  const spawned = new Set<ChildProcess>();
  const cleanupSync = (): void => {
    for (const c of spawned) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    cluster.destroySync();
  };
  process.on('exit', cleanupSync);

  const hostAt = (i: number): Host => {
    const h = hosts[i];
    if (h === undefined) throw new Error(`no host ${i} (there are ${hosts.length})`);
    return h;
  };

  const spawnIn = (i: number, cmd: string, args: readonly string[], o: SpawnInHostOptions = {}): ChildProcess => {
    const h = hostAt(i);
    const argv = enterHostArgv(h.holderPid, [...(o.cpus !== undefined ? ['taskset', '-c', o.cpus] : []), cmd, ...args], o.cwd ?? process.cwd(), keep);
    const child = spawn(argv[0]!, argv.slice(1), { env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
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
        const exits = [...spawned]
          .filter((c) => c.exitCode === null && c.signalCode === null)
          .map(
            (c) =>
              new Promise<void>((resolve) => {
                c.once('exit', () => resolve());
                c.kill('SIGKILL');
              }),
          );
        await Promise.all(exits);
        // Descendants a job started in a host (not our direct children) go with the cluster.
        await cluster.destroy();
        process.off('exit', cleanupSync);
      })();
      return destroyed;
    },
  };
}
