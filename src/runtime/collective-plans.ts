import { alltoallAlgorithm, alltoallSchedule, type AlltoallAlgorithm } from '../algorithms/alltoall.js';
import { SHARED_AREA_MAX_BYTES } from '../abi.generated.js';
import { formatAlgorithm } from '../algorithms/algorithm-choice.js';
import {
  allgatherSchedules,
  barrierSchedules,
  coveredBelow,
  gatherSchedule,
  preservesRankOrder,
  reduceSchedule,
  reduceScatterSchedules,
  scatterSchedule,
  ScheduleCache,
  type ScheduleCacheOptions,
} from '../algorithms/hierarchical.js';
import {
  MAX_SIZE_BUCKET,
  Selector,
  shmAllreduceProtocol,
  sizeBucket,
  sizeRuns,
  type Choice,
  type ExchangeLimits,
  type Explanation,
  type SizeRun,
} from '../algorithms/selection.js';
import type { TopocollConfig } from '../config/schema.js';
import { oneSidedBcastSchedule } from '../algorithms/one-sided-bcast.js';
import { scanSchedule } from '../algorithms/scan.js';
import { encodeSchedule, StepKind } from '../algorithms/schedule.js';
import { allLevelNames, isHardwareLevel } from '../groups/levels.js';
import { planGroups, type Group, type GroupPlan, type PlanOptions } from '../groups/plan.js';
import type { RankPlacement } from '../topology/types.js';
import type { NodeFigures } from './co-runners.js';

/**
 * One communicator's plans: the rank-ordered plan for non-commutative reductions, and per call
 * the native schedule ids of the algorithms algorithms/selection.ts chose for the message's size,
 * registered on first use.
 */

/**
 * The plan non-commutative reductions run on: `plan` itself when its groups keep the ranks in
 * order (every group covers consecutive ranks), else the same job with fewer levels — first
 * without the levels inside a node, then also without the switch levels, then the world group
 * alone — the first that keeps rank order. (World alone always does.)
 */
export function rankOrderedPlan(plan: GroupPlan, placements: readonly RankPlacement[], options: PlanOptions): GroupPlan {
  if (preservesRankOrder(plan)) return plan;
  // Every level that could exist, not only the plan's: a level left out because another had
  // the same groups would otherwise come back in its place.
  const all = allLevelNames(options.network?.levels ?? 0);
  const attempts: ((level: string) => boolean)[] = [isHardwareLevel, (l) => isHardwareLevel(l) || l.startsWith('switch'), (l) => l !== 'world'];
  for (const drop of attempts) {
    const candidate = planGroups(placements, { ...options, disabled: [...new Set([...(options.disabled ?? []), ...all.filter(drop)])] });
    if (preservesRankOrder(candidate)) return candidate;
  }
  return planGroups(placements, { ...options, disabled: all.filter((l) => l !== 'world') });
}

/**
 * Largest allreduce (and one-way bcast and reduce) the node-wide shared area takes
 * (abi/abi.yaml's sharedArea.maxBytes, ShmAllreduce::kMaxBytes). A constant rather than read
 * from the addon, so that planning without the addon (topocoll groups) still works.
 */
export const SHM_ALLREDUCE_MAX_BYTES = SHARED_AREA_MAX_BYTES;

/** The alltoall's forms, in the order its schedule keys number them. */
const ALLTOALL_FORMS: readonly AlltoallAlgorithm[] = ['pairwise', 'bruck', 'hierarchical'];

/** The collectives that run whole through the area (ShmAreaCall) beside the one-way calls; `scan` stands for exscan too. */
export type AreaCollective = 'gather' | 'scatter' | 'reduceScatter' | 'alltoall' | 'scan';

/** Native schedule ids of an allgather and its two phases' segments in elements (0: whole). */
export interface AllgatherCallPlan {
  gather: number;
  bcast: number;
  segment: number;
  bcastSegment: number;
  /** The window allgather (windowAllgather()): its calls carry their own plan-hash tag. */
  windowed?: boolean;
}

/** The schedule ids of a call that is one node-wide step: its first phase's, and its (empty) bcast phase's. */
interface NodeWideIds {
  first: number;
  bcast: number;
}

/** Native schedule ids of one call, and its segment in elements (0: whole). */
export interface CallPlan {
  reduce: number;
  bcast: number;
  segment: number;
}

