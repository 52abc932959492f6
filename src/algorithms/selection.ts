import {
  formatAlgorithm,
  parseAlgorithm,
  type AllreduceAlgorithm,
  type BcastAlgorithm,
  type GroupAlgorithm,
  type GroupBarrierAlgorithm,
  type GroupGatherAlgorithm,
  type ReduceAlgorithm,
} from './algorithm-choice.js';
import { DEFAULT_BARRIER_CANDIDATES } from './barrier-model.js';
import { coreBoundUs, groupCores, memberCores, someMachineShared, type WorkAlgorithm, type WorkCollective } from './core-sharing.js';
import type { GroupAllgatherAlgorithm } from './group-allgather.js';
import type { GroupReduceScatterAlgorithm } from './group-reduce-scatter.js';
import { alltoallAlgorithm } from './alltoall.js';
import { coveredBelow, topGroup, type AllreduceVariant } from './hierarchical.js';
import type { TopocollConfig } from '../config/schema.js';
import { TopocollError } from '../errors.js';
import type { Group, GroupPlan } from '../groups/plan.js';

import {
  duplexShare,
  pipelineUs,
  predictGroupAllgatherUs,
  predictGroupAllreduceUs,
  predictGroupBarrierUs,
  predictGroupBcastUs,
  predictGroupGatherUs,
  predictGroupReduceScatterUs,
  predictGroupReduceUs,
  predictGroupScanUs,
  predictGroupScatterUs,
  scanFinishUs,
  predictAlltoallGroupUs,
  predictBruckAlltoallUs,
  predictPairwiseAlltoallUs,
  type LevelCosts,
  type LinkModel,
  type StagePair,
} from './cost-model.js';
import { autoQueueBytes, chooseTree, fragmentTable, MIN_FRAGMENT, parseTree, predictBcastUs, type BcastShape } from './shm-bcast-model.js';

/** One segment's stage times, and the pairs of them that share links (cost-model.ts, StagePair). */
interface PairedStages {
  us: number[];
  pairs: StagePair[];
}
type Stages = number[] | PairedStages;

/**
 * Which algorithm every group of a plan runs each collective with, and the pipelining segment,
 * for a message of a given size — decided the same way on every rank from the configuration, the
 * plan and facts every member of a group shares (never from this rank's own view), so all
 * members of a group agree.
 *
 * A configured algorithm or segment is taken as it is. `auto` is the cost model's argmin
 * (cost-model.ts, issue 18): for each group, every candidate algorithm's predicted time on the
 * group's link for the message (or segment) size, the least wins; for each collective, every
 * candidate segment's predicted time of the whole call — the levels as stages of a pipeline
 * (cost-model.ts's pipelineUs) — the least wins; for allreduce also the variant (S3 §5.1 or
 * §5.2) and the top group's algorithm. Message sizes are taken in powers of two (`sizeBucket`):
 * the choice for m bytes is the one for ⌈log2 m⌉.
 *
 * A group's link: `model.levels[level]` when given, else shared memory for a group inside one
 * node (`model.oversubscribed.shm` when that node has more ranks than cores — from every node's
 * figures, NodeFacts.nodes, known alike to every rank, so a rank of another node prices the group
 * as its members do — or the group's members outnumber their CPUs), else
 * the link between nodes (`model.links.mpi` when the job's transport is MPI and it is given, else
 * `model.links.tcp`). A group that spans nodes takes `model.oversubscribed.tcp` only when its own
 * members outnumber the CPUs they may run on (emulated nodes on one host), never for its nodes'
 * oversubscription: its members may sit on nodes that differ. Segments pay
 * off only where levels work at once: in a job on one node with more ranks than cores the stages
 * are added, segment after segment, instead of overlapping. A group whose members outnumber the
 * CPUs they may run on (`NodeFacts.cpus`) has every candidate's prediction raised to its work
 * shared among those CPUs, or to its most loaded core's work, where that is more (core-sharing.ts),
 * barriers included. Candidates predicted alike (within a relative 1e-9: equal work bounds) go to
 * the one whose formula (its chain of dependent messages) is shorter, then to the one listed first.
 *
 * Candidates: bcast flat, binomial, knomial:4, scatter-allgather, and shm inside a node (with
 * shm.bcast.enabled); reduce flat, binomial, knomial:4, rabenseifner (shm: configured only);
 * allgather ring, recursive-doubling, bruck, neighbor-exchange, and shm inside a node; gather and
 * scatter flat and binomial; barrier
 * S4's (barrier-model.ts); allreduce's top group recursive-doubling and rabenseifner; segments
 * none and 8 KiB … 1 MiB in powers of two (smaller than the message), no larger than the eager
 * limit where a schedule exchanges between nodes.
 *
 * Reduce-scatter runs the reduce's algorithms and segment below the top group, and the scatter's
 * algorithms down in the scatter's column segments (capped by the eager limit); it chooses only
 * the top group's algorithm, ring or recursive-halving: `reduceScatter.top` when configured, else
 * the least prediction on those columns. An alltoall on one node runs `alltoall.algorithm` when
 * configured (pairwise or bruck), else the least prediction for its block size (alltoallOnNode). A scan or exscan chooses nothing: it runs the recursive doubling of scan.ts in
 * every group of the rank-ordered plan, in column segments of the reduce's segment (a fixed one
 * where that is whole; CollectivePlans.scan); `explain` prices both unsegmented.
 */

export interface Choice {
  bcast: (g: Group) => BcastAlgorithm;
  /** Each group's barrier (a barrier carries no data). */
  barrier: (g: Group) => GroupBarrierAlgorithm;
  allgather: (g: Group) => GroupAllgatherAlgorithm;
  gather: (g: Group) => GroupGatherAlgorithm;
  scatter: (g: Group) => GroupGatherAlgorithm;
  reduce: (g: Group) => ReduceAlgorithm;
  allreduce: { variant: AllreduceVariant; top: AllreduceAlgorithm };
  /** The top group's reduce-scatter (`ring` where the plan has no top group of several members). */
  reduceScatterTop: GroupReduceScatterAlgorithm;
  /**
   * Bytes per segment of each collective; 0: the whole message at once. Allgather: its gather
   * phase's column segments (of every rank's block), and its bcast phase's segments; gather and
   * scatter: column segments.
   */
  segmentBytes: { bcast: number; reduce: number; allreduce: number; allgather: number; allgatherBcast: number; gather: number; scatter: number };
}

/** What the choices depend on besides configuration and plan; the same on every rank of a node. */
export interface NodeFacts {
  /** Cores of this node (the S0 engine's readers share them). */
  cores: number;
  /** More ranks on this node than cores. */
  oversubscribed: boolean;
  /** The link between nodes is MPI (transport: mpi, or a communicator over an MPI layer). */
  mpi?: boolean;
  /**
   * Each rank's host and the CPUs it may run on (empty: unknown), known alike to every rank. A
   * group whose members outnumber their CPUs is predicted no faster than its work shared among
   * them (core-sharing.ts); without this every group is taken to have a core per member.
   */
  cpus?: readonly { machine: string; cpus: readonly number[] }[];
  /**
   * Every node's CPUs and oversubscription, known alike to every rank: a group inside a node is
   * priced with its own node's (without them, with this rank's `cores` and `oversubscribed`), so
   * ranks of nodes that differ still choose alike.
   */
  nodes?: ReadonlyMap<string, { cores: number; oversubscribed: boolean }>;
}

