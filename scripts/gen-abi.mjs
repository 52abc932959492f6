// Writes the ABI's C++ header and TypeScript module from abi/abi.yaml (its header comment says
// what the spec holds and how):
//   node scripts/gen-abi.mjs             rewrites native/src/base/abi_generated.h and src/abi.generated.ts
//   node scripts/gen-abi.mjs --out DIR   writes the two under DIR instead (same relative paths)
//   node scripts/gen-abi.mjs --check     writes nothing; fails when the committed files differ
// `npm run gen:abi` is the first. The C++ is written in clang-format's style (.clang-format:
// `npm run lint:native` checks it); the TypeScript goes through Prettier's API in this process,
// so generating starts no process (test/abi-generated.test.ts runs it in the unit tests).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const SPEC_PATH = 'abi/abi.yaml';
export const CPP_PATH = 'native/src/base/abi_generated.h';
export const TS_PATH = 'src/abi.generated.ts';

/** Comment lines are wrapped to this many columns (indentation and comment marks included). */
const WIDTH = 100;

/** The first line of both files (one line, not wrapped: a reader and a grep find it whole). */
const BANNER = `// Generated from ${SPEC_PATH} by scripts/gen-abi.mjs — do not edit: change the spec and run \`npm run gen:abi\`.`;

// ---- the spec -------------------------------------------------------------------------------

const pascal = (name) => name[0].toUpperCase() + name.slice(1);
/** planHash → plan_hash, ReduceOp → reduce_op. */
const snake = (name) => name.replace(/(?!^)[A-Z]/g, (c) => `_${c}`).toLowerCase();
const upperSnake = (name) => snake(name).toUpperCase();

function fail(message) {
  throw new Error(`${SPEC_PATH}: ${message}`);
}

function integer(value, what) {
  if (!Number.isSafeInteger(value)) fail(`${what} must be an integer, got ${JSON.stringify(value)}`);
  return value;
}

function text(value, what) {
  if (value === undefined) return '';
  if (typeof value !== 'string') fail(`${what} must be text`);
  if (value.includes('*/')) fail(`${what} must not contain "*/"`);
  return value.trim();
}

/** Fails on a key `object` may not have (a misspelt key would otherwise be ignored). */
function only(object, allowed, what) {
  if (typeof object !== 'object' || object === null || Array.isArray(object)) fail(`${what} must be a mapping`);
  for (const key of Object.keys(object)) if (!allowed.includes(key)) fail(`${what}: unknown key ${key} (known: ${allowed.join(', ')})`);
  return object;
}

function unique(names, what) {
  const seen = new Set();
  for (const name of names) {
    if (seen.has(name)) fail(`${what} ${name} appears twice`);
    seen.add(name);
  }
}

function readEnum(name, e) {
  only(e, ['doc', 'cpp', 'fields', 'tsConstEnum', 'values'], `enum ${name}`);
  const fields = Object.entries(e.fields ?? {}).map(([field, f]) => ({ name: field, cppType: only(f, ['cpp'], `${name}.fields.${field}`).cpp }));
  const values = (e.values ?? []).map((v) => {
    only(v, ['name', 'value', 'doc', 'cpp', ...fields.map((f) => f.name)], `${name}.${v.name}`);
    const value = { name: v.name, cpp: `k${v.cpp ?? pascal(v.name)}`, value: integer(v.value, `${name}.${v.name}`), doc: text(v.doc, `${name}.${v.name}`) };
    for (const f of fields) {
      const x = v[f.name];
      if (f.cppType === 'bool' ? typeof x !== 'boolean' : !Number.isSafeInteger(x)) fail(`${name}.${v.name} needs ${f.name} (${f.cppType})`);
      value[f.name] = x;
    }
    return value;
  });
  if (values.length === 0) fail(`enum ${name} has no values`);
  unique(
    values.map((v) => v.name),
    `${name}:`,
  );
  unique(
    values.map((v) => v.cpp),
    `${name}: the C++ enumerator`,
  );
  // Tables by value need 0, 1, …; the others only increase (a code may be kept for another branch).
  values.forEach((v, i) => {
    if (i > 0 && (fields.length > 0 ? v.value !== values[i - 1].value + 1 : v.value <= values[i - 1].value))
      fail(`${name}'s values must be ${fields.length > 0 ? 'consecutive' : 'increasing'} and in order (${v.name})`);
  });
  if (fields.length > 0 && values[0].value !== 0) fail(`${name} has fields, so its values must start at 0 (a table by value)`);
  const cppType = only(e.cpp ?? {}, ['type'], `${name}.cpp`).type ?? 'int32_t';
  return { name, doc: text(e.doc, name), cppType, fields, values, tsConstEnum: e.tsConstEnum };
}

