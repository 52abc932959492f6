// Merges several `topocoll bench --json` runs into one table per collective, keeping for every
// row the fastest run of each column (topocoll, Open MPI, memcpy) — on a shared VM whose speed
// swings 2–6× for minutes at a time, the minimum over runs is the figure least disturbed.
// Run: for i in 1 2 3; do npx topocoll bench -n 2 --json > run$i.jsonl; done
//      node bench/min-of-runs.mjs run1.jsonl run2.jsonl run3.jsonl
import { benchRows, formatUs as fmt, keepFastest } from './rows.mjs';

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: node bench/min-of-runs.mjs RUN.jsonl...');
  process.exit(2);
}
const best = new Map(); // "collective mode bytes" → fastest avgUs
const probes = []; // one-way ns of a cache line between two CPUs, as each run took them
let ranks = 0;
for (const row of benchRows(files)) {
  if (row.probe !== undefined) {
    probes.push(
      ...Object.entries(row)
        .filter(([k]) => k !== 'probe' && k !== 'cpus')
        .map(([, ns]) => ns),
    );
    continue;
  }
  ranks = row.ranks ?? ranks;
  // Blocking calls over MPI between nodes (--transport mpi) are a column of their own.
  const mode = row.mode === 'sync' && row.transport === 'mpi' ? 'mpi-sync' : row.mode;
  keepFastest(best, `${row.collective} ${mode} ${row.bytes}`, row.avgUs);
}
const ratio = (a, b) => (a === undefined || b === undefined ? '—' : (a / b).toFixed(2));
const collectives = [...new Set([...best.keys()].map((k) => k.split(' ')[0]))].filter((c) => c !== 'memcpy');
for (const c of collectives) {
  const sizes = [...new Set([...best.keys()].filter((k) => k.startsWith(`${c} `)).map((k) => Number(k.split(' ')[2])))].sort((a, b) => a - b);
  console.log(`\n# ${c}, ${ranks} ranks: µs per call, fastest of ${files.length} runs per column`);
  const overMpi = sizes.some((bytes) => best.has(`${c} mpi-sync ${bytes}`));
  console.log(`  bytes  topocoll sync${overMpi ? '  MPI transport' : ''}  Open MPI  sync / OMPI  memcpy  sync / memcpy`);
  for (const bytes of sizes) {
    const sync = best.get(`${c} sync ${bytes}`);
    const mpi = overMpi ? `  ${fmt(best.get(`${c} mpi-sync ${bytes}`)).padStart(13)}` : '';
    const ompi = best.get(`${c} ompi ${bytes}`);
    const copy = best.get(`memcpy memcpy ${bytes}`);
    console.log(
      `${String(bytes).padStart(7)}  ${fmt(sync).padStart(13)}${mpi}  ${fmt(ompi).padStart(8)}  ${ratio(sync, ompi).padStart(11)}  ${fmt(copy).padStart(6)}  ${ratio(sync, copy).padStart(13)}`,
    );
  }
}
if (probes.length > 0) {
  console.log(`\n# a cache line between two CPUs, around the runs: ${Math.min(...probes)}–${Math.max(...probes)} ns one way`);
}
