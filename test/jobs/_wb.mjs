import { init } from 'topocoll';
const comm = await init();
if (comm.rank === 0) console.log(JSON.stringify(comm.levels().map((l) => [l.name, l.enabled, l.groupSize, JSON.stringify(l.algorithms?.bcast)])));
const n = 1 << 20;
const w = comm.allocShared(Float64Array, n);
const plain = new Float64Array(n);
for (const [name, buf] of [['window', w], ['plain', plain], ['window', w], ['plain', plain]]) {
  for (let k = 0; k < 50; k++) comm.bcastSync(buf, 0);
  comm.barrierSync();
  const t = process.hrtime.bigint();
  for (let k = 0; k < 200; k++) { buf[k] = k; comm.bcastSync(buf, 0); }
  const us = Number(process.hrtime.bigint() - t) / 1000 / 200;
  if (comm.rank === 0) console.log(name, us.toFixed(1));
}
comm.close();
