import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { hostname, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/**
 * A one-node Slurm cluster of its own for tests: munged, slurmctld and slurmd from Debian's
 * munge and slurm-wlm packages, every file in one fresh temporary directory, every port on
 * loopback. Nothing under /etc, /run or /var is read or written, so it runs beside a system
 * Slurm or another test's cluster.
 *
 * What the configuration needs and why (checked in a gVisor sandbox without systemd and with
 * read-only cgroups, Slurm 22.05):
 * - ProctrackType=proctrack/linuxproc: tracks steps through /proc parentage, no cgroups.
 * - TaskPlugin=task/affinity: binds tasks with sched_setaffinity, as clusters do (`srun -n 2`
 *   gives one core to each rank); it needs no cgroups either.
 * - The node's CPUs/sockets/cores/threads are what `slurmd -C` detects: a node configured with
 *   more than slurmd finds is drained, and Slurm's guess of the layout from CPUs alone differs.
 * - One job step may have more tasks than CPUs only with `srun --overcommit`: the partition's
 *   OverSubscribe=FORCE lets jobs share CPUs but leaves `srun -n 3` on 2 CPUs pending forever.
 *   Overcommitted, Slurm allocates one CPU per node and task/affinity binds every task to it.
 * - SlurmctldHost and NodeAddr are 127.0.0.1 so no name needs to resolve; slurmd is told its
 *   node name (-N) instead of matching the host name.
 * - The temporary directory is mode 0755: munged refuses a socket whose directories lack
 *   search permission for all.
 * - PlugStackConfig is an empty file of our own, so the machine's SPANK plugins stay out.
 * - FirstJobId is random, so per-job names derived from job ids (topocoll's rendezvous file) do
 *   not meet names left by an earlier cluster.
 *
 * Invariant: every process of the cluster — daemons, slurmstepd, job tasks — carries
 * SLURM_CONF=<this cluster's slurm.conf> in its environment, and no other process does; stop(),
 * the exit hook and the watchdog kill exactly those.
 */
export interface SlurmCluster {
  /** The temporary directory holding configuration, state, sockets and logs. */
  dir: string;
  /** Environment for Slurm client commands and jobs: this process's, without any launcher's variables, plus SLURM_CONF. */
  env: NodeJS.ProcessEnv;
  nodeName: string;
  cpus: number;
  /** Runs `srun <args>` to completion, or kills it after `timeoutMs` (default 60 s). */
  srun(args: string[], opts?: SrunOptions): Promise<SrunResult>;
  /** Jobs slurmctld still lists (`squeue`: id, state, name), pending, running or completing. */
  queue(): string[];
  /** Processes of this cluster other than its daemons and their children (slurmstepd, job tasks). */
  strayProcesses(): number[];
  /** The last lines of the daemons' logs, for failure messages. */
  logTail(lines?: number): string;
  /** Cancels every job, kills every process of the cluster and removes its directory. */
  stop(): Promise<void>;
}

export interface SrunOptions {
  timeoutMs?: number;
  cwd?: string;
  env?: Record<string, string>;
}

export interface SrunResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Non-empty lines of stdout. */
  lines: string[];
  ms: number;
  timedOut: boolean;
}

const TOOLS = ['munged', 'munge', 'slurmctld', 'slurmd', 'srun', 'sinfo', 'squeue', 'scancel'] as const;
type Tool = (typeof TOOLS)[number];
const PACKAGE: Record<Tool, string> = {
  munged: 'munge',
  munge: 'munge',
  slurmctld: 'slurmctld (slurm-wlm)',
  slurmd: 'slurmd (slurm-wlm)',
  srun: 'slurm-client (slurm-wlm)',
  sinfo: 'slurm-client (slurm-wlm)',
  squeue: 'slurm-client (slurm-wlm)',
  scancel: 'slurm-client (slurm-wlm)',
};

