// @ts-check
// A rank of the S0 mixed-size test: one job broadcasts a seeded random mix of message sizes,
// from a few bytes to several of the largest fragments, through whatever configuration the job
// has (the default: the cost model picks a larger fragment for larger messages). The root's
// queue cursor is then left by one call at a multiple of a small fragment and the next call's
// larger fragments start there. argv[2]: the number of calls; argv[3]: the largest size.
//
// The root fills its buffer quickly (copies of a fixed table) and the readers check theirs
// byte by byte, so the root runs ahead and refills its queue while readers still copy out of
// it: a fragment written over unread bytes shows as a reader's byte from another call.
import { init } from 'topocoll';

const comm = await init();
const { rank, size } = comm;
const calls = Number(process.argv[2]);
const largest = Number(process.argv[3]);

// The reference: a fixed pseudo-random table of a prime length; call k's byte i is
// TABLE[(i + k·STRIDE) mod L], so bytes of another call or another offset do not match.
const L = 65521;
const STRIDE = 4099;
const TABLE = new Uint8Array(L);
let seed = 12345;
const random = () => {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return seed >>> 8;
};
for (let i = 0; i < L; i++) TABLE[i] = random() & 0xff;
const expected = (/** @type {number} */ call, /** @type {number} */ i) => /** @type {number} */ (TABLE[(i + call * STRIDE) % L]);

/** @param {Uint8Array} buf @param {number} call */
function fill(buf, call) {
  let at = 0;
  let from = (call * STRIDE) % L;
  while (at < buf.length) {
    const n = Math.min(L - from, buf.length - at);
    buf.set(TABLE.subarray(from, from + n), at);
    at += n;
    from = 0;
  }
}

// The same sizes and roots on every rank: log-uniform from 1 byte to `largest`.
const plan = [];
for (let k = 0; k < calls; k++) {
  const bytes = Math.max(1, Math.round(Math.exp((random() / 0xffffff) * Math.log(largest))));
  // The root stays for runs of calls (its cursor carries across them), then moves on.
  plan.push({ bytes, root: Math.floor(k / 64) % size });
}

let checks = 0;
for (let k = 0; k < calls; k++) {
  const { bytes, root } = /** @type {{ bytes: number, root: number }} */ (plan[k]);
  const buf = new Uint8Array(bytes);
  if (rank === root) fill(buf, k);
  comm.bcastSync(buf, root);
  if (rank === root) continue;
  for (let i = 0; i < bytes; i++) {
    if (buf[i] !== expected(k, i)) {
      throw new Error(`bcast ${k} of ${bytes} bytes from ${root}: byte ${i} is ${buf[i]}, expected ${expected(k, i)}`);
    }
  }
  checks++;
}
comm.barrierSync();
console.log(`rank ${rank} ok ${checks}`);
comm.close();
