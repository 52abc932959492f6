// @ts-check
// A rank of a multi-process test job (started by `topocoll run`): seeded random cases of gather,
// gatherv, scatter, scatterv, alltoall, alltoallv, reduceScatterBlock, reduceScatter, scan and
// exscan (every built-in operator of the type, a commutative and a non-commutative JavaScript one)
// in their three forms (Sync, Promise, request), every datatype,
// every root, IN_PLACE at the root, zero and uneven counts, under every per-level algorithm
// (auto, flat, binomial, mixed: switched with configure()). Every rank draws the same cases from
// one seed; each result is checked against the blocks recomputed here from (rank, case, index) —
// never the library's own output — and so are the elements a call must leave alone. Prints
// `rank R ok N` (N checks) or throws (non-zero exit) naming the case.
//
// Arguments: [--cases N] random cases per algorithm choice (default 60); [--seed S]; [--kinds
// scan,exscan] only those kinds of case; [--layer
// socket] makes the communicator with createCommunicator over the Unix-socket test layer
// (socket-layer.mjs): across nodes every call is then a Promise or an awaited request (blocking
// calls need the event loop the layer runs on) and the algorithms stay `auto` (so does configure());
// with it, [--round-robin K] puts rank r on node rr<r mod K> instead of the launcher's node.
import { combineInRankOrder, isBigIntClass, mulberry32, TYPED_ARRAY_CLASSES } from './reference-op.mjs';
import { socketLayerOfJob } from './socket-layer.mjs';
import { createCommunicator, init, IN_PLACE, userOp } from 'topocoll';

/** @typedef {any} Scalar */

const argv = process.argv.slice(2);
const option = (/** @type {string} */ name, /** @type {number} */ fallback) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : fallback);
const casesPerChoice = option('--cases', 60);
const seed = option('--seed', 0x5eed);
/** [--kinds scan,exscan,…]: only those kinds of case (every rank draws from the same list). */
const KINDS = ['gather', 'gatherv', 'scatter', 'scatterv', 'reduceScatterBlock', 'reduceScatter', 'scan', 'exscan', 'alltoall', 'alltoallv'];
const kinds = argv.includes('--kinds') ? String(argv[argv.indexOf('--kinds') + 1]).split(',') : KINDS;

const layer = argv.includes('--layer') ? await socketLayerOfJob() : undefined;
// --round-robin K (with --layer): rank r on node rr<r mod K>, so a node's ranks are not consecutive.
const roundRobin = option('--round-robin', 0);
const comm = layer !== undefined ? await createCommunicator(layer, roundRobin > 0 ? { node: `rr${layer.rank % roundRobin}` } : {}) : await init();
const { rank, size } = comm;
const blocking = layer === undefined || comm.localSize === comm.size;
let checks = 0;

const random = mulberry32(seed);
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
  const kind =
    /** @type {'gather' | 'gatherv' | 'scatter' | 'scatterv' | 'reduceScatterBlock' | 'reduceScatter' | 'scan' | 'exscan' | 'alltoall' | 'alltoallv'} */ (
      kinds[pick(kinds.length)]
    );
  const drawn = /** @type {'sync' | 'promise' | 'request'} */ (FORMS[pick(3)]);
  const form = drawn === 'sync' && !blocking ? 'promise' : drawn;
  const T = /** @type {any} */ (TYPED_ARRAY_CLASSES[pick(TYPED_ARRAY_CLASSES.length)]);
  const root = pick(size);
  const inPlace = pick(3) === 0;
  const v = kind.endsWith('v') || kind === 'reduceScatter';
  // Block lengths: up to 40 elements, now and then a large one (several column segments; the
  // largest more than the 64 KiB an exchange between nodes may carry whole), zeros.
  const lengthOf = () => (pick(5) === 0 ? 0 : pick(8) === 0 ? (pick(4) === 0 ? 17_000 : 2000) + pick(3000) : 1 + pick(40));
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
  if (kind === 'scan' || kind === 'exscan') {
    await scanCase(k, where, form, T, inPlace, kind === 'exscan', same);
    return;
  }
  if (kind.startsWith('alltoall')) {
    await alltoallCase(k, `${label} case ${k}: ${kind} (${form}) of ${T.name}${inPlace ? ', IN_PLACE' : ''}`, form, T, inPlace, kind === 'alltoallv');
    return;
  }
  if (kind.startsWith('reduceScatter')) {
    await reduceScatterCase(k, where, form, T, inPlace, v, counts, displs, total);
    return;
  }
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

