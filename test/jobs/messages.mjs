// @ts-check
// A rank of the point-to-point message tests (test/runtime/messages.jobs.test.ts).
//
// Without `--faults`, it runs every case below in turn, each reported as `rank R case K ok N`
// (N: checks made) or `rank R case K failed: <why>`:
//   1 ping-pong between ranks 2k and 2k+1, 0 B … 4 MiB, in the Sync, Promise and request forms;
//   2 a ring of sendrecvSync and sendrecv, and wildcard receives (ANY_SOURCE, ANY_TAG);
//   3 truncation: a message longer than the receive gives ETRUNCATE on the receiver, is consumed,
//     and the sender is unaffected;
//   4 objects (nested objects, Maps, typed arrays, Dates); an uncloneable value is EINVAL at the
//     call and sends nothing; bad tags, ranks and buffers are EINVAL before anything is sent;
//   5 messages and collectives interleaved: isend(big) then allreduce on one rank, allreduce then
//     recv on the other, in Sync, Promise and request forms; a message sent before a bcast is
//     not read by it;
//   6 a dup and a split keep their messages apart from the parent's;
//   7 a seeded storm: every rank sends to random ranks with random tags and sizes 0 … 4 MiB,
//     receives with specific and wildcard source and tag, and checks each message's order
//     (MPI's non-overtaking rule) and content against the senders' deterministic data.
//
// With `--layer socket` the communicator runs over the Unix-socket test layer (socket-layer.mjs);
// between nodes its blocking forms are refused (EINVAL) and the cases are 1, then 2: the Promise
// forms of the others and the refusals, then 3: the storm with Promise receives.
//
// With `--faults` (at least 4 ranks, timeouts.collectiveMs of a few seconds), it prints what
// each call threw as `rank R caught CODE: message` and `rank R finished` at the end:
//   a rank 0's irecv from rank 1 with tag 42 that nothing matches (ETIMEDOUT, awaited last);
//   b rank 2 closes its communicator with an irecv pending (ECLOSED) and four messages unreceived
//     (the close notice on stderr); rank 0's receive from it then fails (EPEERLOST);
//   c rank 3 kills itself after its messages were received; rank 0's pending and new receives
//     from it, and rank 1's (which never had a stream from it), fail with EPEERLOST.
import { ANY_SOURCE, ANY_TAG, createCommunicator, init } from 'topocoll';
import { mulberry32 } from './reference-op.mjs';
import { socketLayerOfJob } from './socket-layer.mjs';

/** @import { MessageStatus } from 'topocoll' */

const argv = process.argv.slice(2);
const layer = argv.includes('--layer') ? await socketLayerOfJob() : undefined;
const comm = layer !== undefined ? await createCommunicator(layer) : await init();
const { rank, size } = comm;
// Over a JavaScript layer between nodes this thread may not block: no Sync forms, no wait().
const blocking = layer === undefined || comm.localSize === comm.size;
let checks = 0;
const MiB = 1 << 20;

/** @param {boolean} ok @param {string} what */
function check(ok, what) {
  checks++;
  if (!ok) throw new Error(what);
}

/** The bytes message `idx` of rank `src` carries (the same on every rank). */
function pattern(/** @type {number} */ src, /** @type {number} */ idx, /** @type {number} */ bytes) {
  const out = new Uint8Array(bytes);
  const a = (src * 131 + idx * 29) & 255;
  for (let j = 0; j < bytes; j++) out[j] = (a + j * 7 + (j >>> 8)) & 255;
  return out;
}

/** @param {Uint8Array} got @param {number} src @param {number} idx @param {number} bytes @param {string} what */
function checkPattern(got, src, idx, bytes, what) {
  const a = (src * 131 + idx * 29) & 255;
  for (let j = 0; j < bytes; j++) {
    if (got[j] !== ((a + j * 7 + (j >>> 8)) & 255)) throw new Error(`${what}: byte ${j} of message ${idx} from rank ${src} is ${got[j]}`);
  }
  checks++;
}

/** @param {MessageStatus} st @param {number} source @param {number} tag @param {number} count @param {string} what */
function checkStatus(st, source, tag, count, what) {
  check(
    st.source === source && st.tag === tag && st.count === count,
    `${what}: status ${JSON.stringify(st)}, expected ${JSON.stringify({ source, tag, count })}`,
  );
}

/**
 * Runs `f` expecting a TopocollError with `code`; returns its message.
 * @param {string} code @param {() => unknown} f @param {string} what
 */
