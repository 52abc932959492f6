import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, rmSync } from 'node:fs';

/**
 * Names of the nodes' shared segments: a prefix derived from the job token (a hash, so the name
 * says nothing about the token), which lets the launcher and a failing rank remove whatever a
 * job left in /dev/shm, then the node and a random part, so that nobody outside the job can
 * predict a name and create it first.
 */
export function segmentPrefix(token: string): string {
  return `topocoll-${createHash('sha256').update(token).digest('hex').slice(0, 16)}-`;
}

/** A fresh POSIX shm name (leading slash) for node `nodeIndex`'s segment. */
export function segmentName(token: string, nodeIndex: number): string {
  return `/${segmentPrefix(token)}${nodeIndex}-${randomBytes(8).toString('hex')}`;
}

/** Removes every segment of the job with this token still named in this machine's /dev/shm. */
export function removeJobSegments(token: string): void {
  const prefix = segmentPrefix(token);
  try {
    for (const name of readdirSync('/dev/shm')) if (name.startsWith(prefix)) rmSync(`/dev/shm/${name}`, { force: true });
  } catch {
    // no /dev/shm: nothing can be left there
  }
}
