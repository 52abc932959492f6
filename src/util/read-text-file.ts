import { readFileSync } from 'node:fs';
import { TopocollError, type TopocollErrorCode } from '../errors.js';

/**
 * Reads a UTF-8 input file. A file that cannot be read becomes a `TopocollError` naming it,
 * what it was meant to be and why (`no such file`, `permission denied`), so every input file
 * fails the same clear way.
 */
export function readTextFile(path: string, code: TopocollErrorCode, what: string, hint?: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (cause) {
    const errno = (cause as NodeJS.ErrnoException).code;
    const reason = errno === 'ENOENT' ? 'no such file' : errno === 'EACCES' ? 'permission denied' : errno === 'EISDIR' ? 'it is a directory' : (cause as Error).message;
    throw new TopocollError(code, `cannot read the ${what}: ${reason}`, { file: path, hint, cause });
  }
}
