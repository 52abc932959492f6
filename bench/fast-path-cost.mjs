// What the JavaScript fast path's own work costs, without any cache-line transfer: two FastPath
// instances (local ranks 0 and 1 of a two-rank node) on one thread over one buffer laid out as
// the addon lays out the shared area, and a loop of call pairs — rank 1's call then rank 0's
// (a reduce's sender then its root, a bcast's root then its reader). Each deposit is there
// before its reader looks, so nothing waits; the figure is the two calls' instructions alone
// (the Communicator's argument checks come on top). Every-rank calls (allreduce, allgather)
// cannot run on one thread: each rank waits for the other. Build first (`npm run build`).
// Run: node bench/fast-path-cost.mjs [pairs]
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

const pairs = Number(process.argv[2] ?? 3_000_000);
const INT32 = DATATYPES.findIndex((d) => d.name === 'int32');
const SUM = 0;
const PLAN = 7;
const send = new Int32Array(2);
const recv = new Int32Array(2);
const cases = {
  'reduce, 8 B (sender, root)': (i) => {
    send[0] = i;
    other.reduce(send, null, 2, INT32, SUM, 0, PLAN);
    root.reduce(send, recv, 2, INT32, SUM, 0, PLAN);
  },
  'bcast, 8 B (root, reader)': (i) => {
    send[0] = i;
    root.bcast(send, 2, INT32, 0, PLAN);
    other.bcast(recv, 2, INT32, 0, PLAN);
  },
};
for (const [name, pair] of Object.entries(cases)) {
  let best = Infinity;
  for (let repeat = 0; repeat < 3; repeat++) {
    for (let i = 0; i < 200_000; i++) pair(i);
    const start = process.hrtime.bigint();
    for (let i = 0; i < pairs; i++) pair(i);
    best = Math.min(best, Number(process.hrtime.bigint() - start) / pairs);
  }
  console.log(`${name}: ${best.toFixed(1)} ns per pair of calls (fastest of 3 loops of ${pairs})`);
}
