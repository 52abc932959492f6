// @ts-check
// A rank of a failure test: the last rank starts a Promise collective (argv[2]: allreduce,
// allgather, or bcast — large, so the rank dies holding a set of the shared-memory engine) and SIGKILLs itself
// while it runs; every other rank keeps calling collectives and must get an error (EPEERLOST)
// instead of hanging. Survivors print `rank R caught CODE` and exit 3.
import { init } from 'topocoll';

const comm = await init();
const victim = comm.size - 1;
const n = 1 << 18;
const send = new Float64Array(n).fill(comm.rank);
const recv = new Float64Array(n);

const kind = process.argv[2];
const gathered = new Float64Array((n / 8) * comm.size);
const part = send.subarray(0, n / 8);
const call = () =>
  kind === 'bcast' ? comm.bcastSync(send, 0) : kind === 'allgather' ? comm.allgatherSync(part, gathered) : comm.allreduceSync(send, recv, 'sum');
if (comm.rank === victim) {
  call(); // one clean round so every rank is inside the loop
  void (kind === 'bcast' ? comm.bcast(send, 0) : kind === 'allgather' ? comm.allgather(part, gathered) : comm.allreduce(send, recv, 'sum'));
  process.kill(process.pid, 'SIGKILL');
}
try {
  for (;;) call();
} catch (e) {
  console.log(`rank ${comm.rank} caught ${e.code}: ${e.message}`);
  comm.close();
  process.exit(3);
}
