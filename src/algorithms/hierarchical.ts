import { TopocollError } from '../errors.js';
import type { Group, GroupPlan } from '../groups/plan.js';
import type { AllreduceAlgorithm, BcastAlgorithm, GroupAllgatherAlgorithm, GroupBarrierAlgorithm, ReduceAlgorithm } from './algorithm-choice.js';
import { groupAllgatherSteps } from './group-allgather.js';
import { groupAllreduceSteps } from './group-allreduce.js';
import { arriveInformsAll, groupBarrierSteps } from './group-barrier.js';
import { groupBcastSteps } from './group-bcast.js';
import { groupGatherSteps, groupScatterSteps, type GroupGatherAlgorithm } from './group-gather.js';
import { groupReduceScatterSteps, type GroupReduceScatterAlgorithm } from './group-reduce-scatter.js';
import { groupReduceSteps } from './group-reduce.js';
import type { GroupView } from './group-steps.js';
import { StepKind, encodeSchedule, type CollectiveKind, type Schedule, type Step } from './schedule.js';

/**
 * Hierarchical bcast, reduce, allreduce, allgather, gather, scatter and barrier schedules over the groups of a
 * `GroupPlan`, for any root, each group running the algorithm a callback chooses for it
 * (group-bcast.ts, group-reduce.ts, group-allreduce.ts, group-allgather.ts; binomial trees by
 * default; the ring for allgather), with no extra hop through rank 0: every message travels
 * between two members of one group, so only in-group links are used.
 *
 * Coverage. A member m of a group G covers m itself and everything m leads below G: the members
 * of m's lower groups and, recursively, what they cover. Each rank ≠ 0 is a non-leader in
 * exactly one group (the top of its chain), so coverage is a tree and the groups that cover a
 * root r form one path: all of chain(r), then, for r's top-group leader a1, the groups of
 * chain(a1) above r's top group, then those of its leader a2 above a1's top group, … up to 0.
 * The **source** of a group for root r is the member covering r if the group covers r, else its
 * leader; every group's bcast starts at its source. A reduce's **destination** of a group is its
 * source.
 *
 * For a rank x ≠ r, let R be the lowest group of x's chain whose source is not x (the lowest
 * group covering r, else the top of the chain — x leads and is the source of every group below
 * its top that does not cover r). x is the source of every other group of its chain, and every
 * member of a group other than its source has that group as its R.
 *
 * Bcast: x ≠ r first runs its part of R (it receives there; with scatter-allgather several
 * times), then acts as the source in every other group of its chain, top-down: the highest groups
 * span the largest subtrees and the slowest links, so their data leaves first (the mirror of the
 * reduce order). r only acts as the source.
 *
 * Reduce: the mirror. x runs the group reduce of every group it is the destination of, in chain
 * order bottom-up, then its part of R, which hands its B on. When R lies below groups x is the
 * destination of (a root x does not lead), the receives R's algorithm starts with (tree
 * children, a fold partner) stay at R's place bottom-up: lower levels finish first. r does no R.
 *
 * Deadlock freedom (for rendezvous Send/Recv too): a group's steps are contiguous in every
 * member's list and complete once all members have entered them. Members other than the source
 * enter at once (bcast) or after groups covering strictly less (reduce), and the source enters
 * after groups nearer the root (bcast) or covering less (reduce): the waits follow the coverage
 * tree and cannot close a cycle. (Hoisted receives wait for members that reach R without
 * waiting for x.)
 *
 * Non-commutative reduce (`commutative: false`). The order of contributions must not depend on
 * the root, but data flowing into a root r that a group's leader does not cover enters groups out
 * of order. So an ordered reduce runs every group toward its leader (position 0; the result
 * lands on rank 0, combined in `reductionOrder(plan)`) and then relays it down the groups
 * covering r: in each, the leader sends it to the source when they differ. Every group algorithm
 * keeps position order when asked (`groupReduceSteps`), so the result is in rank order exactly
 * when `preservesRankOrder(plan)` (ranks numbered along the hierarchy, e.g. mapped by core);
 * otherwise in the plan's fixed order, the same on every rank and for every root.
 *
 * Allreduce, two variants:
 * - `reduce-bcast`: reduce to rank 0, then bcast from it (a barrier runs the same with zero
 *   bytes);
 * - `reduce-allreduce-bcast`: the top group T (the top of rank 0's chain) runs a group allreduce
 *   (`recursive-doubling` or `rabenseifner`); below it every group reduces to its leader — each
 *   member of T leads everything it covers — and the result comes back down by bcast from the
 *   leaders. The reduce phase holds the lower reduces and T's allreduce, the bcast phase the
 *   lower bcasts (T's members already hold the result). With `commutative: false` the lower
 *   groups keep position order: the result is in `reductionOrder(plan)`, identical everywhere.
 *
 * Allgather (`allgatherSchedules`), on rank blocks (schedule.ts): B is the result vector, block r
 * rank r's contribution at its own place, so the result is in rank order whatever the placement
 * (the ranks of a node need not be consecutive) and no group algorithm reorders anything.
 * - Gather phase (`collective: 'allgather'`): every rank runs, bottom-up along its chain, the
 *   group allgather (group-allgather.ts; `allgatherAlgorithm(g)`, default `ring`; `shm` through
 *   the shared-memory engine for a group with an id `shmGroup(g)`, else ECONFIG) of each group,
 *   each member m holding the blocks of what it covers below the group (`coveredBelow`): itself
 *   and, recursively, everything it leads below. After a group's allgather every member holds
 *   the blocks of everything the group covers; leaders carry that upward into their next group.
 *   The top group T's allgather leaves every member of T holding every block. Deadlock freedom as
 *   for reduce: a member enters a group after the groups below it, which cover strictly less.
 * - Bcast phase (`collective: 'bcast'`): the whole result vector goes down from T's members
 *   exactly as in the bcast phase of `reduce-allreduce-bcast` (every group but T, from its
 *   leader, top-down; ordinary whole-segment ranges, `bcastAlgorithm(g)` incl. `shm`).
 * Lower groups' non-leaders receive the blocks of their group in the gather phase and the whole
 * vector again in the bcast phase: a group allgather keeps every level one kind of step.
 * Both phases have root 0; a job of one rank has no steps.
 *
 * Gather and scatter (`gatherSchedule`, `scatterSchedule`), on rank blocks: B is the result
 * vector (gather) or the root's send vector (scatter), block r rank r's at its own place, on every
 * rank that holds blocks. Every group moves blocks between its members and its destination (the
 * reduce's: the member covering the root, else the leader), `gatherAlgorithm(g)` (group-gather.ts;
 * default `binomial`). A member stands for the ranks whose blocks reach R's destination through it
 * (`gatherCoverage`: itself and, recursively, what the other members of every group it is the
 * destination of stand for — with root 0, what it covers below the group). Gather: x runs the
 * groups it is the destination of, bottom-up, then its part of R (it sends there, after any
 * receives R's algorithm gives it); its blocks are all there before it sends. Scatter, the
 * mirror: x first runs its part of R, then sends on in the groups it is the source of, top-down.
 * The root ends (gather) or starts (scatter) with every block; each other rank holds at least its
 * own. Deadlock freedom as for reduce and bcast: the waits follow the coverage tree.
 *
 * Reduce-scatter (`reduceScatterSchedules`): a reduce phase of the whole vector as
 * reduce-allreduce-bcast's, bottom-up to the leaders, but with nothing at the top group T; then a
 * phase of rank blocks: T's members reduce-scatter (group-reduce-scatter.ts: ring or recursive-halving), each keeping the
 * fully reduced blocks of the ranks it covers below T, and every group below T scatters them from
 * its leader as the scatter from rank 0 does. A non-commutative operator takes the rank-ordered
 * reduce to rank 0 and the scatter from it instead.
 *
 * Barrier (`barrierSchedules`), zero bytes, each group running the group barrier
 * `barrierAlgorithm(g)` (group-barrier.ts; default `combining-tree:2`) in its two parts:
 * - Arrive phase (`collective: 'reduce'`): every rank runs, bottom-up along its chain, the arrive
 *   part of each group. After a group's arrive its leader (with `dissemination`, every member)
 *   has in its causal past the entry of every rank the group covers: the members entered it only
 *   after the arrives of the groups they lead below, which cover the rest. Leaders go on upward;
 *   a non-leader's arrive phase ends with the top group of its chain. The arrive of the plan's top
 *   group T leaves its leader (with `dissemination`, all its members) knowing that every rank
 *   entered the barrier.
 * - Release phase (`collective: 'bcast'`): every rank runs, top-down along its chain, the release
 *   part of each group, except T's when T runs `dissemination` (its arrive already told every
 *   member); with `central-counter` or `combining-tree:K` T runs its release too, which is how
 *   its members learn. In every group below T the leader — who has finished the release of the
 *   group above (or T's arrive) and so knows every rank entered — tells its members, who go on
 *   telling their own groups below.
 * So every rank's last step causally follows every rank's entry. Deadlock freedom: the arrive
 * phase is a reduce (a member enters a group after groups covering strictly less); in the
 * release phase a member of a group waits only for its leader, which waits only for groups higher
 * up, ending at T, which every rank's arrive reaches: the waits follow the coverage tree.
 * Both phases have root 0; a job of one rank has no steps.
 */

