// @ts-check
// A rank of the barrier test: in each of ROUNDS rounds every rank waits a different time, writes
// "r:k" to a file all ranks of the job share (argv[2], O_APPEND), and enters the barrier; after
// it, every rank reads the file and must find every rank's line of round k — no rank may leave
// a barrier before every rank has entered it. Sync and Promise barriers alternate. Prints
// `rank R ok N` or throws.
import { appendFileSync, readFileSync } from 'node:fs';
import { init } from 'topocoll';

const file = /** @type {string} */ (process.argv[2]);
const ROUNDS = 20;
const comm = await init();
const { rank, size } = comm;
const sleep = (/** @type {number} */ ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

for (let k = 0; k < ROUNDS; k++) {
  // A different rank is last each round.
  sleep(((rank + k) % size) * 3);
  appendFileSync(file, `${rank}:${k}\n`);
  if (k % 2 === 0) comm.barrierSync();
  else await comm.barrier();
  const seen = new Set(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.endsWith(`:${k}`)),
  );
  if (seen.size !== size) throw new Error(`rank ${rank} left barrier ${k} having seen ${seen.size} of ${size} ranks enter it`);
}
const algorithms = comm
  .levels()
  .filter((l) => l.algorithms)
  .map((l) => `${l.name}:${/** @type {NonNullable<typeof l.algorithms>} */ (l.algorithms).barrier}`);
if (rank === 0) console.log(`barriers of rank 0: ${algorithms.join(' ')}`);
console.log(`rank ${rank} ok ${ROUNDS}`);
comm.close();
