import { describe, expect, it } from 'vitest';
import { STEP_WORDS, StepKind } from '../src/algorithms/schedule.js';
import type { TopocollErrorCode } from '../src/errors.js';
import { CALL_FIELDS, NativeCollective, NativeTree, WaitMode, nativeLimits, nativeTables } from '../src/native.js';
import { SHM_ALLREDUCE_MAX_BYTES } from '../src/runtime/collective-plans.js';
import { DATATYPES, REDUCE_OPS, datatypeOf } from '../src/runtime/datatypes.js';

/**
 * Every table TypeScript shares with the C++ addon equals the addon's own copy, which
 * nativeTables (native/src/binding/addon.cc) builds from the C++ enums and constants: the same
 * names, no more and no fewer, with the same numbers. Most of them are generated on both sides from
 * abi/abi.yaml (test/abi-generated.test.ts checks the generated files are current): then an addon
 * built from another version of the spec fails here, as does a change to the code that uses the
 * tables on one side only.
 */

const tables = nativeTables();

/** name → number, sorted by name, so a missing or extra entry shows in the diff. */
function sorted(table: Readonly<Record<string, number>>): [string, number][] {
  return Object.entries(table).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

describe('TypeScript tables match the addon', () => {
  it('step kinds and words per step (abi/abi.yaml, native/src/engine/step.h)', () => {
    expect(sorted(StepKind)).toEqual(sorted(tables.stepKinds));
    expect(STEP_WORDS).toBe(tables.stepWords);
  });

  it('call descriptor slots (CallField)', () => {
    expect(sorted(CALL_FIELDS)).toEqual(sorted(tables.callFields));
  });

  it('collective codes (Collective)', () => {
    expect(sorted(NativeCollective)).toEqual(sorted(tables.collectives));
  });

  it('datatype codes and element sizes (Dtype, DtypeSize)', () => {
    expect(sorted(Object.fromEntries(DATATYPES.map((t) => [t.name, t.code])))).toEqual(sorted(tables.datatypes));
    expect(sorted(Object.fromEntries(DATATYPES.map((t) => [t.name, t.bytes])))).toEqual(sorted(tables.datatypeBytes));
    // Each TypedArray class maps back to its own datatype, and its elements have that size.
    for (const type of DATATYPES) {
      const array = new type.array(1);
      expect(datatypeOf(array, 'buf')).toBe(type);
      expect(array.BYTES_PER_ELEMENT).toBe(type.bytes);
    }
  });

  it('reduction operator codes, and which datatypes each takes', () => {
    expect(sorted(Object.fromEntries(Object.entries(REDUCE_OPS).map(([name, e]) => [name, e.code])))).toEqual(sorted(tables.reduceOps));
    // TypeScript lets an operator through for a datatype exactly when the engine has its kernel.
    for (const type of DATATYPES) {
      const accepted = Object.entries(REDUCE_OPS)
        .filter(([, e]) => !e.integerOnly || type.integer)
        .map(([name]) => name)
        .sort();
      expect([type.name, accepted]).toEqual([type.name, [...tables.reduceOpsByDatatype[type.name]!].sort()]);
    }
  });

  it('S0 notification trees (TreeKind)', () => {
    expect(sorted(NativeTree)).toEqual(sorted(tables.trees));
  });

  it('wait modes (WaitMode)', () => {
    expect(sorted(WaitMode)).toEqual(sorted(tables.waitModes));
  });

  it('the node-wide shared area: largest allreduce, and the allgather column the docs state', () => {
    expect(SHM_ALLREDUCE_MAX_BYTES).toBe(tables.shmAllreduceMaxBytes);
    // StepKind.ShmAllgather's comment and the allgather.shm option's describe 64 KiB columns.
    expect(tables.shmAllgatherColumnBytes).toBe(64 * 1024);
  });

  it('abort codes are TopocollError codes', () => {
    // A Record over the union: tsc fails when a code is added to or removed from the type.
    const codes: Record<TopocollErrorCode, true> = {
      EINVAL: true,
      ECONFIG: true,
      ETOPOLOGY: true,
      EMISMATCH: true,
      ETIMEDOUT: true,
      EPEERLOST: true,
      ECLOSED: true,
      ENOMEM: true,
      ENOTSUP: true,
      ETRUNCATE: true,
    };
    expect(tables.abortCodes.length).toBeGreaterThan(0);
    for (const code of tables.abortCodes) expect(Object.keys(codes)).toContain(code);
  });

  it('nativeLimits reads the same numbers', () => {
    expect(nativeLimits()).toEqual({
      eagerBytes: tables.eagerBytes,
      layerExchangeBytes: tables.layerExchangeBytes,
      messageHeaderBytes: tables.messageHeaderBytes,
    });
  });
});
