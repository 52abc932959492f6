// @ts-check
// A rank of a job started by mpirun (nodes emulated through TOPOCOLL_NODE): the same
// sub-communicator made two ways — createCommunicator over MPI's split of the world
// (MPI_Comm_split), and split() of a topocoll communicator over the world — must have the same
// ranks and give bit for bit what MPI's own collectives give on MPI's split. Prints `rank R ok N`.
import { createCommunicator } from 'topocoll';
import { initMpi } from 'topocoll/mpi';

const world = initMpi();
const { rank } = world;
const color = rank % 2;
const key = -rank;
const mpiHalf = /** @type {import('topocoll/mpi').MpiCommunicator} */ (world.split(color, key));
const viaHost = await createCommunicator(mpiHalf);
const parent = await createCommunicator(world);
const viaSplit = /** @type {import('topocoll').Communicator} */ (await parent.split(color, key));
let checks = 0;

/**
 * @param {string} what
 * @param {ArrayLike<number>} got
 * @param {ArrayLike<number>} want
 */
function same(what, got, want) {
  checks++;
  for (let i = 0; i < Math.max(got.length, want.length); i++) {
    if (got[i] !== want[i]) throw new Error(`rank ${rank}: ${what}: element ${i} is ${got[i]}, MPI says ${want[i]}`);
  }
}

same('ranks and sizes', [viaHost.rank, viaHost.size, viaSplit.rank, viaSplit.size], [mpiHalf.rank, mpiHalf.size, mpiHalf.rank, mpiHalf.size]);
for (const n of [1, 1000, 70_000]) {
  const input = Int32Array.from({ length: n }, (_, i) => (rank * 104729 + i * 7919) % 2 ** 31);
  const want = new Int32Array(n);
  mpiHalf.allreduceSync(input, want, 'sum');
  for (const [name, comm] of /** @type {const} */ ([
    ['createCommunicator(split)', viaHost],
    ['split()', viaSplit],
  ])) {
    const got = new Int32Array(n);
    comm.allreduceSync(input, got, 'sum');
    same(`${name} allreduce n=${n}`, got, want);
    const gathered = new Int32Array(n * comm.size);
    const wantGathered = new Int32Array(n * comm.size);
    comm.allgatherSync(input, gathered);
    mpiHalf.allgatherSync(input, wantGathered);
    same(`${name} allgather n=${n}`, gathered, wantGathered);
    const root = n % comm.size;
    const buf = comm.rank === root ? input.slice() : new Int32Array(n);
    const wantBuf = comm.rank === root ? input.slice() : new Int32Array(n);
    comm.bcastSync(buf, root);
    mpiHalf.bcastSync(wantBuf, root);
    same(`${name} bcast n=${n}`, buf, wantBuf);
  }
}
for (const comm of [viaSplit, parent, viaHost]) comm.close();
mpiHalf.free();
console.log(`rank ${rank} ok ${checks}`);
