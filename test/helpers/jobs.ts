import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
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

/**
 * A failure job (`topocoll run --timeout 5`, at most 2 minutes): which rank caught which error
 * code (`rank R caught CODE: …`) and which ranks finished (`rank R finished`).
 */
export function runFailureJob(args: string[]) {
  const r = runJob(['--timeout', '5', ...args], 120_000);
  const caught = new Map<number, string>();
  const finished: number[] = [];
  for (const line of r.lines) {
    const m = /^rank (\d+) caught (E[A-Z]+): /.exec(line);
    if (m) caught.set(Number(m[1]), m[2]!);
    const f = /^rank (\d+) finished$/.exec(line);
    if (f) finished.push(Number(f[1]));
  }
  return { status: r.status, signal: r.signal, caught, finished, stdout: r.stdout, stderr: r.stderr };
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
 * A job of `ranks` ranks that each checked its results: exit 0, no signal, `rank R ok N` from
 * every rank, nothing left in /dev/shm.
 */
export async function expectEveryRankOk(r: ReturnType<typeof runJob>, ranks: number): Promise<void> {
  expect(r.signal, r.stderr).toBeNull();
  expect(r.status, r.stderr).toBe(0);
  expect(okRanks(r.lines), r.stderr).toEqual(Array.from({ length: ranks }, (_, i) => i));
  expect(await leftoverSegments()).toEqual([]);
}

/** A JSON file of `cases` in a fresh temporary directory, for a job's `--cases=FILE`. */
export function casesFile(cases: readonly unknown[]): string {
  const file = join(tempDir('topocoll-test-cases-'), 'cases.json');
  writeFileSync(file, JSON.stringify(cases));
  return file;
}

/**
 * `run`, called once, by the first of the tests that check a part of its result (a job that runs
 * many cases, each test one case): the function returns the result of that one call every time.
 */
export function sharedJob<T>(run: () => T): () => T {
  let result: { value: T } | undefined;
  return () => (result ??= { value: run() }).value;
}

/**
 * Case `k` of a job that runs several cases and reports each (`rank R case K ok N` or
 * `rank R case K failed: <what>`) passed on every one of `ranks` ranks; else the message names
 * what failed (or that the job did not reach the case, with its stderr).
 */
export function expectCaseOk(r: ReturnType<typeof runJob>, k: number, ranks: number): void {
  const ok = r.lines
    .map((l) => /^rank (\d+) case (\d+) ok \d+$/.exec(l))
    .filter((m) => m !== null && Number(m[2]) === k)
    .map((m) => Number(m![1]))
    .sort((a, b) => a - b);
  const failed = r.lines.filter((l) => l.startsWith('rank ') && l.includes(` case ${k} failed: `));
  const why = failed.length > 0 ? failed.join('\n') : `case ${k} not reported by every rank (exit ${r.status}, ${r.signal}):\n${r.stderr}`;
  expect(ok, why).toEqual(Array.from({ length: ranks }, (_, i) => i));
}

/** `topocoll run <args>` with TOPOCOLL_P2P_DIR a fresh directory, for test/jobs/socket-layer.mjs's sockets. */
export function runJobOverSocketLayer(args: string[], timeoutMs?: number): ReturnType<typeof runJob> {
  process.env.TOPOCOLL_P2P_DIR = tempDir('topocoll-p2p-');
  try {
    return runJob(args, timeoutMs);
  } finally {
    delete process.env.TOPOCOLL_P2P_DIR;
  }
}

/**
 * topocoll segments left in /dev/shm: those no process has mapped. Other jobs (of other test
 * files, which run beside this one) hold theirs mapped while they run, and a segment is unmapped
 * without its name for the moments between creating and mapping it or between its last rank's
 * exit and its launcher's clean-up, so a leak is what is still unmapped after a few seconds.
 */
export async function leftoverSegments(): Promise<string[]> {
  let left: string[] = [];
  for (let i = 0; i < 50; i++) {
    left = unmappedSegments();
    if (left.length === 0) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
  return left;
}

/** Names of topocoll segments in /dev/shm that no process of this machine maps now. */
function unmappedSegments(): string[] {
  const names = readdirSync('/dev/shm').filter((n) => n.startsWith('topocoll-'));
  if (names.length === 0) return names;
  const mapped = new Set<string>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let maps: string;
    try {
      maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
    } catch {
      continue; // gone meanwhile, or another user's
    }
    for (const m of maps.matchAll(/\/dev\/shm\/(topocoll-\S+)/g)) mapped.add(m[1]!);
  }
  return names.filter((n) => !mapped.has(n));
}
