import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Directories made by tempDir in this test file, removed by removeTempDirs (test/setup.ts runs it after every file). */
const made: string[] = [];

/** A fresh directory under os.tmpdir() named `<prefix>XXXXXX`, removed when the test file ends. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes every directory tempDir has made (and not yet removed), with everything in it. */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
