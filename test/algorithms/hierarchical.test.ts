import { describe, expect, it } from 'vitest';
import { ScheduleCache, allreduceSchedules, bcastSchedule, coveringSources, reduceSchedule } from '../../src/algorithms/hierarchical.js';
import { StepKind, encodeSchedule, type Schedule, type Step } from '../../src/algorithms/schedule.js';
import { TopocollError } from '../../src/errors.js';
import { planGroups, type GroupPlan } from '../../src/groups/plan.js';
import type { RankPlacement } from '../../src/topology/types.js';
import { parseSimpleNetworkFile } from '../../src/topology/network/simple-file.js';
import { parseSlurmTopologyConf } from '../../src/topology/network/slurm-topology-conf.js';
import { UNBALANCED_CONF, exampleFile } from '../helpers/network-examples.js';
import { allreduceProblems, bcastProblems, ONE_ELEMENT, reduceProblems, SEVERAL_RUNS, type SimRun } from './collective-checks.js';
import { outOfGroupSteps, simulate } from './simulator.js';
import { byCore, coreLocality, pad, range } from '../helpers/placements.js';
import { prng } from '../helpers/prng.js';

// ---- checks ----

/**
 * Bcast and reduce from every root in `roots`, and allreduce, with today's defaults (binomial
 * trees, commutative); a tree moves p − 1 whole messages per segment.
 */
function checkEveryRoot(plan: GroupPlan, roots: readonly number[] = range(0, plan.size - 1), runs: readonly SimRun[] = ONE_ELEMENT): void {
  const problems: string[] = [];
  for (const root of roots) {
    problems.push(...bcastProblems(plan, root, {}, runs), ...reduceProblems(plan, root, {}, runs));
    for (const collective of ['bcast', 'reduce'] as const) {
      const schedules = range(0, plan.size - 1).map((r) => (collective === 'bcast' ? bcastSchedule : reduceSchedule)(plan, r, root));
      const sends = schedules.reduce((sum, s) => sum + s.steps.filter((x) => x.kind === StepKind.Send).length, 0);
      if (sends !== plan.size - 1) problems.push(`${collective} root ${root}: ${sends} messages`);
      // bcast: every rank but the root receives once, first; reduce: every rank but the root sends once, last
      const once = collective === 'bcast' ? StepKind.Recv : StepKind.Send;
      schedules.forEach((s, r) => {
        const at = s.steps.map((x) => x.kind).filter((k) => k === once).length;
        const where = collective === 'bcast' ? s.steps[0] : s.steps[s.steps.length - 1];
        if (at !== (r === root ? 0 : 1) || (r !== root && where?.kind !== once))
          problems.push(`${collective} root ${root}: rank ${r} steps ${s.steps.map((x) => x.kind).join(',')}`);
      });
    }
  }
  problems.push(...allreduceProblems(plan, {}, runs));
  expect(problems.slice(0, 10)).toEqual([]);
}

/** The S3 paper's cluster, scaled: `nodes` nodes × 2 sockets × `cores` cores, `perLeaf` nodes per leaf, one spine. */
function s3Plan(nodes: number, cores: number, perLeaf: number, disabled: string[] = []): GroupPlan {
  const names = range(1, nodes).map((i) => `node${pad(i)}`);
  const network = parseSimpleNetworkFile(names.map((n, i) => `${n} sw1${Math.floor(i / perLeaf) + 1} sw21`).join('\n'), 'net.txt');
  return planGroups(byCore(names, 2 * cores, cores), { network, disabled });
}

// ---- the tests ----

