// @ts-check
// A rank of the sub-communicator tests (test/runtime/sub-communicators.jobs.test.ts): makes its
// communicator (init(), or createCommunicator over the Unix-socket test layer with
// `--layer socket`), then splits and dups it and checks, against what it computes itself from
// the parent ranks, colors and keys:
//   - each sub-communicator's size, its ranks' order (by key, then parent rank: allgather of
//     the parent ranks), and results of allreduce, bcast, reduce, allgather and barrier on it;
//   - an undefined color gives no communicator;
//   - collectives of the parent and of sub-communicators interleaved: blocking ones in one
//     order, Promise ones started in different orders on different ranks (each awaited later);
//   - a sub-communicator of a sub-communicator; close() of a child leaves the parent working.
// Prints `rank R ok N` (N results checked), or the reason on stderr and exits 1.
import { socketLayerOfJob } from './socket-layer.mjs';
import { createCommunicator, init } from 'topocoll';

/** @import { Communicator } from 'topocoll' */

const argv = process.argv.slice(2);
const layer = argv.includes('--layer') ? await socketLayerOfJob() : undefined;
const world = layer !== undefined ? await createCommunicator(layer) : await init();
const { rank, size } = world;
// Over a JavaScript layer, blocking calls across nodes are refused: Promise forms there.
const blocking = layer === undefined || world.localSize === world.size;
let checks = 0;

/**
 * @param {string} what
 * @param {ArrayLike<number | bigint>} got
 * @param {ArrayLike<number | bigint>} want
 */
function same(what, got, want) {
  checks++;
  const g = Array.from(got, String).join(',');
  const w = Array.from(want, String).join(',');
  if (g !== w) throw new Error(`rank ${rank}: ${what}: got [${g}], expected [${w}]`);
}

/**
 * The members of rank `r`'s sub-communicator (parent ranks in its rank order).
 * @param {(r: number) => number | undefined} colorOf
 * @param {(r: number) => number} keyOf
 */
function membersOf(colorOf, keyOf) {
  const c = colorOf(rank);
  if (c === undefined) return undefined;
  return Array.from({ length: size }, (_, r) => r)
    .filter((r) => colorOf(r) === c)
    .sort((a, b) => keyOf(a) - keyOf(b) || a - b);
}

/**
 * Every collective on `comm`, whose ranks are `members` (parent ranks), checked.
 * @param {Communicator} comm
 * @param {number[]} members
 * @param {string} what
 * @param {number} salt
 */
async function exercise(comm, members, what, salt) {
  const me = members.indexOf(rank);
  const sync = blocking || comm.localSize === comm.size;
  same(`${what}: rank, size`, [comm.rank, comm.size], [me, members.length]);
  const order = new Int32Array(members.length);
  if (sync) comm.allgatherSync(Int32Array.of(rank), order);
  else await comm.allgather(Int32Array.of(rank), order);
  same(`${what}: allgather of parent ranks`, order, members);
  for (const n of [1, 1000, 70_000]) {
    const send = Float64Array.from({ length: n }, (_, i) => rank * 3 + i + salt);
    const sum = new Float64Array(n);
    if (sync) comm.allreduceSync(send, sum, 'sum');
    else await comm.allreduce(send, sum, 'sum');
    const base = members.reduce((a, r) => a + r * 3, 0);
    same(
      `${what}: allreduce n=${n}`,
      sum,
      Array.from({ length: n }, (_, i) => base + members.length * (i + salt)),
    );
    const root = (n + salt) % members.length;
    const rootRank = /** @type {number} */ (members[root]);
    const buf = Int32Array.from({ length: n }, (_, i) => (me === root ? rootRank * 7 + i : -1));
    if (sync) comm.bcastSync(buf, root);
    else await comm.bcast(buf, root);
    same(
      `${what}: bcast n=${n} root=${root}`,
      buf,
      Array.from({ length: n }, (_, i) => rootRank * 7 + i),
    );
    const out = me === root ? new Float64Array(n) : null;
    if (sync) comm.reduceSync(send, out, 'max', root);
    else await comm.reduce(send, out, 'max', root);
    if (out !== null)
      same(
        `${what}: reduce max n=${n}`,
        out,
        Array.from({ length: n }, (_, i) => Math.max(...members) * 3 + i + salt),
      );
  }
  if (sync) comm.barrierSync();
  else await comm.barrier();
}

