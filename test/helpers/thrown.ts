import { expect } from 'vitest';
import { TopocollError, type TopocollErrorCode } from '../../src/errors.js';

/** Runs `fn`, which must throw a TopocollError (of `code`, when given), and returns it. */
export function thrown(fn: () => unknown, code?: TopocollErrorCode): TopocollError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(TopocollError);
    if (code !== undefined) expect((e as TopocollError).code).toBe(code);
    return e as TopocollError;
  }
  throw new Error('expected a TopocollError, but nothing was thrown');
}