/** Groups of the plan that cover `root`, each with the member covering it (the source). */
export function coveringSources(plan: GroupPlan, root: number): Map<Group, number> {
  checkRoot(plan, root);
  const sources = new Map<Group, number>();
  let a = root;
  let from: Group | undefined;
  for (;;) {
    const chain = plan.chain(a);
    // Above `from` (the top group of the previous path rank, led by a), a covers root.
    for (let i = from === undefined ? 0 : chain.indexOf(from) + 1; i < chain.length; i++) sources.set(chain[i]!, a);
    const top = chain[chain.length - 1];
    if (top === undefined || top.leader === a) return sources;
    from = top;
    a = top.leader;
  }
}

/**
 * `shmGroup(g)`: the id under which the rank registered `g` with the shared-memory engine (S0),
 * undefined if it did not; groups with an id may run `shm` bcasts and reduces.
 */
export interface ShmOptions {
  shmGroup?: (g: Group) => number | undefined;
}

/** How a bcast moves data inside each group: `bcastAlgorithm(g)`, by default `shm` where `shmGroup(g)` gives an id, else `binomial`. */
export interface BcastOptions extends ShmOptions {
  bcastAlgorithm?: (g: Group) => BcastAlgorithm;
}

/** How a reduce combines inside each group: `reduceAlgorithm(g)` (default `binomial`) and whether the operator commutes (default true). */
export interface ReduceOptions extends ShmOptions {
  reduceAlgorithm?: (g: Group) => ReduceAlgorithm;
  commutative?: boolean;
}

