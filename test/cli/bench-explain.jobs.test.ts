import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './helpers.js';

/** `topocoll bench barrier --explain`: the Selector's predictions (S4's formulas) beside real measurements, per configuration. */
describe('topocoll bench barrier --explain', () => {
  it("runs every barrier algorithm of the levels and auto on 4 emulated nodes, each with the Selector's prediction and measured", () => {
    // One rank per node: the world group of 4, where the candidates run differently.
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'bench', 'barrier', '--explain', '-n', '4', '--nodes', '4'], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^# levels: world \(largest group 4, tcp.*\)$/m);
    expect(r.stdout).toMatch(/^# LogP \(µs\): tcp[^;]* L [\d.]+ o_s [\d.]+ o_r [\d.]+ g [\d.]+$/m);
    const rows = [...r.stdout.matchAll(/^world (\S+)( {2}\(auto\))?\s+(\d+\.\d+)\s+(\d+\.\d+)/gm)];
    expect(rows.map((m) => m[1]).sort()).toEqual(['central-counter', 'combining-tree:2', 'combining-tree:3', 'combining-tree:4', 'dissemination']);
    for (const m of rows) {
      expect(Number(m[3])).toBeGreaterThan(0);
      expect(Number(m[4])).toBeGreaterThan(0);
    }
    // Exactly one is auto's, and its prediction is the least (auto is the argmin).
    const auto = rows.filter((m) => m[2] !== undefined);
    expect(auto).toHaveLength(1);
    expect(Number(auto[0]![3])).toBe(Math.min(...rows.map((m) => Number(m[3]))));
    expect(r.stdout.match(/← fastest measured/g)).toHaveLength(1);
    expect(r.stdout).toMatch(/^# no Open MPI baseline with emulated nodes$/m);
  });

  it('goes with barrier only', () => {
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'bench', 'bcast', '--explain'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/topocoll bench: EINVAL: --explain goes with "barrier"/);
  });
});