describe('hierarchical schedules: the S3 seed example (64 nodes × 36 ranks, 16 nodes per leaf)', () => {
  const plan = s3Plan(64, 18, 16);
  const L = { socket: 0, node: 1, switch1: 2, switch2: 3 };
  const send = (peer: number, level: number): Step => ({ kind: StepKind.Send, peer, level });
  const recv = (peer: number, level: number): Step => ({ kind: StepKind.Recv, peer, level });
  const red = (peer: number, level: number, order: 0 | 1 = 0): Step => ({ kind: StepKind.RecvReduce, peer, level, order });

  it('has the levels of the worked example', () => {
    expect(plan.levels).toEqual(['socket', 'node', 'switch1', 'switch2']);
  });

  it('finds the groups covering root 37 and the member covering it in each', () => {
    const sources = coveringSources(plan, 37);
    expect([...sources].map(([g, s]) => [g.level, g.leader, s])).toEqual([
      ['socket', 36, 37],
      ['node', 36, 36],
      ['switch1', 0, 36],
      ['switch2', 0, 0],
    ]);
  });

  it('bcast from 37: the data climbs 37 → 36 → 0 inside groups, with no hop through rank 0 first', () => {
    // 37 roots the socket tree of 36…53 (position 1): relative 8, 4, 16, 2, 1 (subtrees 8, 4, 2, 2, 1)
    expect(bcastSchedule(plan, 37, 37).steps).toEqual([45, 41, 53, 39, 38].map((p) => send(p, L.socket)));
    // 36 is relative 17 in that tree: parent 16 → rank 53; then it is the source above, top-down
    // (switch1 before node)
    expect(bcastSchedule(plan, 36, 37).steps).toEqual([recv(53, L.socket), ...[324, 180, 108, 72].map((p) => send(p, L.switch1)), send(54, L.node)]);
    // 0 receives in switch1 (rooted at 36, 0 is relative 15 → parent 14 → rank 540); it is the
    // source of switch2, node and socket, served top-down
    expect(bcastSchedule(plan, 0, 37).steps).toEqual([
      recv(540, L.switch1),
      send(1152, L.switch2),
      send(576, L.switch2),
      send(18, L.node),
      ...[8, 4, 16, 2, 1].map((p) => send(p, L.socket)),
    ]);
    // a plain member of another socket receives from its tree parent and forwards
    expect(bcastSchedule(plan, 4, 37).steps).toEqual([recv(0, L.socket), send(6, L.socket), send(5, L.socket)]);
    expect(bcastSchedule(plan, 5, 37).steps).toEqual([recv(4, L.socket)]);
  });

  it('reduce to 37 mirrors it: lower levels first, smallest subtree first, one send last', () => {
    expect(reduceSchedule(plan, 36, 37).steps).toEqual([red(54, L.node), ...[72, 108, 180, 324].map((p) => red(p, L.switch1)), send(53, L.socket)]);
    expect(reduceSchedule(plan, 0, 37).steps).toEqual([
      ...[1, 2, 16, 4, 8].map((p) => red(p, L.socket)),
      red(18, L.node),
      red(576, L.switch2),
      red(1152, L.switch2),
      send(540, L.switch1),
    ]);
    expect(reduceSchedule(plan, 37, 37).steps).toEqual([38, 39, 53, 41, 45].map((p) => red(p, L.socket)));
  });

  it('bcast from 0: the root sends as the source of all its groups, top-down', () => {
    expect(bcastSchedule(plan, 0, 0).steps.map((s) => s.level)).toEqual([3, 3, 2, 2, 2, 2, 1, 0, 0, 0, 0, 0]);
    expect(bcastSchedule(plan, 1, 0).steps).toEqual([recv(0, L.socket)]);
  });

  it('is correct, deadlock-free and in-group for sampled roots (all 2304 ranks simulated)', () => {
    checkEveryRoot(plan, [0, 1, 17, 18, 35, 36, 37, 54, 71, 575, 576, 1000, 1745, 2303]);
  });

  it('is correct with the socket level switched off (NM-ND-SW)', () => {
    checkEveryRoot(s3Plan(64, 18, 16, ['socket']), [0, 37, 1153, 2303]);
  });
});