async function expectError(code, f, what) {
  try {
    await f();
  } catch (e) {
    const err = /** @type {{ code?: string, message: string }} */ (e);
    check(err.code === code, `${what}: threw ${err.code}: ${err.message}, expected ${code}`);
    return err.message;
  }
  throw new Error(`${what}: did not throw (expected ${code})`);
}

// --- the cases ---

const SIZES = [0, 1, 8, 4096, 65_536 + 13, MiB, 4 * MiB];

async function pingPong() {
  const partner = rank ^ 1;
  if (partner >= size) return;
  const first = rank % 2 === 0;
  for (const form of blocking ? ['sync', 'promise', 'request'] : ['promise', 'request']) {
    for (const [i, bytes] of SIZES.entries()) {
      const tag = 100 + i;
      const out = pattern(rank, i, bytes);
      const into = new Uint8Array(bytes);
      /** @type {MessageStatus} */
      let st;
      const send = async () => {
        if (form === 'sync') comm.sendSync(out, partner, tag);
        else if (form === 'promise') await comm.send(out, partner, tag);
        else if (blocking) comm.isend(out, partner, tag).wait();
        else await comm.isend(out, partner, tag);
      };
      const recv = async () => {
        if (form === 'sync') return comm.recvSync(into, partner, tag);
        if (form === 'promise') return comm.recv(into, partner, tag);
        const r = comm.irecv(into, partner, tag);
        if (!blocking) {
          while (!r.test()) await new Promise((resolve) => setImmediate(resolve));
          return r;
        }
        while (!r.test());
        return r.wait();
      };
      if (first) {
        await send();
        st = await recv();
      } else {
        st = await recv();
        await send();
      }
      checkStatus(st, partner, tag, bytes, `${form} ping-pong of ${bytes} B`);
      checkPattern(into, partner, i, bytes, `${form} ping-pong`);
    }
  }
  // Element counts follow the receive buffer's type.
  const f = new Float64Array(5);
  if (first) {
    await comm.send(new Float64Array([1, 2, 3]), partner, 7);
  } else {
    checkStatus(await comm.recv(f, partner, 7), partner, 7, 3, 'count in float64 elements');
    check(f[2] === 3 && f[3] === 0, 'a float64 message');
  }
}

async function ringAndWildcards() {
  const right = (rank + 1) % size;
  const left = (rank + size - 1) % size;
  const out = pattern(rank, 1, 3000);
  const into = new Uint8Array(3000);
  checkStatus(comm.sendrecvSync(out, right, 3, into, left, 3), left, 3, 3000, 'sendrecvSync around the ring');
  checkPattern(into, left, 1, 3000, 'sendrecvSync');
  const big = pattern(rank, 2, 2 * MiB);
  const bigInto = new Uint8Array(2 * MiB);
  checkStatus(await comm.sendrecv(big, left, 4, bigInto, ANY_SOURCE, 4), right, 4, 2 * MiB, 'sendrecv against the ring');
  checkPattern(bigInto, right, 2, 2 * MiB, 'sendrecv');
  // Rank 0 receives one message from every rank with ANY_SOURCE and ANY_TAG, in any order.
  if (rank !== 0) {
    comm.sendSync(pattern(rank, 3, rank * 10), 0, 1000 + rank);
  } else {
    const seen = new Set();
    for (let i = 1; i < size; i++) {
      const buf = new Uint8Array(1000);
      const st = i % 2 === 0 ? comm.recvSync(buf) : await comm.recv(buf);
      check(st.tag === 1000 + st.source && st.count === st.source * 10 && !seen.has(st.source), `wildcard status ${JSON.stringify(st)}`);
      seen.add(st.source);
      checkPattern(buf, st.source, 3, st.count, 'wildcard receive');
    }
  }
  await comm.barrier();
}

async function truncation() {
  if (size < 2) return;
  if (rank === 0) {
    comm.sendSync(pattern(0, 5, 100), 1, 9);
    await comm.send(pattern(0, 6, 3 * MiB), 1, 9);
    comm.sendSync(pattern(0, 7, 10), 1, 9);
    comm.sendSync(pattern(0, 8, 10), 1, 9);
  } else if (rank === 1) {
    const small = new Uint8Array(10);
    const msg = await expectError('ETRUNCATE', () => comm.recvSync(small, 0, 9), 'recvSync of 100 B into 10 B');
    check(msg.includes('rank 0') && msg.includes('tag 9') && msg.includes('100 bytes'), `the ETRUNCATE message names the message: ${msg}`);
    await expectError('ETRUNCATE', () => comm.recv(new Uint8Array(MiB), 0, 9), 'recv of 3 MiB into 1 MiB');
    const r = comm.irecv(new Uint8Array(4), 0, 9);
    await expectError('ETRUNCATE', () => r.wait(), 'irecv wait of 10 B into 4 B');
    await expectError('ETRUNCATE', () => r, 'await of the same request');
    // The truncated messages were consumed: the next one is the fourth.
    checkStatus(comm.recvSync(small, 0, 9), 0, 9, 10, 'after truncations');
    checkPattern(small, 0, 8, 10, 'after truncations');
  }
  await comm.barrier();
}

