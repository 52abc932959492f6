import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { cpus, hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHosts, type HostRun, type Hosts, type HostsOptions } from '../helpers/hosts.js';
import { jobScript, repoRoot } from '../helpers/jobs.js';

/**
 * Jobs across "hosts" made of Linux namespaces (test/helpers/hosts.ts): every host has its own
 * address, host name, /dev/shm and /tmp, and the ranks find each other with the torchrun
 * convention (MASTER_ADDR = host 0's address), so node identity, addresses, TCP links and
 * per-node segments are exercised as on a cluster — not through `--nodes` emulation.
 */

/** Longest a job may take before it counts as hung (every rank is then killed). */
const JOB_LIMIT_MS = 90_000;

interface RankResult extends HostRun {
  rank: number;
  host: number;
}

/** Variables of the surrounding test run that would make init() detect another launcher. */
const LAUNCHER_VARS = /^(TOPOCOLL_|OMPI_|PMIX_|SLURM|RANK$|WORLD_SIZE$|LOCAL_RANK$|MASTER_)/;

/**
 * Starts `node script args` for every rank: host k runs ranks in a block of perHost[k], local
 * rank j bound to CPU (rank mod CPUs) so a host's ranks sit on different cores as a launcher
 * would place them.
 */
async function runAcrossHosts(h: Hosts, perHost: number[], script: string, args: string[] = [], masterAddr = h.hosts[0]!.address): Promise<{ ranks: RankResult[]; ms: number }> {
  const size = perHost.reduce((a, b) => a + b, 0);
  const port = await h.freePort(0);
  const token = randomBytes(16).toString('hex');
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !LAUNCHER_VARS.test(k)));
  const t0 = performance.now();
  const runs: Promise<RankResult>[] = [];
  let rank = 0;
  perHost.forEach((count, host) => {
    for (let j = 0; j < count; j++, rank++) {
      const r = rank;
      const env = { ...base, RANK: String(r), WORLD_SIZE: String(size), MASTER_ADDR: masterAddr, MASTER_PORT: String(port), TOPOCOLL_TOKEN: token };
      runs.push(
        h.run(host, process.execPath, [script, ...args], { env, cwd: repoRoot, cpus: String(r % cpus().length), timeoutMs: JOB_LIMIT_MS }).then((run) => ({ ...run, rank: r, host })),
      );
    }
  });
  const ranks = await Promise.all(runs);
  return { ranks, ms: performance.now() - t0 };
}

/** Everything a failed job printed, rank by rank, for the assertion message. */
function transcript(ranks: RankResult[]): string {
  return ranks.map((r) => `--- rank ${r.rank} (host ${r.host}) exit ${r.code ?? r.signal} after ${Math.round(r.ms)} ms\n${r.stdout}${r.stderr}`).join('\n');
}

function expectJobOk(h: Hosts, perHost: number[], job: { ranks: RankResult[]; ms: number }): void {
  const log = transcript(job.ranks);
  for (const r of job.ranks) {
    expect(r.signal, log).toBeNull(); // not killed by the hang limit
    expect(r.code, log).toBe(0);
    expect(r.stdout, log).toMatch(new RegExp(`^rank ${r.rank} ok \\d+$`, 'm'));
    const m = new RegExp(`^rank ${r.rank} node (\\S+) localRank (\\d+) localSize (\\d+) hostname (\\S+)$`, 'm').exec(r.stdout);
    expect(m, log).not.toBeNull();
    const [, node, localRank, localSize, host] = m!;
    // The node is the namespace's host name, not the machine's; a host's ranks share it.
    expect(host).toBe(h.hosts[r.host]!.name);
    expect(node).toBe(h.hosts[r.host]!.name);
    expect(node).not.toBe(hostname());
    expect(Number(localSize)).toBe(perHost[r.host]);
    expect(Number(localRank)).toBe(r.rank - perHost.slice(0, r.host).reduce((a, b) => a + b, 0));
  }
  expect(job.ms).toBeLessThan(JOB_LIMIT_MS);
}

/** What a job left in the hosts' private /dev/shm and /tmp: nothing, once it has exited. */
function expectNothingLeft(h: Hosts): void {
  for (const host of h.hosts) {
    expect(h.listShm(host.index), `/dev/shm of ${host.name}`).toEqual([]);
    expect(h.listTmp(host.index), `/tmp of ${host.name}`).toEqual([]);
  }
}

/** The test's own network interfaces (the root namespace's, when the test runs there). */
function rootLinks(): string {
  return readdirSync('/sys/class/net').sort().join(' ');
}

/**
 * Hosts for the tests of one describe block: made before them, destroyed after them (and then
 * no namespace of theirs may remain). `skip` is set instead when the sandbox refuses namespaces.
 */
function hostsForBlock(n: number, opts: HostsOptions = {}): { h?: Hosts; skip: string; linksBefore: string } {
  const block: { h?: Hosts; skip: string; linksBefore: string } = { skip: '', linksBefore: '' };
  beforeAll(async () => {
    block.linksBefore = rootLinks();
    const made = await createHosts(n, opts);
    if ('skip' in made) {
      block.skip = made.skip;
      console.warn(`hosts.test.ts: skipped: ${made.skip}`);
    } else block.h = made;
  }, 60_000);
  afterAll(async () => {
    const h = block.h;
    if (!h) return;
    await h.destroy();
    const left = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout;
    expect(left).not.toContain(h.id);
  }, 60_000);
  return block;
}

