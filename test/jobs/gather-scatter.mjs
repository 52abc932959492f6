// @ts-check
// A rank of a multi-process test job (started by `topocoll run`): seeded random cases of gather,
// gatherv, scatter and scatterv in their three forms (Sync, Promise, request), every datatype,
// every root, IN_PLACE at the root, zero and uneven counts, under every per-level algorithm
// (auto, flat, binomial, mixed: switched with configure()). Every rank draws the same cases from
// one seed; each result is checked against the blocks recomputed here from (rank, case, index) —
// never the library's own output — and so are the elements a call must leave alone. Prints
// `rank R ok N` (N checks) or throws (non-zero exit) naming the case.
//
// Arguments: [--cases N] random cases per algorithm choice (default 60); [--seed S]; [--layer
// socket] makes the communicator with createCommunicator over the Unix-socket test layer
// (socket-layer.mjs): across nodes every call is then a Promise or an awaited request (blocking
// calls need the event loop the layer runs on) and the algorithms stay `auto` (so does configure()).
import { isBigIntClass, TYPED_ARRAY_CLASSES } from './reference-op.mjs';
import { socketLayer } from './socket-layer.mjs';
import { createCommunicator, init, IN_PLACE } from 'topocoll';

/** @typedef {any} Scalar */

const argv = process.argv.slice(2);
const option = (/** @type {string} */ name, /** @type {number} */ fallback) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : fallback);
const casesPerChoice = option('--cases', 60);
const seed = option('--seed', 0x5eed);

const layer = argv.includes('--layer')
  ? await socketLayer(/** @type {string} */ (process.env.TOPOCOLL_P2P_DIR), Number(process.env.TOPOCOLL_RANK), Number(process.env.TOPOCOLL_SIZE))
  : undefined;
const comm = layer !== undefined ? await createCommunicator(layer) : await init();
const { rank, size } = comm;
const blocking = layer === undefined || comm.localSize === comm.size;
let checks = 0;