export type AllreduceVariant = 'reduce-bcast' | 'reduce-allreduce-bcast';

export interface AllreduceOptions extends BcastOptions, ReduceOptions {
  /** Default `reduce-bcast`. */
  variant?: AllreduceVariant;
  /** The top group's allreduce in `reduce-allreduce-bcast`; default `recursive-doubling`. */
  top?: AllreduceAlgorithm;
}

/** The two phases of an allreduce (and a barrier): the reduce phase, then the bcast phase. */
export interface AllreduceSchedules {
  reduce: Schedule;
  bcast: Schedule;
}

/** The steps of `rank` in a bcast from `root`. */
export function bcastSchedule(plan: GroupPlan, rank: number, root: number, options: BcastOptions = {}): Schedule {
  return { collective: 'bcast', root, steps: bcastSteps(context(plan, rank, root), options) };
}

/** The steps of `rank` in a reduce to `root`. */
export function reduceSchedule(plan: GroupPlan, rank: number, root: number, options: ReduceOptions = {}): Schedule {
  if (options.commutative !== false) return { collective: 'reduce', root, steps: reduceSteps(context(plan, rank, root), options) };
  checkRoot(plan, root);
  const steps = reduceSteps(context(plan, rank, GLOBAL_LEADER), options);
  steps.push(...relaySteps(context(plan, rank, root)));
  return { collective: 'reduce', root, steps };
}

/** The global leader: rank 0, the lowest rank, leader of every group it belongs to. */
export const GLOBAL_LEADER = 0;

