import { describe, expect, it } from 'vitest';
import { expectNothingLeft, hostsForBlock, runAcrossHosts, transcript, type RankResult } from '../helpers/host-jobs.js';
import { jobScript, repoRoot } from '../helpers/jobs.js';

/**
 * The fault matrix (fault-matrix.jobs.test.ts) on 2 hosts made of namespaces, 2 ranks each, started
 * the torchrun way: the last rank (on host 1) fails in one way at one moment, and every other
 * rank — its neighbour on host 1 over shared memory, and both ranks of host 0 over TCP — must
 * end with the right error in bounded time, with nothing left in either host's /dev/shm or /tmp.
 * No launcher is there to tell anyone: the rendezvous (rank 0's thread), the links and the
 * watchdog do.
 */
const PER_HOST = [2, 2];
const RANKS = 4;
const VICTIM = RANKS - 1;
const CONFIG = `${repoRoot}test/jobs/fault-matrix.yaml`;
/** The SIGSTOP cells' (a 1 s watchdog: they wait for it). */
const STOP_CONFIG = `${repoRoot}test/jobs/fault-matrix-stop.yaml`;

type Fault = 'sigkill' | 'close' | 'return' | 'exit' | 'throw' | 'sigstop';
type When = 'start' | 'init' | 'small' | 'large' | 'configure';

const cells: [Fault, When][] = [
  ['sigkill', 'init'],
  ['exit', 'init'],
  ...(['sigkill', 'close', 'return', 'exit', 'throw', 'sigstop'] as Fault[]).flatMap((f) =>
    (['small', 'large', 'configure'] as When[]).map((w): [Fault, When] => [f, w]),
  ),
];

const expectedCode = (fault: Fault) => (fault === 'sigstop' ? 'ETIMEDOUT' : 'EPEERLOST');

function expectSurvivorsCaught(ranks: RankResult[], victim: number, code: string, withinMs: number, message?: RegExp): void {
  const log = transcript(ranks);
  for (const r of ranks) {
    if (r.rank === victim) continue;
    expect(r.signal, log).toBeNull();
    expect(r.code, log).toBe(3);
    const m = new RegExp(`^rank ${r.rank} caught (E[A-Z]+): (.*)$`, 'm').exec(r.stdout);
    expect(m?.[1], log).toBe(code);
    if (message) expect(m?.[2], log).toMatch(message);
    expect(r.ms, log).toBeLessThan(withinMs);
  }
}

describe('fault matrix across 2 namespace hosts × 2 ranks: every survivor reports the failure of the last rank', () => {
  const block = hostsForBlock(PER_HOST.length);

  for (const [fault, when] of cells) {
    it(`${fault} ${when === 'init' ? 'during init' : `in ${when} collectives`}`, async (ctx) => {
      const h = block.h;
      if (!h) return ctx.skip(block.skip);
      const job = await runAcrossHosts(h, PER_HOST, jobScript('faults.mjs'), [fault, when], {
        env: { TOPOCOLL_CONFIG: fault === 'sigstop' ? STOP_CONFIG : CONFIG },
        // A stopped victim stays stopped: it is killed once the survivors have reported it and
        // ended (at the latest once they had the time to).
        limitMs: (rank) => (rank === VICTIM && fault === 'sigstop' ? 6_000 : 30_000),
        killAfterTheOthers: (rank) => rank === VICTIM && fault === 'sigstop',
      });
      expect(job.ranks[VICTIM]!.signal, transcript(job.ranks)).toBe(fault === 'sigkill' || fault === 'sigstop' ? 'SIGKILL' : null);
      // Deaths and departures are reported at once; a stop after the 1 s watchdog.
      expectSurvivorsCaught(job.ranks, VICTIM, expectedCode(fault), fault === 'sigstop' ? 6_000 : 4_000);
      expectNothingLeft(h);
    }, 60_000);
  }

  it('a rank that never starts: rank 0 times out naming it after the init timeout (5 s), and stops the others', async (ctx) => {
    const h = block.h;
    if (!h) return ctx.skip(block.skip);
    const job = await runAcrossHosts(h, PER_HOST, jobScript('faults.mjs'), ['exit', 'start'], { env: { TOPOCOLL_CONFIG: CONFIG } });
    const missing = /rank\(s\) 3 of 4 did not arrive within 5000 ms/;
    expectSurvivorsCaught(
      job.ranks.filter((r) => r.rank === 0 || r.rank === VICTIM),
      VICTIM,
      'ETIMEDOUT',
      9_000,
      missing,
    );
    expectSurvivorsCaught(
      job.ranks.filter((r) => r.rank !== 0),
      VICTIM,
      'EPEERLOST',
      9_000,
      missing,
    );
    expectNothingLeft(h);
  }, 60_000);

  for (const [fault, when] of [
    ['sigkill', 'init'],
    ['sigkill', 'small'],
    ['exit', 'large'],
  ] as [Fault, When][]) {
    it(`rank 0, the rendezvous host: ${fault} ${when === 'init' ? 'during init' : `in ${when} collectives`}`, async (ctx) => {
      const h = block.h;
      if (!h) return ctx.skip(block.skip);
      const job = await runAcrossHosts(h, PER_HOST, jobScript('faults.mjs'), [fault, when], { env: { TOPOCOLL_CONFIG: CONFIG, FAULT_VICTIM: '0' } });
      expectSurvivorsCaught(job.ranks, 0, 'EPEERLOST', 4_000);
      expectNothingLeft(h);
    }, 60_000);
  }
});