export interface CollectivePlansParts {
  plan: GroupPlan;
  /** `rankOrderedPlan(plan, …)`: where non-commutative reductions run. */
  orderedPlan: GroupPlan;
  rank: number;
  config: TopocollConfig;
  /** Groups registered with the shared-memory engine, with their ids. */
  shmGroups: ReadonlyMap<Group, number>;
  /** Largest segments of exchanges between nodes (job-planner.ts, exchangeLimits). */
  exchangeLimits: ExchangeLimits;
  /** More ranks on this node than cores (the same on every rank of the node). */
  oversubscribed: boolean;
  /** Cores of this node (the same on every rank of the node). */
  cores: number;
  /** Each rank's host and allowed CPUs (the Selector's NodeFacts.cpus). */
  cpus?: readonly { machine: string; cpus: readonly number[] }[];
  /** Every node's CPUs and oversubscription (the Selector's NodeFacts.nodes). */
  nodes?: ReadonlyMap<string, NodeFigures>;
  /** Hands a schedule to the native engine; returns the id it is known by there. */
  register: (encoded: Int32Array) => number;
}

/** The schedules and ids of one distinct choice (several size buckets may share one). */
interface ChoiceSchedules {
  choice: Choice;
  cache: ScheduleCache;
  /** Native schedule ids by key (see id()); an array, not a Map: read on every call. */
  ids: number[];
  allgather?: { gather: number; bcast: number };
  /** Gather and scatter schedule ids, by root. */
  gather: number[];
  scatter: number[];
}

/**
 * One communicator's schedules: per distinct choice of the Selector (sizes in powers of two) a
 * ScheduleCache with that choice's algorithms, registered with the engine on first use and found
 * again in O(1) (no allocation) per call.
 */
export class CollectivePlans {
  readonly selector: Selector;
  /** Per size bucket, the index in `schedules` of its choice; −1 until first used. */
  private readonly bucketIndex = new Int32Array(MAX_SIZE_BUCKET + 1).fill(-1);
  private readonly schedules: ChoiceSchedules[] = [];
  /** Index in `schedules` by the choice's content, so that equal choices share their schedules. */
  private readonly bySignature = new Map<string, number>();
  /** Non-commutative reductions when `plan` mixes the rank order: binomial trees over `orderedPlan`. */
  private readonly ordered?: ScheduleCache;
  /**
   * Small allreduces go through the node-wide shared area (one node, `allreduce.shm`), with
   * this protocol; false: they do not.
   */
  readonly shmAllreduce: false | 'every-rank' | 'last-arrival';
  /** Its two native schedule ids (the ShmAllreduce step, and an empty bcast phase), once registered. */
  private shmAllreduceIds?: NodeWideIds;
  /** The window allreduce's meetings (one node; false: the job spans nodes), and its schedule ids. */
  private readonly windowMeetings: false | 'every-rank' | 'last-arrival';
  private windowAllreduceIds?: NodeWideIds;

  /**
   * Largest block the one-node shared area takes with the every-rank protocol
   * (routing.sharedArea.everyRankAllgatherMaxBytes). Each round of it has every rank copy its
   * column in, wait for all and copy the others' out; while every rank has a core, larger blocks
   * move faster through the channel schedules, whose sends and receives overlap piece by piece.
   * With the last-arrival protocol (more ranks than cores) the area takes every size: a round
   * costs each rank one turn on its core, where every step of a schedule costs a context switch.
   */
  private readonly everyRankAllgatherMaxBytes: number;
  /** The window allreduce and allgather run here (one node; windowAllreduce, windowAllgather). */
  readonly windowAlgorithms: boolean;

  constructor(private readonly parts: CollectivePlansParts) {
    const { plan, config, exchangeLimits } = parts;
    this.everyRankAllgatherMaxBytes = config.routing.sharedArea.everyRankAllgatherMaxBytes;
    this.selector = new Selector(
      config,
      plan,
      exchangeLimits,
      { cores: parts.cores, oversubscribed: parts.oversubscribed, cpus: parts.cpus, nodes: parts.nodes },
      parts.orderedPlan,
    );
    if (parts.orderedPlan !== plan) this.ordered = new ScheduleCache(parts.orderedPlan, parts.rank, { variant: 'reduce-bcast' });
    const node = plan.placements[0]?.node;
    const oneNode = plan.placements.length > 1 && plan.placements.every((p) => p.node === node);
    this.shmAllreduce = oneNode ? shmAllreduceProtocol(config.allreduce.shm, plan.placements.length, parts.oversubscribed) : false;
    this.windowMeetings = oneNode ? shmAllreduceProtocol(true, plan.placements.length, parts.oversubscribed) : false;
    this.windowAlgorithms = this.windowMeetings !== false;
    const allgatherLevels = Object.values(config.allgather.levels).some((a) => a !== 'auto');
    this.shmAllgather = oneNode && !allgatherLevels ? shmAllreduceProtocol(config.allgather.shm, plan.placements.length, parts.oversubscribed) : false;
    const barrierLevels = Object.values(config.barrier.levels).some((a) => a !== 'auto');
    this.shmBarrier = barrierLevels ? false : this.shmAllreduce;
    // The one-way calls only beside the every-rank protocol (by default: while ranks have a core
    // each): with more ranks than cores a bcast root that runs ahead of its readers (the S0
    // queue's) saves context switches, where the area's root waits for every rank's previous call.
    const oneWay = this.shmAllreduce === 'every-rank';
    const configured = (levels: Record<string, string>): boolean => Object.values(levels).some((a) => a !== 'auto');
    this.shmBcast = oneWay && config.bcast.shm && !configured(config.bcast.levels);
    this.shmReduce = oneWay && config.reduce.shm && !configured(config.reduce.levels);
    // The rest go through the area beside the one-way calls too, unless an algorithm of theirs
    // is configured (reduce-scatter runs the reduce's and the scatter's levels below its top).
    this.areaCalls = {
      gather: oneWay && !configured(config.gather.levels),
      scatter: oneWay && !configured(config.scatter.levels),
      reduceScatter: oneWay && config.reduceScatter.top === 'auto' && !configured(config.reduce.levels) && !configured(config.scatter.levels),
      alltoall: oneWay && config.alltoall.algorithm === 'auto',
      scan: oneWay,
    };
  }