function readStep(step, stepKind) {
  const kinds = new Map(stepKind.values.map((v) => [v.name, v]));
  only(step, ['doc', 'fields'], 'step');
  const fields = step.fields.map((f) => {
    only(f, ['name', 'word', 'kinds', 'default', 'doc'], `step field ${f.name}`);
    const field = { name: f.name, word: integer(f.word, `step field ${f.name}'s word`), doc: text(f.doc, `step field ${f.name}`) };
    if (f.kinds !== undefined) {
      field.kinds = f.kinds.map((k) => kinds.get(k) ?? fail(`step field ${f.name}: no step kind ${k}`));
    }
    if (f.default !== undefined) field.default = integer(f.default, `step field ${f.name}'s default`);
    return field;
  });
  unique(
    fields.map((f) => f.name),
    'step field',
  );
  const words = Math.max(...fields.map((f) => f.word)) + 1;
  for (let w = 0; w < words; w++) {
    const on = fields.filter((f) => f.word === w);
    if (on.length === 0) fail(`step word ${w} has no field`);
    if (on.length === 1) continue;
    for (const f of on) {
      if (f.kinds === undefined) fail(`step fields ${on.map((g) => g.name).join(', ')} share word ${w}, so each needs its kinds`);
      if (f.default !== on[0].default) fail(`step fields sharing word ${w} need the same default`);
    }
    unique(
      on.flatMap((f) => f.kinds.map((k) => k.name)),
      `step word ${w}: kind`,
    );
  }
  for (const f of fields) {
    if (f.kinds !== undefined && f.default === undefined) fail(`step field ${f.name} has kinds, so it needs a default`);
  }
  return { doc: text(step.doc, 'step'), words, fields };
}

function readHeader(h) {
  only(h, ['doc', 'magic', 'bytes', 'fields'], 'messageHeader');
  only(h.magic, ['value', 'doc'], 'messageHeader.magic');
  const fields = h.fields.map((f) => ({
    name: only(f, ['name', 'offset', 'bytes', 'doc'], `messageHeader.${f.name}`).name,
    offset: integer(f.offset, `messageHeader.${f.name}.offset`),
    bytes: integer(f.bytes, `messageHeader.${f.name}.bytes`),
    doc: text(f.doc, `messageHeader.${f.name}`),
  }));
  const bytes = integer(h.bytes, 'messageHeader.bytes');
  // The fields tile the header, each aligned to its size: both sides access them in place.
  let at = 0;
  for (const f of fields) {
    if (f.offset !== at || f.offset % f.bytes !== 0) fail(`messageHeader.${f.name} must start at byte ${at}, aligned to its size`);
    at += f.bytes;
  }
  if (at !== bytes || bytes % 4 !== 0) fail('messageHeader: the fields must fill its bytes, a multiple of 4');
  return { doc: text(h.doc, 'messageHeader'), magic: integer(h.magic.value, 'messageHeader.magic'), magicDoc: text(h.magic.doc, 'magic'), bytes, fields };
}

function readConstants(constants) {
  return Object.entries(constants).map(([group, g]) => ({
    group,
    doc: text(only(g, ['doc', 'cpp', 'values'], `constants.${group}`).doc, group),
    cppType: g.cpp?.type ?? 'size_t',
    values: g.values.map((v) => ({
      name: only(v, ['name', 'value', 'doc'], `${group}.${v.name}`).name,
      value: integer(v.value, `${group}.${v.name}`),
      doc: text(v.doc, `${group}.${v.name}`),
    })),
  }));
}

/** The spec, checked, in the form the two writers take. */
export function readSpec(source) {
  const spec = only(parse(source), ['enums', 'step', 'messageHeader', 'callCounters', 'constants'], 'the spec');
  const enums = Object.entries(spec.enums).map(([name, e]) => readEnum(name, e));
  const stepKind = enums.find((e) => e.name === 'StepKind') ?? fail('enums needs StepKind');
  return {
    enums,
    stepKind,
    step: readStep(spec.step, stepKind),
    header: readHeader(spec.messageHeader),
    counters: {
      doc: text(only(spec.callCounters, ['doc', 'words'], 'callCounters').doc, 'callCounters'),
      words: spec.callCounters.words.map((w) => ({
        name: only(w, ['name', 'doc'], `callCounters.${w.name}`).name,
        doc: text(w.doc, `callCounters.${w.name}`),
      })),
    },
    constants: readConstants(spec.constants),
  };
}