/**
 * One alltoall case: block (s, d) — what rank s sends rank d — holds value(T, s, k, d·7919 + i);
 * alltoall: n elements each (0 now and then, a large n across several 64 KiB pieces); alltoallv:
 * a length per pair drawn alike on every rank (symmetric with IN_PLACE, whose input is laid out
 * by recvCounts). This rank's recv is checked block by block, and what the call must leave alone.
 */
async function alltoallCase(
  /** @type {number} */ k,
  /** @type {string} */ where,
  /** @type {'sync' | 'promise' | 'request'} */ form,
  /** @type {any} */ T,
  /** @type {boolean} */ inPlace,
  /** @type {boolean} */ v,
) {
  const pairLength = () => (pick(5) === 0 ? 0 : pick(10) === 0 ? 2000 + pick(20_000) : 1 + pick(40));
  const n = pairLength();
  /** @type {number[][]} */
  const c = Array.from({ length: size }, () => Array.from({ length: size }, () => (v ? pairLength() : n)));
  if (inPlace) for (let s = 0; s < size; s++) for (let d = 0; d < s; d++) /** @type {number[]} */ (c[s])[d] = /** @type {number} */ (c[d]?.[s]);
  const count = (/** @type {number} */ s, /** @type {number} */ d) => /** @type {number} */ (c[s]?.[d]);
  const sendCounts = Array.from({ length: size }, (_, d) => count(rank, d));
  const recvCounts = Array.from({ length: size }, (_, s) => count(s, rank));
  const sum = (/** @type {number[]} */ a) => a.reduce((x, y) => x + y, 0);
  const block = (/** @type {number} */ s, /** @type {number} */ d, /** @type {number} */ i) => value(T, s, k, d * 7919 + i);
  where = `${where}, ${v ? `counts ${sendCounts.join(',')} / ${recvCounts.join(',')}` : `n ${n}`}`;
  // alltoall's n is send.length / size (recv's with IN_PLACE): no room past the blocks there.
  const pad = inPlace && !v ? 0 : 3;
  const recv = new T(sum(recvCounts) + pad).fill(sentinel(T));
  const send = new T(sum(sendCounts) + (v ? pad : 0)).fill(sentinel(T));
  const input = inPlace ? recv : send;
  let at = 0;
  for (let d = 0; d < size; d++) for (let i = 0; i < /** @type {number} */ (sendCounts[d]); i++) input[at++] = block(rank, d, i);
  const arg = inPlace ? IN_PLACE : send;
  const calls = v
    ? {
        sync: () => comm.alltoallvSync(arg, sendCounts, recv, recvCounts),
        promise: () => comm.alltoallv(arg, sendCounts, recv, recvCounts),
        request: () => comm.ialltoallv(arg, sendCounts, recv, recvCounts),
      }
    : { sync: () => comm.alltoallSync(arg, recv), promise: () => comm.alltoall(arg, recv), request: () => comm.ialltoall(arg, recv) };
  await run(form, calls);
  at = 0;
  for (let s = 0; s < size; s++) {
    for (let i = 0; i < /** @type {number} */ (recvCounts[s]); i++, at++) {
      const want = block(s, rank, i);
      if (recv[at] !== want) check(`${where}: recv[${at}] is ${recv[at]}, expected rank ${s}'s ${want}`, false);
    }
  }
  check(`${where}: recv`, true);
  for (let i = at; i < at + pad; i++) check(`${where}: recv[${i}] past the blocks was written`, recv[i] === sentinel(T));
  if (!inPlace) {
    at = 0;
    for (let d = 0; d < size; d++)
      for (let i = 0; i < /** @type {number} */ (sendCounts[d]); i++, at++) if (send[at] !== block(rank, d, i)) check(`${where}: send changed at ${at}`, false);
    for (let i = at; i < send.length; i++) check(`${where}: send[${i}] past the blocks was written`, send[i] === sentinel(T));
  }
}