  /** The schedules of the choice for a message of `bytes`. */
  private of(bytes: number): ChoiceSchedules {
    const bucket = sizeBucket(bytes);
    const i = this.bucketIndex[bucket]!;
    return i >= 0 ? this.schedules[i]! : this.resolve(bucket);
  }

  private resolve(bucket: number): ChoiceSchedules {
    const choice = this.selector.chooseBucket(bucket);
    const groups = [...this.parts.plan.groups.values()].flat();
    const signature = JSON.stringify([
      groups.map((g) => [choice.bcast(g), choice.reduce(g), choice.allgather(g), choice.gather(g), choice.scatter(g)]),
      choice.allreduce,
      choice.reduceScatterTop,
      choice.segmentBytes,
    ]);
    let i = this.bySignature.get(signature);
    if (i === undefined) {
      const options: ScheduleCacheOptions = {
        shmGroup: (g) => this.parts.shmGroups.get(g),
        bcastAlgorithm: choice.bcast,
        reduceAlgorithm: choice.reduce,
        variant: choice.allreduce.variant,
        top: choice.allreduce.top,
      };
      i = this.schedules.length;
      this.schedules.push({ choice, cache: new ScheduleCache(this.parts.plan, this.parts.rank, options), ids: [], gather: [], scatter: [] });
      this.bySignature.set(signature, i);
    }
    this.bucketIndex[bucket] = i;
    return this.schedules[i]!;
  }

  /** Why a `collective` of `bytes` runs as it does (the cost model's predictions). */
  explain(collective: Explanation['collective'], bytes: number): Explanation {
    return this.selector.explain(collective, bytes);
  }

  /** Small bcasts go through the node-wide shared area, one way (ShmAreaBcast). */
  readonly shmBcast: boolean;
  /** Small reduces go through the node-wide shared area, one way (ShmAreaReduce). */
  readonly shmReduce: boolean;
  /** Native ids of the one-way schedules, by root · 2 + (0 bcast, 1 reduce), once registered. */
  private readonly areaIds: number[] = [];

  /** The native id of the one-way area step of a bcast (kind ShmAreaBcast) or reduce (ShmAreaReduce) to or from `root`. */
  private areaId(kind: typeof StepKind.ShmAreaBcast | typeof StepKind.ShmAreaReduce, root: number): number {
    const key = root * 2 + (kind === StepKind.ShmAreaBcast ? 0 : 1);
    let id = this.areaIds[key];
    if (id === undefined) {
      const collective = kind === StepKind.ShmAreaBcast ? 'bcast' : 'reduce';
      id = this.parts.register(encodeSchedule({ collective, root, steps: [{ kind, peer: root, level: 0 }] }));
      this.areaIds[key] = id;
    }
    return id;
  }

  /**
   * Which of the other collectives go through the node-wide shared area whole (ShmAreaCall; one
   * node, ranks with a core each) when the whole call holds at most SHM_ALLREDUCE_MAX_BYTES:
   * alltoall with equal blocks only (alltoallv's readers cannot know where their block lies).
   */
  readonly areaCalls: Readonly<Record<AreaCollective, boolean>>;
  /** Native ids of the ShmAreaCall schedules, by collective then root, once registered; and the empty phase beside them. */
  private readonly areaCallIds = new Map<AreaCollective, number[]>();
  private emptyPhaseId?: number;