/** The powers of two a message size is taken in: ⌈log2 bytes⌉, 0 for 0 and 1 byte, at most MAX_SIZE_BUCKET. */
export function sizeBucket(bytes: number): number {
  return bytes <= 1 ? 0 : Math.min(MAX_SIZE_BUCKET, 32 - Math.clz32(bytes - 1));
}
/** 1 GiB: larger messages take its choice. */
export const MAX_SIZE_BUCKET = 30;

/** Segment sizes `auto` considers besides none. */
export const SEGMENT_CANDIDATES: readonly number[] = [8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576];

export const BCAST_CANDIDATES: readonly BcastAlgorithm[] = ['flat', 'binomial', { knomial: 4 }, 'scatter-allgather', 'shm'];
/**
 * `shm` (every member combines a slice through the S0 queues) stays an explicit choice only: its
 * formula is not yet fitted to the engine, and measured it lost to the trees it predicts it beats.
 */
export const REDUCE_CANDIDATES: readonly ReduceAlgorithm[] = ['flat', 'binomial', { knomial: 4 }, 'rabenseifner'];
export const ALLGATHER_CANDIDATES: readonly GroupAllgatherAlgorithm[] = ['ring', 'recursive-doubling', 'bruck', 'neighbor-exchange', 'shm'];
export const GATHER_CANDIDATES: readonly GroupGatherAlgorithm[] = ['flat', 'binomial'];
export const ALLREDUCE_TOP_CANDIDATES: readonly AllreduceAlgorithm[] = ['recursive-doubling', 'rabenseifner'];
export const REDUCE_SCATTER_TOP_CANDIDATES: readonly GroupReduceScatterAlgorithm[] = ['ring', 'recursive-halving'];

/** Every collective's candidates for `auto`. */
const CANDIDATES: Record<Collective, readonly GroupAlgorithm[]> = {
  bcast: BCAST_CANDIDATES,
  reduce: REDUCE_CANDIDATES,
  allgather: ALLGATHER_CANDIDATES,
  gather: GATHER_CANDIDATES,
  scatter: GATHER_CANDIDATES,
};

/** One candidate and its predicted µs. */
export interface Candidate {
  algorithm: string;
  us: number;
}

/** Why a collective of some size runs as it does: `comm.explain` and `topocoll groups --explain`. */
export interface Explanation {
  collective: 'bcast' | 'reduce' | 'allreduce' | 'allgather' | 'gather' | 'scatter' | 'reduce-scatter' | 'scan' | 'exscan' | 'alltoall' | 'barrier';
  bytes: number;
  /** Per level bottom-up: its largest group, link (named, and its parameters), every candidate's prediction for one segment, and the choice. */
  levels: { level: string; groupSize: number; link: string; linkParameters: LinkModel; configured: boolean; candidates: Candidate[]; chosen: string }[];
  /** Allreduce: the variant and top group's algorithm candidates, whole-call predictions. */
  allreduce?: Candidate[];
  /** Allreduce: the variant (and top group's algorithm) the call runs, named as in `allreduce`. */
  allreduceShape?: string;
  /** Alltoall: each algorithm's whole-call prediction (pairwise only where the job is one node); the placement picks one. */
  alltoall?: Candidate[];
  /** Every candidate segment's whole-call prediction (0: none). */
  segments: { bytes: number; us: number }[];
  /** Bytes per segment (reduce-scatter: its reduce phase's); 0: none. */
  segmentBytes: number;
  /** Reduce-scatter: the column segment of its phase of rank blocks (bytes of each rank's block; 0: whole blocks). */
  blockSegmentBytes?: number;
  /** The whole call's predicted µs, as chosen. */
  predictedUs: number;
}

/** Whether every member of `g` runs on one node. */
export function isNodeLocal(plan: GroupPlan, g: Group): boolean {
  const node = plan.placements[g.members[0]!]!.node;
  return g.members.every((m) => plan.placements[m]!.node === node);
}

type Collective = 'bcast' | 'reduce' | 'allgather' | 'gather' | 'scatter';

/**
 * The largest segment an exchange step between nodes may carry (Infinity: any). `apart`: in a
 * group whose members are each on a node of their own, where every exchange pairs two remote
 * peers (Infinity over TCP: such an exchange writes while it reads; a host layer's carrier must
 * buffer a segment whole). `mixed`: in a group with several members on a node, where an exchange
 * may pair a local peer with a remote one: both sides send before they receive, so the segment
 * must fit the smallest channel and what the carrier buffers. Infinity for a job on one node.
 */
export interface ExchangeLimits {
  apart: number;
  mixed: number;
}

/** One limit for every group (tests, and carriers without duplex exchanges). */
export function exchangeLimitsOf(bytes: number): ExchangeLimits {
  return { apart: bytes, mixed: bytes };
}

/** The choices of one communicator for every message size, memoised per size bucket. */
export class Selector {
  private readonly byBucket: (Choice | undefined)[] = [];
  private readonly alltoallByBucket: ('pairwise' | 'bruck' | undefined)[] = [];
  private readonly bundlesByBucket: (boolean | undefined)[] = [];
  private readonly nodeLocal = new Map<Group, boolean>();
  private readonly groupChoice = new Map<string, { algorithm: unknown; us: number; all: Candidate[] }>();
  private readonly shmBcast = new Map<number, (bytes: number) => number>();
  private readonly coresOfGroup = new Map<Group, { count: number; of: number[] | undefined; key: string }>();
  private readonly levels: { level: string; groups: Group[] }[];
  /** The levels of the rank-ordered plan (the scans'). */
  private readonly orderedLevels: { level: string; groups: Group[] }[];
  private readonly top?: Group;
  /** Some machine of the job has more ranks than CPUs (someMachineShared). */
  private readonly coresShared: boolean;

  /** `orderedPlan`: the rank-ordered plan the scans run over (`plan` where that keeps the rank order). */
  constructor(
    private readonly config: TopocollConfig,
    private readonly plan: GroupPlan,
    private readonly limits: ExchangeLimits,
    private readonly facts: NodeFacts,
    private readonly orderedPlan: GroupPlan = plan,
  ) {
    this.levels = levelsOf(plan);
    this.orderedLevels = orderedPlan === plan ? this.levels : levelsOf(orderedPlan);
    this.top = topGroup(plan);
    this.coresShared = facts.cpus !== undefined && someMachineShared(facts.cpus);
    // Every group's configured algorithm is checked here, so a misplaced shm is refused before any call.
    for (const { groups } of this.levels) {
      for (const g of groups) {
        this.configured('bcast', g);
        this.configured('reduce', g);
        this.configured('allgather', g);
        this.configured('gather', g);
        this.configured('scatter', g);
      }
    }
  }

  /** The choices for a message of `bytes` (allgather: the whole result). */
  choose(bytes: number): Choice {
    return this.chooseBucket(sizeBucket(bytes));
  }

