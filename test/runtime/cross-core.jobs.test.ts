import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { combineRate, crossCoreLatencyNs, crossCoreRates } from '../../src/native.js';
import { readProcessAffinity } from '../../src/topology/affinity.js';
import { repoRoot } from '../helpers/jobs.js';
import { thrown } from '../helpers/thrown.js';

/** The cross-core probes behind `topocoll tune shm` and the latency line of `topocoll bench`. */
const cpus = readProcessAffinity();
const [a, b] = [cpus[0]!, cpus[1] ?? cpus[0]!];

describe('cross-core probes', () => {
  it('measure a positive, finite time per cache line and copy rates between two CPUs', () => {
    const ns = crossCoreLatencyNs(a, b, 2000);
    expect(Number.isFinite(ns)).toBe(true);
    expect(ns).toBeGreaterThan(0);
    const rates = crossCoreRates(64 * 1024, 4, a, b);
    expect(rates.writeShared).toBeGreaterThan(0);
    expect(rates.readRemote).toBeGreaterThan(0);
  });

  it("time the built-in float64 sum alone in bytes per µs (behind tune's combine-rate bound)", () => {
    const rate = combineRate(1 << 20, 4);
    expect(Number.isFinite(rate)).toBe(true);
    // Bytes per µs, not per second or per ns: between 1 MB/s and 10 TB/s.
    expect(rate).toBeGreaterThan(1);
    expect(rate).toBeLessThan(1e7);
    expect(combineRate(0, 4)).toBe(0);
  });

  it('refuse a CPU this process cannot run on with EINVAL', () => {
    expect(thrown(() => crossCoreLatencyNs(a, 100_000, 10), 'EINVAL').message).toMatch(/CPUs \d+ and 100000/);
  });

  it('topocoll bench reports the probe taken before and after its run', () => {
    const r = spawnSync(
      process.execPath,
      [`${repoRoot}dist/cli/main.js`, 'bench', '-n', '2', '--collectives', 'barrier', '--modes', 'sync', '--iterations', '200', '--no-mpi', '--json'],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(r.status).toBe(0);
    const probe = r.stdout
      .split('\n')
      .filter((l) => l.includes('"probe"'))
      .map((l) => JSON.parse(l) as { probe: string; cpus: number[]; before: number; 'after topocoll': number });
    if (cpus.length < 2) {
      expect(probe).toEqual([]);
      return;
    }
    expect(probe).toHaveLength(1);
    expect(probe[0]!.probe).toBe('core-to-core-ns');
    expect(probe[0]!.cpus).toEqual([a, b]);
    expect(probe[0]!.before).toBeGreaterThan(0);
    expect(probe[0]!['after topocoll']).toBeGreaterThan(0);
  });
});