/** mulberry32: the same sequence on every rank. */
function prng(/** @type {number} */ s) {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = prng(seed);
const pick = (/** @type {number} */ n) => Math.floor(random() * n);

/** The element i of rank r's block in case k, as type T holds it (small enough for every type). */
function value(/** @type {any} */ T, /** @type {number} */ r, /** @type {number} */ k, /** @type {number} */ i) {
  const v = (r * 31 + k * 7 + i * 3) % 100;
  return isBigIntClass(T) ? BigInt(v) : v;
}
/** What a buffer holds where a call must not write. */
const SENTINEL = 101;
const sentinel = (/** @type {any} */ T) => (isBigIntClass(T) ? 101n : SENTINEL);

/** @param {string} what @param {boolean} ok */
function check(what, ok) {
  checks++;
  if (!ok) throw new Error(`rank ${rank}: ${what}`);
}

/**
 * Runs `op` in `form`: the Sync call, the Promise awaited, or the request waited for.
 * @param {'sync' | 'promise' | 'request'} form
 * @param {{ sync: () => void, promise: () => Promise<void>, request: () => import('topocoll').CollectiveRequest }} op
 */
async function run(form, op) {
  if (form === 'sync') op.sync();
  else if (form === 'promise') await op.promise();
  else {
    const req = op.request();
    // (The draw is made on every rank alike, whether or not it can block.)
    if (pick(2) === 0 && blocking) req.wait();
    else await req;
  }
}

const FORMS = /** @type {const} */ (['sync', 'promise', 'request']);

/** One random case, the same on every rank. */
async function oneCase(/** @type {number} */ k, /** @type {string} */ label) {
  const kind = /** @type {'gather' | 'gatherv' | 'scatter' | 'scatterv'} */ (['gather', 'gatherv', 'scatter', 'scatterv'][pick(4)]);
  const drawn = /** @type {'sync' | 'promise' | 'request'} */ (FORMS[pick(3)]);
  const form = drawn === 'sync' && !blocking ? 'promise' : drawn;
  const T = /** @type {any} */ (TYPED_ARRAY_CLASSES[pick(TYPED_ARRAY_CLASSES.length)]);
  const root = pick(size);
  const inPlace = pick(3) === 0;
  const v = kind.endsWith('v');
  // Block lengths: up to 40 elements, now and then a large one (several column segments), zeros.
  const lengthOf = () => (pick(5) === 0 ? 0 : pick(8) === 0 ? 2000 + pick(3000) : 1 + pick(40));
  const same = lengthOf();
  const counts = Array.from({ length: size }, () => (v ? lengthOf() : same));
  const displs = counts.map((_, r) => counts.slice(0, r).reduce((a, b) => a + b, 0));
  const total = counts.reduce((a, b) => a + b, 0);
  const mine = /** @type {number} */ (counts[rank]);
  const where = `${label} case ${k}: ${kind} (${form}) of ${T.name}, root ${root}${inPlace ? ', IN_PLACE' : ''}, counts ${v ? counts.join(',') : same}`;
  const atRoot = rank === root;
  // A little more than needed, so that writes past the end are seen — but with IN_PLACE the root's
  // vector says n (its length / size), so there it is exactly the blocks.
  const pad = inPlace && !v ? 0 : 3;
  const whole = new T(total + pad).fill(sentinel(T));
  const block = new T(mine + 2).fill(sentinel(T));
  if (kind.startsWith('gather')) {
    const own = block.subarray(0, mine);
    for (let i = 0; i < mine; i++) own[i] = value(T, rank, k, i);
    const send = atRoot && inPlace ? IN_PLACE : own;
    const at = /** @type {number} */ (displs[rank]);
    if (atRoot && inPlace) for (let i = 0; i < mine; i++) whole[at + i] = value(T, rank, k, i);
    const recv = atRoot ? whole : null;
    const op = v
      ? {
          sync: () => comm.gathervSync(send, recv, counts, root),
          promise: () => comm.gatherv(send, recv, counts, root),
          request: () => comm.igatherv(send, recv, counts, root),
        }
      : { sync: () => comm.gatherSync(send, recv, root), promise: () => comm.gather(send, recv, root), request: () => comm.igather(send, recv, root) };
    await run(form, op);
    if (atRoot) {
      for (let r = 0; r < size; r++)
        for (let i = 0; i < /** @type {number} */ (counts[r]); i++)
          check(
            `${where}: recv[${/** @type {number} */ (displs[r]) + i}] is ${whole[/** @type {number} */ (displs[r]) + i]}, expected rank ${r}'s ${value(T, r, k, i)}`,
            whole[/** @type {number} */ (displs[r]) + i] === value(T, r, k, i),
          );
      for (let i = total; i < total + pad; i++) check(`${where}: recv[${i}] past the blocks was written`, whole[i] === sentinel(T));
    }
    for (let i = 0; i < mine; i++) check(`${where}: send changed`, block[i] === value(T, rank, k, i));
  } else {
    if (atRoot)
      for (let r = 0; r < size; r++)
        for (let i = 0; i < /** @type {number} */ (counts[r]); i++) whole[/** @type {number} */ (displs[r]) + i] = value(T, r, k, i);
    const send = atRoot ? whole : null;
    const recv = atRoot && inPlace ? IN_PLACE : v ? block : block.subarray(0, mine);
    const op = v
      ? {
          sync: () => comm.scattervSync(send, recv, counts, root),
          promise: () => comm.scatterv(send, recv, counts, root),
          request: () => comm.iscatterv(send, recv, counts, root),
        }
      : { sync: () => comm.scatterSync(send, recv, root), promise: () => comm.scatter(send, recv, root), request: () => comm.iscatter(send, recv, root) };
    await run(form, op);
    if (!(atRoot && inPlace)) {
      for (let i = 0; i < mine; i++) check(`${where}: recv[${i}] is ${block[i]}, expected ${value(T, rank, k, i)}`, block[i] === value(T, rank, k, i));
      for (let i = mine; i < mine + 2; i++) check(`${where}: recv[${i}] past this rank's block was written`, block[i] === sentinel(T));
    }
    if (atRoot)
      for (let r = 0; r < size; r++)
        for (let i = 0; i < /** @type {number} */ (counts[r]); i++)
          check(`${where}: the root's send changed`, whole[/** @type {number} */ (displs[r]) + i] === value(T, r, k, i));
  }
}

// Every per-level algorithm: auto, each one everywhere, and the two mixed by level.
const levels = comm
  .levels()
  .filter((l) => l.enabled && l.groupSize > 0)
  .map((l) => l.name);
const everywhere = (/** @type {(i: number) => string} */ f) => Object.fromEntries(levels.map((l, i) => [l, f(i)]));
/** @type {[string, Record<string, string>][]} */
const choices = [
  ['auto', {}],
  ['flat', everywhere(() => 'flat')],
  ['binomial', everywhere(() => 'binomial')],
  ['flat below, binomial above', everywhere((i) => (i === levels.length - 1 ? 'binomial' : 'flat'))],
  ['binomial below, flat above, 4 KiB columns', everywhere((i) => (i === levels.length - 1 ? 'flat' : 'binomial'))],
];
let k = 0;
// configure() blocks too: over a JavaScript layer across nodes only `auto` runs.
for (const [label, chosen] of blocking ? choices : choices.slice(0, 1)) {
  const segment = label.includes('4 KiB') ? 4096 : 'auto';
  if (blocking) comm.configure({ gather: { levels: /** @type {any} */ (chosen), segment }, scatter: { levels: /** @type {any} */ (chosen), segment } });
  for (let c = 0; c < casesPerChoice; c++) await oneCase(k++, label);
}
console.log(`rank ${rank} ok ${checks}`);
comm.close();
