/**
 * One rank of `topocoll bench` (started by the launcher). Measures each collective the way the
 * OSU micro-benchmarks do — warm-up, then a timed loop of back-to-back calls, per-rank mean —
 * and prints one JSON line per (collective, mode, size) on rank 0 with the average, minimum and
 * maximum over ranks. The send data changes on every iteration so caches do not flatter.
 * allgather's size is the bytes each rank sends (it receives size × bytes); gather's and
 * scatter's likewise the bytes of each rank's block (root 0 holds size × bytes); reduce-scatter's
 * (reduceScatterBlock, int32 sum) the bytes of each rank's block of the result; alltoall's the
 * bytes of each block (every rank sends and receives size × bytes); scan's and exscan's (int32
 * sum) the bytes of each rank's input, as OSU's.
 */
import { Communicator } from '../communicator.js';
import type { TopocollConfig } from '../config/schema.js';
import { init } from '../init.js';

export interface BenchSettings {
  collectives: ('barrier' | 'bcast' | 'reduce' | 'allreduce' | 'allgather' | 'gather' | 'scatter' | 'reduce-scatter' | 'alltoall' | 'scan' | 'exscan')[];
  /**
   * sync: blocking calls; addon: blocking calls with the JavaScript fast path off (each through
   * the addon); async: Promise calls; window: blocking calls on buffers in shared windows
   * (comm.allocShared).
   */
  modes: ('sync' | 'addon' | 'async' | 'window')[];
  minBytes: number;
  maxBytes: number;
  itersSmall: number;
  itersLarge: number;
  /** Messages above this many bytes use itersLarge. */
  largeBytes: number;
  /** Timed loops per size; each rank keeps the median of its loop means. */
  repeats: number;
  /** Rank 0 also prints the sizes of the groups at every level (a `GroupSizesRecord`). */
  groupSizes?: boolean;
}

/** The distinct sizes (> 1) of the groups at each enabled level of the job, bottom-up. */
export interface GroupSizesRecord {
  groupSizes: { level: string; sizes: number[] }[];
}

export interface BenchRow {
  collective: string;
  mode: string;
  bytes: number;
  avgUs: number;
  minUs: number;
  maxUs: number;
  iterations: number;
  /**
   * What carried the messages between nodes (`transport` of the job's configuration). The CLI
   * sets it on the rows of topocoll's jobs; Open MPI's rows have none.
   */
  transport?: TopocollConfig['transport'];
}

export function sizesOf(s: BenchSettings): number[] {
  const sizes: number[] = [];
  for (let b = s.minBytes; b <= s.maxBytes; b *= 2) sizes.push(b);
  return sizes;
}

type Collective = BenchSettings['collectives'][number];

/** The collectives with a window mode (buffers in shared windows); the others skip it. */
const WINDOWED: ReadonlySet<Collective> = new Set<Collective>(['barrier', 'bcast', 'reduce', 'allreduce', 'allgather']);

/** Buffers of one size; one element changes per call so caches do not flatter the result. */
interface Buffers {
  raw: Uint8Array;
  ints: Int32Array;
  out: Int32Array;
  /** allgather's result: every rank's `raw`; gather's result and scatter's source at root 0; alltoall's recv (empty for the other collectives). */
  gathered: Uint8Array;
}

function buffersFor(bytes: number, c: Collective, ranks: number): Buffers {
  const elems = Math.max(1, bytes >> 2);
  // Every page written once, so first-touch faults stay out of the timing (as in coll_latency.c).
  const whole = c === 'allgather' || c === 'gather' || c === 'scatter' || c === 'alltoall';
  const gathered = new Uint8Array(whole ? bytes * ranks : 0).fill(1);
  // reduce-scatter: its input holds every rank's block of ints.
  const ints = new Int32Array(c === 'reduce-scatter' ? elems * ranks : elems).map((_, i) => i);
  // alltoall: raw is its send, a block for every rank.
  const sent = c === 'alltoall' ? bytes * ranks : bytes;
  return { raw: new Uint8Array(Math.max(sent, 1)).fill(1).subarray(0, sent), ints, out: new Int32Array(elems), gathered };
}

/** The same buffers in shared windows (collective: every rank allocates them in the same order). */
function windowBuffersFor(comm: Communicator, bytes: number, c: Collective): Buffers {
  const elems = Math.max(1, bytes >> 2);
  const rooted = c === 'bcast' ? bytes : 0;
  const numeric = c === 'reduce' || c === 'allreduce' ? elems : 0;
  const raw = comm.allocShared(Uint8Array, c === 'allgather' ? bytes : rooted).fill(1);
  const ints = comm.allocShared(Int32Array, Math.max(1, numeric));
  ints.forEach((_, i) => (ints[i] = i));
  const out = comm.allocShared(Int32Array, Math.max(1, numeric)).fill(1);
  const gathered = comm.allocShared(Uint8Array, c === 'allgather' ? bytes * comm.size : 0).fill(1);
  return { raw, ints, out, gathered };
}

