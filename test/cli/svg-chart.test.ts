import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { describe, expect, it } from 'vitest';
import { chartScales, formatBytes, formatDecimalTick, renderLogLogChart, type ChartSeries, type LogLogChart } from '../../src/cli/svg-chart.js';

const sizes = [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];
const series: ChartSeries[] = [
  { label: 'topocoll sync', color: '#0072B2', marker: 'circle', points: sizes.map((x) => ({ x, y: 0.3 + x / 500 })) },
  { label: 'topocoll async', color: '#CC79A7', marker: 'square', points: sizes.map((x) => ({ x, y: 4 + x / 100 })) },
  { label: 'Open MPI', color: '#D55E00', marker: 'diamond', points: sizes.map((x) => ({ x, y: 0.2 + x / 300 })) },
  { label: 'memcpy <limit> & co', color: '#555555', marker: 'triangle', dashed: true, points: sizes.map((x) => ({ x, y: 0.04 + x / 50 })) },
];
const chart: LogLogChart = {
  title: 'allreduce, 4 ranks, one node',
  subtitle: 'sum of int32 elements',
  xLabel: 'message size',
  yLabel: 'latency per call (µs)',
  footer: 'topocoll abc1234 · 2025-01-31',
  series,
};

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  isArray: (name) => ['g', 'text', 'line', 'circle', 'rect', 'path'].includes(name),
});
type Node = Record<string, unknown>;
/** Every element named `name` anywhere under `node`. */
function all(node: unknown, name: string): Node[] {
  if (Array.isArray(node)) return node.flatMap((n) => all(n, name));
  if (typeof node !== 'object' || node === null) return [];
  const found: Node[] = [];
  for (const [k, v] of Object.entries(node)) {
    if (k === name) found.push(...(Array.isArray(v) ? v : [v]).filter((x): x is Node => typeof x === 'object' && x !== null));
    found.push(...all(v, name));
  }
  return found;
}

