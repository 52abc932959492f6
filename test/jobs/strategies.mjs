// @ts-check
// A rank of a multi-process test job (started by `topocoll run --config …`): runs bcast, reduce,
// allreduce and allgather(v) with whatever per-level algorithms the configuration chose, over sizes on both
// sides of the small/large threshold (and across several segments), every root, a few
// datatypes and operators, IN_PLACE, and non-commutative user operators; checks every result
// against a reference recomputed here from what every rank's input is, and that floating-point
// allreduce results are bitwise identical on every rank. Prints `rank R ok N` or throws (and
// rank 0 first prints `levels of rank 0: <level>:<group size> …`); a failed check does not stop
// the job at once (see fail()), it throws the failures at the end.
//
// Arguments:
//   sizes            the sizes to test, in elements (default: a list spanning 0 … 300 000; none
//                    when one of the options below is given)
//   --types[=C,…]    also every datatype (Int8 … Float64, BigInt64, BigUint64, Uint8Clamped,
//                    Buffer) × every operator valid for it, for bcast, reduce (roots 0 and
//                    size − 1, IN_PLACE at the root) and allreduce (IN_PLACE too), at the counts
//                    C (default 1,17,kib; `kib` is the odd count just above 1100 bytes of the type)
//   --big=N          also bcast, reduce and allreduce of N Int32 / Float32 elements (and a Buffer
//                    of 4N + 3 bytes), roots 0 and size − 1, IN_PLACE, float sums bitwise equal
//   --cases=FILE     instead of the above, the cases of FILE (JSON: [{ config?, sizes?, types?,
//                    big? }], see Case) one after the other, each under its configuration
//                    (configure()); prints `rank R case K ok N` or `rank R case K failed: <the
//                    first failed check>` after case K. The non-commutative user operators run
//                    in every case.
import { arrayOf, combineInRankOrder } from './reference-op.mjs';
import { readFileSync } from 'node:fs';
import { init, IN_PLACE, userOp } from 'topocoll';

/** @import { ReduceOpName, RuntimeConfigInput, TypedArray } from 'topocoll' */
/**
 * A typed array or Buffer whose elements are numbers or bigints by type; the references below
 * mix the two as the datatype decides, which the checker cannot follow, so elements are `any`.
 * @typedef {TypedArray & { [i: number]: any }} Values
 */
/**
 * A datatype of the --types matrix.
 * @typedef {object} DataType
 * @property {string} name
 * @property {number} bytes
 * @property {(n: number) => Values} make
 * @property {boolean} integer
 * @property {number} [bits] integer types
 * @property {boolean} [signed] integer types
 * @property {boolean} [big] integer types: 64-bit, elements are bigints
 * @property {boolean} [clamped] Uint8ClampedArray
 */

const comm = await init();
const { rank, size } = comm;
let checks = 0;
const argv = process.argv.slice(2);
const given = argv.map(Number).filter((n, k) => argv[k] !== '' && Number.isInteger(n) && n >= 0);
const options = new Map(
  argv
    .filter((a) => a.startsWith('--'))
    .map((a) => {
      const [k, v] = a.slice(2).split('=');
      return [k, v];
    }),
);
const SIZES = given.length > 0 ? given : options.size > 0 ? [] : [0, 1, 3, 17, 1000, 16411, 70001, 300000];

// A check that fails records its message and the case goes on, so that every rank keeps calling
// the same collectives as the others and the later cases still run; the job fails at the end.
/** @type {string | undefined} the first failed check of the case running */
let failure;
/** @param {string} message */
function fail(message) {
  failure ??= message;
}

/**
 * @param {Values} got
 * @param {Values} want
 * @param {string} what
 */
