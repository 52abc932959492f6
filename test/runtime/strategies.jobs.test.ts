import { describe, expect, it } from 'vitest';
import type { RuntimeConfigInput } from '../../src/config/load.js';
import { casesFile, configFile, expectCaseOk, jobScript, repoRoot, runJob, sharedJob } from '../helpers/jobs.js';

/**
 * Per-level algorithms through real processes: each combination of bcast, reduce, allreduce and
 * allgather algorithms runs test/jobs/strategies.mjs (every root, sizes across the small/large threshold
 * and several segments, IN_PLACE, float results compared bitwise across ranks, non-commutative
 * user operators, and — on one node and on 2 nodes — every datatype × every operator valid for
 * it at 1, 17 and just over 1100 bytes, above the 1 KiB large threshold of the combination that
 * sets it) on one node with interleaved cores, on 2 emulated nodes, and on 4 emulated nodes under
 * a two-level switch network — with all levels on and with one level off; and 4 MiB messages.
 *
 * The combinations of a placement run one after the other in one job (starting the processes
 * takes much of a job's time): the job starts with the first one's configuration file and
 * switches to each of the others with configure(), which is given every key that any of them
 * sets (configure() merges into the configuration in force), and reports each combination; a
 * test per combination checks its report.
 */
const INSIDE = ['core', 'l1', 'l2', 'l3', 'numa', 'socket', 'node'];
const BETWEEN = ['switch1', 'switch2', 'world'];

interface Allreduce {
  algorithm: 'auto' | 'reduce-allreduce-bcast' | 'reduce-bcast';
  top: 'auto' | 'recursive-doubling' | 'rabenseifner';
  segment: string;
  shm: boolean | 'every-rank' | 'last-arrival';
}

interface Combination {
  name: string;
  bcast: [inside: string, between: string];
  reduce: [inside: string, between: string];
  allreduce: Allreduce;
  /** Allgather's algorithm at every level, or inside a node and between nodes. */
  allgather: string | [inside: string, between: string];
}

/** allreduce's settings: those given, the others `auto`. */
const allreduce = (a: Partial<Allreduce>): Allreduce => ({ algorithm: 'auto', top: 'auto', segment: 'auto', shm: true, ...a });

const COMBINATIONS: Combination[] = [
  {
    name: 'shm inside, binomial between, recursive doubling on top',
    bcast: ['shm', 'binomial'],
    reduce: ['shm', 'binomial'],
    allreduce: allreduce({ algorithm: 'reduce-allreduce-bcast', top: 'recursive-doubling', shm: false }),
    allgather: 'ring',
  },
  {
    name: 'flat everywhere, reduce-bcast',
    bcast: ['flat', 'flat'],
    reduce: ['flat', 'flat'],
    allreduce: allreduce({ algorithm: 'reduce-bcast', shm: false }),
    allgather: 'recursive-doubling',
  },
  {
    name: 'knomial:3 everywhere, rabenseifner on top',
    bcast: ['knomial:3', 'knomial:3'],
    reduce: ['knomial:3', 'knomial:3'],
    allreduce: allreduce({ algorithm: 'reduce-allreduce-bcast', top: 'rabenseifner', shm: false }),
    allgather: 'bruck',
  },
  {
    name: 'scatter-allgather and rabenseifner everywhere, 4 KiB allreduce segments',
    bcast: ['scatter-allgather', 'scatter-allgather'],
    reduce: ['rabenseifner', 'rabenseifner'],
    allreduce: allreduce({ algorithm: 'reduce-allreduce-bcast', top: 'rabenseifner', segment: '4KiB', shm: false }),
    allgather: 'neighbor-exchange',
  },
  // On one node small allreduces (and barriers) go through the node-wide shared area here;
  // the combinations above switch it off to test their schedules at every size.
  { name: 'auto (the defaults)', bcast: ['auto', 'auto'], reduce: ['auto', 'auto'], allreduce: allreduce({}), allgather: 'auto' },
  // The shared-memory allgather (every member publishes its blocks through its S0 queue) at every
  // level inside a node, the ring between nodes; 4 KiB segments: several publications per segment
  // and many segments per call.
  {
    name: 'shm allgather inside, ring between, 4 KiB allgather segments',
    bcast: ['shm', 'binomial'],
    reduce: ['binomial', 'binomial'],
    allreduce: allreduce({ algorithm: 'reduce-allreduce-bcast', top: 'recursive-doubling', shm: false }),
    allgather: ['shm', 'ring'],
  },
];