/** The schedules of `rank` for an allreduce (see the variants above); both phases have root 0. */
export function allreduceSchedules(plan: GroupPlan, rank: number, options: AllreduceOptions = {}): AllreduceSchedules {
  if ((options.variant ?? 'reduce-bcast') === 'reduce-bcast') {
    return { reduce: reduceSchedule(plan, rank, GLOBAL_LEADER, options), bcast: bcastSchedule(plan, rank, GLOBAL_LEADER, options) };
  }
  const ctx = context(plan, rank, GLOBAL_LEADER);
  const top = topGroup(plan);
  const algorithm = options.top ?? 'recursive-doubling';
  return {
    reduce: { collective: 'reduce', root: GLOBAL_LEADER, steps: reduceSteps(ctx, options, top && { group: top, algorithm }) },
    bcast: { collective: 'bcast', root: GLOBAL_LEADER, steps: bcastSteps(ctx, options, top) },
  };
}

/**
 * How an allgather gathers inside each group: `allgatherAlgorithm(g)`, by default `ring` (`shm`
 * needs `shmGroup(g)`); its bcast phase as `BcastOptions`.
 */
export interface AllgatherOptions extends BcastOptions {
  allgatherAlgorithm?: (g: Group) => GroupAllgatherAlgorithm;
}

/** The two phases of an allgather: the gather phase (rank blocks), then the bcast phase (whole vector). */
export interface AllgatherSchedules {
  gather: Schedule;
  bcast: Schedule;
}

/** The schedules of `rank` for an allgather (see "Allgather" above); both phases have root 0. */
export function allgatherSchedules(plan: GroupPlan, rank: number, options: AllgatherOptions = {}): AllgatherSchedules {
  const ctx = context(plan, rank, GLOBAL_LEADER);
  const algorithmOf = options.allgatherAlgorithm ?? (() => 'ring' as const);
  const gather: Step[] = [];
  for (const g of ctx.chain) {
    const covered = g.members.map((m) => coveredBelow(plan, m, g));
    gather.push(...groupAllgatherSteps(algorithmOf(g), ctx.view(g), position(g, rank), (i) => covered[i]!, { shmGroup: options.shmGroup?.(g) }));
  }
  return {
    gather: { collective: 'allgather', root: GLOBAL_LEADER, steps: gather },
    bcast: { collective: 'bcast', root: GLOBAL_LEADER, steps: bcastSteps(ctx, options, topGroup(plan)) },
  };
}

/** How a gather or scatter moves rank blocks inside each group: `gatherAlgorithm(g)`, by default `binomial`. */
export interface GatherOptions {
  gatherAlgorithm?: (g: Group) => GroupGatherAlgorithm;
}

/**
 * The steps of `rank` in a gather to `root` (see "Gather and scatter" above): the groups it is
 * the destination of bottom-up, then its part of R.
 */
export function gatherSchedule(plan: GroupPlan, rank: number, root: number, options: GatherOptions = {}): Schedule {
  const ctx = context(plan, rank, root);
  const stands = gatherCoverage(plan, root);
  const steps: Step[] = [];
  const stepsIn = (g: Group): Step[] =>
    groupGatherSteps(algorithmOf(options, g), ctx.view(g), position(g, ctx.sourceOf(g)), position(g, rank), (i) => stands(g.members[i]!));
  ctx.chain.forEach((g, i) => {
    if (i !== ctx.receiveAt) steps.push(...stepsIn(g));
  });
  if (ctx.receiveAt >= 0) steps.push(...stepsIn(ctx.chain[ctx.receiveAt]!));
  return { collective: 'gather', root, steps };
}

/**
 * The steps of `rank` in a scatter from `root`: its part of R, then the groups it is the source
 * of, top-down. `instead` replaces one group's scatter steps (reduceScatterSchedules: the top
 * group's reduce-scatter).
 */