/** The operators a reduce-scatter case draws from: built-in ones for the type, and two of JavaScript. */
function operatorsFor(/** @type {any} */ T) {
  const integer = T !== Float32Array && T !== Float64Array;
  /** @type {(import('topocoll').ReduceOpName | 'user-sum' | 'user-first')[]} */
  const ops = ['sum', 'max', 'min', 'user-sum', 'user-first'];
  if (integer) ops.push('band', 'bor', 'bxor');
  return ops;
}

/** The JavaScript operators the cases draw by name, made once. @type {Record<string, import('topocoll').UserOp>} */
const USER_OPS = {
  'user-sum': userOp((/** @type {any} */ a, /** @type {any} */ b) => a + b, { commutative: true }),
  'user-first': userOp((/** @type {any} */ a) => a, { commutative: false }),
  'user-last': userOp((/** @type {any} */ _a, /** @type {any} */ b) => b, { commutative: false }),
};

/**
 * One of `names` drawn from the seed, and its operator: a built-in's name, or the JavaScript
 * operator `user-sum` (commutative), `user-first` or `user-last` (not) stands for. A JavaScript
 * operator runs on the calling thread, which a JavaScript layer across nodes refuses: drawn only
 * in blocking jobs.
 */
function pickOperator(/** @type {string[]} */ names) {
  const ops = names.filter((o) => blocking || !o.startsWith('user'));
  const name = /** @type {string} */ (ops[pick(ops.length)]);
  return { name, op: USER_OPS[name] ?? /** @type {import('topocoll').ReduceOpName} */ (name) };
}

/** The reference: `op` over the values of element i of ranks 0 … upTo − 1 (default: every rank), in rank order. */
function reduced(/** @type {any} */ T, /** @type {string} */ op, /** @type {number} */ k, /** @type {number} */ i, upTo = size) {
  /** @type {any[]} */
  const vals = Array.from({ length: upTo }, (_, r) => input(T, r, k, i));
  switch (op) {
    case 'sum':
    case 'user-sum':
      return vals.reduce((a, b) => a + b);
    case 'max':
      return vals.reduce((a, b) => (b > a ? b : a));
    case 'min':
      return vals.reduce((a, b) => (b < a ? b : a));
    case 'band':
      return vals.reduce((a, b) => a & b);
    case 'bor':
      return vals.reduce((a, b) => a | b);
    case 'bxor':
      return vals.reduce((a, b) => a ^ b);
    default:
      return vals[0]; // user-first: a op b = a, in rank order rank 0's value
  }
}
/** A reduce-scatter input element: 0 … 7, so that sums of up to 15 ranks fit every type. */
function input(/** @type {any} */ T, /** @type {number} */ r, /** @type {number} */ k, /** @type {number} */ i) {
  const x = (r * 31 + k * 7 + i * 3) % 8;
  return isBigIntClass(T) ? BigInt(x) : x;
}

/**
 * One reduce-scatter case: every rank's input (the whole vector) combined; this rank's block of
 * the result checked element by element, and what the call must leave alone.
 */
