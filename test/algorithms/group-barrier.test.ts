import { describe, expect, it } from 'vitest';
import type { GroupBarrierAlgorithm } from '../../src/algorithms/algorithm-choice.js';
import { arriveInformsAll, groupBarrierArriveSteps, groupBarrierReleaseSteps, groupBarrierSteps } from '../../src/algorithms/group-barrier.js';
import type { GroupView } from '../../src/algorithms/group-steps.js';
import { StepKind, type Step } from '../../src/algorithms/schedule.js';
import { thrown } from '../helpers/thrown.js';
import { barrierRunProblems, groupBarrierProblems } from './barrier-check.js';

const ALGORITHMS: GroupBarrierAlgorithm[] = ['central-counter', { combiningTree: 2 }, { combiningTree: 3 }, { combiningTree: 4 }, 'dissemination'];
const name = (a: GroupBarrierAlgorithm): string => (typeof a === 'string' ? a : `combining-tree:${a.combiningTree}`);
const viewOf = (n: number, level = 0): GroupView => ({ members: Array.from({ length: n }, (_, i) => i), level });

const send = (peer: number, level = 0): Step => ({ kind: StepKind.Send, peer, level });
const recv = (peer: number, level = 0): Step => ({ kind: StepKind.Recv, peer, level });
const exchange = (to: number, from: number, level = 0): Step => ({ kind: StepKind.SendRecv, peer: to, level, peer2: from, range2: { first: 0, count: 1 } });

describe('group barrier, simulated', () => {
  it.each(ALGORITHMS.map((a) => [name(a), a] as const))(
    '%s: n = 1…64, arrive then release, both transports: every member ends knowing every member entered',
    (_name, algorithm) => {
      const problems: string[] = [];
      for (let n = 1; n <= 64; n++) problems.push(...groupBarrierProblems(algorithm, n).map((p) => `n ${n}: ${p}`));
      expect(problems.slice(0, 10)).toEqual([]);
    },
  );

  it("dissemination's arrive alone is a barrier; the trees' arrive alone informs only the leader", () => {
    const problems: string[] = [];
    for (let n = 1; n <= 64; n++) problems.push(...groupBarrierProblems('dissemination', n, { arriveOnly: true }).map((p) => `n ${n}: ${p}`));
    expect(problems.slice(0, 10)).toEqual([]);
    expect(arriveInformsAll('dissemination')).toBe(true);
    for (const a of ALGORITHMS.filter((x) => x !== 'dissemination')) {
      expect(arriveInformsAll(a)).toBe(false);
      for (const n of [2, 5, 16]) {
        const problems = groupBarrierProblems(a, n, { arriveOnly: true, transports: ['eager'] });
        // no deadlock, no stray message: only the barrier property fails, and never at the leader
        expect(problems.length).toBeGreaterThan(0);
        expect(problems.every((p) => /rank [1-9]\d* finishes without knowing/.test(p))).toBe(true);
      }
    }
  });

  it('the checker rejects broken barriers: no release, a release that does not wait for its parent', () => {
    const n = 8;
    const view = viewOf(n);
    const parts = view.members.map((_, me) => groupBarrierSteps({ combiningTree: 2 }, view, me));
    expect(
      barrierRunProblems(
        parts.map((x) => [...x.arrive, ...x.release]),
        'rendezvous',
      ),
    ).toEqual([]);
    // no release at all: runs cleanly, but is no barrier
    const noRelease = barrierRunProblems(
      parts.map((x) => x.arrive),
      'eager',
    );
    expect(noRelease.length).toBeGreaterThan(0);
    expect(noRelease.every((p) => /finishes without knowing/.test(p))).toBe(true);
    // position 4 passes the release on before it has received it: 5, 6, 7 only know 4's subtree (4 itself ends with the receive)
    expect(parts[4]!.release).toEqual([recv(0), send(6), send(5)]);
    const eager = parts.map((x, me) => [...x.arrive, ...(me === 4 ? [send(6), send(5), recv(0)] : x.release)]);
    for (const t of ['eager', 'rendezvous'] as const) {
      const problems = barrierRunProblems(eager, t);
      expect(problems.map((p) => /rank (\d+) finishes/.exec(p)?.[1])).toEqual(['5', '6', '7']);
    }
    // a member that never waits at all deadlocks nobody under eager sends but is caught too
    const leaves = parts.map((x, me) => (me === 7 ? x.arrive : [...x.arrive, ...x.release]));
    expect(barrierRunProblems(leaves, 'eager').some((p) => /never received/.test(p))).toBe(true);
  });
});

