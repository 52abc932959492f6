import { closest, distance } from 'fastest-levenshtein';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { byteSize } from '../config/schema.js';
import { TopocollError } from '../errors.js';

/**
 * A command line that does not parse or names a value that does not exist: runCli prints it as
 * one line pointing at `<command> --help` and exits with status 2 (runtime failures exit with
 * 1). `detail` holds the problem alone, without the command's name.
 */
export class CliUsageError extends TopocollError {
  constructor(
    readonly command: string,
    detail: string,
  ) {
    super('EINVAL', detail);
  }
}

/** A usage error of `command` (e.g. `run`; empty for the top level). */
export function usageError(command: string, detail: string): CliUsageError {
  return new CliUsageError(command, detail);
}

/** The option table of a command, as util.parseArgs takes it. */
export type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * The options every command declared, by command, as parseCommandArgs last saw them, less its
 * internal ones: what the test that checks each command's --help against its options reads
 * (test/cli/usage.test.ts).
 */
export const declaredOptions: Map<string, Options> = new Map();

/**
 * The spelling of `option` (`--name` or `-x`) nearest to one of `candidates`, when it is a likely
 * typo: within an edit distance of 2 (a swap of two letters is 2), 1 for a name of two letters,
 * and never for a one-letter name (`-x` is no typo of `-n`).
 */
export function nearestOption(option: string, candidates: readonly string[]): string | undefined {
  if (candidates.length === 0) return undefined;
  const name = option.replace(/=.*$/, '');
  const best = closest(name, candidates);
  const d = distance(name, best);
  const letters = name.replace(/^-+/, '').length;
  return d <= (letters <= 1 ? 0 : letters === 2 ? 1 : 2) ? best : undefined;
}

/** `--name` and `-x` of every option in `options`. */
export function optionSpellings(options: Options): string[] {
  return Object.entries(options).flatMap(([name, o]) => [`--${name}`, ...(o.short === undefined ? [] : [`-${o.short}`])]);
}

/**
 * Command-line parsing on Node's own `util.parseArgs` (strict: unknown options and positionals
 * where there are none are refused), its errors turned into CliUsageError: one sentence, the
 * nearest valid option suggested for an unknown one. `internal` names options that are no part
 * of the command's interface (a command that starts itself again passes them): its --help need
 * not list them, and they are never suggested.
 */
export function parseCommandArgs<T extends Options>(
  command: string,
  argv: string[],
  options: T,
  allowPositionals = false,
  internal: readonly (keyof T & string)[] = [],
): ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: boolean; strict: true }>> {
  const visible = Object.fromEntries(Object.entries(options).filter(([name]) => !internal.includes(name)));
  declaredOptions.set(command, visible);
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (cause) {
    const code = (cause as { code?: string }).code;
    const message = (cause as Error).message;
    const unknown = /^Unknown option '([^']+)'/.exec(message);
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown) {
      const near = nearestOption(unknown[1]!, optionSpellings(visible));
      throw usageError(command, `unknown option ${unknown[1]}${near === undefined ? '' : `; did you mean ${near}?`}`);
    }
    // Node's other messages (a missing value, an unexpected argument) are one sentence first.
    throw usageError(command, message.split(/(?<=\.) /)[0]!.replace(/\.$/, ''));
  }
}

export function requireOne<T extends string>(command: string, name: string, value: string | undefined, allowed: readonly T[]): T {
  if (value === undefined || !(allowed as readonly string[]).includes(value)) {
    throw usageError(command, `--${name} must be one of ${allowed.join(', ')}${value === undefined ? '' : `, got "${value}"`}`);
  }
  return value as T;
}

export function parseNonNegativeInt(command: string, name: string, value: string): number {
  if (!/^(0|[1-9][0-9]*)$/.test(value)) {
    throw usageError(command, `--${name} must be a non-negative integer, got "${value}"`);
  }
  return Number(value);
}

/** A size in bytes: an integer with an optional binary unit (65536, 64KiB, 1MiB), as the configuration takes them. */
export function parseByteSize(command: string, name: string, value: string): number {
  const parsed = byteSize.safeParse(/^[0-9]+$/.test(value) ? Number(value) : value);
  if (!parsed.success) throw usageError(command, `--${name} takes sizes such as 65536, 64KiB or 1MiB, got "${value}"`);
  return parsed.data;
}
