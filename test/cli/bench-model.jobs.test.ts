import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { pairName, type ModelRow } from '../../src/cli/model-worker.js';
import { repoRoot } from './helpers.js';

const bench = (args: string[]) => spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'bench', ...args], { encoding: 'utf8', timeout: 180_000 });

/** `topocoll bench --model`: every configuration auto chooses among, configured for real, predicted and measured. */
describe('topocoll bench --model', () => {
  it('on 2 emulated nodes runs every candidate as configured, and auto runs one of them', () => {
    const r = bench([
      '--model',
      '--collectives',
      'bcast,allreduce,barrier',
      '-n',
      '4',
      '--nodes',
      '2',
      '--min',
      '4',
      '--max',
      '64',
      '--step',
      '16',
      '--repeat',
      '1',
      '--json',
    ]);
    expect(r.status, r.stderr).toBe(0);
    const rows = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{') && !l.includes('"probe"'))
      .map((l) => JSON.parse(l) as ModelRow & { ranks: number; nodes: number });
    // Where the host had the virtual CPUs, before and after the job.
    expect(r.stdout).toMatch(/^\{"probe":"core-to-core-ns","ranks":4,"nodes":2,"cpus":\[\d+,\d+\],"before":\d+,"after":\d+\}$/m);
    const cells = new Set(rows.map((x) => `${x.collective} ${x.bytes}`));
    expect([...cells].sort()).toEqual(['allreduce 4', 'allreduce 64', 'barrier 0', 'bcast 4', 'bcast 64']);
    for (const x of rows) {
      expect(x.ranks).toBe(4);
      expect(x.nodes).toBe(2);
      expect(x.predictedUs, x.candidate).toBeGreaterThan(0);
      expect(x.measuredUs, x.candidate).toBeGreaterThan(0);
      expect(x.roundsUs).toHaveLength(1);
    }
    for (const cell of cells) {
      const mine = rows.filter((x) => `${x.collective} ${x.bytes}` === cell);
      // What each candidate ran (explain after configure) is what it asked for: configure() took
      // effect. Every group has two members here, where the trees (and the allgathers, and the
      // barriers but dissemination) run the same steps and go by one name.
      const asRun = (candidate: string) =>
        candidate
          .split(', ')
          .map((part) => `${part.split(' ')[0]} ${pairName(part.split(' ')[1]!)}`)
          .join(', ');
      for (const x of mine.filter((y) => y.collective !== 'allreduce' && !y.candidate.startsWith('auto'))) {
        expect(x.runs.startsWith(asRun(x.candidate)), `${x.candidate} ran ${x.runs}`).toBe(true);
      }
      const auto = mine.find((x) => x.candidate === 'auto')!;
      expect(
        mine.filter((x) => x.candidate !== 'auto').map((x) => x.runs),
        cell,
      ).toContain(auto.runs);
    }
    // The two levels' candidates in every combination: bcast 5 × 4 (shm only inside a node), barrier 5 × 5.
    expect(rows.filter((x) => x.collective === 'bcast' && x.bytes === 4 && !x.candidate.startsWith('auto'))).toHaveLength(20);
    expect(rows.filter((x) => x.collective === 'barrier' && x.candidate !== 'auto')).toHaveLength(25);
    const allreduce = rows.find((x) => x.collective === 'allreduce' && x.candidate === 'node binomial/binomial, world flat/flat; reduce-bcast');
    expect(allreduce?.runs).toBe(
      'node (reduce) one message (2), world (reduce) one message (2), node (bcast) one message (2), world (bcast) one message (2); reduce-bcast; segment none',
    );
  });

  it('prints the summary and a line per size on one node', () => {
    const r = bench(['bcast', '--model', '-n', '2', '--min', '4096', '--max', '65536', '--repeat', '1']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^# auto within 10 % of the best in \d\/3 cells \(\d+ %\); worst auto\/best \d+\.\d\d \(bcast \S+ \S+\); summed loss -?\d+ %/m);
    expect(r.stdout).toMatch(/^# a cache line from CPU \d+ to CPU \d+: \d+ ns before, \d+ ns after/m);
    for (const size of ['4 KiB', '16 KiB', '64 KiB']) expect(r.stdout).toMatch(new RegExp(`^\\s+bcast\\s+${size}\\s+\\d+\\s+\\d+\\.\\d\\d`, 'm'));
  });

  it('goes alone; --step only with it', () => {
    expect(bench(['bcast', '--model', '--strategies']).stderr).toMatch(/topocoll bench: EINVAL: --model goes alone/);
    expect(bench(['bcast', '--step', '4']).stderr).toMatch(/topocoll bench: EINVAL: --step goes with --model/);
    expect(bench(['--model', '--step', '1']).stderr).toMatch(/topocoll bench: EINVAL: --step must be 2 or more/);
  });
});