/** Where a command is: PATH first, then the sbin directories a non-root PATH often lacks. */
function findTool(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(':').filter((d) => d !== ''), '/usr/local/sbin', '/usr/sbin', '/sbin'];
  for (const d of dirs) {
    const p = join(d, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Why a cluster cannot be started here, or undefined when it can: a missing command (with the
 * Debian package that has it). Root is not needed: the daemons run as this user (SlurmUser,
 * SlurmdUser) and start steps only for this user.
 */
export function slurmUnavailable(): string | undefined {
  const missing = TOOLS.filter((t) => findTool(t) === undefined);
  if (missing.length > 0) {
    const packages = [...new Set(missing.map((t) => PACKAGE[t]))].join(', ');
    return `Slurm test cluster: missing ${missing.join(', ')} — install the Debian packages ${packages} (apt-get install slurm-wlm munge)`;
  }
  return undefined;
}

/** Variables by which a process would take itself for a rank of some launcher's job, or a Slurm client for another cluster's job. */
function isLauncherVariable(name: string): boolean {
  return (
    /^(SLURM_|SLURMD_|SRUN_|SALLOC_|SBATCH_|TOPOCOLL_|OMPI_|PMIX_|PMI_)/.test(name) ||
    ['MASTER_ADDR', 'MASTER_PORT', 'RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE'].includes(name)
  );
}

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!isLauncherVariable(k)) env[k] = v;
  return env;
}

/** A TCP port nobody listens on now (the daemons bind it a moment later; start() retries on a lost race). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** The node as `slurmd -C` sees it: a configured node larger than this is drained. */
function detectNode(slurmd: string): { cpus: number; boards: number; sockets: number; cores: number; threads: number } {
  const r = spawnSync(slurmd, ['-C'], { encoding: 'utf8', env: cleanEnv(), timeout: 30_000 });
  const field = (k: string) => {
    const m = new RegExp(`\\b${k}=(\\d+)`).exec(r.stdout ?? '');
    if (!m) throw new Error(`slurmd -C printed no ${k}: ${r.stdout} ${r.stderr}`);
    return Number(m[1]);
  };
  return { cpus: field('CPUs'), boards: field('Boards'), sockets: field('SocketsPerBoard'), cores: field('CoresPerSocket'), threads: field('ThreadsPerCore') };
}

/** Pids of processes whose environment holds exactly `SLURM_CONF=<conf>`. */
function processesOf(conf: string): number[] {
  const want = Buffer.from(`SLURM_CONF=${conf}`);
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    let environ: Buffer;
    try {
      environ = readFileSync(`/proc/${name}/environ`);
    } catch {
      continue; // gone, or not ours to read
    }
    let start = 0;
    while (start < environ.length) {
      let end = environ.indexOf(0, start);
      if (end === -1) end = environ.length;
      if (end - start === want.length && environ.subarray(start, end).equals(want)) {
        pids.push(Number(name));
        break;
      }
      start = end + 1;
    }
  }
  return pids;
}

function parentOf(pid: number): number | undefined {
  try {
    const m = /^PPid:\s*(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, 'utf8')
      .split('\n')
      .slice(-lines - 1)
      .join('\n');
  } catch {
    return '(no log)';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts a cluster (up to three attempts: a port taken between choosing and binding it fails
 * one). Resolves to `{ skip }` only when the packages are missing.
 */
export async function startSlurmCluster(opts: { readyTimeoutMs?: number } = {}): Promise<SlurmCluster | { skip: string }> {
  const why = slurmUnavailable();
  if (why !== undefined) return { skip: why };
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(opts.readyTimeoutMs ?? 30_000);
    } catch (e) {
      lastError = e;
    }
  }
  throw lastError;
}