describe('hierarchical schedules, every root', () => {
  it('S3-shaped cluster in small: 12 nodes × 2 sockets × 3 cores, 4 nodes per leaf, one spine', () => {
    const plan = s3Plan(12, 3, 4);
    expect(plan.levels).toEqual(['socket', 'node', 'switch1', 'switch2']);
    checkEveryRoot(plan);
  });

  it('single node: 8 ranks, two sockets of 4 cores', () => {
    const plan = planGroups(byCore(['a'], 8, 4));
    expect(plan.levels).toEqual(['socket', 'node']);
    checkEveryRoot(plan, undefined, SEVERAL_RUNS);
  });

  it('single node, one level (all hardware levels dropped)', () => {
    const plan = planGroups(range(0, 6).map((rank) => ({ rank, node: 'a', locality: '' })));
    expect(plan.levels).toEqual(['node']);
    checkEveryRoot(plan);
  });

  it('several nodes, no network: 3 nodes × 6 ranks', () => {
    const plan = planGroups(byCore(['a', 'b', 'c'], 6, 3));
    expect(plan.levels).toEqual(['socket', 'node', 'world']);
    checkEveryRoot(plan, undefined, SEVERAL_RUNS);
  });

  it('the shipped network file (the S3 one) with its first 20 nodes: 16 on sw11, 4 on sw12', () => {
    const network = parseSimpleNetworkFile(exampleFile('network-simple.txt'), 'network-simple.txt');
    const nodes = range(1, 20).map((i) => `node${pad(i)}`);
    const plan = planGroups(byCore(nodes, 4, 2), { network });
    expect(plan.levels).toEqual(['socket', 'node', 'switch1', 'switch2']);
    checkEveryRoot(plan);
  });

  it('interleaved ranks: round-robin over 3 nodes, 4 ranks each', () => {
    const placements = range(0, 11).map((r) => ({ rank: r, node: `n${r % 3}`, locality: coreLocality(Math.floor(r / 3), 2) }));
    const plan = planGroups(placements);
    expect(plan.groups.get('node')!.map((g) => g.members)).toEqual([
      [0, 6],
      [1, 7],
      [2, 8],
    ]);
    checkEveryRoot(plan);
  });

  it('nodes of unequal sizes (5, 2, 1, 3 ranks) including a node with a single rank', () => {
    const sizes = [5, 2, 1, 3];
    let rank = 0;
    const placements: RankPlacement[] = sizes.flatMap((n, k) => range(0, n - 1).map((j) => ({ rank: rank++, node: `n${k}`, locality: coreLocality(j, 2) })));
    const plan = planGroups(placements);
    checkEveryRoot(plan);
  });

  it('nodes whose hardware levels differ (numa below l3 on one node, socket on another)', () => {
    const numaBelowL3 = (c: number) => `SK0:L3${Math.floor(c / 4)}:L2${c}:L1${c}:CR${c}:HT${c}:NM${Math.floor(c / 2)}`;
    const placements: RankPlacement[] = [
      ...range(0, 7).map((r) => ({ rank: r, node: 'a', locality: numaBelowL3(r) })),
      ...range(8, 13).map((r) => ({ rank: r, node: 'b', locality: coreLocality(r - 8, 3) })),
    ];
    const plan = planGroups(placements);
    expect(plan.chain(0).map((g) => g.level)).toEqual(['numa', 'l3', 'node', 'world']);
    checkEveryRoot(plan);
  });

  it('an unbalanced network (Slurm topology.conf: a[0-1] reach the top without a leaf switch)', () => {
    const network = parseSlurmTopologyConf(UNBALANCED_CONF, 'topology.conf');
    const nodes = ['a0', 'a1', 'b0', 'b1'];
    const plan = planGroups(byCore(nodes, 4, 2), { network });
    expect(plan.levels).toEqual(['socket', 'node', 'switch1', 'switch2', 'switch3']);
    checkEveryRoot(plan);
  });

  it('nodes missing switches at some levels (simple network file)', () => {
    const network = parseSimpleNetworkFile(['n1 leafA spine', 'n2 leafA spine', 'n3 leafB spine', 'n4 leafC', 'n5 leafC'].join('\n'), 'net');
    const nodes = ['n1', 'n2', 'n3', 'n4', 'n5'];
    const placements = nodes.flatMap((node, k) => range(0, 2).map((j) => ({ rank: k * 3 + j, node, locality: '' })));
    const plan = planGroups(placements, { network });
    expect(plan.levels).toEqual(['node', 'switch1', 'switch2', 'world']);
    checkEveryRoot(plan);
  });

  it('one rank per node, only a world group; and two ranks', () => {
    checkEveryRoot(planGroups(range(0, 9).map((rank) => ({ rank, node: `n${rank}`, locality: '' }))));
    checkEveryRoot(planGroups([0, 1].map((rank) => ({ rank, node: 'a', locality: '' }))));
  });

  it('random placements: shuffled ranks, unequal nodes, random switches (40 plans)', () => {
    const random = prng(20240611);
    const pick = (n: number) => Math.floor(random() * n);
    for (let trial = 0; trial < 40; trial++) {
      const nodeCount = 1 + pick(6);
      const nodes = range(0, nodeCount - 1).map((k) => `h${k}`);
      const perNode = nodes.map(() => 1 + pick(6));
      const size = perNode.reduce((a, b) => a + b, 0);
      // a random permutation of ranks over the node slots
      const ranks = range(0, size - 1);
      for (let i = ranks.length - 1; i > 0; i--) {
        const j = pick(i + 1);
        [ranks[i], ranks[j]] = [ranks[j]!, ranks[i]!];
      }
      const placements: RankPlacement[] = [];
      let next = 0;
      nodes.forEach((node, k) => {
        const cores = range(0, 7)
          .sort(() => random() - 0.5)
          .slice(0, perNode[k]);
        for (const c of cores) placements.push({ rank: ranks[next++]!, node, locality: random() < 0.9 ? coreLocality(c, 4) : '' });
      });
      // leaves 0 and 1 under spine0, leaf 2 under spine1, leaf 3 directly at the top (no spine)
      const spineOfLeaf = ['spine0', 'spine0', 'spine1', undefined];
      const lines = nodes.map((n) => {
        const leaf = pick(4);
        return [n, `leaf${leaf}`, spineOfLeaf[leaf]].filter((x) => x !== undefined).join(' ');
      });
      const network = random() < 0.7 ? parseSimpleNetworkFile(lines.join('\n'), 'net') : undefined;
      const disabled = random() < 0.3 ? ['socket'] : [];
      const plan = planGroups(placements, { network, disabled });
      checkEveryRoot(plan);
    }
  });

  it('a job of one rank has no steps', () => {
    const plan = planGroups([{ rank: 0, node: 'a', locality: '' }]);
    expect(bcastSchedule(plan, 0, 0).steps).toEqual([]);
    expect(reduceSchedule(plan, 0, 0).steps).toEqual([]);
    expect(allreduceSchedules(plan, 0)).toEqual({
      reduce: { collective: 'reduce', root: 0, steps: [] },
      bcast: { collective: 'bcast', root: 0, steps: [] },
    });
  });
});

