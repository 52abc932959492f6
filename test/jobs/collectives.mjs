// @ts-check
// A rank of a multi-process test job (started by `topocoll run`): runs every collective with
// every datatype, operator, root and size class, and checks each result against a reference
// computed here from the inputs every rank would have — an independent recomputation, not the
// library's own output. Prints one line `rank R ok N` or throws (non-zero exit).
//
// Arguments: [--big] also moves 1 MiB + 3 bytes; [--huge] also 64 MiB (allgather: 4 MiB + 1 per rank); [--quick] fewer sizes;
// [--smoke] for nodes of many ranks (64, 128 on 2 cores): still every collective but issue 40's
// (gather, scatter, alltoall, the reduce-scatters, scans: their section says why), but a few
// types, operators and sizes (1, 7, 1000, one 8 KiB allgather block, 64 KiB + a few bytes through
// the channels), roots 0…4, the middle rank and the last, allgather blocks of at most 8 KiB + 8;
// [--memory] at the end checks comm.sharedMemory() on a node of several ranks: under 10 MiB of
// segment per rank, channels made only for some pairs, within the outboxes, segment and windows
// within the budget; local rank 0 prints it as a line `memory {JSON}`;
// [--late M] a bcast of M MiB that the ranks off the root's node come to late; [--layer socket]
// makes the communicator with createCommunicator over the Unix-socket test layer
// (socket-layer.mjs, its sockets in $TOPOCOLL_P2P_DIR) instead of init().
import { inspect, isDeepStrictEqual } from 'node:util';
import { arrayOf, combineInRankOrder, isBigIntClass, sameBytes, TYPED_ARRAY_CLASSES } from './reference-op.mjs';
import { socketLayerOfJob } from './socket-layer.mjs';
import { createCommunicator, init, IN_PLACE, isTopocollError, userOp } from 'topocoll';

/** @import { ReduceOpName, TypedArray } from 'topocoll' */
/**
 * An element: a number, or a bigint for BigInt64Array and BigUint64Array. The references below
 * mix the two as the array type decides, which the checker cannot follow, so elements are `any`.
 * @typedef {any} Scalar
 */
/** @typedef {TypedArray & { [i: number]: Scalar }} Values */
/** @typedef {{ new (length: number): Values, from(src: ArrayLike<unknown>, map: (v: unknown, i: number) => Scalar): Values, readonly name: string }} ArrayType */

const argv = process.argv.slice(2);
const args = new Set(argv);
const layerKind = argv.includes('--layer') ? argv[argv.indexOf('--layer') + 1] : undefined;
if (layerKind !== undefined && layerKind !== 'socket') throw new Error(`--layer ${layerKind}: only socket is known`);
const layer = layerKind === 'socket' ? await socketLayerOfJob() : undefined;
const comm = layer !== undefined ? await createCommunicator(layer) : await init();
const { rank, size } = comm;
let checks = 0;

// Over a JavaScript layer, a communicator that spans nodes refuses blocking calls (the layer
// needs the event loop the call would hold): there every Sync call below becomes its Promise
// twin. Everywhere else `call` is the Sync form, exactly the calls this job always made.
const blocking = layer === undefined || comm.localSize === comm.size;
/** The name of the form `call` uses, for the checks' labels. */
const Sync = blocking ? 'Sync' : '';
const call = {
  /** @type {(...a: Parameters<typeof comm.allreduceSync>) => Promise<void> | void} */
  allreduce: (send, recv, op) => (blocking ? comm.allreduceSync(send, recv, op) : comm.allreduce(send, recv, op)),
  /** @type {(...a: Parameters<typeof comm.reduceSync>) => Promise<void> | void} */
  reduce: (send, recv, op, root) => (blocking ? comm.reduceSync(send, recv, op, root) : comm.reduce(send, recv, op, root)),
  /** @type {(...a: Parameters<typeof comm.bcastSync>) => Promise<void> | void} */
  bcast: (buf, root) => (blocking ? comm.bcastSync(buf, root) : comm.bcast(buf, root)),
  /** @type {(...a: Parameters<typeof comm.allgatherSync>) => Promise<void> | void} */
  allgather: (send, recv) => (blocking ? comm.allgatherSync(send, recv) : comm.allgather(send, recv)),
  /** @type {(...a: Parameters<typeof comm.allgathervSync>) => Promise<void> | void} */
  allgatherv: (send, recv, counts) => (blocking ? comm.allgathervSync(send, recv, counts) : comm.allgatherv(send, recv, counts)),
  /** @type {(...a: Parameters<typeof comm.barrierSync>) => Promise<void> | void} */
  barrier: () => (blocking ? comm.barrierSync() : comm.barrier()),
  /** @type {(...a: Parameters<typeof comm.gatherSync>) => Promise<void> | void} */
  gather: (send, recv, root) => (blocking ? comm.gatherSync(send, recv, root) : comm.gather(send, recv, root)),
  /** @type {(...a: Parameters<typeof comm.gathervSync>) => Promise<void> | void} */
  gatherv: (send, recv, counts, root) => (blocking ? comm.gathervSync(send, recv, counts, root) : comm.gatherv(send, recv, counts, root)),
  /** @type {(...a: Parameters<typeof comm.scatterSync>) => Promise<void> | void} */
  scatter: (send, recv, root) => (blocking ? comm.scatterSync(send, recv, root) : comm.scatter(send, recv, root)),
  /** @type {(...a: Parameters<typeof comm.scattervSync>) => Promise<void> | void} */
  scatterv: (send, recv, counts, root) => (blocking ? comm.scattervSync(send, recv, counts, root) : comm.scatterv(send, recv, counts, root)),
  /** @type {(...a: Parameters<typeof comm.alltoallSync>) => Promise<void> | void} */
  alltoall: (send, recv) => (blocking ? comm.alltoallSync(send, recv) : comm.alltoall(send, recv)),
  /** @type {(...a: Parameters<typeof comm.alltoallvSync>) => Promise<void> | void} */
  alltoallv: (send, sendCounts, recv, recvCounts) =>
    blocking ? comm.alltoallvSync(send, sendCounts, recv, recvCounts) : comm.alltoallv(send, sendCounts, recv, recvCounts),
  /** @type {(...a: Parameters<typeof comm.reduceScatterBlockSync>) => Promise<void> | void} */
  reduceScatterBlock: (send, recv, op) => (blocking ? comm.reduceScatterBlockSync(send, recv, op) : comm.reduceScatterBlock(send, recv, op)),
  /** @type {(...a: Parameters<typeof comm.reduceScatterSync>) => Promise<void> | void} */
  reduceScatter: (send, recv, counts, op) => (blocking ? comm.reduceScatterSync(send, recv, counts, op) : comm.reduceScatter(send, recv, counts, op)),
  /** @type {(...a: Parameters<typeof comm.scanSync>) => Promise<void> | void} */
  scan: (send, recv, op) => (blocking ? comm.scanSync(send, recv, op) : comm.scan(send, recv, op)),
};

