import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { jobScript, leftoverSegments, repoRoot, runJob } from '../helpers/jobs.js';
import { runTorchrunJob } from '../helpers/torchrun.js';

/**
 * The fault matrix: the last rank of a job fails in one way at one moment, and every other rank
 * must end with the right error (not hang, not succeed), in bounded time, leaving nothing in
 * /dev/shm or the temporary directory. Ranks are test/jobs/faults.mjs. The same cells across
 * namespace hosts: hosts-faults.jobs.test.ts.
 */
const RANKS = 4;
// A short watchdog for the SIGSTOP cells; the others never wait that long. The SIGSTOP cells wait
// for it, so theirs is shorter still (1 s).
const configOf = (fault: Fault) => `${repoRoot}test/jobs/${fault === 'sigstop' ? 'fault-matrix-stop' : 'fault-matrix'}.yaml`;

type Fault = 'sigkill' | 'close' | 'return' | 'exit' | 'throw' | 'sigstop';
type When = 'init' | 'small' | 'large' | 'configure';

const cells: [Fault, When][] = [
  ['sigkill', 'init'],
  ['exit', 'init'],
  ...(['sigkill', 'close', 'return', 'exit', 'throw', 'sigstop'] as Fault[]).flatMap((f) =>
    (['small', 'large', 'configure'] as When[]).map((w): [Fault, When] => [f, w]),
  ),
];

/** What a survivor must report: a stopped peer is only noticed by the watchdog. */
const expectedCode = (fault: Fault) => (fault === 'sigstop' ? 'ETIMEDOUT' : 'EPEERLOST');

function caughtCodes(stdout: string): Map<number, string> {
  const caught = new Map<number, string>();
  for (const m of stdout.matchAll(/^rank (\d+) caught (E[A-Z]+): /gm)) caught.set(Number(m[1]), m[2]!);
  return caught;
}

/** Rendezvous files of this user left in the temporary directory. */
function leftoverRendezvousFiles(): string[] {
  const uid = process.getuid?.() ?? 0;
  return readdirSync(tmpdir()).filter((n) => n.startsWith(`topocoll-${uid}-`));
}

const survivors = Array.from({ length: RANKS - 1 }, (_, r) => r);

describe('fault matrix under topocoll run: every survivor reports the failure of the last rank', () => {
  for (const [where, placement] of [
    ['1 node', ['--nodes', '1']],
    ['2 emulated nodes', ['--nodes', '2']],
  ] as const) {
    for (const [fault, when] of cells) {
      it(`${fault} ${when === 'init' ? 'during init' : `in ${when} collectives`}, ${where}`, async () => {
        const started = Date.now();
        const r = runJob(['-n', String(RANKS), ...placement, '--config', configOf(fault), '--timeout', '5', jobScript('faults.mjs'), fault, when], 60_000);
        const seconds = (Date.now() - started) / 1000;
        expect(r.signal).toBeNull(); // the launcher ended by itself
        expect(r.status).not.toBe(0);
        const caught = caughtCodes(r.stdout);
        expect(
          [...caught.keys()].sort((a, b) => a - b),
          r.stdout + r.stderr,
        ).toEqual(survivors);
        for (const code of caught.values()) expect(code, r.stdout).toBe(expectedCode(fault));
        expect(r.stdout).not.toMatch(/finished/);
        // Deaths and departures are reported at once; a stop after the 1 s watchdog.
        expect(seconds).toBeLessThan(fault === 'sigstop' ? 15 : 10);
        expect(await leftoverSegments()).toEqual([]);
        expect(leftoverRendezvousFiles()).toEqual([]);
      });
    }
  }
});

describe('fault matrix with the torchrun variables (no launcher to tell anyone)', () => {
  for (const [fault, when] of cells.filter(([, w]) => w !== 'init')) {
    it(`${fault} in ${when} collectives`, async () => {
      const started = Date.now();
      const ranks = await runTorchrunJob(RANKS, jobScript('faults.mjs'), [fault, when], { env: { TOPOCOLL_CONFIG: configOf(fault) }, timeoutMs: 30_000 });
      const seconds = (Date.now() - started) / 1000;
      const all = ranks.map((o) => o.stdout + o.stderr).join('');
      for (const rank of survivors) {
        expect(ranks[rank]!.code, all).toBe(3);
        expect(caughtCodes(ranks[rank]!.stdout).get(rank), all).toBe(expectedCode(fault));
      }
      expect(seconds).toBeLessThan(fault === 'sigstop' ? 15 : 10);
      expect(await leftoverSegments()).toEqual([]);
      expect(leftoverRendezvousFiles()).toEqual([]);
    });
  }
});
