// @ts-check
// A rank of the shared-window tests (test/runtime/windows.jobs.test.ts): comm.allocShared,
// sharedQuery and freeShared, and collectives whose buffers are windows.
//   - one window per datatype with a length of its own on every rank (one rank asks for 0):
//     zero-filled, of the class asked for; each rank writes its part, and after a barrier every
//     rank reads every local rank's part through sharedQuery and checks it;
//   - bcasts from every root out of and into windows (the readers copy straight from the root's
//     window: sizes around the control block's inline limit and up to 1 MiB + odd), allreduce,
//     reduce, allgather, an ibcast request and a Promise bcast on windows; allreduces on windows
//     (on one node the single-copy window allreduce) of every datatype, sum and max, apart and
//     IN_PLACE, blocking and as requests; allgathers and allgathervs with blocks in windows (on one
//     node the single-copy window allgather) — every result against the rank's own reference;
//   - freeShared: the freed array reads as empty; a second free, a foreign array, a free with a
//     request pending and bad allocShared arguments throw EINVAL; a window beyond shm.budgetBytes
//     throws ENOMEM on every rank and the communicator goes on; close() empties the rest.
// Prints `rank R ok N` (N checks), or the reason on stderr and exits 1.
//
// `--fault die`: after allocating, the last rank SIGKILLs itself; the others are in a bcast out
// of a window and print `rank R caught CODE: message`. `--fault mixed`: the root bcasts 1 MiB
// out of a window, the others into ordinary memory (a window bcast needs windows on every
// rank): every rank prints what it caught. `--fault mixed-allreduce`: likewise with an allreduce
// whose recv is a window on every rank but rank 0's; `--fault mixed-allgather`, an allgather
// whose send is a window on every rank but rank 0's.
import { init, IN_PLACE, TopocollError } from 'topocoll';
import { arrayOf, isBigIntClass, sameBytes, TYPED_ARRAY_CLASSES } from './reference-op.mjs';

const argv = process.argv.slice(2);
const fault = argv.includes('--fault') ? argv[argv.indexOf('--fault') + 1] : undefined;
const comm = await init();
const { rank, size } = comm;
let checks = 0;

/**
 * @param {string} what
 * @param {ArrayLike<number | bigint>} got
 * @param {ArrayLike<number | bigint>} want
 */
