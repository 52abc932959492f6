// @ts-check
// A rank of the fault tests of communicators over a host point-to-point layer
// (test/runtime/p2p-layer.jobs.test.ts), started by `topocoll run`: it makes its communicator with
// createCommunicator over the Unix-socket test layer (socket-layer.mjs, sockets in
// $TOPOCOLL_P2P_DIR) with one fault injected, and runs a rotation of Promise collectives
// (allreduce, bcast, allgather, reduce, barrier; 8 bytes to 560 KB, so messages of one layer
// message and streamed ones) whose every result is checked against a reference computed here.
//
// argv: <fault> [rank] [n]
//   drop R N    rank R's layer silently drops every message on the collectives tag after its N-th
//   reject R N  rank R's layer rejects every send on the collectives tag after its N-th
//   kill R N    rank R's layer SIGKILLs its process instead of sending its (N+1)-th message on
//               the collectives tag (in the middle of a collective, maybe of a streamed message)
//   die R K     rank R starts its K-th call (a Promise collective) and SIGKILLs itself
//   delay M     every rank's layer delays every message, on every tag, by up to M ms after the
//               previous one of its (peer, tag) — so tags overtake each other — and a second
//               communicator over the same layer is made while the first one's collectives are
//               in flight; both then run their collectives concurrently
//
// Output, one line per rank:
//   `rank R caught CODE in call K after T ms: message` (exit 3) — a call failed; T is how long
//     that call took;
//   `rank R ok N` (exit 0) — every call completed and N results were checked;
//   `rank R WRONG: …` (exit 5) — a result differed from the reference;
//   `rank R hung in call K` (exit 4) — no call settled within HANG_MS.
// Before it, `rank R layer tag T sent S dropped D rejected J; V messages received overtook others`:
// what its layer did on the collectives tag, and how many messages (any tag) arrived after one
// their sender had sent later.
import { socketLayer } from './socket-layer.mjs';
import { createCommunicator, isTopocollError } from 'topocoll';

/** @import { Communicator } from 'topocoll' */

const [fault = '', a = '', b = ''] = process.argv.slice(2);
const rank = Number(process.env.TOPOCOLL_RANK);
const size = Number(process.env.TOPOCOLL_SIZE);
const dir = /** @type {string} */ (process.env.TOPOCOLL_P2P_DIR);
/** The first communicator's collectives tag over a layer without tagBase. */
const TAG = 0;
const CALLS = fault === 'delay' ? 60 : 400;
const HANG_MS = 20_000;

/** @type {import('./socket-layer.mjs').Faults} */
const faults = {};
const target = Number(a);
if (fault === 'drop' && rank === target) Object.assign(faults, { dropAfter: Number(b), faultTag: TAG });
else if (fault === 'reject' && rank === target) Object.assign(faults, { rejectAfter: Number(b), faultTag: TAG });
else if (fault === 'kill' && rank === target) Object.assign(faults, { killAfter: Number(b), faultTag: TAG });
else if (fault === 'delay') Object.assign(faults, { maxDelayMs: Number(a) });
else if (!['drop', 'reject', 'kill', 'die'].includes(fault)) throw new Error(`unknown fault ${fault}`);

const layer = await socketLayer(dir, rank, size, faults);
const comm = await createCommunicator(layer);
if (comm.localSize === comm.size) throw new Error('the fault tests need a communicator across nodes');
/** @type {Communicator[]} */
const comms = [comm];
let checks = 0;

/**
 * @param {ArrayLike<number>} got
 * @param {(i: number) => number} want
 * @param {string} what
 */
function expect(got, want, what) {
  checks++;
  for (let i = 0; i < got.length; i++) {
    if (got[i] !== want(i)) {
      console.log(`rank ${rank} WRONG: ${what}: element ${i} is ${got[i]}, expected ${want(i)}`);
      process.exit(5);
    }
  }
}

const SIZES = [1, 700, 5000, 70_000];

/**
 * Call k of a rotation, on communicator c (the second communicator's inputs differ by `salt`).
 * @param {Communicator} c
 * @param {number} k
 * @param {number} salt
 * @returns {Promise<void>}
 */