  /** The native id of the ShmAreaCall schedule of `collective` at `root` (0 for the unrooted ones). */
  private areaCallId(collective: AreaCollective, root: number): number {
    let ids = this.areaCallIds.get(collective);
    if (ids === undefined) this.areaCallIds.set(collective, (ids = []));
    let id = ids[root];
    if (id === undefined) {
      const kind = collective === 'reduceScatter' ? 'gather' : collective;
      id = this.parts.register(encodeSchedule({ collective: kind, root, steps: [{ kind: StepKind.ShmAreaCall, peer: root, level: 0 }] }));
      ids[root] = id;
    }
    return id;
  }

  /** Fills `call` with the ShmAreaCall of `collective` at `root` (the empty phase as the second). */
  private areaCall(call: AllgatherCallPlan, collective: AreaCollective, root: number): AllgatherCallPlan {
    this.emptyPhaseId ??= this.parts.register(encodeSchedule({ collective: 'bcast', root: 0, steps: [] }));
    call.gather = this.areaCallId(collective, root);
    call.bcast = this.emptyPhaseId;
    call.segment = 0;
    call.bcastSegment = 0;
    return call;
  }

  // The methods below fill and return this one object: calls allocate nothing.
  private readonly call: CallPlan = { reduce: -1, bcast: -1, segment: 0 };

  bcast(root: number, bytes: number, elem: number): CallPlan {
    if (this.areaBcast(bytes)) {
      this.call.reduce = -1;
      this.call.bcast = this.areaId(StepKind.ShmAreaBcast, root);
      this.call.segment = 0;
      return this.call;
    }
    const c = this.of(bytes);
    this.call.reduce = -1;
    this.call.bcast = this.id(c, 0, root, true);
    this.call.segment = segment(c, 'bcast', elem);
    return this.call;
  }

  /** Native ids of S1's one-sided bcast schedules, by root, once registered. */
  private readonly oneSidedIds: number[] = [];

  /** S1's one-sided bcast from `root` (bcast.algorithm `one-sided`): one schedule per root, never segmented. */
  oneSidedBcast(root: number): CallPlan {
    let id = this.oneSidedIds[root];
    if (id === undefined) {
      const { plan, rank, config } = this.parts;
      id = this.parts.register(encodeSchedule(oneSidedBcastSchedule(plan.placements.length, root, rank, config.bcast.pollMicros)));
      this.oneSidedIds[root] = id;
    }
    this.call.reduce = -1;
    this.call.bcast = id;
    this.call.segment = 0;
    return this.call;
  }

  reduce(root: number, bytes: number, elem: number, commutative: boolean): CallPlan {
    if (this.areaReduce(bytes)) {
      // Rank order, as the every-rank allreduce: right for every operator.
      this.call.reduce = this.areaId(StepKind.ShmAreaReduce, root);
      this.call.bcast = -1;
      this.call.segment = 0;
      return this.call;
    }
    const c = this.of(bytes);
    this.call.reduce = this.id(c, 1, root, commutative);
    this.call.bcast = -1;
    this.call.segment = segment(c, 'reduce', elem);
    return this.call;
  }

  /**
   * The allreduce of buffers in shared windows (ShmWindowAllreduce: single copy, built-in
   * operators), for a job on one node; undefined when the job spans nodes.
   */
  windowAllreduce(): CallPlan | undefined {
    if (this.windowMeetings === false) return undefined;
    this.windowAllreduceIds ??= this.registerNodeWide('reduce', StepKind.ShmWindowAllreduce, this.windowMeetings);
    return this.nodeWideCall(this.windowAllreduceIds);
  }

  private readonly windowAllgatherCall: AllgatherCallPlan = { gather: -1, bcast: -1, segment: 0, bcastSegment: 0, windowed: true };
  private windowAllgatherIds?: NodeWideIds;
  /**
   * The window allgather (one ShmWindowAllgather step, nothing in the bcast phase), on one node
   * only: undefined when the job spans nodes.
   */
  windowAllgather(): AllgatherCallPlan | undefined {
    if (this.windowMeetings === false) return undefined;
    this.windowAllgatherIds ??= this.registerNodeWide('allgather', StepKind.ShmWindowAllgather, this.windowMeetings);
    this.windowAllgatherCall.gather = this.windowAllgatherIds.first;
    this.windowAllgatherCall.bcast = this.windowAllgatherIds.bcast;
    return this.windowAllgatherCall;
  }

  /**
   * Registers a call that is one node-wide `kind` step in its first phase (an allreduce's reduce
   * phase, an allgather's gather phase) and nothing in the bcast phase; `protocol` picks its area
   * protocol. Returns the two schedule ids.
   */
  private registerNodeWide(
    collective: 'reduce' | 'allgather',
    kind: typeof StepKind.ShmAllreduce | typeof StepKind.ShmWindowAllreduce | typeof StepKind.ShmAllgather | typeof StepKind.ShmWindowAllgather,
    protocol: 'every-rank' | 'last-arrival',
  ): NodeWideIds {
    const everyRankCombines = protocol === 'every-rank';
    return {
      first: this.parts.register(encodeSchedule({ collective, root: 0, steps: [{ kind, peer: -1, level: 0, everyRankCombines }] })),
      bcast: this.parts.register(encodeSchedule({ collective: 'bcast', root: 0, steps: [] })),
    };
  }