  /** The bucket's choice object, shared by every size of the bucket (CollectivePlans keys its caches by it). */
  chooseBucket(bucket: number): Choice {
    return (this.byBucket[bucket] ??= this.decide(2 ** bucket));
  }

  isNodeLocal(g: Group): boolean {
    let v = this.nodeLocal.get(g);
    if (v === undefined) this.nodeLocal.set(g, (v = isNodeLocal(this.plan, g)));
    return v;
  }

  /** The link a group's messages take, and its name. */
  link(g: Group): { name: string; link: LinkModel } {
    const model = this.config.model;
    const own = model.levels[g.level];
    if (own !== undefined) return { name: `model.levels.${g.level}`, link: own };
    if (this.isNodeLocal(g))
      return this.nodeOf(g).oversubscribed || this.takesTurns(g)
        ? { name: 'shm (oversubscribed)', link: model.oversubscribed.shm }
        : { name: 'shm', link: model.links.shm };
    if (this.facts.mpi === true && model.links.mpi !== null) return { name: 'mpi', link: model.links.mpi };
    // Members on one host (emulated nodes) that take turns on their CPUs: the TCP link measured that way.
    if (this.takesTurns(g)) return { name: 'tcp (oversubscribed)', link: model.oversubscribed.tcp };
    return { name: 'tcp', link: model.links.tcp };
  }

  /** One level of an explanation: group `g` (the level's largest) on its link, the candidates' predictions and the choice. */
  private levelEntry(level: string, g: Group, candidates: Candidate[], chosen: string, configured = false): Explanation['levels'][number] {
    const link = this.link(g);
    return { level, groupSize: g.members.length, link: link.name, linkParameters: link.link, configured, candidates, chosen };
  }

  private costs(g: Group): LevelCosts {
    const local = this.isNodeLocal(g);
    const cores = local ? this.nodeOf(g).cores : undefined;
    return {
      link: this.link(g).link,
      combineBytesPerUs: this.config.model.combineBytesPerUs,
      shmBcastUs: cores !== undefined ? (bytes, n) => this.s0(n, cores)(bytes) : undefined,
      cores,
    };
  }

  /** The figures of the node a group inside one node is on: NodeFacts.nodes', else this rank's. */
  private nodeOf(g: Group): { cores: number; oversubscribed: boolean } {
    return this.facts.nodes?.get(this.plan.placements[g.members[0]!]!.node) ?? this.facts;
  }

  /** The S0 engine's predicted bcast among n ranks of a node of `cores` cores, with the shape the engine would take. */
  private s0(n: number, cores: number): (bytes: number) => number {
    const key = n * 65536 + cores;
    let f = this.shmBcast.get(key);
    if (f === undefined) {
      const { budgetBytes, bcast, model } = this.config.shm;
      const base = { queueBytes: bcast.queueBytes === 'auto' ? autoQueueBytes(budgetBytes, n) : bcast.queueBytes, minFragment: MIN_FRAGMENT, sets: bcast.sets };
      const shape: BcastShape = { ...base, tree: bcast.tree === 'auto' ? chooseTree(model, n, cores, base) : parseTree(bcast.tree) };
      const table = bcast.fragmentBytes === 'auto' ? fragmentTable(model, n, cores, shape) : [bcast.fragmentBytes];
      f = (bytes) => predictBcastUs(model, bytes, n, cores, shape, table[Math.min(table.length - 1, sizeBucket(bytes))]!);
      this.shmBcast.set(key, f);
    }
    return f;
  }

  private configured(collective: Collective, g: Group): GroupAlgorithm | undefined {
    const text = this.config[collective].levels[g.level];
    if (text === undefined || text === 'auto') return undefined;
    const a = parseAlgorithm(text, collective);
    if (a === 'shm' && !this.isNodeLocal(g)) {
      const others: Record<Collective, string> = {
        bcast: 'binomial, knomial:K, scatter-allgather, flat',
        reduce: 'binomial, knomial:K, rabenseifner, flat',
        allgather: 'ring, recursive-doubling, bruck, neighbor-exchange',
        gather: 'binomial, flat',
        scatter: 'binomial, flat',
      };
      throw new TopocollError('ECONFIG', `${collective}.levels.${g.level}: shm works only inside a node, and the ${g.level} group ${g.unit} spans nodes`, {
        level: g.level,
        hint: `Give ${g.level} another algorithm (${others[collective]}).`,
      });
    }
    return a;
  }

  /** Whether `shm` is a candidate in `g`: inside a node, with the S0 engine on. */
  private shmAllowed(g: Group): boolean {
    return this.isNodeLocal(g) && this.config.shm.bcast.enabled;
  }

  /** A group's algorithm for `collective` on messages (per member, for allgather, gather and scatter) of `bytes`: configured, else the argmin. */
  pick(collective: Collective, g: Group, bytes: number): { algorithm: GroupAlgorithm; us: number; all: Candidate[]; configured: boolean } {
    const n = g.members.length;
    const fixed = this.configured(collective, g);
    const costs = this.costs(g);
    const predict = (a: GroupAlgorithm): number => this.predict(collective, g, a, bytes, costs);
    if (fixed !== undefined)
      return { algorithm: fixed, us: predict(fixed), all: [{ algorithm: formatAlgorithm(fixed), us: predict(fixed) }], configured: true };
    const key = `${collective}|${g.level}|${n}|${this.isNodeLocal(g) ? 1 : 0}|${this.placement(g).key}|${bytes}`;
    let found = this.groupChoice.get(key);
    if (found === undefined) {
      const list = CANDIDATES[collective];
      const all = list.filter((a) => a !== 'shm' || this.shmAllowed(g)).map((a) => ({ a, us: predict(a), span: this.span(collective, n, a, bytes, costs) }));
      const best = argmin(all);
      found = { algorithm: best.a, us: best.us, all: all.map((c) => ({ algorithm: formatAlgorithm(c.a), us: c.us })) };
      this.groupChoice.set(key, found);
    }
    return { algorithm: found.algorithm as GroupAlgorithm, us: found.us, all: found.all, configured: false };
  }

  barrierOf(g: Group): { algorithm: GroupBarrierAlgorithm; us: number; all: Candidate[]; configured: boolean } {
    const text = this.config.barrier.levels[g.level];
    const n = g.members.length;
    const costs = this.costs(g);
    const predict = (a: GroupBarrierAlgorithm): number => this.bound('barrier', g, a, 0, costs, predictGroupBarrierUs(a, n, costs));
    if (text !== undefined && text !== 'auto') {
      const a = parseAlgorithm(text, 'barrier');
      const us = predict(a);
      return { algorithm: a, us, all: [{ algorithm: formatAlgorithm(a), us }], configured: true };
    }
    // S4's candidates and argmin (barrier-model.ts's chooseBarrier), each bounded as every group prediction is.
    const all = DEFAULT_BARRIER_CANDIDATES.map((a) => ({ a, us: predict(a), span: predictGroupBarrierUs(a, n, costs) }));
    const best = argmin(all);
    return { algorithm: best.a, us: best.us, all: all.map((c) => ({ algorithm: formatAlgorithm(c.a), us: c.us })), configured: false };
  }

