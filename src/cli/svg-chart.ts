/**
 * A line chart on log-log axes as a standalone SVG document: a pure function of its input, no
 * clock, no locale and no randomness, so the same chart always gives the same bytes (charts are
 * committed beside bench/RESULTS.md and regenerated from saved rows; a diff must mean new data).
 */

export type Marker = 'circle' | 'square' | 'diamond' | 'triangle' | 'none';

export interface ChartSeries {
  label: string;
  /** Any SVG colour. */
  color: string;
  dashed?: boolean;
  marker: Marker;
  /** Points with x or y ≤ 0 (or not finite) cannot sit on a log axis and are left out. */
  points: readonly { x: number; y: number }[];
}

export interface LogLogChart {
  title: string;
  /** Under the title (e.g. what the sizes mean). */
  subtitle?: string;
  xLabel: string;
  yLabel: string;
  /** x values are bytes: ticks at powers of two, labelled 4 B, 1 KiB, 1 MiB. */
  footer?: string;
  series: readonly ChartSeries[];
}

const WIDTH = 760;
const HEIGHT = 500;
const PLOT = { left: 78, right: 736, top: 96, bottom: 410 };
const FONT = 'font-family="Helvetica, Arial, sans-serif"';
/** At most this many labelled ticks per axis; beyond it every second (fourth, …) power is labelled. */
const MAX_X_TICKS = 12;

/** `4 B`, `512 B`, `1 KiB`, `64 KiB`, `1 MiB`, `1 GiB` for powers of two (and plain numbers otherwise). */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let unit = 0;
  let v = bytes;
  while (v >= 1024 && unit < units.length - 1 && Number.isInteger(v / 1024)) {
    v /= 1024;
    unit++;
  }
  return `${v} ${units[unit]}`;
}

/** A 1-2-5 tick as mantissa × 10^exponent, kept apart so labels carry no floating-point residue. */
interface DecimalTick {
  mantissa: 1 | 2 | 5;
  exponent: number;
}

const tickValue = (t: DecimalTick): number => t.mantissa * 10 ** t.exponent;

/** `0.05`, `0.1`, `2`, `10`, `5000` — written from the digits, never through toString of a float. */
export function formatDecimalTick(t: DecimalTick): string {
  if (t.exponent >= 0) return String(t.mantissa) + '0'.repeat(t.exponent);
  return '0.' + '0'.repeat(-t.exponent - 1) + String(t.mantissa);
}

/** The 1-2-5 ticks from the largest at or below `lo` to the smallest at or above `hi`. */
function decimalTicks(lo: number, hi: number): DecimalTick[] {
  const steps: (1 | 2 | 5)[] = [1, 2, 5];
  const ticks: DecimalTick[] = [];
  for (let e = Math.floor(Math.log10(lo)) - 1; e <= Math.ceil(Math.log10(hi)) + 1; e++) {
    for (const mantissa of steps) ticks.push({ mantissa, exponent: e });
  }
  // A small relative tolerance: 10 ** e is not exact for negative e.
  const eps = 1e-9;
  let first = 0;
  for (let i = 0; i < ticks.length; i++) if (tickValue(ticks[i]!) <= lo * (1 + eps)) first = i;
  let last = ticks.length - 1;
  for (let i = ticks.length - 1; i >= 0; i--) if (tickValue(ticks[i]!) >= hi * (1 - eps)) last = i;
  return ticks.slice(first, last + 1);
}

function nextTick(t: DecimalTick): DecimalTick {
  return t.mantissa === 1
    ? { mantissa: 2, exponent: t.exponent }
    : t.mantissa === 2
      ? { mantissa: 5, exponent: t.exponent }
      : { mantissa: 1, exponent: t.exponent + 1 };
}

/** Six significant digits at most, so a value's text does not depend on the last bits of a float. */
const num = (v: number): string => String(Number(v.toPrecision(6)));
/** Coordinates to a tenth of a pixel: enough for the eye, stable in the text. */
const px = (v: number): string => v.toFixed(1);

export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function markerPath(marker: Marker, x: number, y: number, color: string): string {
  const r = 3.5;
  switch (marker) {
    case 'circle':
      return `<circle cx="${px(x)}" cy="${px(y)}" r="${r}" fill="${color}"/>`;
    case 'square':
      return `<rect x="${px(x - r)}" y="${px(y - r)}" width="${2 * r}" height="${2 * r}" fill="${color}"/>`;
    case 'diamond':
      return `<path d="M${px(x)} ${px(y - r - 1)}L${px(x + r + 1)} ${px(y)}L${px(x)} ${px(y + r + 1)}L${px(x - r - 1)} ${px(y)}Z" fill="${color}"/>`;
    case 'triangle':
      return `<path d="M${px(x)} ${px(y - r - 1)}L${px(x + r + 1)} ${px(y + r)}L${px(x - r - 1)} ${px(y + r)}Z" fill="${color}"/>`;
    case 'none':
      return '';
  }
}