  private nodeWideCall(ids: NodeWideIds): CallPlan {
    this.call.reduce = ids.first;
    this.call.bcast = ids.bcast;
    this.call.segment = 0;
    return this.call;
  }

  allreduce(bytes: number, elem: number, commutative: boolean): CallPlan {
    if (this.areaAllreduce(bytes)) {
      // Rank order, and the same computation wherever it runs: right for every operator,
      // commutative or not, with the same bits on every rank.
      this.shmAllreduceIds ??= this.registerNodeWide('reduce', StepKind.ShmAllreduce, this.shmAllreduce);
      return this.nodeWideCall(this.shmAllreduceIds);
    }
    const c = this.of(bytes);
    this.call.reduce = this.id(c, 2, 0, commutative);
    this.call.bcast = this.id(c, 3, 0, commutative);
    this.call.segment = segment(c, 'allreduce', elem);
    return this.call;
  }

  private readonly allgatherCall: AllgatherCallPlan = { gather: -1, bcast: -1, segment: 0, bcastSegment: 0 };
  /**
   * Allgathers go through the node-wide shared area (one node, `allgather.shm`, no allgather
   * levels configured) with this protocol — every-rank: blocks up to
   * everyRankAllgatherMaxBytes; last-arrival: every size; false: they do not.
   */
  readonly shmAllgather: false | 'every-rank' | 'last-arrival';
  /** Its two native schedule ids (the ShmAllgather step, and an empty bcast phase), once registered. */
  private shmAllgatherIds?: NodeWideIds;

  private barrierIds?: { arrive: number; release: number };
  /** Barriers go through the node-wide shared area with this protocol (as small allreduces, unless barrier levels are configured); false: they do not. */
  readonly shmBarrier: false | 'every-rank' | 'last-arrival';

  /**
   * A barrier: through the node-wide shared area in a one-node job that uses it for small
   * allreduces (unless barrier levels are configured), else every level's barrier algorithm
   * (barrierSchedules: arrive bottom-up, release top-down) as the two phases.
   */
  barrier(): CallPlan {
    if (this.shmBarrier) return this.allreduce(0, 1, true);
    this.barrierIds ??= (() => {
      const s = barrierSchedules(this.parts.plan, this.parts.rank, { barrierAlgorithm: this.of(0).choice.barrier });
      return { arrive: this.parts.register(encodeSchedule(s.arrive)), release: this.parts.register(encodeSchedule(s.release)) };
    })();
    this.call.reduce = this.barrierIds.arrive;
    this.call.bcast = this.barrierIds.release;
    this.call.segment = 0;
    return this.call;
  }

  /** An allgather whose result holds `bytes` in all, of which `largestBlock` bytes from one rank at most. */
  allgather(bytes: number, elem: number, largestBlock: number): AllgatherCallPlan {
    const call = this.allgatherCall;
    if (this.areaAllgather(largestBlock)) {
      // Every block in one step, so one column segment; nothing left to send down.
      this.shmAllgatherIds ??= this.registerNodeWide('allgather', StepKind.ShmAllgather, this.shmAllgather);
      call.gather = this.shmAllgatherIds.first;
      call.bcast = this.shmAllgatherIds.bcast;
      call.segment = 0;
      call.bcastSegment = 0;
      return call;
    }
    const c = this.of(bytes);
    if (c.allgather === undefined) {
      const s = allgatherSchedules(this.parts.plan, this.parts.rank, {
        shmGroup: (g) => this.parts.shmGroups.get(g),
        bcastAlgorithm: c.choice.bcast,
        allgatherAlgorithm: c.choice.allgather,
      });
      c.allgather = { gather: this.parts.register(encodeSchedule(s.gather)), bcast: this.parts.register(encodeSchedule(s.bcast)) };
    }
    call.gather = c.allgather.gather;
    call.bcast = c.allgather.bcast;
    call.segment = segment(c, 'allgather', elem);
    call.bcastSegment = segment(c, 'allgatherBcast', elem);
    return call;
  }

  private readonly rootedCall: AllgatherCallPlan = { gather: -1, bcast: -1, segment: 0, bcastSegment: 0 };

