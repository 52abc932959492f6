import { describe, expect, it } from 'vitest';
import { alltoallAlgorithm, alltoallSchedule, type AlltoallAlgorithm } from '../../src/algorithms/alltoall.js';
import { decodeSteps, encodeSchedule, PAIR_BLOCKS, StepKind, type Schedule, type Step } from '../../src/algorithms/schedule.js';
import { planGroups, type Group, type GroupPlan } from '../../src/groups/plan.js';
import { coreLocality, range } from '../helpers/placements.js';
import { thrown } from '../helpers/thrown.js';
import { SHAPES, randomPlans } from './plan-shapes.js';
import { outOfGroupSteps } from './simulator.js';

/**
 * Runs every rank's alltoall schedule together on pair blocks: each rank starts holding its row
 * (s, ·); a Send needs the block held and, rendezvous, completes only once the receiver took
 * the message (the strictest transport: a full ring or socket buffer); a SendRecv's send is
 * eager (the executor interleaves it with the receive); a Recv takes the next message of its
 * link, which must carry the block it names. Returns the problems: wrong or missing blocks,
 * messages left over, ranks stuck (a deadlock).
 */
function simulateAlltoall(plan: GroupPlan, schedules: readonly Schedule[]): string[] {
  const p = plan.size;
  const problems: string[] = [];
  const holds = range(0, p - 1).map((r) => new Set(range(0, p - 1).map((d) => r * p + d)));
  interface Message {
    blocks: number[];
    taken: boolean;
  }
  const links = new Map<string, Message[]>();
  const link = (from: number, to: number) => {
    const key = `${from}>${to}`;
    let q = links.get(key);
    if (q === undefined) links.set(key, (q = []));
    return q;
  };
  const pc = new Array<number>(p).fill(0);
  // The message a rank's current step (or run of joined exchanges) posted, if any.
  const posted = new Array<Message | undefined>(p).fill(undefined);
  let posting = false;
  const post = (rank: number, to: number, blocks: number[]): Message => {
    for (const b of blocks) if (!holds[rank]!.has(b)) problems.push(`rank ${rank} sends block ${blockName(b, p)} it does not hold`);
    const m = { blocks, taken: false };
    link(rank, to).push(m);
    posting = true;
    return m;
  };
  const take = (rank: number, from: number, blocks: number[]): boolean => {
    const m = link(from, rank).find((x) => !x.taken);
    if (m === undefined) return false;
    m.taken = true;
    if (m.blocks.join() !== blocks.join())
      problems.push(
        `rank ${rank} expects ${blocks.map((b) => blockName(b, p)).join(' ')} from ${from} but gets ${m.blocks.map((b) => blockName(b, p)).join(' ')}`,
      );
    for (const b of m.blocks) holds[rank]!.add(b);
    return true;
  };
  for (let progress = true; progress;) {
    progress = false;
    posting = false;
    for (let r = 0; r < p; r++) {
      for (;;) {
        const steps = schedules[r]!.steps;
        const step = steps[pc[r]!];
        if (step === undefined) break;
        // A run of joined exchanges is one message each way.
        let last = pc[r]!;
        while (steps[last]?.joined === true) last++;
        const run = steps.slice(pc[r]!, last + 1);
        if (last >= steps.length) problems.push(`rank ${r}: a joined exchange ends the schedule`);
        for (const x of run) {
          if (x.range?.of !== PAIR_BLOCKS || x.range.count !== 1) problems.push(`rank ${r}: a step that is not one pair block`);
          if (x.kind !== step.kind || x.peer !== step.peer || x.peer2 !== step.peer2) problems.push(`rank ${r}: a run of other steps`);
        }
        let done = false;
        if (step.kind === StepKind.Send) {
          const m = (posted[r] ??= post(
            r,
            step.peer,
            run.map((x) => x.range!.first),
          ));
          done = m.taken;
        } else if (step.kind === StepKind.Recv) {
          done = take(
            r,
            step.peer,
            run.map((x) => x.range!.first),
          );
        } else if (step.kind === StepKind.SendRecv) {
          posted[r] ??= post(
            r,
            step.peer,
            run.map((x) => x.range!.first),
          );
          done = take(
            r,
            step.peer2!,
            run.map((x) => x.range2!.first),
          );
        } else {
          problems.push(`rank ${r}: step kind ${step.kind}`);
          done = true;
        }
        if (!done) {
          progress ||= posting;
          break;
        }
        posted[r] = undefined;
        pc[r] = last + 1;
        progress = true;
      }
    }
  }
  for (let r = 0; r < p; r++) {
    const step = schedules[r]!.steps[pc[r]!];
    if (step !== undefined) problems.push(`rank ${r} stuck at step ${pc[r]} (kind ${step.kind}, peer ${step.peer})`);
    for (let s = 0; s < p; s++) if (!holds[r]!.has(s * p + r)) problems.push(`rank ${r} lacks block ${blockName(s * p + r, p)}`);
  }
  for (const [key, q] of links) if (q.some((m) => !m.taken)) problems.push(`messages left on ${key}`);
  // Every block (s, d), s ≠ d, reaches d exactly once.
  for (let r = 0; r < p; r++) {
    const into = new Map<number, number>();
    for (const step of schedules[r]!.steps) {
      const b = step.kind === StepKind.Recv ? step.range!.first : step.kind === StepKind.SendRecv ? step.range2!.first : -1;
      if (b >= 0 && b % p === r) into.set(b, (into.get(b) ?? 0) + 1);
    }
    for (let s = 0; s < p; s++) {
      if (s !== r && into.get(s * p + r) !== 1) problems.push(`rank ${r} receives block ${blockName(s * p + r, p)} ${into.get(s * p + r) ?? 0} times`);
    }
  }
  return problems;
}

