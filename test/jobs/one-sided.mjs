// @ts-check
// A rank of the one-sided bcast tests (test/runtime/one-sided.jobs.test.ts): S1's one-sided binomial
// bcast (bcast.algorithm `one-sided`) on shared windows, configured at run time.
//   - every root, sizes 0 … 1 MiB + odd, as requests completed by polling test() without
//     yielding, as Sync calls and Promise twins, in five datatypes;
//   - back-to-back ibcasts: six requests from rotating roots in flight at once, each on its own
//     slice of one window (the same offset on every rank), completed by wait() last-first;
//   - a bcast out of an ordinary array on every rank runs the levels (no window needed) and the
//     communicator goes on with one-sided calls afterwards;
// every result against the rank's own reference (the root's pattern). `--poll-us N` sets
// bcast.pollMicros (S1's sleep between polls). Prints `rank R ok N` (N checks), or the reason
// on stderr and exits 1.
//
// Faults (every surviving rank prints `rank R caught CODE: message` and exits 0):
//   `--fault die`: in an 8 MiB ibcast from rank 0, rank 1 — a forwarder of the tree — SIGKILLs
//     itself right after starting its request, while puts are in flight; the survivors wait()
//     and then barrier (a rank whose own part was done learns it there);
//   `--fault offset`: rank 1's buffer lies one element further into its window part than the
//     others': the parent refuses to put;
//   `--fault mixed`: rank 1 passes ordinary memory where the others pass windows;
//   `--fault root-ordinary`: the root does;
//   `--fault windows`: rank 1 passes another window than the others;
// in both the ranks whose part of the tree went through finish the bcast and learn of the
// failure in the barrier after it.
import { init, TopocollError } from 'topocoll';
import { arrayOf, sameBytes } from './reference-op.mjs';