  /** How many cores `g`'s members may run on (Infinity when unknown). */
  cores(g: Group): number {
    return this.placement(g).count;
  }

  /** `g`'s cores: how many, each member's when each is bound to one (core-sharing.ts's memberCores), and both as a cache key. */
  private placement(g: Group): { count: number; of: number[] | undefined; key: string } {
    let v = this.coresOfGroup.get(g);
    if (v === undefined) {
      const cpus = this.facts.cpus;
      const count = cpus === undefined ? Infinity : groupCores(g.members, cpus);
      const of = cpus === undefined || !(g.members.length > count) ? undefined : memberCores(g.members, cpus);
      this.coresOfGroup.set(g, (v = { count, of, key: `${count}:${of?.join(',') ?? ''}` }));
    }
    return v;
  }

  /** Whether `g`'s members outnumber the cores they may run on, and so take turns on them. */
  private takesTurns(g: Group): boolean {
    return g.members.length > this.cores(g);
  }

  /** A formula's `spanUs` for `g`, raised to the group's work shared among its cores, or its most loaded core's, when its members outnumber them. */
  private bound(collective: WorkCollective, g: Group, a: WorkAlgorithm, bytes: number, costs: LevelCosts, spanUs: number): number {
    const { count, of } = this.placement(g);
    return coreBoundUs(spanUs, collective, a, g.members.length, bytes, costs, count, of);
  }

  /**
   * The largest segment `g`'s exchange steps may carry (ExchangeLimits): none inside a node (its
   * exchanges interleave), `apart` when its members are each on a node of their own, else `mixed`.
   * Where some machine of the job has more ranks than CPUs (hosts sharing cores), `mixed` for
   * those too: unsegmented exchanges between its hosts measured slower there (bench/RESULTS.md,
   * "Across hosts"), which the model's pricing of stages that take turns does not see. Decided
   * from every rank's CPUs, known alike to every rank.
   */
  exchangeLimit(g: Group): number {
    if (this.isNodeLocal(g)) return Infinity;
    const nodes = new Set(g.members.map((m) => this.plan.placements[m]!.node));
    return nodes.size === g.members.length && !this.coresShared ? this.limits.apart : this.limits.mixed;
  }

  /** The largest segment the groups that exchange between nodes in `collective` with the per-group choice `of` allow (Infinity: none exchanges). */
  private exchangesBetweenNodes(of: (g: Group) => GroupAlgorithm): number {
    let cap = Infinity;
    for (const { groups } of this.levels) {
      for (const g of groups) {
        if (this.isNodeLocal(g)) continue;
        const a = of(g);
        if (a === 'scatter-allgather' || a === 'rabenseifner' || a === 'ring' || a === 'recursive-doubling' || a === 'bruck' || a === 'neighbor-exchange')
          cap = Math.min(cap, this.exchangeLimit(g));
      }
    }
    return cap;
  }

  /** Segment candidates for a message of `bytes`: 0 and those below it, capped by `limit` (the exchanges', Infinity: none). */
  private segmentCandidates(bytes: number, configured: number | 'auto', limit: number): number[] {
    const cap = (s: number): number => (Number.isFinite(limit) ? (s === 0 ? limit : Math.min(s, limit)) : s);
    if (configured !== 'auto') return [cap(configured)];
    const list = [0, ...SEGMENT_CANDIDATES.filter((s) => s < bytes)].map(cap);
    return [...new Set(list)];
  }

  /** One collective's stage times for segments of `seg` bytes (each level: its slowest group), with the algorithms picked at that size. */
  private stages(collective: 'bcast' | 'reduce', seg: number): number[] {
    return this.levels.map(({ groups }) => Math.max(...groups.map((g) => this.pick(collective, g, seg).us)));
  }

  /** Every candidate segment's whole-call prediction of a bcast or reduce of `bytes`. */
  private segmentPredictions(collective: 'bcast' | 'reduce', bytes: number, candidates: number[]): { bytes: number; us: number }[] {
    return candidates.map((s) => ({ bytes: s, us: this.pipelined(bytes, s, (piece) => this.stages(collective, piece)) }));
  }

  /** A call whose stages pipeline segments: callUs and the pipeline. */
  private pipelined(bytes: number, seg: number, stageTimes: (segBytes: number) => Stages): number {
    return this.config.model.callUs + this.pipeline(bytes, seg, stageTimes);
  }

  /** `bytes` through `stageTimes` (each stage's time for one segment) in segments of `seg` (0: the whole at once). */
  private pipeline(bytes: number, seg: number, stageTimes: (segBytes: number) => Stages): number {
    const piece = seg === 0 ? bytes : Math.min(seg, bytes);
    const count = seg === 0 ? 1 : Math.max(1, Math.ceil(bytes / seg));
    const stages = stageTimes(piece);
    const us = Array.isArray(stages) ? stages : stages.us;
    // Levels overlap only on cores of their own: a one-node job with more ranks than cores runs
    // its stages' steps one after another (every rank shares the node, so every rank agrees).
    if (this.serialStages) return count * us.reduce((t, x) => t + x, 0);
    return pipelineUs(us, count, Array.isArray(stages) ? [] : stages.pairs);
  }

  /**
   * The reduce-scatter's column segment of its phase of rank blocks, as CollectivePlans'
   * reduceScatter() takes it: the scatter's, capped by the top group's exchange limit (its ring
   * exchanges, between nodes as a rule).
   */
  private reduceScatterColumn(scatterSegment: number): number {
    const column = scatterSegment;
    const limit = this.reduceScatterExchangeLimit();
    if (!Number.isFinite(limit)) return column;
    const cap = Math.max(1, Math.floor(limit));
    return column === 0 ? cap : Math.min(column, cap);
  }

  /** The largest column segment the reduce-scatter's top group may exchange (Infinity: any). */
  reduceScatterExchangeLimit(): number {
    const top = this.split().top;
    return top === undefined ? this.limits.mixed : this.exchangeLimit(top);
  }

  /**
   * The top group's reduce-scatter of rank blocks of `block` bytes, each member keeping the
   * blocks of the ranks it covers: `reduceScatter.top` when configured (its prediction alone,
   * as a configured level's), else every candidate's prediction and the least (ties as argmin).
   */
  private reduceScatterTop(
    top: Group,
    block: number,
  ): { algorithm: GroupReduceScatterAlgorithm; us: number; all: (Candidate & { a: GroupReduceScatterAlgorithm })[]; configured: boolean } {
    const costs = this.costs(top);
    const n = top.members.length;
    const memberBytes = this.allgatherMemberBytes(top, block);
    const forced = this.config.reduceScatter.top;
    const candidates = forced === 'auto' ? REDUCE_SCATTER_TOP_CANDIDATES : [forced];
    const all = candidates.map((a) => {
      const span = predictGroupReduceScatterUs(a, n, memberBytes, costs);
      return { a, algorithm: a, span, us: this.bound('reduce-scatter', top, a, memberBytes, costs, span) };
    });
    const best = argmin(all);
    return { algorithm: best.a, us: best.us, all, configured: forced !== 'auto' };
  }

