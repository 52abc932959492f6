// @ts-check
/** Every typed array class a collective takes, in the order of the datatypes. */
export const TYPED_ARRAY_CLASSES = [
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
];

/** Whether class T holds bigints (its elements, and the reference's zero and one, are bigints then). */
export const isBigIntClass = (/** @type {unknown} */ T) => T === BigInt64Array || T === BigUint64Array;

/**
 * The reference the test jobs check reductions against: `op` over one element's values in rank
 * order, in plain JavaScript arithmetic — numbers or bigints, as the values are (`zero` and `one`
 * of the same kind). Wrapping or clamping to the element type is the caller's.
 * @param {import('topocoll').ReduceOpName} op
 * @param {any[]} vals
 * @param {number | bigint} zero
 * @param {number | bigint} one
 * @returns {any}
 */
export function combineInRankOrder(op, vals, zero, one) {
  switch (op) {
    case 'sum':
      return vals.reduce((a, b) => a + b, zero);
    case 'prod':
      return vals.reduce((a, b) => a * b, one);
    case 'min':
      return vals.reduce((a, b) => (b < a ? b : a));
    case 'max':
      return vals.reduce((a, b) => (b > a ? b : a));
    case 'band':
      return vals.reduce((a, b) => a & b);
    case 'bor':
      return vals.reduce((a, b) => a | b);
    case 'bxor':
      return vals.reduce((a, b) => a ^ b);
    case 'land':
      return vals.every((v) => v !== zero) ? one : zero;
    case 'lor':
      return vals.some((v) => v !== zero) ? one : zero;
  }
}

/**
 * A new array of class T of n elements, element i being f(i) as T stores it: what
 * `T.from({ length: n }, (_, i) => f(i))` makes. The values go through a Float64Array (which
 * holds any number exactly) and set() converts them as storing each would: one loop for every
 * class, which V8 keeps fast, where T.from's generic path, or a loop storing into each class in
 * turn, made the checks of large results take most of some jobs' time.
 * @template {{ [i: number]: any, length: number, set(a: ArrayLike<any>, offset?: number): void }} A
 * @param {{ new (n: number): A }} T
 * @param {number} n
 * @param {(i: number) => any} f numbers, or bigints for the BigInt classes
 * @returns {A}
 */
export function arrayOf(T, n, f) {
  const a = new T(n);
  if (isBigIntClass(T)) {
    for (let i = 0; i < n; i++) a[i] = f(i);
    return a;
  }
  const values = new Float64Array(n);
  for (let i = 0; i < n; i++) values[i] = f(i);
  a.set(values);
  return a;
}

/**
 * Whether a and b are typed arrays of the same class with the same bytes — then every element of
 * a is Object.is-equal to b's. (Not conversely: NaNs of different bits are equal elements, so a
 * check that finds the bytes different still compares element by element.)
 * @param {unknown} a
 * @param {unknown} b
 */
export function sameBytes(a, b) {
  if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b) || a.constructor !== b.constructor || a.byteLength !== b.byteLength) return false;
  return Buffer.compare(new Uint8Array(a.buffer, a.byteOffset, a.byteLength), new Uint8Array(b.buffer, b.byteOffset, b.byteLength)) === 0;
}

/**
 * mulberry32: a seeded PRNG in [0, 1), the same sequence on every rank for the same seed (so every
 * rank draws the same random cases).
 * @param {number} seed
 */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