export function scatterSchedule(
  plan: GroupPlan,
  rank: number,
  root: number,
  options: GatherOptions = {},
  instead?: { group: Group; steps: (view: GroupView, me: number, stands: (rank: number) => readonly number[]) => Step[] },
): Schedule {
  const ctx = context(plan, rank, root);
  const stands = gatherCoverage(plan, root);
  const steps: Step[] = [];
  const stepsIn = (g: Group): Step[] =>
    g === instead?.group
      ? instead.steps(ctx.view(g), position(g, rank), stands)
      : groupScatterSteps(algorithmOf(options, g), ctx.view(g), position(g, ctx.sourceOf(g)), position(g, rank), (i) => stands(g.members[i]!));
  if (ctx.receiveAt >= 0) steps.push(...stepsIn(ctx.chain[ctx.receiveAt]!));
  for (let i = ctx.chain.length - 1; i >= 0; i--) if (i !== ctx.receiveAt) steps.push(...stepsIn(ctx.chain[i]!));
  return { collective: 'scatter', root, steps };
}

/** How a reduce-scatter runs: the reduce's algorithms below the top group, the top group's own (default `ring`), the scatter's for the way down. */
export interface ReduceScatterOptions extends ReduceOptions, GatherOptions {
  reduceScatterTop?: GroupReduceScatterAlgorithm;
}

/** The two phases of a reduce-scatter: a reduce of the whole vector (ordinary ranges), then rank blocks. */
export interface ReduceScatterSchedules {
  reduce: Schedule;
  blocks: Schedule;
}

/**
 * The schedules of `rank` for a reduce-scatter (see "Reduce-scatter" above); both phases have root 0.
 * Commutative: the lower groups reduce the whole vector to their leaders, the top group T
 * reduce-scatters it (`reduceScatterTop`, default `ring`, each member keeping the blocks it covers below T), and every
 * leader scatters its share down. Non-commutative: the rank-ordered reduce to rank 0, then a
 * scatter from it.
 */
export function reduceScatterSchedules(plan: GroupPlan, rank: number, options: ReduceScatterOptions = {}): ReduceScatterSchedules {
  if (options.commutative === false) {
    return { reduce: reduceSchedule(plan, rank, GLOBAL_LEADER, options), blocks: scatterSchedule(plan, rank, GLOBAL_LEADER, options) };
  }
  const ctx = context(plan, rank, GLOBAL_LEADER);
  const top = topGroup(plan);
  const reduce = reduceSteps(ctx, options, top && { group: top });
  const instead =
    top === undefined
      ? undefined
      : {
          group: top,
          steps: (view: GroupView, me: number) =>
            groupReduceScatterSteps(options.reduceScatterTop ?? 'ring', view, me, (i) => coveredBelow(plan, top.members[i]!, top)),
        };
  const blocks = scatterSchedule(plan, rank, GLOBAL_LEADER, options, instead);
  return { reduce: { collective: 'reduce', root: GLOBAL_LEADER, steps: reduce }, blocks };
}

function algorithmOf(options: GatherOptions, g: Group): GroupGatherAlgorithm {
  return options.gatherAlgorithm?.(g) ?? 'binomial';
}

/**
 * For a gather to `root` (a scatter from it): the ranks whose blocks `rank` holds when it sends
 * them on in its group R (receives them there), ascending — itself and what the other members
 * of each group it is the destination (source) of stand for. Each rank ≠ root hands its blocks to
 * R's destination, so these sets form a tree rooted at `root` (whose set is every rank). With root
 * 0 a member of a group stands for what it covers below the group (`coveredBelow`).
 */
export function gatherCoverage(plan: GroupPlan, root: number): (rank: number) => readonly number[] {
  checkRoot(plan, root);
  const sources = coveringSources(plan, root);
  const sourceOf = (g: Group): number => sources.get(g) ?? g.leader;
  const children: number[][] = Array.from({ length: plan.size }, () => []);
  for (let c = 0; c < plan.size; c++) {
    if (c === root) continue;
    const r = plan.chain(c).find((g) => sourceOf(g) !== c);
    if (r !== undefined) children[sourceOf(r)]!.push(c);
  }
  const stands: number[][] = new Array<number[]>(plan.size);
  const collect = (x: number): number[] => {
    const out = [x];
    for (const c of children[x]!) out.push(...collect(c));
    stands[x] = [...out].sort((a, b) => a - b);
    return out;
  };
  collect(root);
  return (rank) => stands[rank] ?? [rank];
}

/** How a barrier synchronises inside each group: `barrierAlgorithm(g)`, by default `combining-tree:2`. */
export interface BarrierOptions {
  barrierAlgorithm?: (g: Group) => GroupBarrierAlgorithm;
}

