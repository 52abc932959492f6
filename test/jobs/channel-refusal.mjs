// @ts-check
// A rank of a one-node job whose outboxes (shm.channelPoolBytes, set by the test) hold fewer
// channels than the schedules of its first collective send on: init() must succeed, the
// collective must be refused with ECONFIG on the ranks whose schedules need more channels, and
// the others must not hang. Prints `rank R initialized`, then `rank R finished` or
// `rank R caught CODE CLASS: MESSAGE` (CLASS: TopocollError, or the class of another error), and
// rethrows what it caught, as a program that does not handle it would (non-zero exit).
//
// Arguments: allgather | allreduce | barrier — the collective, small (the configuration picks
// algorithms that send to several peers).
import { init, isTopocollError } from 'topocoll';

const what = process.argv[2];
const comm = await init();
const { rank, size } = comm;
console.log(`rank ${rank} initialized`);
try {
  if (what === 'allgather') comm.allgatherSync(Float64Array.of(rank), new Float64Array(size));
  else if (what === 'allreduce') comm.allreduceSync(new Float64Array(20000), new Float64Array(20000), 'sum');
  else if (what === 'barrier') comm.barrierSync();
  else throw new Error(`unknown collective ${what}`);
  console.log(`rank ${rank} finished`);
} catch (e) {
  console.log(`rank ${rank} caught ${e.code} ${isTopocollError(e) ? 'TopocollError' : e.constructor.name}: ${e.message}`);
  throw e;
}
comm.close();