function expectEqual(got, want, what) {
  checks++;
  if (got.length !== want.length) return fail(`rank ${rank}: ${what}: length ${got.length}, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    if (got[i] !== want[i]) return fail(`rank ${rank}: ${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

// The references depend on the rank, the size and what they are of, not on the configuration:
// a job of several cases makes each once and compares every case's results with it. (Only
// references are kept: the buffers the collectives are given are made anew every time.)
/** @type {Map<string, any>} */
const references = new Map();
/**
 * @template T
 * @param {string} key
 * @param {() => T} make
 * @returns {T}
 */
function reference(key, make) {
  if (!references.has(key)) references.set(key, make());
  return references.get(key);
}

// Integer inputs: sums and maxima checked exactly.
const intInput = (/** @type {number} */ r, /** @type {number} */ i) => ((r * 131 + i * 7) % 1009) - 500;
const intSum = (/** @type {number} */ n) =>
  reference(`int sum ${n}`, () =>
    arrayOf(Int32Array, n, (i) => {
      let s = 0;
      for (let r = 0; r < size; r++) s += intInput(r, i);
      return s;
    }),
  );
const intMax = (/** @type {number} */ n) =>
  reference(`int max ${n}`, () =>
    arrayOf(Int32Array, n, (i) => {
      let m = -Infinity;
      for (let r = 0; r < size; r++) m = Math.max(m, intInput(r, i));
      return m;
    }),
  );
// Float inputs whose sums round: the order of additions shows in the last bits.
const floatInput = (/** @type {number} */ r, /** @type {number} */ i) => Math.sin(r * 12.9898 + i * 78.233) * 43758.5453;

/**
 * bcast, reduce, allreduce and allgather(v) at the sizes given, every root up to 1000 elements.
 * @param {number[]} sizes
 */
async function sizeChecks(sizes) {
  for (const n of sizes) {
    const roots = n <= 1000 ? Array.from({ length: size }, (_, r) => r) : [size - 1, 0];
    for (const root of roots) {
      // bcast
      const buf = new Float64Array(n);
      if (rank === root) for (let i = 0; i < n; i++) buf[i] = root * 1e6 + i + 0.25;
      comm.bcastSync(buf, root);
      expectEqual(
        buf,
        arrayOf(Float64Array, n, (i) => root * 1e6 + i + 0.25),
        `bcast n=${n} root=${root}`,
      );
      // reduce (sum), and IN_PLACE at the root
      const mine = arrayOf(Int32Array, n, (i) => intInput(rank, i));
      const out = rank === root ? new Int32Array(n) : null;
      comm.reduceSync(mine, out, 'sum', root);
      if (rank === root) expectEqual(/** @type {Int32Array} */ (out), intSum(n), `reduce sum n=${n} root=${root}`);
      if (rank === root) {
        const inPlace = Int32Array.from(mine);
        await comm.reduce(IN_PLACE, inPlace, 'max', root);
        expectEqual(inPlace, intMax(n), `reduce IN_PLACE max n=${n} root=${root}`);
      } else {
        await comm.reduce(mine, null, 'max', root);
      }
    }
    // allreduce: exact integers, then floats compared bitwise across ranks
    const mine = arrayOf(Int32Array, n, (i) => intInput(rank, i));
    const sum = new Int32Array(n);
    comm.allreduceSync(mine, sum, 'sum');
    expectEqual(sum, intSum(n), `allreduce sum n=${n}`);
    const inPlace = Int32Array.from(mine);
    await comm.allreduce(IN_PLACE, inPlace, 'max');
    expectEqual(inPlace, intMax(n), `allreduce IN_PLACE max n=${n}`);

    const floats = arrayOf(Float64Array, n, (i) => floatInput(rank, i));
    const result = new Float64Array(n);
    comm.allreduceSync(floats, result, 'sum');
    const floatSum = reference(`float sum ${n}`, () =>
      arrayOf(Float64Array, n, (i) => {
        let want = 0;
        for (let r = 0; r < size; r++) want += floatInput(r, i);
        return want;
      }),
    );
    for (let i = 0; i < n; i++) {
      const want = /** @type {number} */ (floatSum[i]);
      if (Math.abs(/** @type {number} */ (result[i]) - want) > 1e-9 * size * 43758.5453) {
        fail(`rank ${rank}: allreduce float sum n=${n}: element ${i} is ${result[i]}, expected about ${want}`);
        break;
      }
    }
    // Every rank's bits equal rank 0's: broadcast rank 0's result and compare.
    const bits = new Float64Array(result);
    comm.bcastSync(bits, 0);
    expectEqual(new BigUint64Array(result.buffer), new BigUint64Array(bits.buffer), `allreduce float sum n=${n}: bits equal rank 0's`);
    // Repeating the call gives the same bits (deterministic for the same inputs and placement).
    const again = new Float64Array(n);
    comm.allreduceSync(floats, again, 'sum');
    expectEqual(new BigUint64Array(again.buffer), new BigUint64Array(result.buffer), `allreduce float sum n=${n}: repeatable`);
    // allgather (Sync, Promise IN_PLACE) and allgatherv with ragged counts (zeros included) of about n
    const block = (/** @type {number} */ r, /** @type {number} */ len) => arrayOf(Int32Array, len, (i) => intInput(r, i) * 3 + r);
    const gathered = (/** @type {number[]} */ counts) =>
      reference(`gathered ${counts.join(',')}`, () => {
        const out = new Int32Array(counts.reduce((a, b) => a + b, 0));
        let at = 0;
        counts.forEach((len, r) => {
          out.set(block(r, len), at);
          at += len;
        });
        return out;
      });
    const even = Array(size).fill(n);
    const all = new Int32Array(n * size);
    comm.allgatherSync(block(rank, n), all);
    expectEqual(all, gathered(even), `allgather n=${n}`);
    const allInPlace = new Int32Array(n * size);
    allInPlace.set(block(rank, n), rank * n);
    await comm.allgather(IN_PLACE, allInPlace);
    expectEqual(allInPlace, gathered(even), `allgather IN_PLACE n=${n}`);
    const ragged = Array.from({ length: size }, (_, r) => (r % 3 === 1 ? 0 : Math.max(0, n - r * 7)));
    const v = new Int32Array(ragged.reduce((a, b) => a + b, 0));
    comm.allgathervSync(block(rank, /** @type {number} */ (ragged[rank])), v, ragged);
    expectEqual(v, gathered(ragged), `allgatherv counts=${ragged.join(',')}`);
  }
}

// Non-commutative user operators: `first` keeps its left operand, `last` its right one, so the
// result names the rank that came first or last in the reduction order — rank order says 0 and
// size − 1.
const first = userOp((/** @type {number} */ a) => a, { commutative: false });
const last = userOp((/** @type {number} */ _a, /** @type {number} */ b) => b, { commutative: false });
function userOpChecks() {
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
      if (rank === root) expectEqual(/** @type {Float64Array} */ (out), new Float64Array(n).fill(size - 1), `reduce non-commutative last n=${n} root=${root}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Every datatype × every operator valid for it (--types).
//
// The reference is computed from every rank's input with exact arithmetic: integers as BigInt,
// then wrapped to the type's width with BigInt.asIntN / asUintN — the native kernels compute in
// the unsigned type of the same width, so signed overflow wraps two's-complement — or saturated
// at 255 for Uint8Clamped (whose inputs are never negative); floats with inputs chosen so that
// sums, products, minima and maxima are exact in any order. Results are compared as BigInt /
// Number with the reference, never through a typed array the library filled.

/** 32 well-mixed bits of a tuple of small integers. */
/** @param {...number} xs */
function hash32(...xs) {
  let h = 0x811c9dc5;
  for (const x of xs) {
    h = Math.imul(h ^ x, 0x01000193);
    h ^= h >>> 15;
    h = Math.imul(h, 0x2c1b3c6d);
    h ^= h >>> 12;
    h = Math.imul(h, 0x297a2d39);
    h ^= h >>> 15;
  }
  return h >>> 0;
}
const rand64 = (/** @type {number[]} */ ...xs) => (BigInt(hash32(...xs, 0x51)) << 32n) | BigInt(hash32(...xs, 0xa7));

/** @type {(name: string, bits: number, signed: boolean, make: DataType['make'], more?: { clamped?: boolean }) => DataType} */
const integer = (name, bits, signed, make, more = {}) => ({ name, bits, bytes: bits / 8, signed, make, integer: true, big: bits === 64, ...more });
/** @type {(name: string, bytes: number, make: DataType['make']) => DataType} */
const floating = (name, bytes, make) => ({ name, bytes, make, integer: false });
const TYPES = [
  integer('Int8Array', 8, true, (n) => new Int8Array(n)),
  integer('Uint8Array', 8, false, (n) => new Uint8Array(n)),
  integer('Buffer', 8, false, (n) => Buffer.alloc(n)),
  integer('Uint8ClampedArray', 8, false, (n) => new Uint8ClampedArray(n), { clamped: true }),
  integer('Int16Array', 16, true, (n) => new Int16Array(n)),
  integer('Uint16Array', 16, false, (n) => new Uint16Array(n)),
  integer('Int32Array', 32, true, (n) => new Int32Array(n)),
  integer('Uint32Array', 32, false, (n) => new Uint32Array(n)),
  integer('BigInt64Array', 64, true, (n) => new BigInt64Array(n)),
  integer('BigUint64Array', 64, false, (n) => new BigUint64Array(n)),
  floating('Float32Array', 4, (n) => new Float32Array(n)),
  floating('Float64Array', 8, (n) => new Float64Array(n)),
];
/** @type {ReduceOpName[]} */
const INT_OPS = ['sum', 'prod', 'min', 'max', 'band', 'bor', 'bxor', 'land', 'lor'];
/** @type {ReduceOpName[]} */
const FLOAT_OPS = ['sum', 'prod', 'min', 'max'];

/** @type {(ty: DataType, v: bigint) => bigint} */
const wrap = (ty, v) => (ty.signed ? BigInt.asIntN(/** @type {number} */ (ty.bits), v) : BigInt.asUintN(/** @type {number} */ (ty.bits), v));

/** Rank r's element i for type number t and operator op (a BigInt for integer types). */
/**
 * @param {DataType} ty
 * @param {number} t
 * @param {ReduceOpName} op
 * @param {number} r
 * @param {number} i
 * @returns {bigint}
 */
function matrixIntInput(ty, t, op, r, i) {
  const o = INT_OPS.indexOf(op);
  const h = rand64(t, o, r, i);
  switch (op) {
    case 'sum':
      // Full-width values overflow; Uint8Clamped mixes small values (sums below 255) and large ones.
      if (ty.clamped) return i % 2 === 0 ? h % 40n : h % 256n;
      return wrap(ty, h);
    case 'prod':
      if (ty.clamped) return i % 2 === 0 ? h % 4n : h % 256n;
      // Odd full-width values (the product wraps without becoming 0), any full-width values,
      // and small ones in −3 … 3 (products that fit the wider types).
      if (i % 3 === 0) return wrap(ty, h | 1n);
      if (i % 3 === 1) return wrap(ty, h);
      return ty.signed ? (h % 7n) - 3n : h % 4n;
    case 'band':
      return wrap(ty, h | rand64(t, o, r, i, 1)); // ~3/4 of the bits set
    case 'bor':
      return wrap(ty, h & rand64(t, o, r, i, 1)); // ~1/4 of the bits set
    case 'land':
    case 'lor': {
      // i % 3 = 0: nobody is 0; = 1: one rank is 0; = 2: everybody is 0, or all but one rank.
      const zero = i % 3 === 0 ? false : i % 3 === 1 ? r === i % size : i % 2 === 0 || r !== (i >> 1) % size;
      if (zero) return 0n;
      // Nonzero values whose low bits are 0 (the sign bit alone) must count as true too.
      if (i % 5 === 0) return wrap(ty, 1n << BigInt(/** @type {number} */ (ty.bits) - 1));
      const v = wrap(ty, h);
      return v === 0n ? 1n : v;
    }
    default:
      return wrap(ty, h); // min, max, bxor
  }
}

const PROD_FACTORS = [1, -1, 2, 0.5, 1.5, -0.25, 3, -1.5];
/** Rank r's element i for a float type: every sum, product, min and max of these is exact. */
/**
 * @param {DataType} ty
 * @param {number} t
 * @param {ReduceOpName} op
 * @param {number} r
 * @param {number} i
 * @returns {number}
 */
function matrixFloatInput(ty, t, op, r, i) {
  const h = hash32(t, FLOAT_OPS.indexOf(op), r, i);
  switch (op) {
    case 'sum':
      return ((h % 2001) - 1000) / 8;
    case 'prod':
      return /** @type {number} */ (PROD_FACTORS[h % PROD_FACTORS.length]);
    default: {
      if (h % 17 === 0) return i % 2 === 0 ? Infinity : -Infinity;
      const v = (h - 2 ** 31) * 1e-3 + hash32(t, r, i, 7) * 2 ** -40;
      return ty.bytes === 4 ? Math.fround(v) : v;
    }
  }
}

/**
 * @param {DataType} ty
 * @param {ReduceOpName} op
 * @param {any[]} vals numbers for float types, bigints for integer types
 * @returns {any}
 */
function referenceOf(ty, op, vals) {
  if (!ty.integer && (op === 'sum' || op === 'prod' || op === 'min' || op === 'max')) return combineInRankOrder(op, vals, 0, 1);
  /** @type {bigint} */
  const acc = combineInRankOrder(op, vals, 0n, 1n);
  if (ty.clamped) return acc > 255n ? 255n : acc;
  return wrap(ty, acc);
}

/** got (a typed array or Buffer) against want (BigInt or Number references). */
/**
 * @param {DataType} ty
 * @param {Values} got
 * @param {any[]} want
 * @param {string} what
 */
function expectValues(ty, got, want, what) {
  checks++;
  if (got.length !== want.length) return fail(`rank ${rank}: ${what}: length ${got.length}, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    const g = ty.integer ? BigInt(got[i]) : got[i];
    if (g !== want[i]) return fail(`rank ${rank}: ${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

/**
 * @param {DataType} ty
 * @param {any[]} values
 */
function filled(ty, values) {
  const a = ty.make(values.length);
  for (let i = 0; i < values.length; i++) a[i] = ty.big || !ty.integer ? values[i] : Number(values[i]);
  return a;
}

/**
 * @param {DataType} ty
 * @param {Values} a
 */
function copyOf(ty, a) {
  const c = ty.make(a.length);
  c.set(a);
  return c;
}

const reduceRoots = [...new Set([0, size - 1])];

/** @param {string[]} counts */
async function typeMatrix(counts) {
  for (const [t, ty] of TYPES.entries()) {
    const resolved = counts.map((c) => (c === 'kib' ? Math.ceil(1100 / ty.bytes) | 1 : Number(c)));
    for (const n of resolved) {
      // bcast of the type (its bytes, whatever their meaning)
      for (const root of reduceRoots) {
        const values = reference(`bcast ${t} ${n} ${root}`, () =>
          Array.from({ length: n }, (_, i) => (ty.integer ? matrixIntInput(ty, t, 'bxor', root, i) : matrixFloatInput(ty, t, 'min', root, i))),
        );
        const buf = rank === root ? filled(ty, values) : ty.make(n);
        comm.bcastSync(buf, root);
        expectValues(ty, buf, values, `bcast ${ty.name} n=${n} root=${root}`);
      }
      for (const op of ty.integer ? INT_OPS : FLOAT_OPS) {
        const input = ty.integer ? matrixIntInput : matrixFloatInput;
        // Every rank's inputs and their reduction.
        const { all, want } = reference(`${op} ${t} ${n}`, () => {
          const all = Array.from({ length: size }, (_, r) => Array.from({ length: n }, (_, i) => input(ty, t, op, r, i)));
          const want = Array.from({ length: n }, (_, i) =>
            referenceOf(
              ty,
              op,
              all.map((v) => v[i]),
            ),
          );
          return { all, want };
        });
        const what = `${ty.name} ${op} n=${n}`;
        const mine = filled(ty, /** @type {any[]} */ (all[rank]));

        const out = ty.make(n);
        comm.allreduceSync(mine, out, op);
        expectValues(ty, out, want, `allreduceSync ${what}`);
        const inPlace = copyOf(ty, mine);
        await comm.allreduce(IN_PLACE, inPlace, op);
        expectValues(ty, inPlace, want, `allreduce IN_PLACE ${what}`);

        for (const [k, root] of reduceRoots.entries()) {
          // One root through the Sync call, the other through the Promise.
          const recv = rank === root ? ty.make(n) : null;
          if (k === 0) comm.reduceSync(mine, recv, op, root);
          else await comm.reduce(mine, recv, op, root);
          if (rank === root) expectValues(ty, /** @type {Values} */ (recv), want, `reduce ${what} root=${root}`);
          if (rank === root) {
            const own = copyOf(ty, mine);
            if (k === 0) await comm.reduce(IN_PLACE, own, op, root);
            else comm.reduceSync(IN_PLACE, own, op, root);
            expectValues(ty, own, want, `reduce IN_PLACE ${what} root=${root}`);
          } else if (k === 0) await comm.reduce(mine, null, op, root);
          else comm.reduceSync(mine, null, op, root);
        }
        // The send buffer of the out-of-place calls is left as it was.
        expectValues(ty, mine, /** @type {any[]} */ (all[rank]), `send buffer after ${what}`);
      }
      if (!ty.integer) await inexactFloatSums(ty, t, n);
    }
  }
}

/** Every rank's bytes of `a` equal rank 0's (rank 0's broadcast and compared). */
/**
 * @param {Values} a
 * @param {string} what
 */
function expectSameBitsAsRank0(a, what) {
  const mine = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const zeros = Uint8Array.from(mine);
  comm.bcastSync(zeros, 0);
  checks++;
  for (let i = 0; i < mine.length; i++) {
    if (mine[i] !== zeros[i])
      return fail(
        `rank ${rank}: ${what}: byte ${i} differs from rank 0's (element ${Math.floor(i / a.BYTES_PER_ELEMENT)}: ${a[Math.floor(i / a.BYTES_PER_ELEMENT)]})`,
      );
  }
}

/**
 * @param {Values} a
 * @param {Values} b
 * @param {string} what
 */
function expectSameBits(a, b, what) {
  checks++;
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  if (x.length !== y.length) return fail(`rank ${rank}: ${what}: ${x.length} bytes, expected ${y.length}`);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return fail(`rank ${rank}: ${what}: byte ${i} differs`);
}

/**
 * Float sums that round (the order of additions shows in the last bits): within the rounding
 * bound of the exact sum, bitwise the same on every rank, the same again on a repeat and IN_PLACE.
 */
/**
 * @param {DataType} ty
 * @param {number} t
 * @param {number} n
 */
async function inexactFloatSums(ty, t, n) {
  const eps = ty.bytes === 4 ? 2 ** -24 : 2 ** -53;
  const value = (/** @type {number} */ r, /** @type {number} */ i) => {
    const v = Math.sin(r * 12.9898 + i * 78.233 + t) * 43758.5453;
    return ty.bytes === 4 ? Math.fround(v) : v;
  };
  const exact = reference(`inexact ${t} ${n}`, () =>
    Array.from({ length: n }, (_, i) => {
      let s = 0;
      let abs = 0;
      for (let r = 0; r < size; r++) {
        s += value(r, i);
        abs += Math.abs(value(r, i));
      }
      return [s, abs];
    }),
  );
  const near = (/** @type {Values} */ got, /** @type {string} */ what) => {
    checks++;
    for (let i = 0; i < n; i++) {
      const [s, abs] = /** @type {[number, number]} */ (exact[i]);
      if (!(Math.abs(got[i] - s) <= 2 * size * eps * abs)) return fail(`rank ${rank}: ${what}: element ${i} is ${got[i]}, expected about ${s}`);
    }
  };
  const mine = ty.make(n);
  for (let i = 0; i < n; i++) mine[i] = value(rank, i);
  const what = `${ty.name} inexact sum n=${n}`;
  const out = ty.make(n);
  comm.allreduceSync(mine, out, 'sum');
  near(out, `allreduceSync ${what}`);
  expectSameBitsAsRank0(out, `allreduceSync ${what}`);
  const again = ty.make(n);
  await comm.allreduce(mine, again, 'sum');
  expectSameBits(again, out, `allreduce ${what}: repeat`);
  const inPlace = copyOf(ty, mine);
  comm.allreduceSync(IN_PLACE, inPlace, 'sum');
  expectSameBitsAsRank0(inPlace, `allreduce IN_PLACE ${what}`);
  expectSameBits(inPlace, out, `allreduce IN_PLACE ${what}: same bits as out of place`);
  for (const root of reduceRoots) {
    const recv = rank === root ? ty.make(n) : null;
    comm.reduceSync(mine, recv, 'sum', root);
    if (rank === root) near(/** @type {Values} */ (recv), `reduce ${what} root=${root}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Big messages (--big=N): N Int32 / Float32 elements (4 MiB for N = 1 048 576), and an odd
// number of bytes, every element checked against the reference.
/** @param {number} n */
async function bigChecks(n) {
  const intIn = (/** @type {number} */ r, /** @type {number} */ i) => ((r * 7919 + i * 104729) % 2000003) - 1000001; // sums of up to 2147 ranks fit
  // Floats with full mantissas (their sums round) from a cheap hash (Math.sin of large arguments
  // is slow enough to dominate at a million elements).
  const floatIn = (/** @type {number} */ r, /** @type {number} */ i) =>
    Math.fround((Math.imul(i + 0x3c6ef372, 0x9e3779b1) ^ Math.imul(r + 1, 0x85ebca6b)) * 2 ** -21 * 1.1);
  for (const root of reduceRoots) {
    const f = new Float32Array(n);
    if (rank === root) for (let i = 0; i < n; i++) f[i] = floatIn(root, i);
    comm.bcastSync(f, root);
    checks++;
    for (let i = 0; i < n; i++)
      if (f[i] !== floatIn(root, i)) {
        fail(`rank ${rank}: bcast Float32 n=${n} root=${root}: element ${i} is ${f[i]}, expected ${floatIn(root, i)}`);
        break;
      }
    const bytes = Buffer.alloc(4 * n + 3);
    if (rank === root) for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + root * 7 + (i >> 12)) & 0xff;
    await comm.bcast(bytes, root);
    checks++;
    for (let i = 0; i < bytes.length; i++)
      if (bytes[i] !== ((i * 131 + root * 7 + (i >> 12)) & 0xff)) {
        fail(`rank ${rank}: bcast Buffer of ${bytes.length} bytes root=${root}: byte ${i} is ${bytes[i]}`);
        break;
      }
  }
  const intSumBig = (/** @type {number} */ i) => {
    let s = 0;
    for (let r = 0; r < size; r++) s += intIn(r, i);
    return s;
  };
  const intMinBig = (/** @type {number} */ i) => {
    let m = Infinity;
    for (let r = 0; r < size; r++) m = Math.min(m, intIn(r, i));
    return m;
  };
  /** @type {(got: Int32Array, want: (i: number) => number, what: string) => void} */
  const expectInts = (got, want, what) => {
    checks++;
    for (let i = 0; i < n; i++) if (got[i] !== want(i)) return fail(`rank ${rank}: ${what}: element ${i} is ${got[i]}, expected ${want(i)}`);
  };
  const mine = arrayOf(Int32Array, n, (i) => intIn(rank, i));
  for (const root of reduceRoots) {
    const recv = rank === root ? new Int32Array(n) : null;
    comm.reduceSync(mine, recv, 'sum', root);
    if (rank === root) expectInts(/** @type {Int32Array} */ (recv), intSumBig, `reduce Int32 sum n=${n} root=${root}`);
    if (rank === root) {
      const own = Int32Array.from(mine);
      await comm.reduce(IN_PLACE, own, 'min', root);
      expectInts(own, intMinBig, `reduce IN_PLACE Int32 min n=${n} root=${root}`);
    } else await comm.reduce(mine, null, 'min', root);
  }
  const sum = new Int32Array(n);
  comm.allreduceSync(mine, sum, 'sum');
  expectInts(sum, intSumBig, `allreduceSync Int32 sum n=${n}`);
  const own = Int32Array.from(mine);
  await comm.allreduce(IN_PLACE, own, 'min');
  expectInts(own, intMinBig, `allreduce IN_PLACE Int32 min n=${n}`);
  // Float32 sums: near the exact sum, and bitwise the same on every rank.
  const floats = arrayOf(Float32Array, n, (i) => floatIn(rank, i));
  const fsum = new Float32Array(n);
  comm.allreduceSync(floats, fsum, 'sum');
  checks++;
  for (let i = 0; i < n; i++) {
    let s = 0;
    let abs = 0;
    for (let r = 0; r < size; r++) {
      s += floatIn(r, i);
      abs += Math.abs(floatIn(r, i));
    }
    if (!(Math.abs(/** @type {number} */ (fsum[i]) - s) <= 2 * size * 2 ** -24 * abs)) {
      fail(`rank ${rank}: allreduce Float32 sum n=${n}: element ${i} is ${fsum[i]}, expected about ${s}`);
      break;
    }
  }
  expectSameBitsAsRank0(fsum, `allreduce Float32 sum n=${n}`);
  const fInPlace = Float32Array.from(floats);
  await comm.allreduce(IN_PLACE, fInPlace, 'sum');
  expectSameBits(fInPlace, fsum, `allreduce IN_PLACE Float32 sum n=${n}: same bits as out of place`);
}

// ---------------------------------------------------------------------------------------------
// The cases: the arguments' checks once, or (--cases=FILE) each case of the file in turn, in
// this one job, with its configuration switched in by configure() first.

/**
 * A case of --cases: the checks of the arguments of the same names, under a configuration.
 * @typedef {object} Case
 * @property {RuntimeConfigInput} [config] configure()'s settings before the case (none: those in force)
 * @property {number[]} [sizes]
 * @property {string[]} [types] the counts of --types
 * @property {number} [big]
 */
/** @type {Case[] | undefined} */
const cases = options.has('cases') ? JSON.parse(readFileSync(String(options.get('cases')), 'utf8')) : undefined;
/** @type {Case} */
const fromArguments = {
  sizes: SIZES,
  types: options.has('types') ? (options.get('types') ?? '1,17,kib').split(',') : undefined,
  big: options.has('big') ? Number(options.get('big')) : undefined,
};
/** @type {string[]} */
const failed = [];
for (const [k, c] of (cases ?? [fromArguments]).entries()) {
  if (c.config !== undefined) comm.configure(c.config);
  const before = checks;
  failure = undefined;
  await sizeChecks(c.sizes ?? []);
  userOpChecks();
  if (c.types !== undefined) await typeMatrix(c.types);
  if (c.big !== undefined) await bigChecks(c.big);
  if (failure !== undefined) failed.push(cases === undefined ? failure : `case ${k}: ${failure}`);
  if (cases !== undefined) console.log(failure === undefined ? `rank ${rank} case ${k} ok ${checks - before}` : `rank ${rank} case ${k} failed: ${failure}`);
}
if (failed.length > 0) throw new Error(failed.join('; '));

// Which levels rank 0 is grouped at (name:group size), for the tests to see the placement took.
if (rank === 0)
  console.log(
    `levels of rank 0: ${comm
      .levels()
      .filter((l) => l.enabled && l.groupSize > 1)
      .map((l) => `${l.name}:${l.groupSize}`)
      .join(' ')}`,
  );
comm.barrierSync();
console.log(`rank ${rank} ok ${checks}`);
comm.close();