async function objectsAndArguments() {
  const right = (rank + 1) % size;
  const left = (rank + size - 1) % size;
  const value = {
    from: rank,
    nested: { list: [1, 'two', { three: 3n }], when: new Date(1_700_000_000_000 + rank) },
    map: new Map([[rank, new Set([rank, 'x'])]]),
    floats: new Float32Array([rank, 0.5]),
  };
  comm.sendObjectSync(value, right, 11);
  const got = /** @type {{ value: any, source: number, tag: number }} */ (comm.recvObjectSync(left, 11));
  check(got.source === left && got.tag === 11, 'recvObjectSync status');
  const v = got.value;
  check(
    v.from === left &&
      v.nested.list[2].three === 3n &&
      v.nested.when instanceof Date &&
      v.nested.when.getTime() === 1_700_000_000_000 + left &&
      v.map instanceof Map &&
      v.map.get(left).has('x') &&
      v.floats instanceof Float32Array &&
      v.floats[0] === left,
    `the object from rank ${left}`,
  );
  await comm.sendObject(['promise', rank], left, 12);
  const back = /** @type {{ value: any, source: number }} */ (await comm.recvObject(ANY_SOURCE, 12));
  check(back.source === right && back.value[1] === right, 'recvObject status and value');
  // Nothing is sent for a value that cannot be cloned, nor for bad arguments: the next message
  // the neighbour gets is the sentinel.
  await expectError('EINVAL', () => comm.sendObjectSync({ f: () => 1 }, right, 13), 'sendObjectSync of a function');
  await expectError('EINVAL', () => comm.sendObject(Symbol('s'), right, 13), 'sendObject of a symbol');
  const b = new Uint8Array(4);
  await expectError('EINVAL', () => comm.sendSync(b, right, -1), 'tag -1');
  await expectError('EINVAL', () => comm.sendSync(b, right, 2 ** 31), 'tag 2^31');
  await expectError('EINVAL', () => comm.isend(b, right, 1.5), 'tag 1.5');
  await expectError('EINVAL', () => comm.send(b, size, 13), 'dest = size');
  await expectError('EINVAL', () => comm.sendSync(b, -1, 13), 'dest -1');
  await expectError('EINVAL', () => comm.recvSync(b, size, 13), 'source = size');
  await expectError('EINVAL', () => comm.irecv(b, 0, -2), 'receive tag -2');
  await expectError('EINVAL', () => comm.sendSync(/** @type {any} */ ([1, 2]), right, 13), 'an array for a buffer');
  await expectError('EINVAL', () => comm.recv(/** @type {any} */ (new DataView(new ArrayBuffer(4))), 0, 13), 'a DataView for a buffer');
  const resizable = new Uint8Array(new /** @type {any} */ (ArrayBuffer)(8, { maxByteLength: 16 }));
  await expectError('EINVAL', () => comm.isend(resizable, right, 13), 'isend of a resizable buffer');
  await expectError('EINVAL', () => comm.recv(resizable, left, 13), 'recv into a resizable buffer');
  comm.sendSync(new Uint8Array([42]), right, 13);
  checkStatus(comm.recvSync(b, left, 13), left, 13, 1, 'the sentinel after refused sends');
  check(b[0] === 42, 'the sentinel');
  await comm.barrier();
}

