// @ts-check
// A rank of a job started by mpirun whose communicator runs over MPI (init() with
// `transport: mpi` in TOPOCOLL_CONFIG; emulated nodes through TOPOCOLL_NODE): every rank runs a
// rotation of checked collectives, and rank `victim` SIGKILLs itself at the start of call `at`.
//
// argv: <victim> <at>
// Output, one line per rank:
//   `rank R caught CODE in call K after T ms: message` (exit 3) — a call failed;
//   `rank R ok N` (exit 0) — every call completed (N results checked);
//   `rank R WRONG: …` (exit 5);  `rank R hung in call K` (exit 4) — no call settled in HANG_MS.
import { init, isTopocollError } from 'topocoll';

const victim = Number(process.argv[2] ?? -1);
const at = Number(process.argv[3] ?? 50);
const CALLS = 200;
const HANG_MS = 20_000;
const comm = await init();
const { rank, size } = comm;
let checks = 0;

/** @param {number} k */
async function call(k) {
  const n = [1, 700, 5000, 70_000][k % 4] ?? 1;
  const send = Int32Array.from({ length: n }, (_, i) => rank * 1000 + i + k);
  const recv = new Int32Array(n);
  if (k % 2 === 0) comm.allreduceSync(send, recv, 'sum');
  else await comm.allreduce(send, recv, 'sum');
  const base = (size * (size - 1)) / 2;
  for (let i = 0; i < n; i++) {
    const want = base * 1000 + size * (i + k);
    if (recv[i] !== want) {
      console.log(`rank ${rank} WRONG: call ${k} element ${i} is ${recv[i]}, expected ${want}`);
      process.exit(5);
    }
  }
  checks++;
}

for (let k = 0; k < CALLS; k++) {
  if (rank === victim && k === at) process.kill(process.pid, 'SIGKILL');
  const started = Date.now();
  const timer = setTimeout(() => {
    console.log(`rank ${rank} hung in call ${k}`);
    process.exit(4);
  }, HANG_MS);
  try {
    await call(k);
  } catch (e) {
    const code = isTopocollError(e) ? e.code : 'other';
    console.log(`rank ${rank} caught ${code} in call ${k} after ${Date.now() - started} ms: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(3);
  }
  clearTimeout(timer);
}
comm.close();
console.log(`rank ${rank} ok ${checks}`);
