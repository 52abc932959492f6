// @ts-check
// A rank of a multi-process test job: a loop of collectives with the configuration switched in
// the middle — levels off and on again, algorithms changed — every result checked against a
// reference. `--disagree` then makes the last rank ask for another configuration than the
// others: every rank must report EMISMATCH (`rank R mismatch: disagree`) and keep working with
// the old configuration. Then every rank prints `rank R ok N` (or throws). `--skip` then makes the
// last rank run an allreduce where the others reconfigure: every rank must get EMISMATCH (no
// hang; `rank R mismatch: skip`), and then it stops. The two may be given together.
import { init } from 'topocoll';

const comm = await init();
const { rank, size } = comm;
const disagree = process.argv.includes('--disagree');
const skip = process.argv.includes('--skip');
let checks = 0;

/**
 * @param {number} n
 * @param {number} root
 * @param {number} step
 */
function check(n, root, step) {
  const buf = new Float64Array(n);
  if (rank === root) for (let i = 0; i < n; i++) buf[i] = step * 1000 + i;
  comm.bcastSync(buf, root);
  for (let i = 0; i < n; i++) if (buf[i] !== step * 1000 + i) throw new Error(`rank ${rank} step ${step}: bcast element ${i} is ${buf[i]}`);
  const mine = Int32Array.from({ length: n }, (_, i) => rank + i + step);
  const out = new Int32Array(n);
  comm.allreduceSync(mine, out, 'sum');
  for (let i = 0; i < n; i++) {
    const want = (size * (size - 1)) / 2 + size * (i + step);
    if (out[i] !== want) throw new Error(`rank ${rank} step ${step}: allreduce element ${i} is ${out[i]}, expected ${want}`);
  }
  const red = rank === root ? new Int32Array(n) : null;
  comm.reduceSync(mine, red, 'max', root);
  if (rank === root)
    for (let i = 0; i < n; i++)
      if (/** @type {Int32Array} */ (red)[i] !== size - 1 + i + step)
        throw new Error(`rank ${rank} step ${step}: reduce element ${i} is ${/** @type {Int32Array} */ (red)[i]}`);
  const all = new Int32Array(n * size);
  comm.allgatherSync(mine, all);
  for (let r = 0; r < size; r++) {
    for (let i = 0; i < n; i++)
      if (all[r * n + i] !== r + i + step) throw new Error(`rank ${rank} step ${step}: allgather element ${r * n + i} is ${all[r * n + i]}`);
  }
  checks++;
}

const levels = comm.levels().map((l) => l.name);
const switchable = levels.filter((l) => l !== 'world');
const settings = [
  () => switchable.length > 0 && comm.setLevelEnabled(/** @type {string} */ (switchable[0]), false),
  // On one node, small allreduces switch the shared area's protocol too (both directions).
  () =>
    comm.configure({
      bcast: { levels: Object.fromEntries(levels.map((l) => [l, 'flat'])) },
      allreduce: { algorithm: 'reduce-bcast', shm: 'every-rank' },
      allgather: { levels: Object.fromEntries(levels.map((l) => [l, 'bruck'])) },
    }),
  () => switchable.length > 0 && comm.setLevelEnabled(/** @type {string} */ (switchable[0]), true),
  () =>
    comm.configure({
      reduce: { levels: Object.fromEntries(levels.map((l) => [l, 'knomial:3'])), segment: 1024 },
      allreduce: { algorithm: 'reduce-allreduce-bcast', top: 'rabenseifner', shm: 'last-arrival' },
      allgather: { levels: Object.fromEntries(levels.map((l) => [l, 'neighbor-exchange'])), segment: 4096 },
    }),
  () => switchable.length > 1 && comm.setLevelEnabled(/** @type {string} */ (switchable[1]), false),
];

for (let step = 0; step < 30; step++) {
  for (const n of [1, 300, 40000]) check(n, step % size, step);
  if (step % 5 === 4) {
    const change = settings[(step - 4) / 5];
    if (change !== undefined) change();
    const enabled = comm
      .levels()
      .filter((l) => l.enabled)
      .map((l) => l.name);
    if (rank === 0) console.log(`step ${step}: levels on ${enabled.join(',')}`);
  }
}

if (disagree) {
  try {
    comm.configure({ bcast: { segment: rank === size - 1 ? 8192 : 4096 } });
    throw new Error(`rank ${rank}: configure with different settings did not fail`);
  } catch (e) {
    if (e.code !== 'EMISMATCH') throw e;
    console.log(`rank ${rank} mismatch: disagree`);
  }
  // The old configuration is still in force everywhere.
  for (let step = 30; step < 33; step++) for (const n of [1, 40000]) check(n, 0, step);
}

comm.barrierSync();
console.log(`rank ${rank} ok ${checks}`);

if (skip) {
  try {
    if (rank === size - 1) comm.allreduceSync(Int32Array.of(1), new Int32Array(1), 'sum');
    else comm.configure({ bcast: { segment: 4096 } });
    throw new Error(`rank ${rank}: a rank skipping configure() was not noticed`);
  } catch (e) {
    if (e.code !== 'EMISMATCH') throw e;
    console.log(`rank ${rank} mismatch: skip`);
  }
  comm.close();
  process.exit(0);
}
comm.close();
