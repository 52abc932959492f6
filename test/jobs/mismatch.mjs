// @ts-check
// A rank of a mismatch test: rank 1 calls a collective with one argument different from the
// others (argv[2]: count | dtype | op | root | collective | allgather-count | allgatherv-counts |
// allgather-collective | allgather-shm-or-not). No rank may finish with wrong data
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
    case 'allgather-count': {
      const n = odd ? 5 : 4;
      comm.allgatherSync(new Int32Array(n).fill(comm.rank), new Int32Array(n * comm.size));
      break;
    }
    case 'allgatherv-counts': {
      // Same total, different split: only the counts tell the calls apart.
      const counts = Array.from({ length: comm.size }, (_, r) => /** @type {number} */ ((odd ? [2, 4, 3, 3] : [3, 3, 3, 3])[r % 4]));
      comm.allgathervSync(new Int32Array(/** @type {number} */ (counts[comm.rank])).fill(comm.rank), new Int32Array(counts.reduce((a, b) => a + b, 0)), counts);
      break;
    }
    case 'allgather-shm-or-not': {
      // 4 KiB blocks go through a one-node job's shared area while ranks have cores (every-rank),
      // 4 KiB + 4 through the schedules.
      const n = odd ? 1025 : 1024;
      comm.allgatherSync(new Int32Array(n).fill(comm.rank), new Int32Array(n * comm.size));
      break;
    }
    case 'allgather-collective':
      if (odd) comm.allreduceSync(new Int32Array(4), new Int32Array(4), 'sum');
      else comm.allgatherSync(new Int32Array(1), new Int32Array(comm.size));
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
