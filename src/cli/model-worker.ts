/**
 * One rank of `topocoll bench --model` (started by the launcher): for each collective and message
 * size, every candidate the cost model chooses among — each combination of the levels' candidate
 * algorithms (each with the segment the model picks for it), the model's own algorithms at every
 * candidate segment, and `auto` itself — configured in turn with `comm.configure()`, its
 * prediction taken from `comm.explain()` and its time measured (OSU's way: a barrier before each
 * call, the call timed on every rank, the slowest rank's mean). Rank 0 prints one JSON line
 * (`ModelRow`) per candidate and size.
 *
 * The model's domain is the per-level schedules: the one-node shared-area calls (`*.shm`) and the
 * JavaScript fast path bypass the levels and are switched off for the whole run.
 *
 * Every rank derives the same candidates in the same order from the same explanation (explain
 * is computed from the plan and the configuration alone), so the configure() calls line up.
 * Candidates are measured in rounds, each round in a rotated order, and each keeps the least of
 * its rounds: a VM's noise only adds time and comes in bursts, and rotation keeps a burst from
 * always hitting the same candidate.
 */
import type { Communicator } from '../communicator.js';
import { deepMerge, type RuntimeConfigInput } from '../config/load.js';
import { init } from '../init.js';
import type { Explanation } from '../algorithms/selection.js';
import { SEGMENT_CANDIDATES } from '../algorithms/selection.js';

/** The collectives `topocoll bench --model` measures (those the communicator has: explain() answers for more). */
export type ModelCollective = Exclude<Explanation['collective'], 'gather' | 'scatter' | 'reduce-scatter' | 'scan' | 'exscan' | 'alltoall'>;

export interface ModelSettings {
  collectives: ModelCollective[];
  /** Message sizes (allgather: bytes each rank sends). */
  sizes: number[];
  /** Rounds over the candidates; each candidate keeps its least round. */
  rounds: number;
  /** Timed time per candidate and round, ms (the call count is agreed from a warm-up). */
  targetMs: number;
}

export interface ModelRow {
  collective: ModelCollective;
  bytes: number;
  /** The candidate: per level algorithms, segment, allreduce shape; or `auto`. */
  candidate: string;
  /** What the candidate ran, as explain names it (auto: the model's choice). */
  runs: string;
  predictedUs: number;
  /** The least over rounds of the slowest rank's mean µs per call. */
  measuredUs: number;
  /** Every round's figure. */
  roundsUs: number[];
  /** `auto`'s row only: per level bottom-up its largest group and the link the model priced it on. */
  levels?: Pick<Explanation['levels'][number], 'level' | 'groupSize' | 'link' | 'linkParameters'>[];
}

/** Settings every candidate starts from: the per-level schedules on every size. */
const SCHEDULES_ONLY: RuntimeConfigInput = {
  collectives: { jsFastPath: false },
  bcast: { shm: false },
  reduce: { shm: false },
  allreduce: { shm: false },
  allgather: { shm: false },
};

interface Candidate {
  name: string;
  config: RuntimeConfigInput;
}

const levelName = (l: string): string => l.replace(/ \((reduce|bcast)\)$/, '');

/** Every combination of one entry per list. */
function product<T>(lists: readonly (readonly T[])[]): T[][] {
  return lists.reduce<T[][]>((acc, list) => acc.flatMap((a) => list.map((x) => [...a, x])), [[]]);
}

/** Everything `auto` resets: levels' algorithms and segments of every collective. */
function autoConfig(levels: readonly string[]): RuntimeConfigInput {
  const auto = Object.fromEntries(levels.map((l) => [l, 'auto']));
  return {
    ...SCHEDULES_ONLY,
    bcast: { shm: false, levels: auto, segment: 'auto' },
    reduce: { shm: false, levels: auto, segment: 'auto' },
    allreduce: { shm: false, algorithm: 'auto', top: 'auto', segment: 'auto' },
    allgather: { shm: false, levels: auto, segment: 'auto' },
    barrier: { levels: auto },
  };
}