// `--fault F`: one rank breaks the split; every rank prints what it caught and exits 3.
//   mismatch  rank 0 splits while the others allgather; die  the last rank dies instead of
//   splitting; color  rank 0 passes color -5.
const fault = argv.includes('--fault') ? argv[argv.indexOf('--fault') + 1] : undefined;
if (fault !== undefined) {
  try {
    if (fault === 'die' && rank === size - 1) process.kill(process.pid, 'SIGKILL');
    // The very shape of split's first exchange (an allgather of 40 bytes per rank).
    if (fault === 'mismatch' && rank !== 0) await world.allgather(new Uint8Array(40), new Uint8Array(40 * size));
    else await world.split(fault === 'color' && rank === 0 ? -5 : 0, rank);
    console.log(`rank ${rank} caught nothing`);
  } catch (e) {
    console.log(`rank ${rank} caught ${e.code}: ${e.message}`);
  }
  process.exit(3);
}

// Parity halves, reversed by key: on emulated nodes in blocks, each half spans the nodes.
const half = { color: (/** @type {number} */ r) => r % 2, key: (/** @type {number} */ r) => -r };
const halfMembers = /** @type {number[]} */ (membersOf(half.color, half.key));
const child = /** @type {Communicator} */ (await world.split(half.color(rank), half.key(rank)));
await exercise(child, halfMembers, 'parity split', 1);

// The last rank left out (undefined color); the others by node: one-node communicators.
const nodeOf = new Int32Array(size);
if (blocking) world.allgatherSync(Int32Array.of(world.localRank === 0 ? rank : -1), nodeOf);
else await world.allgather(Int32Array.of(world.localRank === 0 ? rank : -1), nodeOf);
const leaderOf = (/** @type {number} */ r) => {
  let l = r;
  while (nodeOf[l] === -1) l--;
  return l;
};
const byNode = { color: (/** @type {number} */ r) => (size > 2 && r === size - 1 ? undefined : leaderOf(r)), key: (/** @type {number} */ r) => r };
const nodeComm = await world.split(byNode.color(rank), byNode.key(rank));
const nodeMembers = membersOf(byNode.color, byNode.key);
if (nodeMembers === undefined) {
  checks++;
  if (nodeComm !== undefined) throw new Error(`rank ${rank}: an undefined color gave a communicator`);
} else await exercise(/** @type {Communicator} */ (nodeComm), nodeMembers, 'by-node split', 2);

// Interleaved: blocking calls in one order on every rank; Promise calls started in different
// orders (even ranks: parent first), all awaited together.
const dup = await world.dup();
const everyone = Array.from({ length: size }, (_, r) => r);
for (let round = 0; round < 3; round++) {
  const a = new Float64Array(1000);
  const b = new Float64Array(1000);
  const c = new Float64Array(1000);
  const send = Float64Array.from({ length: 1000 }, (_, i) => rank + i + round);
  const calls = [() => world.allreduce(send, a, 'sum'), () => child.allreduce(send, b, 'sum'), () => dup.allreduce(send, c, 'sum')];
  if (rank % 2 === 1) calls.reverse();
  await Promise.all(calls.map((f) => f()));
  const want = (/** @type {number[]} */ m) => Array.from({ length: 1000 }, (_, i) => m.reduce((x, r) => x + r + i + round, 0));
  same(`interleaved world round ${round}`, a, want(everyone));
  same(`interleaved parity round ${round}`, b, want(halfMembers));
  same(`interleaved dup round ${round}`, c, want(everyone));
  if (blocking) {
    world.barrierSync();
    const x = new Float64Array(1);
    child.allreduceSync(Float64Array.of(1), x, 'sum');
    same(`blocking parity round ${round}`, x, [halfMembers.length]);
    dup.allreduceSync(Float64Array.of(1), x, 'sum');
    same(`blocking dup round ${round}`, x, [size]);
  }
}

// A sub-communicator of a sub-communicator; then the children closed, the parent goes on.
const grandchild = await child.dup();
await exercise(grandchild, halfMembers, 'dup of the parity split', 3);
grandchild.close();
child.close();
nodeComm?.close();
await exercise(dup, everyone, 'dup, children closed', 4);
dup.close();
await exercise(world, everyone, 'parent, children closed', 5);
world.close();
console.log(`rank ${rank} ok ${checks}`);