function same(what, got, want) {
  checks++;
  if (got.length !== want.length) throw new Error(`rank ${rank}: ${what}: got ${got.length} elements, expected ${want.length}`);
  // Arrays of one class with the same bytes have the same elements (a memcmp, where the loop
  // below took a good part of the job's time); else the loop finds the element that differs.
  if (sameBytes(got, want)) return;
  for (let i = 0; i < got.length; i++) {
    if (!Object.is(got[i], want[i])) throw new Error(`rank ${rank}: ${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

/**
 * @param {string} what
 * @param {string} code
 * @param {() => unknown} f
 */
function throwsCode(what, code, f) {
  checks++;
  try {
    f();
  } catch (e) {
    if (e instanceof TopocollError && e.code === code) return;
    throw new Error(`rank ${rank}: ${what}: threw ${String(e)} instead of ${code}`);
  }
  throw new Error(`rank ${rank}: ${what}: did not throw ${code}`);
}

/** The typed array classes, loosely typed: the checks below index and fill them generically. */
const CLASSES = /** @type {any[]} */ (TYPED_ARRAY_CLASSES);
/** @param {any} type @param {number} v */
const value = (type, v) => (isBigIntClass(type) ? BigInt(v) : v);
/** The element rank r writes at index i of its part, as the class stores it. */
/** @param {any} type @param {number} r @param {number} i */
const pattern = (type, r, i) => type.of(value(type, (r * 37 + i * 11) % 120))[0];

/**
 * A fault's last call: prints what it threw (`rank R caught CODE: message`, or `caught nothing`),
 * then closes and exits 0.
 * @param {() => void} call
 */
function reportAndExit(call) {
  try {
    call();
    console.log(`rank ${rank} caught nothing`);
  } catch (e) {
    const err = /** @type {TopocollError} */ (e);
    console.log(`rank ${rank} caught ${err.code}: ${err.message}`);
  }
  comm.close();
  process.exit(0);
}

if (fault === 'mixed-allgather') {
  const w = comm.allocShared(Float64Array, 1 << 17);
  reportAndExit(() => comm.allgatherSync(rank === 0 ? new Float64Array(1 << 17) : w, new Float64Array((1 << 17) * size)));
}
if (fault === 'mixed-allreduce') {
  const w = comm.allocShared(Float64Array, 1 << 17);
  const s = comm.allocShared(Float64Array, 1 << 17);
  reportAndExit(() => comm.allreduceSync(s, rank === 0 ? new Float64Array(1 << 17) : w, 'sum'));
}

if (fault === 'die' || fault === 'mixed') {
  const w = comm.allocShared(Float64Array, 1 << 17);
  w.fill(rank);
  comm.barrierSync();
  if (fault === 'die' && rank === size - 1) process.kill(process.pid, 'SIGKILL');
  reportAndExit(() => comm.bcastSync(fault === 'mixed' && rank !== 0 ? new Float64Array(1 << 17) : w, fault === 'die' ? size - 1 : 0));
}

// 1. Windows of every datatype, lengths of each rank's own; every local part read by everyone.
// This node's ranks, from every rank's node name (a hash of it, gathered).
const nodeHash = (/** @type {string} */ s) => [...s].reduce((h, c) => Math.imul(h ^ c.charCodeAt(0), 16777619) | 0, -2128831035);
const hashes = new Int32Array(size);
comm.allgatherSync(Int32Array.of(nodeHash(comm.node)), hashes);
const locals = Array.from({ length: size }, (_, r) => r).filter((r) => hashes[r] === nodeHash(comm.node));
for (const [t, type] of CLASSES.entries()) {
  const lengthOf = (/** @type {number} */ r) => (r === 1 ? 0 : 1000 + 37 * r + t);
  const w = comm.allocShared(type, lengthOf(rank));
  checks++;
  if (!(w instanceof type) || w.length !== lengthOf(rank)) throw new Error(`rank ${rank}: allocShared(${type.name}) gave ${w.constructor.name}[${w.length}]`);
  same(`${type.name} window starts zeroed`, w, new type(lengthOf(rank)));
  for (let i = 0; i < w.length; i++) w[i] = pattern(type, rank, i);
  comm.barrierSync();
  for (const r of locals) {
    const part = comm.sharedQuery(w, r);
    same(
      `${type.name} part of rank ${r}`,
      part,
      arrayOf(type, lengthOf(r), (/** @type {number} */ i) => pattern(type, r, i)),
    );
  }
  const elsewhere = Array.from({ length: size }, (_, r) => r).find((r) => !locals.includes(r));
  if (elsewhere !== undefined) throwsCode('sharedQuery of a rank on another node', 'EINVAL', () => comm.sharedQuery(w, elsewhere));
  comm.freeShared(w);
  checks++;
  if (w.length !== 0) throw new Error(`rank ${rank}: a freed window still has ${w.length} elements`);
}

// 2. Every datatype in bcast (from every root), reduce and allgather on windows, above the
// window bcast's smallest size (a shared-memory allgather's blocks take its window mode too).
for (const type of CLASSES) {
  const n = Math.ceil((600 * 1024) / type.BYTES_PER_ELEMENT) + 3;
  const w = comm.allocShared(type, n);
  const g = comm.allocShared(type, n * size);
  const v = (/** @type {number} */ from, /** @type {number} */ i) => value(type, (from * 5 + i) % 100);
  for (let root = 0; root < size; root++) {
    const buf = w.subarray(0, n);
    const want = arrayOf(type, n, (i) => v(root, i));
    if (rank === root) buf.set(want);
    else /** @type {any} */ (buf).fill(value(type, 0));
    comm.bcastSync(buf, root);
    same(`${type.name} window bcast of ${n} from ${root}`, buf, want);
  }
  const send = w.subarray(0, n);
  send.set(arrayOf(type, n, (i) => v(rank, i)));
  const out = g.subarray(0, n);
  const root = size - 1;
  comm.reduceSync(send, rank === root ? out : null, 'max', root);
  const maxOf = (/** @type {number} */ i) => {
    let m = v(0, i);
    for (let from = 1; from < size; from++) if (v(from, i) > m) m = v(from, i);
    return m;
  };
  if (rank === root)
    same(
      `${type.name} window reduce max of ${n}`,
      out,
      arrayOf(type, n, (/** @type {number} */ i) => maxOf(i)),
    );
  comm.allgatherSync(send, g);
  same(
    `${type.name} window allgather of ${n} per rank`,
    g,
    arrayOf(type, n * size, (/** @type {number} */ k) => v(Math.floor(k / n), k % n)),
  );
  // allgatherv: ragged blocks (rank r gives (r % 3) · n / 2 elements, zeros among them).
  const ragged = Array.from({ length: size }, (_, r) => ((r % 3) * n) >> 1);
  const at = ragged.map((_, r) => ragged.slice(0, r).reduce((a, b) => a + b, 0));
  const gv = g.subarray(
    0,
    ragged.reduce((a, b) => a + b, 0),
  );
  comm.allgathervSync(send.subarray(0, ragged[rank]), gv, ragged);
  const wantV = new type(gv.length);
  for (let r = 0; r < size; r++)
    wantV.set(
      arrayOf(type, /** @type {number} */ (ragged[r]), (i) => v(r, i)),
      at[r],
    );
  same(`${type.name} window allgatherv of ${ragged.join('/')}`, gv, wantV);
  comm.freeShared(w);
  comm.freeShared(g);
}

// 2b. A sub-communicator's windows: the even and the odd ranks each allocate, bcast out of and
// allreduce into them, and free them; the child closes with a window still allocated.
{
  const child = /** @type {import('topocoll').Communicator} */ (await comm.split(rank % 2));
  const n = 200_003;
  const w = child.allocShared(Float64Array, n);
  const x = child.allocShared(Float64Array, n);
  for (let i = 0; i < n; i++) w[i] = child.rank === 0 ? i * 0.5 + rank : -1;
  child.bcastSync(w, 0);
  same(
    `sub-communicator window bcast`,
    w,
    arrayOf(Float64Array, n, (/** @type {number} */ i) => i * 0.5 + (rank % 2)),
  );
  child.allreduceSync(w, x, 'sum');
  same(
    `sub-communicator window allreduce`,
    x,
    arrayOf(Float64Array, n, (/** @type {number} */ i) => (i * 0.5 + (rank % 2)) * child.size),
  );
  child.freeShared(w);
  child.close();
  checks++;
  if (x.length !== 0) throw new Error(`rank ${rank}: a child's window is still readable after its close()`);
}

// 3. Collectives on windows, from the smallest sizes to 1 MiB.
const counts = [1, 13, 14, 200, 4096, 65_537, 131_073];
const big = comm.allocShared(Float64Array, 131_073 * size);
const other = comm.allocShared(Float64Array, 131_073 * size);
for (const n of counts) {
  for (let root = 0; root < size; root++) {
    // Windows on every rank; below the window bcast's smallest size (where windows change
    // nothing) a window root's readers may pass ordinary memory, on odd roots they do.
    const mixed = root % 2 === 1 && n * 8 < 65536 && rank !== root;
    const buf = mixed ? new Float64Array(n) : big.subarray(0, n);
    buf.fill(-1);
    if (rank === root) for (let i = 0; i < n; i++) buf[i] = root * 1e6 + n + i + 0.25;
    comm.bcastSync(buf, root);
    same(
      `bcast of ${n} from ${root}`,
      buf,
      arrayOf(Float64Array, n, (/** @type {number} */ i) => root * 1e6 + n + i + 0.25),
    );
  }
  const send = big.subarray(0, n);
  const recv = other.subarray(0, n);
  for (let i = 0; i < n; i++) send[i] = rank + i;
  comm.allreduceSync(send, recv, 'sum');
  same(
    `allreduce of ${n}`,
    recv,
    arrayOf(Float64Array, n, (/** @type {number} */ i) => (size * (size - 1)) / 2 + size * i),
  );
  const root = n % size;
  comm.reduceSync(send, rank === root ? recv : null, 'max', root);
  if (rank === root)
    same(
      `reduce of ${n}`,
      recv,
      arrayOf(Float64Array, n, (/** @type {number} */ i) => size - 1 + i),
    );
  const gathered = other.subarray(0, n * size);
  comm.allgatherSync(send, gathered);
  same(
    `allgather of ${n}`,
    gathered,
    arrayOf(Float64Array, n * size, (/** @type {number} */ k) => Math.floor(k / n) + (k % n)),
  );
  // A request and a Promise twin on windows.
  const rb = big.subarray(0, n);
  if (rank === root) for (let i = 0; i < n; i++) rb[i] = -i - n;
  await comm.ibcast(rb, root);
  same(
    `ibcast of ${n}`,
    rb,
    arrayOf(Float64Array, n, (/** @type {number} */ i) => -i - n),
  );
  if (rank === root) for (let i = 0; i < n; i++) rb[i] = i * 3;
  await comm.bcast(rb, root);
  same(
    `Promise bcast of ${n}`,
    rb,
    arrayOf(Float64Array, n, (/** @type {number} */ i) => i * 3),
  );
}

// 4. Allreduce on windows (single copy on one node): every datatype, sum and max, apart and
// IN_PLACE.
for (const type of CLASSES) {
  const most = 200_003;
  /** @type {any} */
  const s = comm.allocShared(type, most);
  /** @type {any} */
  const r = comm.allocShared(type, most);
  // Below the window allreduce's smallest size (ordinary plans on windows), just above it, and
  // several chunks per slice.
  for (const n of [Math.ceil(8192 / type.BYTES_PER_ELEMENT) + 5, Math.ceil(131_072 / type.BYTES_PER_ELEMENT) + 5, most]) {
    const v = (/** @type {number} */ from, /** @type {number} */ i) => value(type, (from * 7 + i * 3) % 50);
    const send = s.subarray(0, n);
    const recv = r.subarray(0, n);
    send.set(arrayOf(type, n, (i) => v(rank, i)));
    // The reference stores through the same class after every rank's term: integers wrap,
    // Uint8Clamped saturates, Float32 rounds. (Other than for the BigInt classes, the sums run in
    // a Float64Array that takes the class's values back after every term — the same numbers as
    // storing into the class element by element, in one loop for every class, which V8 keeps fast.)
    const sum = new type(n);
    const max = new type(n);
    if (isBigIntClass(type)) {
      for (let from = 0; from < size; from++) {
        for (let i = 0; i < n; i++) {
          sum[i] = /** @type {any} */ (sum[i]) + v(from, i);
          if (from === 0 || v(from, i) > /** @type {any} */ (max[i])) max[i] = v(from, i);
        }
      }
    } else {
      const acc = new Float64Array(n);
      const top = new Float64Array(n);
      for (let from = 0; from < size; from++) {
        for (let i = 0; i < n; i++) {
          const x = /** @type {number} */ (v(from, i));
          acc[i] = /** @type {number} */ (acc[i]) + x;
          if (from === 0 || x > /** @type {number} */ (top[i])) top[i] = x;
        }
        sum.set(acc);
        acc.set(sum);
      }
      max.set(top);
    }
    comm.allreduceSync(send, recv, 'sum');
    same(`${type.name} window allreduce sum of ${n}`, recv, sum);
    comm.allreduceSync(send, recv, 'max');
    same(`${type.name} window allreduce max of ${n}`, recv, max);
    recv.set(send);
    comm.allreduceSync(IN_PLACE, recv, 'sum');
    same(`${type.name} window allreduce IN_PLACE sum of ${n}`, recv, sum);
    recv.fill(value(type, 0));
    await comm.iallreduce(send, recv, 'sum');
    same(`${type.name} window iallreduce sum of ${n}`, recv, sum);
  }
  comm.freeShared(s);
  comm.freeShared(r);
}

// 5. Allgather on windows (single copy on one node): each rank's block in a window (send, or
// recv for IN_PLACE), recv ordinary or a window; below the window allgather's smallest block
// (ordinary plans on windows), above it and at 256 KiB + odd; ragged allgatherv blocks with an
// empty one; a request and a Promise twin; the blocks rewritten between calls (a rank that
// returned while another still read its block would show here).
for (const type of /** @type {any[]} */ ([Uint8Array, Float64Array, BigInt64Array])) {
  // 256 KiB + odd per rank: room for four ranks' windows beside the earlier ones in the budget.
  const most = Math.ceil((256 << 10) / type.BYTES_PER_ELEMENT) + 3;
  /** @type {any} */
  const s = comm.allocShared(type, most);
  /** @type {any} */
  const r = comm.allocShared(type, most * size);
  const v = (/** @type {number} */ from, /** @type {number} */ i, /** @type {number} */ round) => value(type, (from * 13 + i * 5 + round * 3) % 100);
  for (const n of [Math.ceil(4096 / type.BYTES_PER_ELEMENT), Math.ceil(9000 / type.BYTES_PER_ELEMENT) + 1, most]) {
    const want = (/** @type {number} */ round) => {
      const out = new type(n * size);
      for (let from = 0; from < size; from++) for (let i = 0; i < n; i++) out[from * n + i] = v(from, i, round);
      return out;
    };
    const send = s.subarray(0, n);
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < n; i++) send[i] = v(rank, i, round);
      const ordinary = new type(n * size);
      comm.allgatherSync(send, ordinary);
      same(`${type.name} window allgather of ${n} (round ${round}) into ordinary memory`, ordinary, want(round));
      const recv = r.subarray(0, n * size);
      recv.fill(value(type, 0));
      comm.allgatherSync(send, recv);
      same(`${type.name} window allgather of ${n} (round ${round}) into a window`, recv, want(round));
    }
    const recv = r.subarray(0, n * size);
    recv.fill(value(type, 0));
    for (let i = 0; i < n; i++) recv[rank * n + i] = v(rank, i, 7);
    comm.allgatherSync(IN_PLACE, recv);
    same(`${type.name} window allgather IN_PLACE of ${n}`, recv, want(7));
    for (let i = 0; i < n; i++) send[i] = v(rank, i, 8);
    const requested = new type(n * size);
    await comm.iallgather(send, requested);
    same(`${type.name} window iallgather of ${n}`, requested, want(8));
    const promised = new type(n * size);
    await comm.allgather(send, promised);
    same(`${type.name} window Promise allgather of ${n}`, promised, want(8));
  }
  // Ragged blocks, one of them empty: rank r gives (r + 1) · 3001 elements, rank 1 none.
  const blockOf = (/** @type {number} */ k) => (k === 1 ? 0 : (k + 1) * 3001);
  const counts = Array.from({ length: size }, (_, k) => blockOf(k));
  const displ = (/** @type {number} */ k) => counts.slice(0, k).reduce((a, b) => a + b, 0);
  const total = displ(size);
  const mine = s.subarray(0, blockOf(rank));
  for (let i = 0; i < blockOf(rank); i++) mine[i] = v(rank, i, 9);
  const wantV = new type(total);
  for (let from = 0; from < size; from++) for (let i = 0; i < blockOf(from); i++) wantV[displ(from) + i] = v(from, i, 9);
  const gatheredV = new type(total);
  comm.allgathervSync(mine, gatheredV, counts);
  same(`${type.name} window allgatherv of ${counts.join(',')}`, gatheredV, wantV);
  const inPlaceV = r.subarray(0, total);
  inPlaceV.fill(value(type, 0));
  inPlaceV.set(mine, displ(rank));
  comm.allgathervSync(IN_PLACE, inPlaceV, counts);
  same(`${type.name} window allgatherv IN_PLACE of ${counts.join(',')}`, inPlaceV, wantV);
  comm.freeShared(s);
  comm.freeShared(r);
}

