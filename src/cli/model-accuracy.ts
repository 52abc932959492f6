import { TopocollError } from '../errors.js';
import type { BindPolicy } from './launcher.js';
import type { CliIo } from './io.js';
import { median } from './link-fit.js';
import type { ModelCollective, ModelRow, ModelSettings } from './model-worker.js';
import { formatBytes } from './svg-chart.js';
import { runWorkerJob } from './worker-job.js';

/**
 * `topocoll bench --model`: how good the cost model is (issue 18 §3). One job runs every
 * candidate of every collective and size (model-worker.ts) and reports, per cell (collective,
 * size), the predicted and measured time of each distinct configuration, and
 *  (a) predicted against measured,
 *  (b) whether the model's choice (`auto`) is within 10 % of the best measured configuration,
 *  (c) `auto`'s loss against the best configuration of each cell, summed over the table.
 * A row's figure is the least of its rounds: the VM's noise only ever adds time, in bursts that
 * can hit two rounds of three. Rows whose configurations run the same (auto and the candidate it
 * equals, by explain's account of what runs) are one configuration: the median of their rows'
 * figures (not the least of all their rounds, which would favour a configuration measured by
 * more rows).
 */

export interface ModelJob {
  ranks: number;
  bind: BindPolicy;
  nodes?: number;
  network?: string;
  config?: string;
  settings: ModelSettings;
  io: CliIo;
}

export async function runModelJob(job: ModelJob): Promise<{ code: number; rows: ModelRow[] }> {
  const { code, records } = await runWorkerJob({ ...job, worker: 'model-worker.js', settingsVariable: 'TOPOCOLL_MODEL_BENCH', settings: job.settings });
  return { code, rows: records as ModelRow[] };
}

/** One distinct configuration of a cell: what runs, its prediction, the median of its rows' least rounds. */
export interface CellConfiguration {
  runs: string;
  /** The candidates that ran it. */
  names: string[];
  predictedUs: number;
  measuredUs: number;
  /** Each row's least round, in row order (several when several candidates ran it); `auto`'s row first in auto's configuration. */
  rowsUs: number[];
}

export interface Cell {
  collective: ModelCollective;
  bytes: number;
  configurations: CellConfiguration[];
  /** What auto ran. */
  auto: CellConfiguration;
  best: CellConfiguration;
  /** auto's measured time over the best's. */
  ratio: number;
}

/** The rows of one job as cells, configurations pooled by what they run. */
export function cellsOf(rows: readonly ModelRow[]): Cell[] {
  const byCell = new Map<string, ModelRow[]>();
  for (const r of rows) {
    const key = `${r.collective}|${r.bytes}`;
    byCell.set(key, [...(byCell.get(key) ?? []), r]);
  }
  const cells: Cell[] = [];
  for (const list of byCell.values()) {
    const byRuns = new Map<string, ModelRow[]>();
    for (const r of list) byRuns.set(r.runs, [...(byRuns.get(r.runs) ?? []), r]);
    const configurations = [...byRuns.entries()].map(([runs, rs]) => {
      const ordered = [...rs.filter((r) => r.candidate === 'auto'), ...rs.filter((r) => r.candidate !== 'auto')];
      const rowsUs = ordered.map((r) => Math.min(...r.roundsUs));
      return { runs, names: ordered.map((r) => r.candidate), predictedUs: rs[0]!.predictedUs, measuredUs: median(rowsUs), rowsUs };
    });
    const auto = configurations.find((c) => c.names.includes('auto'));
    if (auto === undefined) throw new TopocollError('EINVAL', `topocoll bench --model: no auto row for ${list[0]!.collective} ${list[0]!.bytes} B`);
    const best = configurations.reduce((a, c) => (c.measuredUs < a.measuredUs ? c : a));
    cells.push({ collective: list[0]!.collective, bytes: list[0]!.bytes, configurations, auto, best, ratio: auto.measuredUs / best.measuredUs });
  }
  return cells;
}

