import { describe, expect, it } from 'vitest';
import { formatAlgorithm, parseAlgorithm, type GroupAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { thrown } from '../helpers/thrown.js';

describe('parseAlgorithm / formatAlgorithm', () => {
  it('reads every name, k-nomial with its radix; knomial:2 is binomial', () => {
    const names = ['flat', 'binomial', 'scatter-allgather', 'shm', 'rabenseifner', 'recursive-doubling', 'ring', 'bruck', 'neighbor-exchange'];
    for (const name of names) expect(parseAlgorithm(name)).toBe(name);
    expect(parseAlgorithm('knomial:4')).toEqual({ knomial: 4 });
    expect(parseAlgorithm('knomial:2')).toBe('binomial');
    expect(parseAlgorithm('knomial:16', 'bcast')).toEqual({ knomial: 16 });
  });

  it('formats back to the text it parses from', () => {
    const all: GroupAlgorithm[] = [
      'flat',
      'binomial',
      { knomial: 3 },
      'scatter-allgather',
      'shm',
      'rabenseifner',
      'recursive-doubling',
      'ring',
      'bruck',
      'neighbor-exchange',
    ];
    for (const a of all) expect(parseAlgorithm(formatAlgorithm(a))).toEqual(a);
    expect(formatAlgorithm({ knomial: 8 })).toBe('knomial:8');
    expect(formatAlgorithm({ knomial: 2 })).toBe('binomial');
  });

  it("accepts per collective only that collective's algorithms", () => {
    expect(parseAlgorithm('scatter-allgather', 'bcast')).toBe('scatter-allgather');
    expect(parseAlgorithm('rabenseifner', 'reduce')).toBe('rabenseifner');
    expect(parseAlgorithm('shm', 'reduce')).toBe('shm');
    expect(parseAlgorithm('recursive-doubling', 'allreduce')).toBe('recursive-doubling');
    expect(thrown(() => parseAlgorithm('rabenseifner', 'bcast'), 'ECONFIG').message).toMatch(
      /"rabenseifner" is not a bcast algorithm.*Use flat, binomial, knomial:K, scatter-allgather, shm/,
    );
    thrown(() => parseAlgorithm('scatter-allgather', 'reduce'), 'ECONFIG');
    thrown(() => parseAlgorithm('binomial', 'allreduce'), 'ECONFIG');
    thrown(() => parseAlgorithm('knomial:3', 'allreduce'), 'ECONFIG');
    for (const name of ['ring', 'recursive-doubling', 'bruck', 'neighbor-exchange', 'shm']) expect(parseAlgorithm(name, 'allgather')).toBe(name);
    expect(thrown(() => parseAlgorithm('binomial', 'allgather'), 'ECONFIG').message).toMatch(
      /"binomial" is not an allgather algorithm.*Use ring, recursive-doubling, bruck, neighbor-exchange, shm/,
    );
    thrown(() => parseAlgorithm('ring', 'bcast'), 'ECONFIG');
    thrown(() => parseAlgorithm('bruck', 'allreduce'), 'ECONFIG');
  });

  it('barrier algorithms: central-counter, combining-tree:K (no alias for K = 2), dissemination; only for kind barrier', () => {
    expect(parseAlgorithm('central-counter', 'barrier')).toBe('central-counter');
    expect(parseAlgorithm('dissemination', 'barrier')).toBe('dissemination');
    expect(parseAlgorithm('combining-tree:2', 'barrier')).toEqual({ combiningTree: 2 });
    expect(parseAlgorithm('combining-tree:7')).toEqual({ combiningTree: 7 });
    for (const a of ['central-counter', 'dissemination', { combiningTree: 2 }, { combiningTree: 16 }] as const)
      expect(parseAlgorithm(formatAlgorithm(a), 'barrier')).toEqual(a);
    expect(formatAlgorithm({ combiningTree: 4 })).toBe('combining-tree:4');
    expect(thrown(() => parseAlgorithm('binomial', 'barrier'), 'ECONFIG').message).toMatch(
      /"binomial" is not a barrier algorithm.*Use central-counter, combining-tree:K, dissemination/,
    );
    thrown(() => parseAlgorithm('knomial:3', 'barrier'), 'ECONFIG');
    thrown(() => parseAlgorithm('combining-tree:3', 'reduce'), 'ECONFIG');
    thrown(() => parseAlgorithm('dissemination', 'allreduce'), 'ECONFIG');
    for (const bad of ['combining-tree:1', 'combining-tree:', 'combining-tree', 'combining-tree:x', 'combining-tree:02.5'])
      thrown(() => parseAlgorithm(bad, 'barrier'), 'ECONFIG');
    expect(thrown(() => parseAlgorithm('combining-tree:1')).message).toMatch(/combining-tree fan-in "1" in "combining-tree:1" is not an integer ≥ 2/);
  });

  it('rejects unknown names and bad radices with ECONFIG', () => {
    expect(thrown(() => parseAlgorithm('tree'), 'ECONFIG').message).toMatch(/unknown algorithm "tree"/);
    for (const bad of ['knomial:1', 'knomial:0', 'knomial:', 'knomial:x', 'knomial:2.5', 'knomial:-3', 'Binomial', '']) {
      thrown(() => parseAlgorithm(bad), 'ECONFIG');
    }
    expect(thrown(() => parseAlgorithm('knomial:1', 'bcast')).message).toMatch(/k-nomial radix "1" in "knomial:1" is not an integer ≥ 2/);
  });
});