const blockName = (block: number, p: number): string => `(${Math.floor(block / p)}, ${block % p})`;

function problemsOf(plan: GroupPlan, algorithm: AlltoallAlgorithm, packed = false, exchanges?: (g: Group) => boolean): string[] {
  const schedules = range(0, plan.size - 1).map((r) => alltoallSchedule(plan, r, algorithm, { packed, exchanges }));
  const problems = simulateAlltoall(plan, schedules);
  if (algorithm === 'hierarchical') problems.push(...outOfGroupSteps(plan, schedules));
  // The encoded form decodes to the same steps.
  for (const s of schedules) expect(decodeSteps(encodeSchedule(s))).toEqual(s.steps);
  return problems;
}

const unbound = (nodeOf: (r: number) => string, p: number) => planGroups(range(0, p - 1).map((rank) => ({ rank, node: nodeOf(rank), locality: '' })));

/** 2–4 nodes, even and uneven; round-robin placement; sockets inside nodes. */
const EXTRA_SHAPES: { name: string; plan: (p: number) => GroupPlan }[] = [
  { name: '2 nodes, even', plan: (p) => unbound((r) => `n${r < Math.ceil(p / 2) ? 0 : 1}`, p) },
  { name: '3 nodes, uneven (1:2:3)', plan: (p) => unbound((r) => `n${r < Math.ceil(p / 6) ? 0 : r < Math.ceil(p / 2) ? 1 : 2}`, p) },
  { name: '4 nodes, round-robin', plan: (p) => unbound((r) => `n${r % 4}`, p) },
  {
    name: '3 nodes round-robin, 2 sockets',
    plan: (p) => planGroups(range(0, p - 1).map((rank) => ({ rank, node: `n${rank % 3}`, locality: coreLocality(Math.floor(rank / 3), 3) }))),
  },
];

