import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configFile, jobScript, leftoverSegments, okRanks, runJob } from '../helpers/jobs.js';
import { tempDir } from '../helpers/temp.js';

/**
 * Communicators made with createCommunicator over a host point-to-point layer written in
 * JavaScript: the Unix-socket test layer (test/jobs/socket-layer.mjs), ranks started by
 * `topocoll run` on 1 to 3 emulated nodes. Ranks of one node share memory; between nodes every
 * message goes through the layer's send/recv.
 */

/** Runs `topocoll run <args>` with the layer's sockets in a fresh directory (TOPOCOLL_P2P_DIR). */
function runOverLayer(args: string[], timeoutMs = 60_000) {
  const dir = tempDir('topocoll-p2p-');
  process.env.TOPOCOLL_P2P_DIR = dir;
  try {
    return { ...runJob(args, timeoutMs), dir };
  } finally {
    delete process.env.TOPOCOLL_P2P_DIR;
  }
}

describe('every collective through createCommunicator over a JavaScript layer (test/jobs/collectives.mjs --layer socket)', () => {
  const job = jobScript('collectives.mjs');
  // Across nodes the job runs the Promise twin of every blocking call (those are refused there:
  // it checks barrierSync() and configure() throw EINVAL) and skips user operators and the mix
  // of Sync and Promise calls; on one node it runs exactly what it runs after init().
  for (const [name, args] of [
    ['1 rank', ['-n', '1', job, '--layer', 'socket', '--big']],
    ['3 ranks on one node (blocking calls work)', ['-n', '3', job, '--layer', 'socket']],
    ['4 ranks on 2 emulated nodes, up to 1 MiB + 3 bytes', ['-n', '4', '--nodes', '2', job, '--layer', 'socket', '--big']],
    ['7 ranks on 3 emulated nodes', ['-n', '7', '--nodes', '3', job, '--layer', 'socket']],
  ] as const) {
    it(name, async () => {
      const n = Number(args[1]);
      const r = runOverLayer([...args]);
      expect(r.stderr).not.toMatch(/Error/);
      expect(r.signal).toBeNull();
      expect(r.status).toBe(0);
      expect(okRanks(r.lines)).toEqual(Array.from({ length: n }, (_, i) => i));
      expect(await leftoverSegments()).toEqual([]);
      // Every rank's layer removed its socket file.
      expect(readdirSync(r.dir)).toEqual([]);
    });
  }
});

describe('a rank closes right after a collective that ends with its sends (test/jobs/close-after-sends.mjs)', () => {
  // Each job runs 12 rounds, each a fresh layer and communicator: gather to 0, reduceScatterBlock,
  // bcast from 0, then comm.close() and at once layer.close(); the last round ends the process
  // right after comm.close(). Before close() handed the bridge's queued sends to the layer, a
  // bcast's root lost them (its peers: EPEERLOST 'rank 0 closed its connection', in round 0 of
  // every job), and the root aborted at exit (terminate after Napi::Error in the bridge's
  // thread-safe function; or SIGABRT releasing a function the teardown had freed).
  for (const [name, launcher] of [
    ['3 ranks on 3 emulated nodes', ['-n', '3', '--nodes', '3']],
    ['4 ranks on 2 emulated nodes', ['-n', '4', '--nodes', '2']],
  ] as const) {
    it(`${name}: every message arrives, no rank crashes`, async () => {
      const n = Number(launcher[1]);
      const r = runOverLayer(['--timeout', '5', ...launcher, jobScript('close-after-sends.mjs'), '--rounds', '12']);
      expect(r.stderr).not.toMatch(/Error|terminate|SIG/);
      expect(r.signal).toBeNull();
      expect(r.status).toBe(0);
      expect(okRanks(r.lines)).toEqual(Array.from({ length: n }, (_, i) => i));
      expect(await leftoverSegments()).toEqual([]);
    });
  }
});

/** What one rank of test/jobs/p2p-faults.mjs printed. */
interface Outcome {
  layer?: { sent: number; dropped: number; rejected: number; overtaken: number };
  caught?: { code: string; call: number; ms: number; message: string };
  ok?: number;
  other: string[];
}

/** Runs test/jobs/p2p-faults.mjs: `launcher` are the launcher's options, `job` the job's arguments. */
function runFaults(launcher: readonly string[], job: readonly string[]) {
  // --timeout 5: the survivors of a failed rank get 5 + 2 s to report before the launcher stops them.
  return runOverLayer(['--timeout', '5', ...launcher, jobScript('p2p-faults.mjs'), ...job]);
}

