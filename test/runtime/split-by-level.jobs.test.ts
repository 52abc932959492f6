import { describe, it } from 'vitest';
import { expectEveryRankOk, jobScript, repoRoot, runJob } from '../helpers/jobs.js';

/**
 * comm.splitByLevel(level) in real jobs: every level the job lists, each sub-communicator checked
 * against the ranks' own node names, nesting and parent order (test/jobs/split-by-level.mjs).
 */
const job = jobScript('split-by-level.mjs');
const fourNodes = `${repoRoot}test/fixtures/network/four-nodes.txt`;

describe('splitByLevel: a communicator per unit of every level', () => {
  for (const [name, args] of [
    ['4 ranks on one node (2 per core)', ['-n', '4']],
    ['5 ranks on 2 emulated nodes (3 + 2)', ['-n', '5', '--nodes', '2']],
    ['8 ranks on 4 emulated nodes under leaf and spine switches', ['-n', '8', '--nodes', '4', '--network', fourNodes]],
  ] as const) {
    it(name, async () => {
      await expectEveryRankOk(runJob([...args, job]), Number(args[1]));
    });
  }
});
