import { defineConfig } from 'vitest/config';

/**
 * Test files that start processes: multi-process jobs (test/helpers/jobs.ts, host-jobs.ts,
 * hosts.ts, slurm.ts, torchrun.ts; mpirun, srun), the built CLI or other node processes running
 * dist/. They need `npm run build` first and take minutes; every other test file runs in the
 * vitest worker against src/ in seconds. A new test file that starts such a process belongs here.
 */
const JOB_TESTS = [
  'test/cli/bench-explain.test.ts',
  'test/cli/bench-model.test.ts',
  'test/cli/bench-report.test.ts',
  'test/cli/bench-transport.test.ts',
  'test/cli/bench.test.ts',
  'test/cli/topo.test.ts',
  'test/cli/tune.test.ts',
  'test/mpi/mpi-addon.test.ts',
  'test/mpi/mpi-transport.test.ts',
  'test/mpi/mpich.test.ts',
  'test/runtime/sub-communicators.test.ts',
  'test/runtime/requests.test.ts',
  'test/runtime/windows.test.ts',
  'test/runtime/one-sided.test.ts',
  'test/runtime/barrier.test.ts',
  'test/runtime/collectives-jobs.test.ts',
  'test/runtime/communicator-args.test.ts',
  'test/runtime/cross-core.test.ts',
  'test/runtime/failures.test.ts',
  'test/runtime/fast-path.test.ts',
  'test/runtime/fault-matrix.test.ts',
  'test/runtime/hosts-faults.test.ts',
  'test/runtime/hosts.test.ts',
  'test/runtime/launcher.test.ts',
  'test/runtime/launchers.test.ts',
  'test/runtime/p2p-layer.test.ts',
  'test/runtime/port-flood.test.ts',
  'test/runtime/process-sweep.test.ts',
  'test/runtime/scheduler-slice.test.ts',
  'test/runtime/shm-bcast.test.ts',
  'test/runtime/slurm.test.ts',
  'test/runtime/strategies.test.ts',
  'test/topology/hostile-input.test.ts',
];

export default defineConfig({
  test: {
    // Removes the directories each test file made with tempDir (test/helpers/temp.ts) when it ends.
    setupFiles: ['test/setup.ts'],
    // Multi-process and CLI tests spawn real processes; give them room on a 2-core machine.
    testTimeout: 60_000,
    // No retries: a flaky test is a bug to fix, not to hide.
    retry: 0,
    // `vitest run` runs both projects; `--project unit` / `--project jobs` one of them. The two
    // partition test/**/*.test.ts: unit is everything the jobs list does not name.
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: JOB_TESTS } },
      { extends: true, test: { name: 'jobs', include: JOB_TESTS } },
    ],
  },
});
