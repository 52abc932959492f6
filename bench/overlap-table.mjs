// The overlap tables of bench/RESULTS.md from the JSON lines of bench/overlap.mjs (topocoll's
// requests) and build/bench/coll_overlap (Open MPI's MPI_Ibcast / MPI_Iallreduce): per
// collective, a row per size and a column per p, each cell "topocoll overlap % (pure µs) /
// Open MPI overlap % (pure µs)". Where a file holds several runs of a cell, the median overlap.
// Where rows of `bench/overlap.mjs --one-sided` (impl 'topocoll-one-sided') exist for a
// collective, its cells are "request / one-sided / Open MPI", and a further table per such
// collective follows the overlap tables: S1's estimate beside the one-sided measurement, each
// cell "measured pure µs / estimate µs" (medians over runs).
// Run: node bench/overlap-table.mjs bench/data/overlap-*.jsonl
import { readFileSync } from 'node:fs';

const rows = process.argv
  .slice(2)
  .flatMap((file) => readFileSync(file, 'utf8').split('\n'))
  .filter((line) => line.startsWith('{'))
  .map((line) => JSON.parse(line));

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const bytesText = (b) => (b >= 1 << 20 ? `${b / (1 << 20)} MiB` : b >= 1024 ? `${b / 1024} KiB` : `${b} B`);
const ONE_SIDED = 'topocoll-one-sided';
const runsOf = (impl, collective, p, bytes) => rows.filter((r) => r.impl === impl && r.collective === collective && r.p === p && r.bytes === bytes);
const cell = (impl, collective, p, bytes) => {
  const runs = runsOf(impl, collective, p, bytes);
  if (runs.length === 0) return '—';
  return `${median(runs.map((r) => r.overlapPct)).toFixed(0)} % (${median(runs.map((r) => r.pureUs)).toPrecision(3)})`;
};
const sorted = (xs) => [...new Set(xs)].sort((a, b) => a - b);

const collectives = [...new Set(rows.map((r) => r.collective))];
const withOneSided = collectives.filter((c) => rows.some((r) => r.impl === ONE_SIDED && r.collective === c));
for (const collective of collectives) {
  const ps = sorted(rows.filter((r) => r.collective === collective).map((r) => r.p));
  const sizes = sorted(rows.filter((r) => r.collective === collective).map((r) => r.bytes));
  const impls = withOneSided.includes(collective) ? ['topocoll', ONE_SIDED, 'ompi'] : ['topocoll', 'ompi'];
  const names = withOneSided.includes(collective) ? 'topocoll request / one-sided / Open MPI' : 'topocoll request / Open MPI';
  console.log(`\n**${collective}** — overlap % (pure µs): ${names}\n`);
  console.log(`| bytes | ${ps.map((p) => `p = ${p}`).join(' | ')} |`);
  console.log(`|---:|${ps.map(() => ':---:').join('|')}|`);
  for (const bytes of sizes) {
    console.log(`| ${bytesText(bytes)} | ${ps.map((p) => impls.map((impl) => cell(impl, collective, p, bytes)).join(' / ')).join(' | ')} |`);
  }
}

for (const collective of withOneSided) {
  const mine = rows.filter((r) => r.impl === ONE_SIDED && r.collective === collective);
  const ps = sorted(mine.map((r) => r.p));
  const sizes = sorted(mine.map((r) => r.bytes));
  const estimateCell = (p, bytes) => {
    const runs = runsOf(ONE_SIDED, collective, p, bytes);
    if (runs.length === 0) return '—';
    return `${median(runs.map((r) => r.pureUs)).toPrecision(3)} / ${median(runs.map((r) => r.estimateUs)).toPrecision(3)}`;
  };
  console.log(`\n**${collective}** — S1's estimate beside the one-sided measurement: measured pure µs / estimate µs\n`);
  console.log(`| bytes | ${ps.map((p) => `p = ${p}`).join(' | ')} |`);
  console.log(`|---:|${ps.map(() => ':---:').join('|')}|`);
  for (const bytes of sizes) console.log(`| ${bytesText(bytes)} | ${ps.map((p) => estimateCell(p, bytes)).join(' | ')} |`);
}
