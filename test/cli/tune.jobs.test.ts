import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { spawnSync } from 'node:child_process';
import { parse } from 'yaml';
import { fitModel, leastSquares, tuneTarget, type Measured } from '../../src/cli/commands/tune.js';
import { combineRate, estimateLink, fitLine, linearityVerdict, median, relativeIqr, summarizeLink } from '../../src/cli/link-fit.js';
import type { LinksRound } from '../../src/cli/links-worker.js';
import { tempDir } from '../helpers/temp.js';
import { cli, repoRoot } from './helpers.js';

describe('topocoll tune', () => {
  it('measures the shm engine and every link on real processes, writes shm.model and model, keeps other keys', () => {
    const dir = tempDir('topocoll-tune-');
    const file = join(dir, 'mine.yaml');
    writeFileSync(file, '# my settings\nlevels:\n  socket: { enabled: false }  # keep me\nbarrier:\n  levels: { node: central-counter }\n');
    // The built CLI: tune starts its measurement ranks from dist/. --quick: one run of each shm
    // job and three rounds of fewer sizes per link.
    const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'tune', '--quick', '--out', file], { encoding: 'utf8', timeout: 150_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/shm\.model written to .*mine\.yaml/);
    expect(r.stdout).toMatch(/predicted vs measured/);
    expect(r.stdout).toMatch(/model written to .*mine\.yaml/);
    for (const link of ['shm', 'tcp', 'oversubscribed.shm', 'oversubscribed.tcp']) {
      expect(r.stdout).toMatch(new RegExp(`# barrier over ${link.replace('.', '\\.')}: the model's prediction per algorithm`));
      expect(r.stdout).toMatch(new RegExp(`    ${link.replace('.', '\\.')} G: (linear G fits|G varies with size)`));
    }
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(/# my settings/);
    expect(text).toMatch(/# keep me/);
    const config = parseConfig(text, file);
    expect(config.levels.socket?.enabled).toBe(false);
    expect(config.barrier.levels.node).toBe('central-counter');
    const doc = parse(text) as { shm: { model: Record<string, number> }; model: Record<string, Record<string, Record<string, number>> | number> };
    // Every field written, not defaulted.
    expect(Object.keys(doc.shm.model).sort()).toEqual(['callUs', 'copyBytesPerUs', 'fragmentUs', 'largeBytes', 'largeCopyBytesPerUs', 'notifyUs']);
    expect(Object.keys(doc.model).sort()).toEqual(['callUs', 'combineBytesPerUs', 'links', 'oversubscribed']);
    for (const set of ['links', 'oversubscribed'] as const) {
      const links = doc.model[set] as Record<string, Record<string, number>>;
      expect(Object.keys(links).sort()).toEqual(['shm', 'tcp']);
      for (const p of Object.values(links)) expect(Object.keys(p).sort()).toEqual(['G', 'Gx', 'L', 'g', 'or', 'os']);
    }
    const m = config.shm.model;
    expect(m.copyBytesPerUs).toBeGreaterThan(100);
    expect(m.notifyUs).toBeGreaterThan(0);
    expect(m.fragmentUs).toBeGreaterThanOrEqual(0);
    const { model } = config;
    expect(model.callUs).toBeGreaterThan(0);
    expect(model.combineBytesPerUs).toBeGreaterThan(0);
    for (const p of [model.links.shm, model.links.tcp, model.oversubscribed.shm, model.oversubscribed.tcp]) {
      // Overheads are real costs; the gap is never below them (link-fit.ts).
      expect(p.os).toBeGreaterThan(0);
      expect(p.or).toBeGreaterThan(0);
      expect(p.g).toBeGreaterThanOrEqual(Math.max(p.os, p.or));
      expect(p.L).toBeGreaterThanOrEqual(0);
      expect(p.G).toBeGreaterThan(0);
      expect(p.Gx).toBeGreaterThan(0);
    }
    // A message through the kernel's TCP costs more to send than one through shared memory.
    expect(model.links.tcp.os).toBeGreaterThan(model.links.shm.os);
    // Two ranks on one core wait for each other to be scheduled: a message takes a switch.
    expect(model.oversubscribed.shm.L).toBeGreaterThan(model.links.shm.L);
  });

  it('runs everything without a target, links for "links" and its old name "barrier", and knows no other', async () => {
    expect(tuneTarget([])).toBe('all');
    expect(tuneTarget(['shm'])).toBe('shm');
    expect(tuneTarget(['links'])).toBe('links');
    expect(tuneTarget(['barrier'])).toBe('links');
    expect(() => tuneTarget(['shm', 'links'])).toThrow(/unknown target "shm links"/);
    expect((await cli(['tune', 'tcp'])).stderr).toMatch(/topocoll tune: EINVAL: unknown target "tcp"/);
  });
});

describe('the link fit', () => {
  it('fits a line by least squares on relative errors, with the residuals', () => {
    const exact = [4096, 65536, 1 << 20].map((x) => ({ x, y: 2 + x * 0.0001 }));
    const fit = fitLine(exact);
    expect(fit.slope).toBeCloseTo(0.0001, 12);
    expect(fit.intercept).toBeCloseTo(2, 9);
    for (const r of fit.residuals) expect(Math.abs(r)).toBeLessThan(1e-9);
    // Residuals are relative to the measured value.
    const points = [
      { x: 1000, y: 1.1 },
      { x: 2000, y: 2 },
      { x: 4000, y: 4 },
    ];
    const noisy = fitLine(points);
    points.forEach((p, i) => expect(noisy.residuals[i]).toBeCloseTo((p.y - (noisy.intercept + noisy.slope * p.x)) / p.y, 12));
    expect(Math.max(...noisy.residuals.map(Math.abs))).toBeGreaterThan(0.005);
  });

  it('says whether one G fits, with the residuals, or gives the g(m) table', () => {
    const linear = [4096, 16384, 65536, 1 << 20].map((x, i) => ({ x, y: (1 + x * 0.0002) * (1 + [0.02, -0.03, 0.01, 0][i]!) }));
    const yes = linearityVerdict(linear, 1);
    expect(yes.fits).toBe(true);
    expect(yes.maxResidual).toBeLessThan(0.05);
    expect(yes.text).toMatch(/^linear G fits \(max residual \d+\.\d%; 4 KiB [+-]\d+\.\d%, 16 KiB .*, 1 MiB [+-]\d+\.\d%\)$/);
    // Cheaper per byte once the message no longer fits a cache: two slopes.
    const knee = [4096, 16384, 65536, 262144, 1 << 20, 4 << 20].map((x) => ({ x, y: 1 + (x <= 262144 ? x * 0.0001 : 26.2 + (x - 262144) * 0.0004) }));
    const no = linearityVerdict(knee, 1);
    expect(no.fits).toBe(false);
    expect(no.maxResidual).toBeGreaterThan(0.1);
    expect(no.text).toMatch(/^G varies with size \(max residual .*\): g\(m\) table, .*: 4 KiB 1\.41 µs 0\.000100 µs\/B, .* 4 MiB .* µs\/B$/);
    expect(linearityVerdict(knee, 1, 10).fits).toBe(true);
  });

  it('takes the combine rate from its cost per byte when it stands out of the noise, else a lower bound', () => {
    // Costs 1e-4 µs/B ± a little: 10000 B/µs.
    expect(combineRate([0.9e-4, 1e-4, 1.1e-4])).toEqual({
      bytesPerUs: 1 / 1e-4,
      resolved: true,
      usPerByte: 1e-4,
      iqrUsPerByte: expect.closeTo(1e-5, 12),
      operatorBytesPerUs: NaN,
    });
    // Resolved: the paired trials' figure, whatever the operator alone does.
    expect(combineRate([0.9e-4, 1e-4, 1.1e-4], 40000).bytesPerUs).toBe(1 / 1e-4);
    // Around zero: the largest cost the noise allows, median + interquartile range.
    const hidden = combineRate([-2e-6, 1e-6, 0, 3e-6, -1e-6]);
    expect(hidden.resolved).toBe(false);
    expect(hidden.bytesPerUs).toBeCloseTo(1 / (0 + (1e-6 - -1e-6)), 3);
    expect(combineRate([-3e-6, -2e-6, -2e-6]).bytesPerUs).toBeNaN();
    expect(combineRate([]).bytesPerUs).toBeNaN();
    // Hidden: the tighter of the noise's bound and the operator timed alone; the operator alone
    // when the noise leaves no positive bound.
    expect(combineRate([-2e-6, 1e-6, 0, 3e-6, -1e-6], 40000).bytesPerUs).toBeCloseTo(1 / 2e-6, 3);
    expect(combineRate([-2e-6, 1e-6, 0, 3e-6, -1e-6], 1e6).bytesPerUs).toBe(1e6);
    expect(combineRate([-3e-6, -2e-6, -2e-6], 40000).bytesPerUs).toBe(40000);
    expect(combineRate([], 40000).bytesPerUs).toBeNaN();
  });

  it('medians, quartiles and the noise of a figure', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(relativeIqr([10, 10, 10])).toBe(0);
    // Quartiles of 8, 9, 10, 11, 12: 9 and 11.
    expect(relativeIqr([12, 8, 10, 9, 11])).toBeCloseTo(0.2, 12);
  });

  it('recovers the LogGP parameters from the raw times of a round, and summarises rounds', () => {
    const link = { L: 0.6, os: 0.3, or: 0.25, g: 0.4, G: 0.0001, Gx: 0.00015 };
    const c = 1.2;
    const k = 64;
    const combine = 1 / 8000;
    const sizes = [4096, 65536, 1 << 20];
    const oneWay = (m: number) => link.os + link.L + link.or + m * link.G;
    const round = (scale: number): LinksRound => ({
      kind: 'links',
      round: 0,
      messages: k,
      callUs: c,
      pingpongUs: c + 2 * oneWay(0),
      sendBurstUs: [c + k * link.os, c + 2 * k * link.os * scale],
      lateBurstUs: [c + 5 + k * link.or, c + 5 + 2 * k * link.or],
      liveBurstUs: [c + oneWay(0) + k * link.g, c + oneWay(0) + 2 * k * link.g],
      pingpong: sizes.map((m) => [m, c + 2 * oneWay(m)]),
      exchange: sizes.map((m) => [m, c + link.os + link.L + link.or + m * link.Gx]),
      combine: [65536, 131072, 262144].map((m) => [m, 0.4 + m * combine]),
    });
    const e = estimateLink(round(1));
    for (const key of ['L', 'os', 'or', 'g'] as const) expect(e[key]).toBeCloseTo(link[key], 9);
    expect(e.G).toBeCloseTo(link.G, 12);
    expect(e.Gx).toBeCloseTo(link.Gx, 12);
    expect(1 / e.combineUsPerByte).toBeCloseTo(8000, 3);
    expect(e.callUs).toBe(c);
    // The gap is never shorter than an overhead.
    expect(estimateLink({ ...round(1), liveBurstUs: [10, 10] }).g).toBeCloseTo(link.os, 9);
    // Noise that hides the bursts' difference: the tighter of the bursts' times beyond the call
    // per message, an upper bound, never 0 (late bursts of K and 2K messages: 7.2 and 7.0 µs).
    const hidden = estimateLink({ ...round(1), lateBurstUs: [c + 6, c + 5.8] });
    expect(hidden.or).toBeCloseTo(5.8 / (2 * k), 12);
    expect(estimateLink({ ...round(1), lateBurstUs: [c / 2, c / 2] }).or).toBeCloseTo(c / 2 / k, 12);
    // Not measured: NaN.
    expect(estimateLink({ ...round(1), combine: [] }).combineUsPerByte).toBeNaN();

    // Rounds whose o_s differs: 0.3 (twice), 0.36, 0.42, 0.48 → median 0.36, quartiles 0.3 and 0.42.
    const s = summarizeLink([round(1), round(1.1), round(1.2), round(1.3), round(1)]);
    expect(s.value.os).toBeCloseTo(0.36, 9);
    expect(s.noise.os).toBeCloseTo((0.42 - 0.3) / 0.36, 9);
    expect(s.noise.or).toBe(0);
    expect(s.combine.resolved).toBe(true);
    expect(s.combine.bytesPerUs).toBeCloseTo(8000, 3);
    expect(s.gVerdict.fits).toBe(true);
    expect(s.gxVerdict.fits).toBe(true);
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
