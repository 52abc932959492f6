import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseTree, predictBcastUs, type ShmCostModel } from '../../algorithms/shm-bcast-model.js';
import { loadConfigFile, parseYaml } from '../../config/load.js';
import { TopocollError } from '../../errors.js';
import { shmLayout } from '../../runtime/shm-budget.js';
import { lastLevelCacheBytes } from '../../topology/sysfs.js';
import { parseCommandArgs, parseNonNegativeInt, usageError } from '../args.js';
import type { CliIo } from '../io.js';
import type { TuneSettings } from '../tune-worker.js';
import { runWorkerJob } from '../worker-job.js';
import { Progress } from '../progress.js';
import { formatBytes } from '../link-fit.js';
import { tuneLinks } from './tune-links.js';
import { readOptionalTextFile } from '../../util/read-text-file.js';

export const tuneHelp = `topocoll tune [shm|links] — measure the cost models and write them to YAML

Usage: topocoll tune [--out FILE] [-n N] [--quick]
       topocoll tune shm [--out FILE] [-n N] [--quick]
       topocoll tune links [--out FILE] [--quick]      (tune barrier: the same)

Without a target: both of the below, into one FILE (default topocoll.yaml; every other key of
the file, and its comments, are kept). Pass the file to init({ config }), --config or
TOPOCOLL_CONFIG. --quick: fewer trials and sizes (a rough model in seconds, for tests).

links: the LogGP parameters of the cost model (model.links.shm, model.links.tcp and
model.oversubscribed.shm, .tcp; model.callUs, model.combineBytesPerUs), each kind of link
measured by its own job of two ranks through the executor: shared memory (one node), TCP
(always between 2 emulated nodes, over loopback), each with the ranks on two cores (their waits
spinning first, waits: spin: the figures of ranks that have their cores) and with both on one
core (oversubscribed). Latency L, overheads o_s and o_r and gap g from zero-byte
messages; G from ping-pongs of 4 KiB to 4 MiB (the slope of the one-way time), Gx from pairwise
exchanges (SendRecv) of the same sizes, the combine rate from receiving with and without adding
(RecvReduce against Recv), callUs from a call that moves nothing. Prints every figure with its
noise, whether one G fits every size, and the barrier the model then picks per group size.

shm: runs short jobs of N ranks (default 2) on this machine and measures the copy rate of one
core, the cost of a notification between ranks and the fixed cost per fragment of the S0 bcast
engine; writes them under shm.model, prints the tree and fragment sizes the model then chooses,
and the predicted against the measured time of single broadcasts.
`;

export interface Measured {
  copy?: number;
  largeCopy?: number;
  writeShared?: number;
  readRemote?: number;
  pingpong?: number;
  stream?: number;
  bcast: Map<number, number>;
  streamed: Map<number, number>;
}

export type TuneTarget = 'all' | 'shm' | 'links';

/** The command's target from its positionals: none runs everything; `barrier` is the old name of `links`. */
export function tuneTarget(positionals: readonly string[]): TuneTarget {
  if (positionals.length === 0) return 'all';
  const [name] = positionals;
  if (positionals.length === 1 && (name === 'shm' || name === 'links' || name === 'barrier')) return name === 'shm' ? 'shm' : 'links';
  throw usageError('tune', `unknown target "${positionals.join(' ')}": use "topocoll tune" (everything), "topocoll tune shm" or "topocoll tune links"`);
}

export async function tuneCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    'tune',
    argv,
    { out: { type: 'string' }, np: { type: 'string', short: 'n' }, quick: { type: 'boolean' }, help: { type: 'boolean' } },
    true,
  );
  if (values.help) {
    io.stdout(tuneHelp);
    return 0;
  }
  const target = tuneTarget(positionals);
  const out = resolve(io.cwd, values.out ?? 'topocoll.yaml');
  const quick = values.quick === true;
  if (target === 'links') return tuneLinks(out, io, quick);
  const ranks = parseNonNegativeInt('tune', 'np', values.np ?? '2');
  if (ranks < 2) throw usageError('tune', 'shm: -n must be at least 2');
  const code = await tuneShm(out, ranks, io, quick);
  if (code !== 0 || target === 'shm') return code;
  io.stdout('\n');
  return tuneLinks(out, io, quick);
}

