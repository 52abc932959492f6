import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatAlgorithm } from '../../algorithms/algorithm-choice.js';
import { chooseBarrier } from '../../algorithms/barrier-model.js';
import type { LinkModel } from '../../algorithms/cost-model.js';
import { parseYaml } from '../../config/load.js';
import { TopocollError } from '../../errors.js';
import { combineRate as operatorCombineRate, nativeLimits } from '../../native.js';
import { discoverMachine } from '../../topology/discover.js';
import { readOptionalTextFile } from '../../util/read-text-file.js';
import type { CliIo } from '../io.js';
import { bindings, nodeLayout } from '../launcher.js';
import { summarizeLink, type LinkSummary } from '../link-fit.js';
import type { LinkSettings, LinksRound } from '../links-worker.js';
import { Progress } from '../progress.js';
import { runWorkerJob } from '../worker-job.js';

/** Group sizes the printed barrier table shows the model's choice for. */
const SHOWN_SIZES = [2, 3, 4, 8, 16, 32, 64, 256];

const KIB = 1024;
const MIB = 1024 * 1024;

/** The settings of a full measurement and of `--quick` (tests: fewer trials and sizes). */
export function linkSettings(quick: boolean): Omit<LinkSettings, 'exchangeSegmentBytes' | 'sameCore'> {
  return quick
    ? { messages: 128, repeats: 31, sizedRepeats: 9, rounds: 3, sizes: [4 * KIB, 64 * KIB, MIB], combineSizes: [256 * KIB, MIB] }
    : {
        messages: 128,
        repeats: 101,
        sizedRepeats: 21,
        rounds: 7,
        sizes: [4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB],
        combineSizes: [256 * KIB, 512 * KIB, MIB, 2 * MIB],
      };
}

/** The kinds of link measured, each by its own two-rank job. */
export const LINK_KINDS = [
  { key: 'shm', set: 'links', nodes: 1, sameCore: false, what: 'shared memory, two cores' },
  { key: 'tcp', set: 'links', nodes: 2, sameCore: false, what: 'TCP between 2 emulated nodes, two cores' },
  { key: 'shm', set: 'oversubscribed', nodes: 1, sameCore: true, what: 'shared memory, both ranks on one core' },
  { key: 'tcp', set: 'oversubscribed', nodes: 2, sameCore: true, what: 'TCP between 2 emulated nodes, both ranks on one core' },
] as const;

export type LinkKind = (typeof LINK_KINDS)[number];

export interface MeasuredLinks {
  rounds: number;
  /** Per kind, in LINK_KINDS order. */
  links: { kind: LinkKind; summary: LinkSummary }[];
}

/**
 * `topocoll tune links`: the LogGP parameters of every kind of link between two ranks (shared
 * memory on one node, TCP between two emulated nodes over loopback; each on two cores, and with
 * both ranks on one core for the oversubscribed set), measured through the executor by
 * links-worker.ts, `rounds` times each; link-fit.ts derives the parameters.
 */
