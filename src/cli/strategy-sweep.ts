import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allgatherAlcd } from '../algorithms/group-allgather.js';
import type { GroupAllgatherAlgorithm } from '../algorithms/algorithm-choice.js';
import { TopocollError } from '../errors.js';
import { sizesOf, type BenchRow, type BenchSettings } from './bench-worker.js';

/**
 * `topocoll bench COLLECTIVE --strategies`: the collective once per per-level algorithm choice,
 * each applied at every level (S3's tables in form), as time relative to the flat algorithm,
 * beside the automatic choice and Open MPI at the same process count. allgather is relative to the
 * ring (S2's figure), with every algorithm's ALCD for the job's group sizes. reduce-scatter and
 * alltoall have one choice of their own each, forced by its key: the top group's algorithm
 * (`reduceScatter.top`, relative to the ring; below the top the reduce's and scatter's levels
 * stay auto) and the one-node form (`alltoall.algorithm`, relative to pairwise; across nodes the
 * hierarchical form runs whatever the key says, so every row there is the same algorithm). scan
 * and exscan have none: one algorithm per level.
 */

export type StrategyCollective = 'bcast' | 'reduce' | 'allreduce' | 'allgather' | 'reduce-scatter' | 'alltoall';

/** The collectives `--strategies` goes with (every key of STRATEGIES). */
export const STRATEGY_COLLECTIVES: readonly StrategyCollective[] = ['bcast', 'reduce', 'allreduce', 'allgather', 'reduce-scatter', 'alltoall'];

const INSIDE = ['core', 'l1', 'l2', 'l3', 'numa', 'socket', 'node'];
const BETWEEN = ['switch1', 'switch2', 'switch3', 'world'];

export interface Strategy {
  name: string;
  yaml: string;
}

const everyLevel = (collective: 'bcast' | 'reduce' | 'allgather', inside: string, between = inside): string =>
  `${collective}:\n  levels: { ${[...INSIDE.map((l) => `${l}: ${inside}`), ...BETWEEN.map((l) => `${l}: ${between}`)].join(', ')} }\n`;

/** allgather's per-level algorithms, in the order of S2's figure. */
export const ALLGATHER_ALGORITHMS: readonly GroupAllgatherAlgorithm[] = ['ring', 'recursive-doubling', 'bruck', 'neighbor-exchange'];

/** The choices compared for each collective; the first is the reference (flat; ring for allgather and reduce-scatter; pairwise for alltoall). */
export const STRATEGIES: Record<StrategyCollective, Strategy[]> = {
  bcast: [
    { name: 'flat', yaml: everyLevel('bcast', 'flat') },
    { name: 'binomial', yaml: everyLevel('bcast', 'binomial') },
    { name: 'knomial:4', yaml: everyLevel('bcast', 'knomial:4') },
    { name: 'scatter-allgather', yaml: everyLevel('bcast', 'scatter-allgather') },
    { name: 'shm+binomial', yaml: everyLevel('bcast', 'shm', 'binomial') },
    { name: 'auto', yaml: '' },
  ],
  reduce: [
    { name: 'flat', yaml: everyLevel('reduce', 'flat') },
    { name: 'binomial', yaml: everyLevel('reduce', 'binomial') },
    { name: 'knomial:4', yaml: everyLevel('reduce', 'knomial:4') },
    { name: 'rabenseifner', yaml: everyLevel('reduce', 'rabenseifner') },
    { name: 'shm+binomial', yaml: everyLevel('reduce', 'shm', 'binomial') },
    { name: 'auto', yaml: '' },
  ],
  allreduce: [
    // The named schedules run at every size (`shm: false`); `auto` takes the one-node shared
    // area for small messages where it applies.
    { name: 'flat', yaml: `${everyLevel('reduce', 'flat')}${everyLevel('bcast', 'flat')}allreduce: { algorithm: reduce-bcast, shm: false }\n` },
    {
      name: 'reduce-bcast',
      yaml: `${everyLevel('reduce', 'binomial')}${everyLevel('bcast', 'shm', 'binomial')}allreduce: { algorithm: reduce-bcast, shm: false }\n`,
    },
    { name: 'rab+rec.doubling', yaml: 'allreduce: { algorithm: reduce-allreduce-bcast, top: recursive-doubling, shm: false }\n' },
    { name: 'rab+rabenseifner', yaml: 'allreduce: { algorithm: reduce-allreduce-bcast, top: rabenseifner, shm: false }\n' },
    { name: 'auto', yaml: '' },
  ],
  allgather: [...ALLGATHER_ALGORITHMS.map((a) => ({ name: a, yaml: everyLevel('allgather', a) })), { name: 'auto', yaml: '' }],
  'reduce-scatter': [
    { name: 'ring', yaml: 'reduceScatter: { top: ring }\n' },
    { name: 'recursive-halving', yaml: 'reduceScatter: { top: recursive-halving }\n' },
    { name: 'auto', yaml: '' },
  ],
  alltoall: [
    { name: 'pairwise', yaml: 'alltoall: { algorithm: pairwise }\n' },
    { name: 'bruck', yaml: 'alltoall: { algorithm: bruck }\n' },
    { name: 'auto', yaml: '' },
  ],
};

