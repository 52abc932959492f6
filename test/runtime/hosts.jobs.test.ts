import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { expectNothingLeft, hostsForBlock, JOB_LIMIT_MS, rootLinks, runAcrossHosts, transcript, type RankResult } from '../helpers/host-jobs.js';
import type { Hosts } from '../helpers/hosts.js';
import { jobScript, runJob } from '../helpers/jobs.js';

/**
 * Jobs across "hosts" made of Linux namespaces (test/helpers/hosts.ts): every host has its own
 * address, host name, /dev/shm and /tmp, and the ranks find each other with the torchrun
 * convention (MASTER_ADDR = host 0's address), so node identity, addresses, TCP links and
 * per-node segments are exercised as on a cluster — not through `--nodes` emulation.
 */

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
      const server = h.spawn(0, process.execPath, [
        '-e',
        `require('net').createServer((s)=>s.end(require('os').hostname())).listen(${port},'0.0.0.0',()=>console.log('up'))`,
      ]);
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

    it(
      'ranks find each other through MASTER_ADDR, each host is one node, init/bcast/allreduce/barrier/close work, nothing is left behind',
      async (ctx) => {
        const h = block.h;
        if (!h) return ctx.skip(block.skip);
        const job = await runAcrossHosts(h, perHost, jobScript('hosts-check.mjs'), ['--basic']);
        console.log(`hosts.jobs.test.ts: ${shape}, basic job: ${Math.round(job.ms)} ms`);
        expectJobOk(h, perHost, job);
        expectNothingLeft(h);
      },
      JOB_LIMIT_MS + 30_000,
    );

    it(
      'launch-check.mjs (the job every launcher is checked with) passes across the hosts',
      async (ctx) => {
        const h = block.h;
        if (!h) return ctx.skip(block.skip);
        const job = await runAcrossHosts(h, perHost, jobScript('launch-check.mjs'));
        console.log(`hosts.jobs.test.ts: ${shape}, launch-check: ${Math.round(job.ms)} ms`);
        const log = transcript(job.ranks);
        for (const r of job.ranks) {
          expect(r.signal, log).toBeNull();
          expect(r.code, log).toBe(0);
          expect(r.stdout.trim(), log).toBe(`rank ${r.rank} ok`);
        }
        expectNothingLeft(h);
      },
      JOB_LIMIT_MS + 30_000,
    );

    it(
      'every collective, every root, up to 1 MiB, across the hosts',
      async (ctx) => {
        const h = block.h;
        if (!h) return ctx.skip(block.skip);
        const job = await runAcrossHosts(h, perHost, jobScript('hosts-check.mjs'));
        console.log(`hosts.jobs.test.ts: ${shape}, every collective: ${Math.round(job.ms)} ms`);
        expectJobOk(h, perHost, job);
        expectNothingLeft(h);
      },
      JOB_LIMIT_MS + 30_000,
    );
  });
}

describe('4 hosts × 2 ranks on this machine: the ranks know the hosts share its cores', () => {
  const block = hostsForBlock(4);
  const slowest = (lines: string[]) =>
    Math.max(
      ...lines
        .map((l) => /^rank \d+ allreduce8 (\S+)$/.exec(l))
        .filter((m) => m !== null)
        .map((m) => Number(m![1])),
    );

  it(
    "the 8-byte allreduce within 10× of the same job's on 4 emulated nodes of one host (each host's ranks once took the cores for their own: 30×)",
    async (ctx) => {
      const h = block.h;
      if (!h) return ctx.skip(block.skip);
      const perHost = [2, 2, 2, 2];
      const job = await runAcrossHosts(h, perHost, jobScript('allreduce-latency.mjs'));
      const log = transcript(job.ranks);
      for (const r of job.ranks) expect(r.stdout, log).toMatch(new RegExp(`^rank ${r.rank} ok$`, 'm'));
      const acrossHosts = slowest(job.ranks.flatMap((r) => r.stdout.split('\n')));
      const emulated = runJob(['-n', '8', '--nodes', '4', jobScript('allreduce-latency.mjs')]);
      expect(emulated.status, emulated.stderr).toBe(0);
      const oneHost = slowest(emulated.lines);
      console.log(`hosts.jobs.test.ts: 8-byte allreduce, 4 hosts × 2 ranks ${acrossHosts} µs, 4 emulated nodes ${oneHost} µs`);
      expect(acrossHosts).toBeLessThan(10 * oneHost);
      expectNothingLeft(h);
    },
    JOB_LIMIT_MS + 30_000,
  );
});

describe("MASTER_ADDR is host 0's name, resolved through /etc/hosts where each host's own name is 127.0.1.1 (as Debian writes it)", () => {
  const perHost = [2, 2];
  const block = hostsForBlock(perHost.length, { etcHosts: true });

  it(
    'ranks on host 0 reach the rendezvous over loopback, yet every link between hosts works',
    async (ctx) => {
      const h = block.h;
      if (!h) return ctx.skip(block.skip);
      const seen = async (i: number) => (await h.run(i, 'getent', ['hosts', h.hosts[0]!.name])).stdout.split(/\s/)[0];
      expect(await seen(0)).toBe('127.0.1.1');
      expect(await seen(1)).toBe(h.hosts[0]!.address);
      const job = await runAcrossHosts(h, perHost, jobScript('hosts-check.mjs'), ['--basic'], { masterAddr: h.hosts[0]!.name });
      console.log(`hosts.jobs.test.ts: 2 hosts × 2+2 ranks, MASTER_ADDR by name, basic job: ${Math.round(job.ms)} ms`);
      expectJobOk(h, perHost, job);
      expectNothingLeft(h);
    },
    JOB_LIMIT_MS + 30_000,
  );
});
