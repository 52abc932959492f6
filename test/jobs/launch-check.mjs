// @ts-check
// A rank of a job started by any launcher (srun, mpirun, torchrun-style variables, topocoll run):
// checks that init() found the rank and size the launcher assigned, then runs one allreduce,
// bcast and barrier and checks their results against formulas computed here. Prints
// `rank R ok` and exits 0, or prints the reason to stderr and exits 1.
//
// The expected rank and size come from the launcher's own variables, in the order topocoll's
// environment detection uses them: TOPOCOLL_RANK/SIZE, OMPI_COMM_WORLD_RANK/SIZE,
// PMI_RANK/PMI_SIZE (MPICH's Hydra), SLURM_PROCID/SLURM_NTASKS, RANK/WORLD_SIZE. With none of
// them the job is a world of one.
import { init } from 'topocoll';

/** @type {[rankVar: string, sizeVar: string][]} */
const LAUNCHER_VARS = [
  ['TOPOCOLL_RANK', 'TOPOCOLL_SIZE'],
  ['OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE'],
  ['PMI_RANK', 'PMI_SIZE'],
  ['SLURM_PROCID', 'SLURM_NTASKS'],
  ['RANK', 'WORLD_SIZE'],
];

function expected() {
  for (const [rankVar, sizeVar] of LAUNCHER_VARS) {
    const rank = process.env[rankVar];
    const size = process.env[sizeVar];
    if (rank !== undefined && size !== undefined) return { rank: Number(rank), size: Number(size), from: `${rankVar}/${sizeVar}` };
  }
  return { rank: 0, size: 1, from: 'no launcher variables' };
}

/**
 * @param {string} message
 * @returns {never}
 */
function fail(message) {
  console.error(`launch-check: ${message}`);
  process.exit(1);
}

const want = expected();
const comm = await init();
const { rank, size } = comm;
if (rank !== want.rank || size !== want.size) {
  fail(`init() gave rank ${rank} of ${size}; ${want.from} say rank ${want.rank} of ${want.size}`);
}

// Allreduce: every element of rank r is r + 1, so every element of the sum is 1 + 2 + … + p.
const N = 1000;
const sum = new Float64Array(N);
comm.allreduceSync(new Float64Array(N).fill(rank + 1), sum, 'sum');
const wantSum = (size * (size + 1)) / 2;
const badSum = sum.findIndex((v) => v !== wantSum);
if (badSum !== -1) fail(`rank ${rank}: allreduce element ${badSum} is ${sum[badSum]}, want ${wantSum}`);

// Bcast from the last rank (not rank 0, so the root is not where the rendezvous lives): element i is 3i + 1.
const root = size - 1;
const data = new Int32Array(N);
if (rank === root) for (let i = 0; i < N; i++) data[i] = 3 * i + 1;
comm.bcastSync(data, root);
const badBcast = data.findIndex((v, i) => v !== 3 * i + 1);
if (badBcast !== -1) fail(`rank ${rank}: bcast element ${badBcast} is ${data[badBcast]}, want ${3 * badBcast + 1}`);

comm.barrierSync();
comm.close();
console.log(`rank ${rank} ok`);