  /**
   * A gather to `root` (`collective` gather) or a scatter from it, of `bytes` in all (every
   * rank's block): the one phase's schedule id (in `gather`; `bcast` −1) and its column segment
   * in elements.
   */
  rooted(collective: 'gather' | 'scatter', root: number, bytes: number, elem: number): AllgatherCallPlan {
    if (this.areaTakes(collective, bytes)) return this.areaCall(this.rootedCall, collective, root);
    const c = this.of(bytes);
    const ids = c[collective];
    let id = ids[root];
    if (id === undefined) {
      const build = collective === 'gather' ? gatherSchedule : scatterSchedule;
      const algorithm = collective === 'gather' ? c.choice.gather : c.choice.scatter;
      id = this.parts.register(encodeSchedule(build(this.parts.plan, this.parts.rank, root, { gatherAlgorithm: algorithm })));
      ids[root] = id;
    }
    const call = this.rootedCall;
    call.gather = id;
    call.bcast = -1;
    call.segment = segment(c, collective, elem);
    call.bcastSegment = 0;
    return call;
  }

  /** The scan's schedule id (scan and exscan share it; it does not depend on the size). */
  private scanId?: number;

  /**
   * A scan or an exscan of `bytes` per rank: the hierarchical scan over the rank-ordered plan
   * (scan.ts), one phase on B's slots in column segments (every segment of the vector runs the
   * whole schedule; successive segments pipeline through its rounds, and each round's operands
   * stay in cache): the reduce's segment, or `routing.scan.segmentBytes` where the reduce runs whole
   * (the cost model has no segmented scan). Its bcast phase is unused.
   */
  scan(bytes: number, elem: number): CallPlan {
    if (this.areaTakes('scan', bytes)) {
      this.call.reduce = this.areaCallId('scan', 0);
      this.call.bcast = -1;
      this.call.segment = 0;
      return this.call;
    }
    this.scanId ??= this.parts.register(encodeSchedule(scanSchedule(this.parts.orderedPlan, this.parts.rank)));
    this.call.reduce = this.scanId;
    this.call.bcast = -1;
    const reduce = segment(this.of(bytes), 'reduce', elem);
    this.call.segment = reduce !== 0 ? reduce : Math.max(1, Math.floor(this.parts.config.routing.scan.segmentBytes / elem));
    return this.call;
  }

  /** The alltoall schedules' ids by form (see alltoall()), once registered. */
  private readonly alltoallIds = new Map<number, number>();
  /** exchangingGroups' last answer, and what it was for. */
  private exchangingFor = { blockBytes: -1, bundles: false, mask: 0 };

  /**
   * The groups of this rank's chain (bit i: chain[i]) whose cross steps exchange (alltoall.ts,
   * "Cross exchanges"): those whose exchange limit (Selector.exchangeLimit, the same on every
   * member) holds their largest message — a block, or with bundles the square of the most ranks
   * a member covers times a block.
   */
  private exchangingGroups(blockBytes: number, bundles: boolean): number {
    const last = this.exchangingFor;
    if (last.blockBytes === blockBytes && last.bundles === bundles) return last.mask;
    const { plan, rank } = this.parts;
    let mask = 0;
    plan.chain(rank).forEach((g, i) => {
      const cover = bundles ? Math.max(...g.members.map((m) => coveredBelow(plan, m, g).length)) : 1;
      if (this.selector.exchangeLimit(g) >= blockBytes * cover * cover) mask |= 1 << i;
    });
    this.exchangingFor = { blockBytes, bundles, mask };
    return mask;
  }
  private readonly alltoallCall: AllgatherCallPlan = { gather: -1, bcast: -1, segment: 0, bcastSegment: 0 };

  /**
   * An alltoall of `blockBytes` per block (alltoallv: `v`): its one phase's schedule id (in
   * `gather`; `bcast` −1), never segmented — across nodes hierarchical (an alltoall's bundles one
   * message each where the cost model says so), on one node pairwise, or Bruck for an alltoall
   * whose blocks the cost model finds small enough (alltoall.ts). The same on every rank: the
   * plan, the configuration and n.
   */
  alltoall(blockBytes: number, v: boolean): AllgatherCallPlan {
    if (!v && this.areaTakes('alltoall', blockBytes * this.parts.plan.size)) return this.areaCall(this.alltoallCall, 'alltoall', 0);
    let algorithm: AlltoallAlgorithm = alltoallAlgorithm(this.parts.plan);
    if (algorithm === 'pairwise' && !v) algorithm = this.selector.alltoallOnNode(blockBytes);
    const bundles = algorithm === 'hierarchical' && !v && this.selector.alltoallBundles(blockBytes);
    const mask = algorithm === 'hierarchical' && !v ? this.exchangingGroups(blockBytes, bundles) : 0;
    // The key: the mask of exchanging groups, the algorithm, bundles.
    const key = mask * 8 + ALLTOALL_FORMS.indexOf(algorithm) * 2 + (bundles ? 1 : 0);
    let id = this.alltoallIds.get(key);
    if (id === undefined) {
      const chain = this.parts.plan.chain(this.parts.rank);
      const exchanges = (g: Group): boolean => (mask & (1 << chain.indexOf(g))) !== 0;
      id = this.parts.register(encodeSchedule(alltoallSchedule(this.parts.plan, this.parts.rank, algorithm, { packed: bundles, exchanges })));
      this.alltoallIds.set(key, id);
    }
    this.alltoallCall.gather = id;
    this.alltoallCall.bcast = -1;
    return this.alltoallCall;
  }