// One top-level loop per mode, the same function for every size: the JIT optimises it once,
// instead of once per size while the other ranks spin on both cores.
function syncLoop(comm: Communicator, c: Collective, b: Buffers, first: number, count: number): void {
  const root = comm.rank === 0;
  for (let k = first; k < first + count; k++) {
    b.ints[k % b.ints.length] = k;
    if (b.raw.length > 0) b.raw[k % b.raw.length] = k & 0xff;
    if (c === 'barrier') comm.barrierSync();
    else if (c === 'bcast') comm.bcastSync(b.raw, 0);
    else if (c === 'reduce') comm.reduceSync(b.ints, root ? b.out : null, 'sum', 0);
    else if (c === 'allgather') comm.allgatherSync(b.raw, b.gathered);
    else if (c === 'gather') comm.gatherSync(b.raw, root ? b.gathered : null, 0);
    else if (c === 'scatter') comm.scatterSync(root ? b.gathered : null, b.raw, 0);
    else if (c === 'reduce-scatter') comm.reduceScatterBlockSync(b.ints, b.out, 'sum');
    else if (c === 'alltoall') comm.alltoallSync(b.raw, b.gathered);
    else if (c === 'scan') comm.scanSync(b.ints, b.out, 'sum');
    else if (c === 'exscan') comm.exscanSync(b.ints, b.out, 'sum');
    else comm.allreduceSync(b.ints, b.out, 'sum');
  }
}

async function asyncLoop(comm: Communicator, c: Collective, b: Buffers, first: number, count: number): Promise<void> {
  const root = comm.rank === 0;
  for (let k = first; k < first + count; k++) {
    b.ints[k % b.ints.length] = k;
    if (b.raw.length > 0) b.raw[k % b.raw.length] = k & 0xff;
    if (c === 'barrier') await comm.barrier();
    else if (c === 'bcast') await comm.bcast(b.raw, 0);
    else if (c === 'reduce') await comm.reduce(b.ints, root ? b.out : null, 'sum', 0);
    else if (c === 'allgather') await comm.allgather(b.raw, b.gathered);
    else if (c === 'gather') await comm.gather(b.raw, root ? b.gathered : null, 0);
    else if (c === 'scatter') await comm.scatter(root ? b.gathered : null, b.raw, 0);
    else if (c === 'reduce-scatter') await comm.reduceScatterBlock(b.ints, b.out, 'sum');
    else if (c === 'alltoall') await comm.alltoall(b.raw, b.gathered);
    else if (c === 'scan') await comm.scan(b.ints, b.out, 'sum');
    else if (c === 'exscan') await comm.exscan(b.ints, b.out, 'sum');
    else await comm.allreduce(b.ints, b.out, 'sum');
  }
}

/**
 * Per-rank mean µs per call over `iterations` back-to-back calls, after a warm-up (OSU style);
 * with `repeats` > 1 the median of that many timed loops (a VM's noise comes in bursts).
 */
async function measure(
  comm: Communicator,
  c: Collective,
  mode: string,
  bytes: number,
  iterations: number,
  repeats: number,
  slowest: (ms: number) => number,
): Promise<number> {
  const windows = mode === 'window';
  const b = windows ? windowBuffersFor(comm, bytes, c) : buffersFor(bytes, c, comm.size);
  const warmup = Math.max(200, Math.floor(iterations / 5));
  comm.barrierSync();
  // At least `warmup` calls and 20 ms on every rank: a size that takes another path (the
  // JavaScript fast path's limits, a protocol's) makes V8 compile that path anew, on a
  // background thread that competes with the ranks for the cores.
  const started = performance.now();
  let first = 0;
  do {
    if (mode !== 'async') syncLoop(comm, c, b, first, warmup);
    else await asyncLoop(comm, c, b, first, warmup);
    first += warmup;
  } while (slowest(performance.now() - started) < 20);
  const means: number[] = [];
  for (let r = 0; r < repeats; r++) {
    comm.barrierSync();
    const start = process.hrtime.bigint();
    if (mode !== 'async') syncLoop(comm, c, b, first, iterations);
    else await asyncLoop(comm, c, b, first, iterations);
    first += iterations;
    means.push(Number(process.hrtime.bigint() - start) / 1000 / iterations);
  }
  if (windows) for (const buffer of [b.raw, b.ints, b.out, b.gathered]) comm.freeShared(buffer);
  means.sort((x, y) => x - y);
  return means[Math.floor(repeats / 2)]!;
}

