import { describe, expect, it } from 'vitest';
import { configFile, jobScript, leftoverSegments, okRanks, repoRoot, runJob } from '../helpers/jobs.js';

/**
 * Real jobs: `topocoll run` starts real processes that run every collective and check each
 * result against a reference they compute from the inputs (test/jobs/collectives.mjs).
 */
const job = jobScript('collectives.mjs');
const fourNodes = `${repoRoot}test/fixtures/network/four-nodes.txt`;
// By default every rank combines small one-node allreduces (and waits for every block of
// small one-node allgathers) only while each has a core (p = 2 here); these make it so with
// more ranks than cores, and the other way round.
const everyRank = configFile('allreduce: { shm: every-rank }\nallgather: { shm: every-rank }\n');
const lastArrival = configFile('allreduce: { shm: last-arrival }\nallgather: { shm: last-arrival }\n');
// The wait policies other than the default spin (config/default.yaml, waits): every wait straight
// to sleep (on shared memory and on TCP), and waits that sleep once they see their core taken.
const sleeping = configFile('waits: { mode: sleep }\n');
const sightings = configFile('waits: { mode: auto }\nallreduce: { shm: every-rank }\nallgather: { shm: every-rank }\n');

const configurations: [string, string[]][] = [
  ['1 rank', ['-n', '1', job, '--big']],
  ['2 ranks, up to 64 MiB', ['-n', '2', job, '--big', '--huge']],
  ['3 ranks', ['-n', '3', job]],
  ['4 ranks on 2 emulated nodes, up to 64 MiB, a late reader', ['-n', '4', '--nodes', '2', job, '--big', '--huge', '--late', '32']],
  ['7 ranks on 3 emulated nodes', ['-n', '7', '--nodes', '3', job]],
  ['8 ranks on one node (4 per core)', ['-n', '8', job, '--big']],
  ['2 ranks, the last to arrive combining small allreduces', ['-n', '2', '--config', lastArrival, job]],
  ['5 ranks on one node, every rank combining small allreduces', ['-n', '5', '--config', everyRank, job]],
  ['8 ranks on one node, every rank combining small allreduces, waits that sleep once their core is taken', ['-n', '8', '--config', sightings, job, '--quick']],
  ['4 ranks on 2 emulated nodes, every wait sleeping at once', ['-n', '4', '--nodes', '2', '--config', sleeping, job, '--quick']],
  ['8 ranks on 4 emulated nodes under two leaf switches', ['-n', '8', '--nodes', '4', '--network', fourNodes, job]],
  [
    '4 unbound ranks, one per emulated node, up to 1 MiB (exchanges between them unsegmented)',
    ['-n', '4', '--nodes', '4', '--bind', 'none', job, '--quick', '--big'],
  ],
];

describe('collectives across real processes', () => {
  for (const [name, args] of configurations) {
    it(name, async () => {
      const n = Number(args[1]);
      const r = runJob(args);
      expect(r.stderr).not.toMatch(/Error/);
      expect(r.status).toBe(0);
      expect(okRanks(r.lines)).toEqual(Array.from({ length: n }, (_, i) => i));
      expect(await leftoverSegments()).toEqual([]);
    });
  }
});