  /** Reduce-scatter schedule ids, by (commutative ? 0 : 1), per choice; see reduceScatter(). */
  private readonly reduceScatterIds = new Map<ChoiceSchedules, { reduce: number; blocks: number }[]>();

  /**
   * A reduce-scatter of `bytes` in all (every rank's block): the reduce phase's schedule id (in
   * `gather`) and segment in elements, and the phase of rank blocks' (in `bcast`; `bcastSegment`:
   * its column segments). Non-commutative: the rank-ordered reduce to rank 0 (over the
   * rank-ordered plan, as reduce's), then a scatter from it.
   */
  reduceScatter(bytes: number, elem: number, commutative: boolean): AllgatherCallPlan {
    // In rank order: right for every operator.
    if (this.areaTakes('reduceScatter', bytes)) return this.areaCall(this.rootedCall, 'reduceScatter', 0);
    const c = this.of(bytes);
    let ids = this.reduceScatterIds.get(c);
    if (ids === undefined) this.reduceScatterIds.set(c, (ids = []));
    const key = commutative ? 0 : 1;
    let found = ids[key];
    if (found === undefined) {
      const options = { reduceAlgorithm: c.choice.reduce, gatherAlgorithm: c.choice.scatter, reduceScatterTop: c.choice.reduceScatterTop, commutative };
      const { plan, orderedPlan, rank } = this.parts;
      const s = reduceScatterSchedules(plan, rank, options);
      const reduce = commutative ? s.reduce : reduceSchedule(orderedPlan, rank, 0, options);
      found = { reduce: this.parts.register(encodeSchedule(reduce)), blocks: this.parts.register(encodeSchedule(s.blocks)) };
      ids[key] = found;
    }
    const call = this.rootedCall;
    call.gather = found.reduce;
    call.bcast = found.blocks;
    call.segment = segment(c, 'reduce', elem);
    // The top group's ring (or recursive halving) exchanges blocks, between nodes as a rule: its column segments must fit
    // its exchange limit (Infinity on one node).
    const column = segment(c, 'scatter', elem);
    const limit = this.selector.reduceScatterExchangeLimit();
    const cap = Number.isFinite(limit) ? Math.max(1, Math.floor(limit / elem)) : 0;
    call.bcastSegment = cap === 0 ? column : column === 0 ? cap : Math.min(column, cap);
    return call;
  }

  /**
   * The algorithm each level's groups use, per collective, as runs of message sizes: each entry
   * holds from the previous entry's `upToBytes` (exclusive) to its own (inclusive; null: every
   * larger size). `area`: sizes a one-node job runs through the shared area instead.
   */
  describe(group: Group): { bcast: SizeRun[]; reduce: SizeRun[]; allgather: SizeRun[]; gather: SizeRun[]; scatter: SizeRun[]; barrier: string } {
    return {
      bcast: withArea(
        sizeRuns(this.selector, (c) => formatAlgorithm(c.bcast(group))),
        this.shmBcast ? SHM_ALLREDUCE_MAX_BYTES : undefined,
      ),
      reduce: withArea(
        sizeRuns(this.selector, (c) => formatAlgorithm(c.reduce(group))),
        this.shmReduce ? SHM_ALLREDUCE_MAX_BYTES : undefined,
      ),
      allgather: withArea(
        sizeRuns(this.selector, (c) => c.allgather(group)),
        this.areaAllgatherBytes(),
      ),
      gather: withArea(
        sizeRuns(this.selector, (c) => c.gather(group)),
        this.areaCalls.gather ? SHM_ALLREDUCE_MAX_BYTES : undefined,
      ),
      scatter: withArea(
        sizeRuns(this.selector, (c) => c.scatter(group)),
        this.areaCalls.scatter ? SHM_ALLREDUCE_MAX_BYTES : undefined,
      ),
      barrier: formatAlgorithm(this.selector.chooseBucket(0).barrier(group)),
    };
  }

  /**
   * Up to which size of the whole result the one-node area takes allgathers of equal blocks
   * (null: every size, with the last-arrival protocol; undefined: none): up to
   * everyRankAllgatherMaxBytes per rank with every-rank.
   */
  private areaAllgatherBytes(): number | null | undefined {
    if (this.shmAllgather === false) return undefined;
    if (this.shmAllgather === 'last-arrival') return null;
    return this.everyRankAllgatherMaxBytes * this.parts.plan.size;
  }

