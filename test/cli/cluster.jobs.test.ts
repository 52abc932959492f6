import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import { relative, sep } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { jobScript, repoRoot } from '../helpers/jobs.js';

/**
 * `topocoll cluster` as a user runs it (the built CLI, as root): 2 leaf switches × 2 hosts, a
 * topocoll job under Open MPI's mpirun through the printed agent, the same hosts under MPICH's
 * mpiexec, a job started with the torchrun variables through `cluster exec`, then `down` — and
 * after it, and after the keeper is killed with SIGKILL, nothing of the cluster is left: no
 * process, network or mount namespace of it (so no bridge, veth or mount), no interface or mount
 * in the machine's namespaces, no state file.
 */

const MAIN = `${repoRoot}dist/cli/main.js`;
const AGENT = `${repoRoot}dist/cli/cluster-agent.js`;
const LIMIT_MS = 90_000;
/** The cluster's state files go to a directory of this run's own, not /run/topocoll. */
const STATE_DIR = `/run/topocoll-test-${process.pid}`;

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Variables of the test run that would make a rank detect another launcher. */
const LAUNCHER_VARS = /^(TOPOCOLL_|OMPI_|PMIX_|PMI_|SLURM|RANK$|WORLD_SIZE$|LOCAL_RANK$|MASTER_)/;
const baseEnv = (): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !LAUNCHER_VARS.test(k))),
  TOPOCOLL_CLUSTER_DIR: STATE_DIR,
  // Each host has its own /tmp: the test's per-file TMPDIR (test/setup-jobs.ts) is not in it.
  TMPDIR: '/tmp',
});

function topocoll(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = LIMIT_MS): Promise<Run> {
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...baseEnv(), ...env }, cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
  return new Promise((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    }),
  );
}

interface State {
  keeper: { pid: number };
  cleanerPid: number;
  hosts: { name: string; address: string; pid: number }[];
  namespaces: { net: number[]; mnt: number[] };
  agent: string;
}
const readState = (name: string): State => JSON.parse(readFileSync(`${STATE_DIR}/cluster-${name}.json`, 'utf8')) as State;

/**
 * What the machine's own namespaces hold that a leaking cluster would change: interfaces, and
 * mounts where the hosts mount theirs (other tests may mount elsewhere meanwhile).
 */
