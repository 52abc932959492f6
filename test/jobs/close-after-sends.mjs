// @ts-check
// A rank of a test job over the Unix-socket test layer (socket-layer.mjs) whose every round ends
// with a collective whose last steps are sends, closed right after it returns: the sends must
// still arrive (close() hands them to the layer and keeps the process alive until they settle),
// and no rank may crash.
//
// Each round makes a fresh layer (its sockets in $TOPOCOLL_P2P_DIR/round-K) and a communicator
// over it, runs a gather to rank 0 (every other rank ends with its sends), a reduceScatterBlock
// and last a bcast from rank 0 (which ends with the root's sends), checks them, then closes the
// communicator and at once the layer (which lets the sends it has finish, but knows nothing of
// those still queued in topocoll). The last round does not close the layer: the process ends
// right after comm.close(). Prints `rank R ok N` (N checks) or throws (non-zero exit) naming
// the round; a peer whose messages were lost fails with EPEERLOST ('rank 0 closed its
// connection').
//
// Arguments: [--rounds R] (default 10).
import { join } from 'node:path';
import { socketLayer } from './socket-layer.mjs';
import { createCommunicator } from 'topocoll';

const argv = process.argv.slice(2);
const rounds = argv.includes('--rounds') ? Number(argv[argv.indexOf('--rounds') + 1]) : 10;
const dir = /** @type {string} */ (process.env.TOPOCOLL_P2P_DIR);
const rank = Number(process.env.TOPOCOLL_RANK);
const size = Number(process.env.TOPOCOLL_SIZE);
const n = 257;
let checks = 0;

/** @param {boolean} ok @param {number} round @param {string} what */
const check = (ok, round, what) => {
  if (!ok) throw new Error(`rank ${rank} round ${round}: ${what} wrong`);
  checks++;
};

for (let round = 0; round < rounds; round++) {
  const layer = await socketLayer(join(dir, `round-${round}`), rank, size);
  const comm = await createCommunicator(layer);
  const value = (/** @type {number} */ r, /** @type {number} */ i) => round * 1000 + r * 10 + (i % 7);

  const mine = Float64Array.from({ length: n }, (_, i) => value(rank, i));
  const all = rank === 0 ? new Float64Array(n * size) : null;
  await comm.gather(mine, all, 0);
  if (all !== null)
    check(
      all.every((x, i) => x === value(Math.floor(i / n), i % n)),
      round,
      'gather',
    );

  const blocks = Float64Array.from({ length: n * size }, (_, i) => value(rank, i));
  const block = new Float64Array(n);
  await comm.reduceScatterBlock(blocks, block, 'sum');
  const sumOf = (/** @type {number} */ i) => Array.from({ length: size }, (_, r) => value(r, i)).reduce((a, b) => a + b, 0);
  check(
    block.every((x, i) => x === sumOf(rank * n + i)),
    round,
    'reduceScatterBlock',
  );

  const root = Float64Array.from({ length: n }, (_, i) => (rank === 0 ? value(0, i) : -1));
  await comm.bcast(root, 0);
  check(
    root.every((x, i) => x === value(0, i)),
    round,
    'bcast',
  );

  comm.close();
  if (round < rounds - 1) await layer.close();
}
console.log(`rank ${rank} ok ${checks}`);
