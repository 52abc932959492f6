import { TopocollError } from '../errors.js';
import type { NativeUserOp } from '../native.js';
import type { TypedArray } from '../util/typed-array.js';

/**
 * Element types and reduction operators, with the numbers native/src/datatypes.h uses. The
 * datatype of a buffer comes from its TypedArray class.
 */

export type ReduceOpName = 'sum' | 'prod' | 'min' | 'max' | 'band' | 'bor' | 'bxor' | 'land' | 'lor';

/** Operator codes (ReduceOp of native/src/datatypes.h; test/native-tables.test.ts checks them). */
const OPS: Readonly<Record<ReduceOpName, { readonly code: number; readonly integerOnly: boolean }>> = {
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

// A switch, not a Map: V8 compares the few internalized strings directly where a Map lookup
// hashed on every call, a visible share of a small reduce (docs/architecture.md §9.3). Only
// the nine names get through, so OPS's prototype keys never answer.
function opEntry(op: unknown): { code: number; integerOnly: boolean } | undefined {
  switch (op) {
    case 'sum':
    case 'max':
    case 'min':
    case 'prod':
    case 'band':
    case 'bor':
    case 'bxor':
    case 'land':
    case 'lor':
      return OPS[op];
    default:
      return undefined;
  }
}

export interface Datatype {
  name: string;
  code: number;
  bytes: number;
  integer: boolean;
  /** The TypedArray class of this type (for scratch buffers, and views of shared memory). */
  array: { new (length: number): TypedArray; new (buffer: ArrayBuffer, byteOffset: number, length: number): TypedArray };
}

const dt = (name: string, code: number, bytes: number, integer: boolean, array: Datatype['array']): Datatype => ({ name, code, bytes, integer, array });

const INT8 = dt('int8', 0, 1, true, Int8Array);
const UINT8 = dt('uint8', 1, 1, true, Uint8Array);
const UINT8_CLAMPED = dt('uint8clamped', 2, 1, true, Uint8ClampedArray);
const INT16 = dt('int16', 3, 2, true, Int16Array);
const UINT16 = dt('uint16', 4, 2, true, Uint16Array);
const INT32 = dt('int32', 5, 4, true, Int32Array);
const UINT32 = dt('uint32', 6, 4, true, Uint32Array);
const FLOAT32 = dt('float32', 7, 4, false, Float32Array);
const FLOAT64 = dt('float64', 8, 8, false, Float64Array);
const INT64 = dt('int64', 9, 8, true, BigInt64Array);
const UINT64 = dt('uint64', 10, 8, true, BigUint64Array);

/** Every datatype (Dtype of native/src/datatypes.h), for the test that compares the two sides. */
export const DATATYPES: readonly Datatype[] = [INT8, UINT8, UINT8_CLAMPED, INT16, UINT16, INT32, UINT32, FLOAT32, FLOAT64, INT64, UINT64];

/** Every built-in operator by name, likewise. */
export const REDUCE_OPS = OPS;

/**
 * By the name a TypedArray's Symbol.toStringTag getter returns (Buffer's is Uint8Array):
 * unlike a load of `constructor`, V8 inlines that getter for every TypedArray class (and the
 * switch, like opEntry's, costs no hash lookup).
 */
function datatypeOfTag(tag: unknown): Datatype | undefined {
  switch (tag) {
    case 'Float64Array':
      return FLOAT64;
    case 'Float32Array':
      return FLOAT32;
    case 'Int32Array':
      return INT32;
    case 'Uint8Array':
      return UINT8;
    case 'Uint32Array':
      return UINT32;
    case 'BigInt64Array':
      return INT64;
    case 'BigUint64Array':
      return UINT64;
    case 'Int8Array':
      return INT8;
    case 'Int16Array':
      return INT16;
    case 'Uint16Array':
      return UINT16;
    case 'Uint8ClampedArray':
      return UINT8_CLAMPED;
    default:
      return undefined;
  }
}

/** %TypedArray%.prototype[@@toStringTag]'s getter: the class of a typed array's storage, which no object can fake. */
// eslint-disable-next-line @typescript-eslint/unbound-method -- taken off its prototype on purpose, called with .call(buffer)
const typedArrayTag = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype) as object, Symbol.toStringTag)!.get! as (
  this: unknown,
) => string | undefined;