export async function measureLinks(io: CliIo, quick: boolean): Promise<MeasuredLinks> {
  const base = linkSettings(quick);
  const machine = discoverMachine({ env: io.env });
  // Cores 0 and 1 of the job layout's binding (rank r on core r), and core 0 twice.
  const twoCores = bindings(machine, 'core', nodeLayout(2, 1), io.stderr);
  if (twoCores[0]!.join(',') === twoCores[1]!.join(',')) {
    io.stderr('topocoll tune: this machine has one core: the two-core links are measured on one core as well\n');
  }
  const progress = new Progress('topocoll tune links', LINK_KINDS.length);
  const jobIo = progress.around(io);
  const links: MeasuredLinks['links'] = [];
  // The operator alone, on this process's thread, over the largest combined message: the bound
  // the combine rate falls back to when the paired trials cannot tell it from the noise.
  const operatorBytesPerUs = operatorCombineRate(Math.max(...base.combineSizes), quick ? 20 : 100);
  // The "links" set describes ranks that have their cores: measured with waits that spin first
  // whatever else runs (waits: spin), the figures such ranks get. Under waits: auto, work beside
  // the measurement would turn its waits into sleeps and the set into a measure of the load.
  const dir = mkdtempSync(join(tmpdir(), 'topocoll-tune-links-'));
  const dedicated = join(dir, 'dedicated-cores.yaml');
  writeFileSync(dedicated, 'waits:\n  mode: spin\n');
  try {
    for (const kind of LINK_KINDS) {
      progress.step(kind.what);
      const settings: LinkSettings = {
        ...base,
        // The combine rate is the core's: measured once, over shared memory.
        combineSizes: kind.key === 'shm' && kind.set === 'links' ? base.combineSizes : [],
        sameCore: kind.sameCore,
        exchangeSegmentBytes: kind.nodes > 1 ? nativeLimits().eagerBytes : 0,
      };
      const { code, records } = await runWorkerJob({
        ranks: 2,
        bind: 'core',
        cpus: kind.sameCore ? [twoCores[0]!, twoCores[0]!] : twoCores,
        nodes: kind.nodes,
        ...(kind.set === 'links' ? { config: dedicated } : {}),
        worker: 'links-worker.js',
        settingsVariable: 'TOPOCOLL_LINKS',
        settings,
        io: jobIo,
      });
      const rounds = (records as LinksRound[]).filter((r) => r.kind === 'links');
      if (code !== 0 || rounds.length !== base.rounds) {
        throw new TopocollError('EINVAL', `topocoll tune links: the measurement job (${kind.what}) failed (exit ${code})`);
      }
      links.push({ kind, summary: summarizeLink(rounds, settings.combineSizes.length > 0 ? operatorBytesPerUs : NaN) });
    }
  } finally {
    progress.finish();
    rmSync(dir, { recursive: true, force: true });
  }
  return { rounds: base.rounds, links };
}

const LINK_FIELDS = ['L', 'os', 'or', 'g', 'G', 'Gx'] as const satisfies readonly (keyof LinkModel)[];

/** Three significant digits: what the noise leaves of any of these figures. */
export function roundFigure(v: number): number {
  return Number(v.toPrecision(3));
}

/**
 * The values `measured` writes under `model`: callUs and the combine rate from the shared-memory
 * link (link-fit.ts's combineRate: a lower bound when the cost hides within the noise, at worst
 * the operator timed alone; none only when neither was measured).
 */
export function modelValues(measured: MeasuredLinks): {
  callUs: number;
  combineBytesPerUs: number | undefined;
  links: Record<string, Record<string, LinkModel>>;
} {
  const links: Record<string, Record<string, LinkModel>> = { links: {}, oversubscribed: {} };
  for (const { kind, summary } of measured.links) {
    links[kind.set]![kind.key] = Object.fromEntries(LINK_FIELDS.map((f) => [f, roundFigure(summary.value[f])])) as unknown as LinkModel;
  }
  const shm = measured.links.find((l) => l.kind.key === 'shm' && l.kind.set === 'links')!.summary;
  const combine = shm.combine.bytesPerUs > 0 ? roundFigure(shm.combine.bytesPerUs) : undefined;
  return { callUs: roundFigure(shm.value.callUs), combineBytesPerUs: combine, links };
}

/** Sets model.callUs, model.combineBytesPerUs, model.links.{shm,tcp} and model.oversubscribed.{shm,tcp} in `out`, keeping the rest. */
export function writeLinks(out: string, measured: MeasuredLinks): void {
  const { doc } = parseYaml(readOptionalTextFile(out, 'ECONFIG', 'configuration file') ?? '', out);
  const values = modelValues(measured);
  doc.setIn(['model', 'callUs'], values.callUs);
  if (values.combineBytesPerUs !== undefined) doc.setIn(['model', 'combineBytesPerUs'], values.combineBytesPerUs);
  for (const [set, kinds] of Object.entries(values.links)) {
    for (const [key, link] of Object.entries(kinds)) {
      for (const f of LINK_FIELDS) doc.setIn(['model', set, key, f], link[f]);
    }
  }
  writeFileSync(out, doc.toString());
}