function outcomes(stdout: string): Map<number, Outcome> {
  const byRank = new Map<number, Outcome>();
  const of = (rank: number) => {
    let o = byRank.get(rank);
    if (o === undefined) byRank.set(rank, (o = { other: [] }));
    return o;
  };
  for (const line of stdout.split('\n').filter((l) => l !== '')) {
    const layer = /^rank (\d+) layer tag 0 sent (\d+) dropped (\d+) rejected (\d+); (\d+) messages received overtook others$/.exec(line);
    const caught = /^rank (\d+) caught (\S+) in call (\d+) after (\d+) ms: (.*)$/.exec(line);
    const ok = /^rank (\d+) ok (\d+)$/.exec(line);
    if (layer) of(Number(layer[1])).layer = { sent: Number(layer[2]), dropped: Number(layer[3]), rejected: Number(layer[4]), overtaken: Number(layer[5]) };
    else if (caught) of(Number(caught[1])).caught = { code: caught[2]!, call: Number(caught[3]), ms: Number(caught[4]), message: caught[5]! };
    else if (ok) of(Number(ok[1])).ok = Number(ok[2]);
    else {
      const rank = /^rank (\d+) /.exec(line);
      of(rank ? Number(rank[1]) : -1).other.push(line);
    }
  }
  return byRank;
}

const allRanks = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Rank-sorted list of the ranks in `m`. */
const ranksOf = (m: Map<number, Outcome>) => [...m.keys()].sort((a, b) => a - b);

/**
 * Every one of `ranks` (and no other) ended with a TopocollError of one of `codes`, its failing
 * call took less than `withinMs`, nothing else was printed (no wrong result, no hang, no rank
 * that finished).
 */
function expectEveryRankFailed(byRank: Map<number, Outcome>, ranks: number[], codes: string[], withinMs: number) {
  expect(ranksOf(byRank)).toEqual(ranks);
  for (const [rank, o] of byRank) {
    expect(o.other, `rank ${rank}`).toEqual([]);
    expect(o.ok, `rank ${rank}`).toBeUndefined();
    expect(o.caught, `rank ${rank}`).toBeDefined();
    expect(codes, `rank ${rank}: ${o.caught!.code}: ${o.caught!.message}`).toContain(o.caught!.code);
    expect(o.caught!.ms, `rank ${rank}`).toBeLessThan(withinMs);
    expect(o.layer, `rank ${rank}`).toBeDefined();
  }
}