async function reduceScatterCase(
  /** @type {number} */ k,
  /** @type {string} */ where,
  /** @type {'sync' | 'promise' | 'request'} */ form,
  /** @type {any} */ T,
  /** @type {boolean} */ inPlace,
  /** @type {boolean} */ v,
  /** @type {number[]} */ counts,
  /** @type {number[]} */ displs,
  /** @type {number} */ total,
) {
  const { name, op } = pickOperator(operatorsFor(T));
  where = `${where}, op ${name}`;
  const mine = /** @type {number} */ (counts[rank]);
  const at = /** @type {number} */ (displs[rank]);
  const send = new T(total);
  for (let i = 0; i < total; i++) send[i] = input(T, rank, k, i);
  // IN_PLACE: recv is the input (exactly the blocks for reduceScatterBlock, whose n it gives).
  // reduceScatterBlock's recv says n (its length): no room past the block there.
  const pad = v ? 2 : 0;
  const recv = inPlace ? send : new T(mine + pad).fill(sentinel(T));
  const arg = inPlace ? IN_PLACE : send;
  const opOf = /** @type {any} */ (op);
  const calls = v
    ? {
        sync: () => comm.reduceScatterSync(arg, recv, counts, opOf),
        promise: () => comm.reduceScatter(arg, recv, counts, opOf),
        request: () => comm.ireduceScatter(arg, recv, counts, opOf),
      }
    : {
        sync: () => comm.reduceScatterBlockSync(arg, recv, opOf),
        promise: () => comm.reduceScatterBlock(arg, recv, opOf),
        request: () => comm.ireduceScatterBlock(arg, recv, opOf),
      };
  await run(form, calls);
  for (let i = 0; i < mine; i++) {
    const want = reduced(T, name, k, at + i);
    check(`${where}: recv[${i}] is ${recv[i]}, expected ${want}`, recv[i] === (isBigIntClass(T) ? want : Number(want)));
  }
  if (!inPlace) {
    for (let i = mine; i < mine + pad; i++) check(`${where}: recv[${i}] past this rank's block was written`, recv[i] === sentinel(T));
    for (let i = 0; i < total; i++) check(`${where}: send changed`, send[i] === input(T, rank, k, i));
  }
}

/** The operators a scan case draws from: every built-in one for the type, and three of JavaScript (two not commutative). */
function scanOperatorsFor(/** @type {any} */ T) {
  const integer = T !== Float32Array && T !== Float64Array;
  /** @type {string[]} */
  const ops = ['sum', 'prod', 'max', 'min', 'user-sum', 'user-first', 'user-last'];
  if (integer) ops.push('band', 'bor', 'bxor', 'land', 'lor');
  return ops;
}

/** A scan input element: 1 or 2 for prod (2^9 at most: it wraps or clamps in small types), else as a reduce-scatter's. */
function scanInput(/** @type {any} */ T, /** @type {string} */ op, /** @type {number} */ r, /** @type {number} */ k, /** @type {number} */ i) {
  if (op !== 'prod') return input(T, r, k, i);
  const x = 1 + ((r + k + i) % 2);
  return isBigIntClass(T) ? BigInt(x) : x;
}

/**
 * The reference of a scan: the left fold x0 op x1 op … op x(upTo − 1) of element i, computed here
 * in plain arithmetic and then stored as T stores it (clamped for Uint8ClampedArray). One value
 * is that value as it is (MPI applies no operator to it: land and lor do not make it 0 or 1).
 */
function scanned(/** @type {any} */ T, /** @type {string} */ op, /** @type {number} */ k, /** @type {number} */ i, /** @type {number} */ upTo) {
  /** @type {any[]} */
  const vals = Array.from({ length: upTo }, (_, r) => scanInput(T, op, r, k, i));
  if (upTo === 1) return vals[0];
  const big = isBigIntClass(T);
  /** @type {any} */
  let acc;
  if (op === 'user-sum') acc = vals.reduce((a, b) => a + b);
  else if (op === 'user-first') acc = vals[0];
  else if (op === 'user-last') acc = vals[upTo - 1];
  else acc = combineInRankOrder(/** @type {import('topocoll').ReduceOpName} */ (op), vals, big ? 0n : 0, big ? 1n : 1);
  if (T === Uint8ClampedArray) return Math.min(255, acc);
  const tmp = new T(1);
  tmp[0] = acc;
  return tmp[0];
}