  /**
   * A reduce-scatter of `bytes` (the whole vector): its reduce phase (the lower levels' reduces
   * of the whole vector with the reduce's algorithms and segment) and then its phase of rank
   * blocks (the top group's ring, then the lower levels' scatters with the scatter's algorithms,
   * in column segments) — the second starts when the first has ended.
   */
  private reduceScatterUs(bytes: number, choice: Choice): number {
    const { lower, top } = this.split();
    const slowest = (groups: Group[], us: (g: Group) => number): number => Math.max(...groups.map(us));
    const reduce = this.pipeline(bytes, choice.segmentBytes.reduce, (q) =>
      lower.map(({ groups }) => slowest(groups, (g) => this.predict('reduce', g, choice.reduce(g), q))),
    );
    const block = Math.max(1, Math.floor(bytes / Math.max(1, this.plan.size)));
    const blocks = this.pipeline(block, this.reduceScatterColumn(choice.segmentBytes.scatter), (q) => [
      ...(top === undefined ? [] : [this.reduceScatterTop(top, q).all.find((c) => c.a === choice.reduceScatterTop)!.us]),
      ...lower.map(({ groups }) => slowest(groups, (g) => this.predict('scatter', g, choice.scatter(g), this.allgatherMemberBytes(g, q)))).reverse(),
    ]);
    return this.config.model.callUs + reduce + blocks;
  }

  /** One group's part of a scan of `bytes` on the rank-ordered plan (cost-model.ts): up, and down unless it is its leader's last group. */
  private scanGroupUs(g: Group, bytes: number): number {
    const top = this.orderedPlan.chain(g.leader).at(-1) === g;
    return predictGroupScanUs(g.members.length, bytes, this.costs(g), top);
  }

  /** A job on one oversubscribed node: its pipeline stages cannot overlap. */
  private get serialStages(): boolean {
    return this.facts.oversubscribed && this.levels.every(({ groups }) => groups.every((g) => this.isNodeLocal(g)));
  }

  /** Lower levels (below the top group's) and the top group, for allreduce and allgather's bcast phase. */
  private split(): { lower: { level: string; groups: Group[] }[]; top?: Group } {
    const top = this.top !== undefined && this.top.members.length > 1 ? this.top : undefined;
    return { lower: this.levels.filter((l) => top === undefined || l.level !== top.level), top };
  }

  /** A group's predicted time for `collective` with algorithm `a` on `bytes`. */
  private predict(collective: Collective, g: Group, a: GroupAlgorithm, bytes: number, costs = this.costs(g)): number {
    return this.bound(collective, g, a, bytes, costs, this.span(collective, g.members.length, a, bytes, costs));
  }

  /** A group algorithm's formula (cost-model.ts): its chain of dependent messages, every member running when its message arrives. */
  private span(collective: Collective, n: number, a: GroupAlgorithm, bytes: number, costs: LevelCosts): number {
    switch (collective) {
      case 'bcast':
        return predictGroupBcastUs(a as BcastAlgorithm, n, bytes, costs);
      case 'reduce':
        return predictGroupReduceUs(a as ReduceAlgorithm, n, bytes, costs);
      case 'allgather':
        return predictGroupAllgatherUs(a as GroupAllgatherAlgorithm, n, bytes, costs);
      case 'gather':
        return predictGroupGatherUs(a as GroupGatherAlgorithm, n, bytes, costs);
      case 'scatter':
        return predictGroupScatterUs(a as GroupGatherAlgorithm, n, bytes, costs);
    }
  }

  /**
   * What each member of `g` holds in an allgather's gather phase whose blocks are `block` bytes:
   * the blocks of the ranks it covers (on average over the level's groups; a gather's and a
   * scatter's members stand for as many).
   */
  private allgatherMemberBytes(g: Group, block: number): number {
    const groupsAtLevel = (this.plan.groups.get(g.level) ?? []).length || 1;
    return (block * this.plan.size) / groupsAtLevel / g.members.length;
  }

  /**
   * An allreduce's stages for segments of `seg` bytes: the lower levels' reduces and bcasts with
   * the algorithms the call will run (`reduceOf`, `bcastOf`: the bcast's and reduce's own
   * choices), the top group's allreduce between them.
   */
  private allreduceStages(
    variant: AllreduceVariant,
    top: AllreduceAlgorithm,
    seg: number,
    reduceOf: (g: Group) => ReduceAlgorithm,
    bcastOf: (g: Group) => BcastAlgorithm,
  ): PairedStages {
    const { lower, top: topGroup } = this.split();
    const level = (collective: 'bcast' | 'reduce', groups: Group[]) =>
      Math.max(...groups.map((g) => this.predict(collective, g, collective === 'bcast' ? bcastOf(g) : reduceOf(g), seg)));
    // A level's reduce (stage k) and its bcast (stage last − k) cross the same pairs.
    const paired = (levels: { groups: Group[] }[], middle: number[]): PairedStages => {
      const us = [...levels.map((l) => level('reduce', l.groups)), ...middle, ...levels.map((l) => level('bcast', l.groups)).reverse()];
      const pairs = levels.map((l, k) => ({ first: k, second: us.length - 1 - k, shared: duplexShare(this.costs(largest(l.groups)).link) }));
      return { us, pairs };
    };
    if (variant === 'reduce-bcast' || topGroup === undefined) return paired(this.levels, []);
    const topCosts = this.costs(topGroup);
    const t = this.bound('allreduce', topGroup, top, seg, topCosts, predictGroupAllreduceUs(top, topGroup.members.length, seg, topCosts));
    return paired(lower, [t]);
  }

  /** An allgather's stages for blocks of `piece` bytes per rank: the gather levels bottom-up, then the bcast of the whole result down. */
  private allgatherStages(piece: number): number[] {
    const { lower } = this.split();
    const gather = this.levels.map(({ groups }) => Math.max(...groups.map((g) => this.pick('allgather', g, this.allgatherMemberBytes(g, piece)).us)));
    const whole = piece * this.plan.size;
    const down = lower.map(({ groups }) => Math.max(...groups.map((g) => this.pick('bcast', g, whole).us))).reverse();
    return [...gather, ...down];
  }

  /** A gather's (scatter's) stages for blocks of `piece` bytes per rank: each level's slowest group, bottom-up (top-down). */
  private gatherStages(collective: 'gather' | 'scatter', piece: number): number[] {
    const stages = this.levels.map(({ groups }) => Math.max(...groups.map((g) => this.pick(collective, g, this.allgatherMemberBytes(g, piece)).us)));
    return collective === 'gather' ? stages : stages.reverse();
  }

  /** A gather's or scatter's column segment for blocks of `block` bytes: configured, else the least whole-call prediction. */
  private gatherSegment(collective: 'gather' | 'scatter', block: number): number {
    if (this.levels.length === 0) return 0;
    // Plain sends and receives: no exchange between nodes, so the eager limit does not bound the segment.
    const list = this.segmentCandidates(block, this.config[collective].segment, Infinity).map((s) => ({
      bytes: s,
      us: this.pipelined(block, s, (p) => this.gatherStages(collective, p)),
    }));
    return argmin(list).bytes;
  }

