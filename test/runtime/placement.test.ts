import { describe, expect, it } from 'vitest';
import { describeResidency, summarizeResidency } from '../../src/runtime/numa-residency.js';

describe('NUMA placement check', () => {
  it('all resident pages on the expected node: local', () => {
    const r = summarizeResidency([1, 1, 1, -2], 1);
    expect(r).toEqual({ pages: 4, onNode: 3, byNode: { 1: 3 }, absent: 1, expectedNode: 1, verdict: 'local' });
    expect(describeResidency(r)).toBe('local — 4 pages, node 1: 3 (expected node 1)');
  });

  it('pages on another node: misplaced', () => {
    const r = summarizeResidency([0, 1, 1, 0], 1);
    expect(r.verdict).toBe('misplaced');
    expect(r.onNode).toBe(2);
    expect(describeResidency(r)).toMatch(/^MISPLACED — 4 pages, node 0: 2, node 1: 2/);
  });

  it('without an expected node every resident page counts, and no answer is unknown', () => {
    expect(summarizeResidency([0, 0], undefined).verdict).toBe('local');
    expect(summarizeResidency([], 0).verdict).toBe('unknown');
    expect(summarizeResidency([-2, -2], 0)).toMatchObject({ absent: 2, verdict: 'unknown' });
    expect(summarizeResidency([-14], 0).verdict).toBe('unknown'); // -EFAULT: not mapped
  });
});
