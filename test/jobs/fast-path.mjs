// @ts-check
// A rank of a JavaScript fast-path test (src/runtime/fast-path.ts). argv[2]:
//   bits      every datatype × operator × a few lengths as allreduces, reduce-scatters, scans,
//             exscans and reduces to the last rank, and allgathers, gathers to the last rank,
//             alltoalls, bcasts and scatters from rank 1, once through the fast path and once
//             through the addon (configure() in between); the two results must have the same
//             bits. Prints `rank R bits ok <calls> taken <calls the fast path made>`.
//   mixed     odd ranks keep the fast path off (argv[3] = all: every rank has it on); 3000
//             seeded calls of every collective — small and just-too-large allreduces and
//             allgathers, barriers, bcasts, reduces (alone and in runs longer than the shared
//             area's ring; in a run, every other one in place at the root), gathers, scatters,
//             alltoalls, reduce-scatters and scans (alone and in runs, some in place), Promise
//             calls left pending under blocking ones, configure() switching the fast path
//             mid-loop — each checked against a reference. Prints `rank R mixed ok taken <fast calls>`.
//   departed  3 ranks: rank 2 comes late to a call (the others wait for it in the addon), so it
//             makes that call without waiting, then leaves (close). The call completes
//             everywhere; the next fails with EPEERLOST naming rank 2 and the call it made last,
//             which close() published. Prints `rank R completed`, `rank R caught CODE: …`.
//   killed    the last rank SIGKILLs itself after 50 small allreduces (argv[3] = bcast: bcasts
//             it roots; reduce: reduces to rank 0, which it sends to; gather: gathers to rank 0;
//             scatter: scatters it roots; alltoall; scan); the others keep calling and must get
//             an error. Prints `rank R caught CODE: …`.
//   mismatch  rank 1 allreduces 5 elements where the others allreduce 4, rank 1 through the
//             addon (argv[3] = fast: through the fast path, the others through the addon;
//             argv[4]: another collective of the killed mode's, the same way).
//             Prints `rank R caught CODE: …` (or `rank R finished`).
//   inspect   util.inspect of the communicator after close(): the fast path's views of the
//             unmapped segment read as empty (detached), not as a crash. Prints
//             `rank R inspected <whether the views were empty>`.
//   overlap   every rank passes send and recv that share bytes (not IN_PLACE) to a small
//             allreduce, allgather (send at the start of recv) and reduce to rank 0 (rank 0's
//             views overlap; the others pass an unknown operator, so that no rank sends), each
//             through the fast path (argv[3] = addon: through the addon); then a correct
//             allreduce. Prints `rank R refused CODE: …` per call, `rank R after ok <taken>`.
// Every rank uses the shared area's every-rank protocol (the fast path's), whatever the cores.
import { IN_PLACE, init } from 'topocoll';
import { combineInRankOrder, mulberry32 } from './reference-op.mjs';

const mode = process.argv[2];
const allFast = process.argv[3] === 'all';
const rankOf = Number(process.env.TOPOCOLL_RANK ?? process.env.OMPI_COMM_WORLD_RANK ?? 0);
const fastHere =
  mode === 'mixed'
    ? allFast || rankOf % 2 === 0
    : mode === 'mismatch'
      ? (rankOf === 1) === (process.argv[3] === 'fast')
      : mode !== 'overlap' || process.argv[3] !== 'addon';
const comm = await init({ config: { allreduce: { shm: 'every-rank' }, allgather: { shm: 'every-rank' }, collectives: { jsFastPath: fastHere } } });
/** Fast-path calls so far (the communicator's private FastPath; undefined where it cannot run). */
const taken = () => /** @type {any} */ (comm).calls?.fast?.taken ?? 0;

const TYPES = /** @type {const} */ ([
  ['int8', Int8Array],
  ['uint8', Uint8Array],
  ['uint8clamped', Uint8ClampedArray],
  ['int16', Int16Array],
  ['uint16', Uint16Array],
  ['int32', Int32Array],
  ['uint32', Uint32Array],
  ['float32', Float32Array],
  ['float64', Float64Array],
  ['int64', BigInt64Array],
  ['uint64', BigUint64Array],
]);
const INT_OPS = /** @type {const} */ (['sum', 'prod', 'min', 'max', 'band', 'bor', 'bxor', 'land', 'lor']);
const FLOAT_OPS = /** @type {const} */ (['sum', 'prod', 'min', 'max']);