/** The chart's scales: data → pixel, both logarithmic; exported for tests. */
export function chartScales(series: readonly ChartSeries[]): {
  x: (v: number) => number;
  y: (v: number) => number;
  xTicks: number[];
  yTicks: DecimalTick[];
  yLabelled: DecimalTick[];
} {
  const points = series.flatMap((s) => plotted(s.points));
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  // An empty chart still draws axes (1 B … 1 KiB, 1 … 10 µs) rather than failing.
  let xLo = xs.length > 0 ? Math.min(...xs) : 1;
  let xHi = xs.length > 0 ? Math.max(...xs) : 1024;
  if (xLo === xHi) {
    xLo /= 2;
    xHi *= 2;
  }
  const yMin = ys.length > 0 ? Math.min(...ys) : 1;
  const yMax = ys.length > 0 ? Math.max(...ys) : 10;
  let yTicks = decimalTicks(yMin, yMax);
  // One value that is itself a tick: the next tick up gives the axis its height.
  if (yTicks.length < 2) yTicks.push(nextTick(yTicks[0]!));
  // More than three decades: the axis runs from decade to decade and only decades are labelled
  // (the 2s and 5s stay as faint lines), so both ends carry a label.
  const decadesOnly = Math.log10(tickValue(yTicks[yTicks.length - 1]!) / tickValue(yTicks[0]!)) > 3;
  if (decadesOnly) yTicks = decimalTicks(10 ** Math.floor(Math.log10(yMin) + 1e-9), 10 ** Math.ceil(Math.log10(yMax) - 1e-9));
  const yLo = tickValue(yTicks[0]!);
  const yHi = tickValue(yTicks[yTicks.length - 1]!);
  // Half a doubling of room on each side so the end markers do not sit on the frame.
  const lx0 = Math.log2(xLo) - 0.5;
  const lx1 = Math.log2(xHi) + 0.5;
  const x = (v: number) => PLOT.left + ((Math.log2(v) - lx0) / (lx1 - lx0)) * (PLOT.right - PLOT.left);
  const y = (v: number) => PLOT.bottom - ((Math.log10(v) - Math.log10(yLo)) / (Math.log10(yHi) - Math.log10(yLo))) * (PLOT.bottom - PLOT.top);
  const e0 = Math.ceil(Math.log2(xLo) - 1e-9);
  const e1 = Math.floor(Math.log2(xHi) + 1e-9);
  let stride = 1;
  while ((e1 - e0) / stride + 1 > MAX_X_TICKS) stride *= 2;
  const xTicks: number[] = [];
  for (let e = e0; e <= e1; e++) if ((e - e0) % stride === 0) xTicks.push(2 ** e);
  const yLabelled = decadesOnly ? yTicks.filter((t) => t.mantissa === 1) : yTicks;
  return { x, y, xTicks, yTicks, yLabelled };
}

function plotted(points: readonly { x: number; y: number }[]): { x: number; y: number }[] {
  return points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y) && p.x > 0 && p.y > 0).sort((a, b) => a.x - b.x);
}

/** Average advance of a 12 px Helvetica/Arial character, a little generous. */
const LEGEND_CHAR_PX = 7;

/** A legend entry's width: the line and marker (34 px), the label, and a gap before the next. */
function legendEntryWidth(label: string): number {
  return 34 + label.length * LEGEND_CHAR_PX + 18;
}

/** Entries (by index) split into at most two rows that each fit `width`, in order. */
function legendRows(widths: number[], width: number): number[][] {
  const all = widths.map((_, i) => i);
  if (widths.reduce((a, b) => a + b, 0) <= width) return [all];
  let fit = 0;
  let used = 0;
  while (fit < widths.length && used + widths[fit]! <= width) used += widths[fit++]!;
  // The first row holds at least one entry, even one wider than the plot.
  const split = Math.max(1, fit);
  return [all.slice(0, split), all.slice(split)];
}

