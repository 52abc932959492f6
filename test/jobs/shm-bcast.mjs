// @ts-check
// A rank of the S0 shared-memory bcast tests. The configuration (TOPOCOLL_CONFIG) fixes the
// queue, fragment, sets and tree; argv[2] is the fragment size and argv[3] the number of slots,
// so the sizes of every regime of S0 can be named: inline, m = f, f + 1, S·f, beyond S·f.
// Every call is checked against the root's pattern right after it returns — no barriers in
// between, so consecutive broadcasts with changing roots must keep apart on their own.
import { init } from 'topocoll';

const comm = await init();
const { rank, size } = comm;
const f = Number(process.argv[2]);
const slots = Number(process.argv[3]);
const sizes = [0, 1, 7, 104, 105, 1000, f - 1, f, f + 1, 2 * f, slots * f - 1, slots * f, slots * f + 1, 3 * slots * f + 17];
let checks = 0;

const pattern = (/** @type {number} */ root, /** @type {number} */ call, /** @type {number} */ i) => (root * 31 + call * 7 + i * 13) & 0xff;
let call = 0;
/**
 * @param {number} root
 * @param {number} n
 * @param {boolean} sync
 */
function once(root, n, sync) {
  const buf = new Uint8Array(n);
  if (rank === root) for (let i = 0; i < n; i++) buf[i] = pattern(root, call, i);
  const check = () => {
    for (let i = 0; i < n; i++) {
      if (buf[i] !== pattern(root, call, i))
        throw new Error(`bcast of ${n} bytes from ${root} (call ${call}): byte ${i} is ${buf[i]}, expected ${pattern(root, call, i)}`);
    }
    checks++;
    call++;
  };
  if (sync) {
    comm.bcastSync(buf, root);
    check();
    return undefined;
  }
  return comm.bcast(buf, root).then(check);
}

// Every root × every size class, Sync.
for (let root = 0; root < size; root++) for (const n of sizes) once(root, n, true);
// Back to back with the root changing on every call, Promise and Sync interleaved.
for (let k = 0; k < 4 * size; k++) {
  const root = (k * 3) % size;
  const n = /** @type {number} */ (sizes[k % sizes.length]);
  if (k % 2 === 0) once(root, n, true);
  else await once(root, n, false);
}
// A burst of large broadcasts from alternating roots: buffers are reused many times over.
for (let k = 0; k < 6; k++) once(k % size, 5 * slots * f + 3, true);
// First touch put this rank's queue on its NUMA node (move_pages says where every page is).
const placement = comm.placement();
if (comm.localSize > 1 && placement.verdict !== 'local') throw new Error(`queue placement: ${JSON.stringify(placement)}`);
comm.barrierSync();
console.log(`rank ${rank} ok ${checks}`);
comm.close();
