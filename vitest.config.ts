import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Two kinds of test file, told apart by name:
 * - `*.jobs.test.ts` start processes: multi-process jobs (test/helpers/jobs.ts, host-jobs.ts,
 *   hosts.ts, slurm.ts, torchrun.ts; mpirun, srun), the built CLI or other node processes running
 *   dist/. They need `npm run build` first and take minutes.
 * - every other `*.test.ts` runs in the vitest worker against src/ in seconds and starts no process
 *   (test/test-kinds.test.ts checks that).
 *
 * Job files run JOB_WORKERS at a time: part of a job's time is spent waiting (for processes to
 * start, for a timeout to expire), which another file's job fills (docs/guide/development.md,
 * "Test times"). Files that hold something of the machine's alone (ALONE) run after the others,
 * one at a time. Every leak check is about its own job's files, not the machine's
 * (test/helpers/jobs.ts, leftoverSegments; test/setup-jobs.ts gives each file its own TMPDIR).
 */
const JOBS = 'test/**/*.jobs.test.ts';
/**
 * Job files that run after the others, one at a time: the file that exhausts the launcher's ports;
 * jobs of 128 ranks, which take both cores for a minute (beside them the fault matrix's jobs
 * missed their time bound); the hosts file, which compares a job's time across namespace hosts
 * with the same job's on emulated nodes (both must see the same machine); and the Slurm cluster,
 * whose munged refuses a socket under the per-file TMPDIR the other job files get (mode 0700,
 * test/setup-jobs.ts). The namespace hosts of hosts-faults (a bridge and subnet per set) and the
 * clusters of test/cli/cluster.jobs.test.ts (their own bridges and namespaces, no time compared)
 * run beside others.
 */
const ALONE = [
  'test/runtime/port-flood.jobs.test.ts',
  'test/runtime/big-nodes.jobs.test.ts',
  'test/runtime/hosts.jobs.test.ts',
  'test/runtime/slurm.jobs.test.ts',
];
/** A job test that takes this long hangs. */
const JOB_TIMEOUT_MS = 300_000;
/** TOPOCOLL_TEST_WORKERS overrides: 1 gives the sequential run of old. */
const JOB_WORKERS = Number(process.env.TOPOCOLL_TEST_WORKERS) || Math.max(2, availableParallelism());

export default defineConfig({
  test: {
    // Removes the directories each test file made with tempDir (test/helpers/temp.ts) when it ends.
    setupFiles: ['test/setup.ts'],
    // A unit test that takes a minute hangs.
    testTimeout: 60_000,
    // No retries: a flaky test is a bug to fix, not to hide.
    retry: 0,
    // `vitest run` runs every project: unit first, then the job files two at a time, then the job
    // files that run alone. `npm run test:unit` and `npm run test:jobs` run one kind.
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: [JOBS], maxWorkers: Math.max(2, availableParallelism()) } },
      {
        extends: true,
        test: {
          name: 'jobs',
          // Jobs run beside other files' jobs on 2 cores, on machines up to 3× slower than the
          // one the times were taken on: the bound only tells a hang (runJob gives a job 240 s).
          testTimeout: JOB_TIMEOUT_MS,
          include: [JOBS],
          exclude: ALONE,
          setupFiles: ['test/setup.ts', 'test/setup-jobs.ts'],
          maxWorkers: JOB_WORKERS,
          sequence: { groupOrder: 1 },
        },
      },
      { extends: true, test: { name: 'jobs-alone', include: ALONE, testTimeout: JOB_TIMEOUT_MS, maxWorkers: 1, sequence: { groupOrder: 2 } } },
    ],
  },
});
