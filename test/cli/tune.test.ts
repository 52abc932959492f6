import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { spawnSync } from 'node:child_process';
import { fitModel, leastSquares, type Measured } from '../../src/cli/commands/tune.js';
import { tempDir } from '../helpers/temp.js';
import { cli, repoRoot } from './helpers.js';

describe('topocoll tune shm', () => {
  it('measures the model on real processes and writes it under shm.model, keeping other keys', async () => {
    const dir = tempDir('topocoll-tune-');
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

  it('knows only the shm and barrier targets', async () => {
    expect((await cli(['tune', 'tcp'])).stderr).toMatch(/EINVAL: topocoll tune: unknown target "tcp"/);
  });
});

describe('topocoll tune barrier', () => {
  it("measures LogP over shared memory and TCP on real processes, writes barrier.logp, keeps other keys, and prints the model's choices", () => {
    const file = join(tempDir('topocoll-tune-'), 'mine.yaml');
    writeFileSync(file, '# my settings\nbarrier:\n  levels: { node: central-counter }\n');
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'tune', 'barrier', '--out', file], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/barrier\.logp written to .*mine\.yaml/);
    expect(r.stdout).toMatch(/# barrier over shm: the model's prediction per algorithm/);
    expect(r.stdout).toMatch(/# barrier over tcp: the model's prediction per algorithm/);
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(/# my settings/);
    const config = parseConfig(text, file);
    expect(config.barrier.levels.node).toBe('central-counter');
    for (const p of [config.model.links.shm, config.model.links.tcp]) {
      // Overheads are real costs; the gap is never below them (logp-worker.ts).
      expect(p.os).toBeGreaterThan(0);
      expect(p.or).toBeGreaterThan(0);
      expect(p.g).toBeGreaterThanOrEqual(Math.max(p.os, p.or));
      expect(p.L).toBeGreaterThanOrEqual(0);
    }
    // A message through the kernel's TCP costs more to send than one through shared memory.
    expect(config.model.links.tcp.os).toBeGreaterThan(config.model.links.shm.os);
  });
});

describe('the model fit', () => {
  it('recovers the per-byte and per-fragment costs of exact points', () => {
    const mb = 1 << 20;
    const points = [4096, 16384, 65536].map((f) => ({ x1: mb, x2: mb / f, y: mb / 20000 + (mb / f) * 0.07 }));
    const fit = leastSquares(points);
    expect(1 / fit.perByte).toBeCloseTo(20000, 3);
    expect(fit.perStage).toBeCloseTo(0.07, 6);
  });

  it('never fits a negative per-stage cost: it drops to zero and refits the rate alone', () => {
    const fit = leastSquares([
      { x1: 100, x2: 10, y: 0.5 },
      { x1: 200, x2: 1, y: 2 },
    ]);
    expect(fit.perStage).toBe(0);
    expect(fit.perByte).toBeCloseTo((100 * 0.5 + 200 * 2) / (100 * 100 + 200 * 200), 12);
  });

  it('fits streamed broadcasts and applies the memory-bound rate from a quarter of the last-level cache', () => {
    const mb = 1 << 20;
    const measured = (bcast: [number, number][], streamed: [number, number][]): Measured => ({
      copy: 40000,
      largeCopy: 20000,
      pingpong: 0.5,
      stream: 0.2,
      bcast: new Map(bcast),
      streamed: new Map(streamed),
    });
    // Streamed times of a pipeline with c = 25000 B/µs and 0.05 µs per fragment, call cost 0.2.
    const t = (m: number, f: number) => 0.2 + m / 25000 + (m / f) * 0.05;
    const small = measured([[8, 0.5]], [[mb, t(mb, 4096)]]);
    const large = measured(
      [],
      [
        [mb, t(mb, 65536)],
        [16 * mb, 0.2 + (16 * mb) / 12000 + 256 * 0.05],
      ],
    );
    const oneMiB = new Map([4096, 16384, 65536].map((f) => [f, t(mb, f)]));
    const m = fitModel(small, large, oneMiB, 32 * mb);
    expect(m.notifyUs).toBeCloseTo(0.3, 6);
    expect(m.callUs).toBeCloseTo(0.2, 6);
    expect(m.copyBytesPerUs).toBeCloseTo(25000, -2);
    expect(m.fragmentUs).toBeCloseTo(0.05, 3);
    expect(m.largeCopyBytesPerUs).toBeCloseTo(12000, -2);
    expect(m.largeBytes).toBe(8 * mb);
    expect(fitModel(small, large, oneMiB, undefined).largeBytes).toBe(4 * mb);
  });
});
