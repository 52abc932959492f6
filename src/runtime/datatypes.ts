import { TopocollError } from '../errors.js';

/**
 * Element types and reduction operators, with the numbers native/src/datatypes.h uses. The
 * datatype of a buffer comes from its TypedArray class.
 */

export type ReduceOpName = 'sum' | 'prod' | 'min' | 'max' | 'band' | 'bor' | 'bxor' | 'land' | 'lor';

const OPS: Record<ReduceOpName, { code: number; integerOnly: boolean }> = {
  sum: { code: 0, integerOnly: false },
  prod: { code: 1, integerOnly: false },
  min: { code: 2, integerOnly: false },
  max: { code: 3, integerOnly: false },
  band: { code: 4, integerOnly: true },
  bor: { code: 5, integerOnly: true },
  bxor: { code: 6, integerOnly: true },
  land: { code: 7, integerOnly: true },
  lor: { code: 8, integerOnly: true },
};

export interface Datatype {
  name: string;
  code: number;
  bytes: number;
  integer: boolean;
}

const dt = (name: string, code: number, bytes: number, integer: boolean): Datatype => ({ name, code, bytes, integer });

// Keyed by constructor so a lookup is one Map.get on the hot path. Buffer is a Uint8Array.
const BY_CONSTRUCTOR = new Map<unknown, Datatype>([
  [Int8Array, dt('int8', 0, 1, true)],
  [Uint8Array, dt('uint8', 1, 1, true)],
  [Uint8ClampedArray, dt('uint8clamped', 2, 1, true)],
  [Int16Array, dt('int16', 3, 2, true)],
  [Uint16Array, dt('uint16', 4, 2, true)],
  [Int32Array, dt('int32', 5, 4, true)],
  [Uint32Array, dt('uint32', 6, 4, true)],
  [Float32Array, dt('float32', 7, 4, false)],
  [Float64Array, dt('float64', 8, 8, false)],
  [BigInt64Array, dt('int64', 9, 8, true)],
  [BigUint64Array, dt('uint64', 10, 8, true)],
]);
if (typeof Buffer !== 'undefined') BY_CONSTRUCTOR.set(Buffer, BY_CONSTRUCTOR.get(Uint8Array)!);

export type TypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

/** The datatype of a buffer argument, or EINVAL naming what was passed instead. */
export function datatypeOf(buffer: unknown, what: string): Datatype {
  const type = buffer !== null && typeof buffer === 'object' ? BY_CONSTRUCTOR.get(buffer.constructor) : undefined;
  if (type !== undefined) return type;
  const found = buffer === null ? 'null' : typeof buffer === 'object' ? (buffer.constructor?.name ?? 'object') : typeof buffer;
  throw new TopocollError('EINVAL', `${what} must be a TypedArray (Int8Array … Float64Array, BigInt64Array, BigUint64Array) or a Buffer, got ${found}`);
}

/** The code of a reduction operator valid for `type`. */
export function reduceOpCode(op: unknown, type: Datatype): number {
  const entry = typeof op === 'string' ? OPS[op as ReduceOpName] : undefined;
  if (entry === undefined) {
    throw new TopocollError('EINVAL', `unknown reduction operator ${JSON.stringify(op)}`, {
      hint: `Use one of ${Object.keys(OPS).join(', ')}.`,
    });
  }
  if (entry.integerOnly && !type.integer) {
    throw new TopocollError('EINVAL', `the operator ${String(op)} is for integer types, not ${type.name}`, {
      hint: 'Use sum, prod, min or max on floating-point data.',
    });
  }
  return entry.code;
}
