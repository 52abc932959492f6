/**
 * Rendezvous: how the N processes of a job find each other (docs/architecture.md §2.2).
 *
 * A small TCP key-value store, hosted by the launcher or by rank 0, protected by a per-job random
 * token. The protocol is newline-delimited JSON:
 *
 *   client → server, first line:  {"hello": <token>, "rank": <n>}
 *   server → client, on success:  {"ok":true,"hello":true}
 *   (a first line that is not exactly a hello with the right token — wrong token, garbage, binary
 *   junk, a line over 64 KiB, nothing within 5 s — makes the server close the connection without
 *   a reply and without touching any state)
 *
 *   then requests, which may be pipelined:
 *     {"id":k,"op":"put","key":s,"value":s}   a key is written once; the same value again is a no-op,
 *                                             a different value is an error naming the key
 *     {"id":k,"op":"get","key":s}             parked by the server until the key exists
 *     {"id":k,"op":"close"}                   the server answers, then ends the connection
 *   and replies {"id":k,"ok":true[,"value":s]} or {"id":k,"ok":false,"error":"..."}.
 *
 * Values are strings (callers JSON-encode). The server keeps the stored bytes bounded (256 MiB by
 * default) and does O(1) work per request besides the JSON; a get parked for a key costs one entry
 * until the key is put or the connection closes.
 *
 * A server that knows the job's size (`ranks`) also watches the job: a hello with a rank outside
 * 0..ranks−1, or for a rank already connected, is dropped like a wrong token; and a rank whose
 * connection ends without a `close` request (it died, or its init failed) makes the server put
 * ABORT_KEY = {"rank": r, "reason": s} itself, so every rank still in init learns it at once
 * (clients park a get on that key: `watchAbort`). A rank whose init fails puts the key first,
 * with its own reason (`abort`); the first put wins.
 */
import { randomBytes } from 'node:crypto';
import { TopocollError } from '../../errors.js';

/** Longest request line after hello (a put carries its value on one line). */
export const MAX_REQUEST_LINE = 64 * 1024 * 1024;
/** The server's answer to an accepted hello. */
export const HELLO_ACK = '{"ok":true,"hello":true}';

/** The key a failing rank (or the server, for a lost connection) puts to stop the job's init. */
export const ABORT_KEY = 'job/abort';

/** A fresh per-job token: 32 hex characters from 16 random bytes. */
export function createJobToken(): string {
  return randomBytes(16).toString('hex');
}

/** Why a job's init was stopped (the value stored under ABORT_KEY). */
export interface JobAbort {
  rank: number;
  reason: string;
}

/** Splits a byte stream into lines (without the `\n`), refusing lines longer than `maxLine`. */
export class LineReader {
  private parts: Buffer[] = [];
  private partsLength = 0;

  constructor(public maxLine: number) {}

  /**
   * Feeds `chunk`, calling `onLine` for each complete line; `onLine` returns false to stop (the
   * rest of the chunk is dropped). Returns false when a line exceeds `maxLine`.
   */
  push(chunk: Buffer, onLine: (line: Buffer) => boolean): boolean {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      if (nl === -1) break;
      const pieceLength = nl - start;
      if (this.partsLength + pieceLength > this.maxLine) return false;
      let line: Buffer;
      if (this.parts.length > 0) {
        this.parts.push(chunk.subarray(start, nl));
        line = Buffer.concat(this.parts, this.partsLength + pieceLength);
        this.parts = [];
        this.partsLength = 0;
      } else {
        line = chunk.subarray(start, nl);
      }
      start = nl + 1;
      if (!onLine(line)) return true;
    }
    const rest = chunk.length - start;
    if (rest > 0) {
      if (this.partsLength + rest > this.maxLine) return false;
      this.parts.push(chunk.subarray(start));
      this.partsLength += rest;
    }
    return true;
  }
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Printable ASCII without spaces, 16–256 characters (createJobToken gives 32 hex digits). */
export function validateToken(token: unknown, where: string): string {
  if (typeof token !== 'string' || !/^[\x21-\x7e]{16,256}$/.test(token)) {
    throw new TopocollError('ECONFIG', `${where}: the job token must be 16–256 printable ASCII characters without spaces`, {
      hint: 'Use createJobToken() (32 hex digits) and pass the same token to every rank.',
    });
  }
  return token;
}

export function validateHost(host: unknown, where: string): string {
  if (typeof host !== 'string' || host.trim() === '' || /\s/.test(host)) {
    throw new TopocollError('ECONFIG', `${where}: bad rendezvous host ${JSON.stringify(host)}`);
  }
  return host;
}

export function validatePort(port: unknown, min: number, where: string): number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < min || port > 65535) {
    throw new TopocollError('ECONFIG', `${where}: bad rendezvous port ${String(port)} (expected an integer ${min}–65535)`);
  }
  return port;
}

export function validateTimeout(ms: unknown, what: string): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) {
    throw new TopocollError('EINVAL', `${what}: timeout must be a positive number of milliseconds, got ${String(ms)}`);
  }
  return ms;
}

export function validateKey(key: unknown, what: string): string {
  if (typeof key !== 'string' || key === '') {
    throw new TopocollError('EINVAL', `${what}: the key must be a non-empty string, got ${JSON.stringify(key)}`);
  }
  return key;
}

export function errnoCode(e: unknown): string | undefined {
  return isPlainObject(e) && typeof e.code === 'string' ? e.code : undefined;
}

export function formatBytes(n: number): string {
  return n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : `${n} bytes`;
}
