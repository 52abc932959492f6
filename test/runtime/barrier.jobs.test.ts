import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFile, jobScript, leftoverSegments, repoRoot, runJob } from '../helpers/jobs.js';
import { tempDir } from '../helpers/temp.js';

/**
 * Barriers through real processes (test/jobs/barrier-check.mjs): every level's barrier algorithm
 * — central-counter, combining-tree:K, dissemination, and auto (S4's LogP model) — on one node,
 * on emulated nodes and under two switch levels; in each of 20 rounds a different rank arrives
 * last, and no rank may leave before every rank has entered (checked through a file they share).
 */
const LEVELS = ['core', 'l1', 'l2', 'l3', 'numa', 'socket', 'node', 'switch1', 'switch2', 'world'];
const fourNodes = `${repoRoot}test/fixtures/network/four-nodes.txt`;

const ALGORITHMS: [string, string][] = [
  ['central-counter everywhere', 'central-counter'],
  ['combining-tree:2 everywhere', 'combining-tree:2'],
  ['combining-tree:3 everywhere', 'combining-tree:3'],
  ['dissemination everywhere', 'dissemination'],
];
const PLACEMENTS: [string, string[]][] = [
  ['5 ranks on one node', ['-n', '5']],
  ['6 ranks on 3 emulated nodes', ['-n', '6', '--nodes', '3']],
  ['9 ranks on 4 emulated nodes under leaf and spine switches', ['-n', '9', '--nodes', '4', '--network', fourNodes]],
];

function expectBarrierJob(args: string[], ranks: number): string {
  const shared = join(tempDir('topocoll-barrier-'), 'entered.txt');
  const r = runJob([...args, jobScript('barrier-check.mjs'), shared], 120_000);
  expect(r.stderr).not.toMatch(/Error/);
  expect(r.status).toBe(0);
  const ok = r.lines
    .map((l) => /^rank (\d+) ok 20$/.exec(l))
    .filter((m) => m !== null)
    .map((m) => Number(m![1]));
  expect(ok.sort((a, b) => a - b)).toEqual(Array.from({ length: ranks }, (_, i) => i));
  return r.lines.find((l) => l.startsWith('barriers of rank 0:')) ?? '';
}

describe('barrier algorithms per level in real jobs', () => {
  for (const [name, algorithm] of ALGORITHMS) {
    for (const [where, args] of PLACEMENTS) {
      it(`${name}: ${where}`, async () => {
        const config = configFile(`barrier: { levels: { ${LEVELS.map((l) => `${l}: ${algorithm}`).join(', ')} } }\n`);
        const used = expectBarrierJob([...args, '--config', config], Number(args[1]));
        expect(used).toContain(algorithm);
        expect(await leftoverSegments()).toEqual([]);
      });
    }
  }

  for (const [where, args] of PLACEMENTS) {
    it(`auto (the LogP model's choice per level): ${where}`, async () => {
      expectBarrierJob(args, Number(args[1]));
      expect(await leftoverSegments()).toEqual([]);
    });
  }

  it('mixed: central-counter inside nodes, dissemination between them, combining-tree:4 at the top', async () => {
    const config = configFile('barrier: { levels: { node: central-counter, switch1: dissemination, switch2: combining-tree:4, world: combining-tree:4 } }\n');
    const used = expectBarrierJob(['-n', '9', '--nodes', '4', '--network', fourNodes, '--config', config], 9);
    expect(used).toMatch(/node:central-counter/);
    expect(await leftoverSegments()).toEqual([]);
  });
});