/**
 * In a group of two, algorithms that differ elsewhere run the same steps: one message from the
 * root (bcast) or to it (reduce) for flat and the trees, one exchange for every allgather, one
 * message up and one down for the central counter and the combining trees. They are one
 * configuration: the fastest of several equal ones measured would only pick the luckiest.
 */
export function pairName(algorithm: string): string {
  if (algorithm === 'flat' || algorithm === 'binomial' || algorithm.startsWith('knomial:')) return 'one message (2)';
  if (algorithm === 'ring' || algorithm === 'recursive-doubling' || algorithm === 'bruck' || algorithm === 'neighbor-exchange') return 'one exchange (2)';
  if (algorithm === 'central-counter' || algorithm.startsWith('combining-tree:')) return 'up and down (2)';
  return algorithm;
}

/**
 * What a configuration runs, as a text: the levels' choices, the segment and allreduce's shape.
 * `cutBytes`: what the segment cuts (the message; allgather: each rank's block) — a segment as
 * large is none.
 */
export function runsOf(e: Explanation, cutBytes: number): string {
  const levels = e.levels.map((l) => `${l.level} ${l.groupSize === 2 ? pairName(l.chosen) : l.chosen}`).join(', ');
  const seg = e.collective === 'barrier' ? '' : `; segment ${e.segmentBytes === 0 || e.segmentBytes >= cutBytes ? 'none' : e.segmentBytes}`;
  return `${levels}${e.allreduceShape !== undefined ? `; ${e.allreduceShape}` : ''}${seg}`;
}

/**
 * The candidates of `collective` at `bytes` from the explanation of `auto` (its levels'
 * candidate lists): every combination, each with the model's segment; the model's algorithms
 * at every candidate segment; allreduce: its shapes over paired lower-level algorithms.
 */
