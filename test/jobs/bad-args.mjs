// @ts-check
// Ranks other than the root pass IN_PLACE to reduce: each must get EINVAL before anything is
// sent, so the next (correct) collectives still line up and give the right result. Then a user
// operator throws mid-collective.
import { init, IN_PLACE, userOp } from 'topocoll';

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
