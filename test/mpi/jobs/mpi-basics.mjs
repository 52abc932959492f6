// @ts-check
// A rank of a job started by mpirun (or alone: an MPI singleton) that checks topocoll/mpi's
// MpiCommunicator against values computed here: rank and size, the native layer's External,
// message order per tag, copies of sent arrays, truncated receives, split and dup, and MPI's
// reference collectives. Prints `rank R ok` and exits 0, or prints the reason to stderr and
// exits 1. With the argument `exit` it ends with process.exit(0) (MPI is then finalized by the
// addon's atexit handler instead of the environment's cleanup hook). Under Open MPI's mpirun or
// MPICH's mpiexec (Hydra): the launcher's own variables say which rank this should be.
import { initMpi, mpiAvailable } from 'topocoll/mpi';

const launcherRank = Number(process.env.OMPI_COMM_WORLD_RANK ?? process.env.PMI_RANK ?? 0);
const launcherSize = Number(process.env.OMPI_COMM_WORLD_SIZE ?? process.env.PMI_SIZE ?? 1);

/**
 * @param {string} message
 * @returns {never}
 */
function fail(message) {
  console.error(`mpi-basics: rank ${launcherRank}: ${message}`);
  process.exit(1);
}

/**
 * @param {boolean} ok
 * @param {string} message
 */
function check(ok, message) {
  if (!ok) fail(message);
}

/**
 * The error a function throws (or a Promise rejects with), or fails.
 * @param {() => unknown} f
 * @param {string} what
 * @returns {Promise<any>}
 */
async function thrown(f, what) {
  try {
    await f();
  } catch (e) {
    return e;
  }
  fail(`${what} did not throw`);
}

check(mpiAvailable(), 'mpiAvailable() is false');
const world = initMpi();
check(initMpi() === world, 'initMpi() is not idempotent');
const { rank, size } = world;
check(rank === launcherRank && size === launcherSize, `initMpi() gave rank ${rank} of ${size}; the launcher says ${launcherRank} of ${launcherSize}`);
check(world.threadLevel === 'multiple', `thread level ${world.threadLevel}, want multiple (Open MPI 4.1 and MPICH 4.0 support it)`);
check(world.tagBase === 0, `tagBase ${world.tagBase}`);

// The native layer: an External (typeof 'object', no properties), the same on every access.
const native = world.native;
check(typeof native === 'object' && native !== null && Object.keys(native).length === 0, 'native is not an External');
check(world.native === native, 'native changes between accesses');

// ---- messages ---------------------------------------------------------------------------------

// Every rank sends K messages on each of two tags to every rank (itself included); message i of
// (source s, tag t) has length 7i + t % 3 (the first of tag 30 is empty) and bytes (s, t, i, k…).
const K = 6;
const TAGS = [30, 31];
/**
 * @param {number} source
 * @param {number} tag
 * @param {number} i
 */
const message = (source, tag, i) => {
  const bytes = new Uint8Array(7 * i + (tag % 3));
  for (let k = 0; k < bytes.length; k++) bytes[k] = (source * 31 + tag * 7 + i * 13 + k) & 0xff;
  return bytes;
};
/** @type {Promise<void>[]} */
const sends = [];
for (let peer = 0; peer < size; peer++) {
  for (const tag of TAGS) for (let i = 0; i < K; i++) sends.push(world.send(peer, tag, message(rank, tag, i)));
}
// Receives posted all at once, the second tag's first: MPI matches each in posting order per
// (source, tag), so message i lands in receive i whatever the tag interleaving.
/** @type {Promise<void>[]} */
const recvs = [];
for (let peer = 0; peer < size; peer++) {
  for (const tag of [...TAGS].reverse()) {
    for (let i = 0; i < K; i++) {
      recvs.push(
        world.recv(peer, tag, 100).then((got) => {
          const want = message(peer, tag, i);
          check(got.length === want.length, `message ${i} from ${peer} tag ${tag}: ${got.length} bytes, want ${want.length}`);
          check(
            got.every((b, k) => b === want[k]),
            `message ${i} from ${peer} tag ${tag}: wrong bytes`,
          );
        }),
      );
    }
  }
}
await Promise.all([...sends, ...recvs]);

