import { spawnSync } from 'node:child_process';
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TopocollError } from '../errors.js';
import { PACKAGE_ROOT } from '../util/package-root.js';
import type { BenchRow } from './bench-worker.js';
import { PEER_NAMES, type PeerName } from './mpi-peers.js';
import { renderLogLogChart, type ChartSeries } from './svg-chart.js';

/**
 * `topocoll bench --report DIR`: one latency-against-size chart per collective and job shape,
 * drawn from the rows `--json` prints, so a chart made right after a run and one made later from
 * its saved rows (`--from-json`) are the same bytes.
 */

/** One line of `topocoll bench --json`: a row and the job it came from. */
export interface ReportRow extends BenchRow {
  ranks: number;
  hogs?: number;
  /** Emulated nodes (absent: the real node). */
  nodes?: number;
  /** `bench --hosts`: the emulated cluster, leaves×hosts×ranks (e.g. `2×2×2`). */
  hosts?: string;
  /** `git rev-parse --short HEAD` of the topocoll that measured (absent outside a checkout). */
  commit?: string;
  /** The day the run started, UTC, YYYY-MM-DD. */
  date?: string;
}

export interface ReportChart {
  file: string;
  svg: string;
}

/** The collectives' order in a report; others (there are none today) follow alphabetically. */
const ORDER = ['bcast', 'reduce', 'allreduce', 'allgather', 'gather', 'scatter', 'reduce-scatter', 'alltoall', 'scan', 'exscan'];

const SERIES: Record<'sync' | 'addon' | 'async' | PeerName | 'memcpy', Omit<ChartSeries, 'points'>> = {
  sync: { label: 'topocoll sync', color: '#0072B2', marker: 'circle' },
  addon: { label: 'topocoll sync, fast path off', color: '#009E73', marker: 'circle', dashed: true },
  async: { label: 'topocoll async', color: '#CC79A7', marker: 'square' },
  ompi: { label: 'Open MPI', color: '#D55E00', marker: 'diamond' },
  'ompi-han': { label: 'Open MPI han', color: '#E69F00', marker: 'diamond', dashed: true },
  mpich: { label: 'MPICH', color: '#7F3C8D', marker: 'triangle' },
  memcpy: { label: 'memcpy', color: '#555555', marker: 'triangle', dashed: true },
};

/** topocoll's series of a job with transport: mpi, in colours of their own beside TCP's. */
const MPI_SERIES: Record<'sync' | 'addon' | 'async', Pick<ChartSeries, 'color' | 'marker' | 'dashed'>> = {
  sync: { color: '#56B4E9', marker: 'circle' },
  addon: { color: '#000000', marker: 'circle', dashed: true },
  async: { color: '#E69F00', marker: 'square' },
};

type Transport = NonNullable<BenchRow['transport']>;
/** Rows from before the transport was recorded are TCP's: it was the only one. */
const transportOf = (r: BenchRow): Transport => r.transport ?? 'tcp';

/**
 * The rows of a `--json` output: every line that starts with `{`, the probe and group-size
 * records left out. Other lines (notes a worker printed) are skipped.
 */
export function parseBenchJson(text: string, source: string): ReportRow[] {
  const rows: ReportRow[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.startsWith('{')) return;
    let o: unknown;
    try {
      o = JSON.parse(line);
    } catch (cause) {
      throw new TopocollError('EINVAL', `topocoll bench: ${source}:${i + 1} is not JSON: ${(cause as Error).message}`);
    }
    if (typeof o !== 'object' || o === null || 'probe' in o || 'groupSizes' in o) return;
    const r = o as Record<string, unknown>;
    const ok =
      typeof r.collective === 'string' &&
      typeof r.mode === 'string' &&
      typeof r.bytes === 'number' &&
      typeof r.avgUs === 'number' &&
      typeof r.ranks === 'number' &&
      (r.nodes === undefined || typeof r.nodes === 'number') &&
      (r.transport === undefined || r.transport === 'tcp' || r.transport === 'mpi') &&
      (r.hogs === undefined || typeof r.hogs === 'number') &&
      (r.hosts === undefined || typeof r.hosts === 'string') &&
      (r.commit === undefined || typeof r.commit === 'string') &&
      (r.date === undefined || typeof r.date === 'string');
    if (!ok)
      throw new TopocollError('EINVAL', `topocoll bench: ${source}:${i + 1} is not a row of "topocoll bench --json" (collective, mode, bytes, avgUs, ranks)`);
    rows.push(o as ReportRow);
  });
  return rows;
}

