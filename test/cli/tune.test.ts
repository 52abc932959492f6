import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { spawnSync } from 'node:child_process';
import { cli, repoRoot } from './helpers.js';

describe('topocoll tune shm', () => {
  it('measures the model on real processes and writes it under shm.model, keeping other keys', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'topocoll-tune-'));
    const file = join(dir, 'mine.yaml');
    writeFileSync(file, '# my settings\nlevels:\n  socket: { enabled: false }\n');
    // The built CLI: tune starts its measurement ranks from dist/.
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'tune', 'shm', '--out', file], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/shm\.model written to .*mine\.yaml/);
    expect(r.stdout).toMatch(/predicted vs measured/);
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(/# my settings/);
    const config = parseConfig(text, file);
    expect(config.levels.socket?.enabled).toBe(false);
    const m = config.shm.model;
    expect(m.copyBytesPerUs).toBeGreaterThan(100);
    expect(m.notifyUs).toBeGreaterThan(0);
    expect(m.fragmentUs).toBeGreaterThanOrEqual(0);
  });

  it('knows only the shm target', async () => {
    expect((await cli(['tune', 'tcp'])).stderr).toMatch(/EINVAL: topocoll tune: unknown target "tcp"/);
  });
});