describe('faults of the layer end every rank with an error: never a hang, never wrong data (test/jobs/p2p-faults.mjs)', () => {
  // The watchdog at 2 s: a message the layer lost is noticed by nobody else. Made when a test
  // runs: a file whose tests a -t filter skips runs no hooks, so its temporary files would stay.
  const shortWatchdog = () => ['--config', configFile('timeouts: { collectiveMs: 2000 }\n')];
  // Rank 2 leads node1 of 4 ranks on 2 emulated nodes: its messages on tag 0 (the first
  // communicator's collectives) go to rank 0, node0's leader, and it receives from rank 0.
  const nodes2 = ['-n', '4', '--nodes', '2'];

  it('(a) rank 2 drops its messages on the collectives tag after 30: every rank ETIMEDOUT or EPEERLOST within the watchdog', async () => {
    const r = runFaults([...shortWatchdog(), ...nodes2], ['drop', '2', '30']);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(3);
    const byRank = outcomes(r.stdout);
    expectEveryRankFailed(byRank, allRanks(4), ['ETIMEDOUT', 'EPEERLOST'], 2000 + 3000);
    expect(byRank.get(2)!.layer!.dropped).toBeGreaterThan(0);
    // What ends them is the watchdog of whichever rank waited longest (a leader waiting on the
    // other over the layer, or a rank waiting on its leader), passed on as an abort; a rank that
    // waited on the other leader may also see it close its connection once that one gave up.
    const messages = [...byRank.values()].map((o) => o.caught!.message);
    expect(messages.join('\n')).toMatch(/did not complete within 2000 ms \(timeouts\.collectiveMs\) on rank \d, which was waiting on rank \d/);
    for (const [rank, o] of byRank) {
      const { code, message } = o.caught!;
      if (code === 'ETIMEDOUT') expect(message, `rank ${rank}`).toMatch(/did not complete within 2000 ms|stopped the collective \(ETIMEDOUT there\)/);
      else
        expect(message, `rank ${rank}`).toMatch(
          /receiving from rank [02] \(tag 0\): the layer's recv failed: rank [02] closed its connection|stopped the collective \(EPEERLOST there\)/,
        );
    }
    // A wait on a rank of the other node names the layer's tag; a wait on a rank of its own does not.
    const node = (r: number) => Math.floor(r / 2);
    for (const m of messages.join('\n').matchAll(/on rank (\d), which was waiting on rank (\d)( \(tag 0 of the point-to-point layer\))?/g)) {
      expect(m[3] !== undefined, m[0]).toBe(node(Number(m[1])) !== node(Number(m[2])));
    }
    expect(await leftoverSegments()).toEqual([]);
    expect(readdirSync(r.dir)).toEqual([]);
  });

  describe('(b) rank 2 has its sends on the collectives tag rejected after 30', () => {
    let run: { r: ReturnType<typeof runFaults>; byRank: Map<number, Outcome> } | undefined;
    const once = () => {
      if (run === undefined) {
        const r = runFaults([...shortWatchdog(), ...nodes2], ['reject', '2', '30']);
        run = { r, byRank: outcomes(r.stdout) };
      }
      return run;
    };

    it('every rank ends with an error within the watchdog', async () => {
      const { r, byRank } = once();
      expect(r.signal).toBeNull();
      expect(r.status).toBe(3);
      expectEveryRankFailed(byRank, allRanks(4), ['ETIMEDOUT', 'EPEERLOST'], 2000 + 3000);
      expect(byRank.get(2)!.layer!.rejected).toBeGreaterThan(0);
      expect(await leftoverSegments()).toEqual([]);
      expect(readdirSync(r.dir)).toEqual([]);
    });

    // A send the layer rejects fails this rank at its next send or wait (P2PLinks keeps the
    // first failed send), not by the watchdog: its peers would wait for that message in vain.
    it('the failing rank gets EPEERLOST at once, naming the peer (rank 0) and the tag', () => {
      const { byRank } = once();
      const failing = byRank.get(2)!.caught!;
      expect(failing.code).toBe('EPEERLOST');
      expect(failing.message).toMatch(/rank 0 \(tag 0\)/);
      expect(failing.message).toMatch(/injected failure of send #\d+ on tag 0 to rank 0/);
      expect(failing.ms).toBeLessThan(1000);
    });
  });

  it('(c) every message delayed at random (tags overtake each other), two communicators at once: every result right', async () => {
    const r = runFaults(nodes2, ['delay', '3']);
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(0);
    const byRank = outcomes(r.stdout);
    expect(ranksOf(byRank)).toEqual(allRanks(4));
    for (const [rank, o] of byRank) {
      expect(o.other, `rank ${rank}`).toEqual([]);
      expect(o.caught, `rank ${rank}`).toBeUndefined();
      // 60 calls on each of two communicators; reduce results are checked at the root only.
      expect(o.ok, `rank ${rank}`).toBeGreaterThan(90);
    }
    // The delays did reorder: the leaders received messages after later ones of their sender.
    expect(byRank.get(0)!.layer!.overtaken + byRank.get(2)!.layer!.overtaken).toBeGreaterThan(0);
    expect(await leftoverSegments()).toEqual([]);
    expect(readdirSync(r.dir)).toEqual([]);
  });

  for (const [name, launcher, job, victim, n] of [
    // Node1's leader dies instead of sending its 31st message to node0's leader (in call 15, a
    // 560 KB allreduce sent in 32 KiB segments: the body of a message whose header it sent):
    // node0 learns it from the layer (its connection closed), node1's other rank from its pid.
    ['(d) rank 2, node1 leader, SIGKILLed by its layer in the middle of a collective (4 ranks, 2 nodes)', nodes2, ['kill', '2', '30'], 2, 4],
    // A rank that sends nothing over the layer dies after starting a Promise collective: its node
    // leader aborts and tells the other nodes over the layer.
    ['(d) rank 5, not a leader, SIGKILLs itself in its 13th call (6 ranks, 3 nodes)', ['-n', '6', '--nodes', '3'], ['die', '5', '12'], 5, 6],
  ] as const) {
    it(`${name}: every survivor EPEERLOST at once, the launcher reports the death`, async () => {
      const r = runFaults(launcher, job);
      expect(r.signal).toBeNull();
      expect(r.status).toBe(128 + 9);
      expect(r.stderr).toMatch(new RegExp(`rank ${victim} was killed by SIGKILL`));
      const byRank = outcomes(r.stdout);
      byRank.delete(victim);
      // No watchdog here (10 min by default): survivors learn of the death as it happens.
      expectEveryRankFailed(
        byRank,
        allRanks(n).filter((x) => x !== victim),
        ['EPEERLOST'],
        3000,
      );
      const messages = [...byRank.values()].map((o) => o.caught!.message).join('\n');
      if (victim === 2) {
        // Node0's leader waited on rank 2 through the layer; node1's rank 3 saw its pid die.
        expect(byRank.get(0)!.caught!.message).toMatch(/receiving from rank 2 \(tag 0\): the layer's recv failed: rank 2 closed its connection/);
        expect(byRank.get(3)!.caught!.message).toMatch(/rank 2 \(pid \d+\) on this node died/);
      } else {
        expect(messages).toMatch(new RegExp(`rank ${victim} \\(pid \\d+\\) on this node died`));
      }
      expect(await leftoverSegments()).toEqual([]);
      // Only the killed rank could not remove its socket file.
      expect(readdirSync(r.dir)).toEqual([`rank-${victim}.sock`]);
    });
  }
});