/** What tune prints about the links: the parameters with their noise, the fits' verdicts, the barrier the model picks. */
export function formatLinks(out: string, measured: MeasuredLinks): string {
  const values = modelValues(measured);
  const pct = (x: number) => `±${(x * 100).toFixed(x < 0.1 ? 1 : 0)}%`;
  const cell = (v: number, noise: number) => `${roundFigure(v)} ${pct(noise)}`.padEnd(18);
  const lines = [
    `model written to ${out} (µs, µs per byte; each figure the median of ${measured.rounds} rounds, ± its interquartile range / median):`,
    `  ${'link'.padEnd(20)}${['L', 'o_s', 'o_r', 'g', 'G', 'Gx'].map((h) => h.padEnd(18)).join('')}`,
  ];
  for (const { kind, summary } of measured.links) {
    const name = linkName(kind);
    lines.push(`  ${name.padEnd(20)}${LINK_FIELDS.map((f) => cell(summary.value[f], summary.noise[f])).join('')}`);
  }
  lines.push('  a call that moves nothing (callUs), a zero-byte ping-pong:');
  for (const { kind, summary } of measured.links) {
    const v = summary.value;
    lines.push(`    ${linkName(kind).padEnd(20)}call ${cell(v.callUs, summary.noise.callUs)}ping-pong ${roundFigure(v.pingpongUs)} µs`);
  }
  const shm = measured.links.find((l) => l.kind.key === 'shm' && l.kind.set === 'links')!.summary.combine;
  lines.push(
    `  combining received data (sum, float64; shm, RecvReduce against Recv in paired trials): ${shm.usPerByte.toPrecision(2)} µs per byte, interquartile range ${shm.iqrUsPerByte.toPrecision(2)}` +
      (shm.resolved
        ? ` → combineBytesPerUs ${roundFigure(shm.bytesPerUs)}`
        : ` — within the noise (the executor combines while it receives): combineBytesPerUs at least ${roundFigure(shm.bytesPerUs)}, the larger of 1 / (median + interquartile range) and the operator timed alone (${roundFigure(shm.operatorBytesPerUs)} bytes/µs)`),
  );
  lines.push(
    values.combineBytesPerUs !== undefined
      ? `  written: callUs ${values.callUs}, combineBytesPerUs ${values.combineBytesPerUs} (both from shm)`
      : `  written: callUs ${values.callUs} (from shm); no combine rate measured: combineBytesPerUs left as it was`,
  );
  lines.push('  one G per link? (least squares on relative errors over the sizes; residual = (measured − fitted) / measured)');
  for (const { kind, summary } of measured.links) {
    const name = linkName(kind);
    lines.push(`    ${name} G: ${summary.gVerdict.text}`, `    ${name} Gx: ${summary.gxVerdict.text.replace(/\bG\b/g, 'Gx')}`);
  }
  for (const { kind, summary } of measured.links) {
    const name = linkName(kind);
    lines.push('', `# barrier over ${name}: the model's prediction per algorithm (µs), * = chosen`);
    const p = summary.value;
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
  return lines.join('\n') + '\n';
}

function linkName(kind: LinkKind): string {
  return kind.set === 'links' ? kind.key : `oversubscribed.${kind.key}`;
}

/** `topocoll tune links` (and its old name `tune barrier`): measure, write under `model` in `out`, print. */
export async function tuneLinks(out: string, io: CliIo, quick: boolean): Promise<number> {
  io.stderr('topocoll tune: measuring the links (shared memory and TCP, on two cores and on one)…\n');
  const measured = await measureLinks(io, quick);
  writeLinks(out, measured);
  io.stdout(formatLinks(out, measured));
  return 0;
}