// A sent array may be reused at once: the addon copied it.
const next = (rank + 1) % size;
const prev = (rank + size - 1) % size;
const reused = new Uint8Array([1, 2, 3, 4]);
const sent = world.send(next, 40, reused);
reused.fill(9);
const got = await world.recv(prev, 40, 4);
await sent;
check(got.join(',') === '1,2,3,4', `reused send array: received ${got.join(',')}`);

// A message longer than maxBytes: EMISMATCH saying so.
const long = world.send(next, 41, new Uint8Array(100));
const truncated = await thrown(() => world.recv(prev, 41, 10), 'a truncated receive');
await long;
check(truncated.code === 'EMISMATCH' && /longer than maxBytes \(10 bytes\)/.test(truncated.message), `truncation: ${truncated.code} ${truncated.message}`);

// Argument errors.
check((await thrown(() => world.send(size, 1, new Uint8Array(1)), 'send to rank size')).code === 'EINVAL', 'send to rank size');
check((await thrown(() => world.recv(0, -1, 1), 'recv with tag -1')).code === 'EINVAL', 'recv with tag -1');

// ---- split and dup ----------------------------------------------------------------------------

// Even and odd ranks, ordered by descending world rank (key −rank).
const parity = world.split(rank % 2, -rank) ?? fail('split with a color gave undefined');
const sameParity = Array.from({ length: size }, (_, r) => r).filter((r) => r % 2 === rank % 2);
const wantParityRank = sameParity.length - 1 - sameParity.indexOf(rank);
check(
  parity.size === sameParity.length && parity.rank === wantParityRank,
  `split: rank ${parity.rank} of ${parity.size}, want ${wantParityRank} of ${sameParity.length}`,
);
check(typeof parity.native === 'object' && parity.native !== native, 'split: no native layer of its own');
// Only rank 0 gets a communicator (a world of one) when the others pass no color.
const lonely = world.split(rank === 0 ? 0 : undefined, 0);
check(rank === 0 ? lonely?.size === 1 && lonely.rank === 0 : lonely === undefined, `split with undefined colors: ${lonely?.rank}/${lonely?.size}`);
lonely?.free();

// dup: the same ranks, and its messages do not meet the original's on the same tag.
const copy = world.dup();
check(copy.rank === rank && copy.size === size, `dup: rank ${copy.rank} of ${copy.size}`);
const onWorld = world.send(next, 50, new Uint8Array([1]));
const onCopy = copy.send(next, 50, new Uint8Array([2]));
const fromCopy = await copy.recv(prev, 50, 1);
const fromWorld = await world.recv(prev, 50, 1);
await Promise.all([onWorld, onCopy]);
check(fromCopy[0] === 2 && fromWorld[0] === 1, `dup: got ${fromCopy[0]} on the copy and ${fromWorld[0]} on the original`);

// ---- reference collectives ----------------------------------------------------------------------

const N = 37;
const ranks = Array.from({ length: size }, (_, r) => r);
/**
 * @param {number} r
 * @param {number} i
 */
const value = (r, i) => ((r * 5 + i * 3) % 11) - 4; // small, of both signs

/**
 * @param {ArrayLike<number | bigint>} got
 * @param {(i: number) => number | bigint} want
 * @param {string} what
 */
function same(got, want, what) {
  for (let i = 0; i < got.length; i++) check(got[i] === want(i), `${what}: element ${i} is ${got[i]}, want ${want(i)}`);
}

