import { fileURLToPath } from 'node:url';
import { TopocollError } from '../../errors.js';
import { launch, type BindPolicy } from '../../runtime/launcher.js';
import { parseCommandArgs, parseNonNegativeInt, requireOne } from '../args.js';
import type { BenchRow, BenchSettings } from '../bench-worker.js';
import type { CliIo } from '../io.js';
import { ompiUnavailable, runOmpi } from '../ompi-baseline.js';

export const benchHelp = `topocoll bench — OSU-style latency of topocoll's collectives, with Open MPI's beside them

Usage: topocoll bench [-n N] [--nodes K] [--bind core|numa|socket|none]
                      [--collectives barrier,bcast,reduce,allreduce] [--min BYTES] [--max BYTES]
                      [--modes sync,async] [--iterations N] [--no-mpi] [--json]

  -n N               ranks (default 2)
  --nodes K          emulate K nodes (TCP between them)
  --collectives L    which collectives (default all four)
  --min, --max       message sizes, doubling (default 4 … 4194304 bytes)
  --modes L          sync (blocking) and/or async (Promise) calls (default both)
  --iterations N     timed calls per size up to 8 KiB (default 1000; 100 above)
  --no-mpi           skip the Open MPI baseline
  --json             one JSON object per row instead of tables

Latency is the per-rank mean over back-to-back calls after a warm-up, averaged over ranks
(min and max across ranks in --json). bcast moves bytes; reduce/allreduce sum int32 elements.
The Open MPI figures come from bench/ompi/coll_latency.c under mpirun at the same -n, bound to
cores, in the same run.
`;

const COLLECTIVES = ['barrier', 'bcast', 'reduce', 'allreduce'] as const;

export async function benchCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs('bench', argv, {
    np: { type: 'string', short: 'n' },
    nodes: { type: 'string' },
    bind: { type: 'string' },
    collectives: { type: 'string' },
    min: { type: 'string' },
    max: { type: 'string' },
    modes: { type: 'string' },
    iterations: { type: 'string' },
    'no-mpi': { type: 'boolean' },
    json: { type: 'boolean' },
    help: { type: 'boolean' },
  });
  if (values.help) {
    io.stdout(benchHelp);
    return 0;
  }
  const ranks = parseNonNegativeInt('bench', 'np', values.np ?? '2');
  const list = <T extends string>(name: string, text: string | undefined, allowed: readonly T[]): T[] =>
    (text ?? allowed.join(',')).split(',').map((c) => requireOne<T>('bench', name, c.trim(), allowed));
  const iterations = parseNonNegativeInt('bench', 'iterations', values.iterations ?? '1000');
  const settings: BenchSettings = {
    collectives: list('collectives', values.collectives, COLLECTIVES),
    modes: list('modes', values.modes, ['sync', 'async'] as const),
    minBytes: parseNonNegativeInt('bench', 'min', values.min ?? '4'),
    maxBytes: parseNonNegativeInt('bench', 'max', values.max ?? String(4 << 20)),
    itersSmall: iterations,
    itersLarge: Math.max(10, Math.floor(iterations / 10)),
    largeBytes: 8192,
  };
  if (settings.minBytes < 1 || settings.maxBytes < settings.minBytes) {
    throw new TopocollError('EINVAL', 'topocoll bench: need 1 ≤ --min ≤ --max');
  }

  const rows: BenchRow[] = [];
  let stderr = '';
  const code = await launch({
    ranks,
    bind: requireOne<BindPolicy>('bench', 'bind', values.bind ?? 'core', ['core', 'numa', 'socket', 'none']),
    nodes: values.nodes === undefined ? undefined : parseNonNegativeInt('bench', 'nodes', values.nodes),
    output: 'lines',
    script: fileURLToPath(new URL('../bench-worker.js', import.meta.url)),
    args: [],
    env: { ...io.env, TOPOCOLL_BENCH: JSON.stringify(settings) },
    stdout: (line) => {
      if (line.startsWith('{')) rows.push(JSON.parse(line) as BenchRow);
      else io.stdout(line);
    },
    stderr: (line) => {
      stderr += line;
      if (!/binding wraps around/.test(line)) io.stderr(line);
    },
  });
  if (code !== 0) {
    io.stderr(`topocoll bench: the benchmark job failed (exit ${code})\n`);
    return code;
  }

  let baselineNote = '';
  if (!values['no-mpi'] && values.nodes === undefined) {
    const why = ompiUnavailable();
    if (why !== undefined) baselineNote = `no Open MPI baseline: ${why}`;
    else {
      for (const collective of settings.collectives) {
        const run = runOmpi(collective, ranks, settings);
        rows.push(...run.rows);
        baselineNote = run.version;
      }
    }
  } else if (values.nodes !== undefined) {
    baselineNote = 'no Open MPI baseline with emulated nodes';
  }

  if (values.json) {
    for (const r of rows) io.stdout(JSON.stringify({ ...r, ranks }) + '\n');
    return 0;
  }
  io.stdout(formatTables(rows, ranks, settings, baselineNote, /wraps around/.test(stderr)));
  return 0;
}

function formatTables(rows: BenchRow[], ranks: number, settings: BenchSettings, note: string, oversubscribed: boolean): string {
  const out: string[] = [];
  const fmt = (v: number | undefined) => (v === undefined ? '-' : v < 10 ? v.toFixed(2) : v < 1000 ? v.toFixed(1) : v.toFixed(0));
  for (const collective of settings.collectives) {
    const mine = rows.filter((r) => r.collective === collective);
    const sizes = [...new Set(mine.map((r) => r.bytes))].sort((a, b) => a - b);
    const cell = (mode: string, bytes: number) => mine.find((r) => r.mode === mode && r.bytes === bytes)?.avgUs;
    const hasOmpi = mine.some((r) => r.mode === 'ompi');
    const memcpy = (bytes: number) => rows.find((r) => r.collective === 'memcpy' && r.bytes === bytes)?.avgUs;
    const hasMemcpy = collective === 'bcast' && sizes.some((b) => memcpy(b) !== undefined);
    out.push('', `# ${collective}, ${ranks} ranks${oversubscribed ? ' (more ranks than cores)' : ''}: latency in µs per call, average over ranks`);
    const header = ['bytes', ...settings.modes.map((m) => `topocoll ${m}`), ...(hasOmpi ? ['Open MPI', 'sync / OMPI'] : []), ...(hasMemcpy ? ['memcpy', 'sync / memcpy'] : [])];
    const table = [header];
    for (const bytes of sizes) {
      const sync = cell('sync', bytes);
      const ompi = cell('ompi', bytes);
      const copy = memcpy(bytes);
      table.push([
        String(bytes),
        ...settings.modes.map((m) => fmt(cell(m, bytes))),
        ...(hasOmpi ? [fmt(ompi), sync !== undefined && ompi ? (sync / ompi).toFixed(2) : '-'] : []),
        ...(hasMemcpy ? [fmt(copy), sync !== undefined && copy ? (sync / copy).toFixed(2) : '-'] : []),
      ]);
    }
    const widths = header.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
    for (const r of table) out.push(r.map((v, c) => v.padStart(widths[c]!)).join('  '));
  }
  if (note) out.push('', `# baseline: ${note}`);
  return out.join('\n') + '\n';
}
