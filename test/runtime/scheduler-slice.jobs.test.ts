import { spawnSync } from 'node:child_process';
import { release } from 'node:os';
import { describe, expect, it } from 'vitest';
import { jobScript } from '../helpers/jobs.js';

/**
 * The scheduler slice the engine requests for the threads that run collectives
 * (`scheduler.sliceUs`, native/src/base/wait.h): requested while a communicator is open, held while
 * any is, given back to the kernel's default when the last closes. Read by the program itself
 * from /proc/self/sched (se.slice), started as a user starts a one-process program.
 */
describe('the scheduler slice of the JavaScript thread', () => {
  it('is 100 µs while communicators are open, and the default again once the last one closed', () => {
    const r = spawnSync(process.execPath, [jobScript('slice-check.mjs')], { encoding: 'utf8', timeout: 60_000, env: { PATH: process.env.PATH } });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const ns = Object.fromEntries(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => l.split(' '))
        .map(([k, v]) => [k, Number(v)]),
    );
    const [major, minor] = release().split('.').map(Number) as [number, number];
    // Custom slices exist from Linux 6.12 on; before that the request must change nothing.
    const honoured = major > 6 || (major === 6 && minor >= 12);
    const requested = honoured ? 100_000 : ns.before;
    expect(ns.before).toBeGreaterThan(0);
    expect(ns).toEqual({ before: ns.before, one: requested, two: requested, 'first-closed': requested, 'both-closed': ns.before });
  });
});
