/**
 * One rank of `topocoll tune shm` (started by the launcher, two ranks on one node). Measures
 * what the S0 cost model needs and prints JSON lines on rank 0:
 * - `copy` / `largecopy`: the copy rate of one core (bytes/µs), from 1 MiB copies (cached) and
 *   16 MiB copies (memory-bound);
 * - `writeshared` / `readremote`: copying into lines another core has read, and out of lines it
 *   has just written (256 KiB, cores 0 and 1);
 * - `pingpong` / `stream`: µs per inline bcast when the root alternates (every call waits for a
 *   notification from the other rank) and when it stays (the root streams ahead);
 * - `bcast`: µs of single broadcasts of given sizes (a barrier before each; each rank's median
 *   call, the slowest rank counts), for the predicted-versus-measured table;
 * - `streamed`: µs per broadcast of back-to-back broadcasts (the pipeline's throughput), for the
 *   model's fit.
 */
import { cpus } from 'node:os';
import { crossCoreRates } from '../native.js';
import { init } from '../init.js';

export interface TuneSettings {
  /** Single broadcasts (a barrier before each). */
  sizes: number[];
  /** Back-to-back broadcasts (the pipeline's throughput, for the model's fit). */
  streamed?: number[];
  iterations: number;
}

export async function tuneMain(settings: TuneSettings): Promise<void> {
  const comm = await init();
  const out = (o: object) => comm.rank === 0 && console.log(JSON.stringify(o));
  const max = new Float64Array(1);
  const slowest = (us: number): number => {
    comm.allreduceSync(Float64Array.of(us), max, 'max');
    return max[0]!;
  };

  if (comm.rank === 0) {
    const from = new Uint8Array(1 << 20);
    const to = new Uint8Array(1 << 20);
    for (let k = 0; k < 200; k++) to.set(from);
    const start = process.hrtime.bigint();
    for (let k = 0; k < 2000; k++) {
      from[k] = k;
      to.set(from);
    }
    const us = Number(process.hrtime.bigint() - start) / 1000 / 2000;
    out({ kind: 'copy', bytesPerUs: (1 << 20) / us });
    // Beyond the caches: 16 MiB copies.
    const bigFrom = new Uint8Array(16 << 20);
    const bigTo = new Uint8Array(16 << 20);
    bigTo.set(bigFrom);
    const bigStart = process.hrtime.bigint();
    for (let k = 0; k < 20; k++) {
      bigFrom[k] = k;
      bigTo.set(bigFrom);
    }
    const bigUs = Number(process.hrtime.bigint() - bigStart) / 1000 / 20;
    out({ kind: 'largecopy', bytesPerUs: (16 << 20) / bigUs });
    // Both copies of a bcast across the two first cores (why the pipeline is slower than memcpy).
    if (cpus().length >= 2) {
      const rates = crossCoreRates(256 << 10, 200, 0, 1);
      out({ kind: 'writeshared', bytesPerUs: rates.writeShared });
      out({ kind: 'readremote', bytesPerUs: rates.readRemote });
    }
  }

  const small = new Uint8Array(8);
  const loop = (iterations: number, rootOf: (k: number) => number): number => {
    comm.barrierSync();
    const start = process.hrtime.bigint();
    for (let k = 0; k < iterations; k++) comm.bcastSync(small, rootOf(k));
    return Number(process.hrtime.bigint() - start) / 1000 / iterations;
  };
  loop(settings.iterations, (k) => k % comm.size);
  out({ kind: 'pingpong', us: slowest(loop(settings.iterations, (k) => k % comm.size)) });
  out({ kind: 'stream', us: slowest(loop(settings.iterations, () => 0)) });

  for (const bytes of settings.sizes) {
    const buf = new Uint8Array(bytes);
    const iterations = Math.max(20, Math.min(settings.iterations, Math.floor((settings.iterations * 4096) / Math.max(bytes, 4096))));
    const times = new Float64Array(iterations);
    for (let k = 0; k < iterations + 5; k++) {
      buf[k % Math.max(1, bytes)] = k;
      comm.barrierSync();
      const start = process.hrtime.bigint();
      comm.bcastSync(buf, 0);
      if (k >= 5) times[k - 5] = Number(process.hrtime.bigint() - start) / 1000;
    }
    // Median: occasional preemption by other load would skew a mean.
    times.sort();
    out({ kind: 'bcast', bytes, us: slowest(times[iterations >> 1]!) });
  }

  for (const bytes of settings.streamed ?? []) {
    const buf = new Uint8Array(bytes);
    const iterations = Math.max(20, Math.floor((64 << 20) / bytes));
    for (let k = 0; k < 5; k++) comm.bcastSync(buf, 0);
    comm.barrierSync();
    const start = process.hrtime.bigint();
    for (let k = 0; k < iterations; k++) {
      buf[k % bytes] = k;
      comm.bcastSync(buf, 0);
    }
    out({ kind: 'streamed', bytes, us: slowest(Number(process.hrtime.bigint() - start) / 1000 / iterations) });
  }
  comm.close();
}

if (process.env.TOPOCOLL_TUNE !== undefined) {
  await tuneMain(JSON.parse(process.env.TOPOCOLL_TUNE) as TuneSettings);
}
