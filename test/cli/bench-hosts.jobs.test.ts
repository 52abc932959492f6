import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseBenchJson } from '../../src/cli/bench-report.js';
import { tempDir } from '../helpers/temp.js';
import { repoRoot } from './helpers.js';

/**
 * `topocoll bench --hosts`: topocoll (auto and flat) and an MPI library across an emulated
 * cluster in one run, the link measured beside them, and nothing of the cluster left after.
 * Figures are the bench's business; here: every row is there, and the chart.
 */
const stateDir = `/run/topocoll-bench-test-${process.pid}`;
const rootOnly = process.getuid?.() !== 0 ? 'not root' : '';
const mustRun = process.env.TOPOCOLL_REQUIRE_HOSTS === '1';

describe('topocoll bench --hosts', () => {
  it('2 leaves × 1 host × 1 rank: auto, flat and Open MPI rows, the link, a chart, and nothing left', (ctx) => {
    if (rootOnly !== '') {
      if (mustRun) throw new Error(`bench --hosts needs root here (TOPOCOLL_REQUIRE_HOSTS=1)`);
      ctx.skip(rootOnly);
    }
    const dir = tempDir('topocoll-bench-hosts-');
    // A configuration of the user's: the ranks run with it (and the cluster's network).
    const config = join(dir, 'ranks.yaml');
    writeFileSync(config, 'allreduce:\n  top: recursive-doubling\n');
    const args = [
      'allreduce',
      '--hosts',
      '2x1x1',
      '--min',
      '8',
      '--max',
      '16',
      '--iterations',
      '50',
      '--peers',
      'ompi',
      '--json',
      '--report',
      dir,
      '--config',
      config,
    ];
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'bench', ...args], {
      encoding: 'utf8',
      timeout: 240_000,
      env: { ...process.env, TOPOCOLL_CLUSTER_DIR: stateDir },
    });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    const rows = parseBenchJson(r.stdout, 'stdout');
    for (const mode of ['sync', 'sync flat', 'ompi']) {
      const mine = rows.filter((x) => x.collective === 'allreduce' && x.mode === mode);
      expect([mode, mine.map((x) => x.bytes)]).toEqual([mode, [8, 16]]);
      for (const x of mine) {
        expect(x.avgUs).toBeGreaterThan(0);
        expect(x.hosts).toBe('2×1×1');
      }
    }
    // iperf3 is optional for the bench; CI installs it.
    if (spawnSync('sh', ['-c', 'command -v iperf3']).status === 0) expect(r.stdout).toMatch(/"probe":"link-bytes-per-second","hosts":"2×1×1","value":\d/);
    expect(readdirSync(dir).sort()).toEqual(['allreduce-p2-hosts2x1x1.svg', 'ranks.yaml']);
    const svg = readFileSync(join(dir, 'allreduce-p2-hosts2x1x1.svg'), 'utf8');
    for (const label of ['topocoll sync', 'topocoll flat (no switch levels)', 'Open MPI']) expect(svg).toContain(label);
    // The cluster went with the run: no holder, no state file.
    expect(spawnSync('pgrep', ['-f', 'topocoll-bench-hosts-'], { encoding: 'utf8' }).stdout).toBe('');
    expect(readdirSync(stateDir)).toEqual([]);
  });

  it('--config with a bad key: ECONFIG naming the file and line, before any cluster is made', () => {
    const dir = tempDir('topocoll-bench-hosts-config-');
    const config = join(dir, 'bad.yaml');
    writeFileSync(config, 'allreduce:\n  top: sideways\n');
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'bench', 'allreduce', '--hosts', '2x1x1', '--config', config], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, TOPOCOLL_CLUSTER_DIR: stateDir },
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/ECONFIG/);
    expect(r.stderr).toContain(`${config}:2`);
    expect(spawnSync('pgrep', ['-f', 'topocoll-bench-hosts-'], { encoding: 'utf8' }).stdout).toBe('');
  });
});
