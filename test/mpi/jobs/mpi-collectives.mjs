// @ts-check
// A rank of a job started by mpirun that runs topocoll's collectives over MPI (createCommunicator
// over topocoll/mpi's world communicator, MPI between emulated nodes of `--ppn` ranks each,
// shared memory inside them) and compares every result bit for bit with MPI's own collective on
// the same inputs (MPI_Allreduce, MPI_Reduce, MPI_Bcast, MPI_Allgather, MPI_Gatherv, MPI_Scatterv,
// MPI_Reduce_scatter(_block), MPI_Scan, MPI_Exscan, MPI_Alltoall(v) through the same addon).
// Blocking and Promise calls; sizes across the layer's inline (4 KiB) and piece (256 KiB) limits.
// Prints `rank R ok N`, or the reason on stderr and exits 1.
import { createCommunicator, IN_PLACE } from 'topocoll';
import { initMpi } from 'topocoll/mpi';

const ppn = Number(process.argv[2] ?? 2);
const world = initMpi();
const { rank, size } = world;
const comm = await createCommunicator(world, { node: `node${Math.floor(rank / ppn)}` });
let checks = 0;

/**
 * @param {string} what
 * @param {ArrayLike<unknown>} got
 * @param {ArrayLike<unknown>} want
 */
function same(what, got, want) {
  checks++;
  if (got.length !== want.length) throw new Error(`${what}: ${got.length} elements, MPI ${want.length}`);
  for (let i = 0; i < got.length; i++) {
    if (got[i] !== want[i]) throw new Error(`rank ${rank}: ${what}: element ${i} is ${String(got[i])}, MPI says ${String(want[i])}`);
  }
}

/** @typedef {Int8Array | Uint8Array | Int32Array | Uint32Array | BigInt64Array} IntArray */
/** @type {{ make: (n: number) => IntArray, value: (r: number, i: number) => any, name: string }[]} */
const TYPES = [
  { name: 'int8', make: (n) => new Int8Array(n), value: (r, i) => ((r * 37 + i * 11) % 200) - 100 },
  { name: 'uint8', make: (n) => new Uint8Array(n), value: (r, i) => (r * 13 + i * 7) % 256 },
  { name: 'int32', make: (n) => new Int32Array(n), value: (r, i) => (r * 104729 + i * 7919) % 2 ** 31 },
  { name: 'uint32', make: (n) => new Uint32Array(n), value: (r, i) => (r * 2654435761 + i * 40503) % 2 ** 32 },
  { name: 'int64', make: (n) => new BigInt64Array(n), value: (r, i) => BigInt(r * 1000003 + i) * 4294967311n - 5n },
];
/** @type {import('topocoll').ReduceOpName[]} */
const OPS = ['sum', 'prod', 'min', 'max', 'band', 'bor', 'bxor'];
const SIZES = [0, 1, 7, 1000, 4096 + 1, 70_000];

// MPICH 4.0.2 (Debian 12's) compares unsigned integers as signed in MPI_MIN and MPI_MAX
// (pmodels/mpich#6083, fixed in 4.0.3), so its answer is no reference for them. Asked here: the
// min of 0x80 (rank 0) and 1 (the others) is 1. Where MPI gets it wrong, the reference for min and
// max of unsigned types is computed from every rank's input (MPI_Allgather only moves bytes).
const probe = new Uint8Array(1);
world.allreduceSync(Uint8Array.of(rank === 0 ? 0x80 : 1), probe, 'min');
const signedMinMax = size > 1 && probe[0] !== 1;
if (signedMinMax && rank === 0)
  console.error('mpi-collectives: this MPI compares unsigned integers as signed in min/max; those are checked against the inputs');

/**
 * MPI's answer (MPI_Allreduce into `want`; with a root, MPI_Reduce into `want` there, null
 * elsewhere), or, for min/max of unsigned types where MPI compares them as signed, the one
 * computed from every rank's input.
 * @param {IntArray} input
 * @param {IntArray | null} want
 * @param {import('topocoll').ReduceOpName} op
 * @param {number} [root]
 */
