// @ts-check
// A rank of the request tests (test/runtime/requests.jobs.test.ts): non-blocking collectives
// (comm.ibcast, ireduce, iallreduce, iallgather, iallgatherv, ibarrier) several at once on one
// communicator, completed in turn by
//   - spinning on the last request's test() without ever yielding to the event loop (the addon
//     tells when a job has run; no Promise needs to settle) — then every earlier request must
//     test true too, since requests complete in call order;
//   - wait() on each, last first;
//   - await Promise.all(requests);
//   - requests with blocking calls and Promise twins between them (MPI ordering: the blocking
//     call runs after the requests before it — the fast path must not overtake them).
// Every result is checked against what the rank computes itself from every rank's inputs.
// With `--layer socket` the communicator runs over the Unix-socket test layer: between nodes
// wait() and blocking calls are refused (EINVAL) and test() is polled with the event loop free.
// Prints `rank R ok N` (N results checked), or the reason on stderr and exits 1.
//
// `--fault F`: `die`: the last rank SIGKILLs itself with requests in flight, before a barrier; `mismatch`: rank 0
// starts an iallreduce where the others start an ibcast of the same bytes; `args`: bad arguments;
// `release`: buffers released while a request is pending (a resizable ArrayBuffer is refused at
// the call; transferring an ArrayBuffer away copies it or throws DataCloneError, so the request
// still fills it).
// Every rank prints what each completion call threw (`rank R caught CODE: message`).
import { MessageChannel } from 'node:worker_threads';
import { socketLayerOfJob } from './socket-layer.mjs';
import { arrayOf, sameBytes } from './reference-op.mjs';
import { createCommunicator, init, IN_PLACE, userOp } from 'topocoll';

/** @import { Communicator, CollectiveRequest } from 'topocoll' */