async function interleaved() {
  const right = (rank + 1) % size;
  const left = (rank + size - 1) % size;
  const big = pattern(rank, 20, 4 * MiB);
  const into = new Uint8Array(4 * MiB);
  const sum = new Float64Array(1);
  // MPI's pattern: isend(big) then a collective, the receiver's recv after the collective.
  const sent = comm.isend(big, right, 21);
  await comm.allreduce(new Float64Array([1]), sum, 'sum');
  check(sum[0] === size, 'allreduce beside an isend');
  checkStatus(await comm.recv(into, left, 21), left, 21, 4 * MiB, 'recv after the allreduce');
  checkPattern(into, left, 20, 4 * MiB, 'recv after the allreduce');
  await sent;
  // The same with blocking calls: isend, allreduceSync, recvSync, wait.
  const sent2 = comm.isend(big, right, 22);
  comm.allreduceSync(new Float64Array([2]), sum, 'sum');
  check(sum[0] === 2 * size, 'allreduceSync beside an isend');
  checkStatus(comm.recvSync(into, left, 22), left, 22, 4 * MiB, 'recvSync after allreduceSync');
  sent2.wait();
  checkPattern(into, left, 20, 4 * MiB, 'recvSync after allreduceSync');
  // Requests of both kinds in flight together: an irecv posted before the collectives.
  const r = comm.irecv(into, left, 23);
  const c = comm.iallreduce(new Float64Array([3]), sum, 'sum');
  const s = comm.isend(big, right, 23);
  const b = new Float64Array(1000).fill(rank === 0 ? 5 : 0);
  comm.bcastSync(b, 0);
  check(b[999] === 5, 'bcastSync between requests');
  await c;
  check(sum[0] === 3 * size, 'iallreduce between messages');
  checkStatus(await r, left, 23, 4 * MiB, 'irecv posted before the collectives');
  await s;
  // A message sent before a bcast is not read by the bcast.
  const target = 1 % size;
  if (rank === 0) comm.sendSync(new Float64Array(1000).fill(7), target, 24);
  const bb = new Float64Array(1000).fill(rank === 0 ? 9 : 0);
  await comm.bcast(bb, 0);
  check(bb[0] === 9 && bb[999] === 9, 'bcast after a message');
  if (rank === target) {
    const m = new Float64Array(1000);
    checkStatus(comm.recvSync(m, 0, 24), 0, 24, 1000, 'the message sent before the bcast');
    check(m[999] === 7, 'the message sent before the bcast');
  }
  await comm.barrier();
}

async function communicatorsApart() {
  const dup = await comm.dup();
  const half = await comm.split(rank % 2, rank);
  try {
    const right = (rank + 1) % size;
    const left = (rank + size - 1) % size;
    comm.sendSync(new Int32Array([1, rank]), right, 30);
    dup.sendSync(new Int32Array([2, rank]), right, 30);
    // The child's receive comes first: it must not take the parent's message.
    const a = new Int32Array(2);
    checkStatus(dup.recvSync(a, ANY_SOURCE, 30), left, 30, 2, 'dup receive');
    check(a[0] === 2 && a[1] === left, 'the dup got its own message');
    checkStatus(comm.recvSync(a, left, ANY_TAG), left, 30, 2, 'parent receive');
    check(a[0] === 1 && a[1] === left, 'the parent got its own message');
    if (half !== undefined && half.size > 1) {
      const hr = (half.rank + 1) % half.size;
      const hl = (half.rank + half.size - 1) % half.size;
      await half.send(new Int32Array([3, half.rank]), hr, 30);
      const h = new Int32Array(2);
      checkStatus(await half.recv(h, hl, 30), hl, 30, 2, 'split receive');
      check(h[0] === 3 && h[1] === hl, 'the split communicator got its own message');
    }
    await comm.barrier();
  } finally {
    dup.close();
    half?.close();
  }
}

/** Every rank's sends of the storm, the same on every rank: [dest, tag, bytes] by sender, in send order. */
function stormPlan(/** @type {number} */ seed) {
  const random = mulberry32(seed);
  /** @type {[number, number, number][][]} */
  const plan = [];
  for (let src = 0; src < size; src++) {
    const sends = [];
    for (let i = 0; i < 24; i++) {
      const dest = Math.floor(random() * size);
      const tag = Math.floor(random() * 3);
      const kind = random();
      const bytes =
        kind < 0.1 ? 0 : kind < 0.7 ? Math.floor(random() * 1024) : kind < 0.92 ? Math.floor(random() * 65_536 * 2) : Math.floor(random() * 4 * MiB) + 1;
      sends.push(/** @type {[number, number, number]} */ ([dest, tag, i === 0 && src === 0 ? 4 * MiB : bytes]));
    }
    plan.push(sends);
  }
  return plan;
}