export function candidatesOf(collective: ModelCollective, auto: Explanation, blockBytes: number): Candidate[] {
  const out: Candidate[] = [];
  const names = (l: Explanation['levels'][number]) => l.candidates.map((c) => c.algorithm);
  if (collective === 'barrier' || collective === 'bcast' || collective === 'reduce' || collective === 'allgather') {
    for (const combo of product(auto.levels.map(names))) {
      const levels = Object.fromEntries(auto.levels.map((l, i) => [l.level, combo[i]!]));
      const name = auto.levels.map((l, i) => `${l.level} ${combo[i]}`).join(', ');
      out.push({ name, config: collective === 'barrier' ? { barrier: { levels } } : { [collective]: { levels, segment: 'auto' } } });
    }
  } else {
    // Lower levels run the reduce's and bcast's algorithms: paired by family, plus auto's own pair.
    const reduceLevels = auto.levels.filter((l) => l.level.endsWith('(reduce)'));
    const bcastLevels = auto.levels.filter((l) => l.level.endsWith('(bcast)'));
    const pairsOf = (i: number): [string, string][] => {
      const shm = names(bcastLevels[i]!).includes('shm');
      const pairs: [string, string][] = [
        ['flat', 'flat'],
        ['binomial', 'binomial'],
        ['knomial:4', 'knomial:4'],
        ['rabenseifner', 'scatter-allgather'],
        ...(shm ? [['binomial', 'shm'] as [string, string]] : []),
      ];
      const own: [string, string] = [reduceLevels[i]!.chosen, bcastLevels[i]!.chosen];
      return pairs.some((p) => p[0] === own[0] && p[1] === own[1]) ? pairs : [...pairs, own];
    };
    const shapes: { algorithm: 'reduce-bcast' | 'reduce-allreduce-bcast'; top?: string }[] = [
      { algorithm: 'reduce-bcast' },
      { algorithm: 'reduce-allreduce-bcast', top: 'recursive-doubling' },
      { algorithm: 'reduce-allreduce-bcast', top: 'rabenseifner' },
    ];
    for (const s of shapes) {
      // reduce-allreduce-bcast runs its own allreduce in the top group (the last level): the pairs vary below it only.
      const varied = s.algorithm === 'reduce-bcast' ? reduceLevels.length : reduceLevels.length - 1;
      for (const combo of product(reduceLevels.slice(0, varied).map((_, i) => pairsOf(i)))) {
        const pairAt = (i: number): [string, string] => combo[i] ?? [reduceLevels[i]!.chosen, bcastLevels[i]!.chosen];
        const reduce = Object.fromEntries(reduceLevels.map((l, i) => [levelName(l.level), pairAt(i)[0]]));
        const bcast = Object.fromEntries(bcastLevels.map((l, i) => [levelName(l.level), pairAt(i)[1]]));
        const pairs = combo.map((c, i) => `${levelName(reduceLevels[i]!.level)} ${c[0]}/${c[1]}`).join(', ');
        out.push({
          name: `${pairs === '' ? '' : `${pairs}; `}${s.algorithm}${s.top !== undefined ? `, top ${s.top}` : ''}`,
          config: {
            reduce: { levels: reduce },
            bcast: { levels: bcast },
            allreduce: { algorithm: s.algorithm, top: (s.top ?? 'recursive-doubling') as 'recursive-doubling', segment: 'auto' },
          },
        });
      }
    }
  }
  if (collective === 'barrier') return out;
  // The model's algorithms at every candidate segment (allgather's cut every rank's block).
  const whole = collective === 'allgather' ? blockBytes : auto.bytes;
  const chosen = Object.fromEntries(auto.levels.map((l) => [levelName(l.level), l.chosen]));
  for (const seg of [0, ...SEGMENT_CANDIDATES.filter((s) => s < whole)]) {
    const name = `auto's algorithms, segment ${seg === 0 ? 'none' : seg}`;
    if (collective === 'allreduce') {
      const reduce = Object.fromEntries(auto.levels.filter((l) => l.level.endsWith('(reduce)')).map((l) => [levelName(l.level), l.chosen]));
      const bcast = Object.fromEntries(auto.levels.filter((l) => l.level.endsWith('(bcast)')).map((l) => [levelName(l.level), l.chosen]));
      const [variant, top] = (auto.allreduceShape ?? 'reduce-bcast').split(', top ');
      out.push({
        name,
        config: {
          reduce: { levels: reduce },
          bcast: { levels: bcast },
          allreduce: { algorithm: variant as 'reduce-bcast', top: (top ?? 'recursive-doubling') as 'recursive-doubling', segment: seg },
        },
      });
    } else out.push({ name, config: { [collective]: { levels: chosen, segment: seg } } });
  }
  return out;
}

/** Buffers for one size, the send data changed on every call so caches do not flatter. */
function callOf(comm: Communicator, collective: ModelCollective, bytes: number): (k: number) => void {
  const raw = new Uint8Array(Math.max(1, bytes));
  const ints = new Int32Array(Math.max(1, bytes >> 2));
  const out = new Int32Array(ints.length);
  const gathered = new Uint8Array(collective === 'allgather' ? raw.length * comm.size : 0).fill(1);
  const root = comm.rank === 0;
  switch (collective) {
    case 'barrier':
      return () => comm.barrierSync();
    case 'bcast':
      return (k) => {
        raw[k % raw.length] = k;
        comm.bcastSync(raw, 0);
      };
    case 'reduce':
      return (k) => {
        ints[k % ints.length] = k;
        comm.reduceSync(ints, root ? out : null, 'sum', 0);
      };
    case 'allreduce':
      return (k) => {
        ints[k % ints.length] = k;
        comm.allreduceSync(ints, out, 'sum');
      };
    case 'allgather':
      return (k) => {
        raw[k % raw.length] = k;
        comm.allgatherSync(raw, gathered);
      };
  }
}