// ---- writing --------------------------------------------------------------------------------

/** `words` as lines of at most `width` characters (a longer word gets a line of its own). */
function wrap(words, width) {
  const lines = [];
  for (const paragraph of words.split(/\n+/)) {
    let line = '';
    for (const word of paragraph.split(/\s+/).filter(Boolean)) {
      if (line !== '' && line.length + 1 + word.length > width) {
        lines.push(line);
        line = word;
      } else {
        line = line === '' ? word : `${line} ${word}`;
      }
    }
    if (line !== '') lines.push(line);
  }
  return lines;
}

/** A C++ comment (`//` lines at `indent`); nothing for no text. */
function cppComment(doc, indent = '') {
  return wrap(doc, WIDTH - indent.length - 3).map((l) => `${indent}// ${l}`);
}

/** A TSDoc comment at `indent`; nothing for no text. */
function tsDoc(doc, indent = '') {
  if (doc === '') return [];
  const lines = wrap(doc, WIDTH - indent.length - 3);
  if (lines.length === 1 && indent.length + lines[0].length + 7 <= WIDTH) return [`${indent}/** ${lines[0]} */`];
  return [`${indent}/**`, ...lines.map((l) => `${indent} * ${l}`), `${indent} */`];
}

const hex = (x) => `0x${x.toString(16)}`;

/** Whether `kind` is among the kinds carrying a step field: a switch over them. */
function cppPredicate(field) {
  const name = `StepHas${pascal(field.name)}`;
  return [
    ...cppComment(`Whether a step of \`kind\` carries ${field.name}: only these kinds read it, every other kind writes its default.`),
    `constexpr bool ${name}(StepKind kind) {`,
    '  switch (kind) {',
    ...field.kinds.map((k, i) => (i < field.kinds.length - 1 ? `    case StepKind::${k.cpp}:` : `    case StepKind::${k.cpp}: return true;`)),
    '    default: return false;',
    '  }',
    '}',
  ];
}

export function cppSource(spec) {
  const out = [
    BANNER,
    '//',
    ...cppComment(
      'What the addon and the TypeScript runtime (src/abi.generated.ts, from the same spec) agree on: step kinds and the encoded ' +
        'step, datatype, operator and collective codes, the call descriptor, the message header and the call counters both ' +
        'sides write, and the shared area and window sizes they both lay out.',
    ),
    '#pragma once',
    '',
    '#include <cstddef>',
    '#include <cstdint>',
    '',
    'namespace topocoll::abi {',
    '',
  ];
  for (const e of spec.enums) {
    out.push(...cppComment(e.doc), `enum class ${e.name} : ${e.cppType} {`);
    for (const v of e.values) out.push(...cppComment(v.doc, '  '), `  ${v.cpp} = ${v.value},`);
    out.push('};', `inline constexpr size_t k${e.name}Count = ${e.values.length};`);
    out.push(...cppComment(`Each ${e.name} by value, with its name in TypeScript (and in the addon's messages and tables).`));
    out.push(`struct ${e.name}Info {`, '  const char* name;', `  ${e.name} value;`);
    for (const f of e.fields) out.push(`  ${f.cppType} ${snake(f.name)};`);
    out.push('};');
    // One entry per line: clang-format would pack the entries into columns.
    out.push('// clang-format off', `inline constexpr ${e.name}Info k${e.name}Table[] = {`);
    for (const v of e.values) out.push(`    {"${v.name}", ${e.name}::${v.cpp}${e.fields.map((f) => `, ${String(v[f.name])}`).join('')}},`);
    out.push('};', '// clang-format on', '');
  }

  const { step } = spec;
  out.push(...cppComment(step.doc), `inline constexpr size_t kStepWords = ${step.words};`);
  out.push(...cppComment('The word of each field of an encoded step.'), 'namespace step_word {');
  for (const f of step.fields) out.push(...cppComment(f.doc), `inline constexpr size_t k${pascal(f.name)} = ${f.word};`);
  out.push('}  // namespace step_word');
  out.push(
    ...cppComment('What a step encodes for a field it has no value for, and what the kinds that do not carry the field write there.'),
    'namespace step_default {',
  );
  for (const f of step.fields.filter((g) => g.default !== undefined)) out.push(`inline constexpr int32_t k${pascal(f.name)} = ${f.default};`);
  out.push('}  // namespace step_default');
  for (const f of step.fields.filter((g) => g.kinds !== undefined)) out.push(...cppPredicate(f));
  out.push('');

  const { header } = spec;
  out.push(...cppComment(header.doc));
  out.push(...cppComment(`MsgHeader's magic: ${header.magicDoc}.`), `inline constexpr uint32_t kMsgMagic = ${hex(header.magic)}U;`);
  out.push(`inline constexpr size_t kMsgHeaderBytes = ${header.bytes};`);
  out.push(...cppComment("Byte offsets of MsgHeader's fields."), 'namespace msg_header {');
  for (const f of header.fields) out.push(...cppComment(f.doc), `inline constexpr size_t k${pascal(f.name)} = ${f.offset};`);
  out.push('}  // namespace msg_header', '');

  const { counters } = spec;
  out.push(...cppComment(counters.doc), `inline constexpr size_t kCallCounterWords = ${counters.words.length};`);
  out.push(...cppComment('The word of each counter.'), 'namespace call_counter {');
  counters.words.forEach((w, i) => out.push(...cppComment(w.doc), `inline constexpr size_t k${pascal(w.name)} = ${i};`));
  out.push('}  // namespace call_counter', '');

  for (const g of spec.constants) {
    out.push(...cppComment(g.doc));
    for (const v of g.values) out.push(...cppComment(v.doc), `inline constexpr ${g.cppType} k${pascal(g.group)}${pascal(v.name)} = ${v.value};`);
    out.push('');
  }
  out.push('}  // namespace topocoll::abi', '');
  return out.join('\n');
}

