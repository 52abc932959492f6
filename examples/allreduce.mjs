// A first job: every rank contributes its rank number; allreduce sums them.
//   npx topocoll run -n 4 examples/allreduce.mjs
import { init } from 'topocoll';

const comm = await init();
const values = new Float64Array([comm.rank, 1]);
const sums = new Float64Array(2);
comm.allreduceSync(values, sums, 'sum');
console.log(`rank ${comm.rank}/${comm.size} on ${comm.node}: sum of ranks = ${sums[0]}, ranks counted = ${sums[1]}`);
comm.close();