async function startOnce(readyTimeoutMs: number): Promise<SlurmCluster> {
  const tool = (t: Tool) => findTool(t)!;
  // Short names: the munge socket path must fit in sockaddr_un (108 bytes).
  const dir = mkdtempSync(join(tmpdir(), 'slurm-cluster-'));
  chmodSync(dir, 0o755);
  const conf = join(dir, 'slurm.conf');
  const env: NodeJS.ProcessEnv = { ...cleanEnv(), SLURM_CONF: conf };
  const daemons: ChildProcess[] = [];
  let watchdog: ChildProcess | undefined;
  let stopped = false;

  /** Synchronous, so that it can run in an exit hook: kills the watchdog, every process of the cluster, and removes the directory. */
  const killAllSync = () => {
    if (stopped) return;
    stopped = true;
    if (watchdog?.pid !== undefined) killQuietly(watchdog.pid, 'SIGKILL');
    for (const d of daemons) if (d.pid !== undefined) killQuietly(d.pid, 'SIGKILL');
    for (const pid of processesOf(conf)) killQuietly(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', killAllSync);

  const logTail = (lines = 20) =>
    ['munged.log', 'slurmctld.log', 'slurmd.log', 'slurmctld.out', 'slurmd.out'].map((f) => `--- ${f}\n${tail(join(dir, 'log', f), lines)}`).join('\n');

  try {
    for (const sub of ['munge', 'state', 'spool', 'log']) mkdirSync(join(dir, sub), { mode: 0o755 });
    chmodSync(join(dir, 'state'), 0o700);
    chmodSync(join(dir, 'spool'), 0o700);
    const keyFile = join(dir, 'munge', 'munge.key');
    writeFileSync(keyFile, randomBytes(1024), { mode: 0o600 });
    const socket = join(dir, 'munge', 'socket');

    const spawnDaemon = (cmd: string, args: string[], out: string) => {
      const fd = openSync(join(dir, 'log', out), 'a');
      try {
        const child = spawn(cmd, args, { env, stdio: ['ignore', fd, fd] });
        daemons.push(child);
        return child;
      } finally {
        closeSync(fd);
      }
    };

    spawnDaemon(
      tool('munged'),
      [
        '-F',
        `--key-file=${keyFile}`,
        `--socket=${socket}`,
        `--pid-file=${join(dir, 'munge', 'munged.pid')}`,
        `--log-file=${join(dir, 'log', 'munged.log')}`,
        `--seed-file=${join(dir, 'munge', 'seed')}`,
      ],
      'munged.out',
    );
    await until(() => existsSync(socket), 10_000, 'munged did not create its socket', daemons, logTail);

    const nodeName = hostname().split('.')[0] || 'localhost';
    const node = detectNode(tool('slurmd'));
    const [ctldPort, slurmdPort] = [await freePort(), await freePort()];
    const user = userInfo().username;
    writeFileSync(join(dir, 'plugstack.conf'), '');
    writeFileSync(
      conf,
      [
        'ClusterName=topocolltest',
        `SlurmctldHost=${nodeName}(127.0.0.1)`,
        `SlurmUser=${user}`,
        `SlurmdUser=${user}`,
        `SlurmctldPort=${ctldPort}`,
        `SlurmdPort=${slurmdPort}`,
        'AuthType=auth/munge',
        'CredType=cred/munge',
        `AuthInfo=socket=${socket}`,
        `StateSaveLocation=${join(dir, 'state')}`,
        `SlurmdSpoolDir=${join(dir, 'spool')}`,
        `SlurmctldPidFile=${join(dir, 'slurmctld.pid')}`,
        `SlurmdPidFile=${join(dir, 'slurmd.pid')}`,
        `SlurmctldLogFile=${join(dir, 'log', 'slurmctld.log')}`,
        `SlurmdLogFile=${join(dir, 'log', 'slurmd.log')}`,
        `PlugStackConfig=${join(dir, 'plugstack.conf')}`,
        'ProctrackType=proctrack/linuxproc',
        'TaskPlugin=task/affinity',
        'JobAcctGatherType=jobacct_gather/none',
        'AccountingStorageType=accounting_storage/none',
        'SelectType=select/cons_tres',
        'SelectTypeParameters=CR_Core',
        'SchedulerType=sched/builtin',
        'MpiDefault=none',
        'ReturnToService=2',
        'MailProg=/bin/true',
        // A timed-out step's tasks get SIGKILL 2 s after SIGTERM, not 30 s.
        'KillWait=2',
        `FirstJobId=${randomInt(1_000_000, 60_000_000)}`,
        `NodeName=${nodeName} NodeAddr=127.0.0.1 CPUs=${node.cpus} Boards=${node.boards} SocketsPerBoard=${node.sockets} CoresPerSocket=${node.cores} ThreadsPerCore=${node.threads} RealMemory=256 State=UNKNOWN`,
        `PartitionName=debug Nodes=${nodeName} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE`,
        '',
      ].join('\n'),
    );

    spawnDaemon(tool('slurmctld'), ['-D'], 'slurmctld.out');
    spawnDaemon(tool('slurmd'), ['-D', '-N', nodeName], 'slurmd.out');
    watchdog = startWatchdog(dir, conf);

    await until(
      () => {
        const r = spawnSync(tool('sinfo'), ['-h', '-N', '-o', '%T'], { env, encoding: 'utf8', timeout: 10_000 });
        return r.status === 0 && r.stdout.trim() === 'idle';
      },
      readyTimeoutMs,
      `node ${nodeName} did not become idle in sinfo`,
      daemons,
      logTail,
    );

    const cluster: SlurmCluster = {
      dir,
      env,
      nodeName,
      cpus: node.cpus,
      srun: (args, o = {}) => runSrun(tool('srun'), args, { ...env, ...o.env }, o.cwd, o.timeoutMs ?? 60_000, () => cancelAll(tool('scancel'), env, user)),
      queue: () => {
        const r = spawnSync(tool('squeue'), ['-h', '-o', '%i %T %j'], { env, encoding: 'utf8', timeout: 10_000 });
        if (r.status !== 0) throw new Error(`squeue failed: ${r.stderr}`);
        return r.stdout.split('\n').filter((l) => l !== '');
      },
      strayProcesses: () => {
        // slurmctld keeps a child (slurmscriptd); slurmstepd detaches from slurmd (its parent is init).
        const own = new Set([...daemons.map((d) => d.pid), watchdog?.pid]);
        return processesOf(conf).filter((p) => !own.has(p) && !own.has(parentOf(p)));
      },
      logTail,
      stop: async () => {
        if (stopped) return;
        cancelAll(tool('scancel'), env, user);
        for (const d of daemons) if (d.exitCode === null && d.signalCode === null) d.kill('SIGTERM');
        await Promise.race([
          Promise.all(daemons.map((d) => (d.exitCode !== null || d.signalCode !== null ? Promise.resolve() : new Promise((r) => d.once('exit', r))))),
          sleep(5_000),
        ]);
        killAllSync();
        process.off('exit', killAllSync);
      },
    };
    return cluster;
  } catch (e) {
    const logs = logTail();
    killAllSync();
    process.off('exit', killAllSync);
    throw new Error(`${e instanceof Error ? e.message : String(e)}\n${logs}`);
  }
}

/** Polls `ready` every 200 ms; fails at `timeoutMs`, or at once when a daemon has exited. */
async function until(ready: () => boolean, timeoutMs: number, what: string, daemons: ChildProcess[], logTail: () => string): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (ready()) return;
    const dead = daemons.find((d) => d.exitCode !== null || d.signalCode !== null);
    if (dead) throw new Error(`${what}: ${dead.spawnfile} exited (${dead.exitCode ?? dead.signalCode})\n${logTail()}`);
    if (Date.now() > end) throw new Error(`${what} within ${timeoutMs} ms`);
    await sleep(200);
  }
}