describe('alltoall schedules', () => {
  it('the algorithm by placement: one node pairwise, several nodes hierarchical', () => {
    expect(alltoallAlgorithm(unbound(() => 'a', 5))).toBe('pairwise');
    expect(alltoallAlgorithm(unbound((r) => `n${r % 2}`, 5))).toBe('hierarchical');
    expect(alltoallAlgorithm(unbound(() => 'a', 1))).toBe('pairwise');
  });

  it('pairwise: p = 1…33, each rank gets every block exactly once, p − 1 exchanges per rank', () => {
    for (let p = 1; p <= 33; p++) {
      const plan = unbound(() => 'a', p);
      expect(problemsOf(plan, 'pairwise'), `p ${p}`).toEqual([]);
      expect(alltoallSchedule(plan, 0).steps.length).toBe(p - 1);
    }
  });

  it('bruck: p = 1…33, every block exactly once, ⌈log2 p⌉ packed exchanges per rank, each moving the blocks whose distance has the round’s bit', () => {
    for (let p = 1; p <= 33; p++) {
      const plan = unbound(() => 'a', p);
      expect(problemsOf(plan, 'bruck'), `p ${p}`).toEqual([]);
      const steps = alltoallSchedule(plan, p - 1, 'bruck').steps;
      const rounds = steps.filter((s) => s.joined !== true).length;
      expect(rounds).toBe(p === 1 ? 0 : Math.ceil(Math.log2(p)));
      // Round 0 of rank 0 sends rank 1 every block of odd distance i: (0, i).
      const first = alltoallSchedule(plan, 0, 'bruck').steps;
      if (p > 2) expect(first.filter((s) => s.peer === 1).map((s) => s.range!.first)).toEqual(range(1, p - 1, 2));
    }
  });

  it('hierarchical, one message a block and bundles: 10 shapes × p = 1…33 (one node, 2–4 nodes even and uneven, round-robin, sockets, switches) with rendezvous sends', () => {
    const problems: string[] = [];
    for (const shape of [...SHAPES, ...EXTRA_SHAPES]) {
      for (let p = 1; p <= 33; p++) {
        const plan = shape.plan(p);
        problems.push(...problemsOf(plan, 'hierarchical').map((x) => `${shape.name}, p ${p}: ${x}`));
        problems.push(...problemsOf(plan, 'hierarchical', true).map((x) => `${shape.name}, bundles, p ${p}: ${x}`));
        if (shape.name === 'one node') problems.push(...problemsOf(plan, 'pairwise').map((x) => `${shape.name} pairwise, p ${p}: ${x}`));
      }
    }
    expect(problems.slice(0, 20)).toEqual([]);
  });

  it('hierarchical with cross exchanges (every group, or the top group alone), with and without bundles: every shape and 40 random plans, rendezvous sends', () => {
    const problems: string[] = [];
    const check = (plan: GroupPlan, name: string) => {
      const top = (g: Group) => g.level === plan.levels.at(-1);
      for (const [which, exchanges] of [
        ['every group', () => true],
        ['the top group', top],
      ] as const) {
        for (const packed of [false, true]) {
          problems.push(...problemsOf(plan, 'hierarchical', packed, exchanges).map((x) => `${name}, ${which}${packed ? ', bundles' : ''}: ${x}`));
        }
      }
    };
    for (const shape of [...SHAPES, ...EXTRA_SHAPES]) for (const p of [2, 3, 5, 8, 13, 24]) check(shape.plan(p), `${shape.name}, p ${p}`);
    randomPlans(40, 11).forEach((plan, i) => check(plan, `plan ${i} (p ${plan.size})`));
    expect(problems.slice(0, 20)).toEqual([]);
  });

  it('cross exchanges: 2 nodes of 1 exchange their blocks in one SendRecv; 2 nodes of 3, the leaders in 9 (bundles: one joined run); 3 nodes of 1, 2 and 3 keep ordered steps where the covers differ', () => {
    const all = () => true;
    const two = unbound((r) => `n${r}`, 2);
    expect(alltoallSchedule(two, 0, 'hierarchical', { exchanges: all }).steps).toEqual([
      { kind: StepKind.SendRecv, peer: 1, level: 1, range: { first: 1, count: 1, of: -1 }, peer2: 1, range2: { first: 2, count: 1 } },
    ]);
    const plan = unbound((r) => `n${Math.floor(r / 3)}`, 6);
    const leader = alltoallSchedule(plan, 0, 'hierarchical', { exchanges: all }).steps.filter((s) => s.peer === 3 || s.peer2 === 3);
    expect(leader.map((s) => s.kind)).toEqual(Array(9).fill(StepKind.SendRecv));
    const packed = alltoallSchedule(plan, 0, 'hierarchical', { exchanges: all, packed: true }).steps.filter((s) => s.peer === 3);
    expect(packed.filter((s) => s.joined !== true).length).toBe(1);
    const uneven = unbound((r) => `n${r < 1 ? 0 : r < 3 ? 1 : 2}`, 6);
    const kinds = alltoallSchedule(uneven, 0, 'hierarchical', { exchanges: all }).steps.map((s) => s.kind);
    expect(kinds).toContain(StepKind.Send);
    expect(kinds).not.toContain(StepKind.SendRecv);
  });

  it('hierarchical: 40 random plans (shuffled ranks, unequal nodes, switches)', () => {
    const problems: string[] = [];
    randomPlans(40, 7).forEach((plan, i) => {
      problems.push(...problemsOf(plan, 'hierarchical').map((x) => `plan ${i} (p ${plan.size}): ${x}`));
      problems.push(...problemsOf(plan, 'hierarchical', true).map((x) => `plan ${i} (p ${plan.size}), bundles: ${x}`));
    });
    expect(problems.slice(0, 20)).toEqual([]);
  });

  it('hierarchical, 2 nodes of 3: each rank hands its 3 blocks for the other node up, the leaders exchange 9 blocks', () => {
    const plan = unbound((r) => `n${Math.floor(r / 3)}`, 6);
    const leader = alltoallSchedule(plan, 0, 'hierarchical').steps;
    const member = alltoallSchedule(plan, 1, 'hierarchical').steps;
    const toOtherNode = leader.filter((s) => s.kind === StepKind.Send && s.peer === 3);
    expect(toOtherNode.length).toBe(9);
    expect(member.filter((s) => s.kind === StepKind.Send && s.peer === 0 && Math.floor(s.range!.first / 6) === 1 && s.range!.first % 6 >= 3).length).toBe(3);
  });

  it('hierarchical bundles, 2 nodes of 3: a member sends its leader one message, the leaders exchange one of 9 blocks', () => {
    const plan = unbound((r) => `n${Math.floor(r / 3)}`, 6);
    const messages = (steps: Step[], kind: StepKind, peer: number) => steps.filter((s) => s.kind === kind && s.peer === peer && s.joined !== true).length;
    const leader = alltoallSchedule(plan, 0, 'hierarchical', { packed: true }).steps;
    expect(leader.filter((s) => s.kind === StepKind.Send && s.peer === 3).length).toBe(9);
    expect(messages(leader, StepKind.Send, 3)).toBe(1);
    expect(messages(leader, StepKind.Recv, 3)).toBe(1);
    const member = alltoallSchedule(plan, 1, 'hierarchical', { packed: true }).steps;
    expect(messages(member, StepKind.Send, 0)).toBe(1);
    expect(messages(member, StepKind.Recv, 0)).toBe(1);
  });

  it('an algorithm it does not know is ECONFIG', () => {
    expect(
      thrown(() =>
        alltoallSchedule(
          unbound(() => 'a', 3),
          0,
          'bogus' as AlltoallAlgorithm,
        ),
      ).code,
    ).toBe('ECONFIG');
  });
});
