import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { jobScript, repoRoot, runJob } from '../helpers/jobs.js';
import { tempDir } from '../helpers/temp.js';

/**
 * Every process count p = 1 … 9 on every number of emulated nodes 1 … min(p, 4), with the
 * default (auto) configuration, and on 3 and 4 nodes also under a network file with two switch
 * levels (leaf and spine; on 3 nodes the leaves are uneven). Each case runs
 * test/jobs/strategies.mjs with a short size list — bcast, reduce and allreduce at every root up
 * to 1000 elements, 16 411 elements (above the 64 KiB large threshold in Int32 and Float64),
 * IN_PLACE, float sums bitwise equal on every rank, non-commutative user operators, and every
 * datatype × every operator valid for it at 17 elements — checked in every rank against a
 * reference computed from every rank's input. Starting the processes takes most of each case's
 * time (about 2 s at p = 9 on 2 cores), so the cases are kept to this grid and size list.
 */
const JOB_ARGS = ['0', '1', '17', '1000', '16411', '--types=17'];

const dir = tempDir('topocoll-sweep-');
/** Two switch levels: the shared 4-node fixture (2 + 2 nodes per leaf) and 3 nodes as 2 + 1. */
const NETWORKS: Record<number, string> = {
  3: join(dir, 'three-nodes.txt'),
  4: `${repoRoot}test/fixtures/network/four-nodes.txt`,
};
writeFileSync(NETWORKS[3]!, '# node    leaf   spine\nnode[0-1]  leafA  spine\nnode2      leafB  spine\n');

function expectAllRanksOk(r: ReturnType<typeof runJob>, ranks: number): void {
  expect(r.stderr).not.toMatch(/Error/);
  expect(r.status).toBe(0);
  const ok = r.lines
    .map((l) => /^rank (\d+) ok \d+$/.exec(l))
    .filter((m) => m !== null)
    .map((m) => Number(m![1]));
  expect(ok.sort((a, b) => a - b)).toEqual(Array.from({ length: ranks }, (_, i) => i));
}

/** The levels rank 0 was grouped at, as the job printed them (`name:size …`). */
const levelsOfRank0 = (r: ReturnType<typeof runJob>) => r.lines.find((l) => l.startsWith('levels of rank 0:')) ?? '(none printed)';

describe('every process count on every number of emulated nodes, with the defaults', () => {
  for (let p = 1; p <= 9; p++) {
    for (let nodes = 1; nodes <= Math.min(p, 4); nodes++) {
      it(`${p} rank${p > 1 ? 's' : ''} on ${nodes} node${nodes > 1 ? 's' : ''}`, () => {
        const r = runJob(['-n', String(p), '--nodes', String(nodes), jobScript('strategies.mjs'), ...JOB_ARGS]);
        expectAllRanksOk(r, p);
        // The nodes really were separate: their leaders met in the world group.
        if (nodes > 1) expect(levelsOfRank0(r)).toMatch(new RegExp(`\\bworld:${nodes}$`));
        else expect(levelsOfRank0(r)).not.toMatch(/world/);
      });
      if (NETWORKS[nodes] !== undefined) {
        it(`${p} ranks on ${nodes} nodes under leaf and spine switches`, () => {
          const r = runJob(['-n', String(p), '--nodes', String(nodes), '--network', NETWORKS[nodes]!, jobScript('strategies.mjs'), ...JOB_ARGS]);
          expectAllRanksOk(r, p);
          // Node 0's leader sits in a leaf group (with node 1's) and in the spine group.
          expect(levelsOfRank0(r)).toMatch(/\bswitch1:2 switch2:2$/);
        });
      }
    }
  }
});
