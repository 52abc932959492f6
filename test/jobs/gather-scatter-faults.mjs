// @ts-check
// A rank of a gather/scatter failure test (argv[2]):
// - `args`: every argument error of gather, gatherv, scatter, scatterv, the reduce-scatters, scan, exscan and the alltoalls, on the rank that makes
//   it, in each form: EINVAL thrown (Sync, request) or rejected (Promise) before anything is
//   sent — then one good gather of every rank shows that nothing was sent. Prints `rank R ok N`.
// - `mismatch KIND`: rank 1 calls with one thing different from the others (root, count, counts,
//   collective, dtype): no rank may finish with wrong data or hang; each prints `rank R caught
//   CODE` (exit 3), or `rank R finished` (exit 0); also a reduce-scatter's operator or counts,
//   scan against exscan (`scan-exscan`), a scan's operator (`scan-op`), an alltoall's block
//   length, alltoallv counts that disagree between two ranks.
// - `dies gather|scatter|reduce-scatter|alltoall`: the last rank SIGKILLs itself in the middle of a large call
//   while every other rank keeps calling it: each prints `rank R caught CODE` (exit 3).
import { init, IN_PLACE } from 'topocoll';

const comm = await init();
const { rank, size } = comm;
const mode = process.argv[2];
const kind = process.argv[3];