/** The one-node shared allreduce with every rank combining (see the 2-rank test below), forced with 5 ranks on the 2 cores. */
const everyRank = (shm: Allreduce['shm']): Combination => ({
  name: `small allreduces on one node, every rank combining (allreduce.shm: ${shm})`,
  bcast: ['auto', 'auto'],
  reduce: ['auto', 'auto'],
  allreduce: allreduce({ shm }),
  allgather: 'auto',
});

/** The settings of a combination: every key any combination sets. */
function combinationSettings(c: Combination): RuntimeConfigInput {
  const levels = (names: string[], algorithm: string) => Object.fromEntries(names.map((l) => [l, algorithm]));
  const allgatherLevels =
    typeof c.allgather === 'string' ? levels([...INSIDE, ...BETWEEN], c.allgather) : { ...levels(INSIDE, c.allgather[0]), ...levels(BETWEEN, c.allgather[1]) };
  return {
    bcast: { levels: { ...levels(INSIDE, c.bcast[0]), ...levels(BETWEEN, c.bcast[1]) } },
    reduce: { levels: { ...levels(INSIDE, c.reduce[0]), ...levels(BETWEEN, c.reduce[1]) } },
    allreduce: c.allreduce,
    allgather: { levels: allgatherLevels, segment: c.allgather === 'neighbor-exchange' || typeof c.allgather !== 'string' ? '4KiB' : 'auto' },
  };
}

/** A configuration file (JSON is YAML) of the settings, and `extra` (settings only a file can give). */
function combinationConfig(c: Combination, extra: object = {}): string {
  return configFile(JSON.stringify({ ...combinationSettings(c), ...extra }));
}

const SIZES = [0, 1, 3, 17, 1000, 16411, 70001];
/** Every datatype (Buffer and Uint8Clamped too) × every operator for it, reduce at roots 0 and size − 1. */
const TYPES = ['1', '17', 'kib'];

interface Case {
  config?: RuntimeConfigInput;
  sizes?: number[];
  types?: string[];
  big?: number;
}

function expectAllRanksOk(r: ReturnType<typeof runJob>, ranks: number): void {
  expect(r.stderr).not.toMatch(/Error/);
  expect(r.status).toBe(0);
  const ok = r.lines
    .map((l) => /^rank (\d+) ok \d+$/.exec(l))
    .filter((m) => m !== null)
    .map((m) => Number(m![1]));
  expect(ok.sort((a, b) => a - b)).toEqual(Array.from({ length: ranks }, (_, i) => i));
}

const PLACEMENTS: [where: string, args: string[], combinations: Combination[]][] = [
  ['5 ranks on one node, 2 or 3 per core', ['-n', '5'], [...COMBINATIONS, everyRank('every-rank')]],
  ['6 ranks on 2 emulated nodes', ['-n', '6', '--nodes', '2'], COMBINATIONS],
  [
    '9 ranks on 4 emulated nodes under leaf and spine switches',
    ['-n', '9', '--nodes', '4', '--network', `${repoRoot}test/fixtures/network/four-nodes.txt`],
    COMBINATIONS,
  ],
];

