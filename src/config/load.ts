import { dirname, isAbsolute, resolve } from 'node:path';
import { Composer, CST, isMap, isScalar, Lexer, LineCounter, Parser, YAMLParseError, type Document, type Node as YamlNode } from 'yaml';
import type { z } from 'zod';
import { TopocollError, type ErrorLocation } from '../errors.js';
import { DEFAULT_CONFIG_VALUES } from './defaults.generated.js';
import { configSchema, type TopocollConfig, type TopocollConfigInput } from './schema.js';
import { readTextFile } from '../util/read-text-file.js';
import { PACKAGE_ROOT } from '../util/package-root.js';
import { positionAt } from '../util/position.js';

/**
 * Loading and validating configuration. YAML errors and schema errors both become `ECONFIG`
 * with the file, line and column of the offending key or value, so a user can go straight to it.
 */

/** The configuration shipped with the package, used when nothing else is given. */
export const DEFAULT_CONFIG_PATH = resolve(PACKAGE_ROOT, 'config/default.yaml');

/**
 * YAML tokens (keys, values, indicators; not spaces or comments) a configuration may have:
 * config/default.yaml has about 260. The yaml package's memory grows per token, and its
 * duplicate-key check is quadratic in the keys of a map, so a file is counted with the
 * streaming lexer and refused beyond this before it is parsed.
 */
export const MAX_YAML_TOKENS = 8192;
/** Collections nested in collections; the configuration has 4 levels, yaml's composer recurses per level. */
export const MAX_YAML_DEPTH = 64;
/**
 * Nodes that expanding aliases may copy, relative to the document (yaml's `maxAliasCount`):
 * a configuration needs few aliases, and an alias bomb (`&a [*b, *b, …]` nested) is refused.
 */
export const MAX_YAML_ALIAS_COUNT = 100;

export interface ParsedYaml {
  doc: Document;
  lineCounter: LineCounter;
  /** Offset of the first alias (`*name`), if any. */
  firstAlias: number | undefined;
}

/**
 * Parses YAML text into a document within the limits above. Every problem, from a syntax error to
 * a file that is too large or too deep for the parser, is an ECONFIG error naming the file and,
 * where there is one, the line and column.
 */
export function parseYaml(text: string, file: string): ParsedYaml {
  const lineCounter = new LineCounter();
  const { tree, firstAlias } = checkYamlShape(text, file, lineCounter);
  // yaml's parseDocument, on the syntax tree the shape check made (the text is parsed once).
  let doc: Document | undefined;
  try {
    for (const next of new Composer({ prettyErrors: false, uniqueKeys: true }).compose(tree, true, text.length)) {
      if (doc === undefined) {
        doc = next;
        continue;
      }
      doc.errors.push(new YAMLParseError([next.range[0], next.range[1]], 'MULTIPLE_DOCS', 'Source contains multiple documents'));
      break;
    }
  } catch (cause) {
    throw new TopocollError('ECONFIG', `invalid YAML: ${(cause as Error).message.split('\n')[0]}`, { file, cause });
  }
  // compose(…, true, …) always ends with a document, empty for empty text.
  if (doc === undefined) throw new TopocollError('ECONFIG', 'invalid YAML: no document', { file });
  const yamlError = doc.errors[0];
  if (yamlError !== undefined) {
    const pos = lineCounter.linePos(yamlError.pos[0]);
    throw new TopocollError('ECONFIG', `invalid YAML: ${yamlError.message.split('\n')[0]}`, { file, line: pos.line, column: pos.col });
  }
  return { doc, lineCounter, firstAlias };
}

/**
 * Counts the tokens with the lexer, which streams and stops at the limit, then parses the text
 * into its concrete syntax tree and measures the nesting there, walked with an explicit stack.
 * Returns the tree's top-level tokens and the offset of the first alias, to locate an alias bomb
 * later.
 */
