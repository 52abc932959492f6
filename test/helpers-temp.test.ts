import { existsSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { removeTempDirs, tempDir } from './helpers/temp.js';

describe('tempDir', () => {
  it('makes fresh directories under the temporary directory that removeTempDirs removes with their contents', () => {
    const a = tempDir('topocoll-temp-test-');
    const b = tempDir('topocoll-temp-test-');
    expect(a).not.toBe(b);
    expect(dirname(a)).toBe(tmpdir());
    expect(basename(a)).toMatch(/^topocoll-temp-test-.{6}$/);
    writeFileSync(join(a, 'file.txt'), 'x');
    removeTempDirs();
    expect(existsSync(a)).toBe(false);
    expect(existsSync(b)).toBe(false);
  });
});