/**
 * One chart per collective and job (ranks, emulated nodes, busy processes), barrier left out
 * (it has one size, nothing to draw against). Rows of the same point from several runs in one
 * file: the fastest, as bench/min-of-runs.mjs merges runs. Charts come in a fixed order. The
 * transports of a job share its chart, each in series of its own; only TCP (every chart before
 * the MPI transport): the series and titles as they were.
 */
export function benchCharts(rows: readonly ReportRow[]): ReportChart[] {
  const jobKey = (r: ReportRow) => `${r.ranks}/${r.nodes ?? ''}/${r.hogs ?? 0}/${r.hosts ?? ''}`;
  const jobs = new Map<string, ReportRow[]>();
  for (const r of rows) {
    const list = jobs.get(jobKey(r));
    if (list) list.push(r);
    else jobs.set(jobKey(r), [r]);
  }
  const charts: ReportChart[] = [];
  const jobOrder = [...jobs.values()].sort(
    (a, b) =>
      a[0]!.ranks - b[0]!.ranks ||
      (a[0]!.nodes ?? 0) - (b[0]!.nodes ?? 0) ||
      (a[0]!.hogs ?? 0) - (b[0]!.hogs ?? 0) ||
      (a[0]!.hosts ?? '').localeCompare(b[0]!.hosts ?? ''),
  );
  for (const job of jobOrder) {
    const { ranks, nodes, hogs = 0, hosts } = job[0]!;
    const collectives = [...new Set(job.map((r) => r.collective))]
      .filter((c) => c !== 'memcpy' && c !== 'barrier')
      .sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
    const topocollRows = job.filter((r) => !(PEER_NAMES as readonly string[]).includes(r.mode) && r.mode !== 'memcpy');
    const transports = (['tcp', 'mpi'] as const).filter((t) => topocollRows.some((r) => transportOf(r) === t));
    const named = transports.includes('mpi');
    for (const collective of collectives) {
      const mine = job.filter((r) => r.collective === collective);
      const fastest = (mode: string, bytesOf: (x: number) => number, transport?: Transport): { x: number; y: number }[] => {
        const sizes = [...new Set(mine.map((r) => r.bytes))].sort((a, b) => a - b);
        const points: { x: number; y: number }[] = [];
        for (const x of sizes) {
          const at = job.filter(
            (r) =>
              r.mode === mode &&
              r.bytes === bytesOf(x) &&
              (mode === 'memcpy' || r.collective === collective) &&
              (transport === undefined || transportOf(r) === transport),
          );
          if (at.length > 0) points.push({ x, y: Math.min(...at.map((r) => r.avgUs)) });
        }
        return points;
      };
      // The whole vector of blocks is each call's least copy: allgather's result, gather's at the root, scatter's source.
      const gather = collective === 'allgather' || collective === 'gather' || collective === 'scatter';
      const series: ChartSeries[] = [];
      for (const mode of ['sync', 'addon', 'async'] as const) {
        for (const transport of transports) {
          const points = fastest(mode, (x) => x, transport);
          if (points.length === 0) continue;
          const style = transport === 'mpi' ? { ...SERIES[mode], ...MPI_SERIES[mode] } : SERIES[mode];
          series.push({ ...style, ...(named ? { label: `${SERIES[mode].label} (${transport.toUpperCase()})` } : {}), points });
        }
      }
      // Across hosts: topocoll with every level above the node off, beside its levels (auto).
      const flat = fastest('sync flat', (x) => x);
      if (flat.length > 0) series.push({ ...SERIES.sync, label: 'topocoll flat (no switch levels)', dashed: true, points: flat });
      // The MPI libraries cannot emulate nodes: beside a job across emulated nodes, they ran on one.
      for (const peer of PEER_NAMES) {
        const points = fastest(peer, (x) => x);
        if (points.length > 0)
          series.push({ ...SERIES[peer], ...(nodes !== undefined && hosts === undefined ? { label: `${SERIES[peer].label} (one node)` } : {}), points });
      }
      // The copy each call needs at least, where the table shows it: the message (bcast), the
      // whole result (allgather: ranks × the bytes each rank sends).
      if (collective === 'bcast' || gather) {
        const points = fastest('memcpy', (x) => (gather ? x * ranks : x));
        if (points.length > 0)
          series.push({ ...SERIES.memcpy, label: gather ? (collective === 'allgather' ? 'memcpy of result' : 'memcpy of all blocks') : 'memcpy', points });
      }
      const between = named ? `, ${transports.map((t) => t.toUpperCase()).join(' and ')} between them` : '';
      const where =
        hosts !== undefined
          ? `across an emulated cluster of ${hosts} (leaves × hosts × ranks)`
          : nodes !== undefined
            ? `on ${nodes} emulated node${nodes === 1 ? '' : 's'}${between}`
            : `one node${named ? `, transport ${transports.join(' and ')}` : ''}`;
      const busy = hogs > 0 ? `, ${hogs} busy process${hogs === 1 ? '' : 'es'} beside` : '';
      const what: Record<string, string> = {
        bcast: 'bytes from rank 0 to every rank; memcpy: one copy of the message',
        reduce: 'sum of int32 elements to rank 0',
        allreduce: 'sum of int32 elements',
        allgather: `x: bytes each rank sends; memcpy: one copy of the whole result (${ranks} × bytes)`,
      };
      const svg = renderLogLogChart({
        title: `${collective}, ${ranks} rank${ranks === 1 ? '' : 's'}, ${where}${busy}`,
        subtitle: what[collective],
        xLabel: gather ? 'bytes per rank' : 'message size',
        yLabel: 'latency per call (µs)',
        footer: ['per-rank mean over back-to-back calls, averaged over ranks', ...provenance(mine)].join(' · '),
        series,
      });
      const placement = hosts !== undefined ? `-hosts${hosts.replace(/×/g, 'x')}` : nodes !== undefined ? `-nodes${nodes}` : '';
      charts.push({ file: `${collective}-p${ranks}${placement}${hogs > 0 ? `-hogs${hogs}` : ''}.svg`, svg });
    }
  }
  return charts;
}