// 6. Misuse, the budget, freeing.
throwsCode('allocShared of a plain Array class', 'EINVAL', () => comm.allocShared(/** @type {any} */ (Array), 4));
throwsCode('allocShared of a negative length', 'EINVAL', () => comm.allocShared(Float64Array, -1));
throwsCode('allocShared of a fractional length', 'EINVAL', () => comm.allocShared(Float64Array, 2.5));
throwsCode('freeShared of an ordinary array', 'EINVAL', () => comm.freeShared(new Float64Array(4)));
const pending = comm.ibcast(big.subarray(0, 1000), 0);
throwsCode('freeShared with a request pending', 'EINVAL', () => comm.freeShared(big));
await pending;
// Every rank asks for the whole budget: refused before anything is mapped, whatever the node has.
const memory = comm.sharedMemory();
same(
  'sharedMemory(): the windows counted, the segment and windows within the budget',
  [Number(memory.windowsBytes > 0), Number(memory.segmentBytes + memory.windowsBytes <= memory.budgetBytes)],
  [1, 1],
);
throwsCode('a window beyond shm.budgetBytes', 'ENOMEM', () => comm.allocShared(Uint8Array, memory.budgetBytes));
// The communicator goes on after the refused allocation.
const after = Float64Array.of(rank);
comm.allreduceSync(IN_PLACE, after, 'sum');
same('allreduce after ENOMEM', after, [(size * (size - 1)) / 2]);
comm.freeShared(big);
throwsCode('freeShared twice', 'EINVAL', () => comm.freeShared(big));
const kept = comm.allocShared(Int32Array, 10);
comm.close();
checks++;
if (other.length !== 0 || kept.length !== 0) throw new Error(`rank ${rank}: windows still readable after close()`);
console.log(`rank ${rank} ok ${checks}`);