describe('the simulator itself', () => {
  const step = (kind: Step['kind'], peer: number, level = 0, extra: Partial<Step> = {}): Step => ({ kind, peer, level, ...extra });
  const sched = (...steps: Step[]): Schedule => ({ collective: 'bcast', root: 0, steps });
  const run = (schedules: Schedule[], transport: 'eager' | 'rendezvous' = 'rendezvous', elements = 2) =>
    simulate(schedules, { elements, transport, initial: (r, e) => `${r}/0/${e}`, combine: (a, b) => `(${a} ${b})` });

  it('reports two sends facing each other as a deadlock on a rendezvous transport, not on an eager one', () => {
    const facing = [sched(step(StepKind.Send, 1), step(StepKind.Recv, 1)), sched(step(StepKind.Send, 0), step(StepKind.Recv, 0))];
    const sim = run(facing);
    expect(sim.finished).toBe(false);
    expect(sim.stuck.map((s) => s.rank)).toEqual([0, 1]);
    expect(run(facing, 'eager').finished).toBe(true);
    // exchanges are always eager
    const exchange = (peer: number) => step(StepKind.SendRecv, peer, 0, { peer2: peer, range2: { first: 0, count: 1 } });
    expect(run([sched(exchange(1)), sched(exchange(0))]).finished).toBe(true);
  });

  it('reports a cycle of receives as a deadlock and a level or range mismatch as an error', () => {
    const cycle = run([
      sched(step(StepKind.Recv, 2), step(StepKind.Send, 1)),
      sched(step(StepKind.Recv, 0), step(StepKind.Send, 2)),
      sched(step(StepKind.Recv, 1), step(StepKind.Send, 0)),
    ]);
    expect(cycle.stuck).toHaveLength(3);
    const mismatch = run([sched(step(StepKind.Send, 1, 0)), sched(step(StepKind.Recv, 0, 1))]);
    expect(mismatch.finished).toBe(true);
    expect(mismatch.errors).toEqual(['rank 1 step 0 (segment 0): message 0→1 on level 0 met a receive on level 1']);
    const ranges = run([
      sched(step(StepKind.Send, 1, 0, { range: { first: 0, count: 1, of: 2 } })),
      sched(step(StepKind.Recv, 0, 0, { range: { first: 1, count: 1, of: 2 } })),
    ]);
    expect(ranges.errors).toEqual(['rank 1 step 0 (segment 0): message 0→1 carries blocks 0+1/2, the receive expects 1+1/2']);
  });

  it('moves block ranges, combines in the order asked, and flags sending data a rank does not hold', () => {
    const sim = run(
      [
        sched(step(StepKind.Send, 1, 0, { range: { first: 1, count: 1, of: 2 } })),
        sched(step(StepKind.RecvReduce, 0, 0, { range: { first: 1, count: 1, of: 2 }, order: 1 })),
      ],
      'rendezvous',
      4,
    );
    expect(sim.errors).toEqual([]);
    expect(sim.buffers[1]).toEqual(['1/0/0', '1/0/1', '(0/0/2 1/0/2)', '(0/0/3 1/0/3)']);
    const missing = simulate([sched(step(StepKind.Send, 1)), sched(step(StepKind.Recv, 0))], {
      elements: 2,
      initial: (r, e) => (r === 0 && e === 0 ? 'x' : undefined),
    });
    expect(missing.errors).toEqual(['rank 0 step 0 (segment 0): sends element 1 it does not hold']);
    const unreceived = run([sched(step(StepKind.Send, 1)), sched()], 'eager');
    expect(unreceived.errors).toEqual(['1 message(s) 0→1 never received']);
  });

  it("flags a peer outside the rank's group on that level", () => {
    const plan = planGroups(byCore(['a', 'b'], 4, 2));
    const schedules = range(0, 7).map(() => sched());
    schedules[1] = sched(step(StepKind.Send, 2, 0)); // 1 and 2 are on different sockets
    schedules[4] = sched(step(StepKind.SendRecv, 5, 0, { peer2: 6, range2: { first: 0, count: 1 } })); // 6 is on the other socket
    expect(outOfGroupSteps(plan, schedules)).toEqual(['rank 1 → 2 on level 0 (socket)', 'rank 4 → 6 on level 0 (socket)']);
  });
});