/** The two phases of a barrier: arrive (bottom-up), then release (top-down). */
export interface BarrierSchedules {
  arrive: Schedule;
  release: Schedule;
}

/** The schedules of `rank` for a barrier (see "Barrier" above); both phases have root 0. */
export function barrierSchedules(plan: GroupPlan, rank: number, options: BarrierOptions = {}): BarrierSchedules {
  const ctx = context(plan, rank, GLOBAL_LEADER);
  const algorithmOf = options.barrierAlgorithm ?? (() => ({ combiningTree: 2 }) as const);
  const top = topGroup(plan);
  const arrive: Step[] = [];
  const release: Step[][] = [];
  for (const g of ctx.chain) {
    const algorithm = algorithmOf(g);
    const parts = groupBarrierSteps(algorithm, ctx.view(g), position(g, rank));
    arrive.push(...parts.arrive);
    if (g !== top || !arriveInformsAll(algorithm)) release.push(parts.release);
  }
  return {
    arrive: { collective: 'reduce', root: GLOBAL_LEADER, steps: arrive },
    release: { collective: 'bcast', root: GLOBAL_LEADER, steps: release.reverse().flat() },
  };
}

/**
 * The ranks `member` (of `group`) covers below `group`, ascending: itself and, for each group of
 * its chain below `group` (all led by it), what the other members cover below that group.
 */
export function coveredBelow(plan: GroupPlan, member: number, group: Group): number[] {
  const out: number[] = [];
  const collect = (m: number, above: Group): void => {
    out.push(m);
    for (const g of plan.chain(m)) {
      if (g === above || g.leader !== m) break;
      for (const x of g.members) if (x !== m) collect(x, g);
    }
  };
  collect(member, group);
  return out.sort((a, b) => a - b);
}

/** The top group of the plan (the top of rank 0's chain); undefined for a job of one rank. */
export function topGroup(plan: GroupPlan): Group | undefined {
  const chain = plan.chain(GLOBAL_LEADER);
  return chain[chain.length - 1];
}

/**
 * The order in which an ordered (`commutative: false`) hierarchical reduction combines the
 * ranks' contributions: each group concatenates, by position, what its members cover.
 */
export function reductionOrder(plan: GroupPlan): number[] {
  // What `rank` covers, in order, after its groups below `above` (all of which it leads).
  const covered = (rank: number, above: Group | undefined): number[] => {
    let order = [rank];
    for (const g of plan.chain(rank)) {
      if (g === above || g.leader !== rank) break;
      const mine = order;
      order = g.members.flatMap((m) => (m === rank ? mine : covered(m, g)));
    }
    return order;
  };
  return covered(GLOBAL_LEADER, undefined);
}

/** Whether `reductionOrder(plan)` is rank order 0 … p−1 (ordered reductions are then in rank order). */
export function preservesRankOrder(plan: GroupPlan): boolean {
  return reductionOrder(plan).every((r, i) => r === i);
}

/** The algorithm choices a `ScheduleCache` builds with; whether the operator commutes is per call. */
export type ScheduleCacheOptions = Omit<AllreduceOptions, 'commutative'>;

/** Per call: whether the reduction operator commutes (default true). */
export interface ReduceVariant {
  commutative?: boolean;
}

const PHASE = { bcast: 0, reduce: 1, allreduceReduce: 2, allreduceBcast: 3 } as const;
type Phase = (typeof PHASE)[keyof typeof PHASE];

/**
 * One rank's schedules for one configuration (the options fixed at construction; a communicator
 * holds one cache per configuration, e.g. per message-size class), built on first use and then
 * found in O(1) by (phase, root, commutative). A plan change needs a new cache.
 */
export class ScheduleCache {
  private readonly schedules = new Map<number, Schedule>();
  private readonly encoded = new Map<number, Int32Array>();

  constructor(
    readonly plan: GroupPlan,
    readonly rank: number,
    readonly options: ScheduleCacheOptions = {},
  ) {
    plan.chain(rank); // validates rank
  }

  get(collective: CollectiveKind, root: number, variant: ReduceVariant = {}): Schedule {
    return this.cached(this.phaseOf(collective), root, variant);
  }

