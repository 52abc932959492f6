import { describe, expect, it } from 'vitest';
import { Dtype, ReduceOp } from '../../src/abi.generated.js';
import { validateConfig } from '../../src/config/load.js';
import { SHAPES } from '../algorithms/plan-shapes.js';
import { planHash } from '../../src/runtime/job-planner.js';
import { fastPathKernel } from '../../src/runtime/fast-path.js';

/**
 * The fast path's reduction kernels against an independent reference: exact arithmetic in
 * BigInt (integers) or double (floats), then what C++ does with the result — wrap to the
 * type's width, saturate Uint8Clamped, round once to float32. The jobs test
 * (fast-path.jobs.test.ts) compares the same kernels with the addon's bits.
 */
const INTEGERS = [
  { code: Dtype.int8, Array: Int8Array, bits: 8, signed: true },
  { code: Dtype.uint8, Array: Uint8Array, bits: 8, signed: false },
  { code: Dtype.int16, Array: Int16Array, bits: 16, signed: true },
  { code: Dtype.uint16, Array: Uint16Array, bits: 16, signed: false },
  { code: Dtype.int32, Array: Int32Array, bits: 32, signed: true },
  { code: Dtype.uint32, Array: Uint32Array, bits: 32, signed: false },
] as const;
type Op = keyof typeof ReduceOp;
const OPS = Object.keys(ReduceOp) as Op[];

function exact(op: Op, a: bigint, b: bigint): bigint {
  switch (op) {
    case 'sum':
      return a + b;
    case 'prod':
      return a * b;
    case 'min':
      return b < a ? b : a;
    case 'max':
      return a < b ? b : a;
    case 'band':
      return a & b;
    case 'bor':
      return a | b;
    case 'bxor':
      return a ^ b;
    case 'land':
      return a !== 0n && b !== 0n ? 1n : 0n;
    case 'lor':
      return a !== 0n || b !== 0n ? 1n : 0n;
  }
}

const wrap = (v: bigint, bits: number, signed: boolean): bigint => (signed ? BigInt.asIntN(bits, v) : BigInt.asUintN(bits, v));

/** Extremes, neighbours of zero and a spread of values of a width. */
function samples(bits: number, signed: boolean): bigint[] {
  const max = signed ? (1n << BigInt(bits - 1)) - 1n : (1n << BigInt(bits)) - 1n;
  const min = signed ? -(1n << BigInt(bits - 1)) : 0n;
  const values = new Set<bigint>([min, min + 1n, max, max - 1n, 0n, 1n, 2n, 3n, 7n, max / 2n, max / 3n]);
  if (signed) for (const v of [-1n, -2n, -3n, min / 2n, min / 3n]) values.add(v);
  return [...values];
}