  // Whether the calls below run the node-wide shared area's step: one predicate per collective,
  // which the calls and takesArea (the router's table) both ask.
  private areaBcast(bytes: number): boolean {
    return this.shmBcast && bytes <= SHM_ALLREDUCE_MAX_BYTES;
  }

  private areaReduce(bytes: number): boolean {
    return this.shmReduce && bytes <= SHM_ALLREDUCE_MAX_BYTES;
  }

  private areaAllreduce(bytes: number): this is { shmAllreduce: 'every-rank' | 'last-arrival' } {
    return this.shmAllreduce !== false && bytes <= SHM_ALLREDUCE_MAX_BYTES;
  }

  /** `bytes`: the whole call (a gather's or scatter's vector, a reduce-scatter's input, an alltoall's send, a scan's vector). */
  private areaTakes(collective: AreaCollective, bytes: number): boolean {
    return this.areaCalls[collective] && bytes <= SHM_ALLREDUCE_MAX_BYTES;
  }

  /** `largestBlock`: the largest rank's block of the allgather. */
  private areaAllgather(largestBlock: number): this is { shmAllgather: 'every-rank' | 'last-arrival' } {
    return this.shmAllgather === 'last-arrival' || (this.shmAllgather === 'every-rank' && largestBlock <= this.everyRankAllgatherMaxBytes);
  }

  /**
   * Whether a call of `bytes` (allgather: the whole result, in equal blocks; alltoall: one rank's
   * send, of equal blocks) runs the node-wide
   * shared area's step in the addon, as bcast(), reduce(), allreduce(), allgather() and barrier()
   * decide it: for the router's `route`.
   */
  takesArea(collective: Explanation['collective'], bytes: number): boolean {
    switch (collective) {
      case 'bcast':
        return this.areaBcast(bytes);
      case 'reduce':
        return this.areaReduce(bytes);
      case 'allreduce':
        return this.areaAllreduce(bytes);
      case 'allgather':
        return this.areaAllgather(bytes / this.parts.plan.size);
      case 'barrier':
        return this.shmBarrier !== false;
      case 'gather':
      case 'scatter':
      case 'alltoall':
        return this.areaTakes(collective, bytes);
      case 'reduce-scatter':
        return this.areaTakes('reduceScatter', bytes);
      case 'scan':
      case 'exscan':
        return this.areaTakes('scan', bytes);
    }
  }

  /** The native id of a phase's schedule (0 bcast, 1 reduce, 2/3 allreduce's reduce/bcast), registered on first use. */
  private id(c: ChoiceSchedules, phase: 0 | 1 | 2 | 3, root: number, commutative: boolean): number {
    const key = (root * 4 + phase) * 2 + (commutative ? 0 : 1);
    let id = c.ids[key];
    if (id === undefined) {
      id = this.parts.register(this.encoded(c.cache, phase, root, commutative));
      c.ids[key] = id;
    }
    return id;
  }

  private encoded(cache: ScheduleCache, phase: 0 | 1 | 2 | 3, root: number, commutative: boolean): Int32Array {
    const variant = { commutative };
    if (!commutative && this.ordered !== undefined) {
      // In rank order over the ordered plan (to root 0 for an allreduce), then the usual bcast.
      if (phase === 1) return this.ordered.getEncoded('reduce', root, variant);
      if (phase === 2) return this.ordered.getEncoded('reduce', 0, variant);
      if (phase === 3) return cache.getEncoded('bcast', 0);
    }
    if (phase === 0) return cache.getEncoded('bcast', root);
    if (phase === 1) return cache.getEncoded('reduce', root, variant);
    return phase === 2 ? cache.allreduceEncoded(variant).reduce : cache.allreduceEncoded(variant).bcast;
  }
}

/** A call's segment in elements (0: whole) under choice `c`. */
function segment(c: ChoiceSchedules, collective: keyof Choice['segmentBytes'], elem: number): number {
  const bytes = c.choice.segmentBytes[collective];
  return bytes === 0 ? 0 : Math.max(1, Math.floor(bytes / elem));
}

/**
 * `runs` with the sizes the one-node area takes from the groups' algorithms marked `area`: up to
 * `area` bytes (null: every size; undefined: none). A run that straddles the bound starts after it.
 */
function withArea(runs: SizeRun[], area: number | null | undefined): SizeRun[] {
  if (area === undefined) return runs;
  if (area === null) return [{ upToBytes: null, algorithm: 'area' }];
  return [{ upToBytes: area, algorithm: 'area' }, ...runs.filter((run) => run.upToBytes === null || run.upToBytes > area)];
}
