import { describe, expect, it } from 'vitest';
import { configFile, jobScript, leftoverSegments, runFailureJob, runJob } from '../helpers/jobs.js';

/** Failure behaviour of real jobs started with `topocoll run`. */
// Small one-node allreduces with every rank combining (by default only while each rank has a core).
const everyRank = ['--config', configFile('allreduce: { shm: every-rank }\nallgather: { shm: every-rank }\n')];

const run = runFailureJob;

/**
 * A 4-rank job of mismatch.mjs whose call `kind` differs on rank 1: every rank gets an error
 * (EMISMATCH where the mismatch is seen, EPEERLOST where the abort arrives first), no rank gets
 * through both barriers after the call, and /dev/shm is clean.
 */
async function expectMismatchEverywhere(kind: string, args: readonly string[]): Promise<void> {
  const r = run(['-n', '4', ...args, jobScript('mismatch.mjs'), kind]);
  expect(r.signal).toBeNull();
  expect(r.status).not.toBe(0);
  expect(r.finished).toEqual([]);
  expect(r.caught.size).toBe(4);
  expect([...r.caught.values()]).toContain('EMISMATCH');
  for (const code of r.caught.values()) expect(['EMISMATCH', 'EPEERLOST']).toContain(code);
  expect(await leftoverSegments()).toEqual([]);
}

describe('a rank killed with SIGKILL in the middle of a collective', () => {
  for (const [name, args, n, collective] of [
    ['4 ranks on one node, allreduce', ['-n', '4'], 4, 'allreduce'],
    ['4 ranks on one node, allreduce, every rank combining', ['-n', '4', ...everyRank], 4, 'allreduce'],
    ['4 ranks on one node, a 2 MiB shared-memory bcast (the dead reader holds a set)', ['-n', '4'], 4, 'bcast'],
    ['6 ranks on 3 emulated nodes (the failure crosses TCP)', ['-n', '6', '--nodes', '3'], 6, 'allreduce'],
    ['4 ranks on one node, a 256 KiB-per-rank allgather', ['-n', '4'], 4, 'allgather'],
    ['6 ranks on 3 emulated nodes, a 256 KiB-per-rank allgather', ['-n', '6', '--nodes', '3'], 6, 'allgather'],
  ] as const) {
    it(`${name}: every survivor gets EPEERLOST, the launcher fails, /dev/shm is clean`, async () => {
      const r = run([...args, jobScript('peer-dies.mjs'), collective]);
      expect(r.signal).toBeNull(); // the launcher itself was not killed by the test timeout
      expect(r.status).toBe(128 + 9);
      expect(r.stderr).toMatch(new RegExp(`rank ${n - 1} was killed by SIGKILL`));
      expect([...r.caught.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: n - 1 }, (_, i) => i));
      expect(new Set(r.caught.values())).toEqual(new Set(['EPEERLOST']));
      expect(await leftoverSegments()).toEqual([]);
    });
  }
});

describe('mismatched calls across ranks give errors, not hangs or wrong data', () => {
  for (const kind of ['count', 'dtype', 'op', 'root', 'collective', 'allgather-count', 'allgatherv-counts', 'allgather-collective', 'allgather-shm-or-not']) {
    for (const [where, args] of [
      ['1 node', ['--nodes', '1']],
      ['2 nodes', ['--nodes', '2']],
      ['1 node, every rank combining', ['--nodes', '1', ...everyRank]],
    ] as const) {
      it(`${kind} differs on rank 1 (${where})`, () => expectMismatchEverywhere(kind, args));
    }
  }
});

describe("issue 40's mismatched calls on one node (across nodes: gather-scatter.jobs.test.ts), and alltoall against alltoallv on both", () => {
  for (const [kind, where, args] of [
    ['alltoall-count', "1 node, Bruck's packed exchanges", ['--nodes', '1']],
    ['alltoall-large-count', '1 node, pairwise in pieces', ['--nodes', '1']],
    ['alltoallv-counts', '1 node', ['--nodes', '1']],
    ['alltoall-collective', '1 node', ['--nodes', '1']],
    ['alltoall-collective', '2 nodes', ['--nodes', '2']],
    ['reduce-scatter-op', '1 node', ['--nodes', '1']],
    ['scan-exscan', '1 node', ['--nodes', '1']],
  ] as const) {
    it(`${kind} differs on rank 1 (${where}): EMISMATCH, no rank finishes, /dev/shm clean`, () => expectMismatchEverywhere(kind, args));
  }
});

