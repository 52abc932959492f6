/**
 * From the raw times of links-worker.ts to the LogGP parameters of cost-model.ts's LinkModel,
 * and the statistics `topocoll tune links` prints with them. Pure functions (unit-tested).
 */
import type { LinkModel } from '../algorithms/cost-model.js';
import type { LinksRound } from './links-worker.js';

/** One round's parameters of a link. */
export interface LinkEstimate extends LinkModel {
  /** A call that moves nothing, µs. */
  callUs: number;
  /** A zero-byte ping-pong, µs. */
  pingpongUs: number;
  /** µs per byte a rank spends adding what it receives into its own (sum, float64) beyond taking it; NaN: not measured. */
  combineUsPerByte: number;
}

export const ESTIMATE_KEYS = ['L', 'os', 'or', 'g', 'G', 'Gx', 'combineUsPerByte', 'callUs', 'pingpongUs'] as const;

/** The median of `values` (the mean of the middle two when even). */
export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** The q-quantile of `values`, interpolated between the order statistics. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const at = q * (sorted.length - 1);
  const lo = Math.floor(at);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/** The noise of a figure: interquartile range over the median (0 when the median is 0). */
export function relativeIqr(values: readonly number[]): number {
  const m = median(values);
  if (m === 0 || !Number.isFinite(m)) return 0;
  return (quantile(values, 0.75) - quantile(values, 0.25)) / Math.abs(m);
}

export interface LineFit {
  slope: number;
  intercept: number;
  /** (measured − fitted) / measured, per point. */
  residuals: number[];
}

/**
 * y ≈ intercept + slope·x by least squares, by default on relative errors (each point weighted
 * 1/y²): sizes that span three decades count alike, not only the largest.
 */
