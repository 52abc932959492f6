import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CPP_PATH, ROOT, SPEC_PATH, TS_PATH, generate, writeGenerated } from '../scripts/gen-abi.mjs';
import {
  CALL_COUNTER_WORDS,
  CALL_COUNTERS,
  CallCounter,
  MSG_HEADER_BYTES,
  MsgHeaderOffset,
  REDUCE_OP_INFO,
  ReduceOp,
  SHARED_AREA_SLOT_DATA_BYTES,
  STEP_WORDS,
  StepWord,
} from '../src/abi.generated.js';
import { validateConfig } from '../src/config/load.js';
import { DATATYPES, reduceOpCode } from '../src/runtime/datatypes.js';
import { tempDir } from './helpers/temp.js';

/**
 * The ABI's one source (abi/abi.yaml) and what is generated from it: the committed files are
 * what the generator writes now (else: run `npm run gen:abi`), the generator refuses a spec that
 * breaks its rules, and the hand-written code on the TypeScript side holds to what it assumes of
 * the spec. (test/native-tables.test.ts checks the addon was built from the same spec;
 * test/step-codec.test.ts runs both sides' step codecs.)
 */

const spec = readFileSync(join(ROOT, SPEC_PATH), 'utf8');

describe('generated from abi/abi.yaml', () => {
  it('the committed C++ header and TypeScript module are what the generator writes', async () => {
    const dir = tempDir('topocoll-abi-');
    const written = await writeGenerated(dir);
    expect(written.sort()).toEqual([join(dir, CPP_PATH), join(dir, TS_PATH)].sort());
    for (const path of [CPP_PATH, TS_PATH]) {
      // A difference here means a stale file: run `npm run gen:abi` (and rebuild the addon).
      expect({ path, text: readFileSync(join(ROOT, path), 'utf8') }).toEqual({ path, text: readFileSync(join(dir, path), 'utf8') });
    }
  });

  it('both files say where they come from', async () => {
    const files = await generate(spec);
    for (const text of Object.values(files)) expect(text).toMatch(/^\/\/ Generated from abi\/abi\.yaml by scripts\/gen-abi\.mjs — do not edit/);
  });

  it('refuses step fields that share a word unless their kinds are disjoint', async () => {
    const broken = spec.replace('kinds: [AwaitPut, AwaitDone]', 'kinds: [AwaitPut, ShmBcast]');
    expect(broken).not.toBe(spec);
    await expect(generate(broken)).rejects.toThrow(/step word 3: kind ShmBcast appears twice/);
  });

  it('refuses enum values that do not increase, and gaps in an enum with fields (a table by value)', async () => {
    const broken = spec.replace('{ name: allgather, value: 5 }', '{ name: allgather, value: 4 }');
    expect(broken).not.toBe(spec);
    await expect(generate(broken)).rejects.toThrow(/Collective's values must be increasing/);
    const gap = spec.replace('{ name: int16, value: 3,', '{ name: int16, value: 4,');
    expect(gap).not.toBe(spec);
    await expect(generate(gap)).rejects.toThrow(/Dtype's values must be consecutive/);
  });

  it('refuses a message header whose fields do not tile it', async () => {
    const broken = spec.replace('{ name: root, offset: 12, bytes: 4 }', '{ name: root, offset: 13, bytes: 4 }');
    expect(broken).not.toBe(spec);
    await expect(generate(broken)).rejects.toThrow(/messageHeader.root must start at byte 12/);
  });
});

describe("the TypeScript side's assumptions about the spec", () => {
  it('the fast path writes the header as words: the kinds bytes share one, count takes two, the sender is last', () => {
    expect(MSG_HEADER_BYTES % 4).toBe(0);
    const word = (offset: number): number => Math.floor(offset / 4);
    expect(new Set([word(MsgHeaderOffset.collective), word(MsgHeaderOffset.dtype), word(MsgHeaderOffset.op), word(MsgHeaderOffset.phase)]).size).toBe(1);
    expect(MsgHeaderOffset.count % 8).toBe(0);
    expect(MsgHeaderOffset.planHash).toBe(MsgHeaderOffset.count + 8);
    expect(MsgHeaderOffset.sender).toBe(MSG_HEADER_BYTES - 4);
  });

  it('the fast path reads every counter word it names', () => {
    expect(Math.max(...Object.values(CALL_COUNTERS))).toBe(CALL_COUNTER_WORDS - 1);
    expect(CALL_COUNTERS).toEqual({
      seq: CallCounter.seq,
      previousCall: CallCounter.previousCall,
      areaCalls: CallCounter.areaCalls,
      allEntered: CallCounter.allEntered,
    });
  });

  it("the fast path's calls keep their data in the slot", () => {
    const widest = Math.max(...DATATYPES.map((t) => t.bytes));
    const { fastPath } = validateConfig({}).routing;
    expect(fastPath.copyMaxBytes).toBeLessThanOrEqual(SHARED_AREA_SLOT_DATA_BYTES);
    expect(fastPath.combineMaxBytes).toBeLessThanOrEqual(SHARED_AREA_SLOT_DATA_BYTES);
    expect(() => validateConfig({ routing: { fastPath: { copyMaxBytes: SHARED_AREA_SLOT_DATA_BYTES + 1 } } })).toThrow(/copyMaxBytes/);
    expect(SHARED_AREA_SLOT_DATA_BYTES % widest).toBe(0);
  });

  it('every operator of the spec gets through reduceOpCode (its switch names them one by one)', () => {
    const int32 = DATATYPES.find((t) => t.name === 'int32')!;
    for (const name of Object.keys(ReduceOp) as (keyof typeof ReduceOp)[]) expect(reduceOpCode(name, int32)).toBe(ReduceOp[name]);
    expect(REDUCE_OP_INFO.map((op) => op.name)).toEqual(Object.keys(ReduceOp));
  });

  it('the step words are numbered 0 … STEP_WORDS − 1', () => {
    expect(new Set(Object.values(StepWord))).toEqual(new Set(Array.from({ length: STEP_WORDS }, (_, i) => i)));
  });
});
