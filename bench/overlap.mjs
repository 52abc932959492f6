// How much computation a request overlaps, measured as OSU's non-blocking benchmarks do
// (osu_ibcast, osu_iallreduce): per message size,
//   pure     the mean time of `start the request; wait()`;
//   compute  a JavaScript compute loop calibrated to take `pure`, timed alone inside the next;
//   total    the mean time of `start the request; compute; wait()`;
//   overlap  100 · (1 − (total − compute) / pure), at least 0.
// Each figure is the mean over ranks of each rank's mean, as OSU reports them. Bcast moves bytes
// from rank 0; allreduce sums int32 (bytes / 4 elements, at least 1), as bench/ompi/coll_latency.c.
//
// Run: npx topocoll run -n P bench/overlap.mjs [--collectives ibcast,iallreduce] [--min 4]
//      [--max 4194304] [--time-ms 200] [--one-sided [--poll-us N]]
// Rank 0 prints one JSON line per (collective, size): { impl, collective, p, bytes, pureUs,
// computeUs, totalUs, overlapPct, iterations }. bench/ompi/coll_overlap.c prints the same for
// Open MPI's MPI_Ibcast / MPI_Iallreduce; bench/overlap-table.mjs tabulates both.
//
// --one-sided measures S1's one-sided binomial bcast instead: after init every rank configures
// bcast.algorithm 'one-sided' (pollMicros: --poll-us, default 0 = the doorbell), each size's
// buffer is a shared window (allocShared, freed after the size), and only ibcast is measured
// (the default collective list becomes ibcast; asking for another is an error). Its rows have
// impl 'topocoll-one-sided' and one more field, estimateUs: S1's LogP/LogGP estimate
// (oneSidedBcastUs of src/algorithms/cost-model.ts, from the build) on the link parameters of
// the top level of comm.explain('bcast', bytes).
import { init } from 'topocoll';
import { oneSidedBcastUs } from '../dist/algorithms/cost-model.js';

const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const oneSided = argv.includes('--one-sided');
const collectives = option('--collectives', oneSided ? 'ibcast' : 'ibcast,iallreduce').split(',');
if (oneSided && collectives.some((c) => c !== 'ibcast')) {
  throw new Error(`--one-sided measures ibcast only (S1 is a bcast), but --collectives asks for ${collectives.join(',')}`);
}
const minBytes = Number(option('--min', '4'));
const maxBytes = Number(option('--max', String(4 << 20)));
// About this much time per phase and size, so that large sizes still run a few iterations.
const phaseMs = Number(option('--time-ms', '200'));

const comm = await init();
const { rank, size } = comm;
if (oneSided) comm.configure({ bcast: { algorithm: 'one-sided', pollMicros: Number(option('--poll-us', '0')) } });

// The compute loop: dependent floating-point work V8 cannot drop. `sink` keeps its result alive.
let sink = 0;
function work(n) {
  let x = sink + 1.0000001;
  for (let i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
  sink = x;
}
/** Loop iterations per µs on this rank, from a calibration of a few milliseconds. */
function calibrate() {
  work(1e6);
  let best = 0;
  for (let round = 0; round < 5; round++) {
    const n = 2e6;
    const t0 = process.hrtime.bigint();
    work(n);
    best = Math.max(best, n / (Number(process.hrtime.bigint() - t0) / 1e3));
  }
  return best;
}
const rate = calibrate();

const now = () => Number(process.hrtime.bigint()) / 1e3;
/** The mean over ranks of `x` (every rank passes its own). */
function meanOverRanks(x) {
  const out = new Float64Array(1);
  comm.allreduceSync(Float64Array.of(x), out, 'sum');
  return /** @type {number} */ (out[0]) / size;
}
/** The same iteration count on every rank: the least. */
function agreeIterations(n) {
  const out = new Float64Array(1);
  comm.allreduceSync(Float64Array.of(n), out, 'min');
  return Math.max(3, /** @type {number} */ (out[0]));
}

for (const collective of collectives) {
  for (let bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
    const buf = oneSided ? comm.allocShared(Uint8Array, bytes) : collective === 'ibcast' ? new Uint8Array(bytes) : new Int32Array(Math.max(1, bytes >> 2));
    const out = collective === 'ibcast' ? buf : new Int32Array(buf.length);
    const start = () => (collective === 'ibcast' ? comm.ibcast(buf, 0) : comm.iallreduce(buf, out, 'sum'));
    // Warm-up (the same count on every rank: they are collectives), then as many iterations as
    // fit in phaseMs at the warm-up's pace, the least over ranks.
    const warm = 20;
    const w0 = now();
    for (let i = 0; i < warm; i++) start().wait();
    const iterations = agreeIterations(Math.min(200_000, Math.ceil((warm * phaseMs * 1e3) / Math.max(1, now() - w0))));

    comm.barrierSync();
    let t0 = now();
    for (let i = 0; i < iterations; i++) start().wait();
    const pure = (now() - t0) / iterations;
    const pureMean = meanOverRanks(pure);

    const n = Math.max(1, Math.round(pureMean * rate));
    comm.barrierSync();
    let computeSum = 0;
    t0 = now();
    for (let i = 0; i < iterations; i++) {
      const r = start();
      const c0 = now();
      work(n);
      computeSum += now() - c0;
      r.wait();
    }
    const total = (now() - t0) / iterations;
    const totalMean = meanOverRanks(total);
    const computeMean = meanOverRanks(computeSum / iterations);
    const overlapPct = Math.max(0, 100 * (1 - (totalMean - computeMean) / pureMean));
    if (rank === 0) {
      const row = { impl: 'topocoll', collective, p: size, bytes, pureUs: pureMean, computeUs: computeMean, totalUs: totalMean, overlapPct, iterations };
      if (oneSided) {
        // Explanation.levels is bottom-up: the last is the top level. None (p = 1): no link, and
        // the estimate of p = 1 is 0 whatever the link.
        const top = comm.explain('bcast', bytes).levels.at(-1);
        const link = top?.linkParameters ?? { L: 0, os: 0, or: 0, g: 0, G: 0, Gx: 0 };
        Object.assign(row, { impl: 'topocoll-one-sided', estimateUs: oneSidedBcastUs(link, size, bytes) });
      }
      console.log(JSON.stringify(row));
    }
    if (oneSided) comm.freeShared(buf);
  }
}
comm.close();
