// A rank of a mismatch test: rank 1 calls a collective with one argument different from the
// others (argv[2]: count | dtype | op | root | collective). No rank may finish with wrong data
// or hang: each prints `rank R caught CODE` (exit 3), or `rank R finished` (exit 0) when the
// mismatch did not involve it before the job ended.
import { init } from 'topocoll';

const comm = await init();
const kind = process.argv[2];
const odd = comm.rank === 1;
try {
  switch (kind) {
    case 'count': {
      const n = odd ? 5 : 4;
      comm.allreduceSync(new Int32Array(n).fill(1), new Int32Array(n), 'sum');
      break;
    }
    case 'dtype': {
      const send = odd ? new Float32Array(4).fill(1) : new Int32Array(4).fill(1);
      comm.allreduceSync(send, odd ? new Float32Array(4) : new Int32Array(4), 'sum');
      break;
    }
    case 'op':
      comm.allreduceSync(new Int32Array(4).fill(1), new Int32Array(4), odd ? 'max' : 'sum');
      break;
    case 'root':
      comm.bcastSync(new Int32Array(4).fill(comm.rank), odd ? 1 : 0);
      break;
    case 'collective':
      if (odd) comm.bcastSync(new Int32Array(4), 0);
      else comm.allreduceSync(new Int32Array(4), new Int32Array(4), 'sum');
      break;
  }
  // Whatever slipped through is caught by the next call, whose messages no longer line up.
  comm.barrierSync();
  comm.barrierSync();
  console.log(`rank ${comm.rank} finished`);
  comm.close();
} catch (e) {
  console.log(`rank ${comm.rank} caught ${e.code}: ${e.message}`);
  comm.close();
  process.exit(3);
}
