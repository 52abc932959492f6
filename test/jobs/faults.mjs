// @ts-check
// A rank of the fault-matrix tests. argv: <fault> <when> [size]
//   fault: sigkill | close | return | exit | throw | sigstop — what the victim (the last rank, or
//          FAULT_VICTIM) does
//   when:  start (never calls init(); exit only) | init (during init(), once every rank has
//          arrived; sigkill and exit only) | small | large | configure — in a loop
//          of 8-byte or 1 MiB allreduces (large also bcasts through the shared-memory engine), or
//          of configure() calls that switch the bcast segment
// Every other rank keeps calling collectives and must end with an error: it prints
// `rank R caught CODE: message` and exits 3. A survivor that gets through `LOOPS` calls prints
// `rank R finished` (a hang is the test's timeout).
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { init } from 'topocoll';

const [fault, when] = process.argv.slice(2);
const rank = Number(process.env.TOPOCOLL_RANK ?? process.env.OMPI_COMM_WORLD_RANK ?? process.env.SLURM_PROCID ?? process.env.RANK);
const size = Number(process.env.TOPOCOLL_SIZE ?? process.env.OMPI_COMM_WORLD_SIZE ?? process.env.SLURM_NTASKS ?? process.env.WORLD_SIZE);
const victim = Number(process.env.FAULT_VICTIM ?? size - 1);
const LOOPS = when === 'configure' ? 20_000 : 200_000;

/** This process's TCP sockets by state: established connections (a rank's first is to the
 *  rendezvous) and listening sockets (a rank's data port, opened once every rank has arrived). */
function sockets() {
  const inodes = new Set();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const count = { established: 0, listening: 0 };
  for (const table of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (!inodes.has(f[9])) continue;
      if (f[3] === '01') count.established++;
      if (f[3] === '0A') count.listening++;
    }
  }
  return count;
}

if (rank === victim && when === 'start') process.exit(0); // never shows up
if (rank === victim && when === 'init') {
  // Dies (or leaves) while the others are in init, after every rank has arrived, so that none
  // is still looking for a rendezvous that is gone: once this rank listens on its data port
  // (jobs across nodes), else 300 ms after it connected to the rendezvous. Rank 0 without a
  // launcher hosts the rendezvous (one more listening socket) and sees the others arrive: its
  // own connection's two ends and one accepted socket per other rank.
  const hosting = rank === 0 && !process.env.TOPOCOLL_RANK;
  /** @type {number | undefined} */
  let connectedAt;
  const poll = setInterval(() => {
    const now = sockets();
    if (connectedAt === undefined && now.established >= (hosting ? size + 1 : 1)) connectedAt = Date.now();
    if (now.listening <= (hosting ? 1 : 0) && (connectedAt === undefined || Date.now() - connectedAt < 300)) return;
    clearInterval(poll);
    fault === 'sigkill' ? process.kill(process.pid, 'SIGKILL') : process.exit(0);
  }, 2);
}

let comm;
try {
  comm = await init();
} catch (e) {
  console.log(`rank ${rank} caught ${e.code}: ${e.message}`);
  process.exit(3);
}

const n = when === 'large' ? 1 << 17 : 1;
const send = new Float64Array(n).fill(comm.rank + 1);
const recv = new Float64Array(n);
const call = (/** @type {number} */ i) => {
  if (when === 'configure') comm.configure({ bcast: { segment: i % 2 === 0 ? 4096 : 8192 } });
  else if (when === 'large' && i % 2 === 1) comm.bcastSync(recv, 0);
  else comm.allreduceSync(send, recv, 'sum');
};

if (comm.rank === victim) {
  for (let i = 0; i < 3; i++) call(i); // every rank is inside the loop by now
  switch (fault) {
    case 'sigkill':
      process.kill(process.pid, 'SIGKILL');
      break;
    case 'sigstop':
      process.kill(process.pid, 'SIGSTOP');
      break;
    case 'close':
      comm.close();
      console.log(`rank ${comm.rank} closed`);
      process.exit(0);
      break;
    case 'exit':
      process.exit(0); // without close(): closed at exit
      break;
    case 'throw':
      throw new Error('the victim fails');
    case 'return':
      console.log(`rank ${comm.rank} returns without close()`);
      break; // falls off the end of the script: nothing may keep it alive
  }
} else {
  try {
    for (let i = 0; i < LOOPS; i++) call(i);
    console.log(`rank ${comm.rank} finished`);
  } catch (e) {
    console.log(`rank ${comm.rank} caught ${e.code}: ${e.message}`);
    comm.close();
    process.exit(3);
  }
}
