// One rank of bench/shm-scaling.mjs's jobs: times init(), runs a few collectives that send on
// the node's channels (an allreduce past the shared area, an allgather, a barrier), then prints
// what the node's shared memory holds. Rank 0 prints one JSON line.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { init, IN_PLACE } from 'topocoll';

/** Shmem of /proc/meminfo, bytes: every tmpfs page in use on the machine. */
const shmem = () => Number(/^Shmem:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? NaN) * 1024;

const t0 = performance.now();
const comm = await init();
const initMs = performance.now() - t0;
const times = new Float64Array(comm.size);
times[comm.rank] = initMs;
comm.allreduceSync(IN_PLACE, times, 'sum');
const big = new Float32Array(64 * 1024).fill(1);
comm.allreduceSync(IN_PLACE, big, 'sum');
const block = new Float64Array(2048).fill(comm.rank);
const all = new Float64Array(2048 * comm.size);
comm.allgatherSync(block, all);
comm.barrierSync();
if (big[7] !== comm.size || all[2048 * (comm.size - 1)] !== comm.size - 1) throw new Error(`rank ${comm.rank}: wrong result`);
const memory = typeof comm.sharedMemory === 'function' ? comm.sharedMemory() : undefined;
const resident = shmem();
comm.barrierSync();
if (comm.rank === 0) {
  const sorted = [...times].sort((a, b) => a - b);
  console.log(
    JSON.stringify({
      p: comm.size,
      initMsMedian: sorted[Math.floor(sorted.length / 2)],
      initMsMax: sorted.at(-1),
      shmemBytes: resident,
      memory,
    }),
  );
}
comm.close();