for (const perHost of [
  [2, 2],
  [1, 1, 1],
]) {
  const shape = `${perHost.length} hosts × ${perHost.join('+')} ranks`;
  describe(`a job across ${shape} made of namespaces`, () => {
    const block = hostsForBlock(perHost.length);

    it('the hosts have their own names, addresses, /dev/shm and /tmp, and reach each other only on the bridge', async (ctx) => {
      const h = block.h;
      if (!h) return ctx.skip(block.skip);
      // The root namespace gained no interface.
      expect(rootLinks()).toBe(block.linksBefore);
      for (const host of h.hosts) {
        const r = await h.run(host.index, 'sh', ['-c', 'hostname; ip -4 -o addr show dev eth0; ls -A /dev/shm /tmp']);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toContain(`${host.name}\n`);
        expect(r.stdout).toContain(` ${host.address}/24 `);
        expect(host.name).not.toBe(hostname());
      }
      // Host 1 (or 0 when alone) connects to host 0's address and sees its own as the source.
      const port = await h.freePort(0);
      const server = h.spawn(0, process.execPath, ['-e', `require('net').createServer((s)=>s.end(require('os').hostname())).listen(${port},'0.0.0.0',()=>console.log('up'))`]);
      await new Promise<void>((resolve) => server.stdout!.once('data', () => resolve()));
      const client = h.hosts.length - 1;
      const c = await h.run(client, process.execPath, [
        '-e',
        `const s=require('net').connect(${port},'${h.hosts[0]!.address}');let d='';s.on('data',(x)=>d+=x);s.on('end',()=>console.log(s.localAddress,d))`,
      ]);
      server.kill('SIGKILL');
      expect(c.stdout.trim()).toBe(`${h.hosts[client]!.address} ${h.hosts[0]!.name}`);
      expectNothingLeft(h);
    });

    it('ranks find each other through MASTER_ADDR, each host is one node, init/bcast/allreduce/barrier/close work, nothing is left behind', async (ctx) => {
      const h = block.h;
      if (!h) return ctx.skip(block.skip);
      const job = await runAcrossHosts(h, perHost, jobScript('hosts-check.mjs'), ['--basic']);
      console.log(`hosts.test.ts: ${shape}, basic job: ${Math.round(job.ms)} ms`);
      expectJobOk(h, perHost, job);
      expectNothingLeft(h);
    }, JOB_LIMIT_MS + 30_000);

    it('launch-check.mjs (the job every launcher is checked with) passes across the hosts', async (ctx) => {
      const h = block.h;
      if (!h) return ctx.skip(block.skip);
      const job = await runAcrossHosts(h, perHost, jobScript('launch-check.mjs'));
      console.log(`hosts.test.ts: ${shape}, launch-check: ${Math.round(job.ms)} ms`);
      const log = transcript(job.ranks);
      for (const r of job.ranks) {
        expect(r.signal, log).toBeNull();
        expect(r.code, log).toBe(0);
        expect(r.stdout.trim(), log).toBe(`rank ${r.rank} ok`);
      }
      expectNothingLeft(h);
    }, JOB_LIMIT_MS + 30_000);

    it('every collective, every root, up to 1 MiB, across the hosts', async (ctx) => {
      const h = block.h;
      if (!h) return ctx.skip(block.skip);
      const job = await runAcrossHosts(h, perHost, jobScript('hosts-check.mjs'));
      console.log(`hosts.test.ts: ${shape}, every collective: ${Math.round(job.ms)} ms`);
      expectJobOk(h, perHost, job);
      expectNothingLeft(h);
    }, JOB_LIMIT_MS + 30_000);
  });
}

describe('MASTER_ADDR is host 0\'s name, resolved through /etc/hosts where each host\'s own name is 127.0.1.1 (as Debian writes it)', () => {
  const perHost = [2, 2];
  const block = hostsForBlock(perHost.length, { etcHosts: true });

  it('ranks on host 0 reach the rendezvous over loopback, yet every link between hosts works', async (ctx) => {
    const h = block.h;
    if (!h) return ctx.skip(block.skip);
    const seen = async (i: number) => (await h.run(i, 'getent', ['hosts', h.hosts[0]!.name])).stdout.split(/\s/)[0];
    expect(await seen(0)).toBe('127.0.1.1');
    expect(await seen(1)).toBe(h.hosts[0]!.address);
    const job = await runAcrossHosts(h, perHost, jobScript('hosts-check.mjs'), ['--basic'], h.hosts[0]!.name);
    console.log(`hosts.test.ts: 2 hosts × 2+2 ranks, MASTER_ADDR by name, basic job: ${Math.round(job.ms)} ms`);
    expectJobOk(h, perHost, job);
    expectNothingLeft(h);
  }, JOB_LIMIT_MS + 30_000);
});