/**
 * A scan or exscan case of n elements: this rank's prefix checked element by element against the
 * left fold of every rank's input recomputed here (exscan at rank 0: recv untouched), and the
 * input left alone.
 */
async function scanCase(
  /** @type {number} */ k,
  /** @type {string} */ where,
  /** @type {'sync' | 'promise' | 'request'} */ form,
  /** @type {any} */ T,
  /** @type {boolean} */ inPlace,
  /** @type {boolean} */ exclusive,
  /** @type {number} */ n,
) {
  const { name, op } = pickOperator(scanOperatorsFor(T));
  where = `${where}, op ${name}`;
  const send = new T(n + 2).fill(sentinel(T));
  for (let i = 0; i < n; i++) send[i] = scanInput(T, name, rank, k, i);
  const recv = inPlace ? send.subarray(0, n) : new T(n + 2).fill(sentinel(T));
  const arg = inPlace ? IN_PLACE : send.subarray(0, n);
  const into = recv.subarray(0, n);
  const opOf = /** @type {any} */ (op);
  await run(
    form,
    exclusive
      ? { sync: () => comm.exscanSync(arg, into, opOf), promise: () => comm.exscan(arg, into, opOf), request: () => comm.iexscan(arg, into, opOf) }
      : { sync: () => comm.scanSync(arg, into, opOf), promise: () => comm.scan(arg, into, opOf), request: () => comm.iscan(arg, into, opOf) },
  );
  for (let i = 0; i < n; i++) {
    if (exclusive && rank === 0) {
      check(`${where}: rank 0's recv[${i}] was written`, recv[i] === (inPlace ? scanInput(T, name, 0, k, i) : sentinel(T)));
      continue;
    }
    const want = scanned(T, name, k, i, exclusive ? rank : rank + 1);
    check(`${where}: recv[${i}] is ${recv[i]}, expected ${want}`, recv[i] === want);
  }
  const outside = inPlace ? send : recv;
  for (let i = n; i < n + 2; i++) check(`${where}: element ${i} past the call was written`, outside[i] === sentinel(T));
  if (!inPlace) for (let i = 0; i < n; i++) check(`${where}: send changed`, send[i] === scanInput(T, name, rank, k, i));
}

// Every per-level algorithm: auto, each one everywhere, and the two mixed by level; with them
// the forced reduce-scatter top (ring, recursive-halving) and one-node alltoall form (bruck, pairwise).
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
  // (The scans run in column segments of the reduce's segment: 4 KiB there too.)
  // Each choice but auto also forces reduce-scatter's top algorithm and the one-node alltoall
  // form, every pair once: flat ring + bruck, binomial recursive-halving + bruck, the mixed two
  // ring + pairwise and recursive-halving + pairwise.
  const c = choices.findIndex(([l]) => l === label);
  const top = c === 0 ? 'auto' : c % 2 === 1 ? 'ring' : 'recursive-halving';
  const algorithm = c === 0 ? 'auto' : c <= 2 ? 'bruck' : 'pairwise';
  if (blocking)
    comm.configure({
      gather: { levels: /** @type {any} */ (chosen), segment },
      scatter: { levels: /** @type {any} */ (chosen), segment },
      reduce: { segment },
      reduceScatter: { top },
      alltoall: { algorithm },
    });
  for (let n = 0; n < casesPerChoice; n++) await oneCase(k++, c === 0 ? label : `${label}, reduce-scatter top ${top}, alltoall ${algorithm}`);
}
console.log(`rank ${rank} ok ${checks}`);
// A rank's last steps may be sends (rank 0's in a scan always are): over a JavaScript layer
// close() hands them to the layer and the process lives until they settle, so it may end here.
comm.close();