  /** The encoded form (`encodeSchedule`) of `get(collective, root, variant)`, also cached. */
  getEncoded(collective: CollectiveKind, root: number, variant: ReduceVariant = {}): Int32Array {
    return this.cachedEncoded(this.phaseOf(collective), root, variant);
  }

  bcast(root: number): Schedule {
    return this.get('bcast', root);
  }

  reduce(root: number, variant: ReduceVariant = {}): Schedule {
    return this.get('reduce', root, variant);
  }

  allreduce(variant: ReduceVariant = {}): AllreduceSchedules {
    return { reduce: this.cached(PHASE.allreduceReduce, GLOBAL_LEADER, variant), bcast: this.cached(PHASE.allreduceBcast, GLOBAL_LEADER, variant) };
  }

  allreduceEncoded(variant: ReduceVariant = {}): { reduce: Int32Array; bcast: Int32Array } {
    return {
      reduce: this.cachedEncoded(PHASE.allreduceReduce, GLOBAL_LEADER, variant),
      bcast: this.cachedEncoded(PHASE.allreduceBcast, GLOBAL_LEADER, variant),
    };
  }

  /** Number of schedules built so far. */
  get size(): number {
    return this.schedules.size;
  }

  clear(): void {
    this.schedules.clear();
    this.encoded.clear();
  }

  private cached(phase: Phase, root: number, variant: ReduceVariant): Schedule {
    const key = this.key(phase, root, variant);
    let s = this.schedules.get(key);
    if (s === undefined) {
      s = this.build(phase, root, variant.commutative ?? true);
      this.schedules.set(key, s);
    }
    return s;
  }

  private cachedEncoded(phase: Phase, root: number, variant: ReduceVariant): Int32Array {
    const key = this.key(phase, root, variant);
    let e = this.encoded.get(key);
    if (e === undefined) {
      e = encodeSchedule(this.cached(phase, root, variant));
      this.encoded.set(key, e);
    }
    return e;
  }

  private build(phase: Phase, root: number, commutative: boolean): Schedule {
    const options = { ...this.options, commutative };
    switch (phase) {
      case PHASE.bcast:
        return bcastSchedule(this.plan, this.rank, root, options);
      case PHASE.reduce:
        return reduceSchedule(this.plan, this.rank, root, options);
      case PHASE.allreduceReduce:
        return allreduceSchedules(this.plan, this.rank, options).reduce;
      case PHASE.allreduceBcast:
        return allreduceSchedules(this.plan, this.rank, options).bcast;
    }
  }

  private phaseOf(collective: CollectiveKind): Phase {
    if (collective === 'bcast') return PHASE.bcast;
    if (collective === 'reduce') return PHASE.reduce;
    throw new TopocollError('EINVAL', `unknown collective ${String(collective)}`, { rank: this.rank });
  }

  /** Only the reduce phases depend on whether the operator commutes. */
  private key(phase: Phase, root: number, variant: ReduceVariant): number {
    checkRoot(this.plan, root);
    const ordered = (phase === PHASE.reduce || phase === PHASE.allreduceReduce) && variant.commutative === false ? 1 : 0;
    return (root * 4 + phase) * 2 + ordered;
  }
}

/** Bcast steps of `ctx.rank`: R first, then the groups it is the source of, top-down; `skip` is left out. */
function bcastSteps(ctx: Context, options: BcastOptions, skip?: Group): Step[] {
  const algorithmOf = options.bcastAlgorithm ?? ((g: Group) => (options.shmGroup?.(g) === undefined ? 'binomial' : 'shm'));
  const stepsIn = (g: Group, source: number): Step[] =>
    groupBcastSteps(algorithmOf(g), ctx.view(g), position(g, source), position(g, ctx.rank), { shmGroup: options.shmGroup?.(g) });
  const { chain, receiveAt: r } = ctx;
  const steps: Step[] = [];
  if (r >= 0 && chain[r] !== skip) steps.push(...stepsIn(chain[r]!, ctx.sourceOf(chain[r]!)));
  for (let i = chain.length - 1; i >= 0; i--) if (i !== r && chain[i] !== skip) steps.push(...stepsIn(chain[i]!, ctx.rank));
  return steps;
}