  /** The allreduce's variant and top algorithm: configured, else the least whole-call prediction at segment `seg`. */
  private allreduceShape(
    bytes: number,
    seg: number,
    reduceOf: (g: Group) => ReduceAlgorithm,
    bcastOf: (g: Group) => BcastAlgorithm,
  ): { variant: AllreduceVariant; top: AllreduceAlgorithm; all: Candidate[] } {
    const cfg = this.config.allreduce;
    const variants: AllreduceVariant[] = cfg.algorithm === 'auto' ? ['reduce-allreduce-bcast', 'reduce-bcast'] : [cfg.algorithm];
    const tops: AllreduceAlgorithm[] = cfg.top === 'auto' ? [...ALLREDUCE_TOP_CANDIDATES] : [cfg.top];
    const all: (Candidate & { variant: AllreduceVariant; top: AllreduceAlgorithm })[] = [];
    for (const variant of variants) {
      for (const top of variant === 'reduce-bcast' ? tops.slice(0, 1) : tops) {
        const us = this.pipelined(bytes, seg, (piece) => this.allreduceStages(variant, top, piece, reduceOf, bcastOf));
        all.push({ algorithm: allreduceShapeName(variant, top), us, variant, top });
      }
    }
    const best = argmin(all);
    return { variant: best.variant, top: best.top, all: all.map(({ algorithm, us }) => ({ algorithm, us })) };
  }

  /**
   * Why a `collective` of `bytes` (allgather and reduce-scatter: the whole vector, every rank's
   * block; scan: the vector each rank passes) runs as it does: per level every candidate's
   * prediction, segments, the whole call. Reduce-scatter: its levels are the reduce per lower
   * level, the top group's ring, the scatter per lower level (a commutative operator's path);
   * scan and exscan: one algorithm per level, recursive doubling.
   */
  explain(collective: Explanation['collective'], bytes: number): Explanation {
    const b = sizeBucket(bytes);
    const at = 2 ** b;
    const choice = this.chooseBucket(b);
    const describeLevels = (kind: Collective | 'barrier', segBytes: (g: Group) => number, levels = this.levels): Explanation['levels'] =>
      levels.map(({ level, groups }) => {
        const g = largest(groups);
        const r = kind === 'barrier' ? this.barrierOf(g) : this.pick(kind, g, segBytes(g));
        return this.levelEntry(level, g, r.all, formatAlgorithm(r.algorithm), r.configured);
      });
    const piece = (seg: number) => (seg === 0 ? at : Math.min(seg, at));
    if (collective === 'reduce-scatter') {
      // Commutative operators (a non-commutative one runs the ordered reduce to rank 0 and a scatter).
      const { lower, top } = this.split();
      const seg = choice.segmentBytes.reduce;
      const column = this.reduceScatterColumn(choice.segmentBytes.scatter);
      const block = Math.max(1, Math.floor(at / Math.max(1, this.plan.size)));
      const p = column === 0 ? block : Math.min(column, block);
      const phase = (kind: 'reduce' | 'scatter'): Explanation['levels'] =>
        describeLevels(kind, (g) => (kind === 'reduce' ? piece(seg) : this.allgatherMemberBytes(g, p)), lower).map((l, i) => {
          const g = largest(lower[i]!.groups);
          return { ...l, level: `${l.level} (${kind})`, chosen: formatAlgorithm(kind === 'reduce' ? choice.reduce(g) : choice.scatter(g)) };
        });
      const ring: Explanation['levels'] = [];
      if (top !== undefined) {
        const { all, configured } = this.reduceScatterTop(top, p);
        const candidates = all.map(({ algorithm, us }) => ({ algorithm, us }));
        ring.push(this.levelEntry(`${top.level} (reduce-scatter)`, top, candidates, choice.reduceScatterTop, configured));
      }
      const predictedUs = this.levels.length === 0 ? 0 : this.reduceScatterUs(at, choice);
      return {
        collective,
        bytes,
        levels: [...phase('reduce'), ...ring, ...phase('scatter')],
        segments: [],
        segmentBytes: seg,
        blockSegmentBytes: p < block ? p : 0,
        predictedUs,
      };
    }
    if (collective === 'scan' || collective === 'exscan') {
      // One algorithm per level, unsegmented; the levels add up.
      const levels = this.orderedLevels.map(({ level, groups }) => {
        const g = largest(groups);
        return this.levelEntry(level, g, [{ algorithm: 'recursive-doubling', us: this.scanGroupUs(g, at) }], 'recursive-doubling');
      });
      const steps = this.orderedLevels.reduce((t, { groups }) => t + Math.max(...groups.map((g) => this.scanGroupUs(g, at))), 0);
      const finish = this.orderedLevels.length === 0 ? 0 : scanFinishUs(collective === 'exscan', at, this.costs(largest(this.orderedLevels[0]!.groups)));
      const predictedUs = this.orderedLevels.length === 0 ? 0 : this.config.model.callUs + steps + finish;
      return { collective, bytes, levels, segments: [], segmentBytes: 0, predictedUs };
    }
    if (collective === 'barrier') {
      const levels = describeLevels('barrier', () => 0);
      const predictedUs = this.config.model.callUs + levels.reduce((t, l) => t + l.candidates.find((c) => c.algorithm === l.chosen)!.us, 0);
      return { collective, bytes, levels, segments: [], segmentBytes: 0, predictedUs };
    }
    if (collective === 'alltoall') return this.explainAlltoall(bytes, at);
    if (collective === 'bcast' || collective === 'reduce') {
      const seg = choice.segmentBytes[collective];
      const atWhole = (g: Group) => this.pick(collective, g, at).algorithm;
      const segments =
        this.levels.length === 0
          ? []
          : this.segmentPredictions(collective, at, this.segmentCandidates(at, this.config[collective].segment, this.exchangesBetweenNodes(atWhole)));
      const predictedUs = this.levels.length === 0 ? 0 : this.pipelined(at, seg, (p) => this.stages(collective, p));
      return { collective, bytes, levels: describeLevels(collective, () => piece(seg)), segments, segmentBytes: seg, predictedUs };
    }
    if (collective === 'allreduce') {
      // The lower levels run the reduce's and bcast's choices; their candidates at the allreduce's segment.
      const seg = choice.segmentBytes.allreduce;
      const shape = this.allreduceShape(at, seg, choice.reduce, choice.bcast);
      const phase = (kind: 'reduce' | 'bcast'): Explanation['levels'] =>
        describeLevels(kind, () => piece(seg)).map((l, i) => {
          const g = largest(this.levels[i]!.groups);
          return { ...l, level: `${l.level} (${kind})`, chosen: formatAlgorithm(kind === 'reduce' ? choice.reduce(g) : choice.bcast(g)) };
        });
      const predictedUs =
        this.levels.length === 0
          ? 0
          : this.pipelined(at, seg, (p) => this.allreduceStages(choice.allreduce.variant, choice.allreduce.top, p, choice.reduce, choice.bcast));
      return {
        collective,
        bytes,
        levels: [...phase('reduce'), ...phase('bcast')],
        allreduce: shape.all,
        allreduceShape: allreduceShapeName(choice.allreduce.variant, choice.allreduce.top),
        segments: [],
        segmentBytes: seg,
        predictedUs,
      };
    }
    const block = Math.max(1, Math.floor(at / Math.max(1, this.plan.size)));
    const seg = choice.segmentBytes[collective];
    const p = seg === 0 ? block : Math.min(seg, block);
    const levels = describeLevels(collective, (g) => this.allgatherMemberBytes(g, p));
    const stages = (q: number): number[] => (collective === 'allgather' ? this.allgatherStages(q) : this.gatherStages(collective, q));
    const predictedUs = this.levels.length === 0 ? 0 : this.pipelined(block, seg, stages);
    return { collective, bytes, levels, segments: [], segmentBytes: seg, predictedUs };
  }

