import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { formatIndexList, parseHwlocCpuset, parseIndexList } from '../../src/topology/index-list.js';
import { thrown } from '../helpers/thrown.js';

const range = (lo: number, hi: number): number[] => Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);

describe('parseIndexList', () => {
  it.each([
    ['', []],
    ['5', [5]],
    ['0-3,8,10-11', [0, 1, 2, 3, 8, 10, 11]],
    ['16-23', range(16, 23)],
    // The kernel ABI documentation writes lists with a space after the comma.
    ['0-3, 8-11', [...range(0, 3), ...range(8, 11)]],
    ['8,0-2,1', [0, 1, 2, 8]],
    ['3,3,3', [3]],
  ])('parses %j', (text, expected) => {
    expect(parseIndexList(text)).toEqual(expected);
  });

  it.each([
    ['0,,1', 'empty element'],
    [',1', 'empty element'],
    ['1,', 'ends with a comma'],
    ['3-1', '"3-1" starts above its end'],
    ['4-', 'open range "4-"'],
    ['0-3,8-', 'open range "8-"'],
    ['a', 'unexpected character "a"'],
    ['1-x', 'unexpected character "x"'],
    [' 1', 'unexpected character " "'],
    ['1.5', 'unexpected character "."'],
    ['0-99999999999', 'larger than the supported maximum'],
  ])('rejects %j', (text, reason) => {
    const e = thrown(() => parseIndexList(text));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(`"${text}"`);
    expect(e.message).toContain(reason);
  });

  it('puts the caller-supplied location in the message', () => {
    const e = thrown(() => parseIndexList('0-x', { file: '/sys/x/cpulist', line: 1 }));
    expect(e.message).toMatch(/^ETOPOLOGY: \/sys\/x\/cpulist:1: invalid index list "0-x"/);
    expect(e.file).toBe('/sys/x/cpulist');
  });
});

describe('formatIndexList', () => {
  // Expected strings are hwloc_bitmap_list_asprintf output quoted in the reference (§1.2).
  it.each([
    [[], ''],
    [[0], '0'],
    [[0, 2], '0,2'],
    [[0, 1], '0-1'],
    [range(16, 23), '16-23'],
    [[0, 8], '0,8'],
    [[...range(8, 15), ...range(24, 31)], '8-15,24-31'],
    [[...range(0, 3), 8], '0-3,8'],
    [[1, 3, 4, 5, 7], '1,3-5,7'],
  ])('formats %j as %j', (indices, expected) => {
    expect(formatIndexList(indices)).toBe(expected);
    expect(parseIndexList(expected)).toEqual(indices);
  });

  it.each([[[2, 1]], [[1, 1]], [[-1]], [[0.5]]])('rejects %j with EINVAL', (indices) => {
    expect(thrown(() => formatIndexList(indices)).code).toBe('EINVAL');
  });
});

describe('parseHwlocCpuset', () => {
  // hwloc_bitmap_asprintf outputs recorded in the reference (§2.1), and hwloc test-file cpusets.
  it.each([
    ['0x0', []],
    ['0x00000001', [0]],
    ['0x00000040,,0x0', [70]],
    ['0x00000010,,,0x00000002', [1, 100]],
    ['0x000000ff,0xfffffff0,0x0', range(36, 71)],
    ['0x0000f06f', [0, 1, 2, 3, 5, 6, 12, 13, 14, 15]],
    ['0xffffffff,,,0x0', range(96, 127)],
    ['0xff00ff00', [...range(8, 15), ...range(24, 31)]],
    // Linux mask style (Cpus_allowed, shared_cpu_map): no 0x, zero-padded, no empty fields.
    ['ff,ffffffff', range(0, 39)],
    ['00000000,00000003', [0, 1]],
    ['3', [0, 1]],
  ])('parses %j', (hex, expected) => {
    expect(parseHwlocCpuset(hex)).toEqual(expected);
  });

  it('agrees with hwloc-calc on cpusets with empty fields', () => {
    for (const hex of ['0x00000040,,0x0', '0x00000010,,,0x00000002', '0x80000000,,0x00010000,0x1', '0x000000ff,0xfffffff0,0x0']) {
      const out = execFileSync('hwloc-calc', ['-i', 'pu:160', '--po', '-I', 'pu', hex], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
      expect(parseHwlocCpuset(hex)).toEqual(out.trim().split(',').map(Number));
    }
  });

  it.each([
    ['', 'empty'],
    ['zz', '"zz" is not a 32-bit hex word'],
    ['0x', '"0x" is not a 32-bit hex word'],
    ['0x123456789', 'is not a 32-bit hex word'],
    ['0x1 ', 'is not a 32-bit hex word'],
    ['0xf...f,0xffffffff', 'infinite'],
    [',0x1', 'first or last word is empty'],
    ['0x1,', 'first or last word is empty'],
  ])('rejects %j', (hex, reason) => {
    const e = thrown(() => parseHwlocCpuset(hex, { file: 'm.xml', line: 7 }));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(`m.xml:7: invalid cpuset "${hex}"`);
    expect(e.message).toContain(reason);
  });
});