describe('per-level algorithms in real jobs', () => {
  for (const [where, args, combinations] of PLACEMENTS) {
    const ranks = Number(args[1]);
    // The datatype × operator matrix runs where its combining paths are: inside a node (one
    // node) and between nodes over TCP (two nodes). Under the switch levels the same kernels
    // combine in the same places; there the sizes and roots run, through every level.
    const types = where.startsWith('9 ranks') ? undefined : TYPES;
    const job = sharedJob(() => {
      const cases = combinations.map((c, k): Case => ({ config: k === 0 ? undefined : combinationSettings(c), sizes: SIZES, types }));
      return runJob([...args, '--config', combinationConfig(combinations[0]!), jobScript('strategies.mjs'), `--cases=${casesFile(cases)}`]);
    });
    combinations.forEach((c, k) => {
      it(`${c.name}: ${where}`, () => expectCaseOk(job(), k, ranks));
    });
    it(`every combination in one job: ${where}`, () => expectAllRanksOk(job(), ranks));
  }

  it('with a level switched off in the configuration: 8 ranks on 4 emulated nodes without the leaf switches', () => {
    const args = ['-n', '8', '--nodes', '4', '--network', `${repoRoot}test/fixtures/network/four-nodes.txt`];
    const config = combinationConfig(COMBINATIONS[0]!, { levels: { switch1: { enabled: false } } });
    const r = runJob([...args, '--config', config, jobScript('strategies.mjs'), ...SIZES.map(String), `--types=${TYPES.join(',')}`]);
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
        allreduce: allreduce({ algorithm: 'reduce-allreduce-bcast', top, shm: false }),
        allgather: top === 'rabenseifner' ? 'bruck' : 'neighbor-exchange',
      };
      const config = combinationConfig(c, { shm: { channelBytes: 16384 } });
      const r = runJob(['-n', ranks, '--config', config, jobScript('strategies.mjs'), ...SIZES.map(String), '300000', '--big=1048576']);
      expectAllRanksOk(r, Number(ranks));
    });
  }

  // The one-node shared allreduce: every rank combines by default while each has a core (2 ranks
  // here); forced with 5 ranks on the 2 cores (a combination of the 5-rank job above).
  it(`${everyRank(true).name}: 2 ranks`, () => {
    const r = runJob([
      '-n',
      '2',
      '--config',
      combinationConfig(everyRank(true)),
      jobScript('strategies.mjs'),
      ...SIZES.map(String),
      `--types=${TYPES.join(',')}`,
    ]);
    expectAllRanksOk(r, 2);
  });

  describe('4 ranks of 2 emulated nodes with the defaults, in one job', () => {
    const job = sharedJob(() =>
      runJob(['-n', '4', '--nodes', '2', jobScript('strategies.mjs'), `--cases=${casesFile([{ sizes: [300000] }, { big: 1048576 }])}`]),
    );
    it('messages of 300 000 elements on 4 ranks of 2 emulated nodes with the defaults', () => expectCaseOk(job(), 0, 4));
    it('4 MiB messages (1 048 576 Int32 and Float32 elements, 4 MiB + 3 bytes) on 4 ranks of 2 emulated nodes with the defaults', () =>
      expectCaseOk(job(), 1, 4));
    it('both in one job', () => expectAllRanksOk(job(), 4));
  });
});

describe('switching levels and algorithms at runtime', () => {
  const job = jobScript('reconfigure.mjs');
  const fourNodes = `${repoRoot}test/fixtures/network/four-nodes.txt`;
  const mismatches = (r: ReturnType<typeof runJob>, kind: string) => r.lines.filter((l) => l.endsWith(` mismatch: ${kind}`));
  /** The loop's levels really changed along the way. */
  const expectLevelsChanged = (r: ReturnType<typeof runJob>) => {
    const steps = r.lines.filter((l) => l.startsWith('step '));
    expect(new Set(steps.map((l) => l.split(': ')[1])).size).toBeGreaterThan(1);
  };
  for (const [where, args] of [
    ['6 ranks on 3 emulated nodes', ['-n', '6', '--nodes', '3']],
    ['8 ranks on 4 emulated nodes under leaf and spine switches', ['-n', '8', '--nodes', '4', '--network', fourNodes]],
  ] as [string, string[]][]) {
    it(`in the middle of a loop of collectives: ${where}`, () => {
      const r = runJob([...args, job]);
      expectAllRanksOk(r, Number(args[1]));
      expectLevelsChanged(r);
    });
  }

  // The loop, then a configure() the ranks disagree on, then one a rank skips, in one job (the
  // skipped one ends it).
  for (const [where, args] of [
    ['one node', ['-n', '5']],
    ['2 emulated nodes', ['-n', '4', '--nodes', '2']],
  ] as [string, string[]][]) {
    const ranks = Number(args[1]);
    const r = sharedJob(() => runJob([...args, job, '--disagree', '--skip'], 60_000));
    if (where === 'one node') {
      it('in the middle of a loop of collectives: 5 ranks on one node', () => {
        expectAllRanksOk(r(), ranks);
        expectLevelsChanged(r());
      });
    }

    it(`ranks asking for different configurations all get EMISMATCH and keep the old one: ${where}`, () => {
      expectAllRanksOk(r(), ranks);
      expect(mismatches(r(), 'disagree')).toHaveLength(ranks);
    });

    it(`a rank that does not reconfigure with the others gives EMISMATCH everywhere, not a hang: ${where}`, () => {
      expect(r().status).toBe(0);
      expect(mismatches(r(), 'skip')).toHaveLength(ranks);
    });
  }
});