export async function benchMain(settings: BenchSettings): Promise<void> {
  const comm = await init();
  const stat = new Float64Array(1);
  const reduced = new Float64Array(1);
  const across = (value: number, op: 'sum' | 'min' | 'max'): number => {
    stat[0] = value;
    comm.allreduceSync(stat, reduced, op);
    return reduced[0]!;
  };
  for (const collective of settings.collectives) {
    for (const mode of settings.modes) {
      // Windows serve bcast, allreduce and allgather; the others have no window path.
      if (mode === 'window' && !WINDOWED.has(collective)) continue;
      const sizes = collective === 'barrier' ? [0] : sizesOf(settings);
      if (mode === 'addon') comm.configure({ collectives: { jsFastPath: false } });
      // Settle the JIT, the caches and the CPU clocks before the first measured size: the
      // optimising compiler's background threads compete with the ranks for the cores.
      // The rounds make the rows too (not printed): compiling that path in the background
      // distorted the first measured sizes.
      const rowOf = async (bytes: number, iterations: number, repeats: number): Promise<string> => {
        const us = await measure(comm, collective, mode, bytes, iterations, repeats, (ms) => across(ms, 'max'));
        const row: BenchRow = { collective, mode, bytes, avgUs: across(us, 'sum') / comm.size, minUs: across(us, 'min'), maxUs: across(us, 'max'), iterations };
        return JSON.stringify(row);
      };
      // At least 3 rounds and 300 ms (every rank takes the same decision: the slowest clock):
      // with rounds alone, the runtime's background work after start-up slowed early sizes.
      const warmStart = performance.now();
      for (let round = 0; round < 3 || across(performance.now() - warmStart, 'max') < 300; round++) {
        await rowOf(sizes[0]!, Math.max(2000, settings.itersSmall), 1);
      }
      for (const bytes of sizes) {
        const row = await rowOf(bytes, bytes > settings.largeBytes ? settings.itersLarge : settings.itersSmall, settings.repeats);
        if (comm.rank === 0) console.log(row);
      }
      if (mode === 'addon') comm.configure({ collectives: { jsFastPath: true } });
    }
  }
  if (settings.groupSizes) reportGroupSizes(comm);
  // The copy-rate limit, measured here in the same run: one memcpy of each message size (a
  // bcast must at least copy the message once into every reader) and, with allgather, of each
  // result (size × bytes: every rank must at least write the whole result once).
  if (comm.rank === 0) {
    const copies = new Set(sizesOf(settings));
    if (settings.collectives.some((c) => c === 'allgather' || c === 'gather' || c === 'scatter' || c === 'alltoall'))
      for (const bytes of sizesOf(settings)) copies.add(bytes * comm.size);
    for (const bytes of [...copies].sort((x, y) => x - y)) {
      const iterations = bytes > settings.largeBytes ? settings.itersLarge : settings.itersSmall;
      const row: BenchRow = { collective: 'memcpy', mode: 'memcpy', bytes, avgUs: memcpyUs(bytes, iterations), minUs: 0, maxUs: 0, iterations };
      row.minUs = row.maxUs = row.avgUs;
      console.log(JSON.stringify(row));
    }
  }
  comm.close();
}

/** Rank 0 prints the distinct group sizes of every enabled level (gathered from every rank). */
function reportGroupSizes(comm: Communicator): void {
  const levels = comm.levels();
  const mine = Int32Array.from(levels, (l) => (l.enabled ? l.groupSize : 0));
  const all = new Int32Array(levels.length * comm.size);
  comm.allgatherSync(mine, all);
  if (comm.rank !== 0) return;
  const record: GroupSizesRecord = { groupSizes: [] };
  levels.forEach((l, i) => {
    const sizes = new Set<number>();
    for (let r = 0; r < comm.size; r++) if (all[r * levels.length + i]! > 1) sizes.add(all[r * levels.length + i]!);
    if (sizes.size > 0) record.groupSizes.push({ level: l.name, sizes: [...sizes].sort((x, y) => x - y) });
  });
  console.log(JSON.stringify(record));
}

/** µs for one copy of `bytes` between two buffers, the source changing on every copy. */
function memcpyUs(bytes: number, iterations: number): number {
  const from = new Uint8Array(bytes);
  const to = new Uint8Array(bytes);
  for (let k = 0; k < Math.max(10, iterations / 5); k++) to.set(from);
  const start = process.hrtime.bigint();
  for (let k = 0; k < iterations; k++) {
    from[k % bytes] = k;
    to.set(from);
  }
  return Number(process.hrtime.bigint() - start) / 1000 / iterations;
}

// Started as a script by the launcher: the settings come in the environment.
if (process.env.TOPOCOLL_BENCH !== undefined) {
  await benchMain(JSON.parse(process.env.TOPOCOLL_BENCH) as BenchSettings);
}
