import { describe, expect, it } from 'vitest';
import { formatLocality, localityIndices, parseLocality } from '../../src/topology/locality-string.js';
import { thrown } from '../helpers/thrown.js';

/** Every string the libpmix 4.2.2 generator printed in the reference (§1.2, §5.1). */
const REAL_STRINGS = [
  'SK0:L30:L20:L10:CR0:HT0:NM0',
  'SK0:L30:L20:L10:CR0:HT0-1:NM0',
  'SK0:L30:L21:L11:CR1:HT2-3:NM0',
  'SK0:L30:L23:L13:CR3:HT6:NM0',
  'SK0:L30:L20,2:L10,2:CR0,2:HT0,4:NM0',
  'SK0-1:L30-1:L20,8:L10,8:CR0,8:HT0,16:NM0-1',
  'SK1:L31:L28-15:L18-15:CR8-15:HT16-31:NM1',
  'SK0-1:L30-1:L20-15:L10-15:CR0-15:HT0-31:NM0-1',
  'SK0:L32:L28:L18:CR8:HT16-17:NM1',
  'SK1:L34-5:L216-23:L116-23:CR16-23:HT32-47:NM2',
  'SK0:L30:L21:L11:CR1:HT1:NM0',
  'SK0:L30:L20-7:L10-7:CR0-7:HT0-15:NM0',
];

const range = (lo: number, hi: number): number[] => Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);

describe('parseLocality / formatLocality', () => {
  it.each(REAL_STRINGS)('round-trips %s byte for byte', (text) => {
    expect(formatLocality(parseLocality(text))).toBe(text);
  });

  it('takes the code from the first two characters only', () => {
    const loc = parseLocality('SK1:L34-5:L216-23:L116-23:CR16-23:HT32-47:NM2');
    expect(loc.tokens).toEqual([
      { code: 'SK', indices: [1] },
      { code: 'L3', indices: [4, 5] },
      { code: 'L2', indices: range(16, 23) },
      { code: 'L1', indices: range(16, 23) },
      { code: 'CR', indices: range(16, 23) },
      { code: 'HT', indices: range(32, 47) },
      { code: 'NM', indices: [2] },
    ]);
  });

  it('keeps tokens in the order they were written', () => {
    const text = 'NM1:HT3:SK0';
    expect(parseLocality(text).tokens.map((t) => t.code)).toEqual(['NM', 'HT', 'SK']);
    expect(formatLocality(parseLocality(text))).toBe(text);
  });

  it('accepts strings with codes missing (unknown levels)', () => {
    expect(parseLocality('CR3:HT6').tokens).toEqual([
      { code: 'CR', indices: [3] },
      { code: 'HT', indices: [6] },
    ]);
  });

  it.each([
    ['', 'empty locality string'],
    ['SK0:XX1:NM0', 'token "XX1" has no known code'],
    ['S', 'token "S" has no known code'],
    ['sk0', 'token "sk0" has no known code'],
    ['SK0:L30:SK1', 'token "SK1" repeats the code SK'],
    ['SK0:L3:NM0', 'token "L3" has no indices'],
    ['SK0::NM0', 'token "" is empty'],
    ['SK0:NM0:', 'token "" is empty'],
    [':SK0', 'token "" is empty'],
    ['SK0:L33-1', 'token "L33-1" has an invalid index list: the range "3-1" starts above its end'],
    ['SK0:HT4-', 'token "HT4-" has an invalid index list: the open range "4-"'],
    ['SK0:HT1,,2', 'token "HT1,,2" has an invalid index list: it has an empty element'],
    ['SK0:HTx', 'token "HTx" has an invalid index list'],
  ])('rejects %j', (text, detail) => {
    const e = thrown(() => parseLocality(text, { file: 'localities.txt', line: 12, rank: 5 }));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain(detail);
    expect(e.message).toContain('localities.txt:12:');
    expect(e.message).toContain('rank 5');
  });

  it('refuses to format what no parser would read back', () => {
    expect(thrown(() => formatLocality({ tokens: [] })).code).toBe('EINVAL');
    expect(thrown(() => formatLocality({ tokens: [{ code: 'SK', indices: [] }] })).code).toBe('EINVAL');
  });

  it('parses a million strings quickly', () => {
    const started = performance.now();
    let total = 0;
    for (let i = 0; i < 1_000_000; i++) total += parseLocality(REAL_STRINGS[i % REAL_STRINGS.length]!).tokens.length;
    expect(total).toBe(7_000_000);
    // Generous bound: about 1 s on a slow CI core; a regression to regex/split parsing shows up.
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});

describe('localityIndices', () => {
  const loc = parseLocality('SK0-1:L30-1:L20,8:L10,8:CR0,8:HT0,16:NM0-1');

  it('returns the indices of a present code', () => {
    expect(localityIndices(loc, 'HT')).toEqual([0, 16]);
    expect(localityIndices(loc, 'NM')).toEqual([0, 1]);
  });

  it('returns undefined for an absent code', () => {
    expect(localityIndices(parseLocality('CR3:HT6'), 'L3')).toBeUndefined();
  });
});