async function step(c, k, salt) {
  const n = /** @type {number} */ (SIZES[Math.floor(k / 5) % SIZES.length]);
  const root = (k + salt) % size;
  const what = `call ${k} (communicator ${salt}, n=${n}, root ${root})`;
  switch (k % 5) {
    case 0: {
      const out = new Float64Array(n);
      await c.allreduce(
        Float64Array.from({ length: n }, (_, i) => ((rank * 7 + i * 3 + k + salt) % 11) - 5),
        out,
        'sum',
      );
      expect(
        out,
        (i) => {
          let s = 0;
          for (let r = 0; r < size; r++) s += ((r * 7 + i * 3 + k + salt) % 11) - 5;
          return s;
        },
        `allreduce ${what}`,
      );
      return;
    }
    case 1: {
      const buf = new Uint8Array(n * 8 + 3);
      if (rank === root) for (let i = 0; i < buf.length; i++) buf[i] = (i * 7 + root + k + salt) & 0xff;
      await c.bcast(buf, root);
      expect(buf, (i) => (i * 7 + root + k + salt) & 0xff, `bcast ${what}`);
      return;
    }
    case 2: {
      const m = Math.ceil(n / 4);
      const out = new Int32Array(m * size);
      await c.allgather(
        Int32Array.from({ length: m }, (_, i) => rank * 1_000_000 + i + k + salt),
        out,
      );
      expect(out, (j) => Math.floor(j / m) * 1_000_000 + (j % m) + k + salt, `allgather ${what}`);
      return;
    }
    case 3: {
      const out = rank === root ? new Int32Array(n) : null;
      await c.reduce(
        Int32Array.from({ length: n }, (_, i) => (rank + 1) * (i + k + salt)),
        out,
        'max',
        root,
      );
      if (out !== null) expect(out, (i) => size * (i + k + salt), `reduce ${what}`);
      return;
    }
    default:
      await c.barrier();
      checks++;
  }
}

/** Runs `calls` with a bound on how long it may take. */
async function bounded(/** @type {number} */ k, /** @type {() => Promise<unknown>} */ calls) {
  const hang = setTimeout(() => {
    console.log(`rank ${rank} hung in call ${k}`);
    process.exit(4);
  }, HANG_MS);
  try {
    await calls();
  } finally {
    clearTimeout(hang);
  }
}

const report = () => {
  const s = layer.stats(TAG);
  console.log(`rank ${rank} layer tag ${TAG} sent ${s.sent} dropped ${s.dropped} rejected ${s.rejected}; ${s.overtaken} messages received overtook others`);
};

let k = 0;
let started = Date.now();
try {
  if (fault === 'delay') {
    // The second communicator's setup (tag 3) runs while the first one's collectives (tag 0)
    // are in flight, and then both communicators' collectives (tags 0 and 2) at once.
    const first = Promise.all([0, 1, 2, 3, 4].map((j) => step(comm, j, 0)));
    comms.push(await createCommunicator(layer));
    await first;
    for (k = 5; k < CALLS; k++) {
      started = Date.now();
      await bounded(k, () => Promise.all([step(comm, k, 0), step(/** @type {Communicator} */ (comms[1]), k, 1)]));
    }
  } else {
    for (k = 0; k < CALLS; k++) {
      started = Date.now();
      if (fault === 'die' && rank === target && k === Number(b)) {
        void step(comm, k, 0);
        process.kill(process.pid, 'SIGKILL');
      }
      await bounded(k, () => step(comm, k, 0));
    }
  }
} catch (e) {
  const took = Date.now() - started;
  report();
  const code = isTopocollError(e) ? e.code : `not a TopocollError (${e?.name})`;
  console.log(`rank ${rank} caught ${code} in call ${k} after ${took} ms: ${String(e?.message).replace(/\n/g, ' | ')}`);
  for (const c of comms) c.close();
  await layer.close();
  process.exit(3);
}
report();
console.log(`rank ${rank} ok ${checks}`);
for (const c of comms) c.close();
await layer.close();