describe('outboxes that hold one channel (shm.channelPoolBytes), schedules that send to several ranks of the node', () => {
  // Every level of a one-node job (the levels of this machine's node among them).
  const INSIDE = ['core', 'l1', 'l2', 'l3', 'numa', 'socket', 'node'];
  const everyLevel = (algorithm: string) => INSIDE.map((l) => `${l}: ${algorithm}`).join(', ');
  // An outbox's header (4 KiB), one block header (512 bytes) and one channel of the smallest size.
  const oneChannel = `shm: { channelPoolBytes: ${4096 + 512 + 65536} }\n`;
  for (const [name, collective, yaml, everyRankRefused] of [
    ['allgather, recursive doubling at every level', 'allgather', `allgather: { levels: { ${everyLevel('recursive-doubling')} }, shm: false }\n`, true],
    ['barrier, dissemination at every level', 'barrier', `allreduce: { shm: false }\nbarrier: { levels: { ${everyLevel('dissemination')} } }\n`, true],
    [
      'a 160 KB allreduce, reduce-allreduce-bcast with recursive doubling on top',
      'allreduce',
      'allreduce: { algorithm: reduce-allreduce-bcast, top: recursive-doubling, shm: false }\n',
      false,
    ],
  ] as const) {
    it(`8 ranks on one node, ${name}: init succeeds, the first call is refused with ECONFIG naming the rank, on every rank, no hang, /dev/shm clean`, async () => {
      const n = 8;
      const r = runJob(['-n', String(n), '--timeout', '5', '--config', configFile(oneChannel + yaml), jobScript('channel-refusal.mjs'), collective], 60_000);
      expect(r.signal, r.stderr).toBeNull(); // not stopped by the timeout: no hang
      expect(r.status).not.toBe(0);
      const ranks = Array.from({ length: n }, (_, i) => i);
      const initialized = r.lines.map((l) => /^rank (\d+) initialized$/.exec(l)).filter((m) => m !== null);
      expect(initialized.map((m) => Number(m[1])).sort((a, b) => a - b)).toEqual(ranks);
      expect(r.lines.filter((l) => /^rank \d+ finished$/.test(l))).toEqual([]);
      const caught = new Map<number, { code: string; kind: string; message: string }>();
      for (const l of r.lines) {
        const m = /^rank (\d+) caught (\S+) (\S+): (.*)$/.exec(l);
        if (m) caught.set(Number(m[1]), { code: m[2]!, kind: m[3]!, message: m[4]! });
      }
      expect(
        [...caught.keys()].sort((a, b) => a - b),
        r.stdout,
      ).toEqual(ranks);
      // A rank whose schedules need more channels than its outbox holds is refused, naming
      // itself; the refusal aborts the node's communicator, so the ranks whose schedules fit,
      // waiting for the refused ones, fail at once with its code and reason.
      const own = (i: number) =>
        new RegExp(`^ECONFIG: rank ${i} sends to \\d+ more ranks of its node than it has channels for\\b.*raise shm\\.channelPoolBytes`);
      const refused = ranks.filter((i) => own(i).test(caught.get(i)!.message));
      if (everyRankRefused) expect(refused).toEqual(ranks);
      else expect(refused.length).toBeGreaterThan(0);
      for (const i of ranks) {
        const { code, kind, message } = caught.get(i)!;
        expect(code).toBe('ECONFIG');
        expect(kind).toBe('TopocollError');
        if (refused.includes(i)) continue;
        const m = /the communicator was aborted: rank (\d+): rank (\d+) sends to \d+ more ranks/.exec(message);
        expect(m, message).not.toBeNull();
        expect(m![1]).toBe(m![2]);
        expect(refused).toContain(Number(m![1]));
      }
      expect(await leftoverSegments()).toEqual([]);
    });
  }
});
