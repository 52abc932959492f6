// @ts-check
// A rank of a mismatch test: rank 1 calls a collective with one argument different from the
// others (argv[2]: count | dtype | op | root | collective | allgather-count | allgatherv-counts |
// allgather-collective | allgather-shm-or-not | alltoall-count | alltoall-large-count |
// alltoallv-counts | alltoall-collective | reduce-scatter-op | scan-exscan). No rank may finish with wrong data
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
    case 'alltoall-count': {
      // Blocks of 16 or 20 bytes: Bruck's packed exchanges on one node (several blocks a message).
      const n = odd ? 5 : 4;
      comm.alltoallSync(new Int32Array(n * comm.size), new Int32Array(n * comm.size));
      break;
    }
    case 'alltoall-large-count': {
      // Blocks of 256 KiB and 256 KiB + 4: pairwise on one node, each exchange in pieces.
      const n = odd ? 65537 : 65536;
      comm.alltoallSync(new Int32Array(n * comm.size), new Int32Array(n * comm.size));
      break;
    }
    case 'alltoallv-counts': {
      // Every rank sends every rank 3; rank 1 expects 4 from rank 0 and 2 from rank 2 (the same
      // total), so ranks 0 and 1 (and 2 and 1) disagree on a block's length.
      const sendCounts = Array.from({ length: comm.size }, () => 3);
      const recvCounts = Array.from({ length: comm.size }, (_, r) => (odd && r === 0 ? 4 : odd && r === 2 ? 2 : 3));
      comm.alltoallvSync(new Int32Array(3 * comm.size), sendCounts, new Int32Array(3 * comm.size), recvCounts);
      break;
    }
    case 'alltoall-collective':
      // The same bytes each way between every pair: only the header's collective tells them apart.
      if (odd) comm.alltoallvSync(new Int32Array(4 * comm.size), Array(comm.size).fill(4), new Int32Array(4 * comm.size), Array(comm.size).fill(4));
      else comm.alltoallSync(new Int32Array(4 * comm.size), new Int32Array(4 * comm.size));
      break;
    case 'reduce-scatter-op':
      comm.reduceScatterBlockSync(new Int32Array(4 * comm.size), new Int32Array(4), odd ? 'max' : 'sum');
      break;
    case 'scan-exscan':
      // The same schedule and messages: only the header's collective tells them apart.
      if (odd) comm.exscanSync(new Int32Array(4).fill(comm.rank), new Int32Array(4), 'sum');
      else comm.scanSync(new Int32Array(4).fill(comm.rank), new Int32Array(4), 'sum');
      break;
    default:
      throw new Error(`unknown mismatch ${kind}`);
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