describe('ScheduleCache', () => {
  const plan = s3Plan(4, 3, 2);

  it('builds a schedule once per (collective, root) and then returns the same object', () => {
    const cache = new ScheduleCache(plan, 7);
    const b = cache.get('bcast', 3);
    expect(b).toEqual(bcastSchedule(plan, 7, 3));
    expect(cache.get('bcast', 3)).toBe(b);
    expect(cache.bcast(3)).toBe(b);
    const r = cache.reduce(3);
    expect(r).toEqual(reduceSchedule(plan, 7, 3));
    expect(r).not.toBe(b);
    expect(cache.size).toBe(2);
    const all = cache.allreduce();
    expect(all).toEqual(allreduceSchedules(plan, 7));
    expect(cache.allreduce().reduce).toBe(all.reduce);
    expect(cache.size).toBe(4);
  });

  it('caches the encoded form too', () => {
    const cache = new ScheduleCache(plan, 0);
    const e = cache.getEncoded('reduce', 5);
    expect([...e]).toEqual([...encodeSchedule(reduceSchedule(plan, 0, 5))]);
    expect(cache.getEncoded('reduce', 5)).toBe(e);
    cache.clear();
    expect(cache.size).toBe(0);
    expect(cache.getEncoded('reduce', 5)).not.toBe(e);
  });

  it('rejects a bad rank, root or collective', () => {
    expect(() => new ScheduleCache(plan, 99)).toThrow(TopocollError);
    expect(() => new ScheduleCache(plan, 0).get('bcast', 99)).toThrow(/root 99 is outside 0…23/);
    expect(() => new ScheduleCache(plan, 0).get('gather' as 'bcast', 0)).toThrow(/unknown collective/);
    expect(() => bcastSchedule(plan, 0, -1)).toThrow(TopocollError);
  });
});
