// What the JavaScript fast path's own work costs, without any cache-line transfer: two FastPath
// instances (local ranks 0 and 1 of a two-rank node) on one thread over one buffer laid out as
// the addon lays out the shared area, and a loop of batches: 8 calls of the side that writes (a
// reduce's or gather's sender, a bcast's or scatter's root, a scan's rank 0), then 8 of the side
// that reads (the reduce's or gather's root, the bcast's or scatter's reader, the scan's rank 1),
// each batch timed. Each deposit is there before its reader looks, so nothing waits and
// nothing crosses between cores: the figures are each side's instructions alone (the
// Communicator's argument checks come on top), with a clock read per 8 calls. Every-rank calls
// (allreduce, allgather) cannot run on one thread: each rank waits for the other. Build first
// (`npm run build`). Run: node bench/fast-path-cost.mjs [calls]
import { DATATYPES } from '../dist/runtime/datatypes.js';
import { FastPath } from '../dist/runtime/fast-path.js';

// The offsets Engine::fast_path_layout hands over for two local ranks (the slots' offset and the
// size of the control area do not change the work, only where it lands).
const layout = {
  abortCode: 0,
  controls: 4096,
  controlStride: 384,
  sleeping: 4,
  idle: 8,
  callVersion: 256,
  call: 264,
  slots: 8192,
  slotStride: 1152,
  slotHeader: 8,
  slotData: 40,
  slotDataBytes: 1024,
  slotDepth: 16,
};
const segment = new SharedArrayBuffer(layout.slots + 2 * layout.slotDepth * layout.slotStride);
const engine = {
  awaitAreaDeposits() {
    throw new Error('a call waited: the pair is not in order');
  },
  ringLocal() {},
};
const rank = (me) => new FastPath({ segment, counters: new ArrayBuffer(16), layout, localIndex: me, asymmetric: true }, engine, me, 4000);
const [root, other] = [rank(0), rank(1)];

const calls = Number(process.argv[2] ?? 3_000_000);
const INT32 = DATATYPES.findIndex((d) => d.name === 'int32');
const SUM = 0;
const PLAN = 7;
/** Calls per batch: each side makes this many in a row (the ring lets a writer run 15 ahead). */
const BATCH = 8;
const send = new Int32Array(2);
const recv = new Int32Array(2);
const whole = new Int32Array(4);
// Each case: the side that writes first, then the side that reads, a batch at a time.
const cases = {
  'reduce, 8 B': {
    first: ['sender', (i) => ((send[0] = i), other.reduce(send, null, 2, INT32, SUM, 0, PLAN))],
    second: ['root', () => root.reduce(send, recv, 2, INT32, SUM, 0, PLAN)],
  },
  'bcast, 8 B': {
    first: ['root', (i) => ((send[0] = i), root.bcast(send, 2, INT32, 0, PLAN))],
    second: ['reader', () => other.bcast(recv, 2, INT32, 0, PLAN)],
  },
  // The area's other one-way calls: a gather's sender and root, a scatter's root and reader, a
  // scan's first rank and last (each 8 bytes per rank).
  'gather, 8 B': {
    first: ['sender', (i) => ((send[0] = i), other.gather(send, null, 2, INT32, 0, PLAN))],
    second: ['root', () => root.gather(send, whole, 2, INT32, 0, PLAN)],
  },
  'scatter, 8 B': {
    first: ['root', (i) => ((whole[0] = i), root.scatter(whole, recv, 2, INT32, 0, PLAN))],
    second: ['reader', () => other.scatter(null, recv, 2, INT32, 0, PLAN)],
  },
  'scan, 8 B': {
    first: ['rank 0', (i) => ((send[0] = i), root.scan(send, recv, 2, INT32, SUM, false, PLAN))],
    second: ['rank 1', () => other.scan(send, recv, 2, INT32, SUM, false, PLAN)],
  },
};
const now = () => process.hrtime.bigint();
for (const [name, { first, second }] of Object.entries(cases)) {
  let best = [Infinity, Infinity];
  for (let repeat = 0; repeat < 4; repeat++) {
    const spent = [0n, 0n];
    for (let i = 0; i < calls; i += BATCH) {
      const t0 = now();
      for (let k = 0; k < BATCH; k++) first[1](i + k);
      const t1 = now();
      for (let k = 0; k < BATCH; k++) second[1](i + k);
      spent[0] += t1 - t0;
      spent[1] += now() - t1;
    }
    // The first loop warms up (V8 compiles the calls); the fastest of the others counts.
    if (repeat > 0) best = best.map((b, j) => Math.min(b, Number(spent[j]) / calls));
  }
  console.log(`${name}: ${first[0]} ${best[0].toFixed(1)} ns, ${second[0]} ${best[1].toFixed(1)} ns per call (fastest of 3 loops of ${calls})`);
}
