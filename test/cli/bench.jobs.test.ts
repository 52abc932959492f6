import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { allgatherAlcd } from '../../src/algorithms/group-allgather.js';
import { parseConfig } from '../../src/config/load.js';
import { ALLGATHER_ALGORITHMS, formatAllgatherAlcd, formatStrategies, offLevels, STRATEGIES } from '../../src/cli/strategy-sweep.js';
import type { BenchRow, BenchSettings } from '../../src/cli/bench-worker.js';
import { cli, repoRoot } from './helpers.js';

/** `topocoll bench allgather`: the worker's rows, the memcpy of the whole result, the strategies' configurations and ALCD. */
describe('topocoll bench allgather', () => {
  it('measures sync and async allgather per rank size, with one memcpy of the whole result beside it', () => {
    const r = spawnSync(
      process.execPath,
      [`${repoRoot}dist/cli/main.js`, 'bench', 'allgather', '-n', '2', '--min', '8', '--max', '64', '--iterations', '50', '--no-mpi', '--json'],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(r.status, r.stderr).toBe(0);
    const rows = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{') && !l.includes('"probe"'))
      .map((l) => JSON.parse(l) as BenchRow);
    for (const mode of ['sync', 'async']) {
      const mine = rows.filter((x) => x.collective === 'allgather' && x.mode === mode);
      expect(mine.map((x) => x.bytes)).toEqual([8, 16, 32, 64]);
      for (const x of mine) expect(x.avgUs).toBeGreaterThan(0);
    }
    // One copy of every message size and of every result (2 ranks × bytes).
    expect(rows.filter((x) => x.collective === 'memcpy').map((x) => x.bytes)).toEqual([8, 16, 32, 64, 128]);
  });

  it('the table puts the memcpy of the whole result beside each per-rank size', () => {
    const r = spawnSync(
      process.execPath,
      [`${repoRoot}dist/cli/main.js`, 'bench', 'allgather', '-n', '2', '--min', '1024', '--max', '2048', '--modes', 'sync', '--iterations', '50', '--no-mpi'],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/# allgather, 2 ranks: .*memcpy of the whole result \(2 × bytes\)/);
    expect(r.stdout).toMatch(/bytes\/rank\s+topocoll sync\s+memcpy result\s+sync \/ memcpy/);
    expect(r.stdout).toMatch(/^\s+1024\s+\S+\s+\S+\s+\S+$/m);
  });

  it('--strategies names allgather, reduce-scatter and alltoall, and refuses barrier and scan (nothing to compare)', async () => {
    const refused = await cli(['bench', 'barrier', '--strategies', '--no-mpi']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--strategies goes with bcast, reduce, allreduce, allgather, reduce-scatter, alltoall/);
    const scan = await cli(['bench', 'scan', '--strategies', '--no-mpi']);
    expect(scan.code).toBe(2);
    expect(scan.stderr).toMatch(/scan runs one algorithm per level: there is nothing to compare/);
    const help = await cli(['bench', '--help']);
    expect(help.stdout).toMatch(/bcast\|reduce\|allreduce\|allgather\|reduce-scatter\|alltoall --strategies/);
  });

  it('--off switches off one level or a comma list of them', () => {
    expect(offLevels(undefined)).toBe('');
    expect(parseConfig(offLevels('l2'), 'off.yaml').levels.l2?.enabled).toBe(false);
    const three = parseConfig(offLevels('core, l1,l2'), 'off.yaml').levels;
    expect([three.core?.enabled, three.l1?.enabled, three.l2?.enabled, three.node?.enabled ?? true]).toEqual([false, false, false, true]);
  });

  it("reduce-scatter's and alltoall's strategies force their one choice each (reduceScatter.top, alltoall.algorithm), the reference first, auto last", () => {
    for (const [collective, key, names] of [
      ['reduce-scatter', (c: ReturnType<typeof parseConfig>) => c.reduceScatter.top, ['ring', 'recursive-halving', 'auto']],
      ['alltoall', (c: ReturnType<typeof parseConfig>) => c.alltoall.algorithm, ['pairwise', 'bruck', 'auto']],
    ] as const) {
      expect(STRATEGIES[collective].map((s) => s.name)).toEqual(names);
      for (const s of STRATEGIES[collective]) expect(key(parseConfig(s.yaml, `${s.name}.yaml`)), `${collective} ${s.name}`).toBe(s.name);
    }
  });

  it('every allgather strategy sets that algorithm at every level, the first (the reference) being the ring', () => {
    const names = STRATEGIES.allgather.map((s) => s.name);
    expect(names).toEqual(['ring', 'recursive-doubling', 'bruck', 'neighbor-exchange', 'auto']);
    for (const s of STRATEGIES.allgather) {
      const config = parseConfig(s.yaml, `${s.name}.yaml`);
      const levels = Object.values(config.allgather.levels);
      if (s.name === 'auto') expect(levels.every((l) => l === 'auto')).toBe(true);
      else {
        expect(levels.length).toBeGreaterThanOrEqual(7);
        expect(new Set(levels)).toEqual(new Set([s.name]));
      }
    }
  });

  it('the strategies table is relative to the ring, with Open MPI beside auto', () => {
    const settings: BenchSettings = {
      collectives: ['allgather'],
      modes: ['sync'],
      minBytes: 8,
      maxBytes: 16,
      itersSmall: 1,
      itersLarge: 1,
      largeBytes: 8192,
      repeats: 1,
    };
    const row = (mode: string, bytes: number, avgUs: number): BenchRow => ({
      collective: 'allgather',
      mode,
      bytes,
      avgUs,
      minUs: avgUs,
      maxUs: avgUs,
      iterations: 1,
    });
    const rows = [8, 16].flatMap((b) => [
      row('ring', b, 10),
      row('recursive-doubling', b, 5),
      row('bruck', b, 20),
      row('neighbor-exchange', b, 10),
      row('auto', b, 4),
    ]);
    const text = formatStrategies('allgather', rows, [row('ompi', 8, 8), row('ompi', 16, 2)], 'allgather, 4 ranks', settings);
    expect(text).toMatch(/bytes\s+ring µs\s+recursive-doubling\s+bruck\s+neighbor-exchange\s+auto\s+Open MPI µs\s+auto \/ OMPI/);
    expect(text).toMatch(/^\s+8\s+10\.00\s+0\.50\s+2\.00\s+1\.00\s+0\.40\s+8\.00\s+0\.50$/m);
    expect(text).toMatch(/^\s+16\s+10\.00\s+0\.50\s+2\.00\s+1\.00\s+0\.40\s+2\.00\s+2\.00$/m);
  });

  it("prints every algorithm's ALCD for the job's group sizes and for one group of all ranks", () => {
    const text = formatAllgatherAlcd(
      [
        { level: 'l2', sizes: [2] },
        { level: 'node', sizes: [2, 3] },
      ],
      8,
    );
    const line = (n: number) => text.split('\n').find((l) => new RegExp(`^\\s+${n}\\s`).test(l));
    expect(line(2)).toMatch(/l2,node/);
    expect(line(3)).toMatch(/\bnode\b/);
    expect(line(8)).toMatch(/all ranks as one group/);
    for (const n of [2, 3, 8]) {
      const cells = line(n)!.trim().split(/\s+/).slice(-ALLGATHER_ALGORITHMS.length);
      expect(cells).toEqual(ALLGATHER_ALGORITHMS.map((a) => allgatherAlcd(a, n).toFixed(2)));
    }
  });
});

describe('topocoll bench gather, scatter, reduce-scatter, alltoall, scan and exscan', () => {
  it('measures sync and async gather, scatter, reduce-scatter, alltoall, scan and exscan per block size, with one memcpy of all the blocks beside them', () => {
    const r = spawnSync(
      process.execPath,
      [
        `${repoRoot}dist/cli/main.js`,
        'bench',
        '-n',
        '2',
        '--collectives',
        'gather,scatter,reduce-scatter,alltoall,scan,exscan',
        '--min',
        '8',
        '--max',
        '32',
        '--iterations',
        '50',
        '--no-mpi',
        '--json',
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    const rows = r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{') && !l.includes('"probe"'))
      .map((l) => JSON.parse(l) as BenchRow);
    for (const collective of ['gather', 'scatter', 'reduce-scatter', 'alltoall', 'scan', 'exscan'])
      for (const mode of ['sync', 'async']) {
        const mine = rows.filter((x) => x.collective === collective && x.mode === mode);
        expect(mine.map((x) => x.bytes)).toEqual([8, 16, 32]);
        for (const x of mine) expect(x.avgUs).toBeGreaterThan(0);
      }
    expect(rows.filter((x) => x.collective === 'memcpy').map((x) => x.bytes)).toEqual([8, 16, 32, 64]);
  });
});

/**
 * `topocoll bench --peers`: each MPI library's own collectives beside topocoll's from one run
 * (src/cli/mpi-peers.ts), a column each and topocoll against the fastest of them.
 */
const haveMpich = spawnSync('sh', ['-c', 'command -v mpiexec.mpich && command -v mpicc.mpich'], { stdio: 'ignore' }).status === 0;
const haveOmpi = spawnSync('sh', ['-c', 'command -v mpirun'], { stdio: 'ignore' }).status === 0;
const peersSkip = process.env.TOPOCOLL_REQUIRE_MPI !== '1' && !(haveMpich && haveOmpi);
if (peersSkip) console.warn('bench.jobs.test.ts: SKIPPING --peers: Open MPI or MPICH (mpiexec.mpich, mpicc.mpich) is missing');

describe.skipIf(peersSkip)('topocoll bench --peers', () => {
  it('all: Open MPI, Open MPI han and MPICH, each a column, topocoll against the fastest', () => {
    const args = ['bench', 'allreduce', '-n', '2', '--min', '8', '--max', '16', '--modes', 'sync', '--iterations', '50', '--peers', 'all'];
    const json = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, ...args, '--json'], { encoding: 'utf8', timeout: 120_000 });
    expect(json.status, json.stderr).toBe(0);
    const rows = json.stdout
      .split('\n')
      .filter((l) => l.startsWith('{') && !l.includes('"probe"'))
      .map((l) => JSON.parse(l) as BenchRow);
    for (const mode of ['sync', 'ompi', 'ompi-han', 'mpich']) {
      const mine = rows.filter((x) => x.collective === 'allreduce' && x.mode === mode);
      expect([mode, mine.map((x) => x.bytes)]).toEqual([mode, [8, 16]]);
      for (const x of mine) expect(x.avgUs).toBeGreaterThan(0);
    }
    const table = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, ...args], { encoding: 'utf8', timeout: 120_000 });
    expect(table.status, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/bytes\s+topocoll sync\s+Open MPI\s+Open MPI han\s+MPICH\s+sync \/ best MPI/);
    // Each row's ratio is topocoll's time over the fastest library's, from the unrounded times:
    // within what the printed figures' rounding leaves (half a unit of each one's last digit).
    const half = (v: number) => (v < 10 ? 0.005 : v < 1000 ? 0.05 : 0.5);
    for (const line of table.stdout.split('\n').filter((l) => /^\s+(8|16)\s/.test(l))) {
      const [, sync, ...rest] = line.trim().split(/\s+/).map(Number);
      const ratio = rest.pop()!;
      const fastest = Math.min(...rest);
      expect(ratio, line).toBeGreaterThanOrEqual((sync! - half(sync!)) / (fastest + half(fastest)) - 0.005);
      expect(ratio, line).toBeLessThanOrEqual((sync! + half(sync!)) / (fastest - half(fastest)) + 0.005);
    }
    expect(table.stdout).toMatch(/# baseline: Open MPI: Open MPI v[\d.]+; Open MPI han: Open MPI v[\d.]+; MPICH: MPICH Version: [\d.]+/);
  });

  it('refuses an unknown library before anything runs', async () => {
    const r = await cli(['bench', 'allreduce', '--peers', 'ompi,lam']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^topocoll bench: EINVAL: --peers: unknown peer "lam" \(peers: ompi, ompi-han, mpich, or all\)\. Run "topocoll bench --help"/);
  });
});

/** `topocoll bench --pt2pt`: OSU-style latency and windowed bandwidth of messages, one node and 2 emulated nodes. */
describe('topocoll bench --pt2pt', () => {
  it('prints latency and bandwidth per size for one node and for 2 emulated nodes', () => {
    const r = spawnSync(
      process.execPath,
      [`${repoRoot}dist/cli/main.js`, 'bench', '--pt2pt', '--min', '1', '--max', '4096', '--iterations', '40', '--no-mpi'],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(r.status, r.stderr).toBe(0);
    const tables = r.stdout.split('\n\n').filter((t) => t.startsWith('point-to-point'));
    expect(tables.map((t) => t.split('\n')[0])).toEqual([
      'point-to-point, 2 ranks, one node (no Open MPI baseline: not asked for (--no-mpi))',
      'point-to-point, 2 ranks, 2 emulated nodes (no Open MPI baseline: not asked for (--no-mpi))',
    ]);
    for (const table of tables) {
      const rows = table.split('\n').slice(2);
      expect(rows.map((l) => l.slice(0, 11).trim())).toEqual(['1 B', '4 B', '16 B', '64 B', '256 B', '1 KiB', '4 KiB']);
      for (const row of rows) {
        const [latency, , , bandwidth] = row.slice(11).trim().split(/\s+/);
        expect(Number(latency), row).toBeGreaterThan(0);
        expect(Number(bandwidth), row).toBeGreaterThan(0);
      }
    }
  });
});