/** The chart as an SVG document (UTF-8 text, one element per line, ending in a newline). */
export function renderLogLogChart(chart: LogLogChart): string {
  const { x, y, xTicks, yTicks, yLabelled } = chartScales(chart.series);
  const out: string[] = [];
  out.push(
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" ${FONT} font-size="12">`,
    `<title>${escapeXml(chart.title)}</title>`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    `<text x="${WIDTH / 2}" y="26" text-anchor="middle" font-size="16" font-weight="bold">${escapeXml(chart.title)}</text>`,
  );
  if (chart.subtitle) out.push(`<text x="${WIDTH / 2}" y="46" text-anchor="middle" fill="#444444">${escapeXml(chart.subtitle)}</text>`);

  // Grid and axes.
  out.push(`<g class="grid" stroke="#e3e3e3" stroke-width="1">`);
  for (const t of yTicks) {
    const labelled = yLabelled.includes(t);
    out.push(`<line x1="${PLOT.left}" x2="${PLOT.right}" y1="${px(y(tickValue(t)))}" y2="${px(y(tickValue(t)))}"${labelled ? '' : ' stroke="#f2f2f2"'}/>`);
  }
  for (const v of xTicks) out.push(`<line x1="${px(x(v))}" x2="${px(x(v))}" y1="${PLOT.top}" y2="${PLOT.bottom}"/>`);
  out.push(`</g>`);
  out.push(
    `<rect class="frame" x="${PLOT.left}" y="${PLOT.top}" width="${PLOT.right - PLOT.left}" height="${PLOT.bottom - PLOT.top}" fill="none" stroke="#888888"/>`,
  );
  out.push(`<g class="x-ticks" text-anchor="middle" fill="#333333">`);
  for (const v of xTicks) out.push(`<text x="${px(x(v))}" y="${PLOT.bottom + 18}" data-value="${num(v)}">${escapeXml(formatBytes(v))}</text>`);
  out.push(`</g>`);
  out.push(`<g class="y-ticks" text-anchor="end" fill="#333333">`);
  for (const t of yLabelled)
    out.push(`<text x="${PLOT.left - 6}" y="${px(y(tickValue(t)) + 4)}" data-value="${formatDecimalTick(t)}">${formatDecimalTick(t)}</text>`);
  out.push(`</g>`);
  out.push(`<text x="${(PLOT.left + PLOT.right) / 2}" y="${PLOT.bottom + 40}" text-anchor="middle">${escapeXml(chart.xLabel)}</text>`);
  out.push(`<text transform="translate(20 ${(PLOT.top + PLOT.bottom) / 2}) rotate(-90)" text-anchor="middle">${escapeXml(chart.yLabel)}</text>`);

  // The series, in the order given (later ones drawn on top).
  for (const s of chart.series) {
    const pts = plotted(s.points);
    if (pts.length === 0) continue;
    out.push(`<g class="series" data-series="${escapeXml(s.label)}">`);
    const d = pts.map((p, i) => `${i === 0 ? 'M' : 'L'}${px(x(p.x))} ${px(y(p.y))}`).join('');
    out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    for (const p of pts) {
      const m = markerPath(s.marker, x(p.x), y(p.y), s.color);
      // A tooltip per point in viewers that show <title>.
      if (m) out.push(`<g>${m}<title>${escapeXml(`${s.label}, ${formatBytes(p.x)}: ${num(p.y)}`)}</title></g>`);
    }
    out.push(`</g>`);
  }

  // The legend, above the plot: entries left to right, each as wide as its label (estimated, no
  // font metrics at hand: LEGEND_CHAR_PX per character), in one centred row, or two when one
  // would be wider than the plot.
  const entries = chart.series.filter((s) => plotted(s.points).length > 0);
  const widths = entries.map((s) => legendEntryWidth(s.label));
  const rows = legendRows(widths, PLOT.right - PLOT.left);
  out.push(`<g class="legend">`);
  rows.forEach((row, r) => {
    const rowWidth = row.reduce((sum, i) => sum + widths[i]!, 0);
    let lx = (PLOT.left + PLOT.right) / 2 - rowWidth / 2;
    const ly = rows.length === 1 ? 72 : 64 + r * 18;
    for (const i of row) {
      const s = entries[i]!;
      out.push(`<g data-series="${escapeXml(s.label)}">`);
      out.push(
        `<line x1="${px(lx)}" x2="${px(lx + 28)}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`,
      );
      const m = markerPath(s.marker, lx + 14, ly, s.color);
      if (m) out.push(m);
      out.push(`<text x="${px(lx + 34)}" y="${ly + 4}">${escapeXml(s.label)}</text>`);
      out.push(`</g>`);
      lx += widths[i]!;
    }
  });
  out.push(`</g>`);
  if (chart.footer)
    out.push(`<text class="footer" x="${WIDTH - 12}" y="${HEIGHT - 12}" text-anchor="end" font-size="11" fill="#666666">${escapeXml(chart.footer)}</text>`);
  out.push(`</svg>`);
  return out.join('\n') + '\n';
}
