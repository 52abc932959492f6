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
