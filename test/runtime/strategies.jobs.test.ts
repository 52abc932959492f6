import { describe, expect, it } from 'vitest';
import { configFile, jobScript, repoRoot, runJob } from '../helpers/jobs.js';

/**
 * Per-level algorithms through real processes: each combination of bcast, reduce, allreduce and
 * allgather algorithms runs test/jobs/strategies.mjs (every root, sizes across the small/large threshold
 * and several segments, IN_PLACE, float results compared bitwise across ranks, non-commutative
 * user operators, and — on one node and on 2 nodes — every datatype × every operator valid for
 * it at 1, 17 and just over 1100 bytes, above the 1 KiB large threshold of the combination that
 * sets it) on one node with interleaved cores, on 2 emulated nodes, and on 4 emulated nodes under
 * a two-level switch network — with all levels on and with one level off; and 4 MiB messages.
 */
const INSIDE = ['core', 'l1', 'l2', 'l3', 'numa', 'socket', 'node'];
const BETWEEN = ['switch1', 'switch2', 'world'];

interface Combination {
  name: string;
  bcast: [inside: string, between: string];
  reduce: [inside: string, between: string];
  allreduce: string;
  /** Allgather's algorithm at every level, or inside a node and between nodes. */
  allgather: string | [inside: string, between: string];
  extra?: string;
}

const COMBINATIONS: Combination[] = [
  {
    name: 'shm inside, binomial between, recursive doubling on top',
    bcast: ['shm', 'binomial'],
    reduce: ['shm', 'binomial'],
    allreduce: '{ algorithm: reduce-allreduce-bcast, top: recursive-doubling, shm: false }',
    allgather: 'ring',
  },
  {
    name: 'flat everywhere, reduce-bcast',
    bcast: ['flat', 'flat'],
    reduce: ['flat', 'flat'],
    allreduce: '{ algorithm: reduce-bcast, shm: false }',
    allgather: 'recursive-doubling',
  },
  {
    name: 'knomial:3 everywhere, rabenseifner on top',
    bcast: ['knomial:3', 'knomial:3'],
    reduce: ['knomial:3', 'knomial:3'],
    allreduce: '{ algorithm: reduce-allreduce-bcast, top: rabenseifner, shm: false }',
    allgather: 'bruck',
  },
  {
    name: 'scatter-allgather and rabenseifner everywhere, 4 KiB allreduce segments',
    bcast: ['scatter-allgather', 'scatter-allgather'],
    reduce: ['rabenseifner', 'rabenseifner'],
    allreduce: '{ algorithm: reduce-allreduce-bcast, top: rabenseifner, segment: 4KiB, shm: false }',
    allgather: 'neighbor-exchange',
  },
  // On one node small allreduces (and barriers) go through the node-wide shared area here;
  // the combinations above switch it off to test their schedules at every size.
  { name: 'auto (the defaults)', bcast: ['auto', 'auto'], reduce: ['auto', 'auto'], allreduce: '{ algorithm: auto }', allgather: 'auto' },
  // The shared-memory allgather (every member publishes its blocks through its S0 queue) at every
  // level inside a node, the ring between nodes; 4 KiB segments: several publications per segment
  // and many segments per call.
  {
    name: 'shm allgather inside, ring between, 4 KiB allgather segments',
    bcast: ['shm', 'binomial'],
    reduce: ['binomial', 'binomial'],
    allreduce: '{ algorithm: reduce-allreduce-bcast, top: recursive-doubling, shm: false }',
    allgather: ['shm', 'ring'],
  },
];

const PLACEMENTS: [string, string[]][] = [
  ['5 ranks on one node, 2 or 3 per core', ['-n', '5']],
  ['6 ranks on 2 emulated nodes', ['-n', '6', '--nodes', '2']],
  ['9 ranks on 4 emulated nodes under leaf and spine switches', ['-n', '9', '--nodes', '4', '--network', `${repoRoot}test/fixtures/network/four-nodes.txt`]],
];

function combinationConfig(c: Combination, disabled?: string): string {
  const levels = (names: string[], algorithm: string) => names.map((l) => `${l}: ${algorithm}`).join(', ');
  const allgatherLevels = (a: Combination['allgather']) =>
    typeof a === 'string' ? levels([...INSIDE, ...BETWEEN], a) : `${levels(INSIDE, a[0])}, ${levels(BETWEEN, a[1])}`;
  const yaml =
    `bcast:\n  levels: { ${levels(INSIDE, c.bcast[0])}, ${levels(BETWEEN, c.bcast[1])} }\n` +
    `reduce:\n  levels: { ${levels(INSIDE, c.reduce[0])}, ${levels(BETWEEN, c.reduce[1])} }\n` +
    `allreduce: ${c.allreduce}\n` +
    `allgather: { levels: { ${allgatherLevels(c.allgather)} }${c.allgather === 'neighbor-exchange' || typeof c.allgather !== 'string' ? ', segment: 4KiB' : ''} }\n` +
    (c.extra ?? '') +
    (disabled ? `levels: { ${disabled}: { enabled: false } }\n` : '');
  return configFile(yaml);
}

const SIZES = ['0', '1', '3', '17', '1000', '16411', '70001'];
/** Every datatype (Buffer and Uint8Clamped too) × every operator for it, reduce at roots 0 and size − 1. */
const TYPES = '--types=1,17,kib';

function expectAllRanksOk(r: ReturnType<typeof runJob>, ranks: number): void {
  expect(r.stderr).not.toMatch(/Error/);
  expect(r.status).toBe(0);
  const ok = r.lines
    .map((l) => /^rank (\d+) ok \d+$/.exec(l))
    .filter((m) => m !== null)
    .map((m) => Number(m![1]));
  expect(ok.sort((a, b) => a - b)).toEqual(Array.from({ length: ranks }, (_, i) => i));
}