/**
 * Reduce steps of `ctx.rank`: the groups it is the destination of bottom-up, R's leading
 * receives at R's place, the rest of R last; `top.group` runs `top.algorithm`'s allreduce instead.
 */
function reduceSteps(ctx: Context, options: ReduceOptions, top?: { group: Group; algorithm?: AllreduceAlgorithm }): Step[] {
  const algorithmOf = options.reduceAlgorithm ?? (() => 'binomial' as const);
  const { chain, receiveAt: r } = ctx;
  const steps: Step[] = [];
  let rest: Step[] = [];
  chain.forEach((g, i) => {
    const me = position(g, ctx.rank);
    if (g === top?.group) {
      if (top.algorithm !== undefined) steps.push(...groupAllreduceSteps(top.algorithm, ctx.view(g), me));
      return;
    }
    const mine = groupReduceSteps(algorithmOf(g), ctx.view(g), position(g, ctx.sourceOf(g)), me, {
      commutative: options.commutative,
      shmGroup: options.shmGroup?.(g),
    });
    const hoisted = i === r ? leadingReceives(mine) : mine.length;
    steps.push(...mine.slice(0, hoisted));
    if (i === r) rest = mine.slice(hoisted);
  });
  steps.push(...rest);
  return steps;
}

/** How many steps at the start of `steps` only receive-and-reduce the whole segment. */
function leadingReceives(steps: readonly Step[]): number {
  const k = steps.findIndex((s) => s.kind !== StepKind.RecvReduce || s.range !== undefined);
  return k < 0 ? steps.length : k;
}

/** After an ordered reduce to rank 0: the result travels down the groups covering `ctx.root`, leader to source. */
function relaySteps(ctx: Context): Step[] {
  const steps: Step[] = [];
  for (const g of [...ctx.chain].reverse()) {
    const source = ctx.sourceOf(g);
    if (source === g.leader) continue;
    if (ctx.rank === g.leader) steps.push(step(StepKind.Send, source, ctx.level(g)));
    if (ctx.rank === source) steps.push(step(StepKind.Recv, g.leader, ctx.level(g)));
  }
  return steps;
}

interface Context {
  rank: number;
  chain: Group[];
  /** Index in `chain` of R (the one receive of a bcast, the one send of a reduce); −1 at the root. */
  receiveAt: number;
  sourceOf(g: Group): number;
  level(g: Group): number;
  view(g: Group): GroupView;
}

function context(plan: GroupPlan, rank: number, root: number): Context {
  const chain = plan.chain(rank);
  checkRoot(plan, root);
  const sources = coveringSources(plan, root);
  const sourceOf = (g: Group): number => sources.get(g) ?? g.leader;
  let receiveAt = -1;
  if (rank !== root) {
    receiveAt = chain.findIndex((g) => sourceOf(g) !== rank);
    if (receiveAt < 0 && chain.length > 0) {
      // Unreachable for a plan built by planGroups: the top group of a rank ≠ 0 is led by another rank.
      throw new TopocollError('EINVAL', `rank ${rank} is the source of every group of its chain for root ${root}`, { rank });
    }
  }
  const levelIndex = new Map(plan.levels.map((name, i) => [name, i]));
  const level = (g: Group): number => levelIndex.get(g.level) ?? -1;
  return { rank, chain, receiveAt, sourceOf, level, view: (g) => ({ members: g.members, level: level(g), label: `${g.level} group ${g.unit}` }) };
}

function checkRoot(plan: GroupPlan, root: number): void {
  if (!Number.isInteger(root) || root < 0 || root >= plan.size) {
    throw new TopocollError('EINVAL', `root ${root} is outside 0…${plan.size - 1}`, { rank: root });
  }
}

/** Position of `rank` among the (ascending) members of `g`. */
function position(g: Group, rank: number): number {
  const m = g.members;
  let lo = 0;
  let hi = m.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = m[mid]!;
    if (v === rank) return mid;
    if (v < rank) lo = mid + 1;
    else hi = mid - 1;
  }
  throw new TopocollError('EINVAL', `rank ${rank} is not a member of ${g.level} group ${g.unit}`, { rank, level: g.level });
}

function step(kind: StepKind, peer: number, level: number): Step {
  return { kind, peer, level };
}
