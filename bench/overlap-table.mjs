// The overlap tables of bench/RESULTS.md from the JSON lines of bench/overlap.mjs (topocoll's
// requests) and build/bench/coll_overlap (Open MPI's MPI_Ibcast / MPI_Iallreduce): per
// collective, a row per size and a column per p, each cell "topocoll overlap % (pure µs) /
// Open MPI overlap % (pure µs)". Where a file holds several runs of a cell, the median overlap.
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
const cell = (impl, collective, p, bytes) => {
  const runs = rows.filter((r) => r.impl === impl && r.collective === collective && r.p === p && r.bytes === bytes);
  if (runs.length === 0) return '—';
  return `${median(runs.map((r) => r.overlapPct)).toFixed(0)} % (${median(runs.map((r) => r.pureUs)).toPrecision(3)})`;
};

for (const collective of [...new Set(rows.map((r) => r.collective))]) {
  const ps = [...new Set(rows.filter((r) => r.collective === collective).map((r) => r.p))].sort((a, b) => a - b);
  const sizes = [...new Set(rows.filter((r) => r.collective === collective).map((r) => r.bytes))].sort((a, b) => a - b);
  console.log(`\n**${collective}** — overlap % (pure µs): topocoll request / Open MPI\n`);
  console.log(`| bytes | ${ps.map((p) => `p = ${p}`).join(' | ')} |`);
  console.log(`|---:|${ps.map(() => ':---:').join('|')}|`);
  for (const bytes of sizes) {
    console.log(`| ${bytesText(bytes)} | ${ps.map((p) => `${cell('topocoll', collective, p, bytes)} / ${cell('ompi', collective, p, bytes)}`).join(' | ')} |`);
  }
}
