import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatAlgorithm, type GroupBarrierAlgorithm } from '../algorithms/algorithm-choice.js';
import { chooseBarrier, predictBarrierUs, type LogP } from '../algorithms/barrier-model.js';
import type { TopocollConfig } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import { isHardwareLevel } from '../groups/levels.js';
import type { BindPolicy } from './launcher.js';
import type { BenchRow, BenchSettings, GroupSizesRecord } from './bench-worker.js';
import type { CliIo } from './io.js';
import { ompiUnavailable, runOmpi } from './ompi-baseline.js';
import { Progress } from './progress.js';
import { runWorkerJob } from './worker-job.js';

/** The algorithms `topocoll bench barrier --explain` runs at every level, one job each. */
const FORCED: readonly GroupBarrierAlgorithm[] = ['central-counter', { combiningTree: 2 }, { combiningTree: 4 }, 'dissemination'];

export interface ExplainJob {
  ranks: number;
  bind: BindPolicy;
  nodes?: number;
  network?: string;
  iterations: number;
  io: CliIo;
}

interface Level {
  level: string;
  /** The largest group at the level: the barrier waits for it. */
  size: number;
  link: 'shm' | 'tcp';
}

/**
 * `topocoll bench barrier --explain`: S4's AdaptiveBarrierLogP beside measurement. Every level's
 * prediction is S4's formula for the level's largest group over its kind of link (levels inside
 * a node, `node` included: shared memory; above: TCP between the emulated nodes), with the links of `config.model`;
 * a hierarchical barrier's prediction is the sum over its levels (each level's group completes
 * one barrier on the critical path: the arrival below it, or the release after it). Then each
 * algorithm forced at every level, the model's per-level choice (what `auto` runs), and — on one
 * node — the shared-area barrier and Open MPI's MPI_Barrier, all measured in this run.
 */
export async function explainBarrier(job: ExplainJob, config: TopocollConfig): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'topocoll-explain-'));
  const multiNode = (job.nodes ?? 1) > 1;
  // The default job, one per forced algorithm, the model's choice, and Open MPI on one node.
  const progress = new Progress('topocoll bench', 1 + FORCED.length + 1 + (multiNode ? 0 : 1));
  const jobIo = progress.around(job.io);
  try {
    const settings: BenchSettings = {
      collectives: ['barrier'],
      modes: ['sync'],
      minBytes: 1,
      maxBytes: 1,
      itersSmall: job.iterations,
      itersLarge: job.iterations,
      largeBytes: 8192,
      repeats: 3,
      groupSizes: true,
    };
    const run = async (name: string, yaml: string | undefined): Promise<{ us: number; levels: { level: string; sizes: number[] }[] }> => {
      let file: string | undefined;
      if (yaml !== undefined) writeFileSync((file = join(dir, `${name}.yaml`)), yaml);
      progress.step(`barrier ${name} (${job.ranks} ranks)`);
      const { code, records } = await runWorkerJob({
        ...job,
        io: jobIo,
        config: file,
        worker: 'bench-worker.js',
        settingsVariable: 'TOPOCOLL_BENCH',
        settings,
      });
      const row = (records as BenchRow[]).find((r) => r.collective === 'barrier');
      const sizes = (records as Partial<GroupSizesRecord>[]).find((r) => r.groupSizes !== undefined)?.groupSizes;
      if (code !== 0 || row === undefined || sizes === undefined)
        throw new TopocollError('EINVAL', `topocoll bench barrier --explain: the ${name} job failed (exit ${code})`);
      return { us: row.avgUs, levels: sizes };
    };
    const everyLevel = (a: GroupBarrierAlgorithm, levels: readonly Level[]) =>
      `barrier:\n  levels: { ${levels.map((l) => `${l.level}: ${formatAlgorithm(a)}`).join(', ')} }\n`;

    // The default job first: it reports the levels and their group sizes.
    const base = await run('default', undefined);
    const levels: Level[] = base.levels.map(({ level, sizes }) => ({
      level,
      size: Math.max(...sizes),
      link: multiNode && !isHardwareLevel(level) && level !== 'node' ? 'tcp' : 'shm',
    }));
    if (levels.length === 0) return '\n# barrier --explain: a job of one rank has no barrier to explain\n';
    const logp = (l: Level): LogP => config.model.links[l.link];
    const predicted = (choose: (l: Level) => GroupBarrierAlgorithm) => levels.reduce((t, l) => t + predictBarrierUs(choose(l), l.size, logp(l)), 0);

    const rows: [string, string, number][] = [];
    for (const a of FORCED) {
      const m = await run(formatAlgorithm(a), everyLevel(a, levels));
      rows.push([`${formatAlgorithm(a)} at every level`, predicted(() => a).toFixed(2), m.us]);
    }
    const modelChoice = (l: Level) => chooseBarrier(l.size, logp(l)).algorithm;
    const chosenYaml = `barrier:\n  levels: { ${levels.map((l) => `${l.level}: ${formatAlgorithm(modelChoice(l))}`).join(', ')} }\n`;
    const chosen = await run('model', chosenYaml);
    rows.push([
      `the model's choice (auto): ${levels.map((l) => `${l.level} ${formatAlgorithm(modelChoice(l))}`).join(', ')}`,
      predicted(modelChoice).toFixed(2),
      chosen.us,
    ]);
    if (!multiNode) rows.push(['default: the node-wide shared area', '-', base.us]);
    let ompi = '';
    if (!multiNode) {
      const why = ompiUnavailable();
      if (why === undefined) {
        progress.step(`Open MPI barrier (${job.ranks} ranks)`);
        const o = runOmpi('barrier', job.ranks, settings);
        const row = o.rows.find((r) => r.collective === 'barrier');
        if (row !== undefined) rows.push([`Open MPI MPI_Barrier (${o.version.split(',')[0]})`, '-', row.avgUs]);
      } else {
        progress.setTotal(1 + FORCED.length + 1);
        ompi = `# no Open MPI baseline: ${why}\n`;
      }
    } else ompi = '# no Open MPI baseline with emulated nodes\n';

    const best = Math.min(...rows.filter((r) => !r[0].startsWith('Open MPI')).map((r) => r[2]));
    const lines = [
      '',
      `# barrier, ${job.ranks} ranks${multiNode ? ` on ${job.nodes} emulated nodes` : ''}: S4's LogP prediction beside the measured time (µs per call, average over ranks)`,
      `# levels: ${levels.map((l) => `${l.level} (largest group ${l.size}, ${l.link})`).join(', ')}`,
      `# LogP (µs): ${(['shm', 'tcp'] as const).map((k) => `${k} L ${config.model.links[k].L} o_s ${config.model.links[k].os} o_r ${config.model.links[k].or} g ${config.model.links[k].g}`).join('; ')}`,
    ];
    const table = [['barrier', 'predicted', 'measured', ''], ...rows.map(([name, p, us]) => [name, p, us.toFixed(2), us === best ? '← fastest measured' : ''])];
    const widths = table[0]!.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
    for (const r of table)
      lines.push(
        r
          .map((v, c) => (c === 0 ? v.padEnd(widths[c]!) : v.padStart(widths[c]!)))
          .join('  ')
          .trimEnd(),
      );
    return lines.join('\n') + '\n' + ompi;
  } finally {
    progress.finish();
    rmSync(dir, { recursive: true, force: true });
  }
}
