import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RuntimeConfigInput } from '../../src/config/load.js';
import { casesFile, configFile, expectCaseOk, jobScript, leftoverSegments, repoRoot, runJob, sharedJob } from '../helpers/jobs.js';
import { tempDir } from '../helpers/temp.js';

/**
 * Barriers through real processes (test/jobs/barrier-check.mjs): every level's barrier algorithm
 * — central-counter, combining-tree:K, dissemination, and auto (S4's LogP model) — on one node,
 * on emulated nodes and under two switch levels; in each of 20 rounds a different rank arrives
 * last, and no rank may leave before every rank has entered (checked through a file they share).
 *
 * The algorithms of a placement run one after the other in one job (starting the processes takes
 * most of a job's time): it starts with the first one's configuration file and switches to each
 * of the others with configure(), given every level (configure() merges into the configuration in
 * force); the job reports each, and a test per algorithm checks its report.
 */
const LEVELS = ['core', 'l1', 'l2', 'l3', 'numa', 'socket', 'node', 'switch1', 'switch2', 'world'];
const fourNodes = `${repoRoot}test/fixtures/network/four-nodes.txt`;

interface Case {
  name: string;
  /** Every level's barrier algorithm. */
  levels: Record<string, string>;
  /** What the job must report of rank 0's barriers under it. */
  used?: string | RegExp;
}

const everywhere = (algorithm: string) => Object.fromEntries(LEVELS.map((l) => [l, algorithm]));
const ALGORITHMS: Case[] = [
  ['central-counter everywhere', 'central-counter'],
  ['combining-tree:2 everywhere', 'combining-tree:2'],
  ['combining-tree:3 everywhere', 'combining-tree:3'],
  ['dissemination everywhere', 'dissemination'],
].map(([name, algorithm]) => ({ name: name!, levels: everywhere(algorithm!), used: algorithm! }));
const AUTO: Case = { name: "auto (the LogP model's choice per level)", levels: everywhere('auto') };
const MIXED: Case = {
  name: 'mixed: central-counter inside nodes, dissemination between them, combining-tree:4 at the top',
  levels: { ...everywhere('auto'), node: 'central-counter', switch1: 'dissemination', switch2: 'combining-tree:4', world: 'combining-tree:4' },
  used: /node:central-counter/,
};

const PLACEMENTS: [string, string[], Case[]][] = [
  ['5 ranks on one node', ['-n', '5'], [...ALGORITHMS, AUTO]],
  ['6 ranks on 3 emulated nodes', ['-n', '6', '--nodes', '3'], [...ALGORITHMS, AUTO]],
  ['9 ranks on 4 emulated nodes under leaf and spine switches', ['-n', '9', '--nodes', '4', '--network', fourNodes], [...ALGORITHMS, AUTO, MIXED]],
];

const settings = (c: Case): RuntimeConfigInput => ({ barrier: { levels: c.levels } });

describe('barrier algorithms per level in real jobs', () => {
  for (const [where, args, cases] of PLACEMENTS) {
    const ranks = Number(args[1]);
    const job = sharedJob(() => {
      const shared = join(tempDir('topocoll-barrier-'), 'entered.txt');
      const file = casesFile(cases.map((c, k) => (k === 0 ? {} : { config: settings(c) })));
      return runJob([...args, '--config', configFile(JSON.stringify(settings(cases[0]!))), jobScript('barrier-check.mjs'), shared, `--cases=${file}`], 120_000);
    });
    cases.forEach((c, k) => {
      it(`${c.name === MIXED.name ? c.name : `${c.name}: ${where}`}`, async () => {
        expectCaseOk(job(), k, ranks);
        const used = job().lines.find((l) => l.startsWith(`barriers of rank 0 case ${k}:`)) ?? '';
        if (c.used !== undefined) expect(used).toMatch(c.used);
        expect(await leftoverSegments()).toEqual([]);
      });
    });
    it(`every algorithm in one job: ${where}`, () => {
      const r = job();
      expect(r.stderr).not.toMatch(/Error/);
      expect(r.status).toBe(0);
      const ok = r.lines
        .map((l) => new RegExp(`^rank (\\d+) ok ${20 * cases.length}$`).exec(l))
        .filter((m) => m !== null)
        .map((m) => Number(m![1]));
      expect(ok.sort((a, b) => a - b)).toEqual(Array.from({ length: ranks }, (_, i) => i));
    });
  }
});