if (layer !== undefined) {
  // Over the layer: blocking calls (and configure()) are refused with EINVAL across nodes,
  // before anything is sent (the collectives below would mismatch otherwise), and work on one node.
  /** @type {(what: string, f: () => void) => void} */
  const refused = (what, f) => {
    let error;
    try {
      f();
    } catch (e) {
      error = e;
    }
    if (blocking) {
      if (error !== undefined) throw error;
    } else if (!isTopocollError(error) || error.code !== 'EINVAL') {
      throw new Error(`${what} across nodes over a JavaScript layer: expected TopocollError EINVAL, got ${String(error)}`);
    }
    checks++;
  };
  refused('barrierSync()', () => comm.barrierSync());
  refused('configure({})', () => comm.configure({}));
}

const TYPES = /** @type {ArrayType[]} */ (/** @type {unknown} */ (TYPED_ARRAY_CLASSES));
const isBig = isBigIntClass;
const isFloat = (/** @type {ArrayType} */ T) => T === Float32Array || T === Float64Array;
/** @type {ReduceOpName[]} */
const OPS = ['sum', 'prod', 'min', 'max', 'band', 'bor', 'bxor', 'land', 'lor'];
const opsFor = (/** @type {ArrayType} */ T) => (isFloat(T) ? OPS.slice(0, 4) : OPS);
const smoke = args.has('--smoke');
const SIZES = smoke ? [1, 7] : args.has('--quick') ? [0, 1, 5] : [0, 1, 2, 3, 4, 7, 33, 1000];
/** The typed array class of that name. */
const typeNamed = (/** @type {string} */ name) => {
  const T = TYPES.find((t) => t.name === name);
  if (T === undefined) throw new Error(`no typed array class ${name}`);
  return T;
};
/** The (type, operator) pairs of the allreduce and reduce checks: all of them, or a few with --smoke. */
/** @type {[ArrayType, ReduceOpName][]} */
const PAIRS = smoke
  ? /** @type {[string, ReduceOpName][]} */ ([
      ['Int32Array', 'sum'],
      ['Float64Array', 'max'],
      ['BigInt64Array', 'prod'],
      ['Uint8Array', 'bxor'],
      ['Float32Array', 'min'],
      ['Int16Array', 'land'],
    ]).map(([name, op]) => [typeNamed(name), op])
  : TYPES.flatMap((T) => opsFor(T).map((op) => /** @type {[ArrayType, ReduceOpName]} */ ([T, op])));

/** Input of rank r at index i for operator op: small values so every float result is exact. */
/**
 * @param {ArrayType} T
 * @param {ReduceOpName} op
 * @param {number} r
 * @param {number} i
 * @returns {Scalar}
 */
function input(T, op, r, i) {
  let v;
  switch (op) {
    case 'sum':
      v = ((r * 7 + i * 3) % 11) - (T.name.startsWith('Uint') || T === BigUint64Array ? 0 : 5);
      break;
    case 'prod':
      v = 1 + ((r + i) % 2);
      break; // 1 or 2: 2^8 at most with 8 ranks
    case 'min':
    case 'max':
      v = ((r * 31 + i * 17) % 100) - (T.name.startsWith('Uint') || T === BigUint64Array ? 0 : 50);
      break;
    case 'land':
    case 'lor':
      v = (r + i) % 3 === 0 ? 0 : 1 + (i % 5);
      break;
    default:
      v = (r * 37 + i * 11 + 5) & 0x7f;
      break;
  }
  return isBig(T) ? BigInt(v) : v;
}

/**
 * @param {ArrayType} T
 * @param {ReduceOpName} op
 * @param {number} r
 * @param {number} n
 */
function fill(T, op, r, n) {
  const a = new T(n);
  for (let i = 0; i < n; i++) a[i] = input(T, op, r, i);
  return a;
}

/** The reduction of all ranks' inputs, computed in plain JS and stored into T (wrapping/clamping as T does). */
/**
 * @param {ArrayType} T
 * @param {ReduceOpName} op
 * @param {number} n
 */
