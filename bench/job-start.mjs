// How long a job of the shortest script (bench/start-job.mjs) takes under `topocoll run`, as a
// whole: Node's start, loading the library and init() on every rank, the launcher around them.
// Each checkout given runs its own CLI and its own copy of the script, in turn, run after run,
// so machine drift falls on all of them alike. Wall and CPU seconds (user + system of the job's
// processes, by /usr/bin/time) per job; medians of the runs.
//
//   node bench/job-start.mjs [--runs 5] [--ranks 2,5,9] CHECKOUT…   (default: this checkout)
import { spawnSync } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { takeOption } from './bench-args.mjs';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const option = (name, fallback) => takeOption(args, name, fallback);
const runs = Number(option('--runs', '5'));
const ranks = option('--ranks', '2,5,9').split(',').map(Number);
const here = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const checkouts = (args.length > 0 ? args : [here]).map((c) => resolve(c));
// Each checkout runs the script from its own bench/, so 'topocoll' is that checkout's.
for (const c of checkouts) if (c !== here) copyFileSync(join(here, 'bench/start-job.mjs'), join(c, 'bench/start-job.mjs'));

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log('ranks  checkout                                  wall s  cpu s  (median of %d runs)', runs);
for (const p of ranks) {
  const samples = checkouts.map(() => ({ wall: [], cpu: [] }));
  for (let run = 0; run <= runs; run++) {
    checkouts.forEach((c, i) => {
      const job = [process.execPath, join(c, 'dist/cli/main.js'), 'run', '-n', String(p), join(c, 'bench/start-job.mjs')];
      const r = spawnSync('/usr/bin/time', ['-f', '%e %U %S', ...job], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`${c}: the job failed: ${r.stderr}`);
      const [wall, user, sys] = r.stderr.trim().split('\n').at(-1).split(' ').map(Number);
      if (run > 0) {
        // run 0 warms the file cache
        samples[i].wall.push(wall);
        samples[i].cpu.push(user + sys);
      }
    });
  }
  checkouts.forEach((c, i) => {
    console.log(
      `${String(p).padStart(5)}  ${c.padEnd(40)}  ${median(samples[i].wall).toFixed(2).padStart(6)}  ${median(samples[i].cpu).toFixed(2).padStart(5)}`,
    );
  });
}
