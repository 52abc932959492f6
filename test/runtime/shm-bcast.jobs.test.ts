import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { jobScript, leftoverSegments, runJob } from '../helpers/jobs.js';
import { tempDir } from '../helpers/temp.js';

/**
 * The S0 engine through real processes: every notification tree, one and two buffer sets, a
 * small queue (16 slots of 4 KiB) so every regime of S0 is reached with small messages.
 */
const FRAGMENT = 4096;
const SLOTS = 16;
const dir = tempDir('topocoll-s0-');

function config(tree: string, sets: number, membarrier: boolean): string {
  const file = join(dir, `${tree.replace(':', '-')}-${sets}-${membarrier}.yaml`);
  writeFileSync(
    file,
    `shm:\n  membarrier: ${membarrier}\n  bcast:\n    tree: ${tree}\n    sets: ${sets}\n    queueBytes: ${FRAGMENT * SLOTS}\n    fragmentBytes: ${FRAGMENT}\n`,
  );
  return file;
}

function run(ranks: number, tree: string, sets: number, membarrier = true) {
  const r = runJob(['-n', String(ranks), '--config', config(tree, sets, membarrier), jobScript('shm-bcast.mjs'), String(FRAGMENT), String(SLOTS)]);
  const ok = r.lines.filter((l) => /^rank \d+ ok \d+$/.test(l)).length;
  return { ...r, ok };
}

describe('S0 shared-memory bcast', () => {
  for (const tree of ['flat', 'chain', 'kary:2', 'knomial:2', 'knomial:3']) {
    for (const sets of [1, 2]) {
      it(`${tree} tree, ${sets} set${sets > 1 ? 's' : ''}: 5 ranks, every root and size regime`, () => {
        const r = run(5, tree, sets);
        expect(r.stderr).not.toMatch(/Error/);
        expect(r.status).toBe(0);
        expect(r.ok).toBe(5);
      });
    }
  }

  // Oversubscribed ranks sleep on futexes all the time: both wake-up protocols (wait.h) are
  // exercised — membarrier-paid fences on the sleeper's side, and fences on both sides.
  for (const membarrier of [true, false]) {
    it(`8 ranks on 2 cores (4 per core: groups at two levels inside the node), membarrier ${membarrier ? 'on' : 'off'}`, async () => {
      const r = run(8, 'knomial:2', 2, membarrier);
      expect(r.status).toBe(0);
      expect(r.ok).toBe(8);
      expect(await leftoverSegments()).toEqual([]);
    });
  }

  // The default configuration picks larger fragments for larger messages: a call's fragments
  // start where the previous call's smaller ones ended, and must not run into a set the
  // readers have not released. 1200 calls of 1 byte … 3 MB (fragments of 4 KiB … 64 KiB).
  for (const ranks of [3, 4]) {
    it(`${ranks} ranks, the default configuration: a random mix of sizes, so of fragment sizes, every byte checked`, () => {
      const r = runJob(['-n', String(ranks), jobScript('shm-bcast-mixed.mjs'), '1200', '3000000']);
      expect(r.stderr).not.toMatch(/Error/);
      expect(r.status).toBe(0);
      expect(r.lines.filter((l) => /^rank \d+ ok \d+$/.test(l))).toHaveLength(ranks);
    });
  }

  // 5 pages in 3 or 4 sets: whole pages per set, the last set takes the rest (a fifth "set"
  // would have its counter past the region's kMaxSets counters).
  for (const sets of [3, 4]) {
    it(`${sets} sets in a queue of 5 pages, fragments chosen per size: 4 ranks`, () => {
      const file = join(dir, `five-pages-${sets}.yaml`);
      writeFileSync(file, `shm:\n  bcast:\n    tree: knomial:2\n    sets: ${sets}\n    queueBytes: ${5 * FRAGMENT}\n`);
      const r = runJob(['-n', '4', '--config', file, jobScript('shm-bcast.mjs'), String(FRAGMENT), '5']);
      expect(r.stderr).not.toMatch(/Error/);
      expect(r.status).toBe(0);
      expect(r.lines.filter((l) => /^rank \d+ ok \d+$/.test(l))).toHaveLength(4);
    });
  }

  it('with the default model-chosen parameters, next to TCP between emulated nodes', () => {
    const r = runJob(['-n', '6', '--nodes', '2', jobScript('shm-bcast.mjs'), '8192', '64']);
    expect(r.status).toBe(0);
    expect(r.lines.filter((l) => /ok/.test(l))).toHaveLength(6);
  });
});