function reference(T, op, n) {
  const out = new T(n);
  for (let i = 0; i < n; i++) {
    /** @type {Scalar[]} */
    const vals = [];
    for (let r = 0; r < size; r++) vals.push(input(T, op, r, i));
    const big = isBig(T);
    const zero = big ? 0n : 0;
    /** @type {Scalar} */
    let acc = combineInRankOrder(op, vals, zero, big ? 1n : 1);
    if (T === Uint8ClampedArray) acc = Math.min(255, acc);
    if (T !== Uint8ClampedArray && !big && !isFloat(T)) {
      // Integer types wrap modulo 2^bits, like the typed array's own conversion.
      const tmp = new T(1);
      tmp[0] = Number(acc);
      acc = tmp[0];
      out[i] = acc;
      continue;
    }
    out[i] = acc;
  }
  return out;
}

/**
 * @param {Values} got
 * @param {Values} want
 * @param {string} what
 */
function expectEqual(got, want, what) {
  checks++;
  if (got.length !== want.length) throw new Error(`${what}: length ${got.length}, expected ${want.length}`);
  // The same bytes are equal elements (a memcmp); else the loop finds the one that differs.
  if (sameBytes(got, want)) return;
  for (let i = 0; i < want.length; i++) {
    if (got[i] !== want[i] && !(Number.isNaN(got[i]) && Number.isNaN(want[i]))) {
      throw new Error(`${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
    }
  }
}

/** The roots of reduce and bcast: every rank, or with --smoke the first five, the middle one and the last. */
const roots = smoke ? [...new Set([0, 1, 2, 3, 4, size >> 1, size - 1].filter((r) => r < size))] : Array.from({ length: size }, (_, r) => r);

// Allreduce and reduce: every type × operator × size (--smoke: a few pairs); roots rotate with the size.
for (const [T, op] of PAIRS) {
  for (const [k, n] of SIZES.entries()) {
    const want = reference(T, op, n);
    const mine = fill(T, op, rank, n);
    const out = new T(n);
    await call.allreduce(mine, out, op);
    expectEqual(out, want, `allreduce${Sync} ${T.name} ${op} n=${n}`);

    const inPlace = fill(T, op, rank, n);
    await comm.allreduce(IN_PLACE, inPlace, op);
    expectEqual(inPlace, want, `allreduce IN_PLACE ${T.name} ${op} n=${n}`);

    const root = roots[(k + TYPES.indexOf(T)) % roots.length];
    const result = rank === root ? new T(n) : null;
    await call.reduce(mine, result, op, root);
    if (rank === root) expectEqual(/** @type {Values} */ (result), want, `reduce${Sync} ${T.name} ${op} n=${n} root=${root}`);
  }
}

// With --smoke, 64 KiB and a few bytes: past the shared area's 8 KiB, through the channels
// (allreduce, reduce) and the bcast engine, from two roots. Before the reduces and bcasts at
// several roots below: their trees then ask for channels to more peers once the channels of
// these large messages are made, as in a program that works on large data first.
if (smoke) {
  const m = (64 << 10) / 4 + 3;
  const mine = arrayOf(Uint32Array, m, (i) => (i * 5 + rank * 3) % 1000);
  const want = arrayOf(Uint32Array, m, (i) => {
    let s = 0;
    for (let r = 0; r < size; r++) s += (i * 5 + r * 3) % 1000;
    return s;
  });
  const out = new Uint32Array(m);
  await call.allreduce(mine, out, 'sum');
  expectEqual(out, want, `allreduce${Sync} 64 KiB + 12`);
  const root = size >> 1;
  const result = rank === root ? new Uint32Array(m) : null;
  await call.reduce(mine, result, 'sum', root);
  if (rank === root) expectEqual(/** @type {Values} */ (result), want, `reduce${Sync} 64 KiB + 12 root=${root}`);
  for (const r of [0, size - 1]) {
    const buf = new Uint8Array((64 << 10) + 3);
    if (rank === r) for (let i = 0; i < buf.length; i++) buf[i] = (i * 11 + r) & 0xff;
    await call.bcast(buf, r);
    expectEqual(
      buf,
      arrayOf(Uint8Array, buf.length, (i) => (i * 11 + r) & 0xff),
      `bcast${Sync} 64 KiB + 3 root=${r}`,
    );
  }
}

// Reduce and bcast at every root, Sync and Promise.
for (const root of roots) {
  for (const n of smoke ? [1, 1000] : [0, 1, 5, 1000]) {
    const want = reference(Int32Array, 'sum', n);
    const mine = fill(Int32Array, 'sum', rank, n);
    if (rank === root) {
      const inPlace = fill(Int32Array, 'sum', rank, n);
      await comm.reduce(IN_PLACE, inPlace, 'sum', root);
      expectEqual(inPlace, want, `reduce IN_PLACE n=${n} root=${root}`);
    } else {
      await comm.reduce(mine, null, 'sum', root);
    }
    const buf = new Float64Array(n);
    if (rank === root) for (let i = 0; i < n; i++) buf[i] = root * 1000 + i + 0.5;
    await call.bcast(buf, root);
    expectEqual(
      buf,
      arrayOf(Float64Array, n, (i) => root * 1000 + i + 0.5),
      `bcast${Sync} n=${n} root=${root}`,
    );
    const bytes = new Uint8Array(n + 3);
    if (rank === root) for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7 + root) & 0xff;
    await comm.bcast(bytes, root);
    expectEqual(
      bytes,
      arrayOf(Uint8Array, n + 3, (i) => (i * 7 + root) & 0xff),
      `bcast n=${n + 3} root=${root}`,
    );
  }
}

// Allgather and allgatherv: every type, sizes from 0, IN_PLACE, ragged counts with zeros, Sync
// and Promise; the expected vector is rebuilt here from every rank's known block.
{
  /** @type {(T: ArrayType, r: number, i: number) => Scalar} */
  const value = (T, r, i) => {
    const v = (r * 131 + i * 7 + 3) % 97;
    return isBig(T) ? BigInt(v) - 40n * BigInt(r % 2) : T.name.startsWith('Uint') ? v : v - 40 * (r % 2);
  };
  /** @type {(T: ArrayType, r: number, n: number) => Values} */
  const block = (T, r, n) => arrayOf(T, n, (i) => value(T, r, i));
  /** @type {(T: ArrayType, counts: number[]) => Values} */
  const concat = (T, counts) => {
    const out = new T(counts.reduce((a, b) => a + b, 0));
    let at = 0;
    counts.forEach((n, r) => {
      out.set(block(T, r, n), at);
      at += n;
    });
    return out;
  };
  for (const T of smoke ? ['Uint8Array', 'Float64Array', 'BigInt64Array'].map(typeNamed) : TYPES) {
    for (const n of SIZES) {
      const counts = Array(size).fill(n);
      const want = concat(T, counts);
      const out = new T(n * size);
      await call.allgather(block(T, rank, n), out);
      expectEqual(out, want, `allgather${Sync} ${T.name} n=${n}`);
      const inPlace = new T(n * size);
      inPlace.set(block(T, rank, n), rank * n);
      await comm.allgather(IN_PLACE, inPlace);
      expectEqual(inPlace, want, `allgather IN_PLACE ${T.name} n=${n}`);
    }
  }
  // Ragged: rank r gives (r·k + 3) mod 7 elements — zeros included — for several k.
  for (const k of [1, 2, 5]) {
    const counts = Array.from({ length: size }, (_, r) => (r * k + 3) % 7);
    const want = concat(Float64Array, counts);
    const out = new Float64Array(want.length);
    await call.allgatherv(block(Float64Array, rank, /** @type {number} */ (counts[rank])), out, counts);
    expectEqual(out, want, `allgatherv${Sync} counts=${counts.join(',')}`);
    const inPlace = new Float64Array(want.length);
    inPlace.set(
      block(Float64Array, rank, /** @type {number} */ (counts[rank])),
      counts.slice(0, rank).reduce((a, b) => a + b, 0),
    );
    await comm.allgatherv(IN_PLACE, inPlace, counts);
    expectEqual(inPlace, want, `allgatherv IN_PLACE counts=${counts.join(',')}`);
  }
  // Blocks at the largest the one-node shared area takes while ranks have cores (4 KiB) and
  // just past it, alone or beside small and empty ones: one path or the other, the same
  // result; and blocks of several 64 KiB rounds through it (with more ranks than cores; with
  // --smoke, blocks of 8 KiB + 8 at most: the rounds' blocks grow with the ranks).
  for (const counts of [
    Array.from({ length: size }, () => 512),
    Array.from({ length: size }, (_, r) => (r === size - 1 ? 513 : 512)),
    Array.from({ length: size }, (_, r) => (r % 2 === 0 ? 512 : r % 3)),
    Array.from({ length: size }, (_, r) => (r === 0 ? 513 : 0)),
    smoke
      ? Array.from({ length: size }, (_, r) => (r % 3 === 0 ? 1025 : r % 3))
      : Array.from({ length: size }, (_, r) => (r === 0 ? 20000 : r % 2 === 0 ? 0 : 8192 * r + 1)),
  ]) {
    const want = concat(Float64Array, counts);
    const out = new Float64Array(want.length);
    await call.allgatherv(block(Float64Array, rank, /** @type {number} */ (counts[rank])), out, counts);
    expectEqual(out, want, `allgatherv${Sync} counts=${counts.join(',')}`);
  }
  if (args.has('--big')) {
    // 1 MiB + 3 bytes per rank: column segments in the gather phase, pipelined bcast after it.
    const n = (1 << 20) + 3;
    const counts = Array(size).fill(n);
    const out = new Uint8Array(n * size);
    await call.allgather(block(Uint8Array, rank, n), out);
    expectEqual(out, concat(Uint8Array, counts), 'allgather 1 MiB + 3 per rank');
  }
}

// Issue 40's collectives: gather(v), scatter(v), alltoall(v), the reduce-scatters, scan and
// exscan — every type, sizes from 0, IN_PLACE, ragged counts with zeros, every root, in this
// job's placement (test/jobs/gather-scatter.mjs draws random cases of them over other
// placements; this is their check on these). Every expected block is rebuilt here from what each
// rank's input is known to be. Not with --smoke: on a node of 64 or more ranks an alltoall makes
// a channel for every pair, which --memory holds to fewer. Then, where configure() may run, again
// with each forced reduce-scatter top and alltoall form (reduceScatter.top, alltoall.algorithm),
// so a form auto would not take at these sizes runs too (Bruck on large blocks, pairwise on tiny
// ones, recursive halving folded on 3 or 7 ranks).
if (!smoke) {
  /** Element i of the block rank s sends rank d in an alltoall (distinct per pair, small). */
  /** @type {(T: ArrayType, s: number, d: number, i: number) => Scalar} */
  const pairValue = (T, s, d, i) => {
    const v = (s * 53 + d * 29 + i * 7 + 1) % 113;
    return isBig(T) ? BigInt(v) : v;
  };
  const sum = (/** @type {number[]} */ a) => a.reduce((x, y) => x + y, 0);
  const before = (/** @type {number[]} */ a, /** @type {number} */ r) => sum(a.slice(0, r));
  /** `sendCounts` (this rank's row of c) and `recvCounts` (its column), from c(s, d): what rank s sends rank d. */
  const countsOf = (/** @type {(s: number, d: number) => number} */ c) => ({
    sendCounts: Array.from({ length: size }, (_, d) => c(rank, d)),
    recvCounts: Array.from({ length: size }, (_, s) => c(s, rank)),
  });
  /** What this rank's alltoall(v) recv must hold: rank s's block for it, s = 0 … size − 1. */
  const alltoallWant = (/** @type {ArrayType} */ T, /** @type {number[]} */ recvCounts) => {
    const want = new T(sum(recvCounts));
    let at = 0;
    recvCounts.forEach((n, s) => {
      for (let i = 0; i < n; i++) want[at++] = pairValue(T, s, rank, i);
    });
    return want;
  };
  /** This rank's send of an alltoall(v): its block for each rank d, one after another. */
  const alltoallSend = (/** @type {ArrayType} */ T, /** @type {number[]} */ sendCounts) => {
    const send = new T(sum(sendCounts));
    let at = 0;
    sendCounts.forEach((n, d) => {
      for (let i = 0; i < n; i++) send[at++] = pairValue(T, rank, d, i);
    });
    return send;
  };
  /** The reduction of ranks 0 … upTo − 1's element i (input()), stored as T stores it; one rank's value as it is (MPI applies no operator to it). */
  /** @type {(T: ArrayType, op: ReduceOpName, i: number, upTo: number) => Scalar} */
  const folded = (T, op, i, upTo) => {
    if (upTo === 1) return input(T, op, 0, i);
    const vals = Array.from({ length: upTo }, (_, r) => input(T, op, r, i));
    const big = isBig(T);
    /** @type {Scalar} */
    let acc = combineInRankOrder(op, vals, big ? 0n : 0, big ? 1n : 1);
    if (T === Uint8ClampedArray) acc = Math.min(255, acc);
    const tmp = new T(1);
    tmp[0] = big ? acc : Number(acc);
    return tmp[0];
  };
  /** The (type, operator) pairs of the reductions here: every type with two of its operators, every operator with some type. */
  /** @type {[ArrayType, ReduceOpName][]} */
  const reductions = TYPES.flatMap((T, k) => {
    const ops = opsFor(T);
    return [k % ops.length, (k + (ops.length >> 1)) % ops.length].map(
      (j) => /** @type {[ArrayType, ReduceOpName]} */ ([T, /** @type {ReduceOpName} */ (ops[j])]),
    );
  });
  const smallSizes = args.has('--quick') ? [0, 1, 5] : [0, 1, 3, 33, 1000];

  /**
   * One pass over the collectives of issue 40; `label` names the configuration. `all`: every one
   * of them, every type; else (a forced form's pass) only alltoall and the reduce-scatters, the
   * two the forced keys change, on a few types and sizes.
   */
  const issue40 = async (/** @type {string} */ label, all = true) => {
    const types = all ? TYPES : ['Uint8Array', 'Float64Array', 'BigInt64Array'].map(typeNamed);
    const sizes = all ? smallSizes : [1, 1000];
    // Alltoall: every type and size (blocks of n), IN_PLACE (recv is the input).
    for (const T of types) {
      for (const n of sizes) {
        const { sendCounts, recvCounts } = countsOf(() => n);
        const want = alltoallWant(T, recvCounts);
        const out = new T(n * size);
        await call.alltoall(alltoallSend(T, sendCounts), out);
        expectEqual(out, want, `alltoall${Sync} ${T.name} n=${n} (${label})`);
        const inPlace = alltoallSend(T, sendCounts);
        await comm.alltoall(IN_PLACE, inPlace);
        expectEqual(inPlace, want, `alltoall IN_PLACE ${T.name} n=${n} (${label})`);
      }
    }
    // Alltoallv: ragged pair lengths with zeros; IN_PLACE with symmetric ones (MPI's rule).
    for (const k of all ? [1, 2, 5] : [2]) {
      for (const [inPlace, c] of /** @type {[boolean, (s: number, d: number) => number][]} */ ([
        [false, (s, d) => (s * k + d * 3 + 1) % 6],
        [true, (s, d) => ((s + d) * k) % 5],
      ])) {
        const { sendCounts, recvCounts } = countsOf(c);
        const want = alltoallWant(Float64Array, recvCounts);
        const what = `alltoallv${inPlace ? ' IN_PLACE' : Sync} counts=${sendCounts.join(',')}/${recvCounts.join(',')} (${label})`;
        if (inPlace) {
          const buf = alltoallSend(Float64Array, sendCounts);
          await comm.alltoallv(IN_PLACE, sendCounts, buf, recvCounts);
          expectEqual(buf, want, what);
        } else {
          const out = new Float64Array(want.length);
          await call.alltoallv(alltoallSend(Float64Array, sendCounts), sendCounts, out, recvCounts);
          expectEqual(out, want, what);
        }
      }
    }
    if (args.has('--big') && all) {
      // Blocks of 256 KiB + 3 bytes: several 64 KiB pieces per pair.
      const n = (256 << 10) + 3;
      const { sendCounts, recvCounts } = countsOf(() => n);
      const out = new Uint8Array(n * size);
      await call.alltoall(alltoallSend(Uint8Array, sendCounts), out);
      expectEqual(out, alltoallWant(Uint8Array, recvCounts), `alltoall 256 KiB + 3 per block (${label})`);
    }
    // Reduce-scatter (block and ragged counts) and scan/exscan: every type, an operator of it each.
    for (const [T, op] of all ? reductions : reductions.filter(([T]) => types.includes(T))) {
      for (const n of sizes) {
        const whole = fill(T, op, rank, n * size);
        const recv = new T(n);
        await call.reduceScatterBlock(whole, recv, op);
        expectEqual(
          recv,
          arrayOf(T, n, (i) => folded(T, op, rank * n + i, size)),
          `reduceScatterBlock${Sync} ${T.name} ${op} n=${n} (${label})`,
        );
        const inPlace = fill(T, op, rank, n * size);
        await comm.reduceScatterBlock(IN_PLACE, inPlace, op);
        expectEqual(
          inPlace.subarray(0, n),
          arrayOf(T, n, (i) => folded(T, op, rank * n + i, size)),
          `reduceScatterBlock IN_PLACE ${T.name} ${op} n=${n} (${label})`,
        );

        if (!all) continue;
        const mine = fill(T, op, rank, n);
        const scanned = new T(n);
        await call.scan(mine, scanned, op);
        expectEqual(
          scanned,
          arrayOf(T, n, (i) => folded(T, op, i, rank + 1)),
          `scan${Sync} ${T.name} ${op} n=${n} (${label})`,
        );
        const exIn = fill(T, op, rank, n);
        await comm.exscan(IN_PLACE, exIn, op);
        // Rank 0's recv is left as it was: its input, with IN_PLACE.
        expectEqual(exIn, rank === 0 ? fill(T, op, 0, n) : arrayOf(T, n, (i) => folded(T, op, i, rank)), `exscan IN_PLACE ${T.name} ${op} n=${n} (${label})`);
      }
    }
    for (const k of [1, 3]) {
      const counts = Array.from({ length: size }, (_, r) => (r * k + 3) % 7);
      const at = before(counts, rank);
      const mine = /** @type {number} */ (counts[rank]);
      const recv = new Int32Array(mine);
      await call.reduceScatter(fill(Int32Array, 'sum', rank, sum(counts)), recv, counts, 'sum');
      expectEqual(
        recv,
        arrayOf(Int32Array, mine, (i) => folded(Int32Array, 'sum', at + i, size)),
        `reduceScatter${Sync} counts=${counts.join(',')} (${label})`,
      );
    }
    if (!all) return;
    // Gather and scatter (and their v forms) at every root, IN_PLACE at the root.
    for (const root of roots) {
      for (const n of [0, 1, 5]) {
        const block = (/** @type {number} */ r) => arrayOf(Int32Array, n, (i) => r * 1000 + root * 10 + i);
        const all = new Int32Array(n * size);
        for (let r = 0; r < size; r++) all.set(block(r), r * n);
        const gathered = rank === root ? new Int32Array(n * size) : null;
        if (rank === root && root % 2 === 1) {
          /** @type {Int32Array} */ (gathered).set(block(rank), rank * n);
          await comm.gather(IN_PLACE, gathered, root);
        } else await call.gather(block(rank), gathered, root);
        if (rank === root) expectEqual(/** @type {Values} */ (gathered), all, `gather n=${n} root=${root} (${label})`);
        const mine = new Int32Array(n);
        await call.scatter(rank === root ? all : null, mine, root);
        expectEqual(mine, block(rank), `scatter${Sync} n=${n} root=${root} (${label})`);
      }
      const counts = Array.from({ length: size }, (_, r) => (r * 5 + root + 2) % 4);
      const values = (/** @type {number} */ r) => arrayOf(Float64Array, /** @type {number} */ (counts[r]), (i) => r * 100 + root + i + 0.25);
      const all = new Float64Array(sum(counts));
      for (let r = 0; r < size; r++) all.set(values(r), before(counts, r));
      const gathered = rank === root ? new Float64Array(all.length) : null;
      await call.gatherv(values(rank), gathered, counts, root);
      if (rank === root) expectEqual(/** @type {Values} */ (gathered), all, `gatherv${Sync} counts=${counts.join(',')} root=${root} (${label})`);
      const mine = new Float64Array(/** @type {number} */ (counts[rank]));
      await call.scatterv(rank === root ? all : null, mine, counts, root);
      expectEqual(mine, values(rank), `scatterv${Sync} counts=${counts.join(',')} root=${root} (${label})`);
    }
    // Non-commutative JavaScript operators run in rank order (on the calling thread: not where blocking calls are refused).
    if (blocking) {
      const first = userOp((/** @type {number} */ a) => a, { commutative: false });
      const last = userOp((/** @type {number} */ _a, /** @type {number} */ b) => b, { commutative: false });
      const n = 3;
      const recv = new Float64Array(n);
      comm.reduceScatterBlockSync(
        arrayOf(Float64Array, n * size, (i) => rank * 1000 + i),
        recv,
        first,
      );
      expectEqual(
        recv,
        arrayOf(Float64Array, n, (i) => rank * n + i),
        `reduceScatterBlock, a non-commutative operator (${label})`,
      );
      const scanned = new Float64Array(n);
      comm.scanSync(
        arrayOf(Float64Array, n, (i) => rank * 1000 + i),
        scanned,
        last,
      );
      expectEqual(
        scanned,
        arrayOf(Float64Array, n, (i) => rank * 1000 + i),
        `scan, a non-commutative operator (${label})`,
      );
    }
  };

  await issue40('auto');
  // configure() blocks: not where blocking calls are refused. (Both keys set every time: configure merges.)
  if (blocking) {
    for (const [top, algorithm] of /** @type {const} */ ([
      ['recursive-halving', 'bruck'],
      ['ring', 'pairwise'],
    ])) {
      comm.configure({ reduceScatter: { top }, alltoall: { algorithm } });
      await issue40(`${top}, ${algorithm}`, false);
    }
    comm.configure({ reduceScatter: { top: 'auto' }, alltoall: { algorithm: 'auto' } });
  }
}

// Promise collectives issued back to back, awaited together: they must run in call order.
{
  const outs = [];
  const pending = [];
  for (let k = 0; k < 6; k++) {
    const mine = arrayOf(Int32Array, 64, (i) => rank * k + i);
    const out = new Int32Array(64);
    outs.push(out);
    pending.push(k % 2 === 0 ? comm.allreduce(mine, out, 'sum') : comm.allreduce(mine, out, 'max'));
  }
  pending.push(comm.barrier());
  await Promise.all(pending);
  outs.forEach((out, k) => {
    const want = arrayOf(Int32Array, 64, (i) => (k % 2 === 0 ? (k * size * (size - 1)) / 2 + size * i : (size - 1) * k + i));
    expectEqual(out, want, `pipelined allreduce #${k}`);
  });
  // A Sync call after queued Promise calls waits for them. (Not where blocking calls are
  // refused: mixing the two forms is what this checks.)
  if (blocking) {
    const p = comm.allreduce(Int32Array.of(rank), new Int32Array(1), 'sum');
    const now = new Int32Array(1);
    comm.allreduceSync(Int32Array.of(1), now, 'sum');
    await p;
    expectEqual(now, Int32Array.of(size), 'sync after async');
  }
}

// User-defined operators (a JavaScript function per chunk of elements). They run on the calling
// thread — the Promise form too runs the blocking call — so not where blocking calls are refused.
if (blocking) {
  // Commutative and associative, and it counts its own applications: size − 1 of them.
  const plusOne = userOp((/** @type {number} */ a, /** @type {number} */ b) => a + b + 1, { commutative: true });
  const n = 5000; // more than one scratch chunk
  const mine = arrayOf(Float64Array, n, (i) => ((i * 13 + rank * 7) % 50) + 1);
  const out = new Float64Array(n);
  comm.allreduceSync(mine, out, plusOne);
  const want = arrayOf(Float64Array, n, (i) => {
    let s = size - 1;
    for (let r = 0; r < size; r++) s += ((i * 13 + r * 7) % 50) + 1;
    return s;
  });
  expectEqual(out, want, 'allreduce with a user operator');
  const bigSum = userOp((/** @type {bigint} */ a, /** @type {bigint} */ b) => a + b, { commutative: true });
  const root = size - 1;
  const big = arrayOf(BigInt64Array, 7, (i) => BigInt(rank) * 1000000000000n + BigInt(i));
  const bigOut = rank === root ? new BigInt64Array(7) : null;
  await comm.reduce(big, bigOut, bigSum, root);
  if (rank === root) {
    const total = BigInt((size * (size - 1)) / 2) * 1000000000000n;
    expectEqual(
      /** @type {Values} */ (bigOut),
      arrayOf(BigInt64Array, 7, (i) => total + BigInt(size * i)),
      'reduce with a user operator on int64',
    );
  }
}

// Large messages: pipelined through the channels and sockets.
if (args.has('--big')) {
  const n = (1 << 20) + 3;
  for (const root of [0, size - 1]) {
    const buf = new Uint8Array(n);
    if (rank === root) for (let i = 0; i < n; i++) buf[i] = (i * 13 + root) & 0xff;
    await call.bcast(buf, root);
    expectEqual(
      buf,
      arrayOf(Uint8Array, n, (i) => (i * 13 + root) & 0xff),
      `bcast 1 MiB + 3 root=${root}`,
    );
  }
  const m = ((1 << 20) + 3) >> 2;
  const big = arrayOf(Uint32Array, m, (i) => (i + rank) % 1000);
  const out = new Uint32Array(m);
  await call.allreduce(big, out, 'sum');
  expectEqual(
    out,
    arrayOf(Uint32Array, m, (i) => {
      let s = 0;
      for (let r = 0; r < size; r++) s += (i + r) % 1000;
      return s;
    }),
    'allreduce 1 MiB',
  );
}

// 64 MiB, the largest size the runtime promises: every element checked.
if (args.has('--huge')) {
  const n = 16 << 20;
  const mine = new Float32Array(n);
  for (let i = 0; i < n; i++) mine[i] = (i % 7) + rank;
  const out = new Float32Array(n);
  await call.allreduce(mine, out, 'sum');
  const offset = (size * (size - 1)) / 2;
  for (let i = 0; i < n; i++) {
    if (out[i] !== size * (i % 7) + offset) throw new Error(`allreduce 64 MiB: element ${i} is ${out[i]}`);
  }
  checks++;
  const bytes = new Uint8Array(64 << 20);
  if (rank === size - 1) for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31) & 0xff;
  await call.bcast(bytes, size - 1);
  for (let i = 0; i < bytes.length; i++) if (bytes[i] !== ((i * 31) & 0xff)) throw new Error(`bcast 64 MiB: byte ${i} is ${bytes[i]}`);
  checks++;
  // 4 MiB + 1 per rank, the largest size the allgather bench goes to (IN_PLACE).
  const per = (4 << 20) + 1;
  const all = new Uint8Array(per * size);
  for (let i = 0; i < per; i++) all[rank * per + i] = (i * 13 + rank * 7) & 0xff;
  await call.allgather(IN_PLACE, all);
  for (let r = 0; r < size; r++) {
    for (let i = 0; i < per; i++)
      if (all[r * per + i] !== ((i * 13 + r * 7) & 0xff)) throw new Error(`allgather 4 MiB + 1 per rank: rank ${r}'s byte ${i} is ${all[r * per + i]}`);
  }
  checks++;
}

