// Before and after a change, from paired runs: `topocoll bench --json` files of two checkouts run
// in turn (before, after, before, after, …), named BEFORE-i and AFTER-i by the caller. Per
// collective, process count and message size: each side's median µs over its runs, and the
// median of the run-by-run ratios after ÷ before (a pair's two runs are minutes apart, so the
// VM's drift falls on both); the ratios' range says how noisy the cell was. Blocking calls only.
// Run: node bench/before-after.mjs --before B1.jsonl,B2.jsonl --after A1.jsonl,A2.jsonl [--sizes 8,4096]
import { benchRows, formatUs as fmt } from './rows.mjs';

const args = process.argv.slice(2);
const list = (name) => {
  const at = args.indexOf(name);
  return at < 0 ? undefined : args[at + 1].split(',');
};
const before = list('--before');
const after = list('--after');
const sizes = list('--sizes')?.map(Number);
if (!before || !after || before.length !== after.length) {
  console.error('usage: node bench/before-after.mjs --before B1.jsonl,… --after A1.jsonl,… (as many of each, in pairs) [--sizes B,…]');
  process.exit(2);
}

/** One run: "collective p bytes" → µs of the blocking call. */
const times = (file) => {
  const m = new Map();
  for (const row of benchRows([file])) {
    if (row.mode === 'sync' && row.avgUs !== undefined) m.set(`${row.collective} ${row.ranks} ${row.bytes}`, row.avgUs);
  }
  return m;
};
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const b = before.map(times);
const a = after.map(times);
const keys = [...new Set(b.flatMap((m) => [...m.keys()]))].filter((k) => a.some((m) => m.has(k)));
const parsed = keys
  .map((k) => k.split(' '))
  .map(([c, p, bytes]) => ({ c, p: Number(p), bytes: Number(bytes) }))
  .filter((k) => !sizes || sizes.includes(k.bytes))
  .sort((x, y) => x.c.localeCompare(y.c) || x.p - y.p || x.bytes - y.bytes);
const size = (n) => (n >= 1048576 ? `${n / 1048576} MiB` : n >= 1024 ? `${n / 1024} KiB` : `${n} B`);
let last = '';
const all = [];
for (const { c, p, bytes } of parsed) {
  const key = `${c} ${p} ${bytes}`;
  if (`${c} ${p}` !== last) {
    last = `${c} ${p}`;
    console.log(`\n${c}, p = ${p}\n\n| size | before µs | after µs | after ÷ before (median) | run by run |\n|---:|---:|---:|---:|---|`);
  }
  const ratios = b.map((m, i) => (m.has(key) && a[i].has(key) ? a[i].get(key) / m.get(key) : undefined)).filter((r) => r !== undefined);
  const r = median(ratios);
  all.push(r);
  console.log(
    `| ${c === 'barrier' ? '—' : size(bytes)} | ${fmt(median(b.filter((m) => m.has(key)).map((m) => m.get(key))))} | ${fmt(median(a.filter((m) => m.has(key)).map((m) => m.get(key))))} | ${r.toFixed(2)}× | ${ratios.map((x) => x.toFixed(2)).join(' ')} |`,
  );
}
console.log(
  `\n${all.length} cells: median of the medians ${median(all).toFixed(3)}×, ${all.filter((r) => r > 1.1).length} above 1.10×, ${all.filter((r) => r < 0.9).length} below 0.90×`,
);
