// A rank of a failure test: the last rank starts a Promise allreduce and SIGKILLs itself while it
// runs; every other rank keeps calling collectives and must get an error (EPEERLOST) instead of
// hanging. Survivors print `rank R caught CODE` and exit 3.
import { init } from 'topocoll';

const comm = await init();
const victim = comm.size - 1;
const n = 1 << 18;
const send = new Float64Array(n).fill(comm.rank);
const recv = new Float64Array(n);

if (comm.rank === victim) {
  comm.allreduceSync(send, recv, 'sum'); // one clean round so every rank is inside the loop
  void comm.allreduce(send, recv, 'sum');
  process.kill(process.pid, 'SIGKILL');
}
try {
  for (;;) comm.allreduceSync(send, recv, 'sum');
} catch (e) {
  console.log(`rank ${comm.rank} caught ${e.code}: ${e.message}`);
  comm.close();
  process.exit(3);
}