export async function modelMain(settings: ModelSettings): Promise<void> {
  const comm = await init();
  const stat = new Float64Array(1);
  const reduced = new Float64Array(1);
  const slowest = (value: number): number => {
    stat[0] = value;
    comm.allreduceSync(stat, reduced, 'max');
    return reduced[0]!;
  };
  const levelNames = comm.levels().map((l) => l.name);
  let current = '';
  // Each candidate on top of everything auto: nothing of the previous candidate stays.
  const configure = (config: RuntimeConfigInput): void => {
    const full = deepMerge(autoConfig(levelNames), config) as RuntimeConfigInput;
    const text = JSON.stringify(full);
    if (text === current) return;
    comm.configure(full);
    current = text;
  };

  /**
   * This rank's mean µs per call, timed as OSU's collective benchmarks do: a barrier before every
   * call, only the call timed — the model predicts one call from a common start, and back-to-back
   * calls of a rooted collective overlap (a root starts its next call while readers finish the
   * last). Barriers themselves run back to back. A warm-up of at least 2 ms, then as many calls
   * as take about targetMs.
   */
  const measure = (call: (k: number) => void, separated: boolean): number => {
    let k = 0;
    const once = separated
      ? (): number => {
          comm.barrierSync();
          const t = performance.now();
          call(k++);
          return performance.now() - t;
        }
      : (): number => {
          const t = performance.now();
          call(k++);
          return performance.now() - t;
        };
    comm.barrierSync();
    const warm = performance.now();
    // Every rank makes the same calls: the warm-up goes on in steps of 3 calls, by the slowest clock.
    let elapsed: number;
    do {
      for (let i = 0; i < 3; i++) once();
      elapsed = slowest(performance.now() - warm);
    } while (elapsed < 2);
    const perCall = elapsed / k;
    const count = Math.max(3, Math.min(100000, Math.ceil(settings.targetMs / perCall)));
    comm.barrierSync();
    let inCalls = 0;
    for (let i = 0; i < count; i++) inCalls += once();
    return (inCalls * 1000) / count;
  };

  for (const collective of settings.collectives) {
    for (const bytes of collective === 'barrier' ? [0] : settings.sizes) {
      const explainBytes = collective === 'allgather' ? bytes * comm.size : bytes;
      configure({});
      const auto = comm.explain(collective, explainBytes);
      const list: Candidate[] = [{ name: 'auto', config: {} }, ...candidatesOf(collective, auto, bytes)];
      const call = callOf(comm, collective, bytes);
      const results = list.map(() => ({ runs: '', predictedUs: 0, rounds: [] as number[] }));
      const separated = collective !== 'barrier';
      // Unmeasured: the cell's first calls compile its call path (V8's compiler threads take the cores).
      measure(call, separated);
      measure(call, separated);
      for (let round = 0; round < settings.rounds; round++) {
        for (let j = 0; j < list.length; j++) {
          const i = (j + round * Math.ceil(list.length / settings.rounds)) % list.length;
          configure(list[i]!.config);
          const e = comm.explain(collective, explainBytes);
          results[i]!.runs = runsOf(e, bytes);
          results[i]!.predictedUs = e.predictedUs;
          // The slowest rank's mean: the call is done when every rank is (what the model predicts).
          results[i]!.rounds.push(slowest(measure(call, separated)));
        }
      }
      if (comm.rank === 0) {
        list.forEach((c, i) => {
          const r = results[i]!;
          const row: ModelRow = {
            collective,
            bytes,
            candidate: c.name,
            runs: r.runs,
            predictedUs: r.predictedUs,
            measuredUs: Math.min(...r.rounds),
            roundsUs: r.rounds,
            ...(c.name === 'auto'
              ? { levels: auto.levels.map(({ level, groupSize, link, linkParameters }) => ({ level, groupSize, link, linkParameters })) }
              : {}),
          };
          console.log(JSON.stringify(row));
        });
      }
    }
  }
  comm.close();
}

// Started as a script by the launcher: the settings come in the environment.
if (process.env.TOPOCOLL_MODEL_BENCH !== undefined) {
  await modelMain(JSON.parse(process.env.TOPOCOLL_MODEL_BENCH) as ModelSettings);
}
