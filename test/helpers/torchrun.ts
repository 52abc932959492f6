import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { repoRoot } from './jobs.js';

/** What one rank of a job started without a launcher printed, and how it ended. */
export interface RankOutcome {
  rank: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A TCP port free on loopback right now (for MASTER_PORT). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/**
 * Starts `size` processes of `node script args…` the way torchrun does — each with RANK,
 * WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT and nothing else of topocoll's — and
 * waits for all of them. A rank still running after `timeoutMs` is killed (SIGKILL, after
 * SIGCONT) and reported with that signal, so a hang fails the test instead of blocking it; so
 * are ranks that are stopped (SIGSTOP) once every other rank has ended.
 */
export async function runTorchrunJob(
  size: number,
  script: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number; masterPort?: number } = {},
): Promise<RankOutcome[]> {
  const port = options.masterPort ?? (await freePort());
  const timeoutMs = options.timeoutMs ?? 60_000;
  const children: ChildProcess[] = [];
  const ended = new Set<number>();
  const reaper = setInterval(() => {
    const left = children.filter((_, r) => !ended.has(r));
    if (left.length > 0 && left.every((c) => c.pid !== undefined && isStopped(c.pid))) left.forEach((c) => c.kill('SIGKILL'));
  }, 200);
  const runs = Array.from({ length: size }, (_, rank) => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...options.env,
      RANK: String(rank),
      WORLD_SIZE: String(size),
      LOCAL_RANK: String(rank),
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: String(port),
    };
    for (const k of Object.keys(env)) if (k.startsWith('TOPOCOLL_') && !(options.env && k in options.env)) delete env[k];
    const child = spawn(process.execPath, [script, ...args], { env, cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    return new Promise<RankOutcome>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
      }, timeoutMs);
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        ended.add(rank);
        resolve({ rank, code, signal, stdout, stderr });
      });
    });
  });
  try {
    return await Promise.all(runs);
  } finally {
    clearInterval(reaper);
  }
}

function isStopped(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return /^[Tt]$/.test(stat.charAt(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}
