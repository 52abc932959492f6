import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from './helpers/jobs.js';

/**
 * The native sources are laid out by layer (docs/architecture.md §1): each folder of native/src
 * is one, and a file includes only files of its own folder and of the folders below it. shm/ and
 * transport/ stand side by side (neither includes the other); messages/ (point-to-point
 * messages, over both) and engine/ stand side by side above them. Only binding/ speaks Node-API.
 * The module table of docs/architecture.md names every native file at its path, and every
 * native path it names exists.
 */

const SRC = join(repoRoot, 'native', 'src');

/** Each layer folder and the folders its files may include (its own among them). */
const MAY_INCLUDE: Readonly<Record<string, readonly string[]>> = {
  base: ['base'],
  shm: ['shm', 'base'],
  transport: ['transport', 'base'],
  messages: ['messages', 'shm', 'transport', 'base'],
  engine: ['engine', 'shm', 'transport', 'base'],
  binding: ['binding', 'engine', 'messages', 'shm', 'transport', 'base'],
};

/** Headers outside native/src a layer may include: the public host-layer contract (native/include). */
const OUTSIDE = ['topocoll_p2p.h'];

/** Every file under native/src, as paths relative to it. */
function nativeFiles(dir = SRC, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? nativeFiles(join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`],
  );
}

const files = nativeFiles();
const sources = files.filter((f) => f.endsWith('.cc') || f.endsWith('.h'));

describe('native sources by layer', () => {
  it('every file is a source or header in one layer folder', () => {
    expect(sources.length).toBeGreaterThan(40);
    expect(files.filter((f) => !sources.includes(f))).toEqual([]);
    expect(sources.filter((f) => !(f.split('/').length === 2 && f.split('/')[0]! in MAY_INCLUDE))).toEqual([]);
  });

  it('a file includes only its own layer and the layers below it, by path from native/src', () => {
    const wrong: string[] = [];
    for (const file of sources) {
      const layer = file.split('/')[0]!;
      const text = readFileSync(join(SRC, file), 'utf8');
      for (const [, included = ''] of text.matchAll(/^#include "([^"]+)"/gm)) {
        if (OUTSIDE.includes(included)) continue;
        const ok = existsSync(join(SRC, included)) && (MAY_INCLUDE[layer] ?? []).includes(included.split('/')[0]!);
        if (!ok) wrong.push(`${file} includes "${included}"`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('only binding/ includes napi.h', () => {
    const napi = sources.filter((f) => /^#include <napi\.h>/m.test(readFileSync(join(SRC, f), 'utf8')));
    expect(napi.length).toBeGreaterThan(0);
    expect(napi.filter((f) => !f.startsWith('binding/'))).toEqual([]);
  });
});

describe("docs/architecture.md's module table", () => {
  const doc = readFileSync(join(repoRoot, 'docs', 'architecture.md'), 'utf8');
  // Paths as the document writes them: native/src/engine/step.cc, or a pair native/src/engine/step.{h,cc}.
  const named = [...doc.matchAll(/native\/src\/([a-z_]+\/[a-z0-9_]+)\.(h|cc|\{h,cc\})/g)].flatMap(([, stem, ext]) =>
    ext === '{h,cc}' ? [`${stem}.h`, `${stem}.cc`] : [`${stem}.${ext}`],
  );
  const rows = doc.split('\n').filter((line) => line.startsWith('| `') && line.includes('native/src/'));
  const inRows = rows.flatMap((row) =>
    [...(row.split('|')[1] ?? '').matchAll(/native\/src\/([a-z_]+\/[a-z0-9_]+)\.(h|cc|\{h,cc\})/g)].flatMap(([, stem, ext]) =>
      ext === '{h,cc}' ? [`${stem}.h`, `${stem}.cc`] : [`${stem}.${ext}`],
    ),
  );

  it('names every native file in its path column', () => {
    expect(sources.filter((f) => !inRows.includes(f))).toEqual([]);
  });

  it('names no native file that does not exist', () => {
    expect([...new Set(named)].filter((f) => !existsSync(join(SRC, f)))).toEqual([]);
  });
});
