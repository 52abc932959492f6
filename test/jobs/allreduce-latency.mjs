// @ts-check
// The time of a small blocking allreduce, for the tests that bound it (a stall, not a speed):
// 8-byte int32 sums after a warm-up, each checked against the sum of every rank's input.
// Prints `rank R allreduce8 US` (µs per call, the mean of the loop) and `rank R ok`.
import { init } from 'topocoll';

const comm = await init();
const { rank, size } = comm;
const send = new Int32Array(2);
const recv = new Int32Array(2);
const calls = 200;
const run = (/** @type {number} */ i) => {
  send[0] = rank + i;
  send[1] = i;
  comm.allreduceSync(send, recv, 'sum');
  const want = (size * (size - 1)) / 2 + size * i;
  if (recv[0] !== want || recv[1] !== size * i) throw new Error(`rank ${rank}: call ${i} gave ${recv[0]},${recv[1]}, not ${want},${size * i}`);
};
for (let i = 0; i < 50; i++) run(i);
comm.barrierSync();
const start = performance.now();
for (let i = 0; i < calls; i++) run(i);
const us = ((performance.now() - start) * 1000) / calls;
console.log(`rank ${rank} allreduce8 ${us.toFixed(1)}`);
console.log(`rank ${rank} ok`);
comm.close();