async function storm() {
  for (const seed of [42, 4242]) {
    const plan = stormPlan(seed);
    const random = mulberry32(seed * 31 + rank);
    // What this rank will receive: per source, the messages [idx, tag, bytes] in send order.
    /** @type {[number, number, number][][]} */
    const incoming = plan.map((sends) =>
      sends.flatMap(([dest, tag, bytes], idx) => (dest === rank ? [/** @type {[number, number, number]} */ ([idx, tag, bytes])] : [])),
    );
    const requests = [];
    for (const [idx, [dest, tag, bytes]] of /** @type {[number, number, number][]} */ (plan[rank]).entries()) {
      const data = pattern(rank, idx + seed, bytes);
      if (blocking && random() < 0.3) comm.sendSync(data, dest, tag);
      else requests.push(comm.isend(data, dest, tag));
    }
    const buf = new Uint8Array(4 * MiB);
    let left = incoming.reduce((n, l) => n + l.length, 0);
    while (left > 0) {
      const sources = incoming.flatMap((l, s) => (l.length > 0 ? [s] : []));
      const s = /** @type {number} */ (sources[Math.floor(random() * sources.length)]);
      const from = /** @type {[number, number, number][]} */ (incoming[s]);
      const head = /** @type {[number, number, number]} */ (from[0]);
      const pick = random();
      // Specific source and tag, specific source any tag, any source specific tag, any of both.
      const want =
        pick < 0.25
          ? [s, /** @type {[number, number, number]} */ (from[Math.floor(random() * from.length)])[1]]
          : pick < 0.5
            ? [s, ANY_TAG]
            : pick < 0.75
              ? [ANY_SOURCE, head[1]]
              : [ANY_SOURCE, ANY_TAG];
      const st = blocking && random() < 0.5 ? comm.recvSync(buf, want[0], want[1]) : await comm.recv(buf, want[0], want[1]);
      // MPI's order: the message is the first one from its source whose tag matches.
      const list = /** @type {[number, number, number][]} */ (incoming[st.source] ?? []);
      check(list.length > 0, `storm ${seed}: a message from rank ${st.source} that was not sent`);
      const at = list.findIndex(([, tag]) => want[1] === ANY_TAG || tag === want[1]);
      check(at >= 0 && (want[0] === ANY_SOURCE || want[0] === st.source), `storm ${seed}: a message from rank ${st.source} no receive wanted`);
      const [idx, tag, bytes] = /** @type {[number, number, number]} */ (list[at]);
      check(
        st.tag === tag && st.count === bytes,
        `storm ${seed}: from rank ${st.source} got tag ${st.tag}, ${st.count} B; expected message ${idx} (tag ${tag}, ${bytes} B)`,
      );
      checkPattern(buf, st.source, idx + seed, bytes, `storm ${seed}`);
      list.splice(at, 1);
      left--;
    }
    for (const r of requests) await r;
    await comm.barrier();
  }
}

/** Over a JavaScript layer between nodes: the Promise forms of the other cases, and the blocking forms refused. */
async function overLayer() {
  const right = (rank + 1) % size;
  const left = (rank + size - 1) % size;
  const b = new Uint8Array(4);
  for (const f of [
    () => comm.sendSync(b, right, 1),
    () => comm.recvSync(b, left, 1),
    () => comm.sendrecvSync(b, right, 1, b, left, 1),
    () => comm.sendObjectSync(1, right, 1),
    () => comm.recvObjectSync(left, 1),
  ]) {
    const msg = await expectError('EINVAL', f, 'a blocking form over a JavaScript layer');
    check(/JavaScript/.test(msg), `the refusal says why: ${msg}`);
  }
  const pending = comm.irecv(b, left, 2);
  await expectError('EINVAL', () => pending.wait(), 'wait() over a JavaScript layer');
  await comm.send(new Uint8Array([rank]), right, 2);
  checkStatus(await pending, left, 2, 1, 'the irecv whose wait() was refused');
  // The ring, objects and truncation as Promises.
  const big = pattern(rank, 2, 2 * MiB);
  const bigInto = new Uint8Array(2 * MiB);
  checkStatus(await comm.sendrecv(big, left, 4, bigInto, ANY_SOURCE, 4), right, 4, 2 * MiB, 'sendrecv over the layer');
  checkPattern(bigInto, right, 2, 2 * MiB, 'sendrecv over the layer');
  await comm.sendObject({ from: rank, when: new Date(rank), map: new Map([[1, [rank]]]) }, right, 11);
  const got = /** @type {{ value: any, source: number }} */ (await comm.recvObject(left, 11));
  check(got.source === left && got.value.from === left && got.value.map.get(1)[0] === left && got.value.when.getTime() === left, 'an object over the layer');
  const trunc = comm.send(pattern(rank, 3, 100), right, 9);
  await expectError('ETRUNCATE', () => comm.recv(new Uint8Array(10), left, 9), 'truncation over the layer');
  await trunc;
  // isend then a collective; the receive after it.
  const sent = comm.isend(big, right, 21);
  const sum = new Float64Array(1);
  await comm.allreduce(new Float64Array([1]), sum, 'sum');
  check(sum[0] === size, 'allreduce beside an isend over the layer');
  checkStatus(await comm.recv(bigInto, left, 21), left, 21, 2 * MiB, 'recv after the allreduce over the layer');
  checkPattern(bigInto, left, 2, 2 * MiB, 'recv after the allreduce over the layer');
  await sent;
  const dup = await comm.dup();
  await dup.send(new Int32Array([rank]), right, 30);
  await comm.send(new Int32Array([-rank]), right, 30);
  const a = new Int32Array(1);
  checkStatus(await dup.recv(a, ANY_SOURCE, 30), left, 30, 1, 'dup receive over the layer');
  check(a[0] === left, 'the dup got its own message over the layer');
  await comm.recv(a, left, 30);
  check(a[0] === -left, 'the parent got its own message over the layer');
  await comm.barrier();
  dup.close();
}