if (mode === 'args') {
  let checks = 0;
  /** Each form of the call must refuse with EINVAL, naming `what`. */
  const refuses = async (/** @type {string} */ what, /** @type {{ sync: () => unknown, promise: () => Promise<void>, request: () => unknown }} */ f) => {
    for (const [form, attempt] of /** @type {const} */ ([
      ['Sync', async () => f.sync()],
      ['Promise', () => f.promise()],
      ['request', async () => f.request()],
    ])) {
      let code;
      try {
        await attempt();
      } catch (e) {
        code = /** @type {any} */ (e).code;
      }
      if (code !== 'EINVAL') throw new Error(`rank ${rank}: ${what} (${form}) gave ${code ?? 'no error'}, expected EINVAL`);
      checks++;
    }
  };
  const forms = (/** @type {(form: 'Sync' | '' | 'i') => (...a: any[]) => any} */ m, /** @type {any[]} */ a) => ({
    sync: () => m('Sync')(...a),
    promise: () => m('')(...a),
    request: () => m('i')(...a),
  });
  const g = (/** @type {string} */ f) => /** @type {any} */ (comm)[f === 'i' ? 'igather' : `gather${f}`].bind(comm);
  const gv = (/** @type {string} */ f) => /** @type {any} */ (comm)[f === 'i' ? 'igatherv' : `gatherv${f}`].bind(comm);
  const s = (/** @type {string} */ f) => /** @type {any} */ (comm)[f === 'i' ? 'iscatter' : `scatter${f}`].bind(comm);
  const sv = (/** @type {string} */ f) => /** @type {any} */ (comm)[f === 'i' ? 'iscatterv' : `scatterv${f}`].bind(comm);
  const n = 3;
  const block = new Int32Array(n);
  const whole = new Int32Array(n * size);
  const counts = Array.from({ length: size }, () => n);
  // Every rank makes each mistake that is its own to make (so every rank is checked).
  await refuses('a root outside the job', forms(g, [block, whole, size]));
  await refuses('a root that is not an integer', forms(s, [whole, block, 0.5]));
  await refuses('send is not a typed array', forms(g, [[1, 2, 3], whole, 0]));
  await refuses('recv is not a typed array', forms(s, [whole, 'x', 0]));
  await refuses('gatherv counts of the wrong length', forms(gv, [block, whole, counts.slice(1), 0]));
  await refuses('scatterv with a negative count', forms(sv, [whole, block, counts.map((c, r) => (r === 0 ? -1 : c)), 0]));
  await refuses('gatherv: send is not counts[rank] long', forms(gv, [new Int32Array(n + 1), whole, counts, 0]));
  await refuses('scatterv: recv is shorter than counts[rank]', forms(sv, [whole, new Int32Array(n - 1), counts, 0]));
  const rsb = (/** @type {string} */ f) => /** @type {any} */ (comm)[f === 'i' ? 'ireduceScatterBlock' : `reduceScatterBlock${f}`].bind(comm);
  const rs = (/** @type {string} */ f) => /** @type {any} */ (comm)[f === 'i' ? 'ireduceScatter' : `reduceScatter${f}`].bind(comm);
  await refuses('reduceScatterBlock: send is not size × recv.length', forms(rsb, [new Int32Array(n * size + 1), block]));
  await refuses('reduceScatterBlock: send and recv of different types', forms(rsb, [new Float64Array(n * size), block]));
  await refuses('reduceScatterBlock: IN_PLACE with a recv that does not divide among the ranks', forms(rsb, [IN_PLACE, new Int32Array(n * size + 1)]));
  await refuses('reduceScatterBlock: an operator the type has not', forms(rsb, [new Float32Array(n * size), new Float32Array(n), 'band']));
  await refuses('reduceScatter: recv shorter than counts[rank]', forms(rs, [whole, new Int32Array(n - 1), counts]));
  await refuses('reduceScatter: send shorter than the blocks', forms(rs, [new Int32Array(n * size - 1), block, counts]));
  for (const name of ['scan', 'exscan']) {
    const sc = (/** @type {string} */ f) => /** @type {any} */ (comm)[f === 'i' ? `i${name}` : `${name}${f}`].bind(comm);
    await refuses(`${name}: send and recv of different lengths`, forms(sc, [new Int32Array(n), new Int32Array(n + 1)]));
    await refuses(`${name}: send and recv of different types`, forms(sc, [new Float64Array(n), block]));
    await refuses(`${name}: send and recv the same array`, forms(sc, [block, block]));
    await refuses(`${name}: recv is not a typed array`, forms(sc, [block, [0, 0, 0]]));
    await refuses(`${name}: IN_PLACE with recv not a typed array`, forms(sc, [IN_PLACE, null]));
    await refuses(`${name}: an operator the type has not`, forms(sc, [new Float32Array(n), new Float32Array(n), 'bxor']));
    await refuses(`${name}: an unknown operator`, forms(sc, [block, new Int32Array(n), 'mean']));
  }
  const a2a = (/** @type {string} */ f) => /** @type {any} */ (comm)[f === 'i' ? 'ialltoall' : `alltoall${f}`].bind(comm);
  const a2av = (/** @type {string} */ f) => /** @type {any} */ (comm)[f === 'i' ? 'ialltoallv' : `alltoallv${f}`].bind(comm);
  await refuses('alltoall: send does not divide among the ranks', forms(a2a, [new Int32Array(n * size + 1), new Int32Array(n * size + 1)]));
  await refuses('alltoall: recv shorter than send', forms(a2a, [whole, new Int32Array(n * size - 1)]));
  await refuses('alltoall: send and recv of different types', forms(a2a, [new Float64Array(n * size), whole]));
  await refuses('alltoall: send and recv the same array', forms(a2a, [whole, whole]));
  await refuses('alltoall: IN_PLACE with a recv that does not divide among the ranks', forms(a2a, [IN_PLACE, new Int32Array(n * size + 1)]));
  await refuses('alltoallv: sendCounts of the wrong length', forms(a2av, [whole, counts.slice(1), new Int32Array(n * size), counts]));
  await refuses('alltoallv: a negative recv count', forms(a2av, [whole, counts, new Int32Array(n * size), counts.map((c, r) => (r === 0 ? -1 : c))]));
  await refuses('alltoallv: a count that is not an integer', forms(a2av, [whole, counts.map((c) => c + 0.5), new Int32Array(n * size), counts]));
  await refuses('alltoallv: send shorter than its counts', forms(a2av, [new Int32Array(n * size - 1), counts, new Int32Array(n * size), counts]));
  await refuses('alltoallv: recv shorter than its counts', forms(a2av, [whole, counts, new Int32Array(n * size - 1), counts]));
  if (rank === 0) {
    await refuses('the root of a gather without recv', forms(g, [block, null, 0]));
    await refuses('the root of a scatter without send', forms(s, [null, block, 0]));
    await refuses("a gather root's recv too short", forms(g, [block, new Int32Array(n * size - 1), 0]));
    await refuses("a scatter root's send too short", forms(s, [new Int32Array(n * size - 1), block, 0]));
    await refuses('a gather root whose recv is another type', forms(g, [block, new Float32Array(n * size), 0]));
    await refuses('a scatter root whose send is another type', forms(s, [new Float32Array(n * size), block, 0]));
    await refuses('gather: send and recv the same array at the root', forms(g, [whole, whole, 0]));
    await refuses('IN_PLACE with a recv that does not divide among the ranks', forms(g, [IN_PLACE, new Int32Array(n * size + 1), 0]));
  } else {
    await refuses('IN_PLACE as a gather send off the root', forms(g, [IN_PLACE, whole, 0]));
    await refuses('IN_PLACE as a scatter recv off the root', forms(s, [whole, IN_PLACE, 0]));
  }
  // Nothing was sent: the next gather meets every rank at its first call.
  const mine = new Int32Array(n).fill(rank + 1);
  const all = new Int32Array(n * size);
  comm.gatherSync(mine, rank === 0 ? all : null, 0);
  if (rank === 0) for (let i = 0; i < all.length; i++) if (all[i] !== Math.floor(i / n) + 1) throw new Error(`rank 0: gathered[${i}] is ${all[i]}`);
  console.log(`rank ${rank} ok ${checks + 1}`);
  comm.close();
} else if (mode === 'mismatch') {
  const odd = rank === 1;
  try {
    const n = 4;
    switch (kind) {
      case 'root':
        comm.gatherSync(new Int32Array(n), new Int32Array(n * size), odd ? 1 : 0);
        break;
      case 'count': {
        const m = odd ? n + 1 : n;
        comm.scatterSync(new Int32Array(m * size), new Int32Array(m), 0);
        break;
      }
      case 'counts': {
        // Same total, another split: only the counts tell the calls apart.
        const counts = Array.from({ length: size }, (_, r) => (odd ? (r === 0 ? 2 : r === 1 ? 4 : 3) : 3));
        const total = counts.reduce((a, b) => a + b, 0);
        comm.gathervSync(new Int32Array(/** @type {number} */ (counts[rank])), new Int32Array(total), counts, 0);
        break;
      }
      case 'collective':
        if (odd) comm.scatterSync(new Int32Array(n * size), new Int32Array(n), 0);
        else comm.gatherSync(new Int32Array(n), new Int32Array(n * size), 0);
        break;
      case 'dtype':
        if (odd) comm.gatherSync(new Float32Array(n), new Float32Array(n * size), 0);
        else comm.gatherSync(new Int32Array(n), new Int32Array(n * size), 0);
        break;
      case 'reduce-scatter-op':
        comm.reduceScatterBlockSync(new Int32Array(n * size), new Int32Array(n), odd ? 'max' : 'sum');
        break;
      case 'scan-exscan':
        // The same schedule, the same messages: only the header's collective tells them apart.
        if (odd) comm.exscanSync(new Int32Array(n).fill(rank), new Int32Array(n), 'sum');
        else comm.scanSync(new Int32Array(n).fill(rank), new Int32Array(n), 'sum');
        break;
      case 'scan-op':
        comm.scanSync(new Int32Array(n).fill(rank), new Int32Array(n), odd ? 'max' : 'sum');
        break;
      case 'reduce-scatter-counts': {
        const counts = Array.from({ length: size }, (_, r) => (odd ? (r === 0 ? 2 : r === 1 ? 4 : 3) : 3));
        comm.reduceScatterSync(new Int32Array(3 * size), new Int32Array(4), counts, 'sum');
        break;
      }
      case 'alltoall-count': {
        const m = odd ? n + 1 : n;
        comm.alltoallSync(new Int32Array(m * size), new Int32Array(m * size));
        break;
      }
      case 'alltoallv-counts': {
        // Every rank sends every rank 3; rank 1 expects 4 from rank 0 (and 2 from rank 2: the
        // same total), so rank 0 and rank 1 (and 2 and 1) disagree on a block's length.
        const sendCounts = Array.from({ length: size }, () => 3);
        const recvCounts = Array.from({ length: size }, (_, r) => (odd && r === 0 ? 4 : odd && r === 2 ? 2 : 3));
        comm.alltoallvSync(new Int32Array(3 * size), sendCounts, new Int32Array(3 * size), recvCounts);
        break;
      }
      default:
        throw new Error(`unknown mismatch ${kind}`);
    }
    // Whatever slipped through is caught by the next calls, whose messages no longer line up.
    comm.barrierSync();
    comm.barrierSync();
    console.log(`rank ${rank} finished`);
    comm.close();
  } catch (e) {
    console.log(`rank ${rank} caught ${/** @type {any} */ (e).code}: ${/** @type {any} */ (e).message}`);
    comm.close();
    process.exit(3);
  }
} else if (mode === 'dies') {
  const victim = size - 1;
  const n = 1 << 16;
  const block = new Float64Array(n).fill(rank);
  const whole = new Float64Array(n * size);
  const other = kind === 'alltoall' ? new Float64Array(n * size) : whole;
  const sync = () =>
    kind === 'gather'
      ? comm.gatherSync(block, whole, 0)
      : kind === 'scatter'
        ? comm.scatterSync(whole, block, 0)
        : kind === 'alltoall'
          ? comm.alltoallSync(whole, other)
          : comm.reduceScatterBlockSync(whole, block);
  if (rank === victim) {
    sync(); // one clean round so every rank is inside the loop
    void (kind === 'gather'
      ? comm.gather(block, whole, 0)
      : kind === 'scatter'
        ? comm.scatter(whole, block, 0)
        : kind === 'alltoall'
          ? comm.alltoall(whole, other)
          : comm.reduceScatterBlock(whole, block));
    process.kill(process.pid, 'SIGKILL');
  }
  try {
    for (;;) sync();
  } catch (e) {
    console.log(`rank ${rank} caught ${/** @type {any} */ (e).code}: ${/** @type {any} */ (e).message}`);
    comm.close();
    process.exit(3);
  }
} else {
  throw new Error(`unknown mode ${mode}`);
}
