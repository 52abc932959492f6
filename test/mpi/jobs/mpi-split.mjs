// @ts-check
// A rank of a job started by mpirun (nodes emulated through TOPOCOLL_NODE): the same
// sub-communicator made three ways — createCommunicator over MPI's split of the world
// (MPI_Comm_split), split() of a topocoll communicator over the world, and split() of one made
// over the world's native struct alone (`{ native }`: its setup goes through the struct too) —
// must have the same ranks and give bit for bit what MPI's own collectives give on MPI's split;
// the native-only communicator itself gives MPI's results on the world. Prints `rank R ok N`.
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
const nativeOnly = await createCommunicator({ native: /** @type {object} */ (world.native) });
const viaNativeSplit = /** @type {import('topocoll').Communicator} */ (await nativeOnly.split(color, key));
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

same(
  'ranks and sizes',
  [viaHost.rank, viaHost.size, viaSplit.rank, viaSplit.size, viaNativeSplit.rank, viaNativeSplit.size, nativeOnly.rank, nativeOnly.size],
  [mpiHalf.rank, mpiHalf.size, mpiHalf.rank, mpiHalf.size, mpiHalf.rank, mpiHalf.size, world.rank, world.size],
);
for (const n of [1, 1000, 70_000]) {
  const input = Float64Array.from({ length: n }, (_, i) => rank * 0.5 + i);
  const want = new Float64Array(n);
  const got = new Float64Array(n);
  world.allreduceSync(input, want, 'max');
  nativeOnly.allreduceSync(input, got, 'max');
  same(`native-only allreduce n=${n}`, got, want);
}
for (const n of [1, 1000, 70_000]) {
  const input = Int32Array.from({ length: n }, (_, i) => (rank * 104729 + i * 7919) % 2 ** 31);
  const want = new Int32Array(n);
  mpiHalf.allreduceSync(input, want, 'sum');
  for (const [name, comm] of /** @type {const} */ ([
    ['createCommunicator(split)', viaHost],
    ['split()', viaSplit],
    ['split() of a native-only communicator', viaNativeSplit],
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
for (const comm of [viaSplit, parent, viaHost, viaNativeSplit, nativeOnly]) comm.close();
mpiHalf.free();
console.log(`rank ${rank} ok ${checks}`);