/** The TypeScript module, before Prettier. */
export function tsSource(spec) {
  const out = [
    BANNER,
    '//',
    ...cppComment(
      `What the TypeScript runtime and the addon (${CPP_PATH}, from the same spec) agree on; src/native.ts, ` +
        'src/algorithms/schedule.ts, src/runtime/datatypes.ts and src/runtime/fast-path.ts give it its meaning.',
    ),
    '',
  ];
  const kindName = (k) => `StepKind.${k.name}`;
  for (const e of spec.enums) {
    if (e.tsConstEnum !== undefined) {
      out.push(...tsDoc(e.doc), `export const enum ${e.name} {`);
      for (const v of e.values) out.push(...tsDoc(v.doc, '  '), `  ${v.name} = ${v.value},`);
      out.push('}');
      out.push(...tsDoc(`${e.name} as an object (a const enum has none at run time).`), `export const ${e.tsConstEnum} = {`);
      for (const v of e.values) out.push(`  ${v.name}: ${v.value},`);
      out.push('} as const;', '');
      continue;
    }
    out.push(...tsDoc(e.doc), `export const ${e.name} = {`);
    for (const v of e.values) out.push(...tsDoc(v.doc, '  '), `  ${v.name}: ${v.value},`);
    out.push('} as const;', `export type ${e.name} = (typeof ${e.name})[keyof typeof ${e.name}];`);
    if (e.fields.length > 0) {
      out.push(...tsDoc(`Each ${e.name}'s ${e.fields.map((f) => f.name).join(' and ')}, by value.`), `export const ${upperSnake(e.name)}_INFO = [`);
      for (const v of e.values) out.push(`  { name: '${v.name}', ${e.fields.map((f) => `${f.name}: ${v[f.name]}`).join(', ')} },`);
      out.push('] as const;');
    }
    out.push('');
  }

  const { step } = spec;
  out.push(...tsDoc(step.doc), `export const STEP_WORDS = ${step.words};`);
  out.push(...tsDoc('The word of each field of an encoded step.'), 'export const StepWord = {');
  for (const f of step.fields) out.push(...tsDoc(f.doc, '  '), `  ${f.name}: ${f.word},`);
  out.push('} as const;');
  out.push(...tsDoc('What a step encodes for a field it has no value for, and what the kinds that do not carry the field write there.'));
  out.push('export const StepDefault = {');
  for (const f of step.fields.filter((g) => g.default !== undefined)) out.push(`  ${f.name}: ${f.default},`);
  out.push('} as const;');
  for (const f of step.fields.filter((g) => g.kinds !== undefined)) {
    out.push(...tsDoc(`Whether a step of \`kind\` carries ${f.name}: only these kinds read it, every other kind writes its default.`));
    out.push(
      `export function stepHas${pascal(f.name)}(kind: StepKind): boolean {`,
      `  return ${f.kinds.map((k) => `kind === ${kindName(k)}`).join(' || ')};`,
      '}',
    );
  }
  out.push('');

  const { header } = spec;
  out.push(...tsDoc(`${header.doc} The magic: ${header.magicDoc}.`), `export const MSG_MAGIC = ${hex(header.magic)};`);
  out.push(`export const MSG_HEADER_BYTES = ${header.bytes};`);
  // Const enums: the compiler writes their values where they are used, so the fast path's header
  // and counter words are literals in the bundle (a module variable is a load per use there).
  out.push(...tsDoc("Byte offsets of MsgHeader's fields."), 'export const enum MsgHeaderOffset {');
  for (const f of header.fields) out.push(...tsDoc(f.doc, '  '), `  ${f.name} = ${f.offset},`);
  out.push('}', ...tsDoc('MsgHeaderOffset as an object (a const enum has none at run time).'), 'export const MSG_HEADER_OFFSETS = {');
  for (const f of header.fields) out.push(`  ${f.name}: ${f.offset},`);
  out.push('} as const;');
  // The fast path writes the header as 32-bit words: the fields that start a word, by word; the
  // byte fields, by their place in the word they share (the first of them names that word).
  out.push(...tsDoc('The 32-bit word each field that starts a word is (the fast path writes the header as words).'), 'export const enum MsgHeaderWord {');
  for (const f of header.fields.filter((g) => g.offset % 4 === 0)) out.push(`  ${f.name} = ${f.offset / 4},`);
  out.push('}', ...tsDoc('Where each byte field starts in its word (the word of the first byte field before it that starts one), in bits (little-endian).'));
  out.push('export const enum MsgHeaderShift {');
  for (const f of header.fields.filter((g) => g.bytes === 1)) out.push(`  ${f.name} = ${(f.offset % 4) * 8},`);
  out.push('}', '');

  const { counters } = spec;
  out.push(...tsDoc(counters.doc), `export const CALL_COUNTER_WORDS = ${counters.words.length};`);
  out.push(...tsDoc('The word of each counter.'), 'export const enum CallCounter {');
  counters.words.forEach((w, i) => out.push(...tsDoc(w.doc, '  '), `  ${w.name} = ${i},`));
  out.push('}', ...tsDoc('CallCounter as an object (a const enum has none at run time).'), 'export const CALL_COUNTERS = {');
  counters.words.forEach((w, i) => out.push(`  ${w.name}: ${i},`));
  out.push('} as const;', '');

  for (const g of spec.constants) {
    out.push(...cppComment(g.doc));
    for (const v of g.values) out.push(...tsDoc(v.doc), `export const ${upperSnake(g.group)}_${upperSnake(v.name)} = ${v.value};`);
    out.push('');
  }
  return out.join('\n');
}

