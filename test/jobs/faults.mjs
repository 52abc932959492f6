// A rank of the fault-matrix tests. argv: <fault> <when> [size]
//   fault: sigkill | close | return | exit | throw | sigstop — what the victim (the last rank) does
//   when:  init (during init(); sigkill and exit only) | small | large | configure — in a loop
//          of 8-byte or 1 MiB allreduces (large also bcasts through the shared-memory engine), or
//          of configure() calls that switch the bcast segment
// Every other rank keeps calling collectives and must end with an error: it prints
// `rank R caught CODE: message` and exits 3. A survivor that gets through `LOOPS` calls prints
// `rank R finished` (a hang is the test's timeout).
import { init } from 'topocoll';

const [fault, when] = process.argv.slice(2);
const rank = Number(process.env.TOPOCOLL_RANK ?? process.env.OMPI_COMM_WORLD_RANK ?? process.env.SLURM_PROCID ?? process.env.RANK);
const size = Number(process.env.TOPOCOLL_SIZE ?? process.env.OMPI_COMM_WORLD_SIZE ?? process.env.SLURM_NTASKS ?? process.env.WORLD_SIZE);
const victim = size - 1;
const LOOPS = when === 'configure' ? 20_000 : 200_000;

if (rank === victim && when === 'init') {
  // Dies (or leaves) while the others are in init: after its hello, before init completes.
  setTimeout(() => (fault === 'sigkill' ? process.kill(process.pid, 'SIGKILL') : process.exit(0)), 30);
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
const call = (i) => {
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
