import { DTYPE_INFO, Dtype, REDUCE_OP_INFO, type ReduceOp } from '../abi.generated.js';
import { TopocollError } from '../errors.js';
import type { NativeUserOp } from '../native.js';
import type { TypedArray } from '../util/typed-array.js';

/**
 * Element types and reduction operators: their names, codes and sizes are abi/abi.yaml's
 * (src/abi.generated.ts, shared with the addon). The datatype of a buffer comes from its
 * TypedArray class.
 */

/** A built-in operator: `sum prod min max` for every type, `band bor bxor land lor` for integer types (abi/abi.yaml's ReduceOp). */
export type ReduceOpName = keyof typeof ReduceOp;

/** Each operator's code and whether it is for integer types only, by name. */
const OPS = Object.fromEntries(REDUCE_OP_INFO.map((op, code) => [op.name, { code, integerOnly: op.integerOnly }])) as Readonly<
  Record<ReduceOpName, { readonly code: number; readonly integerOnly: boolean }>
>;

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

/** The TypedArray class of each datatype. */
const ARRAYS: Readonly<Record<keyof typeof Dtype, Datatype['array']>> = {
  int8: Int8Array,
  uint8: Uint8Array,
  uint8clamped: Uint8ClampedArray,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  float32: Float32Array,
  float64: Float64Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
};

/** Every datatype, by code (Dtype). */
export const DATATYPES: readonly Datatype[] = DTYPE_INFO.map(({ name, bytes, integer }, code) => ({ name, code, bytes, integer, array: ARRAYS[name] }));

const INT8 = DATATYPES[Dtype.int8]!;
const UINT8 = DATATYPES[Dtype.uint8]!;
const UINT8_CLAMPED = DATATYPES[Dtype.uint8clamped]!;
const INT16 = DATATYPES[Dtype.int16]!;
const UINT16 = DATATYPES[Dtype.uint16]!;
const INT32 = DATATYPES[Dtype.int32]!;
const UINT32 = DATATYPES[Dtype.uint32]!;
const FLOAT32 = DATATYPES[Dtype.float32]!;
const FLOAT64 = DATATYPES[Dtype.float64]!;
const INT64 = DATATYPES[Dtype.int64]!;
const UINT64 = DATATYPES[Dtype.uint64]!;

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