describe('group barrier steps by hand', () => {
  it('central-counter: everyone to the leader in ascending position, then the leader to everyone', () => {
    const view: GroupView = { members: [3, 7, 9, 12], level: 2 };
    expect(groupBarrierSteps('central-counter', view, 0)).toEqual({
      arrive: [recv(7, 2), recv(9, 2), recv(12, 2)],
      release: [send(7, 2), send(9, 2), send(12, 2)],
    });
    expect(groupBarrierSteps('central-counter', view, 2)).toEqual({ arrive: [send(3, 2)], release: [recv(3, 2)] });
  });

  it('combining-tree:3 over 5: the 3-nomial tree rooted at 0, children smallest subtree first on the way up, largest first on the way down', () => {
    const view = viewOf(5);
    // 0's children: 3 (subtree {3, 4}), then 2 and 1 (ties: larger i first); 3's child: 4
    expect(groupBarrierSteps({ combiningTree: 3 }, view, 0)).toEqual({ arrive: [recv(1), recv(2), recv(3)], release: [send(3), send(2), send(1)] });
    expect(groupBarrierSteps({ combiningTree: 3 }, view, 3)).toEqual({ arrive: [recv(4), send(0)], release: [recv(0), send(4)] });
    expect(groupBarrierSteps({ combiningTree: 3 }, view, 4)).toEqual({ arrive: [send(3)], release: [recv(3)] });
  });

  it('combining-tree:2 is the binomial tree: log2 n receives at the leader', () => {
    const view = viewOf(8);
    expect(groupBarrierArriveSteps({ combiningTree: 2 }, view, 0)).toEqual([recv(1), recv(2), recv(4)]);
    expect(groupBarrierArriveSteps({ combiningTree: 2 }, view, 6)).toEqual([recv(7), send(4)]);
    expect(groupBarrierReleaseSteps({ combiningTree: 2 }, view, 6)).toEqual([recv(4), send(7)]);
    // fan-in ≥ n: every member sends the leader directly, as in a central counter (the release in descending position)
    expect(groupBarrierSteps({ combiningTree: 8 }, view, 0)).toEqual({
      arrive: groupBarrierArriveSteps('central-counter', view, 0),
      release: groupBarrierReleaseSteps('central-counter', view, 0).reverse(),
    });
    expect(groupBarrierSteps({ combiningTree: 8 }, view, 5)).toEqual(groupBarrierSteps('central-counter', view, 5));
  });

  it('dissemination over 5: ⌈log2 5⌉ = 3 exchanges at distances 1, 2, 4; release down a binomial tree from the leader', () => {
    const view = viewOf(5);
    expect(groupBarrierSteps('dissemination', view, 0)).toEqual({
      arrive: [exchange(1, 4), exchange(2, 3), exchange(4, 1)],
      release: [send(2), send(4), send(1)],
    });
    expect(groupBarrierSteps('dissemination', view, 3)).toEqual({ arrive: [exchange(4, 2), exchange(0, 1), exchange(2, 4)], release: [recv(2)] });
    expect(groupBarrierReleaseSteps('dissemination', viewOf(16), 0)).toEqual(groupBarrierReleaseSteps({ combiningTree: 2 }, viewOf(16), 0));
    for (let n = 2; n <= 64; n++) expect(groupBarrierArriveSteps('dissemination', viewOf(n), n - 1)).toHaveLength(Math.ceil(Math.log2(n)));
  });

  it('one member: no steps; bad algorithms, fan-ins and positions are rejected', () => {
    for (const a of ALGORITHMS) expect(groupBarrierSteps(a, { members: [5], level: 1 }, 0)).toEqual({ arrive: [], release: [] });
    thrown(() => groupBarrierSteps('binomial' as unknown as GroupBarrierAlgorithm, viewOf(4), 0), 'ECONFIG');
    thrown(() => groupBarrierSteps({ knomial: 3 } as unknown as GroupBarrierAlgorithm, viewOf(4), 0), 'ECONFIG');
    thrown(() => groupBarrierSteps({ combiningTree: 1 }, viewOf(4), 0), 'ECONFIG');
    thrown(() => groupBarrierSteps({ combiningTree: 2.5 }, viewOf(4), 0), 'ECONFIG');
    thrown(() => groupBarrierSteps('dissemination', viewOf(4), 4), 'EINVAL');
  });
});
