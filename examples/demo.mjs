// The demo: every rank joins the job, checks a few collectives against what it expects, and
// times them. Run it with
//   npx topocoll run -n 4 --tag-output examples/demo.mjs            # one node, shared memory
//   npx topocoll run -n 8 --nodes 2 --tag-output examples/demo.mjs  # two emulated nodes, TCP between
import { init } from 'topocoll';

const comm = await init();
const { rank, size } = comm;

// Allreduce: the sum of all ranks, on every rank.
const sum = new Float64Array(1);
comm.allreduceSync(Float64Array.of(rank), sum, 'sum');
if (sum[0] !== (size * (size - 1)) / 2) throw new Error(`allreduce gave ${sum[0]}`);

// Bcast from the last rank.
const word = new Uint8Array(24);
if (rank === size - 1) new TextEncoder().encodeInto(`hello from rank ${rank}`, word);
comm.bcastSync(word, size - 1);

// Latency of small collectives, averaged over many calls.
function time(label, call, iterations = 5000) {
  for (let i = 0; i < 500; i++) call();
  comm.barrierSync();
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) call();
  return `${label} ${(Number(process.hrtime.bigint() - start) / 1000 / iterations).toFixed(2)} µs`;
}
const small = new Float64Array(1);
const out = new Float64Array(1);
const timings = [
  time('allreduce(8 B)', () => comm.allreduceSync(small, out, 'sum')),
  time('bcast(8 B)', () => comm.bcastSync(small, 0)),
  time('barrier', () => comm.barrierSync()),
];

const levels = comm
  .levels()
  .map((l) => `${l.name}${l.groupSize > 1 ? `(${l.groupSize})` : ''}`)
  .join(' → ');
console.log(
  `rank ${rank}/${size} on ${comm.node}: sum ${sum[0]}, bcast "${new TextDecoder().decode(word).replace(/\0+$/, '')}", levels ${levels}; ${timings.join(', ')}`,
);
comm.close();