describe('per-level algorithms in real jobs', () => {
  for (const c of COMBINATIONS) {
    for (const [where, args] of PLACEMENTS) {
      // The datatype × operator matrix runs where its combining paths are: inside a node (one
      // node) and between nodes over TCP (two nodes). Under the switch levels the same kernels
      // combine in the same places; there the sizes and roots run, through every level.
      const types = where.startsWith('9 ranks') ? [] : [TYPES];
      it(`${c.name}: ${where}`, () => {
        const r = runJob([...args, '--config', combinationConfig(c), jobScript('strategies.mjs'), ...SIZES, ...types]);
        expectAllRanksOk(r, Number(args[1]));
      });
    }
  }

  it('with a level switched off in the configuration: 8 ranks on 4 emulated nodes without the leaf switches', () => {
    const c = COMBINATIONS[0]!;
    const args = ['-n', '8', '--nodes', '4', '--network', `${repoRoot}test/fixtures/network/four-nodes.txt`];
    const r = runJob([...args, '--config', combinationConfig(c, 'switch1'), jobScript('strategies.mjs'), ...SIZES, TYPES]);
    expectAllRanksOk(r, 8);
  });

  // Exchanges between ranks of a node interleave sending and receiving, so their messages may be
  // far larger than a channel: 16 KiB channels, exchanges of up to 2 MiB.
  for (const [top, ranks] of [
    ['rabenseifner', '5'],
    ['recursive-doubling', '4'],
  ] as const) {
    it(`exchanges larger than the channels (16 KiB): ${ranks} ranks on one node, scatter-allgather and rabenseifner everywhere, ${top} on top`, () => {
      const c: Combination = {
        name: 'small channels',
        bcast: ['scatter-allgather', 'scatter-allgather'],
        reduce: ['rabenseifner', 'rabenseifner'],
        allreduce: `{ algorithm: reduce-allreduce-bcast, top: ${top}, shm: false }`,
        allgather: top === 'rabenseifner' ? 'bruck' : 'neighbor-exchange',
        extra: 'shm: { channelBytes: 16384 }\n',
      };
      const r = runJob(['-n', ranks, '--config', combinationConfig(c), jobScript('strategies.mjs'), ...SIZES, '300000', '--big=1048576']);
      expectAllRanksOk(r, Number(ranks));
    });
  }

  // The one-node shared allreduce: every rank combines by default while each has a core (2 ranks
  // here); forced with 5 ranks on the 2 cores.
  for (const [ranks, shm] of [
    ['2', 'true'],
    ['5', 'every-rank'],
  ] as const) {
    it(`small allreduces on one node, every rank combining (allreduce.shm: ${shm}): ${ranks} ranks`, () => {
      const c: Combination = {
        name: 'every rank combines',
        bcast: ['auto', 'auto'],
        reduce: ['auto', 'auto'],
        allreduce: `{ shm: ${shm} }`,
        allgather: 'auto',
      };
      const r = runJob(['-n', ranks, '--config', combinationConfig(c), jobScript('strategies.mjs'), ...SIZES, TYPES]);
      expectAllRanksOk(r, Number(ranks));
    });
  }

  it('messages of 300 000 elements on 4 ranks of 2 emulated nodes with the defaults', () => {
    const r = runJob(['-n', '4', '--nodes', '2', jobScript('strategies.mjs'), '300000']);
    expectAllRanksOk(r, 4);
  });

  it('4 MiB messages (1 048 576 Int32 and Float32 elements, 4 MiB + 3 bytes) on 4 ranks of 2 emulated nodes with the defaults', () => {
    const r = runJob(['-n', '4', '--nodes', '2', jobScript('strategies.mjs'), '--big=1048576']);
    expectAllRanksOk(r, 4);
  });
});

describe('switching levels and algorithms at runtime', () => {
  const job = jobScript('reconfigure.mjs');
  const fourNodes = `${repoRoot}test/fixtures/network/four-nodes.txt`;
  for (const [where, args] of [
    ['5 ranks on one node', ['-n', '5']],
    ['6 ranks on 3 emulated nodes', ['-n', '6', '--nodes', '3']],
    ['8 ranks on 4 emulated nodes under leaf and spine switches', ['-n', '8', '--nodes', '4', '--network', fourNodes]],
  ] as [string, string[]][]) {
    it(`in the middle of a loop of collectives: ${where}`, () => {
      const r = runJob([...args, job]);
      expectAllRanksOk(r, Number(args[1]));
      // The levels really changed along the way.
      const steps = r.lines.filter((l) => l.startsWith('step '));
      expect(new Set(steps.map((l) => l.split(': ')[1])).size).toBeGreaterThan(1);
    });
  }

  for (const [where, args] of [
    ['one node', ['-n', '5']],
    ['2 emulated nodes', ['-n', '4', '--nodes', '2']],
  ] as [string, string[]][]) {
    it(`ranks asking for different configurations all get EMISMATCH and keep the old one: ${where}`, () => {
      const r = runJob([...args, job, '--disagree']);
      expectAllRanksOk(r, Number(args[1]));
      expect(r.lines.filter((l) => / mismatch$/.test(l))).toHaveLength(Number(args[1]));
    });

    it(`a rank that does not reconfigure with the others gives EMISMATCH everywhere, not a hang: ${where}`, () => {
      const r = runJob([...args, job, '--skip'], 60_000);
      expect(r.status).toBe(0);
      expect(r.lines.filter((l) => / mismatch$/.test(l))).toHaveLength(Number(args[1]));
    });
  }
});