function rootView(): string {
  const mounts = readFileSync('/proc/1/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => /^\/(dev\/shm|tmp|etc\/hosts)(\/|$)/.test(m))
    .sort()
    .join(' ');
  return `links: ${readdirSync('/sys/class/net').sort().join(' ')}\nmounts: ${mounts}`;
}

/** A zombie has ended (its parent, init for a detached keeper, has yet to reap it). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}

/** Everything of the cluster still there: its processes, and any process in one of its namespaces. */
function leftovers(state: State, stateFile: string): string[] {
  const left: string[] = [];
  for (const pid of [state.keeper.pid, state.cleanerPid, ...state.hosts.map((h) => h.pid)]) if (running(pid)) left.push(`process ${pid}`);
  const ns = new Set([...state.namespaces.net.map((n) => `net:[${n}]`), ...state.namespaces.mnt.map((n) => `mnt:[${n}]`)]);
  for (const pid of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    for (const kind of ['net', 'mnt']) {
      try {
        const link = readlinkSync(`/proc/${pid}/ns/${kind}`);
        if (ns.has(link)) left.push(`process ${pid} in ${link}`);
      } catch {
        /* gone, or a zombie: in no namespace */
      }
    }
  }
  if (existsSync(stateFile)) left.push(stateFile);
  return left;
}

async function eventually(check: () => string[], limitMs: number): Promise<string[]> {
  const t0 = performance.now();
  let left = check();
  while (left.length > 0 && performance.now() - t0 < limitMs) {
    await new Promise((r) => setTimeout(r, 50));
    left = check();
  }
  return left;
}

/** Why the cluster cannot be made here, or '' when it can (root, iproute2, namespaces). */
function unavailable(): string {
  if (process.getuid?.() !== 0) return 'not root';
  if (spawnSync('sh', ['-c', 'command -v ip && command -v nsenter && command -v unshare']).status !== 0) return 'ip, nsenter or unshare is not installed';
  const probe = spawnSync('unshare', ['--net', '--uts', '--ipc', '--mount', 'true'], { encoding: 'utf8' });
  return probe.status === 0 ? '' : `namespaces are refused: ${probe.stderr.trim()}`;
}

const why = unavailable();
/** CI makes clusters (it runs as root): there a skip would hide the tests, so they fail instead. */
const mustRun = process.env.TOPOCOLL_REQUIRE_HOSTS === '1';
const haveMpirun = spawnSync('mpirun', ['--version']).status === 0;
const haveMpich = spawnSync('mpiexec.mpich', ['--version']).status === 0;

function skipOrFail(ctx: { skip: (note: string) => void }): boolean {
  if (why === '') return false;
  if (mustRun) throw new Error(`topocoll cluster is required here (TOPOCOLL_REQUIRE_HOSTS=1): ${why}`);
  ctx.skip(why);
  return true;
}

describe('topocoll cluster', () => {
  afterAll(() => rmSync(STATE_DIR, { recursive: true, force: true }));

  it(
    'up 2 leaves × 2 hosts; a job under mpirun with the agent, the hosts under mpiexec, a job with the torchrun variables; down leaves nothing',
    async (ctx) => {
      if (skipOrFail(ctx)) return;
      const name = `t${process.pid}`;
      const stateFile = `${STATE_DIR}/cluster-${name}.json`;
      const before = rootView();
      const t0 = performance.now();
      const up = await topocoll(['cluster', 'up', '--name', name, '--leaves', '2', '--hosts', '2', '--rate', 'leaf=10gbit,spine=5gbit']);
      expect(up.code, up.stderr).toBe(0);
      const state = readState(name);
      try {
        expect(up.stdout).toContain(`cluster "${name}" up: 4 hosts, 3 switches`);
        expect(up.stdout).toMatch(/^ {2}node2 +10\.99\.0\.3\/16 +leaf1 → spine$/m);
        expect(up.stdout).toContain(`--mca plm_rsh_agent ${AGENT} --mca plm_rsh_no_tree_spawn 1`);
        expect(up.stdout).toContain(`-launcher ssh -launcher-exec ${AGENT}`);
        expect(state.hosts.map((h) => h.name)).toEqual(['node0', 'node1', 'node2', 'node3']);
        const exec = (host: string, argv: string[], env: NodeJS.ProcessEnv = {}) => topocoll(['cluster', 'exec', '--name', name, host, '--', ...argv], env);

        // A host has its own name, address, /etc/hosts, empty /dev/shm and /tmp, IPC namespace, sysfs, and the leaf's rate.
        const look = await exec('node3', [
          'sh',
          '-c',
          'hostname; ip -4 -o addr show dev eth0; getent hosts node0; echo shm: $(ls -A /dev/shm); echo tmp: $(ls -A /tmp); readlink /proc/self/ns/ipc; tc qdisc show dev eth0; echo sys: $(ls /sys/class/net)',
        ]);
        expect(look.code, look.stderr).toBe(0);
        // /tmp holds at most the checkout, kept when it lies under /tmp.
        const kept = relative('/tmp', realpathSync(repoRoot));
        const tmp = kept.startsWith('..') ? '' : ` ${kept.split(sep)[0]}`;
        expect(look.stdout).toMatch(
          new RegExp(`^node3\\n.* 10\\.99\\.0\\.4/16 [^]*^10\\.99\\.0\\.1 +node0\\nshm:\\ntmp:${tmp}\\nipc:\\[\\d+\\]\\nqdisc tbf .* rate 10Gbit`, 'm'),
        );
        expect(look.stdout).not.toContain(readlinkSync('/proc/self/ns/ipc'));
        // Its own sysfs: /sys/class/net lists its own interfaces (UCX reads them there), not the machine's.
        expect(look.stdout).toContain('\nsys: eth0 lo\n');

        const hostList = state.hosts.map((h) => `${h.name}:2`).join(',');
        const token = randomBytes(16).toString('hex');
        const rendezvous = ['-x', 'MASTER_ADDR=node0', '-x', 'MASTER_PORT=29500', '-x', `TOPOCOLL_TOKEN=${token}`, '-x', 'TMPDIR'];
        if (haveMpirun || mustRun) {
          const ompi = ['mpirun', '--allow-run-as-root', '--mca', 'plm_rsh_agent', AGENT, '--mca', 'plm_rsh_no_tree_spawn', '1', '--bind-to', 'core'];
          const where = await exec('node0', [...ompi, '--host', state.hosts.map((h) => h.name).join(','), '-np', '4', 'hostname']);
          expect(where.code, where.stderr).toBe(0);
          expect(where.stdout.split('\n').filter(Boolean).sort()).toEqual(['node0', 'node1', 'node2', 'node3']);
          const job = await exec('node0', [...ompi, '--host', hostList, '-np', '8', ...rendezvous, process.execPath, jobScript('collectives.mjs'), '--quick']);
          const log = `${job.stdout}${job.stderr}`;
          expect(job.code, log).toBe(0);
          for (let r = 0; r < 8; r++) expect(job.stdout, log).toMatch(new RegExp(`^rank ${r} ok \\d+$`, 'm'));
        }
        if (haveMpich || mustRun) {
          const where = await exec('node0', [
            'mpiexec.mpich',
            '-launcher',
            'ssh',
            '-launcher-exec',
            AGENT,
            '-hosts',
            state.hosts.map((h) => h.name).join(','),
            '-n',
            '4',
            'hostname',
          ]);
          expect(where.code, where.stderr).toBe(0);
          expect(where.stdout.split('\n').filter(Boolean).sort()).toEqual(['node0', 'node1', 'node2', 'node3']);
        }

        // The torchrun variables: MASTER_ADDR by name (the hosts' /etc/hosts), two ranks per host.
        const ranks = state.hosts.flatMap((h, k) =>
          [0, 1].map((j) =>
            exec(h.name, ['taskset', '-c', String(j), process.execPath, jobScript('hosts-check.mjs'), '--basic'], {
              RANK: String(2 * k + j),
              WORLD_SIZE: '8',
              MASTER_ADDR: 'node0',
              MASTER_PORT: '29501',
              TOPOCOLL_TOKEN: token,
            }),
          ),
        );
        const torchrun = await Promise.all(ranks);
        const log = torchrun.map((r, i) => `--- rank ${i}: exit ${r.code ?? r.signal}\n${r.stdout}${r.stderr}`).join('\n');
        torchrun.forEach((r, i) => {
          const host = state.hosts[i >> 1]!.name;
          expect(r.code, log).toBe(0);
          expect(r.stdout, log).toContain(`rank ${i} node ${host} localRank ${i & 1} localSize 2 hostname ${host}\n`);
          expect(r.stdout, log).toMatch(new RegExp(`^rank ${i} ok \\d+$`, 'm'));
        });
      } finally {
        const down = await topocoll(['cluster', 'down', '--name', name]);
        expect(down.code, down.stderr).toBe(0);
        expect(down.stdout).toContain(`cluster "${name}" down: 4 hosts and 3 switches removed`);
      }
      expect(leftovers(state, stateFile)).toEqual([]);
      expect(rootView()).toBe(before);
      console.log(`cluster.jobs.test.ts: up, 4 jobs, down: ${Math.round(performance.now() - t0)} ms`);
    },
    LIMIT_MS * 2,
  );

  it(
    'the keeper killed with SIGKILL: the cluster and what ran in its hosts go with it',
    async (ctx) => {
      if (skipOrFail(ctx)) return;
      const name = `k${process.pid}`;
      const stateFile = `${STATE_DIR}/cluster-${name}.json`;
      const before = rootView();
      // The keeper in the foreground is this test's child: its pid is the child's.
      const keeper = spawn(process.execPath, [MAIN, 'cluster', 'up', '--name', name, '--leaves', '1', '--hosts', '2', '--foreground'], {
        env: baseEnv(),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      keeper.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
      await new Promise<void>((resolve, reject) => {
        keeper.stdout.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          if (out.includes('SIGINT or SIGTERM takes it down')) resolve();
        });
        keeper.on('exit', (code) => reject(new Error(`cluster up exited (${code}): ${out}`)));
      });
      const state = readState(name);
      expect(state.keeper.pid).toBe(keeper.pid);
      // Processes that outlive the command that started them, in both hosts.
      for (const host of ['node0', 'node1']) {
        const r = await topocoll(['cluster', 'exec', '--name', name, host, '--', 'sh', '-c', 'sleep 600 >/dev/null 2>&1 & mkdir /dev/shm/x; echo started']);
        expect(r.stdout, r.stderr).toBe('started\n');
      }
      const exited = new Promise((resolve) => keeper.once('exit', resolve));
      keeper.kill('SIGKILL');
      await exited;
      expect(await eventually(() => leftovers(state, stateFile), 10_000)).toEqual([]);
      expect(rootView()).toBe(before);
      const status = await topocoll(['cluster', 'status', '--name', name]);
      expect(status.code).toBe(1);
      expect(status.stderr).toContain(`no cluster named "${name}" is up`);
    },
    LIMIT_MS,
  );
});