// A reader that comes late to a large bcast: the ranks off the root's node block for longer
// than the wait after which a waiting rank probes its peer, so the root's node sends into a
// full link. Nothing may enter the stream in the middle of the message (the probe once did).
if (argv.includes('--late')) {
  const n = Number(argv[argv.indexOf('--late') + 1]) << 20;
  const root = size - 1;
  const name = new Uint8Array(256);
  if (rank === root) new TextEncoder().encodeInto(comm.node, name);
  await call.bcast(name, root);
  const rootNode = new TextDecoder().decode(name.subarray(0, name.indexOf(0)));
  const bytes = new Uint8Array(n);
  if (rank === root) for (let i = 0; i < n; i++) bytes[i] = (i * 29 + 5) & 0xff;
  if (comm.node !== rootNode) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 700);
  await call.bcast(bytes, root);
  for (let i = 0; i < n; i++) if (bytes[i] !== ((i * 29 + 5) & 0xff)) throw new Error(`late bcast: byte ${i} is ${bytes[i]}`);
  checks++;
}

// The object forms (values by structured clone): nested objects, Maps, Sets, typed arrays,
// Dates, BigInts and one large value, in the blocking form where `call` is blocking and as Promises
// always; each rank's value is one it and every other rank can rebuild from its rank alone.
{
  /** @type {(r: number) => unknown} */
  const valueOf = (r) => ({
    rank: r,
    name: `rank-${r}`.repeat(r + 1),
    when: new Date(Date.UTC(2026, 10, r + 1)),
    map: new Map([[`k${r}`, { nested: [r, r * 2, [r * 3]] }]]),
    set: new Set([r, -r, 'x']),
    floats: Float64Array.from({ length: r + 2 }, (_, i) => r + i / 8),
    big: BigInt(r) * 2n ** 40n,
    nothing: null,
  });
  /** @type {(got: unknown, want: unknown, what: string) => void} */
  const same = (got, want, what) => {
    if (!isDeepStrictEqual(got, want)) throw new Error(`${what}: got ${inspect(got, { depth: 5 })}, want ${inspect(want, { depth: 5 })}`);
    checks++;
  };
  const everyValue = Array.from({ length: size }, (_, r) => valueOf(r));
  const forms = blocking ? ['Sync', ''] : [''];
  for (const form of forms) {
    for (const root of [0, size - 1]) {
      const got =
        form === 'Sync'
          ? comm.bcastObjectSync(rank === root ? valueOf(root) : undefined, root)
          : await comm.bcastObject(rank === root ? valueOf(root) : undefined, root);
      same(got, valueOf(root), `bcastObject${form} from ${root}`);
      const gathered = form === 'Sync' ? comm.gatherObjectSync(valueOf(rank), root) : await comm.gatherObject(valueOf(rank), root);
      same(gathered, rank === root ? everyValue : null, `gatherObject${form} to ${root}`);
      const scattered =
        form === 'Sync' ? comm.scatterObjectSync(rank === root ? everyValue : null, root) : await comm.scatterObject(rank === root ? everyValue : null, root);
      same(scattered, valueOf(rank), `scatterObject${form} from ${root}`);
    }
    same(form === 'Sync' ? comm.allgatherObjectSync(valueOf(rank)) : await comm.allgatherObject(valueOf(rank)), everyValue, `allgatherObject${form}`);
  }
  // A value of over a MiB (past every eager limit) and one that cannot be cloned: EINVAL on every
  // rank, naming the rank that held it, and the communicator goes on.
  const large = { bytes: new Uint8Array(1 << 20).map((_, i) => (i * 7 + 3) & 0xff), text: 'z'.repeat(300_000) };
  same(await comm.bcastObject(rank === 0 ? large : null, 0), large, 'bcastObject of a MiB');
  const holder = size - 1;
  let error;
  try {
    await comm.allgatherObject(rank === holder ? { f: () => 1 } : rank);
  } catch (e) {
    error = e;
  }
  if (!isTopocollError(error) || error.code !== 'EINVAL' || !error.message.includes(`rank ${holder}'s value cannot be cloned`)) {
    throw new Error(`allgatherObject of a function: expected EINVAL naming rank ${holder} on every rank, got ${String(error)}`);
  }
  checks++;
  same(
    await comm.allgatherObject(rank),
    Array.from({ length: size }, (_, r) => r),
    'allgatherObject after the refused one',
  );
}

