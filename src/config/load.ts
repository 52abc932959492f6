import { dirname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMap, isScalar, LineCounter, parseDocument, type Document, type Node as YamlNode } from 'yaml';
import type { z } from 'zod';
import { TopocollError } from '../errors.js';
import { configSchema, type TopocollConfig, type TopocollConfigInput } from './schema.js';
import { readTextFile } from '../util/read-text-file.js';

/**
 * Loading and validating configuration. YAML errors and schema errors both become `ECONFIG`
 * with the file, line and column of the offending key or value, so a user can go straight to it.
 */

/** The configuration shipped with the package, used when nothing else is given. */
export const DEFAULT_CONFIG_PATH = resolve(dirname(fileURLToPath(import.meta.url)), '../../config/default.yaml');

export function parseConfig(text: string, file: string): TopocollConfig {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const yamlError = doc.errors[0];
  if (yamlError !== undefined) {
    const pos = lineCounter.linePos(yamlError.pos[0]);
    throw new TopocollError('ECONFIG', `invalid YAML: ${yamlError.message.split('\n')[0]}`, { file, line: pos.line, column: pos.col });
  }
  const raw: unknown = doc.toJS() ?? {};
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
export const RUNTIME_KEYS = ['levels', 'bcast', 'reduce', 'allreduce', 'collectives'] as const;
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
      key === 'shm' && isObject(value) && Object.keys(value).every((k) => k === 'bcast') && (!isObject(value.bcast) || Object.keys(value.bcast).every((k) => k === 'enabled'));
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

function deepMerge(base: unknown, patch: unknown): unknown {
  if (!isObject(base) || !isObject(patch)) return patch;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(patch)) out[k] = deepMerge(base[k], v);
  return out;
}

/**
 * The configuration in force: the explicit path, else `TOPOCOLL_CONFIG`, else the shipped
 * default file.
 */
export function resolveConfig(path?: string, env: NodeJS.ProcessEnv = process.env): TopocollConfig {
  return loadConfigFile(path ?? env.TOPOCOLL_CONFIG ?? DEFAULT_CONFIG_PATH);
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
  let node: YamlNode | null | undefined = doc.contents as YamlNode | null;
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