function reference(input, want, op, root) {
  const unsigned = input instanceof Uint8Array || input instanceof Uint32Array;
  if (!(signedMinMax && unsigned && (op === 'min' || op === 'max'))) {
    if (root === undefined) world.allreduceSync(input, /** @type {IntArray} */ (want), op);
    else world.reduceSync(input, want, op, root);
    return;
  }
  const n = input.length;
  const all = input instanceof Uint8Array ? new Uint8Array(n * size) : new Uint32Array(n * size);
  world.allgatherSync(input, all);
  if (want === null) return;
  const pick = op === 'min' ? Math.min : Math.max;
  for (let i = 0; i < n; i++) {
    let v = all[i] ?? 0;
    for (let r = 1; r < size; r++) v = pick(v, all[r * n + i] ?? 0);
    want[i] = v;
  }
}

for (const T of TYPES) {
  for (const n of SIZES) {
    const input = T.make(n);
    for (let i = 0; i < n; i++) input[i] = T.value(rank, i);
    for (const [k, op] of OPS.entries()) {
      const mine = T.make(n);
      const want = T.make(n);
      reference(input, want, op);
      if (k % 2 === 0) comm.allreduceSync(input, mine, op);
      else await comm.allreduce(input, mine, op);
      same(`allreduce ${T.name} ${op} n=${n}`, mine, want);
      const root = (k + n) % size;
      const at = rank === root ? T.make(n) : null;
      const wantAt = rank === root ? T.make(n) : null;
      reference(input, wantAt, op, root);
      if (k % 2 === 0) comm.reduceSync(input, at, op, root);
      else await comm.reduce(input, at, op, root);
      if (at !== null && wantAt !== null) same(`reduce ${T.name} ${op} n=${n} root=${root}`, at, wantAt);
    }
    const root = n % size;
    const buf = rank === root ? input.slice() : T.make(n);
    const wantBuf = rank === root ? input.slice() : T.make(n);
    world.bcastSync(wantBuf, root);
    if (n % 2 === 0) comm.bcastSync(buf, root);
    else await comm.bcast(buf, root);
    same(`bcast ${T.name} n=${n} root=${root}`, buf, wantBuf);
    const all = T.make(n * size);
    const wantAll = T.make(n * size);
    world.allgatherSync(input, wantAll);
    if (n % 2 === 0) comm.allgatherSync(input, all);
    else await comm.allgather(input, all);
    same(`allgather ${T.name} n=${n}`, all, wantAll);
    // Gather and scatter (and their v forms, rank r's block n + r elements long), every root in
    // turn, against MPI_Gatherv and MPI_Scatterv.
    const g = n % size;
    const counts = Array.from({ length: size }, (_, r) => (n % 3 === 0 ? n + r : n));
    const total = counts.reduce((a, b) => a + b, 0);
    const block = T.make(/** @type {number} */ (counts[rank]));
    for (let i = 0; i < block.length; i++) block[i] = T.value(rank, i);
    const v = n % 3 === 0;
    const gathered = rank === g ? T.make(total) : null;
    const wantGathered = rank === g ? T.make(total) : null;
    world.gatherSync(block, wantGathered, g, v ? counts : undefined);
    if (v) await comm.gatherv(block, gathered, counts, g);
    else comm.gatherSync(block, gathered, g);
    if (gathered !== null && wantGathered !== null) same(`gather${v ? 'v' : ''} ${T.name} n=${n} root=${g}`, gathered, wantGathered);
    const whole = T.make(total);
    for (let i = 0; i < total; i++) whole[i] = T.value(g + 1, i);
    const part = T.make(/** @type {number} */ (counts[rank]));
    const wantPart = T.make(/** @type {number} */ (counts[rank]));
    world.scatterSync(rank === g ? whole : null, wantPart, g, v ? counts : undefined);
    if (v) comm.scattervSync(rank === g ? whole : null, part, counts, g);
    else await comm.scatter(rank === g ? whole : null, part, g);
    same(`scatter${v ? 'v' : ''} ${T.name} n=${n} root=${g}`, part, wantPart);
    // Reduce-scatter (v: reduceScatter with those counts) of every rank's `whole`-sized input.
    const rsInput = T.make(total);
    for (let i = 0; i < total; i++) rsInput[i] = T.value(rank, i);
    for (const op of /** @type {import('topocoll').ReduceOpName[]} */ (['sum', 'max', 'bxor'])) {
      if (signedMinMax && (op === 'max' || op === 'min') && (rsInput instanceof Uint8Array || rsInput instanceof Uint32Array)) continue;
      const mineRs = T.make(/** @type {number} */ (counts[rank]));
      const wantRs = T.make(/** @type {number} */ (counts[rank]));
      world.reduceScatterSync(rsInput, wantRs, op, v ? counts : undefined);
      if (v) comm.reduceScatterSync(rsInput, mineRs, counts, op);
      else await comm.reduceScatterBlock(rsInput, mineRs, op);
      same(`reduceScatter${v ? '' : 'Block'} ${T.name} ${op} n=${n}`, mineRs, wantRs);
    }
    // Scan and exscan of `input`, every operator (IN_PLACE now and then), against MPI_Scan and
    // MPI_Exscan; rank 0's exscan result is undefined in MPI (topocoll leaves it untouched).
    for (const [k, op] of OPS.entries()) {
      if (signedMinMax && (op === 'max' || op === 'min') && (input instanceof Uint8Array || input instanceof Uint32Array)) continue;
      for (const exclusive of [false, true]) {
        const name = `${exclusive ? 'exscan' : 'scan'} ${T.name} ${op} n=${n}`;
        const wantScan = T.make(n);
        if (exclusive) world.exscanSync(input, wantScan, op);
        else world.scanSync(input, wantScan, op);
        const inPlace = (k + n) % 3 === 0;
        const mineScan = inPlace ? input.slice() : T.make(n);
        const from = inPlace ? IN_PLACE : input;
        if (k % 2 === 0) exclusive ? comm.exscanSync(from, mineScan, op) : comm.scanSync(from, mineScan, op);
        else await (exclusive ? comm.exscan(from, mineScan, op) : comm.scan(from, mineScan, op));
        if (exclusive && rank === 0) same(`${name}: rank 0's recv left alone`, mineScan, inPlace ? input : T.make(n));
        else same(name, mineScan, wantScan);
      }
    }
    // Alltoall (v: alltoallv, rank s sending rank d (s + 2d + n) mod 4 · n/2 elements), against
    // MPI_Alltoall and MPI_Alltoallv with displacements from the counts.
    const pairCount = (/** @type {number} */ s, /** @type {number} */ d) => (v ? ((s + 2 * d + n) % 4) * Math.ceil(n / 2) : n);
    const sendCounts = Array.from({ length: size }, (_, d) => pairCount(rank, d));
    const recvCounts = Array.from({ length: size }, (_, s) => pairCount(s, rank));
    const sent = sendCounts.reduce((a, b) => a + b, 0);
    const received = recvCounts.reduce((a, b) => a + b, 0);
    const a2aSend = T.make(sent);
    for (let i = 0; i < sent; i++) a2aSend[i] = T.value(rank, i);
    const a2aRecv = T.make(received);
    const wantA2a = T.make(received);
    if (v) world.alltoallvSync(a2aSend, sendCounts, wantA2a, recvCounts);
    else world.alltoallSync(a2aSend, wantA2a);
    if (v) await comm.alltoallv(a2aSend, sendCounts, a2aRecv, recvCounts);
    else if (n % 2 === 0) comm.alltoallSync(a2aSend, a2aRecv);
    else await comm.alltoall(a2aSend, a2aRecv);
    same(`alltoall${v ? 'v' : ''} ${T.name} n=${n}`, a2aRecv, wantA2a);
  }
}
for (let i = 0; i < 50; i++) {
  if (i % 2 === 0) comm.barrierSync();
  else await comm.barrier();
}
comm.close();
console.log(`rank ${rank} ok ${checks}`);
