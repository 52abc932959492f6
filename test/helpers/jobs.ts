import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from './temp.js';

/** Helpers for tests that start real jobs with `topocoll run`. */
export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const jobScript = (name: string) => `${repoRoot}test/jobs/${name}`;

/** A configuration file (YAML text) in a fresh temporary directory, for `--config`. */
export function configFile(yaml: string): string {
  const file = join(tempDir('topocoll-test-config-'), 'config.yaml');
  writeFileSync(file, yaml);
  return file;
}

/** Runs `topocoll run <args>` to completion (the built CLI in dist/). */
export function runJob(args: string[], timeoutMs = 240_000) {
  const r = spawnSync(process.execPath, [`${repoRoot}dist/cli/main.js`, 'run', ...args], { encoding: 'utf8', timeout: timeoutMs });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, lines: r.stdout.split('\n').filter((l) => l !== '') };
}

/** The ranks that printed `rank R ok N` (the collectives job's success line), ascending. */
export function okRanks(lines: readonly string[]): number[] {
  return lines
    .map((l) => /^rank (\d+) ok (\d+)$/.exec(l))
    .filter((m) => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

/**
 * topocoll segments left in /dev/shm. Jobs of other test files may hold one for the moments
 * between creating and unlinking it, so a leak is what is still there after a few seconds.
 */
export async function leftoverSegments(): Promise<string[]> {
  let left: string[] = [];
  for (let i = 0; i < 50; i++) {
    left = readdirSync('/dev/shm').filter((n) => n.startsWith('topocoll-'));
    if (left.length === 0) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
  return left;
}
