// Writes the shipped defaults — the configuration config/default.yaml and the machine profile
// config/profiles/default.yaml — as one TypeScript module, so that a rank that runs with them
// starts without parsing YAML (the yaml package's first parses cost a rank more CPU than the rest
// of init(); docs/architecture.md, "A rank's start"):
//   node scripts/gen-defaults.mjs           rewrites src/config/defaults.generated.ts
//   node scripts/gen-defaults.mjs --check   writes nothing; fails when the committed file differs
// `npm run gen:defaults` is the first. The module holds the values as the YAML parses; the library
// validates them with the same schemas as any file (src/config/load.ts, machine-profiles.ts).
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const CONFIG_PATH = 'config/default.yaml';
export const PROFILE_PATH = 'config/profiles/default.yaml';
export const TS_PATH = 'src/config/defaults.generated.ts';

/** The module's text, formatted as Prettier formats the sources. */
export async function generate() {
  const read = (path) => JSON.stringify(parse(readFileSync(join(ROOT, path), 'utf8')));
  const text = [
    `// Generated from ${CONFIG_PATH} and ${PROFILE_PATH} by scripts/gen-defaults.mjs — do not edit: change them and run \`npm run gen:defaults\`.`,
    '',
    `/** ${CONFIG_PATH} as its YAML parses (validated where it is used, src/config/load.ts). */`,
    `export const DEFAULT_CONFIG_VALUES: unknown = ${read(CONFIG_PATH)};`,
    '',
    `/** ${PROFILE_PATH} as its YAML parses (validated where it is used, src/config/machine-profiles.ts). */`,
    `export const DEFAULT_PROFILE_VALUES: unknown = ${read(PROFILE_PATH)};`,
    '',
  ].join('\n');
  const prettier = await import('prettier');
  const options = (await prettier.resolveConfig(join(ROOT, TS_PATH))) ?? {};
  return prettier.format(text, { ...options, parser: 'typescript' });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = await generate();
  const path = join(ROOT, TS_PATH);
  if (process.argv[2] === '--check') {
    if (readFileSync(path, 'utf8') !== text) {
      console.error(`${TS_PATH} is stale: run npm run gen:defaults`);
      process.exit(1);
    }
  } else {
    writeFileSync(path, text);
    console.log(`wrote ${TS_PATH}`);
  }
}