/**
 * A detached shell that outlives a test process killed without running its exit hooks
 * (SIGKILL, a signal with no handler) and then does what the hook would: kills every process of
 * the cluster and removes its directory. Its own environment has no SLURM_CONF.
 */
function startWatchdog(dir: string, conf: string): ChildProcess {
  const script = `
parent=$1 dir=$2 conf=$3
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
for p in /proc/[0-9]*; do
  if tr '\\0' '\\n' < "$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$conf"; then kill -KILL "\${p#/proc/}" 2>/dev/null; fi
done
rm -rf "$dir"
`;
  const env: NodeJS.ProcessEnv = { ...cleanEnv() };
  const child = spawn('/bin/sh', ['-c', script, 'slurm-watchdog', String(process.pid), dir, conf], { env, stdio: 'ignore', detached: true });
  child.unref();
  return child;
}

/** Cancels every job of `user` on the cluster (bounded: a dead slurmctld must not hang stop()). */
function cancelAll(scancel: string, env: NodeJS.ProcessEnv, user: string): void {
  spawnSync(scancel, ['--quiet', '-u', user], { env, timeout: 10_000, stdio: 'ignore' });
}

function runSrun(srun: string, args: string[], env: NodeJS.ProcessEnv, cwd: string | undefined, timeoutMs: number, cancel: () => void): Promise<SrunResult> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(srun, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    let timedOut = false;
    // srun passes SIGTERM to the tasks and ends the step; SIGKILL and scancel if that does not end it.
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
      setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        cancel();
      }, 5_000).unref();
    }, timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr, lines: stdout.split('\n').filter((l) => l !== ''), ms: Date.now() - started, timedOut });
    });
  });
}
