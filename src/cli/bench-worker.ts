/**
 * One rank of `topocoll bench` (started by the launcher). Measures each collective the way the
 * OSU micro-benchmarks do — warm-up, then a timed loop of back-to-back calls, per-rank mean —
 * and prints one JSON line per (collective, mode, size) on rank 0 with the average, minimum and
 * maximum over ranks. The send data changes on every iteration so caches do not flatter.
 */
import { Communicator } from '../communicator.js';
import { init } from '../runtime/init.js';

export interface BenchSettings {
  collectives: ('barrier' | 'bcast' | 'reduce' | 'allreduce')[];
  modes: ('sync' | 'async')[];
  minBytes: number;
  maxBytes: number;
  itersSmall: number;
  itersLarge: number;
  /** Messages above this many bytes use itersLarge. */
  largeBytes: number;
}

export interface BenchRow {
  collective: string;
  mode: string;
  bytes: number;
  avgUs: number;
  minUs: number;
  maxUs: number;
  iterations: number;
}

export function sizesOf(s: BenchSettings): number[] {
  const sizes: number[] = [];
  for (let b = s.minBytes; b <= s.maxBytes; b *= 2) sizes.push(b);
  return sizes;
}

async function measure(comm: Communicator, collective: BenchSettings['collectives'][number], mode: string, bytes: number, iterations: number): Promise<number> {
  const elems = Math.max(1, bytes >> 2);
  const ints = new Int32Array(elems).map((_, i) => i);
  const out = new Int32Array(elems);
  const raw = new Uint8Array(Math.max(bytes, 1)).subarray(0, bytes);
  const once = async (k: number): Promise<void> => {
    ints[k % elems] = k;
    if (bytes > 0) raw[k % bytes] = k & 0xff;
    if (mode === 'sync') {
      if (collective === 'barrier') comm.barrierSync();
      else if (collective === 'bcast') comm.bcastSync(raw, 0);
      else if (collective === 'reduce') comm.reduceSync(ints, comm.rank === 0 ? out : null, 'sum', 0);
      else comm.allreduceSync(ints, out, 'sum');
    } else if (collective === 'barrier') await comm.barrier();
    else if (collective === 'bcast') await comm.bcast(raw, 0);
    else if (collective === 'reduce') await comm.reduce(ints, comm.rank === 0 ? out : null, 'sum', 0);
    else await comm.allreduce(ints, out, 'sum');
  };
  const warmup = Math.max(10, Math.floor(iterations / 10));
  comm.barrierSync();
  for (let k = 0; k < warmup; k++) await once(k);
  comm.barrierSync();
  const start = process.hrtime.bigint();
  for (let k = 0; k < iterations; k++) await once(k);
  return Number(process.hrtime.bigint() - start) / 1000 / iterations;
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
      const sizes = collective === 'barrier' ? [0] : sizesOf(settings);
      // Settle the JIT, the caches and the CPU clocks before the first measured size.
      await measure(comm, collective, mode, sizes[0]!, Math.max(2000, settings.itersSmall));
      for (const bytes of sizes) {
        const iterations = bytes > settings.largeBytes ? settings.itersLarge : settings.itersSmall;
        const us = await measure(comm, collective, mode, bytes, iterations);
        const row: BenchRow = { collective, mode, bytes, avgUs: across(us, 'sum') / comm.size, minUs: across(us, 'min'), maxUs: across(us, 'max'), iterations };
        if (comm.rank === 0) console.log(JSON.stringify(row));
      }
    }
  }
  comm.close();
}

// Started as a script by the launcher: the settings come in the environment.
if (process.env.TOPOCOLL_BENCH !== undefined) {
  await benchMain(JSON.parse(process.env.TOPOCOLL_BENCH) as BenchSettings);
}