async function faults() {
  const dup = await comm.dup();
  const buf = new Uint8Array(16);
  const caught = async (/** @type {() => unknown} */ f) => {
    try {
      await f();
      console.log(`rank ${rank} caught nothing`);
    } catch (e) {
      const err = /** @type {{ code?: string, message: string }} */ (e);
      console.log(`rank ${rank} caught ${err.code}: ${err.message}`);
    }
  };
  // a: a receive that nothing matches, awaited at the end (the others' collectives meanwhile
  // have the same time limit, so nobody waits for this rank while it runs out).
  const unmatched = rank === 0 ? comm.irecv(new Uint8Array(16), 1, 42) : undefined;
  // b: a receiver closes with a request pending and messages unreceived.
  if (rank === 0) {
    for (let i = 0; i < 3; i++) comm.sendSync(buf, 2, 4);
    comm.sendSync(buf, 2, 5);
  }
  dup.barrierSync();
  if (rank === 2) {
    const pending = comm.irecv(buf, 0, 99);
    comm.close();
    await caught(() => pending);
  }
  dup.barrierSync();
  if (rank === 0) await caught(() => comm.recvSync(buf, 2, 0));
  // c: a sender dies after its messages were received.
  if (rank === 3) {
    comm.sendSync(buf, 0, 8);
    comm.sendSync(buf, 0, 8);
  }
  /** @type {Promise<unknown> | undefined} */
  let pending;
  if (rank === 0) {
    comm.recvSync(buf, 3, 8);
    comm.recvSync(buf, 3, 8);
    pending = comm.recv(buf, 3, 9);
  }
  dup.barrierSync();
  if (rank === 3) process.kill(process.pid, 'SIGKILL');
  if (rank === 0) {
    await caught(() => pending);
    await caught(() => comm.recvSync(buf, 3, 8));
  }
  if (rank === 1) await caught(() => comm.recvSync(buf, 3, 1));
  // Rank 1 stays until rank 0's receive from it timed out (else it would end with EPEERLOST),
  // waiting for rank 0's word through its own time limits.
  if (rank === 0) {
    await caught(() => unmatched);
    comm.sendSync(buf, 1, 50);
  }
  if (rank === 1) {
    for (;;) {
      try {
        comm.recvSync(buf, 0, 50);
        break;
      } catch (e) {
        if (/** @type {{ code?: string }} */ (e).code !== 'ETIMEDOUT') throw e;
      }
    }
  }
  console.log(`rank ${rank} finished`);
  comm.close();
  dup.close();
  process.exit(0);
}

if (argv.includes('--faults')) {
  await faults();
} else {
  const cases = blocking ? [pingPong, ringAndWildcards, truncation, objectsAndArguments, interleaved, communicatorsApart, storm] : [pingPong, overLayer, storm];
  for (const [k, run] of cases.entries()) {
    const before = checks;
    try {
      await run();
      console.log(`rank ${rank} case ${k + 1} ok ${checks - before}`);
    } catch (e) {
      console.log(`rank ${rank} case ${k + 1} failed: ${/** @type {Error} */ (e).stack?.replace(/\n/g, ' | ')}`);
      process.exitCode = 1;
      break;
    }
  }
  comm.close();
  await layer?.close();
}
