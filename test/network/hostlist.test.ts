import { describe, expect, it } from 'vitest';
import { compressHostlist, expandHostlist } from '../../src/topology/network/hostlist.js';
import { thrown } from '../helpers/thrown.js';

describe('expandHostlist', () => {
  it('returns a token without brackets as a literal', () => {
    expect(expandHostlist('tux7')).toEqual(['tux7']);
    expect(expandHostlist('login-1.cluster')).toEqual(['login-1.cluster']);
  });

  it('splits on commas, spaces, tabs and newlines outside brackets and skips empty tokens', () => {
    expect(expandHostlist('a,b c\td\ne,, f')).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(expandHostlist('')).toEqual([]);
    expect(expandHostlist(' , ')).toEqual([]);
  });

  it('does not split on commas inside brackets', () => {
    expect(expandHostlist('tux[0-3,7]')).toEqual(['tux0', 'tux1', 'tux2', 'tux3', 'tux7']);
    expect(expandHostlist('a[1,3],b')).toEqual(['a1', 'a3', 'b']);
  });

  it('expands several bracket groups as nested loops, the earlier bracket outermost', () => {
    expect(expandHostlist('rack[1-2]n[1-2]')).toEqual(['rack1n1', 'rack1n2', 'rack2n1', 'rack2n2']);
    const names = expandHostlist('a[1-2]b[01-10]');
    expect(names).toHaveLength(20);
    expect(names.slice(0, 3)).toEqual(['a1b01', 'a1b02', 'a1b03']);
    expect(names[9]).toBe('a1b10');
    expect(names[10]).toBe('a2b01');
    expect(names[19]).toBe('a2b10');
  });

  it('keeps a suffix after the closing bracket', () => {
    expect(expandHostlist('n[1-3]-ib')).toEqual(['n1-ib', 'n2-ib', 'n3-ib']);
    expect(expandHostlist('a[1-2]b[3]c')).toEqual(['a1b3c', 'a2b3c']);
  });

  it('zero-pads to the width of the low bound', () => {
    expect(expandHostlist('n[01-10]')).toEqual(['n01', 'n02', 'n03', 'n04', 'n05', 'n06', 'n07', 'n08', 'n09', 'n10']);
    expect(expandHostlist('n[1-10]')).toEqual(['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7', 'n8', 'n9', 'n10']);
    expect(expandHostlist('n[001-3]')).toEqual(['n001', 'n002', 'n003']);
    expect(expandHostlist('n[98-101]')).toEqual(['n98', 'n99', 'n100', 'n101']);
    expect(expandHostlist('n[07]')).toEqual(['n07']);
    expect(expandHostlist('n[01-02,5]')).toEqual(['n01', 'n02', 'n5']);
  });

  it('keeps duplicates so that callers can report them', () => {
    expect(expandHostlist('n[1-2],n1')).toEqual(['n1', 'n2', 'n1']);
  });

  it('accepts a range of exactly 65536 names', () => {
    const names = expandHostlist('n[0-65535]');
    expect(names).toHaveLength(65536);
    expect(names[65535]).toBe('n65535');
  });

  const bad: [string, string][] = [
    ['tux[0-3', "'[' without a matching ']'"],
    ['tux0-3]', "']' without a matching '['"],
    ['a[[1]]', "'[' inside brackets"],
    ['n[3-1]', 'low bound exceeds its high bound'],
    ['n[a-c]', 'not decimal'],
    ['n[-1]', 'not decimal'],
    ['n[0x1-2]', 'not decimal'],
    ['n[1-2-3]', 'not decimal'],
    ['n[1 -2]', 'not decimal'],
    ['n[99999999999999999999]', 'too large'],
    ['tux[]', 'empty range'],
    ['tux[1,,2]', 'empty range'],
    ['tux[1-]', 'not decimal'],
    ['n[0-65536]', 'more than 65536 names'],
    ['a[0-1023]b[0-1024]', 'more than 1048576 names'],
  ];
  for (const [expr, problem] of bad) {
    it(`rejects "${expr}" (${problem}) with the expression and its location`, () => {
      const e = thrown(() => expandHostlist(expr, { file: 'net.txt', line: 3, column: 1 }));
      expect(e.code).toBe('ETOPOLOGY');
      expect(e.message).toContain(`"${expr}"`);
      expect(e.message).toContain(problem);
      expect(e.message).toContain('net.txt:3');
      expect(e.hint).toBeTruthy();
    });
  }
});

describe('compressHostlist', () => {
  it('merges same-prefix runs', () => {
    expect(compressHostlist(['s4', 's5', 's6', 's7'])).toBe('s[4-7]');
    expect(compressHostlist(['tux0', 'tux1', 'tux2', 'tux5'])).toBe('tux[0-2,5]');
  });

  it('writes a single name without brackets', () => {
    expect(compressHostlist(['tux2'])).toBe('tux2');
    expect(compressHostlist([])).toBe('');
  });

  it('keeps zero padding and only merges runs that expand back to the same names', () => {
    expect(compressHostlist(['n01', 'n02', 'n03'])).toBe('n[01-03]');
    expect(compressHostlist(['n8', 'n9', 'n10'])).toBe('n[8-10]');
    expect(compressHostlist(['n1', 'n02'])).toBe('n[1,02]');
    expect(compressHostlist(['n09', 'n10', 'n100'])).toBe('n[09-10,100]');
  });

  it('sorts numerically within a prefix, deduplicates, and keeps groups in first-seen order', () => {
    expect(compressHostlist(['b2', 'a3', 'b1', 'a1', 'b1', 'a2'])).toBe('b[1-2],a[1-3]');
  });

  it('handles suffixes and names without digits', () => {
    expect(compressHostlist(['n1-ib', 'n2-ib', 'login', 'n3'])).toBe('n[1-2]-ib,login,n3');
    expect(compressHostlist(['abc', '5abc'])).toBe('abc,5abc');
  });

  it('round-trips through expandHostlist', () => {
    const lists = [
      expandHostlist('node[01-64]'),
      expandHostlist('tux[0-3,7,9-12],login,n[8-11]-ib'),
      expandHostlist('rack[1-2]n[01-03]'),
      ['n1', 'n02', 'n003', 'n4', 'n10', 'x'],
      ['n1', 'n01', 'n2'],
      ['mac001122334455667788', 'mac001122334455667789'],
    ];
    for (const names of lists) {
      expect(expandHostlist(compressHostlist(names)).sort()).toEqual([...new Set(names)].sort());
    }
  });
});
