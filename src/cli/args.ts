import { parseArgs, type ParseArgsConfig } from 'node:util';
import { byteSize } from '../config/schema.js';
import { TopocollError } from '../errors.js';

/**
 * Command-line parsing on Node's own `util.parseArgs`, with its errors turned into `EINVAL`
 * that name the command and point at `--help`.
 */
export function parseCommandArgs<T extends NonNullable<ParseArgsConfig['options']>>(
  command: string,
  argv: string[],
  options: T,
  allowPositionals = false,
): ReturnType<typeof parseArgs<{ args: string[]; options: T; allowPositionals: boolean; strict: true }>> {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (cause) {
    throw new TopocollError('EINVAL', `topocoll ${command}: ${(cause as Error).message}`, {
      cause,
      hint: `Run "topocoll ${command} --help" for the options.`,
    });
  }
}

export function requireOne<T extends string>(command: string, name: string, value: string | undefined, allowed: readonly T[]): T {
  if (value === undefined || !(allowed as readonly string[]).includes(value)) {
    throw new TopocollError('EINVAL', `topocoll ${command}: --${name} must be one of ${allowed.join(', ')}${value === undefined ? '' : `, got "${value}"`}`);
  }
  return value as T;
}

export function parseNonNegativeInt(command: string, name: string, value: string): number {
  if (!/^(0|[1-9][0-9]*)$/.test(value)) {
    throw new TopocollError('EINVAL', `topocoll ${command}: --${name} must be a non-negative integer, got "${value}"`);
  }
  return Number(value);
}

/** A size in bytes: an integer with an optional binary unit (65536, 64KiB, 1MiB), as the configuration takes them. */
export function parseByteSize(command: string, name: string, value: string): number {
  const parsed = byteSize.safeParse(/^[0-9]+$/.test(value) ? Number(value) : value);
  if (!parsed.success) throw new TopocollError('EINVAL', `topocoll ${command}: --${name} takes sizes such as 65536, 64KiB or 1MiB, got "${value}"`);
  return parsed.data;
}