/**
 * Random bits for every element, with floats' special values mixed in (quiet NaNs with payloads, ±0, ±∞, tiny and huge).
 * @template {import('topocoll').TypedArray} T
 * @param {T} array
 * @param {() => number} next
 * @returns {T}
 */
function fill(array, next) {
  const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(next() * 256);
  if (array instanceof Float32Array || array instanceof Float64Array) {
    const specials = [0, -0, Infinity, -Infinity, NaN, 1e-40, 3.4e38, 1, -1, 0.1];
    for (let i = 0; i < array.length; i++) {
      const u = next();
      if (u < 0.3) array[i] = /** @type {number} */ (specials[Math.floor(next() * specials.length)]);
      else if (u < 0.6) array[i] = (next() - 0.5) * 2 ** Math.floor(next() * 40 - 20);
      // Signalling NaNs are the one documented difference (min/max may pick one): make them quiet.
      if (array instanceof Float32Array) {
        const w = new Uint32Array(array.buffer, array.byteOffset + 4 * i, 1);
        const bits = /** @type {number} */ (w[0]);
        if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) w[0] = bits | 0x400000;
      } else {
        const w = new Uint32Array(array.buffer, array.byteOffset + 8 * i, 2);
        const high = /** @type {number} */ (w[1]);
        if ((high & 0x7ff00000) === 0x7ff00000 && ((high & 0xfffff) !== 0 || w[0] !== 0)) w[1] = high | 0x80000;
      }
    }
  }
  return array;
}

/** @param {import('topocoll').TypedArray} a @param {import('topocoll').TypedArray} b */
const sameBits = (a, b) => {
  const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  return x.length === y.length && x.every((v, i) => v === y[i]);
};

/** @param {string} message @returns {never} */
function fail(message) {
  console.log(`rank ${comm.rank} FAILED ${message}`);
  comm.close();
  process.exit(1);
}