const argv = process.argv.slice(2);
const option = (/** @type {string} */ name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const fault = option('--fault');
const pollMicros = Number(option('--poll-us') ?? '0');
const comm = await init();
const { rank, size } = comm;
comm.configure({ bcast: { algorithm: 'one-sided', pollMicros } });
let checks = 0;

/**
 * @param {string} what
 * @param {ArrayLike<number | bigint>} got
 * @param {ArrayLike<number | bigint>} want the rank's own reference, an array of got's class
 */
function check(what, got, want) {
  checks++;
  // The same bytes are the same elements (a memcmp); else the loop finds the one that differs.
  if (sameBytes(got, want)) return;
  for (let i = 0; i < got.length; i++) {
    if (!Object.is(got[i], want[i])) throw new Error(`rank ${rank}: ${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

/**
 * A fault's last call: prints what it threw, closes, exits 0.
 * @param {() => unknown} call
 */
async function reportAndExit(call) {
  try {
    await call();
    console.log(`rank ${rank} caught nothing`);
  } catch (e) {
    const err = /** @type {TopocollError} */ (e);
    console.log(`rank ${rank} caught ${err instanceof TopocollError ? err.code : 'non-TopocollError'}: ${err.message}`);
  }
  comm.close();
  process.exit(0);
}

if (fault === 'die') {
  const n = 1 << 23;
  const w = comm.allocShared(Uint8Array, n);
  if (rank === 0) for (let i = 0; i < n; i++) w[i] = i % 251;
  comm.barrierSync();
  const r = comm.ibcast(w, 0);
  if (rank === 1) process.kill(process.pid, 'SIGKILL');
  await reportAndExit(() => {
    r.wait();
    comm.barrierSync();
  });
}
if (fault === 'offset') {
  const w = comm.allocShared(Float64Array, 1 << 10);
  if (rank === 0) w.fill(7);
  const at = rank === 1 ? 1 : 0;
  await reportAndExit(() => {
    try {
      comm.bcastSync(w.subarray(at, at + 512), 0);
      comm.barrierSync();
    } finally {
      // The parent refused before writing: rank 1's part still holds its zeros.
      if (rank === 1) console.log(`rank 1 window ${w.every((x) => x === 0) ? 'untouched' : 'written'}`);
    }
  });
}
if (fault === 'mixed' || fault === 'root-ordinary' || fault === 'windows') {
  const w = comm.allocShared(Float64Array, 1 << 10);
  const other = comm.allocShared(Float64Array, 1 << 10);
  // mixed: rank 1 passes ordinary memory; root-ordinary: the root does (its one-way bcast on the
  // levels returns at once, and it goes on to the barrier); windows: rank 1 passes another window.
  const odd = fault === 'root-ordinary' ? 0 : 1;
  const mine = rank !== odd ? w : fault === 'windows' ? other : new Float64Array(1 << 10);
  await reportAndExit(() => {
    comm.bcastSync(mine, 0);
    comm.barrierSync();
  });
}

const TYPES = /** @type {const} */ ([Float64Array, Int8Array, Uint16Array, Float32Array, BigInt64Array]);
/**
 * The root's n elements of bcast `tag`, as an array of the type holds them (wrapped in narrow
 * types; exact in the others): what the root writes and every rank checks against.
 * @param {any} type
 * @param {number} root
 * @param {number} tag
 * @param {number} n
 * @returns {any}
 */
const pattern = (type, root, tag, n) =>
  arrayOf(type, n, (i) => {
    const v = (root * 7919 + tag * 104729 + i * 31) % 100000;
    return type === BigInt64Array ? BigInt(v) : v;
  });

const SIZES = [0, 1, 7, 1024, 8191, 65537, 131073];
let tag = 0;
for (const type of TYPES) {
  const sizes = type === Float64Array ? SIZES : [1, 1024, 65537];
  const w = /** @type {any} */ (comm.allocShared(/** @type {any} */ (type), Math.max(...sizes)));
  for (const n of sizes) {
    const buf = w.subarray(0, n);
    for (let root = 0; root < size; root++) {
      for (const how of ['request', 'sync', 'promise']) {
        tag++;
        const want = pattern(type, root, tag, n);
        if (rank === root) buf.set(want);
        else buf.fill(type === BigInt64Array ? -1n : -1);
        if (how === 'request') {
          const r = comm.ibcast(buf, root);
          while (!r.test()) {
            // polled without yielding: test() needs no turn of the event loop
          }
        } else if (how === 'sync') {
          comm.bcastSync(buf, root);
        } else {
          await comm.bcast(buf, root);
        }
        check(`${type.name} ${n} from ${root} (${how})`, buf, want);
      }
    }
  }
  comm.freeShared(w);
}

// Back-to-back: six requests in flight, each on its own slice of one window.
{
  const n = 12000;
  const inFlight = 6;
  const w = comm.allocShared(Float64Array, n * inFlight);
  for (let round = 0; round < 3; round++) {
    const requests = [];
    /** @type {number[]} */
    const tags = [];
    for (let k = 0; k < inFlight; k++) {
      const root = (k + round) % size;
      const slice = w.subarray(k * n, (k + 1) * n - (k % 2));
      tag++;
      tags.push(tag);
      if (rank === root) slice.set(pattern(Float64Array, root, tag, slice.length));
      else slice.fill(-1);
      requests.push({ r: comm.ibcast(slice, root), slice, root });
    }
    for (let k = inFlight - 1; k >= 0; k--) requests[k]?.r.wait();
    requests.forEach(({ slice, root }, k) => {
      const want = pattern(Float64Array, root, tags[k] ?? 0, slice.length);
      check(`back-to-back ${k} round ${round}`, slice, want);
    });
  }
  comm.freeShared(w);
}

// Ordinary memory on every rank: the levels' bcast; then one-sided again, and the levels on a
// window once configure() switched back.
{
  const plain = new Float64Array(3000);
  const root = size - 1;
  if (rank === root) plain.forEach((_, i) => (plain[i] = i * 3));
  comm.bcastSync(plain, root);
  check(
    'ordinary memory',
    plain,
    arrayOf(Float64Array, plain.length, (i) => i * 3),
  );
  const w = comm.allocShared(Float64Array, 3000);
  if (rank === 0) w.forEach((_, i) => (w[i] = i * 5));
  await comm.ibcast(w, 0);
  check(
    'one-sided after the levels',
    w,
    arrayOf(Float64Array, w.length, (i) => i * 5),
  );
  comm.configure({ bcast: { algorithm: 'levels' } });
  if (rank === root) w.forEach((_, i) => (w[i] = i * 11));
  else w.fill(0);
  await comm.ibcast(w, root);
  check(
    'the levels on a window after configure()',
    w,
    arrayOf(Float64Array, w.length, (i) => i * 11),
  );
}

console.log(`rank ${rank} ok ${checks}`);
comm.close();