/**
 * The `levels` section that switches off `off`'s levels (a comma list, e.g. `core,l1,l2`: a
 * machine whose cores pair ranks at several levels keeps a top group of two until all are off);
 * nothing for none. A name that is no level fails the job's configuration (ECONFIG at its key).
 */
export function offLevels(off: string | undefined): string {
  const names = (off ?? '')
    .split(',')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  return names.length === 0 ? '' : `levels: { ${names.map((l) => `${l}: { enabled: false }`).join(', ')} }\n`;
}

/** Runs every strategy of `collective` through `run` (one benchmark job each); rows tagged with the strategy. */
export async function runStrategies(
  collective: StrategyCollective,
  off: string | undefined,
  run: (config: string) => Promise<{ code: number; rows: BenchRow[] }>,
): Promise<BenchRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'topocoll-strategies-'));
  const rows: BenchRow[] = [];
  try {
    for (const s of STRATEGIES[collective]) {
      const file = join(dir, `${s.name.replace(/[^a-z0-9]+/gi, '-')}.yaml`);
      writeFileSync(file, s.yaml + offLevels(off));
      const r = await run(file);
      if (r.code !== 0) throw new TopocollError('EINVAL', `topocoll bench: the ${collective} job with ${s.name} failed`);
      for (const row of r.rows) if (row.collective === collective && row.mode === 'sync') rows.push({ ...row, mode: s.name });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

/** bytes | flat µs | every other strategy relative to flat | Open MPI µs | auto / Open MPI. */
export function formatStrategies(collective: StrategyCollective, rows: BenchRow[], ompi: BenchRow[], title: string, settings: BenchSettings): string {
  const names = STRATEGIES[collective].map((s) => s.name);
  const cell = (name: string, bytes: number) => rows.find((r) => r.mode === name && r.bytes === bytes)?.avgUs;
  const ompiAt = (bytes: number) => ompi.find((r) => r.collective === collective && r.bytes === bytes)?.avgUs;
  const hasOmpi = ompi.some((r) => r.collective === collective);
  const header = ['bytes', `${names[0]} µs`, ...names.slice(1), ...(hasOmpi ? ['Open MPI µs', 'auto / OMPI'] : [])];
  const table = [header];
  for (const bytes of sizesOf(settings)) {
    const base = cell(names[0]!, bytes);
    const auto = cell('auto', bytes);
    const o = ompiAt(bytes);
    table.push([
      String(bytes),
      base === undefined ? '-' : base.toFixed(2),
      ...names.slice(1).map((n) => {
        const t = cell(n, bytes);
        return t === undefined || base === undefined ? '-' : (t / base).toFixed(2);
      }),
      ...(hasOmpi ? [o === undefined ? '-' : o.toFixed(2), auto !== undefined && o ? (auto / o).toFixed(2) : '-'] : []),
    ]);
  }
  const widths = header.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
  return (
    ['', `# ${title}: ${names[0]} in µs, the others relative to it`, ...table.map((r) => r.map((v, c) => v.padStart(widths[c]!)).join('  '))].join('\n') + '\n'
  );
}

/**
 * S2's ALCD (average logical communication distance: mean |i − j| over the messages of the
 * generated schedule, `allgatherAlcd`) of every allgather algorithm for each group size of the
 * job, with the levels that have groups of that size, and for one group of all `ranks` (S2's
 * flat setting) when the job has none that large.
 */
export function formatAllgatherAlcd(groupSizes: readonly { level: string; sizes: readonly number[] }[], ranks: number): string {
  const levelsOf = new Map<number, string[]>();
  for (const { level, sizes } of groupSizes) for (const n of sizes) levelsOf.set(n, [...(levelsOf.get(n) ?? []), level]);
  if (ranks > 1 && !levelsOf.has(ranks)) levelsOf.set(ranks, ['(none: all ranks as one group)']);
  const sizes = [...levelsOf.keys()].sort((a, b) => a - b);
  if (sizes.length === 0) return '\n# ALCD: no group of more than one rank in this job\n';
  const header = ['group size', 'levels', ...ALLGATHER_ALGORITHMS];
  const table = [header, ...sizes.map((n) => [String(n), levelsOf.get(n)!.join(','), ...ALLGATHER_ALGORITHMS.map((a) => allgatherAlcd(a, n).toFixed(2))])];
  const widths = header.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
  return (
    [
      '',
      "# ALCD (S2's average logical communication distance, mean |i − j| per message) of each algorithm for this job's group sizes",
      ...table.map((r) => r.map((v, c) => v.padStart(widths[c]!)).join('  ')),
    ].join('\n') + '\n'
  );
}
