import { describe, expect, it } from 'vitest';
import { jobScript, leftoverSegments, runJob } from '../helpers/jobs.js';

/**
 * The JavaScript fast path (src/runtime/fast-path.ts) in real jobs started with `topocoll run`:
 * the same bits as the addon's path, interoperation call by call with ranks and calls that go
 * through the addon, and every error guarantee (test/jobs/fast-path.mjs says what each mode does).
 */
function run(n: number, ...args: string[]) {
  const r = runJob(['-n', String(n), '--timeout', '5', jobScript('fast-path.mjs'), ...args], 180_000);
  const caught = new Map<number, string>();
  for (const line of r.lines) {
    const m = /^rank (\d+) caught (E[A-Z]+): (.*)$/.exec(line);
    if (m) caught.set(Number(m[1]), `${m[2]} ${m[3]}`);
  }
  return { ...r, caught };
}

describe('the fast path gives the bits the addon gives', () => {
  for (const n of [2, 3]) {
    it(`every datatype × operator, every collective of the fast path, p = ${n}`, () => {
      const r = run(n, 'bits');
      expect(r.stdout).not.toMatch(/FAILED/);
      expect(r.status).toBe(0);
      for (let rank = 0; rank < n; rank++) {
        const line = r.lines.find((l) => l.startsWith(`rank ${rank} bits ok 1233 taken `));
        expect(line).toBeDefined();
        // Most calls: one that follows a one-way call whose peers are late goes through the addon.
        expect(Number(line!.split(' ').pop())).toBeGreaterThan(300);
      }
    });
  }
});

describe('fast-path calls and calls through the addon meet call by call', () => {
  for (const [name, n, extra] of [
    ['p = 2, rank 1 without the fast path', 2, []],
    ['p = 3, every rank with it', 3, ['all']],
    ['p = 4, odd ranks without it', 4, []],
  ] as const) {
    it(`${name}: 3000 mixed calls against a reference`, () => {
      const r = run(n, 'mixed', ...extra);
      expect(r.stdout).not.toMatch(/FAILED/);
      expect(r.status).toBe(0);
      for (let rank = 0; rank < n; rank++) {
        const line = r.lines.find((l) => l.startsWith(`rank ${rank} mixed ok taken `));
        expect(line).toBeDefined();
        const taken = Number(line!.split(' ').pop());
        if (extra.length > 0 || rank % 2 === 0) expect(taken).toBeGreaterThan(100);
        else expect(taken).toBe(0);
      }
    });
  }
});

describe('errors on the fast path', () => {
  it('a peer killed while the others spin: every survivor gets EPEERLOST (allreduce; bcast and scatter from it; reduce and gather where it sends; alltoall; scan)', async () => {
    for (const [n, collective] of [
      [2, 'allreduce'],
      [3, 'allreduce'],
      [2, 'bcast'],
      [3, 'bcast'],
      [3, 'reduce'],
      [3, 'gather'],
      [2, 'scatter'],
      [3, 'alltoall'],
      [3, 'scan'],
    ] as const) {
      const r = run(n, 'killed', collective);
      expect(r.status).toBe(128 + 9);
      expect([...r.caught.keys()].sort()).toEqual(Array.from({ length: n - 1 }, (_, i) => i));
      for (const text of r.caught.values()) expect(text).toMatch(/^EPEERLOST .*rank \d+ \(pid \d+\) on this node died/);
    }
    expect(await leftoverSegments()).toEqual([]);
  });

  for (const side of ['the addon', 'the fast path']) {
    it(`a count mismatch where rank 1 goes through ${side}: EMISMATCH on both ranks`, () => {
      const r = run(2, 'mismatch', ...(side === 'the fast path' ? ['fast'] : []));
      expect(r.status).toBe(3);
      // Whichever rank saw it first: its own description, or the abort it raised.
      expect(r.caught.size).toBe(2);
      for (const text of r.caught.values()) expect(text).toMatch(/^EMISMATCH .*allreduce\(count=[45], int32, sum\).*allreduce\(count=[45], int32, sum\)/);
    });
  }

  it("a count mismatch in the area's other protocols, either side on the fast path: EMISMATCH on every rank", () => {
    // gather (the root sees it, the sender at its next call), alltoall (both see it), scan at p = 3 (ranks 1 and 2 see it).
    for (const [n, collective, count] of [
      [2, 'gather', 'gather\\(count=(8|10)'],
      [2, 'alltoall', '[45] elements in alltoall call #1 where this rank expects [45]'],
      [3, 'scan', 'scan\\(count=[45]'],
    ] as const) {
      for (const side of [[], ['fast']]) {
        const r = run(n, 'mismatch', side[0] ?? 'addon', collective);
        expect(r.status).toBe(3);
        expect(r.caught.size).toBe(n);
        for (const text of r.caught.values()) expect(text).toMatch(new RegExp(`^EMISMATCH .*${count}`));
      }
    }
  });

  for (const side of ['fast', 'addon']) {
    it(`send and recv that share bytes: EINVAL on every rank before anything is sent, through the ${side === 'fast' ? 'fast path' : 'addon'}`, () => {
      const r = run(2, 'overlap', side);
      expect(r.status).toBe(0);
      for (let rank = 0; rank < 2; rank++) {
        const refused = r.lines.filter((l) => l.startsWith(`rank ${rank} refused `));
        // allreduce, allgather, and the reduce: its root's views overlap, the other rank's operator is unknown.
        expect(refused).toHaveLength(3);
        expect(refused[0]).toMatch(/EINVAL: send and recv overlap.*IN_PLACE/);
        expect(refused[1]).toMatch(/EINVAL: send and recv overlap.*IN_PLACE/);
        expect(refused[2]).toMatch(rank === 0 ? /EINVAL: send and recv overlap.*IN_PLACE/ : /EINVAL: unknown reduction operator/);
        // The calls after them still meet: one allreduce, through the fast path when it is on.
        expect(r.lines).toContain(`rank ${rank} after ok ${side === 'fast' ? 1 : 0}`);
      }
    });
  }

  it('inspecting a closed communicator reads its detached views instead of unmapped memory', () => {
    const r = run(2, 'inspect');
    expect(r.status).toBe(0);
    expect(r.lines).toEqual(expect.arrayContaining(['rank 0 inspected true', 'rank 1 inspected true']));
  });

  it('a rank that leaves right after a call it made without waiting: the call completes, the next names it and that call', () => {
    const r = run(3, 'departed');
    expect(r.lines).toEqual(expect.arrayContaining(['rank 0 completed', 'rank 1 completed', 'rank 2 completed']));
    expect(r.caught.size).toBe(2);
    for (const text of r.caught.values())
      expect(text).toMatch(
        /^EPEERLOST .*rank 2 left the communicator \(close\(\) or exit\) after call 101, so it will not take part in this allreduce \(call 102\)/,
      );
  });
});
