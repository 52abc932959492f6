import { parseArgs, type ParseArgsConfig } from 'node:util';
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