const argv = process.argv.slice(2);
const option = (/** @type {string} */ name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const layer = argv.includes('--layer') ? await socketLayerOfJob() : undefined;
/** @type {Communicator} */
const comm = layer !== undefined ? await createCommunicator(layer) : await init();
const { rank, size } = comm;
// Over a JavaScript layer between nodes this thread may not block: no wait(), no Sync calls.
const blocking = layer === undefined || comm.localSize === comm.size;
let checks = 0;

/**
 * @param {string} what
 * @param {ArrayLike<number | bigint>} got
 * @param {ArrayLike<number | bigint>} want
 */
function same(what, got, want) {
  checks++;
  if (got.length !== want.length) throw new Error(`rank ${rank}: ${what}: got ${got.length} elements, expected ${want.length}`);
  // The same bytes are the same elements (the references hold no NaN); else the loop finds the
  // element that differs.
  if (sameBytes(got, want)) return;
  for (let i = 0; i < got.length; i++) {
    if (got[i] !== want[i]) throw new Error(`rank ${rank}: ${what}: element ${i} is ${got[i]}, expected ${want[i]}`);
  }
}

const sizes = [1, 8, 1000, 65_537, 262_147];

/**
 * Starts every kind of request for iteration `it`; returns them with the checks of their results.
 * @param {number} it
 * @returns {{ requests: CollectiveRequest[], check: () => void }}
 */
function start(it) {
  const n = /** @type {number} */ (sizes[it % sizes.length]);
  const root = it % size;
  const bcastBuf = arrayOf(Float64Array, n, (i) => (rank === root ? it * 1e6 + i + 0.5 : -1));
  const sendInts = arrayOf(Int32Array, n, (i) => rank * 7 + i - it);
  const sums = new Int32Array(n);
  const redRoot = (it + 1) % size;
  const sendMax = arrayOf(Float64Array, n, (i) => ((rank * 31 + i * 17 + it) % 101) - 50);
  const max = new Float64Array(rank === redRoot ? n : 0);
  // Ragged blocks, zeros among them: rank r gives (r + it) % 4 * (n % 97 + 1) bytes.
  const counts = Array.from({ length: size }, (_, r) => ((r + it) % 4) * ((n % 97) + 1));
  const offsets = counts.map((_, r) => counts.slice(0, r).reduce((a, b) => a + b, 0));
  const vsend = Uint8Array.from({ length: /** @type {number} */ (counts[rank]) }, (_, i) => (rank * 13 + i + it) & 255);
  const vrecv = new Uint8Array(counts.reduce((a, b) => a + b, 0));
  const m = Math.max(1, n >> 4);
  const gathered = arrayOf(Int16Array, m * size, (i) => (Math.floor(i / m) === rank ? rank * 100 + (i % m) - it : -9));
  const requests = [
    comm.ibcast(bcastBuf, root),
    comm.iallreduce(sendInts, sums, 'sum'),
    comm.ireduce(sendMax, rank === redRoot ? max : null, 'max', redRoot),
    comm.iallgatherv(vsend, vrecv, counts),
    comm.ibarrier(),
    comm.iallgather(IN_PLACE, gathered),
  ];
  const check = () => {
    same(
      `it ${it}: ibcast n=${n} from ${root}`,
      bcastBuf,
      arrayOf(Float64Array, n, (i) => it * 1e6 + i + 0.5),
    );
    const base = (size * (size - 1) * 7) / 2;
    same(
      `it ${it}: iallreduce sum n=${n}`,
      sums,
      arrayOf(Int32Array, n, (i) => base + size * (i - it)),
    );
    if (rank === redRoot) {
      const want = arrayOf(Float64Array, n, (i) => {
        let most = -Infinity;
        for (let r = 0; r < size; r++) most = Math.max(most, ((r * 31 + i * 17 + it) % 101) - 50);
        return most;
      });
      same(`it ${it}: ireduce max n=${n} at ${redRoot}`, max, want);
    }
    const vwant = new Uint8Array(vrecv.length);
    for (let r = 0; r < size; r++)
      for (let i = 0; i < /** @type {number} */ (counts[r]); i++) vwant[/** @type {number} */ (offsets[r]) + i] = (r * 13 + i + it) & 255;
    same(`it ${it}: iallgatherv counts ${counts.join(',')}`, vrecv, vwant);
    same(
      `it ${it}: iallgather IN_PLACE m=${m}`,
      gathered,
      arrayOf(Int16Array, m * size, (i) => Math.floor(i / m) * 100 + (i % m) - it),
    );
  };
  return { requests, check };
}

/**
 * Requests complete in call order: once one has, every earlier one has.
 * @param {CollectiveRequest[]} requests
 * @param {number} done index of one that tested true
 */
function inOrder(requests, done) {
  for (let k = 0; k < done; k++) {
    checks++;
    if (!(/** @type {CollectiveRequest} */ (requests[k]).test())) throw new Error(`rank ${rank}: request ${done} completed before request ${k}`);
  }
}

/** Polls test() until true: without yielding where this thread may block, else with the event loop free. */
async function spin(/** @type {CollectiveRequest} */ request) {
  const deadline = Date.now() + 60_000;
  let polls = 0;
  while (!request.test()) {
    if (++polls % 1024 === 0 && Date.now() > deadline) throw new Error(`rank ${rank}: test() still false after 60 s`);
    if (!blocking) await new Promise((r) => setImmediate(r));
  }
  return polls;
}

const fault = option('--fault');
if (fault !== undefined) {
  await faultRun(fault);
} else {
  let spunWithoutYield = 0;
  for (let it = 0; it < 24; it++) {
    const mode = it % 4;
    if (mode === 3) {
      // Requests, then a blocking call or a Promise twin, then more requests: every result
      // as if each had run alone, in call order.
      const first = start(it);
      const small = new Float64Array(2);
      if (blocking) comm.allreduceSync(Float64Array.of(rank, 1), small, 'sum');
      else await comm.allreduce(Float64Array.of(rank, 1), small, 'sum');
      same(`it ${it}: allreduce after requests`, small, [(size * (size - 1)) / 2, size]);
      const twin = new Int32Array(1);
      const pending = comm.allreduce(Int32Array.of(rank + it), twin, 'max');
      const second = start(it + 100);
      await pending;
      same(`it ${it}: Promise twin between requests`, twin, [size - 1 + it]);
      await Promise.all(second.requests);
      inOrder(second.requests, second.requests.length - 1);
      inOrder(first.requests, first.requests.length);
      first.check();
      second.check();
      continue;
    }
    const { requests, check } = start(it);
    const last = /** @type {CollectiveRequest} */ (requests[requests.length - 1]);
    if (mode === 0) {
      await spin(last);
      if (blocking) spunWithoutYield++;
      inOrder(requests, requests.length - 1);
    } else if (mode === 1 && blocking) {
      for (let k = requests.length - 1; k >= 0; k--) /** @type {CollectiveRequest} */ (requests[k]).wait();
    } else {
      if (mode === 1) {
        // Refused before anything waits, and the request goes on.
        try {
          last.wait();
          throw new Error(`rank ${rank}: wait() over a JavaScript layer between nodes did not throw`);
        } catch (e) {
          if (e.code !== 'EINVAL') throw e;
          checks++;
        }
      }
      await Promise.all(requests);
    }
    // Completed requests stay completed.
    for (const r of requests) {
      checks++;
      if (!r.test()) throw new Error(`rank ${rank}: a completed request tests false`);
      if (blocking) r.wait();
    }
    check();
  }
  // A user-defined operator runs at the call: its request is complete when returned. (Over a
  // JavaScript layer between nodes user operators are refused, as in the Promise twins.)
  if (blocking) userOpRequest();
  if (blocking && spunWithoutYield === 0) throw new Error(`rank ${rank}: no request was completed by test() alone`);
  comm.close();
  await layer?.close();
  console.log(`rank ${rank} ok ${checks}`);
}

function userOpRequest() {
  const user = new Float64Array(3);
  const r = comm.iallreduce(
    Float64Array.of(rank, 1, -rank),
    user,
    userOp((/** @type {number} */ a, /** @type {number} */ b) => Math.max(a, b), { commutative: true }),
  );
  checks++;
  if (!r.test()) throw new Error(`rank ${rank}: a user-operator request is not complete`);
  same('iallreduce with a user operator', user, [size - 1, 1, 0]);
}

/** @param {string} kind */
async function faultRun(kind) {
  if (kind === 'release') {
    // A resizable ArrayBuffer could shrink under the progress thread: refused at the call
    // (request and Promise forms), the communicator goes on.
    const resizable = () => new Float64Array(new /** @type {any} */ (ArrayBuffer)(64, { maxByteLength: 128 }));
    for (const c of [() => comm.ibcast(resizable(), 0), () => comm.bcast(resizable(), 0), () => comm.iallreduce(new Float64Array(8), resizable())]) {
      try {
        await c();
        console.log(`rank ${rank} caught nothing`);
      } catch (e) {
        console.log(`rank ${rank} caught ${e.code}: ${e.message}`);
      }
    }
    // Transferring the ArrayBuffer of a pending request away (structuredClone, postMessage)
    // copies it: this rank's buffer stays whole and receives the result.
    const n = 1 << 20;
    const pattern = (/** @type {number} */ i) => (i * 7 + 3) % 1009;
    for (const how of ['structuredClone', 'postMessage']) {
      const buf = new Float64Array(n);
      if (rank === 0) for (let i = 0; i < n; i++) buf[i] = pattern(i);
      const r = comm.ibcast(buf, 0);
      // Node 20 copies an untransferable ArrayBuffer named in a transfer list; later versions
      // throw DataCloneError. Either way this rank's buffer must stay whole.
      /** @type {ArrayBuffer | undefined} */
      let moved;
      try {
        if (how === 'structuredClone') moved = structuredClone(buf.buffer, { transfer: [buf.buffer] });
        else {
          const { port1, port2 } = new MessageChannel();
          moved = await new Promise((resolve, reject) => {
            port2.once('message', resolve);
            try {
              port1.postMessage(buf.buffer, [buf.buffer]);
            } catch (e) {
              reject(e);
            } finally {
              port1.close();
            }
          });
        }
      } catch (e) {
        if (!(e instanceof Error) || e.name !== 'DataCloneError') throw e;
      }
      await r;
      checks++;
      if (buf.length !== n || (moved !== undefined && moved.byteLength !== n * 8)) {
        throw new Error(`rank ${rank}: ${how}: the buffer was detached (${buf.length} elements left)`);
      }
      same(
        `ibcast after ${how} of its buffer`,
        buf,
        Array.from({ length: n }, (_, i) => pattern(i)),
      );
    }
    const after = new Int32Array(1);
    await comm.iallreduce(Int32Array.of(1), after);
    same('iallreduce after the releases', after, [size]);
    comm.close();
    console.log(`rank ${rank} ok ${checks}`);
    return;
  }
  if (kind === 'args') {
    // Bad arguments throw at the call, before anything is queued; the communicator goes on.
    const cases = [
      () => comm.ibcast(new Float64Array(4), size),
      () => comm.iallreduce(new Float64Array(4), new Float64Array(3)),
      () => comm.iallgather(new Int32Array(2), new Int32Array(2 * size - 1)),
      () => comm.iallgatherv(new Uint8Array(1), new Uint8Array(size), [-1]),
    ];
    for (const c of cases) {
      try {
        c();
        console.log(`rank ${rank} caught nothing`);
      } catch (e) {
        console.log(`rank ${rank} caught ${e.code}: ${e.message}`);
      }
    }
    const after = new Int32Array(1);
    await comm.iallreduce(Int32Array.of(1), after);
    same('iallreduce after bad arguments', after, [size]);
    comm.close();
    await layer?.close();
    console.log(`rank ${rank} ok ${checks}`);
    return;
  }
  const buf = new Float64Array(4096);
  /** @type {CollectiveRequest[]} */
  const requests = [];
  requests.push(comm.ibcast(buf, 0));
  if (kind === 'mismatch' && rank === 0) requests.push(comm.iallreduce(new Float64Array(4096), new Float64Array(4096)));
  else requests.push(comm.ibcast(new Float64Array(4096), 0));
  // Dies with two requests queued (its progress thread may finish them) and before the
  // barrier, which no survivor can then complete.
  if (kind === 'die' && rank === size - 1) process.kill(process.pid, 'SIGKILL');
  requests.push(comm.ibarrier());
  // Survivors complete them three ways, by rank: test() polled, wait(), await.
  for (const [k, r] of requests.entries()) {
    try {
      if (rank % 3 === 0) await spin(r);
      else if (rank % 3 === 1 && blocking) r.wait();
      else await r;
      console.log(`rank ${rank} request ${k} completed`);
    } catch (e) {
      console.log(`rank ${rank} request ${k} caught ${e.code}: ${e.message}`);
    }
  }
  process.exit(3);
}
