import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

// Runs before every job test file that shares the machine with others (vitest.config.ts): while
// its tests run, the file has a TMPDIR of its own, which the processes they start inherit, so
// that its checks for rendezvous files left in the temporary directory see its own jobs' files
// only. Made in beforeAll, not at import: `vitest list` imports the file and runs no hook.
const previous = process.env.TMPDIR;
let own: string | undefined;

beforeAll(() => {
  own = mkdtempSync(join(tmpdir(), 'topocoll-test-tmp-'));
  process.env.TMPDIR = own;
});

afterAll(() => {
  if (previous === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = previous;
  if (own !== undefined) rmSync(own, { recursive: true, force: true });
});