if (mode === 'bits') {
  // The calls, made twice with the same inputs: results[k] from the fast path, then the addon.
  const calls = [];
  const next = mulberry32(1000 + comm.rank);
  for (const [name, Array_] of TYPES) {
    const ops = name.startsWith('float') ? FLOAT_OPS : INT_OPS;
    // The largest of each the fast path takes by default (routing.fastPath.combineMaxBytes, copyMaxBytes).
    const most = 64 / Array_.BYTES_PER_ELEMENT;
    for (const op of ops) {
      for (const n of [1, 3, 5, most]) calls.push({ kind: 'allreduce', name, op, input: fill(new Array_(n), next) });
      for (const n of [1, most]) calls.push({ kind: 'reduce', name, op, input: fill(new Array_(n), next) });
    }
    for (const n of [1, 5, 1024 / Array_.BYTES_PER_ELEMENT]) {
      calls.push({ kind: 'allgather', name, input: fill(new Array_(n), next) });
      calls.push({ kind: 'bcast', name, input: fill(new Array_(n), next) });
    }
    // The area's other protocols, up to the same limits: a gather's block, a scatter's and an
    // alltoall's whole vector (copyMaxBytes); a reduce-scatter's whole vector and a scan's input
    // (combineMaxBytes).
    const p = comm.size;
    const whole = Math.floor(1024 / Array_.BYTES_PER_ELEMENT / p);
    for (const n of [1, 5, 1024 / Array_.BYTES_PER_ELEMENT]) calls.push({ kind: 'gather', name, input: fill(new Array_(n), next) });
    for (const n of [1, 5, whole]) {
      calls.push({ kind: 'scatter', name, input: fill(new Array_(n * p), next) });
      calls.push({ kind: 'alltoall', name, input: fill(new Array_(n * p), next) });
    }
    for (const op of ops) {
      for (const n of [1, Math.floor(most / p)]) calls.push({ kind: 'reduceScatterBlock', name, op, input: fill(new Array_(n * p), next) });
      for (const n of [1, most]) {
        calls.push({ kind: 'scan', name, op, input: fill(new Array_(n), next) });
        calls.push({ kind: 'exscan', name, op, input: fill(new Array_(n), next) });
      }
    }
  }
  /** @param {{ kind: string, name: string, op?: import('topocoll').ReduceOpName, input: import('topocoll').TypedArray }} c */
  const run = (c) => {
    const Array_ = /** @type {any} */ (c.input.constructor);
    const p = comm.size;
    const length = { allgather: c.input.length * p, gather: c.input.length * p, scatter: c.input.length / p, reduceScatterBlock: c.input.length / p }[c.kind];
    const out = new Array_(length ?? c.input.length);
    if (c.kind === 'gather') comm.gatherSync(c.input, comm.rank === p - 1 ? out : null, p - 1);
    else if (c.kind === 'scatter') comm.scatterSync(comm.rank === 1 ? c.input : null, out, 1);
    else if (c.kind === 'alltoall') comm.alltoallSync(c.input, out);
    else if (c.kind === 'reduceScatterBlock') comm.reduceScatterBlockSync(c.input, out, c.op);
    else if (c.kind === 'scan') comm.scanSync(c.input, out, c.op);
    else if (c.kind === 'exscan') comm.exscanSync(c.input, out, c.op);
    else if (c.kind === 'allgather') comm.allgatherSync(c.input, out);
    else if (c.kind === 'bcast') {
      out.set(c.input);
      comm.bcastSync(out, 1);
    } else if (c.kind === 'reduce') comm.reduceSync(c.input, comm.rank === comm.size - 1 ? out : null, c.op, comm.size - 1);
    else comm.allreduceSync(c.input, out, c.op);
    return out;
  };
  const before = taken();
  const fast = calls.map(run);
  // A call after a one-way call whose peers have not all arrived yet (a short spin) goes through
  // the addon, which waits for them: with more ranks than cores that is frequent.
  const tookFast = taken() - before;
  comm.configure({ collectives: { jsFastPath: false } });
  const viaAddon = calls.map(run);
  if (taken() - before !== tookFast) fail('the fast path ran while switched off');
  calls.forEach((c, k) => {
    if (!sameBits(fast[k], viaAddon[k]))
      fail(`${c.kind} ${c.name} ${c.op ?? ''} of ${c.input.length}: [${fast[k]}] through the fast path, [${viaAddon[k]}] through the addon`);
  });
  console.log(`rank ${comm.rank} bits ok ${calls.length} taken ${tookFast}`);
} else if (mode === 'mixed') {
  const next = mulberry32(77);
  const p = comm.size;
  /** @type {Promise<void>[]} */
  const pending = [];
  /** @type {(() => void)[]} */
  const checks = [];
  /** @param {string} op @param {number} r @param {number} k */
  const reference = (op, r, k) => (op === 'prod' ? (r + k) % 3 : r * 3 + k);
  for (let step = 0; step < 3000; step++) {
    if (pending.length > 0 && next() < 0.2) {
      await Promise.all(pending.splice(0));
      checks.splice(0).forEach((c) => c());
    }
    const u = next();
    // Lengths around the fast path's limits (allreduce 64 bytes: 8 float64 or 16 int32 elements;
    // allgather 1024 bytes: 128 float64 or 256 int32).
    const lengths = [0, 1, 2, 7, 8, 9, 16, 17, 128, 129, 255, 256, 257];
    const n = /** @type {number} */ (lengths[Math.floor(next() * lengths.length)]);
    const float = next() < 0.5;
    const Array_ = float ? Float64Array : Int32Array;
    if (next() < 0.3) {
      // The area's other protocols (gather, scatter, alltoall, reduce-scatter, scans), alone or
      // in runs longer than the ring (the one-way ones: a gather's senders, a scatter's root and
      // the first scan ranks run ahead), some as Promise calls left pending.
      const kind = /** @type {const} */ (['gather', 'scatter', 'alltoall', 'reduceScatterBlock', 'scan', 'exscan'])[Math.floor(next() * 6)];
      const root = Math.floor(next() * p);
      const run = next() < 0.2 ? 20 + Math.floor(next() * 40) : 1;
      for (let j = 0; j < run; j++) {
        const m = run === 1 ? n : /** @type {number} */ (lengths[Math.floor(next() * 9)]);
        const promise = next() < 0.15;
        const inPlace = next() < 0.25;
        const c = step * 7 + j;
        const r0 = comm.rank;
        /** @type {import('topocoll').TypedArray} */ let recv;
        /** @type {() => void} */ let check;
        /** @type {() => Promise<void>} */ let later;
        /** @type {() => void} */ let now;
        if (kind === 'gather') {
          const mine = new Array_(m).map((_, k) => r0 * 1000 + k + c);
          recv = new Array_(r0 === root ? m * p : 0);
          const own = inPlace && r0 === root;
          if (own) recv.set(mine, r0 * m);
          const send = own ? IN_PLACE : mine;
          now = () => comm.gatherSync(send, r0 === root ? recv : null, root);
          later = () => comm.gather(send, r0 === root ? recv : null, root);
          check = () => {
            if (r0 !== root) return;
            for (let i = 0; i < m * p; i++)
              if (recv[i] !== Math.floor(i / m) * 1000 + (i % m) + c) fail(`step ${step}.${j}: gather of ${m} to ${root}: [${i}] = ${recv[i]}`);
          };
        } else if (kind === 'scatter') {
          const send = r0 === root ? new Array_(m * p).map((_, i) => Math.floor(i / m) * 1000 + (i % m) + c) : null;
          const own = inPlace && r0 === root;
          recv = own ? /** @type {any} */ (send).subarray(r0 * m, (r0 + 1) * m) : new Array_(m);
          now = () => comm.scatterSync(send, own ? IN_PLACE : recv, root);
          later = () => comm.scatter(send, own ? IN_PLACE : recv, root);
          check = () => {
            for (let k = 0; k < m; k++) if (recv[k] !== r0 * 1000 + k + c) fail(`step ${step}.${j}: scatter of ${m} from ${root}: [${k}] = ${recv[k]}`);
          };
        } else if (kind === 'alltoall') {
          const send = new Array_(m * p).map((_, i) => r0 * 100000 + Math.floor(i / m) * 1000 + (i % m) + c);
          recv = inPlace ? send : new Array_(m * p);
          now = () => comm.alltoallSync(inPlace ? IN_PLACE : send, recv);
          later = () => comm.alltoall(inPlace ? IN_PLACE : send, recv);
          check = () => {
            for (let i = 0; i < m * p; i++)
              if (recv[i] !== Math.floor(i / m) * 100000 + r0 * 1000 + (i % m) + c) fail(`step ${step}.${j}: alltoall of ${m}: [${i}] = ${recv[i]}`);
          };
        } else if (kind === 'reduceScatterBlock') {
          const send = new Array_(m * p).map((_, i) => r0 + i + c);
          recv = inPlace ? send : new Array_(m);
          now = () => comm.reduceScatterBlockSync(inPlace ? IN_PLACE : send, recv, 'sum');
          later = () => comm.reduceScatterBlock(inPlace ? IN_PLACE : send, recv, 'sum');
          check = () => {
            for (let k = 0; k < m; k++) {
              const want = (p * (p - 1)) / 2 + p * (r0 * m + k + c);
              if (recv[k] !== want) fail(`step ${step}.${j}: reduce-scatter of ${m}: [${k}] = ${recv[k]}, want ${want}`);
            }
          };
        } else {
          const exclusive = kind === 'exscan';
          const send = new Array_(m).map((_, k) => r0 + 1 + k + c);
          recv = inPlace ? send : new Array_(m).fill(-7);
          const before = Array.from(recv);
          const call = exclusive ? 'exscan' : 'scan';
          const input = inPlace ? IN_PLACE : send;
          now = () => (exclusive ? comm.exscanSync(input, recv, 'sum') : comm.scanSync(input, recv, 'sum'));
          later = () => (exclusive ? comm.exscan(input, recv, 'sum') : comm.scan(input, recv, 'sum'));
          check = () => {
            const upto = exclusive ? r0 : r0 + 1;
            for (let k = 0; k < m; k++) {
              const want = upto === 0 ? before[k] : (upto * (upto + 1)) / 2 + upto * (k + c);
              if (recv[k] !== want) fail(`step ${step}.${j}: ${call} of ${m}: [${k}] = ${recv[k]}, want ${want}`);
            }
          };
        }
        if (promise) {
          pending.push(later());
          checks.push(check);
        } else {
          now();
          check();
        }
      }
    } else if (u < 0.35) {
      const op = /** @type {'sum' | 'max' | 'min' | 'prod'} */ (['sum', 'max', 'min', 'prod'][Math.floor(next() * 4)]);
      const send = new Array_(n).map((_, k) => reference(op, comm.rank, k));
      const recv = new Array_(n);
      const check = () => {
        for (let k = 0; k < n; k++) {
          const want = combineInRankOrder(
            op,
            Array.from({ length: p }, (_, r) => reference(op, r, k)),
            0,
            1,
          );
          if (recv[k] !== (float ? want : want | 0)) fail(`step ${step}: allreduce ${op} of ${n} element ${k}: ${recv[k]}, want ${want}`);
        }
      };
      if (next() < 0.15) {
        // A Promise call left pending: the blocking calls after it queue behind it.
        pending.push(comm.allreduce(send, recv, op));
        checks.push(check);
      } else {
        comm.allreduceSync(send, recv, op);
        check();
      }
    } else if (u < 0.65) {
      const send = new Array_(n).map((_, k) => comm.rank * 1000 + k);
      const recv = new Array_(n * p);
      comm.allgatherSync(send, recv);
      for (let r = 0; r < p; r++)
        for (let k = 0; k < n; k++) if (recv[r * n + k] !== r * 1000 + k) fail(`step ${step}: allgather of ${n}: block ${r}[${k}] = ${recv[r * n + k]}`);
    } else if (u < 0.8) {
      comm.barrierSync();
    } else if (u < 0.95) {
      // A bcast or reduce, or a run of 20–59 from one root, longer than the shared area's ring
      // of slots: the root (bcast) or the senders (reduce) run ahead while the others lag.
      const reduce = u >= 0.88;
      const root = Math.floor(next() * p);
      const run = next() < 0.3 ? 20 + Math.floor(next() * 40) : 1;
      for (let j = 0; j < run; j++) {
        // In a run, lengths whose data stays in the slot (at most 1 KiB).
        const m = run === 1 ? n : /** @type {number} */ (lengths[Math.floor(next() * 9)]);
        if (reduce) {
          const recv = new Array_(m);
          // Every other call of a run in place at the root (its input is then recv itself).
          if (comm.rank === root && j % 2 === 1) comm.reduceSync(IN_PLACE, recv.fill(comm.rank + j + 1), 'sum', root);
          else comm.reduceSync(new Array_(m).fill(comm.rank + j + 1), comm.rank === root ? recv : null, 'sum', root);
          const want = (p * (p + 1)) / 2 + p * j;
          if (comm.rank === root) for (let k = 0; k < m; k++) if (recv[k] !== want) fail(`step ${step}.${j}: reduce of ${m} at ${root}`);
        } else {
          const buf = new Array_(m).map((_, k) => (comm.rank === root ? k + step + j : -1));
          comm.bcastSync(buf, root);
          for (let k = 0; k < m; k++) if (buf[k] !== k + step + j) fail(`step ${step}.${j}: bcast of ${m} from ${root}`);
        }
      }
    } else if (u < 0.97) {
      await Promise.all(pending.splice(0));
      checks.splice(0).forEach((c) => c());
    } else {
      // Switches the fast path of even ranks (odd ones keep theirs off) in the middle of the loop.
      const coin = next();
      comm.configure({ collectives: { jsFastPath: fastHere && coin < 0.5 } });
    }
  }
  await Promise.all(pending.splice(0));
  checks.splice(0).forEach((c) => c());
  comm.barrierSync();
  console.log(`rank ${comm.rank} mixed ok taken ${taken()}`);
} else if (mode === 'killed' || mode === 'mismatch') {
  const n = mode === 'mismatch' && comm.rank === 1 ? 5 : 4;
  const send = new Int32Array(n).fill(1);
  const recv = new Int32Array(n);
  const collective = process.argv[mode === 'killed' ? 3 : 4] ?? 'allreduce';
  const p = comm.size;
  const last = p - 1;
  try {
    for (let i = 0; ; i++) {
      if (mode === 'killed' && i === 50 && comm.rank === last) process.kill(process.pid, 'SIGKILL');
      if (collective === 'bcast') comm.bcastSync(recv, last);
      else if (collective === 'reduce') comm.reduceSync(send, comm.rank === 0 ? recv : null, 'sum', 0);
      else if (collective === 'gather') comm.gatherSync(send, comm.rank === 0 ? new Int32Array(n * p) : null, 0);
      else if (collective === 'scatter') comm.scatterSync(comm.rank === last ? new Int32Array(n * p) : null, recv, last);
      else if (collective === 'alltoall') comm.alltoallSync(new Int32Array(n * p), new Int32Array(n * p));
      else if (collective === 'scan') comm.scanSync(send, recv);
      else comm.allreduceSync(send, recv);
      // A one-way call's senders run up to a ring of calls ahead before they wait: past it they see the abort.
      if (mode === 'mismatch' && i === (collective === 'allreduce' ? 10 : 40)) break;
    }
    console.log(`rank ${comm.rank} finished`);
  } catch (e) {
    console.log(`rank ${comm.rank} caught ${/** @type {any} */ (e).code}: ${/** @type {any} */ (e).message}`);
    comm.close();
    process.exit(3);
  }
} else if (mode === 'inspect') {
  comm.allreduceSync(Float64Array.of(1), new Float64Array(1));
  comm.close();
  const { inspect } = await import('node:util');
  console.log(`rank ${comm.rank} inspected ${/words: Uint32Array\(0\)/.test(inspect(comm, { depth: 4 }))}`);
  process.exit(0);
} else if (mode === 'overlap') {
  const whole = new Int32Array(8).fill(comm.rank + 1);
  const calls = [
    () => comm.allreduceSync(whole.subarray(0, 4), whole.subarray(2, 6)),
    () => comm.allgatherSync(whole.subarray(0, 2), whole.subarray(0, 2 * comm.size)),
    () => comm.reduceSync(whole.subarray(1, 5), whole.subarray(0, 4), comm.rank === 0 ? 'sum' : /** @type {any} */ ('none'), 0),
  ];
  for (const call of calls) {
    try {
      call();
      console.log(`rank ${comm.rank} accepted`);
    } catch (e) {
      console.log(`rank ${comm.rank} refused ${/** @type {any} */ (e).code}: ${/** @type {any} */ (e).message}`);
    }
  }
  const before = taken();
  const sum = new Int32Array(1);
  comm.allreduceSync(Int32Array.of(comm.rank + 1), sum);
  if (sum[0] !== (comm.size * (comm.size + 1)) / 2) fail(`the allreduce after them gave ${sum[0]}`);
  console.log(`rank ${comm.rank} after ok ${taken() - before}`);
} else if (mode === 'departed') {
  const send = Float64Array.of(comm.rank);
  const recv = new Float64Array(1);
  for (let i = 0; i < 100; i++) comm.allreduceSync(send, recv);
  if (comm.rank === 2) await new Promise((r) => setTimeout(r, 300));
  comm.allreduceSync(send, recv);
  if (recv[0] !== 3) fail(`the last call gave ${recv[0]}`);
  console.log(`rank ${comm.rank} completed`);
  if (comm.rank === 2) {
    comm.close();
    process.exit(0);
  }
  try {
    comm.allreduceSync(send, recv);
    console.log(`rank ${comm.rank} finished`);
  } catch (e) {
    console.log(`rank ${comm.rank} caught ${/** @type {any} */ (e).code}: ${/** @type {any} */ (e).message}`);
    comm.close();
    process.exit(3);
  }
}
comm.close();
