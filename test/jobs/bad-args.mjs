// @ts-check
// Ranks other than the root pass IN_PLACE to reduce: each must get EINVAL before anything is
// sent, so the next (correct) collectives still line up and give the right result. Then every
// rank makes argument errors of issue 40's collectives (alltoall and alltoallv above all) in each
// form — each a TopocollError EINVAL thrown (Sync, request) or rejected (Promise) before anything
// is sent — and prints `rank R refused N`; a correct alltoall and alltoallv after them line up
// and give what this rank computes they must (`rank R alltoall ok`). Then a user operator throws
// mid-collective.
import { init, IN_PLACE, isTopocollError, userOp } from 'topocoll';

const comm = await init();
if (comm.rank !== 0) {
  try {
    comm.reduceSync(IN_PLACE, new Int32Array(2), 'sum', 0);
  } catch (e) {
    console.log(`rank ${comm.rank} caught ${e.code}`);
  }
}
const out = new Int32Array(2);
comm.allreduceSync(Int32Array.of(comm.rank, 1), out, 'sum');
const want = (comm.size * (comm.size - 1)) / 2;
if (out[0] !== want || out[1] !== comm.size) throw new Error(`allreduce after the error gave ${out}`);
console.log(`rank ${comm.rank} ok`);

{
  const { rank, size } = comm;
  const n = 2;
  const whole = new Int32Array(n * size);
  const counts = Array.from({ length: size }, () => n);
  /** @type {[string, any, any[]][]} name, the collective's Sync name, its arguments */
  const mistakes = [
    ['alltoall: send does not divide among the ranks', 'alltoall', [new Int32Array(n * size + 1), new Int32Array(n * size + 1)]],
    ['alltoall: recv shorter than send', 'alltoall', [whole, new Int32Array(n * size - 1)]],
    ['alltoall: send and recv of different types', 'alltoall', [new Float32Array(n * size), whole]],
    ['alltoall: send and recv the same array', 'alltoall', [whole, whole]],
    ['alltoall: IN_PLACE with a recv that does not divide among the ranks', 'alltoall', [IN_PLACE, new Int32Array(n * size + 1)]],
    ['alltoall: recv not a typed array', 'alltoall', [whole, null]],
    ['alltoallv: sendCounts of the wrong length', 'alltoallv', [whole, counts.slice(1), new Int32Array(n * size), counts]],
    ['alltoallv: a negative recv count', 'alltoallv', [whole, counts, new Int32Array(n * size), counts.map((c, r) => (r === size - 1 ? -1 : c))]],
    ['alltoallv: a count that is not an integer', 'alltoallv', [whole, counts.map((c) => c + 0.5), new Int32Array(n * size), counts]],
    ['alltoallv: send shorter than its counts', 'alltoallv', [new Int32Array(n * size - 1), counts, new Int32Array(n * size), counts]],
    ['alltoallv: recv shorter than its counts', 'alltoallv', [whole, counts, new Int32Array(n * size - 1), counts]],
    ['alltoallv: IN_PLACE with recv shorter than recvCounts', 'alltoallv', [IN_PLACE, counts, new Int32Array(n * size - 1), counts]],
    ['reduceScatterBlock: send not size × recv.length', 'reduceScatterBlock', [new Int32Array(n * size + 1), new Int32Array(n), 'sum']],
    ['reduceScatter: counts of the wrong length', 'reduceScatter', [whole, new Int32Array(n), counts.slice(1), 'sum']],
    ['scan: an operator the type has not', 'scan', [new Float64Array(n), new Float64Array(n), 'band']],
    ['exscan: send and recv of different lengths', 'exscan', [new Int32Array(n), new Int32Array(n + 1), 'sum']],
    rank === 0
      ? ['gather: IN_PLACE at the root without recv', 'gather', [IN_PLACE, null, 0]]
      : ['gather: IN_PLACE off the root (MPI forbids it)', 'gather', [IN_PLACE, whole, 0]],
  ];
  let refused = 0;
  for (const [what, name, a] of mistakes) {
    const c = /** @type {any} */ (comm);
    for (const [form, attempt] of /** @type {[string, () => unknown][]} */ ([
      ['Sync', () => c[`${name}Sync`](...a)],
      ['Promise', () => c[name](...a)],
      ['request', () => c[`i${name}`](...a)],
    ])) {
      let error;
      try {
        await attempt();
      } catch (e) {
        error = e;
      }
      if (!isTopocollError(error) || error.code !== 'EINVAL')
        throw new Error(`rank ${rank}: ${what} (${form}) gave ${String(error)}, expected TopocollError EINVAL`);
      refused++;
    }
  }
  console.log(`rank ${rank} refused ${refused}`);

  // Nothing was sent: these meet every rank at its first call. Block (s, d) of the alltoall holds
  // 100·s + 10·d + i; alltoallv's rank s sends rank d (s + d) mod 3 elements of the same values.
  const value = (/** @type {number} */ s, /** @type {number} */ d, /** @type {number} */ i) => 100 * s + 10 * d + i;
  const send = Int32Array.from({ length: n * size }, (_, j) => value(rank, Math.floor(j / n), j % n));
  const recv = new Int32Array(n * size);
  comm.alltoallSync(send, recv);
  for (let j = 0; j < recv.length; j++) {
    const want = value(Math.floor(j / n), rank, j % n);
    if (recv[j] !== want) throw new Error(`rank ${rank}: alltoall after the errors: recv[${j}] is ${recv[j]}, expected ${want}`);
  }
  const len = (/** @type {number} */ s, /** @type {number} */ d) => (s + d) % 3;
  const sendCounts = Array.from({ length: size }, (_, d) => len(rank, d));
  const recvCounts = Array.from({ length: size }, (_, s) => len(s, rank));
  const sendv = Int32Array.from(sendCounts.flatMap((m, d) => Array.from({ length: m }, (_, i) => value(rank, d, i))));
  const wantv = Int32Array.from(recvCounts.flatMap((m, s) => Array.from({ length: m }, (_, i) => value(s, rank, i))));
  const recvv = new Int32Array(wantv.length);
  await comm.alltoallv(sendv, sendCounts, recvv, recvCounts);
  if (recvv.join() !== wantv.join()) throw new Error(`rank ${rank}: alltoallv after the errors gave ${recvv.join()}, expected ${wantv.join()}`);
  console.log(`rank ${rank} alltoall ok`);
}

// A user operator that throws where it runs: that rank reports it, the others learn of the abort.
const failing = userOp(
  () => {
    throw new Error('operator failed');
  },
  { commutative: true },
);
try {
  comm.allreduceSync(new Float64Array(4), new Float64Array(4), failing);
  console.log(`rank ${comm.rank} finished`);
} catch (e) {
  console.log(`rank ${comm.rank} caught ${e.code} ${/user-defined operator threw: operator failed/.test(e.message) ? 'operator' : 'abort'}`);
}
comm.close();
