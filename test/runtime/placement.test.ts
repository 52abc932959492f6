import { describe, expect, it } from 'vitest';
import { describePlacement, summarizePlacement } from '../../src/runtime/placement.js';

describe('NUMA placement check', () => {
  it('all resident pages on the expected node: local', () => {
    const r = summarizePlacement([1, 1, 1, -2], 1);
    expect(r).toEqual({ pages: 4, onNode: 3, byNode: { 1: 3 }, absent: 1, expectedNode: 1, verdict: 'local' });
    expect(describePlacement(r)).toBe('local — 4 pages, node 1: 3 (expected node 1)');
  });

  it('pages on another node: misplaced', () => {
    const r = summarizePlacement([0, 1, 1, 0], 1);
    expect(r.verdict).toBe('misplaced');
    expect(r.onNode).toBe(2);
    expect(describePlacement(r)).toMatch(/^MISPLACED — 4 pages, node 0: 2, node 1: 2/);
  });

  it('without an expected node every resident page counts, and no answer is unknown', () => {
    expect(summarizePlacement([0, 0], undefined).verdict).toBe('local');
    expect(summarizePlacement([], 0).verdict).toBe('unknown');
    expect(summarizePlacement([-2, -2], 0)).toMatchObject({ absent: 2, verdict: 'unknown' });
    expect(summarizePlacement([-14], 0).verdict).toBe('unknown'); // -EFAULT: not mapped
  });
});