await call.barrier();

// The node's shared memory after all of the above (every bound holds at any moment, whatever
// channels the node's other ranks are still making): linear in its ranks, not in their pairs.
if (args.has('--memory')) {
  const m = comm.sharedMemory();
  const L = comm.localSize;
  /** @type {(ok: boolean, what: string) => void} */
  const expect = (ok, what) => {
    checks++;
    if (!ok) throw new Error(`sharedMemory(): ${what}: ${JSON.stringify(m)}`);
  };
  expect(L > 1 && m.localRanks === L, `localRanks ${m.localRanks}, expected this node's ${L} (several)`);
  expect(m.segmentBytes / L < 10 * 2 ** 20, `segmentBytes / localRanks = ${m.segmentBytes / L}, not under 10 MiB`);
  expect(m.segment.outboxesBytes === L * m.outboxBytes, `outboxesBytes ${m.segment.outboxesBytes} is not localRanks × outboxBytes`);
  const { controlBytes, outboxesBytes, bcastQueuesBytes, nodeAreaBytes } = m.segment;
  expect(controlBytes + outboxesBytes + bcastQueuesBytes + nodeAreaBytes <= m.segmentBytes, 'the parts add up to more than the segment');
  expect(m.channels > 0 && m.channels < L * (L - 1), `${m.channels} channels, expected some but fewer than the ${L * (L - 1)} pairs`);
  expect(m.channelsBytes <= outboxesBytes, `channelsBytes ${m.channelsBytes} beyond the outboxes' ${outboxesBytes}`);
  expect(m.largestOutboxUse <= m.outboxBytes, `largestOutboxUse ${m.largestOutboxUse} beyond an outbox of ${m.outboxBytes}`);
  expect(m.segmentBytes + m.windowsBytes <= m.budgetBytes, `segment ${m.segmentBytes} + windows ${m.windowsBytes} beyond the budget ${m.budgetBytes}`);
  // One line per node for the test: `memory {…}`, the report as JSON.
  if (comm.localRank === 0) console.log(`memory ${JSON.stringify(m)}`);
}

console.log(`rank ${rank} ok ${checks}`);
comm.close();
await layer?.close();
