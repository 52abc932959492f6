import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../src/cli/io.js';
import { Progress, type ProgressStream } from '../../src/cli/progress.js';

function stream(isTTY: boolean, columns?: number): ProgressStream & { text: string } {
  const s = { isTTY, columns, text: '', write: (t: string) => (s.text += t) };
  return s;
}

function captured(): CliIo & { out: string } {
  const io = { out: '', stdout: (t: string) => (io.out += t), stderr: (t: string) => (io.out += t), env: {}, cwd: '/' };
  return io;
}

describe('the progress line', () => {
  it('on a terminal: one line rewritten in place with the case and how many are left, gone at the end', () => {
    const s = stream(true, 120);
    const q = new Progress('topocoll bench', 3, s);
    q.step('topocoll allreduce');
    expect(s.text).toMatch(/^\r\x1b\[Ktopocoll bench: 1\/3 topocoll allreduce \(2 left after this, 0:0\d\)$/);
    q.step('Open MPI allreduce');
    expect(s.text.split('\r\x1b[K').at(-1)).toMatch(/^topocoll bench: 2\/3 Open MPI allreduce \(1 left/);
    q.finish();
    expect(s.text.endsWith('\r\x1b[K')).toBe(true);
    const after = s.text.length;
    q.step('late');
    q.finish();
    expect(s.text.slice(after)).toMatch(/3\/3 late/);
  });

  it("takes itself away around the command's output and comes back after it", () => {
    const s = stream(true, 120);
    const p = new Progress('topocoll tune shm', 2, s);
    const io = captured();
    const wrapped = p.around(io);
    p.step('small, run 1 of 3');
    const before = s.text.length;
    wrapped.stderr('a notice\n');
    expect(io.out).toBe('a notice\n');
    expect(s.text.slice(before)).toMatch(/^\r\x1b\[K\r\x1b\[Ktopocoll tune shm: 1\/2 small/);
    p.finish();
  });

  it('stays on one terminal line: cut to the width', () => {
    const s = stream(true, 40);
    const p = new Progress('topocoll bench', 1, s);
    p.step('x'.repeat(200));
    p.finish();
    for (const line of s.text.split('\r\x1b[K')) expect([...line].length).toBeLessThanOrEqual(39);
  });

  it('without a terminal writes nothing and leaves the output alone', () => {
    const s = stream(false);
    const p = new Progress('topocoll bench', 2, s);
    const io = captured();
    expect(p.around(io)).toBe(io);
    p.step('topocoll allreduce');
    p.finish();
    expect(s.text).toBe('');
  });
});
