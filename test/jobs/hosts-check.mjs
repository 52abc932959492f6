// @ts-check
// A rank of a job started by hand with the torchrun convention (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, TOPOCOLL_TOKEN), e.g. inside the namespace hosts of test/helpers/hosts.ts.
// Prints:
//   rank R node N localRank L localSize S hostname H
//   rank R ok C            (C checks passed; every result equal to a reference computed here)
// or throws (non-zero exit).
//
// Arguments: [--basic] only one small allreduce, bcast and barrier (no size sweep).
import { hostname } from 'node:os';
import { init, IN_PLACE } from 'topocoll';

/** @typedef {Float64Array | Int32Array | Uint8Array} Values */
/** @typedef {{ new (length: number): Values, from(src: ArrayLike<unknown>, map: (v: unknown, i: number) => number): Values, readonly name: string }} ArrayType */

const basic = process.argv.includes('--basic');
const expectRank = Number(process.env.RANK);
const expectSize = Number(process.env.WORLD_SIZE);

const comm = await init();
const { rank, size } = comm;
if (rank !== expectRank || size !== expectSize) throw new Error(`init gave rank ${rank} of ${size}, RANK=${expectRank} WORLD_SIZE=${expectSize}`);
console.log(`rank ${rank} node ${comm.node} localRank ${comm.localRank} localSize ${comm.localSize} hostname ${hostname()}`);

let checks = 0;
/**
 * @param {Values} got
 * @param {Values} want
 * @param {string} what
 */
function expectEqual(got, want, what) {
  checks++;
  if (got.length !== want.length) throw new Error(`rank ${rank}: ${what}: length ${got.length}, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    if (got[i] !== want[i]) throw new Error(`rank ${rank}: ${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

/** Rank r's input at index i: small integers, so every float sum here is exact. */
const input = (/** @type {number} */ r, /** @type {number} */ i) => ((r * 7 + i * 3) % 11) - 5;
const fill = (/** @type {ArrayType} */ T, /** @type {number} */ r, /** @type {number} */ n) => T.from({ length: n }, (_, i) => input(r, i));
/** The reduction of every rank's input, in plain JavaScript (stored into T, which wraps as the library's T does). */
/**
 * @param {ArrayType} T
 * @param {'sum' | 'max'} op
 * @param {number} n
 */
function reference(T, op, n) {
  const out = new T(n);
  for (let i = 0; i < n; i++) {
    let acc = input(0, i);
    for (let r = 1; r < size; r++) acc = op === 'sum' ? acc + input(r, i) : Math.max(acc, input(r, i));
    out[i] = acc;
  }
  return out;
}

const SIZES = basic ? [3] : [0, 1, 7, 1000, 8193, 65536 + 5, 131072 /* 1 MiB of Float64 */];
const TYPES = basic ? [Float64Array] : [Float64Array, Int32Array];
for (const T of TYPES) {
  for (const n of SIZES) {
    for (const root of basic ? [0] : Array.from({ length: size }, (_, r) => r)) {
      // bcast: the root's input reaches everyone.
      const b = rank === root ? fill(T, root, n) : new T(n).fill(99);
      comm.bcastSync(b, root);
      expectEqual(b, fill(T, root, n), `bcastSync ${T.name}[${n}] root ${root}`);
      const ba = rank === root ? fill(T, root, n) : new T(n).fill(99);
      await comm.bcast(ba, root);
      expectEqual(ba, fill(T, root, n), `bcast ${T.name}[${n}] root ${root}`);
      if (basic) continue;
      // reduce: only the root has a result.
      for (const op of /** @type {const} */ (['sum', 'max'])) {
        const recv = rank === root ? new T(n).fill(99) : null;
        comm.reduceSync(fill(T, rank, n), recv, op, root);
        if (rank === root) expectEqual(/** @type {Values} */ (recv), reference(T, op, n), `reduceSync ${op} ${T.name}[${n}] root ${root}`);
        const recvA = rank === root ? new T(n).fill(99) : null;
        await comm.reduce(fill(T, rank, n), recvA, op, root);
        if (rank === root) expectEqual(/** @type {Values} */ (recvA), reference(T, op, n), `reduce ${op} ${T.name}[${n}] root ${root}`);
      }
    }
    for (const op of /** @type {('sum' | 'max')[]} */ (basic ? ['sum'] : ['sum', 'max'])) {
      const out = new T(n).fill(99);
      comm.allreduceSync(fill(T, rank, n), out, op);
      expectEqual(out, reference(T, op, n), `allreduceSync ${op} ${T.name}[${n}]`);
      const inPlace = fill(T, rank, n);
      await comm.allreduce(IN_PLACE, inPlace, op);
      expectEqual(inPlace, reference(T, op, n), `allreduce IN_PLACE ${op} ${T.name}[${n}]`);
    }
    comm.barrierSync();
    await comm.barrier();
  }
}

// A 1 MiB + 3 byte bcast: an odd length across every link.
if (!basic) {
  const n = (1 << 20) + 3;
  const want = Uint8Array.from({ length: n }, (_, i) => (i * 13 + 7) & 0xff);
  const b = rank === size - 1 ? want.slice() : new Uint8Array(n);
  comm.bcastSync(b, size - 1);
  expectEqual(b, want, `bcastSync Uint8Array[${n}] root ${size - 1}`);
}

comm.barrierSync();
comm.close();
console.log(`rank ${rank} ok ${checks}`);