/** @type {[import('topocoll/mpi').MpiCommunicator, number[], string][]} */
const comms = [
  [world, ranks, 'world'],
  [parity, sameParity.slice().reverse(), 'parity split'],
];
for (const [comm, members, name] of comms) {
  const me = members[comm.rank] ?? fail(`${name}: rank ${comm.rank} has no member`);
  const f64 = new Float64Array(N);
  comm.allreduceSync(
    Float64Array.from({ length: N }, (_, i) => value(me, i) + 0.5),
    f64,
    'sum',
  );
  same(f64, (i) => members.reduce((s, r) => s + value(r, i) + 0.5, 0), `${name} allreduce float64 sum`);

  for (const op of /** @type {const} */ (['prod', 'min', 'max'])) {
    const out = new Int32Array(N);
    comm.allreduceSync(
      Int32Array.from({ length: N }, (_, i) => value(me, i)),
      out,
      op,
    );
    const combine = {
      prod: (/** @type {number} */ a, /** @type {number} */ b) => a * b,
      min: (/** @type {number} */ a, /** @type {number} */ b) => Math.min(a, b),
      max: (/** @type {number} */ a, /** @type {number} */ b) => Math.max(a, b),
    }[op];
    same(out, (i) => members.map((r) => value(r, i)).reduce(combine), `${name} allreduce int32 ${op}`);
  }
  for (const op of /** @type {const} */ (['band', 'bor', 'bxor', 'land', 'lor'])) {
    const out = new Uint32Array(N);
    const bits = (/** @type {number} */ r, /** @type {number} */ i) => (i % 5 === 0 ? 0 : ((r + 1) * 0x9e3779b1 + i * 0x85ebca6b) >>> 0);
    comm.allreduceSync(
      Uint32Array.from({ length: N }, (_, i) => bits(me, i)),
      out,
      op,
    );
    const combine = {
      band: (/** @type {number} */ a, /** @type {number} */ b) => (a & b) >>> 0,
      bor: (/** @type {number} */ a, /** @type {number} */ b) => (a | b) >>> 0,
      bxor: (/** @type {number} */ a, /** @type {number} */ b) => (a ^ b) >>> 0,
      land: (/** @type {number} */ a, /** @type {number} */ b) => (a !== 0 && b !== 0 ? 1 : 0),
      lor: (/** @type {number} */ a, /** @type {number} */ b) => (a !== 0 || b !== 0 ? 1 : 0),
    }[op];
    // MPI applies the operator between ranks only: over one rank the input comes back as it is.
    same(out, (i) => members.map((r) => bits(r, i)).reduce(combine), `${name} allreduce uint32 ${op}`);
  }

  // In place, 64-bit integers.
  const big = BigInt64Array.from({ length: N }, (_, i) => BigInt(value(me, i)) * 10n ** 12n);
  comm.allreduceSync(big, big, 'sum');
  same(big, (i) => members.reduce((s, r) => s + BigInt(value(r, i)) * 10n ** 12n, 0n), `${name} allreduce int64 sum in place`);

  // Reduce to the last rank; nothing arrives elsewhere.
  const root = comm.size - 1;
  const reduced = new Int16Array(N).fill(7);
  comm.reduceSync(
    Int16Array.from({ length: N }, (_, i) => value(me, i)),
    comm.rank === root ? reduced : null,
    'max',
    root,
  );
  if (comm.rank === root) same(reduced, (i) => Math.max(...members.map((r) => value(r, i))), `${name} reduce int16 max`);

  // Bcast from the last rank.
  const buf = new Float32Array(N);
  if (comm.rank === root) for (let i = 0; i < N; i++) buf[i] = i * 0.25 - 3;
  comm.bcastSync(buf, root);
  same(buf, (i) => i * 0.25 - 3, `${name} bcast float32`);

  // Allgather: rank order.
  const all = new Uint16Array(3 * comm.size);
  comm.allgatherSync(Uint16Array.from([me, me * 2, 1000 + me]), all);
  const gathered = members.flatMap((r) => [r, r * 2, 1000 + r]);
  same(all, (i) => gathered[i] ?? -1, `${name} allgather`);

  comm.barrierSync();
}

// Arguments the reference collectives refuse, before anything is sent.
const f = new Float64Array(4);
check((await thrown(() => world.allreduceSync(f, f, /** @type {any} */ ('avg')), 'op avg')).code === 'EINVAL', 'unknown op');
check((await thrown(() => world.allreduceSync(f, f, 'band'), 'band on floats')).code === 'EINVAL', 'band on floats');
check((await thrown(() => world.allreduceSync(f, new Float32Array(4)), 'mixed types')).code === 'EINVAL', 'mixed types');
check(
  (await thrown(() => world.allgatherSync(f, new Float64Array(4 * size + 1)), 'allgather recv of the wrong length')).code === 'EINVAL',
  'allgather recv length',
);
check((await thrown(() => world.free(), 'freeing the world')).code === 'EINVAL', 'freeing the world');

// Freed communicators refuse further use.
copy.free();
check((await thrown(() => copy.barrierSync(), 'barrier after free')).code === 'ECLOSED', 'barrier after free');
check((await thrown(() => copy.native, 'native after free')).code === 'ECLOSED', 'native after free');
parity.free();

world.barrierSync();
console.log(`rank ${rank} ok`);
if (process.argv[2] === 'exit') process.exit(0);