function checkYamlShape(text: string, file: string, lineCounter: LineCounter): { tree: CST.Token[]; firstAlias: number | undefined } {
  const at = (offset: number): ErrorLocation => ({ file, ...positionAt(text, offset) });
  const hint = 'A topocoll configuration is a few small maps; see config/default.yaml.';
  let tokens = 0;
  let offset = 0;
  let firstAlias: number | undefined;
  for (const token of new Lexer().lex(text)) {
    const type = CST.tokenType(token);
    // The lexer's mode markers are not source text.
    if (type === 'doc-mode' || type === 'scalar' || type === 'flow-error-end') continue;
    if (type !== 'space' && type !== 'newline' && type !== 'comment' && ++tokens > MAX_YAML_TOKENS) {
      throw new TopocollError('ECONFIG', `the file has more than ${MAX_YAML_TOKENS} YAML tokens, the limit for a configuration`, { ...at(offset), hint });
    }
    if (type === 'alias') firstAlias ??= offset;
    offset += token.length;
  }
  const tree = [...new Parser(lineCounter.addNewLine).parse(text)];
  const stack: [CST.Token | undefined, number][] = tree.map((top) => [top, 0]);
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const [token, depth] = entry;
    if (token?.type === 'document') stack.push([token.value, depth]);
    if (token?.type !== 'block-map' && token?.type !== 'block-seq' && token?.type !== 'flow-collection') continue;
    if (depth === MAX_YAML_DEPTH) {
      throw new TopocollError('ECONFIG', `collections nest more than ${MAX_YAML_DEPTH} deep, the limit for a configuration`, { ...at(token.offset), hint });
    }
    for (const item of token.items) stack.push([item.key ?? undefined, depth + 1], [item.value, depth + 1]);
  }
  return { tree, firstAlias };
}

export function parseConfig(text: string, file: string): TopocollConfig {
  const { doc, lineCounter, firstAlias } = parseYaml(text, file);
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: MAX_YAML_ALIAS_COUNT }) ?? {};
  } catch (cause) {
    const pos = firstAlias === undefined ? undefined : lineCounter.linePos(firstAlias);
    const where = { file, line: pos?.line, column: pos?.col };
    const bomb = cause instanceof ReferenceError && /alias/i.test(cause.message);
    throw new TopocollError(
      'ECONFIG',
      bomb
        ? `aliases copy more than ${MAX_YAML_ALIAS_COUNT} nodes (an anchor's nodes times its aliases), the limit for a configuration`
        : `invalid YAML: ${(cause as Error).message}`,
      { ...where, cause, hint: bomb ? 'Write the values out instead of nesting aliases of aliases.' : undefined },
    );
  }
  const result = configSchema.safeParse(raw);
  if (result.success) return resolvePaths(result.data, file);
  const issues = result.error.issues.map((issue) => ({ issue, ...locate(doc, lineCounter, issue) }));
  const first = issues[0]!;
  const details = issues.map(({ issue, key, line, column }) => `${line}:${column}: ${key}: ${describe(issue)}`);
  throw new TopocollError('ECONFIG', `${first.key}: ${describe(first.issue)}${details.length > 1 ? ` (all problems: ${details.join('; ')})` : ''}`, {
    file,
    line: first.line,
    column: first.column,
    hint: 'See config/default.yaml for every key and its meaning.',
  });
}

export function loadConfigFile(path: string): TopocollConfig {
  return parseConfig(readTextFile(path, 'ECONFIG', 'configuration file'), path);
}

/** Validates options given in code (no file, so no line numbers). */
export function validateConfig(input: TopocollConfigInput, origin = 'options'): TopocollConfig {
  const result = configSchema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new TopocollError('ECONFIG', `${origin}: ${pathText(issue)}: ${describe(issue)}`);
}

/** What `configure()` may change while a communicator runs: everything that only decides schedules. */
export const RUNTIME_KEYS = [
  'levels',
  'bcast',
  'reduce',
  'allreduce',
  'allgather',
  'gather',
  'scatter',
  'reduceScatter',
  'alltoall',
  'barrier',
  'collectives',
] as const;
export type RuntimeConfigInput = Pick<TopocollConfigInput, (typeof RUNTIME_KEYS)[number]> & {
  shm?: { bcast?: { enabled?: boolean } };
};

