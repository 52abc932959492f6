// The shared-window tables of bench/RESULTS.md from `topocoll bench --modes sync,window --json`
// runs: per collective, a row per size and for each p the blocking call on ordinary buffers, the
// same call on shared windows (comm.allocShared), Open MPI's collective and one memcpy of the
// message (allgather: of the whole result), all from the same runs, with window ÷ memcpy and
// window ÷ Open MPI. Several runs of one job merge at the fastest per column (as
// bench/min-of-runs.mjs); the cache-line probes of every run are listed, since rows measured in
// the VM's near and far states do not compare.
// Run: node bench/windows-table.mjs bench/data/windows-p*.jsonl (bcast, allreduce),
//      node bench/windows-table.mjs bench/data/windows-allgather-p*.jsonl
import { benchRows, formatUs as fmt, keepFastest } from './rows.mjs';

const files = process.argv.slice(2);
const best = new Map(); // "collective mode bytes ranks" → fastest avgUs
const probes = []; // per file: its name and the probe figures of its run
const commits = new Set();
for (const file of files) {
  const figures = [];
  // An allgather run's memcpy rows copy the whole result, the others' the message: kept apart.
  const rows = [...benchRows([file])];
  const copies = rows.some((row) => row.collective === 'allgather') ? 'memcpy-result' : 'memcpy';
  for (const row of rows) {
    if (row.probe !== undefined) {
      figures.push(...Object.entries(row).flatMap(([k, ns]) => (k === 'probe' || k === 'cpus' ? [] : [ns])));
      continue;
    }
    if (row.commit) commits.add(row.commit);
    const collective = row.collective === 'memcpy' ? copies : row.collective;
    keepFastest(best, `${collective} ${row.mode} ${row.bytes} ${row.ranks ?? 0}`, row.avgUs);
  }
  probes.push(`${file.split('/').pop()}: ${figures.join(', ')}`);
}
const ps = [...new Set([...best.keys()].map((k) => Number(k.split(' ')[3])))].filter((p) => p > 0).sort((a, b) => a - b);
const ratio = (a, b) => (a === undefined || b === undefined ? '—' : `${(a / b).toFixed(2)}×`);
const bytesText = (b) => (b >= 1 << 20 ? `${b / (1 << 20)} MiB` : b >= 1024 ? `${b / 1024} KiB` : `${b} B`);
for (const c of ['bcast', 'allreduce', 'allgather']) {
  const sizes = [...new Set([...best.keys()].filter((k) => k.startsWith(`${c} window `)).map((k) => Number(k.split(' ')[2])))].sort((a, b) => a - b);
  if (sizes.length === 0) continue;
  const copied = c === 'allgather' ? 'memcpy of the whole result' : 'memcpy';
  console.log(
    `\n**${c}** — µs per call${c === 'allgather' ? ' (bytes per rank)' : ''}: ordinary buffers / windows / Open MPI / ${copied} (window ÷ memcpy, window ÷ Open MPI)\n`,
  );
  console.log(`| bytes | ${ps.map((p) => `p = ${p}`).join(' | ')} |`);
  console.log(`|---:|${ps.map(() => ':---:').join('|')}|`);
  for (const bytes of sizes) {
    const cells = ps.map((p) => {
      const get = (mode, collective = c) => best.get(`${collective} ${mode} ${bytes} ${p}`);
      const window = get('window');
      const copy = get('memcpy', c === 'allgather' ? 'memcpy-result' : 'memcpy');
      return `${fmt(get('sync'))} / **${fmt(window)}** / ${fmt(get('ompi'))} / ${fmt(copy)} (${ratio(window, copy)}, ${ratio(window, get('ompi'))})`;
    });
    console.log(`| ${bytesText(bytes)} | ${cells.join(' | ')} |`);
  }
}
console.log(`\nCommits: ${[...commits].join(', ')}. Cache line CPU 0 → CPU 1 around each run (ns): ${probes.join('; ')}.`);