export function fitLine(points: readonly { x: number; y: number }[], relative = true): LineFit {
  let sw = 0,
    sx = 0,
    sy = 0,
    sxx = 0,
    sxy = 0;
  for (const { x, y } of points) {
    const w = relative && y !== 0 ? 1 / (y * y) : 1;
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const det = sw * sxx - sx * sx;
  const slope = det > 0 ? (sw * sxy - sx * sy) / det : 0;
  const intercept = sw > 0 ? (sy - slope * sx) / sw : 0;
  const residuals = points.map(({ x, y }) => (y === 0 ? 0 : (y - (intercept + slope * x)) / y));
  return { slope, intercept, residuals };
}

/** Largest |residual| a single G is accepted with. */
export const LINEAR_TOLERANCE = 0.1;

/**
 * Whether one per-byte cost describes the one-way times of every size (LogGP's G), or the cost
 * per byte depends on the size (PLogP's g(m)): the verdict line, from the fit's residuals.
 * `zeroByteUs`: a zero-byte message one way, for the table's cost per byte beyond it.
 */
export function linearityVerdict(
  points: readonly { x: number; y: number }[],
  zeroByteUs: number,
  tolerance = LINEAR_TOLERANCE,
): { fits: boolean; maxResidual: number; text: string } {
  const fit = fitLine(points);
  const maxResidual = Math.max(0, ...fit.residuals.map(Math.abs));
  const residuals = points.map((p, i) => `${formatBytes(p.x)} ${percent(fit.residuals[i]!)}`).join(', ');
  if (maxResidual <= tolerance) return { fits: true, maxResidual, text: `linear G fits (max residual ${percent(maxResidual, false)}; ${residuals})` };
  const table = points.map((p) => `${formatBytes(p.x)} ${p.y.toPrecision(3)} µs ${((p.y - zeroByteUs) / p.x).toPrecision(3)} µs/B`).join(', ');
  return {
    fits: false,
    maxResidual,
    text: `G varies with size (max residual ${percent(maxResidual, false)}; ${residuals}): g(m) table, one way and per byte beyond a zero-byte message: ${table}`,
  };
}

/**
 * One round's parameters (see links-worker.ts for what each time holds; K = `messages`):
 * - o_s, o_r: the send and late bursts' difference between 2K and K messages, over K; where the
 *   noise hides that difference (it comes out ≤ 0), the smaller of the bursts' times beyond the
 *   call per message — an upper bound (it still holds the first message's cost), and an overhead
 *   is a real cost, never 0;
 * - g: the live bursts' difference over K, at least max(o_s, o_r): the gap is never shorter
 *   than either overhead;
 * - one way = (pingpong − c)/2, L = one way − o_s − o_r (at least 0);
 * - G: the slope of the sized ping-pongs' one-way time (pingpong(m) − c)/2 over m;
 * - Gx: the slope of the exchanges' time − c over m (bytes each way);
 * - combineUsPerByte: the slope of RecvReduce's time beyond Recv's over m (plain least squares:
 *   the differences are small and may be negative); NaN when not measured.
 */
export function estimateLink(r: LinksRound): LinkEstimate {
  const c = r.callUs;
  const k = r.messages;
  const perMessage = ([once, twice]: [number, number]) => Math.max(0, (twice - once) / k);
  const overhead = (burst: [number, number]) => {
    const difference = perMessage(burst);
    if (difference > 0) return difference;
    const bounds = [(burst[0] - c) / k, (burst[1] - c) / (2 * k)].filter((b) => b > 0);
    return bounds.length > 0 ? Math.min(...bounds) : burst[0] / k;
  };
  const os = overhead(r.sendBurstUs);
  const or = overhead(r.lateBurstUs);
  const g = Math.max(os, or, perMessage(r.liveBurstUs));
  const oneWay = Math.max(0, (r.pingpongUs - c) / 2);
  const L = Math.max(0, oneWay - os - or);
  const G = fitLine(r.pingpong.map(([m, t]) => ({ x: m, y: (t - c) / 2 }))).slope;
  const Gx = fitLine(r.exchange.map(([m, t]) => ({ x: m, y: t - c }))).slope;
  const combineUsPerByte =
    r.combine.length >= 2
      ? fitLine(
          r.combine.map(([m, t]) => ({ x: m, y: t })),
          false,
        ).slope
      : NaN;
  return { L, os, or, g, G, Gx, combineUsPerByte, callUs: c, pingpongUs: r.pingpongUs };
}

/**
 * The combine rate from the rounds' costs per byte (RecvReduce beyond Recv): 1 / their median
 * when it stands out of their noise (median > interquartile range). Else the combining hides
 * within the noise (the executor combines as it receives, and the copy is the slower part) and
 * the rate has two lower bounds: 1 / (median + interquartile range), the largest cost the noise
 * leaves possible (when positive), and `operatorBytesPerUs`, the operator timed alone (combining
 * beside a receive cannot cost more than combining with nothing to hide behind); the larger
 * (tighter) one is taken. NaN: nothing measured, or neither bound.
 */
export function combineRate(costs: readonly number[], operatorBytesPerUs = NaN): CombineRate {
  const m = median(costs);
  const iqr = quantile(costs, 0.75) - quantile(costs, 0.25);
  const resolved = m > iqr;
  const bound = m + iqr;
  const bounds = [bound > 0 ? 1 / bound : NaN, operatorBytesPerUs].filter((x) => x > 0);
  const bytesPerUs = costs.length === 0 ? NaN : resolved ? 1 / m : bounds.length > 0 ? Math.max(...bounds) : NaN;
  return { bytesPerUs, resolved, usPerByte: m, iqrUsPerByte: iqr, operatorBytesPerUs };
}

export interface CombineRate {
  /** NaN: not measured, or no positive bound. */
  bytesPerUs: number;
  /** The cost stood out of the noise (else bytesPerUs is a lower bound). */
  resolved: boolean;
  /** The median cost per byte over the rounds, and its interquartile range (µs per byte). */
  usPerByte: number;
  iqrUsPerByte: number;
  /** The operator timed alone, bytes/µs; NaN: not timed. */
  operatorBytesPerUs: number;
}

export interface LinkSummary {
  /** Each parameter: the median over the rounds. */
  value: LinkEstimate;
  /** The combine rate (NaN when not measured on this link). */
  combine: CombineRate;
  /** Each parameter's noise: interquartile range over median, over the rounds. */
  noise: Record<(typeof ESTIMATE_KEYS)[number], number>;
  /** The verdict on G: the median one-way times over the rounds against the sizes. */
  gVerdict: ReturnType<typeof linearityVerdict>;
  /** The same for the exchanges (Gx). */
  gxVerdict: ReturnType<typeof linearityVerdict>;
}

/**
 * The rounds of one link summarised: medians, their noise, the combine rate (with the operator
 * timed alone as its fallback bound, see combineRate) and the verdicts on G and Gx.
 */
export function summarizeLink(rounds: readonly LinksRound[], operatorBytesPerUs = NaN): LinkSummary {
  const estimates = rounds.map(estimateLink);
  const value = {} as LinkEstimate;
  const noise = {} as LinkSummary['noise'];
  for (const key of ESTIMATE_KEYS) {
    const values = estimates.map((e) => e[key]);
    value[key] = median(values);
    noise[key] = relativeIqr(values);
  }
  const c = value.callUs;
  const zeroOneWay = Math.max(0, (value.pingpongUs - c) / 2);
  const curve = (of: (r: LinksRound) => [number, number][], y: (t: number) => number) =>
    of(rounds[0]!).map(([m], i) => ({ x: m, y: y(median(rounds.map((r) => of(r)[i]![1]))) }));
  return {
    value,
    combine: combineRate(
      estimates.map((e) => e.combineUsPerByte).filter((x) => !Number.isNaN(x)),
      operatorBytesPerUs,
    ),
    noise,
    gVerdict: linearityVerdict(
      curve(
        (r) => r.pingpong,
        (t) => (t - c) / 2,
      ),
      zeroOneWay,
    ),
    gxVerdict: linearityVerdict(
      curve(
        (r) => r.exchange,
        (t) => t - c,
      ),
      zeroOneWay,
    ),
  };
}

function percent(x: number, signed = true): string {
  const p = (x * 100).toFixed(1);
  return signed && x >= 0 ? `+${p}%` : `${p}%`;
}

export function formatBytes(b: number): string {
  return b >= 1 << 20 ? `${b / (1 << 20)} MiB` : b >= 1024 ? `${b / 1024} KiB` : `${b} B`;
}
