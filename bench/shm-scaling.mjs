// A node's shared memory and start-up against its rank count: for each p, a one-node job of
// bench/shm-scaling-job.mjs under `topocoll run -n p` per checkout given (in turn, run after
// run), and the segment's size as that checkout's own layout computes it. Prints one row per
// (p, checkout): segment bytes (and per rank), channels made, the machine's tmpfs pages in use
// while the job runs (Shmem of /proc/meminfo less before the job), init() time (median and
// slowest rank; medians over runs) and the whole job's wall time.
//
//   node bench/shm-scaling.mjs [--runs 3] [--ranks 2,4,8,16,32,48,64,128] [--json] CHECKOUT…
import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { takeFlag, takeOption } from './bench-args.mjs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const option = (name, fallback) => takeOption(args, name, fallback);
const runs = Number(option('--runs', '3'));
const ranks = option('--ranks', '2,4,8,16,32,48,64,128').split(',').map(Number);
const json = takeFlag(args, '--json');
const here = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const checkouts = (args.length > 0 ? args : [here]).map((c) => resolve(c));
for (const c of checkouts) if (c !== here) copyFileSync(join(here, 'bench/shm-scaling-job.mjs'), join(c, 'bench/shm-scaling-job.mjs'));

const shmem = () => Number(/^Shmem:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? NaN) * 1024;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * The segment each checkout lays out for p ranks with its defaults (an ECONFIG message if it
 * refuses), asked in a process of its own: two builds of the addon cannot share one process.
 */
function segmentOf(checkout, p) {
  const script = `
    const { validateConfig } = await import(${JSON.stringify(pathToFileURL(join(checkout, 'dist/config/load.js')).href)});
    const { shmLayout } = await import(${JSON.stringify(pathToFileURL(join(checkout, 'dist/runtime/shm-budget.js')).href)});
    try { console.log(JSON.stringify(shmLayout(validateConfig({}), ${p}, ${cpus().length}).segmentBytes)); }
    catch (e) { console.log(JSON.stringify(String(e.message))); }`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  return JSON.parse(r.stdout.trim() || JSON.stringify(r.stderr));
}

const rows = [];
for (const p of ranks) {
  const samples = checkouts.map(() => ({ init: [], initMax: [], wall: [], shmem: [], memory: undefined, error: undefined }));
  for (let run = 0; run < runs; run++) {
    checkouts.forEach((c, i) => {
      const before = shmem();
      const job = [process.execPath, join(c, 'dist/cli/main.js'), 'run', '-n', String(p), join(c, 'bench/shm-scaling-job.mjs')];
      const r = spawnSync('/usr/bin/time', ['-f', '%e', ...job], { encoding: 'utf8', maxBuffer: 1 << 26 });
      const s = samples[i];
      if (r.status !== 0) {
        s.error = (/(E[A-Z]+: [^\n]*)/.exec(r.stdout + r.stderr)?.[1] ?? `exit ${r.status}`).slice(0, 160);
        return;
      }
      const line = JSON.parse(
        r.stdout
          .trim()
          .split('\n')
          .findLast((l) => l.startsWith('{')),
      );
      s.init.push(line.initMsMedian);
      s.initMax.push(line.initMsMax);
      s.shmem.push(line.shmemBytes - before);
      s.wall.push(Number(r.stderr.trim().split('\n').at(-1)));
      s.memory = line.memory;
    });
  }
  for (const [i, c] of checkouts.entries()) {
    const s = samples[i];
    const segment = segmentOf(c, p);
    const row = {
      p,
      checkout: c,
      segmentBytes: segment,
      error: s.init.length === 0 ? s.error : undefined,
      channels: s.memory?.channels,
      channelsBytes: s.memory?.channelsBytes,
      shmemBytes: s.shmem.length ? median(s.shmem) : undefined,
      initMs: s.init.length ? median(s.init) : undefined,
      initMaxMs: s.initMax.length ? median(s.initMax) : undefined,
      wallS: s.wall.length ? median(s.wall) : undefined,
    };
    rows.push(row);
    if (json) console.log(JSON.stringify(row));
    else {
      const mib = (b) => (typeof b === 'number' ? (b / 2 ** 20).toFixed(1) : '—');
      console.log(
        `p=${String(p).padStart(4)} ${c}: segment ${typeof segment === 'number' ? `${mib(segment)} MiB (${mib(segment / p)} per rank)` : `refused: ${segment.slice(0, 80)}`}` +
          (row.error
            ? `; job failed: ${row.error}`
            : `; channels ${row.channels ?? '—'} (${mib(row.channelsBytes)} MiB); tmpfs in use ${mib(row.shmemBytes)} MiB; init ${row.initMs?.toFixed(0)} ms median, ${row.initMaxMs?.toFixed(0)} slowest; job ${row.wallS} s`),
      );
    }
  }
}