/** `topocoll tune shm`: the S0 engine's model, written under shm.model in `out`. */
async function tuneShm(out: string, ranks: number, io: CliIo, quick: boolean): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'topocoll-tune-'));
  const extraFragments = [8192, 16384, 32768, 131072];
  // Seven measuring jobs (small, large, one per extra fragment size) and the check, three runs each.
  const runs = quick ? 1 : 3;
  const progress = new Progress('topocoll tune shm', runs * (2 + extraFragments.length + 1));
  const jobIo = progress.around(io);
  try {
    // Each measuring job runs three times and every figure is the median of its three:
    // bursts of noise otherwise move single figures.
    const measureRuns = async (what: string, config: string, settings: TuneSettings) => {
      let run = 0;
      return medianOf(
        await repeat(runs, () => {
          progress.step(`${what}, run ${++run} of ${runs}`);
          return runTuneJob(ranks, config, settings, jobIo);
        }),
      );
    };
    const job = async (name: string, what: string, yaml: string, settings: TuneSettings) => {
      const file = join(dir, `${name}.yaml`);
      writeFileSync(file, yaml);
      return measureRuns(what, file, settings);
    };
    io.stderr('topocoll tune: measuring copy rates, notifications and fragments…\n');
    const mb = 1 << 20;
    const small = await job('small', 'copy rates and inline bcasts', 'shm:\n  bcast:\n    tree: flat\n    fragmentBytes: 4096\n', {
      sizes: [8],
      streamed: [mb],
      iterations: 20000,
    });
    const large = await job('large', '1 and 16 MiB bcasts, 64 KiB fragments', 'shm:\n  bcast:\n    tree: flat\n    fragmentBytes: 65536\n', {
      sizes: [],
      streamed: [mb, 16 * mb],
      iterations: 400,
    });
    // 1 MiB streamed with fragments between those two as well: the fit needs more than two
    // points to stand the noise.
    const oneMiB = new Map<number, number>([
      [4096, small.streamed.get(mb)!],
      [65536, large.streamed.get(mb)!],
    ]);
    for (const f of extraFragments) {
      oneMiB.set(
        f,
        (
          await job(`f${f}`, `1 MiB bcasts, ${f / 1024} KiB fragments`, `shm:\n  bcast:\n    tree: flat\n    fragmentBytes: ${f}\n`, {
            sizes: [],
            streamed: [mb],
            iterations: 400,
          })
        ).streamed.get(mb)!,
      );
    }
    const model = fitModel(small, large, oneMiB, lastLevelCacheBytes());
    writeModel(out, model);
    jobIo.stdout(
      `shm.model written to ${out}: ${Object.entries(model)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}\n`,
    );
    jobIo.stdout(
      `  for comparison, bytes/µs: one core's memcpy ${round(small.copy!)} (cached) and ${round(small.largeCopy!)} (16 MiB); ` +
        `across two cores, 256 KiB: into lines the other core has read ${round(small.writeShared!)}, out of lines it has just written ${round(small.readRemote!)}\n`,
    );

    // With the model in force: what it chooses, and how well it predicts single broadcasts.
    const config = loadConfigFile(out);
    for (const p of [2, 4, 8]) {
      const layout = shmLayout(config, p, cpus().length);
      jobIo.stdout(
        `  ${p} ranks: ${layout.tree} tree, queue ${layout.bcast.queueBytes / 1024} KiB, fragments ${describeTable(layout.bcast.fragmentForLog2)}\n`,
      );
    }
    const sizes = [8, 1024, 4096, 16384, 65536, 262144, mb, 4 * mb, 8 * mb, 16 * mb];
    const check = await measureRuns('single bcasts with the model, 8 B–16 MiB', out, { sizes, iterations: 4000 });
    progress.finish();
    const layout = shmLayout(config, ranks, cpus().length);
    io.stdout(`\n# single bcast, ${ranks} ranks: predicted vs measured (µs)\n  bytes  fragment  predicted  measured\n`);
    for (const bytes of sizes) {
      const f = layout.bcast.fragmentForLog2[Math.min(26, Math.ceil(Math.log2(Math.max(1, bytes))))]!;
      const shape = { queueBytes: layout.bcast.queueBytes, minFragment: layout.bcast.minFragment, sets: layout.bcast.sets, tree: parseTree(layout.tree) };
      const predicted = predictBcastUs(model, bytes, ranks, cpus().length, shape, f);
      io.stdout(
        `${String(bytes).padStart(8)}  ${String(bytes <= 104 ? 'inline' : f).padStart(8)}  ${predicted.toFixed(2).padStart(9)}  ${check.bcast.get(bytes)!.toFixed(2).padStart(8)}\n`,
      );
    }
    return 0;
  } finally {
    progress.finish();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runTuneJob(ranks: number, config: string, settings: TuneSettings, io: CliIo): Promise<Measured> {
  const { code, records } = await runWorkerJob({ ranks, bind: 'core', config, worker: 'tune-worker.js', settingsVariable: 'TOPOCOLL_TUNE', settings, io });
  if (code !== 0) throw new TopocollError('EINVAL', `topocoll tune: a measurement job failed (exit ${code})`);
  const measured: Measured = { bcast: new Map(), streamed: new Map() };
  for (const o of records as { kind: string; bytesPerUs?: number; us?: number; bytes?: number }[]) {
    if (o.kind === 'copy') measured.copy = o.bytesPerUs;
    else if (o.kind === 'largecopy') measured.largeCopy = o.bytesPerUs;
    else if (o.kind === 'writeshared') measured.writeShared = o.bytesPerUs;
    else if (o.kind === 'readremote') measured.readRemote = o.bytesPerUs;
    else if (o.kind === 'pingpong') measured.pingpong = o.us;
    else if (o.kind === 'stream') measured.stream = o.us;
    else if (o.kind === 'bcast') measured.bcast.set(o.bytes!, o.us!);
    else if (o.kind === 'streamed') measured.streamed.set(o.bytes!, o.us!);
  }
  return measured;
}

/**
 * The model's parameters from the measurements. Notification and call costs come from inline
 * broadcasts. The copy parameters are fitted to the engine's own back-to-back 1 MiB broadcasts
 * with fragments f of 4 KiB … 128 KiB: t = m/c + (m/f)·o, a least-squares fit of the pipeline
 * stage's copy rate c and its fixed cost per fragment o (o ≥ 0). Back-to-back calls measure the
 * pipeline's throughput without its fill, which keeps the two apart; single calls are what the
 * fit is then checked against. A plain memcpy rate would overstate c: the root copies into
 * queue lines the readers still hold, and taking each line back from another core is what
 * limits the pipeline (tune prints both rates). The memory-bound rate comes from 16 MiB
 * broadcasts, and applies from a quarter of the last-level cache up (the root's buffer, the
 * readers' and the queue then no longer fit).
 */
export function fitModel(small: Measured, large: Measured, oneMiB: Map<number, number>, cacheBytes: number | undefined): ShmCostModel {
  const mb = 1 << 20;
  const inline = small.bcast.get(8)!;
  // A notification: what a call costs when it must wait for the other rank's (alternating
  // roots) beyond one that streams; never more than a whole single inline bcast.
  const notifyUs = round(Math.min(inline, Math.max(0.02, small.pingpong! - small.stream!)));
  // What a single inline bcast costs beyond its notification: entering native code, checks.
  const callUs = round(Math.max(0, inline - notifyUs));
  const points = [...oneMiB].map(([f, t]) => ({ x1: mb, x2: mb / f, y: t - callUs }));
  const { perByte, perStage } = leastSquares(points);
  const fitted = perByte > 0 ? 1 / perByte : small.copy!;
  const fragmentUs = round(perStage);
  const perByte16m = (large.streamed.get(16 * mb)! - callUs - ((16 * mb) / 65536) * fragmentUs) / (16 * mb);
  return {
    copyBytesPerUs: round(fitted),
    largeCopyBytesPerUs: round(perByte16m > 0 ? Math.min(fitted, 1 / perByte16m) : small.largeCopy!),
    largeBytes: cacheBytes !== undefined ? Math.max(mb, 2 ** Math.floor(Math.log2(cacheBytes / 4))) : 4 * mb,
    notifyUs,
    fragmentUs,
    callUs,
  };
}

/** y ≈ a·x1 + b·x2 with a > 0 and b ≥ 0, least squares (b = 0 when the free fit makes it negative). */
export function leastSquares(points: { x1: number; x2: number; y: number }[]): { perByte: number; perStage: number } {
  let s11 = 0,
    s12 = 0,
    s22 = 0,
    s1y = 0,
    s2y = 0;
  for (const { x1, x2, y } of points) {
    s11 += x1 * x1;
    s12 += x1 * x2;
    s22 += x2 * x2;
    s1y += x1 * y;
    s2y += x2 * y;
  }
  const det = s11 * s22 - s12 * s12;
  if (det > 0) {
    const a = (s1y * s22 - s2y * s12) / det;
    const b = (s2y * s11 - s1y * s12) / det;
    if (a > 0 && b >= 0) return { perByte: a, perStage: b };
  }
  return { perByte: s11 > 0 ? Math.max(0, s1y / s11) : 0, perStage: 0 };
}

async function repeat<T>(times: number, run: () => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < times; i++) out.push(await run());
  return out;
}