/**
 * `current` with `partial` merged in (objects key by key, everything else replaced), validated
 * again. Only the keys of RUNTIME_KEYS and `shm.bcast.enabled` may change: the others shaped the
 * shared memory, the topology or the links, which exist already (EINVAL naming the key).
 */
export function mergeRuntimeConfig(current: TopocollConfig, partial: unknown, origin = 'configure()'): TopocollConfig {
  if (partial === null || typeof partial !== 'object' || Array.isArray(partial)) {
    throw new TopocollError('EINVAL', `${origin}: expected an object of settings, got ${partial === null ? 'null' : typeof partial}`);
  }
  for (const [key, value] of Object.entries(partial)) {
    if ((RUNTIME_KEYS as readonly string[]).includes(key)) continue;
    const onlyBcastEnabled =
      key === 'shm' &&
      isObject(value) &&
      Object.keys(value).every((k) => k === 'bcast') &&
      (!isObject(value.bcast) || Object.keys(value.bcast).every((k) => k === 'enabled'));
    if (onlyBcastEnabled) continue;
    throw new TopocollError('EINVAL', `${origin}: "${key}" cannot change while the communicator runs`, {
      hint: `Settings that can: ${RUNTIME_KEYS.join(', ')}, shm.bcast.enabled. The others need a new communicator (init()).`,
    });
  }
  return validateConfig(deepMerge(current, partial) as TopocollConfigInput, origin);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** `patch` merged into `base`: objects key by key, everything else (arrays too) replaced. */
export function deepMerge(base: unknown, patch: unknown): unknown {
  if (!isObject(base) || !isObject(patch)) return patch;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(patch)) out[k] = deepMerge(base[k], v);
  return out;
}

/**
 * The configuration in force: the explicit path, else `TOPOCOLL_CONFIG`, else the shipped
 * default file — whose values come from their generated module (src/config/defaults.generated.ts,
 * checked against the file by test/config/config.test.ts), so that a rank started with the
 * defaults parses no YAML.
 */
export function resolveConfig(path?: string, env: NodeJS.ProcessEnv = process.env): TopocollConfig {
  const file = path ?? env.TOPOCOLL_CONFIG;
  if (file !== undefined) return loadConfigFile(file);
  return resolvePaths(validateConfig(DEFAULT_CONFIG_VALUES as TopocollConfigInput, DEFAULT_CONFIG_PATH), DEFAULT_CONFIG_PATH);
}

/** Relative file paths inside a config file are relative to that file, not the cwd. */
function resolvePaths(config: TopocollConfig, file: string): TopocollConfig {
  const base = dirname(file);
  const fix = (p: string | null): string | null => (p === null || isAbsolute(p) ? p : resolve(base, p));
  return {
    ...config,
    network: { ...config.network, file: fix(config.network.file) },
    topology: { ...config.topology, hwlocXml: fix(config.topology.hwlocXml) },
  };
}

function describe(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  if (issue.code === 'invalid_key') return issue.issues[0]?.message ?? issue.message;
  return issue.message;
}

function pathText(issue: z.core.$ZodIssue): string {
  const path = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]!] : issue.path;
  return path.length === 0 ? '(top level)' : path.map(String).join('.');
}

/** The source position of an issue: the offending key for key errors, else the value. */
function locate(doc: Document, lc: LineCounter, issue: z.core.$ZodIssue): { key: string; line: number; column: number } {
  const keyIssue = issue.code === 'unrecognized_keys' || issue.code === 'invalid_key';
  const path = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]!] : [...issue.path];
  const key = path.length === 0 ? '(top level)' : path.map(String).join('.');
  // Walk down as far as the document goes; a missing key is reported at its parent.
  let node: YamlNode | null | undefined = doc.contents;
  let keyNode: YamlNode | undefined;
  for (const segment of path) {
    if (!isMap(node)) break;
    const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(segment));
    if (pair === undefined) break;
    keyNode = pair.key as YamlNode;
    node = pair.value as YamlNode | null;
  }
  const target = keyIssue || node === null || node === undefined ? (keyNode ?? node) : node;
  const offset = target?.range?.[0] ?? 0;
  const pos = lc.linePos(offset);
  return { key, line: pos.line, column: pos.col };
}
