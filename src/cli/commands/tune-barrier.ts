import { writeFileSync } from 'node:fs';
import { formatAlgorithm } from '../../algorithms/algorithm-choice.js';
import { chooseBarrier, type LogP } from '../../algorithms/barrier-model.js';
import { parseYaml } from '../../config/load.js';
import { TopocollError } from '../../errors.js';
import { readOptionalTextFile } from '../../util/read-text-file.js';
import type { CliIo } from '../io.js';
import type { LogpRecord, LogpSettings } from '../logp-worker.js';
import { Progress } from '../progress.js';
import { runWorkerJob } from '../worker-job.js';

/** Group sizes the printed table shows the model's choice for. */
const SHOWN_SIZES = [2, 3, 4, 8, 16, 32, 64, 256];

/**
 * `topocoll tune barrier`: S4's LogP parameters of shared memory (two ranks on one node) and of
 * TCP (two ranks on two emulated nodes, over loopback), measured by logp-worker.ts, written
 * under barrier.logp in `out` (other keys kept), and the barrier the model then picks per group
 * size, with each candidate's predicted time.
 */
export async function tuneBarrier(out: string, io: CliIo): Promise<number> {
  const settings: LogpSettings = { messages: 64, repeats: 201 };
  // One measuring job per kind of link.
  const progress = new Progress('topocoll tune barrier', 2);
  const jobIo = progress.around(io);
  const measure = async (nodes: number, what: string): Promise<LogP & { callUs: number; pingpongUs: number }> => {
    progress.step(what);
    const { code, records } = await runWorkerJob({
      ranks: 2,
      bind: 'core',
      nodes,
      worker: 'logp-worker.js',
      settingsVariable: 'TOPOCOLL_LOGP',
      settings,
      io: jobIo,
    });
    const record = (records as LogpRecord[]).find((r) => r.kind === 'logp');
    if (code !== 0 || record === undefined) throw new TopocollError('EINVAL', `topocoll tune barrier: the measurement job failed (exit ${code})`);
    return record;
  };
  io.stderr('topocoll tune: measuring LogP parameters over shared memory and TCP…\n');
  let shm: Awaited<ReturnType<typeof measure>>;
  let tcp: Awaited<ReturnType<typeof measure>>;
  try {
    shm = await measure(1, 'shared memory (2 ranks)');
    tcp = await measure(2, 'TCP (2 emulated nodes)');
  } finally {
    progress.finish();
  }
  const { doc } = parseYaml(readOptionalTextFile(out, 'ECONFIG', 'configuration file') ?? '', out);
  for (const [link, p] of [
    ['shm', shm],
    ['tcp', tcp],
  ] as const) {
    for (const key of ['L', 'os', 'or', 'g'] as const) doc.setIn(['barrier', 'logp', link, key], p[key]);
  }
  writeFileSync(out, doc.toString());
  const lines = [`barrier.logp written to ${out} (µs):`];
  for (const [link, p] of [
    ['shm', shm],
    ['tcp', tcp],
  ] as const) {
    lines.push(`  ${link}: L ${p.L}, o_s ${p.os}, o_r ${p.or}, g ${p.g}   (a zero-byte call ${p.callUs}, a ping-pong ${p.pingpongUs})`);
  }
  for (const [link, p] of [
    ['shm', shm],
    ['tcp', tcp],
  ] as const) {
    lines.push('', `# barrier over ${link}: the model's prediction per algorithm (µs), * = chosen`);
    const candidates = chooseBarrier(2, p).all.map((c) => formatAlgorithm(c.algorithm));
    lines.push(['P'.padStart(5), ...candidates.map((c) => c.padStart(18))].join(''));
    for (const size of SHOWN_SIZES) {
      const choice = chooseBarrier(size, p);
      const chosen = formatAlgorithm(choice.algorithm);
      lines.push(
        [
          String(size).padStart(5),
          ...choice.all.map((c) => `${formatAlgorithm(c.algorithm) === chosen ? '*' : ''}${c.predictedUs.toFixed(2)}`.padStart(18)),
        ].join(''),
      );
    }
  }
  io.stdout(lines.join('\n') + '\n');
  return 0;
}