function rank(collective: string): number {
  const i = ORDER.indexOf(collective);
  return i < 0 ? ORDER.length : i;
}

/** `topocoll 1a2b3c4`, `2025-01-31`: what measured and when, from the rows (several runs: all of them). */
function provenance(rows: readonly ReportRow[]): string[] {
  const commits = [...new Set(rows.map((r) => r.commit).filter((c): c is string => c !== undefined))].sort();
  const dates = [...new Set(rows.map((r) => r.date).filter((d): d is string => d !== undefined))].sort();
  const parts: string[] = [];
  if (commits.length > 0) parts.push(`topocoll ${commits.join(', ')}`);
  if (dates.length > 0) parts.push(dates.length === 1 ? dates[0]! : `${dates[0]} – ${dates[dates.length - 1]}`);
  return parts;
}

/** Writes the charts into `dir` (made if missing); returns their paths. */
export function writeReport(dir: string, charts: readonly ReportChart[]): string[] {
  mkdirSync(dir, { recursive: true });
  return charts.map((c) => {
    const path = join(dir, c.file);
    writeFileSync(path, c.svg);
    return path;
  });
}

/**
 * The short commit of this topocoll when it runs from its own git checkout; undefined otherwise
 * (no git, or an installed copy inside some other repository, whose commit would mislead).
 */
export function topocollCommit(): string | undefined {
  const r = spawnSync('git', ['-C', PACKAGE_ROOT, 'rev-parse', '--show-toplevel', '--short', 'HEAD'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  if (r.status !== 0 || r.error) return undefined;
  const [top, commit] = r.stdout.trim().split('\n');
  if (top === undefined || commit === undefined) return undefined;
  try {
    return realpathSync(top) === realpathSync(PACKAGE_ROOT) ? commit : undefined;
  } catch {
    return undefined;
  }
}
