import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

// Runs before every job test file that shares the machine with others (vitest.config.ts): the
// file gets a TMPDIR of its own, which the processes it starts inherit, so that its checks for
// rendezvous files left in the temporary directory see its own jobs' files only.
const previous = process.env.TMPDIR;
const own = mkdtempSync(join(tmpdir(), 'topocoll-test-tmp-'));
process.env.TMPDIR = own;

afterAll(() => {
  if (previous === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = previous;
  rmSync(own, { recursive: true, force: true });
});
