// @ts-check
// A rank of the port-flood test (test/runtime/port-flood.jobs.test.ts): init, an allreduce, a bcast
// and a barrier checked against formulas computed here, close. Prints `rank R ok` and exits 0,
// or prints the reason to stderr and exits 1.
//
// FLOOD_HOLD_RANK (default: none) holds its init for FLOOD_HOLD_MS (default 2000) once its TCP
// data port listens, so that a test can flood the ports while the ranks wait in init. Without
// a hold there is hardly a window: the ranks open their data ports only once every rank has
// joined the rendezvous, publish them through it and link a few milliseconds later (delaying
// the start of init() would only hold everyone before the ports exist). FLOOD_HOLD_AT says where:
//   publish  before this rank publishes its port: the others wait for it in the rendezvous
//            with their ports listening but not accepting, so the flood queues up in front
//            of the connection this rank makes afterwards;
//   link     after it has published its port, before it links: the lower ranks it links to
//            sit in their accept loop, taking in the flood, until its connection comes.
// The hold blocks the whole thread (as a busy or descheduled process would). It is found as
// the first message this rank writes to the rendezvous once its port listens (the port, for
// the allgather of init), by wrapping net.Socket's write. The held rank prints
// `rank R held init <ms> ms at <where> with port <port> listening, until <epoch ms>`; every rank prints
// `rank R init done at <epoch ms>`, so the test can tell that its flood reached the ports during init.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import { init } from 'topocoll';

const rank = Number(process.env.TOPOCOLL_RANK);
const holdRank = process.env.FLOOD_HOLD_RANK === undefined ? -1 : Number(process.env.FLOOD_HOLD_RANK);
const holdMs = Number(process.env.FLOOD_HOLD_MS ?? 2000);
const holdAt = process.env.FLOOD_HOLD_AT ?? 'link';

/**
 * @param {string} message
 * @returns {never}
 */
function fail(message) {
  console.error(`flood-check: rank ${rank}: ${message}`);
  process.exit(1);
}

/** The ports this process listens on over TCP (IPv4), from /proc/self/net/tcp and its own socket fds. */
function listeningPorts() {
  const inodes = new Set();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = [];
  for (const line of readFileSync('/proc/self/net/tcp', 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[3] === '0A' && inodes.has(f[9])) ports.push(parseInt(/** @type {string} */ (/** @type {string} */ (f[1]).split(':')[1]), 16));
  }
  return ports;
}

const sleep = (/** @type {number} */ ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** @type {number | undefined} */
let held;
/** @type {number | undefined} */
let holdEnd;
const hold = () => {
  sleep(holdMs);
  holdEnd = Date.now();
};
if (rank === holdRank) {
  if (holdAt !== 'publish' && holdAt !== 'link') fail(`FLOOD_HOLD_AT must be publish or link, got ${holdAt}`);
  const write = /** @type {(this: net.Socket, ...args: any[]) => boolean} */ (net.Socket.prototype.write);
  net.Socket.prototype.write = function (/** @type {any[]} */ ...args) {
    // A rank of the launcher listens on nothing but its data port.
    const ports = held === undefined ? listeningPorts() : [];
    if (ports.length === 0) return write.apply(this, args);
    held = ports[0];
    net.Socket.prototype.write = write;
    if (holdAt === 'publish') {
      hold();
      return write.apply(this, args);
    }
    // The rendezvous client corks its socket until the next tick: hold once the line is out.
    const r = write.apply(this, args);
    setImmediate(hold);
    return r;
  };
}

const comm = await init();
const initDone = Date.now();
const { size } = comm;
if (rank === holdRank) {
  if (held === undefined || holdEnd === undefined) fail(`init() returned without writing to the rendezvous once its data port listened: nothing was held`);
  console.log(`rank ${rank} held init ${holdMs} ms at ${holdAt} with port ${held} listening, until ${holdEnd}`);
}
console.log(`rank ${rank} init done at ${initDone}`);

// Allreduce: every element of rank r is r + 1, so every element of the sum is 1 + 2 + … + p.
const N = 1000;
const sum = new Float64Array(N);
comm.allreduceSync(new Float64Array(N).fill(rank + 1), sum, 'sum');
const wantSum = (size * (size + 1)) / 2;
const badSum = sum.findIndex((v) => v !== wantSum);
if (badSum !== -1) fail(`allreduce element ${badSum} is ${sum[badSum]}, want ${wantSum}`);

// Bcast from the last rank: element i is 3i + 1.
const root = size - 1;
const data = new Int32Array(N);
if (rank === root) for (let i = 0; i < N; i++) data[i] = 3 * i + 1;
comm.bcastSync(data, root);
const badBcast = data.findIndex((v, i) => v !== 3 * i + 1);
if (badBcast !== -1) fail(`bcast element ${badBcast} is ${data[badBcast]}, want ${3 * badBcast + 1}`);

comm.barrierSync();
comm.close();
console.log(`rank ${rank} ok: allreduce ${wantSum}, bcast ok`);