/** The generated files by path (relative to the repository) from the spec's text. */
export async function generate(source) {
  const spec = readSpec(source);
  const prettier = await import('prettier');
  const options = (await prettier.resolveConfig(join(ROOT, TS_PATH))) ?? {};
  const ts = await prettier.format(tsSource(spec), { ...options, parser: 'typescript' });
  return { [CPP_PATH]: cppSource(spec), [TS_PATH]: ts };
}

/** Generates from the repository's spec into `outRoot` (the repository by default); returns the paths written. */
export async function writeGenerated(outRoot = ROOT) {
  const files = await generate(readFileSync(join(ROOT, SPEC_PATH), 'utf8'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(outRoot, path)), { recursive: true });
    writeFileSync(join(outRoot, path), content);
  }
  return Object.keys(files).map((p) => join(outRoot, p));
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args[0] === '--check') {
    const files = await generate(readFileSync(join(ROOT, SPEC_PATH), 'utf8'));
    const stale = Object.entries(files).filter(([path, content]) => readFileSync(join(ROOT, path), 'utf8') !== content);
    for (const [path] of stale) console.error(`${path} is not what ${SPEC_PATH} generates: run npm run gen:abi`);
    process.exitCode = stale.length > 0 ? 1 : 0;
  } else {
    const out = args[0] === '--out' && args[1] !== undefined ? resolve(args[1]) : ROOT;
    for (const path of await writeGenerated(out)) console.log(`wrote ${path}`);
  }
}
