/**
 * The private file through which rank 0 tells the ranks of its machine where its rendezvous server
 * listens and which token it wants: `{"port": p, "token": t, "pid": writer}` in the temporary
 * directory, mode 0600. Only the job's user can read it, so the token stays a secret on a shared
 * machine; a reader trusts a file only when it is a regular file owned by its own user with no
 * access for others (a stranger may have created one under the same name). It lives from
 * before rank 0 listens until every rank has connected; whoever finds one whose writer is dead
 * removes it.
 */
import { closeSync, constants, fstatSync, openSync, readSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TopocollError } from '../../errors.js';

export interface RendezvousFileContent {
  port: number;
  token: string;
}

/** The file of a job, from a key every rank knows (the launcher's job id, or MASTER_ADDR:MASTER_PORT). */
export function rendezvousFilePath(jobKey: string): string {
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
  return join(tmpdir(), `topocoll-${uid}-${jobKey.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 128)}.rendezvous.json`);
}

/** Writes the file atomically (a reader sees all of it or nothing); ECONFIG when another user's file is in the way. */
export function writeRendezvousFile(file: string, content: RendezvousFileContent): void {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, JSON.stringify({ ...content, pid: process.pid }), { mode: 0o600, flag: 'wx' });
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw new TopocollError('ECONFIG', `cannot write the rendezvous file: ${(e as NodeJS.ErrnoException).code ?? String(e)}`, {
      file,
      rank: 0,
      cause: e,
      hint: 'Another user or job holds that name: remove the file, or set MASTER_ADDR/MASTER_PORT to another port.',
    });
  }
}

/**
 * The file's content, or undefined while it does not exist. A file that exists but is not this
 * user's private regular file, or does not parse, is ECONFIG: nothing in it is trusted.
 */
export function readRendezvousFile(file: string): RendezvousFileContent | undefined {
  let parsed: { port?: unknown; token?: unknown };
  try {
    const own = readOwnPrivateFile(file);
    if (own === undefined) return undefined;
    parsed = JSON.parse(own) as typeof parsed;
  } catch (e) {
    if (e instanceof TopocollError) throw e;
    // Written atomically by rank 0: a partial file is not ours.
    throw untrusted(file, `it does not hold a rendezvous address (${(e as Error).message})`);
  }
  if (typeof parsed.port !== 'number' || typeof parsed.token !== 'string') throw untrusted(file, 'it does not hold a rendezvous address (no port or token)');
  return { port: parsed.port, token: parsed.token };
}

/**
 * The text of `file` if it is a regular file of this user with no access for others; undefined
 * while it does not exist; ECONFIG (untrusted) otherwise.
 */
function readOwnPrivateFile(file: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw untrusted(file, `cannot open it (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  try {
    const st = fstatSync(fd);
    const uid = typeof process.getuid === 'function' ? process.getuid() : st.uid;
    if (!st.isFile() || st.uid !== uid || (st.mode & 0o077) !== 0) throw untrusted(file, 'it is not a private file of this user');
    const buf = Buffer.alloc(4096);
    return buf.subarray(0, readSync(fd, buf, 0, buf.length, 0)).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** Removes the file if it is still there (rank 0's, or one whose writer died). */
export function removeRendezvousFile(file: string): void {
  rmSync(file, { force: true });
}

/** Removes the file when the process that wrote it no longer exists. */
export function removeRendezvousFileOfDeadWriter(file: string): void {
  try {
    const own = readOwnPrivateFile(file);
    const pid = own === undefined ? undefined : (JSON.parse(own) as { pid?: unknown }).pid;
    if (typeof pid === 'number' && !processExists(pid)) rmSync(file, { force: true });
  } catch {
    // gone already, or not ours: nothing to clean
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function untrusted(file: string, why: string): TopocollError {
  return new TopocollError('ECONFIG', `the rendezvous file is not trusted: ${why}`, {
    file,
    hint: 'Another user or an earlier job may have left it: remove it and start the job again.',
  });
}