describe('fastPathKernel', () => {
  for (const t of INTEGERS) {
    for (const op of OPS) {
      it(`${t.Array.name} ${op}: C++'s wrapped result for every pair of samples`, () => {
        const values = samples(t.bits, t.signed);
        const pairs = values.flatMap((a) => values.map((b) => [a, b] as const));
        const out = new t.Array(pairs.map(([a]) => Number(a)));
        const src = new t.Array(pairs.map(([, b]) => Number(b)));
        fastPathKernel(t.code, ReduceOp[op])(out, src, pairs.length);
        expect(Array.from(out, BigInt)).toEqual(pairs.map(([a, b]) => wrap(exact(op, a, b), t.bits, t.signed)));
      });
    }
  }

  for (const [code, Array_, signed] of [
    [Dtype.int64, BigInt64Array, true],
    [Dtype.uint64, BigUint64Array, false],
  ] as const) {
    for (const op of OPS) {
      it(`${Array_.name} ${op}: wraps to 64 bits`, () => {
        const values = samples(64, signed);
        const pairs = values.flatMap((a) => values.map((b) => [a, b] as const));
        const out = new Array_(pairs.map(([a]) => a));
        const src = new Array_(pairs.map(([, b]) => b));
        fastPathKernel(code, ReduceOp[op])(out, src, pairs.length);
        expect(Array.from(out)).toEqual(pairs.map(([a, b]) => wrap(exact(op, a, b), 64, signed)));
      });
    }
  }

  it('Uint8ClampedArray sum and product saturate at 255', () => {
    const out = Uint8ClampedArray.of(200, 100, 0, 255, 16);
    fastPathKernel(Dtype.uint8clamped, ReduceOp.sum)(out, Uint8ClampedArray.of(100, 100, 0, 1, 16), 5);
    expect(Array.from(out)).toEqual([255, 200, 0, 255, 32]);
    const prod = Uint8ClampedArray.of(16, 15, 0, 255);
    fastPathKernel(Dtype.uint8clamped, ReduceOp.prod)(prod, Uint8ClampedArray.of(16, 17, 200, 1), 4);
    expect(Array.from(prod)).toEqual([255, 255, 0, 255]);
  });

  it('float32 sum and product round once (53 ≥ 2·24 + 2 bits), min and max pick operands as C++ does', () => {
    const a = [1 + 2 ** -23, 3.4e38, 1e-45, -0, 0, NaN, 1, 0.1];
    const b = [2 ** -24, 3.4e38, 1e-45, 0, -0, 1, NaN, 0.2];
    const f = (xs: number[]) => Float32Array.from(xs);
    const sum = f(a);
    fastPathKernel(Dtype.float32, ReduceOp.sum)(sum, f(b), a.length);
    expect(Array.from(sum)).toEqual(a.map((x, i) => Math.fround(Math.fround(x) + Math.fround(b[i]!))));
    const min = f(a);
    fastPathKernel(Dtype.float32, ReduceOp.min)(min, f(b), a.length);
    // b < a ? b : a — so min(-0, 0) is -0, min(0, -0) is 0, and a NaN on either side yields a.
    expect(Array.from(min).map((x) => (Object.is(x, -0) ? '-0' : String(x)))).toEqual([
      '5.960464477539063e-8',
      '3.3999999521443642e+38',
      '1.401298464324817e-45',
      '-0',
      '0',
      'NaN',
      '1',
      '0.10000000149011612',
    ]);
  });
});

describe('planHash', () => {
  const plan = SHAPES[1]!.plan(4);
  it('ignores collectives.jsFastPath (each rank chooses it) but not the other keys', () => {
    const on = planHash(plan, validateConfig({ collectives: { jsFastPath: true } }));
    expect(planHash(plan, validateConfig({ collectives: { jsFastPath: false } }))).toBe(on);
    expect(planHash(plan, validateConfig({ bcast: { segment: 4096 } }))).not.toBe(on);
    expect(planHash(plan, validateConfig({ model: { callUs: 9 } }))).not.toBe(on);
    // The forced reduce-scatter top and alltoall form decide schedules as the levels' algorithms do.
    expect(planHash(plan, validateConfig({ reduceScatter: { top: 'ring' } }))).not.toBe(on);
    expect(planHash(plan, validateConfig({ alltoall: { algorithm: 'bruck' } }))).not.toBe(on);
    expect(planHash(plan, validateConfig({ reduceScatter: { top: 'auto' }, alltoall: { algorithm: 'auto' } }))).toBe(on);
  });

  it('covers the routing every rank must share (windows, sharedArea, scan) but not the fast path, each rank its own', () => {
    const base = planHash(plan, validateConfig({}));
    expect(planHash(plan, validateConfig({ routing: { windows: { dedicated: { bcast: 4096 } } } }))).not.toBe(base);
    expect(planHash(plan, validateConfig({ routing: { windows: { shared: { allgather: 4096 } } } }))).not.toBe(base);
    expect(planHash(plan, validateConfig({ routing: { sharedArea: { everyRankAllgatherMaxBytes: 1024 } } }))).not.toBe(base);
    expect(planHash(plan, validateConfig({ routing: { scan: { segmentBytes: 65536 } } }))).not.toBe(base);
    expect(planHash(plan, validateConfig({ routing: { fastPath: { copyMaxBytes: 512, combineMaxBytes: 32 } } }))).toBe(base);
  });
});
