import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { parseAffinityFromStatus, readProcessAffinity } from '../../src/topology/affinity.js';
import { thrown } from '../helpers/thrown.js';

/** An excerpt of a real /proc/self/status (Linux 6.x), under `taskset -c 0-3,8-11`. */
const STATUS = [
  'Name:\tnode',
  'State:\tR (running)',
  'Cpus_allowed:\tf0f',
  'Cpus_allowed_list:\t0-3,8-11',
  'Mems_allowed:\t00000000,00000001',
  'Mems_allowed_list:\t0',
  'voluntary_ctxt_switches:\t3',
  '',
].join('\n');

describe('parseAffinityFromStatus', () => {
  it('reads the Cpus_allowed_list line', () => {
    expect(parseAffinityFromStatus(STATUS)).toEqual([0, 1, 2, 3, 8, 9, 10, 11]);
  });

  it('names the line of a list that does not parse', () => {
    const text = STATUS.replace('0-3,8-11', '0-3,8-');
    const e = thrown(() => parseAffinityFromStatus(text, { file: '/proc/42/status' }));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('/proc/42/status:4: invalid index list "0-3,8-"');
  });

  it('rejects an empty list', () => {
    const e = thrown(() => parseAffinityFromStatus(STATUS.replace('0-3,8-11', ''), { file: 'status' }));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('status:4: Cpus_allowed_list is empty');
  });

  it('says when the line is missing', () => {
    const e = thrown(() => parseAffinityFromStatus('Name:\tnode\n', { file: 'status' }));
    expect(e.code).toBe('ETOPOLOGY');
    expect(e.message).toContain('status: no "Cpus_allowed_list:" line');
  });
});

describe('readProcessAffinity', () => {
  it('has as many CPUs as Node reports available', () => {
    expect(readProcessAffinity()).toHaveLength(availableParallelism());
  });

  it('equals what taskset reports for this process', () => {
    const out = execFileSync('taskset', ['-cp', String(process.pid)], { encoding: 'utf8' });
    // "pid 123's current affinity list: 0-3,8" — taskset prints ranges in list syntax too.
    const list = out.trim().split(': ')[1]!;
    const expected = list.split(',').flatMap((part) => {
      const [lo, hi = lo] = part.split('-').map(Number) as [number, number?];
      return Array.from({ length: hi! - lo + 1 }, (_, i) => lo + i);
    });
    expect(readProcessAffinity()).toEqual(expected);
  });
});
