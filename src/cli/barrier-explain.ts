import { TopocollError } from '../errors.js';
import type { BindPolicy } from './launcher.js';
import type { BenchRow, BenchSettings } from './bench-worker.js';
import type { CliIo } from './io.js';
import { cellsOf, runModelJob } from './model-accuracy.js';
import { ompiUnavailable, runOmpi } from './ompi-baseline.js';
import { libraryOf } from './mpi-peers.js';
import { Progress } from './progress.js';
import { runWorkerJob } from './worker-job.js';

export interface ExplainJob {
  ranks: number;
  bind: BindPolicy;
  nodes?: number;
  network?: string;
  /** The configuration file the jobs read (its `model` prices the candidates). */
  config?: string;
  iterations: number;
  io: CliIo;
}

/**
 * `topocoll bench barrier --explain`: S4's AdaptiveBarrierLogP beside measurement, through the
 * same Selector `auto` uses. One job (model-worker.ts, as `bench barrier --model`) configures
 * every combination of the levels' barrier candidates in turn and `auto` itself, each predicted
 * by `comm.explain('barrier')` — S4's formulas on each level's link, bounded where members
 * share cores (core-sharing.ts) — and measured (barriers back to back, the slowest rank's mean,
 * the least of 3 rounds). On one node also the default barrier (the node-wide shared area,
 * outside the model) and Open MPI's MPI_Barrier, measured in this run.
 */
export async function explainBarrier(job: ExplainJob): Promise<string> {
  const multiNode = (job.nodes ?? 1) > 1;
  const ompiWhy = multiNode ? 'no Open MPI baseline with emulated nodes' : ompiUnavailable();
  const progress = new Progress('topocoll bench', 1 + (multiNode ? 0 : 1) + (ompiWhy === undefined ? 1 : 0));
  const jobIo = progress.around(job.io);
  try {
    progress.step(`barrier: every combination of the levels' candidates and auto (${job.ranks} ranks)`);
    const model = await runModelJob({
      ranks: job.ranks,
      bind: job.bind,
      nodes: job.nodes,
      network: job.network,
      config: job.config,
      io: jobIo,
      settings: { collectives: ['barrier'], sizes: [0], rounds: 3, targetMs: 10 },
    });
    const autoRow = model.rows.find((r) => r.candidate === 'auto');
    if (model.code !== 0 || autoRow === undefined)
      throw new TopocollError('EINVAL', `topocoll bench barrier --explain: the candidates' job failed (exit ${model.code})`);
    const levels = autoRow.levels ?? [];
    if (levels.length === 0) return '\n# barrier --explain: a job of one rank has no barrier to explain\n';
    const [cell] = cellsOf(model.rows);
    const rows: { name: string; predicted: string; us: number }[] = [...cell!.configurations]
      .sort((a, b) => a.predictedUs - b.predictedUs)
      .map((c) => ({ name: c === cell!.auto ? `${c.runs}  (auto)` : c.runs, predicted: c.predictedUs.toFixed(2), us: c.measuredUs }));

    if (!multiNode) {
      progress.step(`barrier, the node-wide shared area (${job.ranks} ranks)`);
      const settings: BenchSettings = {
        collectives: ['barrier'],
        modes: ['sync'],
        minBytes: 1,
        maxBytes: 1,
        itersSmall: job.iterations,
        itersLarge: job.iterations,
        largeBytes: 8192,
        repeats: 3,
      };
      const { code, records } = await runWorkerJob({ ...job, io: jobIo, worker: 'bench-worker.js', settingsVariable: 'TOPOCOLL_BENCH', settings });
      const row = (records as BenchRow[]).find((r) => r.collective === 'barrier');
      if (code !== 0 || row === undefined) throw new TopocollError('EINVAL', `topocoll bench barrier --explain: the default job failed (exit ${code})`);
      rows.push({ name: 'default: the node-wide shared area', predicted: '-', us: row.avgUs });
      if (ompiWhy === undefined) {
        progress.step(`Open MPI barrier (${job.ranks} ranks)`);
        const o = await runOmpi('barrier', job.ranks, settings);
        const ompi = o.rows.find((r) => r.collective === 'barrier');
        if (ompi !== undefined) rows.push({ name: `Open MPI MPI_Barrier (${libraryOf(o.version)})`, predicted: '-', us: ompi.avgUs });
      }
    }

    const best = Math.min(...rows.filter((r) => !r.name.startsWith('Open MPI')).map((r) => r.us));
    const links = new Map(levels.map((l) => [l.link, l.linkParameters]));
    const lines = [
      '',
      `# barrier, ${job.ranks} ranks${multiNode ? ` on ${job.nodes} emulated nodes` : ''}: the model's prediction (S4's formulas, as auto uses them) beside the measured time (µs per call; the configurations: the slowest rank's mean${multiNode ? '' : ', the default and Open MPI: the mean over ranks as `topocoll bench` times them'})`,
      `# levels: ${levels.map((l) => `${l.level} (largest group ${l.groupSize}, ${l.link})`).join(', ')}`,
      `# LogP (µs): ${[...links].map(([name, p]) => `${name} L ${p.L} o_s ${p.os} o_r ${p.or} g ${p.g}`).join('; ')}`,
    ];
    const table = [
      ['barrier', 'predicted', 'measured', ''],
      ...rows.map((r) => [r.name, r.predicted, r.us.toFixed(2), r.us === best ? '← fastest measured' : '']),
    ];
    const widths = table[0]!.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
    for (const r of table)
      lines.push(
        r
          .map((v, c) => (c === 0 ? v.padEnd(widths[c]!) : v.padStart(widths[c]!)))
          .join('  ')
          .trimEnd(),
      );
    return lines.join('\n') + '\n' + (ompiWhy !== undefined ? `# ${ompiWhy.startsWith('no ') ? ompiWhy : `no Open MPI baseline: ${ompiWhy}`}\n` : '');
  } finally {
    progress.finish();
  }
}