  /**
   * On one node, how an alltoall of `blockBytes` per block runs: `alltoall.algorithm` when
   * configured, else pairwise or bruck, the least predicted (the same on every rank: the plan,
   * the configuration and the size). alltoallv always runs pairwise; several nodes hierarchical
   * (alltoallAlgorithm), whatever this answers: CollectivePlans asks only on one node.
   */
  alltoallOnNode(blockBytes: number): 'pairwise' | 'bruck' {
    const forced = this.config.alltoall.algorithm;
    if (forced !== 'auto') return forced;
    const bucket = sizeBucket(blockBytes);
    let choice = this.alltoallByBucket[bucket];
    if (choice === undefined) {
      const top = this.top;
      const at = 2 ** bucket;
      const p = this.plan.size;
      const local = top !== undefined && this.isNodeLocal(top);
      choice = local && predictBruckAlltoallUs(p, at, this.costs(top)) < predictPairwiseAlltoallUs(p, at, this.costs(top)) ? 'bruck' : 'pairwise';
      this.alltoallByBucket[bucket] = choice;
    }
    return choice;
  }

  /**
   * Across nodes, whether an alltoall of `blockBytes` per block sends its bundles as one message
   * each (alltoall.ts, "Bundles"): when the model predicts less for the whole call. alltoallv
   * never does.
   */
  alltoallBundles(blockBytes: number): boolean {
    const bucket = sizeBucket(blockBytes);
    let choice = this.bundlesByBucket[bucket];
    if (choice === undefined) {
      const at = 2 ** bucket;
      choice = this.alltoallHierarchicalUs(at, true) < this.alltoallHierarchicalUs(at, false);
      this.bundlesByBucket[bucket] = choice;
    }
    return choice;
  }

  /** The hierarchical alltoall's predicted µs without the call's own: its part on every level's largest group. */
  private alltoallHierarchicalUs(block: number, bundles: boolean): number {
    return this.levels.reduce((t, { groups }) => t + this.alltoallPartUs(largest(groups), block, bundles), 0);
  }

  private alltoallPartUs(g: Group, block: number, bundles: boolean): number {
    const covers = g.members.map((m) => coveredBelow(this.plan, m, g).length);
    const outside = this.plan.size - covers.reduce((t, x) => t + x, 0);
    const exchanges = this.isNodeLocal(g) && covers.every((x) => x === 1);
    return predictAlltoallGroupUs(covers, outside, block, this.costs(g), exchanges, bundles);
  }

  /**
   * An alltoall whose send buffer holds `at` bytes (blocks of at / size): the hierarchical form's
   * part on each level (its largest group), and the pairwise and bruck forms among every rank
   * when the job is one node, where the least of those two runs (alltoallOnNode); across nodes
   * the placement picks (alltoallAlgorithm). Never segmented.
   */
  private explainAlltoall(bytes: number, at: number): Explanation {
    const p = this.plan.size;
    const block = Math.max(1, Math.floor(at / Math.max(1, p)));
    const placed = alltoallAlgorithm(this.plan);
    const bundles = placed === 'hierarchical' && this.alltoallBundles(block);
    const hierarchical = bundles ? 'hierarchical (bundles)' : 'hierarchical';
    const chosen = placed === 'pairwise' ? this.alltoallOnNode(block) : hierarchical;
    // Each level shows the form the call runs (the whole call decides bundles, not each level).
    const levels: Explanation['levels'] = this.levels.map(({ level, groups }) => {
      const g = largest(groups);
      return this.levelEntry(level, g, [{ algorithm: hierarchical, us: this.alltoallPartUs(g, block, bundles) }], hierarchical);
    });
    const callUs = this.config.model.callUs;
    const candidates: Candidate[] = [];
    const top = this.top;
    // A configured one-node form is that form's prediction alone (as a configured level's).
    const forced = this.config.alltoall.algorithm;
    const onNodeForms = forced === 'auto' ? (['pairwise', 'bruck'] as const) : [forced];
    if (top !== undefined && this.isNodeLocal(top)) {
      for (const form of onNodeForms) {
        const us = form === 'pairwise' ? predictPairwiseAlltoallUs(p, block, this.costs(top)) : predictBruckAlltoallUs(p, block, this.costs(top));
        candidates.push({ algorithm: form, us: callUs + us });
      }
    }
    candidates.push({ algorithm: 'hierarchical', us: callUs + this.alltoallHierarchicalUs(block, false) });
    if (placed === 'hierarchical') candidates.push({ algorithm: 'hierarchical (bundles)', us: callUs + this.alltoallHierarchicalUs(block, true) });
    const predictedUs = p === 1 ? 0 : (candidates.find((c) => c.algorithm === chosen)?.us ?? candidates[candidates.length - 1]!.us);
    if (placed === 'pairwise' && top !== undefined) {
      const onNode = candidates.slice(0, onNodeForms.length).map((c) => ({ algorithm: c.algorithm, us: c.us - callUs }));
      return {
        collective: 'alltoall',
        bytes,
        // Pairwise and Bruck run among all p ranks of the node, whatever groups are below the top.
        levels: [{ ...this.levelEntry(top.level, top, onNode, chosen, forced !== 'auto'), groupSize: p }],
        alltoall: candidates,
        segments: [],
        segmentBytes: 0,
        predictedUs,
      };
    }
    return { collective: 'alltoall', bytes, levels, alltoall: candidates, segments: [], segmentBytes: 0, predictedUs };
  }

