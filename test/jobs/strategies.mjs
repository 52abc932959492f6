// A rank of a multi-process test job (started by `topocoll run --config …`): runs bcast, reduce
// and allreduce with whatever per-level algorithms the configuration chose, over sizes on both
// sides of the small/large threshold (and across several segments), every root, a few
// datatypes and operators, IN_PLACE, and non-commutative user operators; checks every result
// against a reference recomputed here from what every rank's input is, and that floating-point
// allreduce results are bitwise identical on every rank. Prints `rank R ok N` or throws.
//
// Arguments: the sizes to test, in elements (default: a list spanning 0 … 300 000).
import { init, IN_PLACE, userOp } from 'topocoll';

const comm = await init();
const { rank, size } = comm;
let checks = 0;
const given = process.argv.slice(2).map(Number).filter((n) => Number.isInteger(n) && n >= 0);
const SIZES = given.length > 0 ? given : [0, 1, 3, 17, 1000, 16411, 70001, 300000];

function expectEqual(got, want, what) {
  checks++;
  if (got.length !== want.length) throw new Error(`rank ${rank}: ${what}: length ${got.length}, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    if (got[i] !== want[i]) throw new Error(`rank ${rank}: ${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

// Integer inputs: sums and maxima checked exactly.
const intInput = (r, i) => ((r * 131 + i * 7) % 1009) - 500;
const intSum = (n) => Int32Array.from({ length: n }, (_, i) => {
  let s = 0;
  for (let r = 0; r < size; r++) s += intInput(r, i);
  return s;
});
const intMax = (n) => Int32Array.from({ length: n }, (_, i) => {
  let m = -Infinity;
  for (let r = 0; r < size; r++) m = Math.max(m, intInput(r, i));
  return m;
});
// Float inputs whose sums round: the order of additions shows in the last bits.
const floatInput = (r, i) => Math.sin(r * 12.9898 + i * 78.233) * 43758.5453;

for (const n of SIZES) {
  const roots = n <= 1000 ? Array.from({ length: size }, (_, r) => r) : [size - 1, 0];
  for (const root of roots) {
    // bcast
    const buf = new Float64Array(n);
    if (rank === root) for (let i = 0; i < n; i++) buf[i] = root * 1e6 + i + 0.25;
    comm.bcastSync(buf, root);
    expectEqual(buf, Float64Array.from({ length: n }, (_, i) => root * 1e6 + i + 0.25), `bcast n=${n} root=${root}`);
    // reduce (sum), and IN_PLACE at the root
    const mine = Int32Array.from({ length: n }, (_, i) => intInput(rank, i));
    const out = rank === root ? new Int32Array(n) : null;
    comm.reduceSync(mine, out, 'sum', root);
    if (rank === root) expectEqual(out, intSum(n), `reduce sum n=${n} root=${root}`);
    if (rank === root) {
      const inPlace = Int32Array.from(mine);
      await comm.reduce(IN_PLACE, inPlace, 'max', root);
      expectEqual(inPlace, intMax(n), `reduce IN_PLACE max n=${n} root=${root}`);
    } else {
      await comm.reduce(mine, null, 'max', root);
    }
  }
  // allreduce: exact integers, then floats compared bitwise across ranks
  const mine = Int32Array.from({ length: n }, (_, i) => intInput(rank, i));
  const sum = new Int32Array(n);
  comm.allreduceSync(mine, sum, 'sum');
  expectEqual(sum, intSum(n), `allreduce sum n=${n}`);
  const inPlace = Int32Array.from(mine);
  await comm.allreduce(IN_PLACE, inPlace, 'max');
  expectEqual(inPlace, intMax(n), `allreduce IN_PLACE max n=${n}`);

  const floats = Float64Array.from({ length: n }, (_, i) => floatInput(rank, i));
  const result = new Float64Array(n);
  comm.allreduceSync(floats, result, 'sum');
  for (let i = 0; i < n; i++) {
    let want = 0;
    for (let r = 0; r < size; r++) want += floatInput(r, i);
    if (Math.abs(result[i] - want) > 1e-9 * size * 43758.5453) throw new Error(`rank ${rank}: allreduce float sum n=${n}: element ${i} is ${result[i]}, expected about ${want}`);
  }
  // Every rank's bits equal rank 0's: broadcast rank 0's result and compare.
  const bits = new Float64Array(result);
  comm.bcastSync(bits, 0);
  expectEqual(new BigUint64Array(result.buffer), new BigUint64Array(bits.buffer), `allreduce float sum n=${n}: bits equal rank 0's`);
  // Repeating the call gives the same bits (deterministic for the same inputs and placement).
  const again = new Float64Array(n);
  comm.allreduceSync(floats, again, 'sum');
  expectEqual(new BigUint64Array(again.buffer), new BigUint64Array(result.buffer), `allreduce float sum n=${n}: repeatable`);
}

// Non-commutative user operators: `first` keeps its left operand, `last` its right one, so the
// result names the rank that came first or last in the reduction order — rank order says 0 and
// size − 1.
const first = userOp((a) => a, { commutative: false });
const last = userOp((_a, b) => b, { commutative: false });
for (const n of [1, 5, 4099]) {
  const mine = new Float64Array(n).fill(rank);
  const lo = new Float64Array(n);
  const hi = new Float64Array(n);
  comm.allreduceSync(mine, lo, first);
  comm.allreduceSync(mine, hi, last);
  expectEqual(lo, new Float64Array(n).fill(0), `allreduce non-commutative first n=${n}`);
  expectEqual(hi, new Float64Array(n).fill(size - 1), `allreduce non-commutative last n=${n}`);
  for (const root of [0, size - 1]) {
    const out = rank === root ? new Float64Array(n) : null;
    comm.reduceSync(mine, out, last, root);
    if (rank === root) expectEqual(out, new Float64Array(n).fill(size - 1), `reduce non-commutative last n=${n} root=${root}`);
  }
}

comm.barrierSync();
console.log(`rank ${rank} ok ${checks}`);
comm.close();