export interface ModelSummary {
  cells: number;
  /** Cells where auto is within 10 % of the best. */
  within10: number;
  /** The largest auto / best over the cells. */
  worstRatio: number;
  worst?: Cell;
  /** Σ auto / Σ best − 1 over the cells. */
  loss: number;
  /** Over every configuration of every cell: the median of |predicted / measured − 1|. */
  medianError: number;
  /** The share of configurations predicted within a factor of 2. */
  withinFactor2: number;
  /**
   * The measurement's own repeatability: pairs of auto's row and another row of the same schedule
   * (another candidate that runs what auto runs, measured in its own row), and of those the pairs
   * whose figures lie within 10 % of each other (larger / smaller ≤ 1.1).
   */
  repeated: number;
  repeatedWithin10: number;
}

export function summarise(cells: readonly Cell[]): ModelSummary {
  const all = cells.flatMap((c) => c.configurations);
  const worst = cells.reduce<Cell | undefined>((w, c) => (w === undefined || c.ratio > w.ratio ? c : w), undefined);
  const sum = (f: (c: Cell) => number) => cells.reduce((t, c) => t + f(c), 0);
  const pairs = cells.flatMap((c) => c.auto.rowsUs.slice(1).map((other) => [c.auto.rowsUs[0]!, other] as const));
  return {
    cells: cells.length,
    within10: cells.filter((c) => c.ratio <= 1.1).length,
    worstRatio: worst?.ratio ?? 1,
    worst,
    loss: cells.length === 0 ? 0 : sum((c) => c.auto.measuredUs) / sum((c) => c.best.measuredUs) - 1,
    medianError: all.length === 0 ? 0 : median(all.map((c) => Math.abs(c.predictedUs / c.measuredUs - 1))),
    withinFactor2: all.length === 0 ? 0 : all.filter((c) => c.predictedUs <= 2 * c.measuredUs && c.measuredUs <= 2 * c.predictedUs).length / all.length,
    repeated: pairs.length,
    repeatedWithin10: pairs.filter(([a, b]) => Math.max(a, b) <= 1.1 * Math.min(a, b)).length,
  };
}

const pct = (x: number): string => `${(100 * x).toFixed(0)} %`;

/** The summary line of one job. */
export function formatSummary(s: ModelSummary): string {
  return (
    `auto within 10 % of the best in ${s.within10}/${s.cells} cells (${pct(s.cells === 0 ? 1 : s.within10 / s.cells)}); ` +
    `worst auto/best ${s.worstRatio.toFixed(2)}${s.worst !== undefined ? ` (${s.worst.collective} ${formatBytes(s.worst.bytes)})` : ''}; ` +
    `summed loss ${pct(s.loss)}; predictions: median error ${pct(s.medianError)}, ${pct(s.withinFactor2)} within ×2; ` +
    `auto's configuration against itself in other rows: within 10 % in ${s.repeatedWithin10}/${s.repeated} pairs`
  );
}

/** Per cell: auto's and the best configuration's prediction and measurement, and what each ran. */
export function formatCells(cells: readonly Cell[], title: string): string {
  const table = [['collective', 'bytes', 'configs', 'auto pred', 'auto µs', 'best pred', 'best µs', 'auto/best', 'auto runs', 'best runs']];
  for (const c of cells) {
    table.push([
      c.collective,
      c.collective === 'barrier' ? '-' : formatBytes(c.bytes),
      String(c.configurations.length),
      c.auto.predictedUs.toFixed(2),
      c.auto.measuredUs.toFixed(2),
      c.best.predictedUs.toFixed(2),
      c.best.measuredUs.toFixed(2),
      c.ratio.toFixed(2),
      c.auto.runs,
      c.best === c.auto ? '(auto)' : c.best.runs,
    ]);
  }
  const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  const lines = table.map((r) => r.map((v, i) => (i >= 8 ? v : v.padStart(widths[i]!))).join('  '));
  return ['', `# ${title}`, `# ${formatSummary(summarise(cells))}`, ...lines].join('\n') + '\n';
}
