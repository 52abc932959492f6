// What bench/min-of-runs.mjs and bench/summary-table.mjs share: reading `topocoll bench --json`
// output and printing its times.
import { readFileSync } from 'node:fs';

/** Every JSON row of the given files, in order (the lines that are not JSON objects skipped). */
export function* benchRows(files) {
  for (const file of files) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (line.startsWith('{')) yield JSON.parse(line);
    }
  }
}

/** Keeps in `best` the fastest time seen for `key`: the figure least disturbed by a noisy VM. */
export function keepFastest(best, key, us) {
  best.set(key, Math.min(best.get(key) ?? Infinity, us));
}

/** µs with 3–4 significant digits; '—' for a missing figure. */
export const formatUs = (us) => (us === undefined ? '—' : us < 10 ? us.toFixed(2) : us < 1000 ? us.toFixed(1) : us.toFixed(0));
