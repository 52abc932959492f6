import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { afterAll, beforeAll, expect } from 'vitest';
import { createHosts, type HostRun, type Hosts, type HostsOptions } from './hosts.js';
import { repoRoot } from './jobs.js';

/** Jobs across namespace hosts (hosts.ts) started the torchrun way: RANK, WORLD_SIZE, MASTER_ADDR = host 0. */

/** Longest a job may take before it counts as hung (every rank is then killed). */
export const JOB_LIMIT_MS = 90_000;

export interface RankResult extends HostRun {
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
export interface AcrossHostsOptions {
  /** MASTER_ADDR (default host 0's address). */
  masterAddr?: string;
  /** Variables added to every rank's environment. */
  env?: Record<string, string>;
  /** A rank still running after this many ms is killed (default JOB_LIMIT_MS). */
  limitMs?: (rank: number) => number;
  /**
   * Ranks killed as soon as every other rank has ended (or at their limit): a rank that stopped
   * itself (SIGSTOP), which would else wait out its limit after the others reported it.
   */
  killAfterTheOthers?: (rank: number) => boolean;
}

export async function runAcrossHosts(
  h: Hosts,
  perHost: number[],
  script: string,
  args: string[] = [],
  opts: AcrossHostsOptions = {},
): Promise<{ ranks: RankResult[]; ms: number }> {
  const masterAddr = opts.masterAddr ?? h.hosts[0]!.address;
  const size = perHost.reduce((a, b) => a + b, 0);
  const port = await h.freePort(0);
  const token = randomBytes(16).toString('hex');
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !LAUNCHER_VARS.test(k)));
  const t0 = performance.now();
  const runs: Promise<RankResult>[] = [];
  let othersEnded = () => {};
  const theOthersEnded = new Promise<void>((resolve) => (othersEnded = resolve));
  let rank = 0;
  perHost.forEach((count, host) => {
    for (let j = 0; j < count; j++, rank++) {
      const r = rank;
      const env = {
        ...base,
        RANK: String(r),
        WORLD_SIZE: String(size),
        MASTER_ADDR: masterAddr,
        MASTER_PORT: String(port),
        TOPOCOLL_TOKEN: token,
        ...opts.env,
      };
      runs.push(
        h
          .run(host, process.execPath, [script, ...args], {
            env,
            cwd: repoRoot,
            cpus: String(r % cpus().length),
            timeoutMs: opts.limitMs?.(r) ?? JOB_LIMIT_MS,
            killWhen: opts.killAfterTheOthers?.(r) ? theOthersEnded : undefined,
          })
          .then((run) => ({ ...run, rank: r, host })),
      );
    }
  });
  void Promise.allSettled(runs.filter((_, r) => !opts.killAfterTheOthers?.(r))).then(othersEnded);
  const ranks = await Promise.all(runs);
  return { ranks, ms: performance.now() - t0 };
}

/** Everything a failed job printed, rank by rank, for the assertion message. */
export function transcript(ranks: RankResult[]): string {
  return ranks.map((r) => `--- rank ${r.rank} (host ${r.host}) exit ${r.code ?? r.signal} after ${Math.round(r.ms)} ms\n${r.stdout}${r.stderr}`).join('\n');
}

/** The test's own network interfaces (the root namespace's, when the test runs there). */
export function rootLinks(): string {
  return readdirSync('/sys/class/net').sort().join(' ');
}

/**
 * Hosts for the tests of one describe block: made before them, destroyed after them (and then
 * no namespace of theirs may remain). `skip` is set instead when the sandbox refuses namespaces.
 */
export function hostsForBlock(n: number, opts: HostsOptions = {}): { h?: Hosts; skip: string; linksBefore: string } {
  const block: { h?: Hosts; skip: string; linksBefore: string } = { skip: '', linksBefore: '' };
  beforeAll(async () => {
    block.linksBefore = rootLinks();
    const made = await createHosts(n, opts);
    if ('skip' in made) {
      // CI makes hosts (it runs as root): there a skip would hide the tests, so it fails instead.
      if (process.env.TOPOCOLL_REQUIRE_HOSTS === '1') throw new Error(`hosts made of namespaces are required here: ${made.skip}`);
      block.skip = made.skip;
      console.warn(`hosts.jobs.test.ts: skipped: ${made.skip}`);
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

/** What a job left in the hosts' private /dev/shm and /tmp: nothing, once it has exited. */
export function expectNothingLeft(h: Hosts): void {
  for (const host of h.hosts) {
    expect(h.listShm(host.index), `/dev/shm of ${host.name}`).toEqual([]);
    expect(h.listTmp(host.index), `/tmp of ${host.name}`).toEqual([]);
  }
}