describe('the log-log SVG chart', () => {
  it('is well-formed XML with every series drawn and in the legend, labels escaped', () => {
    const svg = renderLogLogChart(chart);
    expect(XMLValidator.validate(svg)).toBe(true);
    const doc = parser.parse(svg) as Node;
    const groups = all(doc, 'g').filter((g) => g['@_class'] === 'series');
    expect(groups.map((g) => g['@_data-series'])).toEqual(series.map((s) => s.label));
    const legend = all(doc, 'g').find((g) => g['@_class'] === 'legend')!;
    expect(all(legend, 'text').map((t) => t['#text'])).toEqual(series.map((s) => s.label));
    // The dashed series is dashed, in the plot and in the legend.
    expect(svg.match(/stroke-dasharray/g)).toHaveLength(2);
    expect(svg).toContain('memcpy &lt;limit&gt; &amp; co');
    expect(svg).toContain('topocoll abc1234 · 2025-01-31');
  });

  it('lays the legend out without overlaps, in two rows when one would not fit', () => {
    // A label's right end at 6.5 px per character (12 px Helvetica averages about 6); each entry
    // must end before the next one's line starts, inside the picture.
    const legendOf = (labels: string[]) => {
      const svg = renderLogLogChart({ ...chart, series: labels.map((label, i) => ({ ...series[i % series.length]!, label })) });
      const legend = all(parser.parse(svg) as Node, 'g').find((g) => g['@_class'] === 'legend')!;
      return all(legend, 'g').map((g) => {
        const line = all(g, 'line')[0]!;
        const text = all(g, 'text')[0]!;
        const label = String(text['#text']);
        return { start: Number(line['@_x1']), end: Number(text['@_x']) + label.length * 6.5, y: Number(line['@_y1']) };
      });
    };
    const check = (labels: string[], rows: number) => {
      const entries = legendOf(labels);
      expect(entries).toHaveLength(labels.length);
      expect(new Set(entries.map((e) => e.y)).size).toBe(rows);
      for (const e of entries) {
        expect(e.start).toBeGreaterThanOrEqual(0);
        expect(e.end).toBeLessThanOrEqual(760);
      }
      for (let i = 1; i < entries.length; i++) if (entries[i]!.y === entries[i - 1]!.y) expect(entries[i - 1]!.end).toBeLessThan(entries[i]!.start);
    };
    check(['topocoll sync', 'topocoll sync, fast path off', 'Open MPI'], 1);
    check(['topocoll sync', 'topocoll async', 'Open MPI', 'memcpy of the whole result', 'topocoll sync, fast path off'], 2);
  });

  it('labels bytes at powers of two and latency at 1-2-5 steps', () => {
    expect([4, 512, 1024, 65536, 1 << 20, 4 << 20, 1 << 30].map(formatBytes)).toEqual(['4 B', '512 B', '1 KiB', '64 KiB', '1 MiB', '4 MiB', '1 GiB']);
    expect(formatDecimalTick({ mantissa: 5, exponent: -2 })).toBe('0.05');
    expect(formatDecimalTick({ mantissa: 2, exponent: 3 })).toBe('2000');
    const doc = parser.parse(renderLogLogChart(chart)) as Node;
    const ticks = (cls: string) =>
      all(
        all(doc, 'g').find((g) => g['@_class'] === cls),
        'text',
      ).map((t) => String(t['#text']));
    expect(ticks('x-ticks')).toEqual(['4 B', '8 B', '16 B', '32 B', '64 B', '128 B', '256 B', '512 B', '1 KiB', '2 KiB', '4 KiB']);
    // 0.12 … 81.96 µs, under three decades: 1-2-5 ticks from 0.1 to 100.
    expect(ticks('y-ticks')).toEqual(['0.1', '0.2', '0.5', '1', '2', '5', '10', '20', '50', '100']);
  });

  it('over more than three decades labels decades only, from one to the next', () => {
    const wide: ChartSeries[] = [
      {
        label: 'a',
        color: '#000',
        marker: 'circle',
        points: [
          { x: 4, y: 0.03 },
          { x: 4 << 20, y: 3000 },
        ],
      },
    ];
    const doc = parser.parse(renderLogLogChart({ ...chart, series: wide })) as Node;
    const texts = (cls: string) =>
      all(
        all(doc, 'g').find((g) => g['@_class'] === cls),
        'text',
      ).map((t) => String(t['#text']));
    expect(texts('y-ticks')).toEqual(['0.01', '0.1', '1', '10', '100', '1000', '10000']);
    // 21 powers of two: every second one labelled, 4 B to 4 MiB.
    expect(texts('x-ticks')).toEqual(['4 B', '16 B', '64 B', '256 B', '1 KiB', '4 KiB', '16 KiB', '64 KiB', '256 KiB', '1 MiB', '4 MiB']);
  });

  it('places points on log scales: monotonic, equal ratios equally far apart', () => {
    const { x, y } = chartScales(series);
    const xs = sizes.map(x);
    for (let i = 1; i < xs.length; i++) {
      expect(xs[i]!).toBeGreaterThan(xs[i - 1]!);
      expect(xs[i]! - xs[i - 1]!).toBeCloseTo(xs[1]! - xs[0]!, 9);
    }
    const ys = [0.05, 0.1, 1, 10, 40].map(y);
    // SVG's y grows downwards: larger latency, smaller y.
    for (let i = 1; i < ys.length; i++) expect(ys[i]!).toBeLessThan(ys[i - 1]!);
    expect(y(1) - y(10)).toBeCloseTo(y(0.1) - y(1), 9);
  });

  it('is deterministic and leaves out points a log axis cannot show', () => {
    expect(renderLogLogChart(chart)).toBe(renderLogLogChart(structuredClone(chart)));
    const shuffled = { ...chart, series: series.map((s) => ({ ...s, points: [...s.points].reverse() })) };
    expect(renderLogLogChart(shuffled)).toBe(renderLogLogChart(chart));
    const withBad = {
      ...chart,
      series: series.map((s, i) => (i === 0 ? { ...s, points: [...s.points, { x: 0, y: 1 }, { x: 8192, y: 0 }, { x: 16384, y: Number.NaN }] } : s)),
    };
    expect(renderLogLogChart(withBad)).toBe(renderLogLogChart(chart));
  });

  it('draws axes for one point and for no points at all', () => {
    for (const points of [[{ x: 64, y: 2 }], []]) {
      const svg = renderLogLogChart({ ...chart, series: [{ label: 'one', color: '#000', marker: 'circle', points }] });
      expect(XMLValidator.validate(svg)).toBe(true);
      expect(svg).not.toMatch(/NaN|Infinity/);
    }
  });
});
