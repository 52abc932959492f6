import { constants as bufferConstants } from 'node:buffer';
import { closeSync, openSync, readSync } from 'node:fs';
import { TopocollError, type TopocollErrorCode } from '../errors.js';

/**
 * The one way topocoll reads an input file (configuration, hwloc XML, localities, network,
 * procfs, sysfs). Files are read in a bounded loop rather than by `readFileSync`, whose size
 * comes from `stat`: `/dev/zero`, FIFOs and procfs files report size 0 and would be read until
 * memory runs out.
 */

/** The variable that changes the limit; an environment variable because the configuration file is itself an input. */
export const MAX_INPUT_BYTES_VARIABLE = 'TOPOCOLL_MAX_INPUT_BYTES';

/** 64 MiB: a localities file for a million ranks is about 50 MB, every other input far smaller. */
export const DEFAULT_MAX_INPUT_BYTES = 64 << 20;

/** The text of a larger file cannot be a JavaScript string. */
const LARGEST_SETTING = bufferConstants.MAX_STRING_LENGTH;

const FIRST_CHUNK = 64 << 10;

const UNITS: Readonly<Record<string, number>> = { '': 1, B: 1, K: 1024, KiB: 1024, M: 1 << 20, MiB: 1 << 20, G: 1 << 30, GiB: 1 << 30 };

/** The input size limit in force: `TOPOCOLL_MAX_INPUT_BYTES` (`65536`, `64KiB`, `1GiB`), else 64 MiB. */
export function maxInputBytes(env: NodeJS.ProcessEnv = process.env): number {
  const text = env[MAX_INPUT_BYTES_VARIABLE];
  if (text === undefined || text.trim() === '') return DEFAULT_MAX_INPUT_BYTES;
  const m = /^\s*(\d{1,16})\s*(B|K|KiB|M|MiB|G|GiB)?\s*$/.exec(text);
  const bytes = m === null ? NaN : Number(m[1]) * UNITS[m[2] ?? '']!;
  if (!(bytes >= 1 && bytes <= LARGEST_SETTING)) {
    throw new TopocollError('ECONFIG', `${MAX_INPUT_BYTES_VARIABLE}="${text.slice(0, 40)}" is not a size from 1 byte to ${LARGEST_SETTING} bytes`, {
      hint: 'Give a size in bytes such as 134217728, 128MiB or 1GiB, or unset it for the default of 64 MiB.',
    });
  }
  return bytes;
}

/**
 * Reads a UTF-8 input file of at most `maxInputBytes()` bytes. A file that cannot be read or is
 * larger becomes a `TopocollError` of `code` naming the file, what it was meant to be and why
 * (`no such file`, `permission denied`, the limit), so every input file fails the same clear way.
 */
export function readTextFile(path: string, code: TopocollErrorCode, what: string, hint?: string): string {
  return read(path, code, what, hint, false)!;
}

/** As `readTextFile`, but a file that does not exist gives undefined (optional sysfs attributes). */
export function readOptionalTextFile(path: string, code: TopocollErrorCode, what: string): string | undefined {
  return read(path, code, what, undefined, true);
}

function read(path: string, code: TopocollErrorCode, what: string, hint: string | undefined, optional: boolean): string | undefined {
  const limit = maxInputBytes();
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (cause) {
    if (optional && (cause as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw cannotRead(path, code, what, hint, cause);
  }
  try {
    // Reading stops at limit + 1 bytes: one byte more than allowed is enough to know.
    let buffer = Buffer.allocUnsafe(Math.min(FIRST_CHUNK, limit + 1));
    let size = 0;
    for (;;) {
      if (size === buffer.length) {
        if (size > limit) {
          throw new TopocollError(code, `the ${what} is larger than ${formatLimit(limit)}, the limit for input files`, {
            file: path,
            hint: `Check that this is the right file; a genuine larger one can be read with ${MAX_INPUT_BYTES_VARIABLE} set above its size.`,
          });
        }
        const grown = Buffer.allocUnsafe(Math.min(buffer.length * 2, limit + 1));
        buffer.copy(grown, 0, 0, size);
        buffer = grown;
      }
      const n = readSync(fd, buffer, size, buffer.length - size, null);
      if (n === 0) break;
      size += n;
    }
    return buffer.toString('utf8', 0, size);
  } catch (cause) {
    if (cause instanceof TopocollError) throw cause;
    throw cannotRead(path, code, what, hint, cause);
  } finally {
    closeSync(fd);
  }
}

function cannotRead(path: string, code: TopocollErrorCode, what: string, hint: string | undefined, cause: unknown): TopocollError {
  const errno = (cause as NodeJS.ErrnoException).code;
  const reason =
    errno === 'ENOENT' ? 'no such file' : errno === 'EACCES' ? 'permission denied' : errno === 'EISDIR' ? 'it is a directory' : (cause as Error).message;
  return new TopocollError(code, `cannot read the ${what}: ${reason}`, { file: path, hint, cause });
}

/** `64 MiB (67108864 bytes)`, or just the bytes when they are not a whole number of KiB. */
function formatLimit(bytes: number): string {
  for (const [unit, size] of [
    ['GiB', 1 << 30],
    ['MiB', 1 << 20],
    ['KiB', 1024],
  ] as const) {
    if (bytes % size === 0) return `${bytes / size} ${unit} (${bytes} bytes)`;
  }
  return `${bytes} bytes`;
}