/** Every figure of several runs of the same job: its median. */
function medianOf(runs: Measured[]): Measured {
  const median = (values: (number | undefined)[]): number | undefined => {
    const known = values.filter((v): v is number => v !== undefined).sort((a, b) => a - b);
    return known.length === 0 ? undefined : known[Math.floor(known.length / 2)];
  };
  const pick = (key: Exclude<keyof Measured, 'bcast' | 'streamed'>) => median(runs.map((r) => r[key]));
  const medians = (of: (r: Measured) => Map<number, number>): Map<number, number> =>
    new Map([...of(runs[0]!).keys()].map((bytes) => [bytes, median(runs.map((r) => of(r).get(bytes)))!]));
  return {
    copy: pick('copy'),
    largeCopy: pick('largeCopy'),
    writeShared: pick('writeShared'),
    readRemote: pick('readRemote'),
    pingpong: pick('pingpong'),
    stream: pick('stream'),
    bcast: medians((r) => r.bcast),
    streamed: medians((r) => r.streamed),
  };
}

/** Sets shm.model in the YAML file, keeping everything else (and its comments). */
function writeModel(file: string, model: ShmCostModel): void {
  const { doc } = parseYaml(readOptionalTextFile(file, 'ECONFIG', 'configuration file') ?? '', file);
  for (const [key, value] of Object.entries(model)) doc.setIn(['shm', 'model', key], value);
  writeFileSync(file, doc.toString());
}

function round(v: number): number {
  return Number(v.toPrecision(3));
}

/** `4 KiB up to 16 KiB, 32 KiB up to …` from the per-size table. */
function describeTable(table: number[]): string {
  const parts: string[] = [];
  table.forEach((f, i) => {
    if (i > 0 && table[i - 1] === f && i < table.length - 1) return;
    if (2 ** i > 104 || i === table.length - 1) parts.push(`${f / 1024} KiB from ${formatBytes(2 ** i)}`);
  });
  return [...new Set(parts)].slice(0, 6).join(', ');
}