/**
 * The datatype of a buffer argument, or EINVAL naming what was passed instead. Stateless on
 * purpose: remembering the last type in a module variable made V8 deoptimise the calling code
 * whenever the type changed.
 */
export function datatypeOf(buffer: unknown, what: string): Datatype {
  // The built-in getter, not `buffer[Symbol.toStringTag]`, which an object can redefine: the
  // addon trusts this type for the buffer's element size. (It gives undefined for a DataView.)
  const tag: unknown = ArrayBuffer.isView(buffer) ? typedArrayTag.call(buffer) : undefined;
  const type = datatypeOfTag(tag);
  if (type !== undefined) return type;
  throw notATypedArray(buffer, what);
}

// Built apart from the checks, which stay small enough for V8 to inline into the collectives.
function notATypedArray(buffer: unknown, what: string): TopocollError {
  const found = buffer === null ? 'null' : typeof buffer === 'object' ? (buffer.constructor?.name ?? 'object') : typeof buffer;
  return new TopocollError('EINVAL', `${what} must be a TypedArray (Int8Array … Float64Array, BigInt64Array, BigUint64Array) or a Buffer, got ${found}`);
}

/**
 * A reduction operator written in JavaScript: `combine(a, b)` of two elements. It runs on a
 * slower path (on the calling thread, one JS call per chunk of elements) and must be
 * associative. A commutative one is applied in whatever order the topology suggests; a
 * non-commutative one in rank order (x0 op x1 op … op xp−1), which needs groups of
 * consecutive ranks (EINVAL otherwise).
 */
export interface UserOp {
  readonly kind: 'user-op';
  readonly combine: (a: number | bigint, b: number | bigint) => number | bigint;
  readonly commutative: boolean;
}

export function userOp<V extends number | bigint>(combine: (a: V, b: V) => V, options: { commutative: boolean }): UserOp {
  if (typeof combine !== 'function') throw new TopocollError('EINVAL', 'userOp needs a function (a, b) => value');
  return { kind: 'user-op', combine: combine as unknown as UserOp['combine'], commutative: options?.commutative === true };
}

export function isUserOp(op: unknown): op is UserOp {
  return typeof op === 'object' && op !== null && (op as UserOp).kind === 'user-op';
}

const USER_OP_CHUNK = 4096;

export function nativeUserOp(op: UserOp, type: Datatype): NativeUserOp {
  const dst = new type.array(USER_OP_CHUNK) as unknown as (number | bigint)[];
  const src = new type.array(USER_OP_CHUNK) as unknown as (number | bigint)[];
  const combine = (count: number): void => {
    for (let i = 0; i < count; i++) dst[i] = op.combine(dst[i]!, src[i]!);
  };
  return { combine, dst: dst as unknown as TypedArray, src: src as unknown as TypedArray };
}

/** The code of a reduction operator valid for `type`. */
export function reduceOpCode(op: unknown, type: Datatype): number {
  const entry = opEntry(op);
  if (entry === undefined || (entry.integerOnly && !type.integer)) throw opError(op, type);
  return entry.code;
}

function opError(op: unknown, type: Datatype): TopocollError {
  if (opEntry(op) === undefined)
    return new TopocollError('EINVAL', `unknown reduction operator ${JSON.stringify(op)}`, { hint: `Use one of ${Object.keys(OPS).join(', ')}.` });
  return new TopocollError('EINVAL', `the operator ${String(op)} is for integer types, not ${type.name}`, {
    hint: 'Use sum, prod, min or max on floating-point data.',
  });
}
