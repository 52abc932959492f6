// The cost of a collective call itself: one rank, no communication, 8-byte buffers, a loop of
// back-to-back calls per collective (ns per call). Run: node bench/call-cost.mjs [calls]
import { init } from 'topocoll';

const comm = await init();
const calls = Number(process.argv[2] ?? 5_000_000);
const a = new Int32Array(2);
const b = new Int32Array(2);
const cases = {
  bcastSync: (i) => {
    a[0] = i;
    comm.bcastSync(a, 0);
  },
  reduceSync: (i) => {
    a[0] = i;
    comm.reduceSync(a, b, 'sum', 0);
  },
  allreduceSync: (i) => {
    a[0] = i;
    comm.allreduceSync(a, b, 'sum');
  },
};
for (const [name, call] of Object.entries(cases)) {
  for (let i = 0; i < 200_000; i++) call(i);
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) call(i);
  console.log(`${name} ${(Number(process.hrtime.bigint() - start) / calls).toFixed(1)} ns per call`);
}
comm.close();