  private decide(bytes: number): Choice {
    const { config } = this;
    // Bcast and reduce: the segment with the least whole-call prediction, the groups' algorithms picked at that segment.
    const segmentOf = (collective: 'bcast' | 'reduce'): number => {
      const atWhole = (g: Group) => this.pick(collective, g, bytes).algorithm;
      const candidates = this.segmentCandidates(bytes, config[collective].segment, this.exchangesBetweenNodes(atWhole));
      return argmin(this.segmentPredictions(collective, bytes, candidates)).bytes;
    };
    const bcastSegment = this.levels.length === 0 ? 0 : segmentOf('bcast');
    const reduceSegment = this.levels.length === 0 ? 0 : segmentOf('reduce');
    const piece = (seg: number) => (seg === 0 ? bytes : Math.min(seg, bytes));
    const bcast = (g: Group) => this.pick('bcast', g, piece(bcastSegment)).algorithm as BcastAlgorithm;
    const reduce = (g: Group) => this.pick('reduce', g, piece(reduceSegment)).algorithm as ReduceAlgorithm;

    // Allreduce: segment, variant and top together, over the bcast and reduce algorithms above.
    const top = this.split().top;
    const allreduceExchanges = Math.min(
      this.exchangesBetweenNodes(bcast),
      this.exchangesBetweenNodes(reduce),
      top !== undefined && !this.isNodeLocal(top) ? this.exchangeLimit(top) : Infinity,
    );
    const allreduce =
      this.levels.length > 0
        ? argmin(
            this.segmentCandidates(bytes, config.allreduce.segment, allreduceExchanges).map((seg) => {
              const shape = this.allreduceShape(bytes, seg, reduce, bcast);
              return {
                variant: shape.variant,
                top: shape.top,
                seg,
                us: this.pipelined(bytes, seg, (p) => this.allreduceStages(shape.variant, shape.top, p, reduce, bcast)),
              };
            }),
          )
        : {
            variant: config.allreduce.algorithm === 'auto' ? ('reduce-allreduce-bcast' as const) : config.allreduce.algorithm,
            top: config.allreduce.top === 'auto' ? ('recursive-doubling' as const) : config.allreduce.top,
            seg: 0,
          };

    // Allgather of `bytes` in all: blocks of bytes / size per rank; its column segments cut every block.
    const block = Math.max(1, Math.floor(bytes / Math.max(1, this.plan.size)));
    const allgatherAt = (g: Group, seg: number) =>
      this.pick('allgather', g, this.allgatherMemberBytes(g, seg === 0 ? block : Math.min(seg, block))).algorithm as GroupAllgatherAlgorithm;
    let allgatherSegment = 0;
    if (this.levels.length > 0) {
      let limit = Infinity;
      for (const { groups } of this.levels) for (const g of groups) if (allgatherAt(g, 0) !== 'shm') limit = Math.min(limit, this.exchangeLimit(g));
      const list = this.segmentCandidates(block, config.allgather.segment, limit).map((s) => ({
        bytes: s,
        us: this.pipelined(block, s, (p) => this.allgatherStages(p)),
      }));
      allgatherSegment = argmin(list).bytes;
    }
    // The bcast phase carries the whole result, `bytes`: the bcast's own segment for that size.
    const allgatherBcastSegment = bcastSegment;
    // Gather and scatter of `bytes` in all, as allgather: blocks of bytes / size per rank.
    const gatherSegment = this.gatherSegment('gather', block);
    const scatterSegment = this.gatherSegment('scatter', block);
    const gatherAt = (collective: 'gather' | 'scatter', g: Group, seg: number) =>
      this.pick(collective, g, this.allgatherMemberBytes(g, seg === 0 ? block : Math.min(seg, block))).algorithm as GroupGatherAlgorithm;
    // Reduce-scatter: the top group's algorithm on the block phase's columns (the scatter's segment, capped by the eager limit).
    const topGroup = this.split().top;
    const column = this.reduceScatterColumn(scatterSegment);
    const reduceScatterTop = topGroup === undefined ? 'ring' : this.reduceScatterTop(topGroup, column === 0 ? block : Math.min(column, block)).algorithm;

    return {
      bcast,
      reduce,
      barrier: (g) => this.barrierOf(g).algorithm,
      allgather: (g) => allgatherAt(g, allgatherSegment),
      gather: (g) => gatherAt('gather', g, gatherSegment),
      scatter: (g) => gatherAt('scatter', g, scatterSegment),
      allreduce: { variant: allreduce.variant, top: allreduce.top },
      reduceScatterTop,
      segmentBytes: {
        bcast: bcastSegment,
        reduce: reduceSegment,
        allreduce: allreduce.seg,
        allgather: allgatherSegment,
        allgatherBcast: allgatherBcastSegment,
        gather: gatherSegment,
        scatter: scatterSegment,
      },
    };
  }
}

/** An allreduce variant with its top group's algorithm, as `explain` names it. */
function allreduceShapeName(variant: AllreduceVariant, top: AllreduceAlgorithm): string {
  return variant === 'reduce-bcast' ? 'reduce-bcast' : `reduce-allreduce-bcast, top ${top}`;
}

/**
 * The entry with the least `us`. Ties (within a relative 1e-9, so rounding cannot decide) go to
 * the least `span` where the entries carry one — candidates held to the same work bound by cores
 * they share: the shorter chain of dependent messages leaves the cores less idle time (Brent's
 * upper bound, work / cores + span) — then to the one listed first.
 */
function argmin<T extends { us: number; span?: number }>(list: readonly T[]): T {
  const close = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
  let best = list[0]!;
  for (const c of list) {
    if (c.us < best.us && !close(c.us, best.us)) best = c;
    else if (close(c.us, best.us) && c.span !== undefined && best.span !== undefined && c.span < best.span && !close(c.span, best.span)) best = c;
  }
  return best;
}

/** A plan's levels bottom-up, each with its groups of more than one member; levels without such groups left out. */
function levelsOf(plan: GroupPlan): { level: string; groups: Group[] }[] {
  return plan.levels
    .map((level) => ({ level: level, groups: (plan.groups.get(level) ?? []).filter((g) => g.members.length > 1) }))
    .filter((l) => l.groups.length > 0);
}

/** The group with the most members (the first of those). */
function largest(groups: readonly Group[]): Group {
  return groups.reduce((a, x) => (x.members.length > a.members.length ? x : a));
}

/** A run of message sizes with one algorithm. */
export interface SizeRun {
  /** The largest size of the run, bytes; null: no bound. */
  upToBytes: number | null;
  algorithm: string;
}

/**
 * What `pick` names for every size bucket, as runs: each entry holds from the previous entry's
 * `upToBytes` (exclusive) to its own (inclusive; the last: every larger size).
 */
export function sizeRuns(selector: Selector, pick: (c: Choice) => string): SizeRun[] {
  const out: SizeRun[] = [];
  for (let b = 0; b <= MAX_SIZE_BUCKET; b++) {
    const algorithm = pick(selector.chooseBucket(b));
    const last = out[out.length - 1];
    if (last !== undefined && last.algorithm === algorithm) last.upToBytes = 2 ** b;
    else out.push({ upToBytes: 2 ** b, algorithm });
  }
  out[out.length - 1]!.upToBytes = null;
  return out;
}

/** Most ranks for which `allreduce.shm: true` has every rank combine: each reads every deposit. */
export const EVERY_RANK_COMBINES_MAX_RANKS = 8;

/**
 * The one-node shared allreduce's protocol for `allreduce.shm`: every rank combining costs one
 * cache-line transfer from each peer, all at once, but each rank must run to combine — with more
 * ranks than cores each such wait is a context switch, and the last to arrive combining for all
 * is cheaper (native/src/shm/shm_allreduce.h).
 */
export function shmAllreduceProtocol(
  setting: boolean | 'every-rank' | 'last-arrival',
  ranks: number,
  oversubscribed: boolean,
): false | 'every-rank' | 'last-arrival' {
  if (setting !== true) return setting;
  return !oversubscribed && ranks <= EVERY_RANK_COMBINES_MAX_RANKS ? 'every-rank' : 'last-arrival';
}
