import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './helpers.js';

/** `topocoll bench barrier --explain`: S4's predictions beside real measurements, per algorithm. */
describe('topocoll bench barrier --explain', () => {
  it("runs every barrier algorithm at every level and the model's choice on 2 emulated nodes, each predicted and measured", () => {
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'bench', 'barrier', '--explain', '-n', '4', '--nodes', '2', '--iterations', '200'], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/# levels: node \(largest group 2, shm\), world \(largest group 2, tcp\)/);
    for (const name of ['central-counter', 'combining-tree:2', 'combining-tree:4', 'dissemination']) {
      const row = new RegExp(`^${name} at every level\\s+(\\d+\\.\\d+)\\s+(\\d+\\.\\d+)`, 'm').exec(r.stdout);
      expect(row, name).not.toBeNull();
      expect(Number(row![1])).toBeGreaterThan(0);
      expect(Number(row![2])).toBeGreaterThan(0);
    }
    expect(r.stdout).toMatch(/^the model's choice \(auto\): node \S+, world \S+\s+\d+\.\d+\s+\d+\.\d+/m);
    expect(r.stdout.match(/← fastest measured/g)).toHaveLength(1);
  });

  it('goes with barrier only', () => {
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'bench', 'bcast', '--explain'], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/EINVAL: topocoll bench: --explain goes with "barrier"/);
  });
});
