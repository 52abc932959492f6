import { cpus } from 'node:os';
import { markAsUntransferable } from 'node:worker_threads';
import { preservesRankOrder } from './algorithms/hierarchical.js';
import type { Explanation, SizeRun } from './algorithms/selection.js';
import { encodeSchedule, type Step } from './algorithms/schedule.js';
import { mergeRuntimeConfig, type RuntimeConfigInput } from './config/load.js';
import type { TopocollConfig } from './config/schema.js';
import { TopocollError } from './errors.js';
import type { Group, GroupPlan } from './groups/plan.js';
import { NativeCollective, type NativeAllgatherCall, type NativeCall, type NativeCollectiveCode, type NativeEngine, type NativeJob } from './native.js';
import { CollectivePlans, type AllgatherCallPlan, type CallPlan } from './runtime/collective-plans.js';
import { FastPath } from './runtime/fast-path.js';
import type { JobPlanner, JobPlans } from './runtime/job-planner.js';
import type { CommunicatorParts, JoinOrigin } from './runtime/join.js';
import { CollectiveRequest } from './runtime/request.js';
import { splitCommunicator, type SplitParent } from './runtime/sub-communicator.js';
import { Router, type Route } from './runtime/router.js';
import { sharedMemoryReport, type SharedMemoryReport } from './runtime/shm-budget.js';
import { Windows, type TypedArrayClass } from './runtime/windows.js';
import { summarizeResidency, type PlacementReport } from './runtime/numa-residency.js';
import { datatypeOf, isUserOp, nativeUserOp, reduceOpCode, type Datatype, type ReduceOpName, type UserOp } from './runtime/datatypes.js';
import { parseIndexList } from './topology/index-list.js';
import type { TypedArray } from './util/typed-array.js';

/**
 * Reads of a peer's mark before a fast-path wait hands over to the addon's wait (which spins,
 * yields, then sleeps): long enough to cover a peer that is a few hundred nanoseconds behind;
 * short when ranks outnumber cores, where a spinning rank holds off the peer it waits for.
 */
const FAST_SPIN = 4000;
const FAST_SPIN_SHARED = 64;

/** Pass as the send buffer to reduce in place: the receive buffer holds the input and the result. */
export const IN_PLACE: unique symbol = Symbol('topocoll.IN_PLACE');
export type InPlace = typeof IN_PLACE;

export interface LevelInfo {
  name: string;
  enabled: boolean;
  /** Size of this rank's group at the level (1 when it is in none there). */
  groupSize: number;
  isLeader: boolean;
  /** The algorithm of this rank's group at the level, per collective, by runs of message sizes (allgather: of the whole result). */
  algorithms?: {
    bcast: SizeRun[];
    reduce: SizeRun[];
    allgather: SizeRun[];
    barrier: string;
  };
}

/** A built-in operator name, or a JavaScript operator made with userOp(). */
export type Operator = ReduceOpName | UserOp;

/** Marks the collectives configure() runs itself, so that a rank in any other call mismatches. */
const CONTROL_TAG = 0x9e3779b9;
/** Cores of this machine: every rank of a node sees the same. */
const NODE_CORES = Math.max(1, cpus().length);

/** Marks runProbe's calls the same way. */
const PROBE_TAG = 0x85ebca6b;
/** runProbe's second phase. */
const NO_STEPS: Step[] = [];
/** Marks the exchanges of split() and dup() the same way. */
const SPLIT_TAG = 0xc2b2ae35;
/** Marks the agreements of allocShared() and freeShared() the same way. */
const WINDOW_TAG = 0x27d4eb2f;
/**
 * Marks a bcast, allreduce or allgather on shared windows (windowBcastPlans, windowAllreducePlan,
 * allgatherPlan): such calls run other schedules, so a rank passing ordinary memory where the
 * others pass windows gets EMISMATCH instead of waiting on a protocol its peers do not run.
 */
const WINDOW_CALL_TAG = 0x165667b1;

/**
 * A group of processes that run collectives together. Every rank must call the same
 * collectives in the same order with matching arguments (MPI semantics); mismatches that can be
 * detected raise EMISMATCH. `*Sync` methods run on the calling thread and block the event loop
 * (fastest); the Promise twins run on the communicator's own native thread. Do not touch a
 * buffer while a Promise collective that uses it is pending.
 */
export class Communicator {
  readonly rank: number;
  readonly size: number;
  readonly node: string;
  readonly localRank: number;
  readonly localSize: number;

  private readonly engine: NativeEngine;
  /** More ranks on this node than cores: picks the one-node shared allreduce's protocol. */
  private readonly oversubscribed: boolean;
  /** Each rank's host and allowed CPUs, for the cost model's groups whose members share cores. */
  private readonly rankCpus: readonly { host: string; cpus: readonly number[] }[];
  private readonly planner: JobPlanner;
  private readonly allLevels: GroupPlan;
  private readonly numaNode?: number;
  private readonly origin: JoinOrigin;
  private config: TopocollConfig;
  private plan: GroupPlan;
  private plans: CollectivePlans;
  /** Point-to-point-only schedules of the same plan, for configure()'s own agreement and barriers. */
  private control: CollectivePlans;
  private rankOrdered: boolean;
  private planHash: number;
  private closed = false;
  /** Small one-node calls in JavaScript (src/runtime/fast-path.ts); undefined where it cannot run. */
  private readonly fast?: FastPath;
  /** Which path each call takes under the current configuration (src/runtime/router.ts). */
  private router: Router;
  /** The last send and recv of a fast-path call found apart (checkApart). */
  private apartSend?: TypedArray;
  private apartRecv?: TypedArray;
  /** Promise collectives not settled yet: while any is, blocking calls queue behind them in the addon. */
  private asyncPending = 0;
  /** Shared windows (allocShared). */
  private readonly windows: Windows;
  /** What the current plans were made from, for windowBcastPlans. */
  private planParts: { plans: JobPlans; shmGroups: ReadonlyMap<Group, number> };
  /** Plans of bcasts on windows (windowBcastPlans); made on first use, dropped by configure(). */
  private windowPlans?: CollectivePlans;
  /** Closes the communicator when the process exits without close() (see constructor). */
  private readonly closeAtExit = (): void => {
    if (this.closed) return;
    // A script that simply returns gets told; one that fails has said why already.
    if (!process.exitCode) process.stderr.write(`topocoll: rank ${this.rank}: the communicator was not closed; closing it at exit\n`);
    this.close();
  };

  /** @internal use init() */
  constructor(parts: CommunicatorParts) {
    this.engine = parts.engine;
    this.planner = parts.planner;
    this.rank = parts.planner.rank;
    this.size = parts.plans.plan.size;
    this.node = parts.node;
    this.localRank = parts.localRank;
    this.localSize = parts.localSize;
    this.windows = new Windows({
      engine: this.engine,
      rank: this.rank,
      size: this.size,
      localRanks: parts.localRanks,
      segmentToken: parts.origin.segmentToken,
      budgetBytes: () => this.config.shm.budgetBytes,
      agree: (values) => {
        const out = new Float64Array(values.length);
        this.controlAllreduce(values, out, WINDOW_TAG);
        return out;
      },
    });
    this.oversubscribed = parts.oversubscribed;
    this.numaNode = parts.numaNode;
    this.origin = parts.origin;
    this.rankCpus = parts.origin.infos.map((info) => ({ host: info.host, cpus: parseIndexList(info.cpus) }));
    this.allLevels = parts.planner.buildAllLevels();
    this.config = parts.config;
    this.plan = parts.plans.plan;
    this.planHash = parts.plans.hash;
    this.rankOrdered = preservesRankOrder(parts.plans.orderedPlan);
    this.plans = this.collectivePlans(parts.plans, parts.config, parts.shmGroups);
    this.planParts = { plans: parts.plans, shmGroups: parts.shmGroups };
    this.control = this.controlPlans(parts.plans);
    const native = process.arch === 'x64' && this.size > 1 && this.localSize === this.size ? this.engine.fastPath() : undefined;
    if (native !== undefined) this.fast = new FastPath(native, this.engine.fastPathEngine, this.rank, this.oversubscribed ? FAST_SPIN_SHARED : FAST_SPIN);
    this.router = this.makeRouter();
    // Nothing of the communicator keeps the event loop alive, so a script that returns without
    // close() exits; at exit (a return, process.exit() or an uncaught exception) it closes, so
    // that peers still expecting this rank in a collective get EPEERLOST rather than wait.
    process.on('exit', this.closeAtExit);
  }

  /**
   * Changes the configuration while the communicator runs — which levels are on, the algorithm
   * of every level, segments (see RUNTIME_KEYS). Collective: every rank calls it at the same
   * point of its sequence of collectives with the same settings. Ranks that pass different
   * settings all get EMISMATCH and keep the old configuration; a rank that is in another
   * collective meanwhile gets EMISMATCH there. Cached schedules are dropped.
   */
  configure(partial: RuntimeConfigInput): void {
    this.ensureOpen();
    const config = mergeRuntimeConfig(this.config, partial);
    const next = this.planner.build(config);
    // Agreement, and a barrier that uses no shared-memory engine: afterwards no rank of the
    // node is still reading anything the engines hold.
    const hashes = Float64Array.of(next.hash, -next.hash);
    const extremes = new Float64Array(2);
    this.controlAllreduce(hashes, extremes);
    if (extremes[0] !== -extremes[1]!) {
      throw new TopocollError(
        'EMISMATCH',
        `configure(): the ranks asked for different configurations (plan hashes ${-extremes[1]!} … ${extremes[0]!}); the old one stays in force`,
        { rank: this.rank },
      );
    }
    this.planner.connect(next.linkPlans);
    this.engine.resetShm();
    const shmGroups = this.planner.registerShm(next.plan);
    // Nobody may use the engines before every rank of the node has reset its part.
    this.controlAllreduce(hashes, extremes);
    this.config = config;
    this.plan = next.plan;
    this.planHash = next.hash;
    this.rankOrdered = preservesRankOrder(next.orderedPlan);
    this.plans = this.collectivePlans(next, config, shmGroups);
    this.planParts = { plans: next, shmGroups };
    this.windowPlans = undefined;
    this.control = this.controlPlans(next);
    this.router = this.makeRouter();
  }

  private makeRouter(): Router {
    return new Router({
      config: this.config,
      plans: this.plans,
      windows: this.windows,
      fastPathAvailable: this.fast !== undefined,
      oversubscribed: this.oversubscribed,
      size: this.size,
    });
  }

  /** Switches a level on or off (`world` cannot be switched off). Collective, like configure(). */
  setLevelEnabled(level: string, enabled: boolean): void {
    this.configure({ levels: { [level]: { enabled } } });
  }

  private collectivePlans(plans: JobPlans, config: TopocollConfig, shmGroups: ReadonlyMap<Group, number>): CollectivePlans {
    return new CollectivePlans({
      plan: plans.plan,
      orderedPlan: plans.orderedPlan,
      rank: this.rank,
      config,
      shmGroups,
      eagerBytes: plans.eagerBytes,
      oversubscribed: this.oversubscribed,
      cores: NODE_CORES,
      cpus: this.rankCpus,
      register: this.register,
    });
  }

  /**
   * The plans of a bcast whose buffer is a shared window: every level whose groups are all
   * registered with the S0 engine (groups inside a node) runs the S0 bcast, whose window mode
   * lets readers copy straight out of the root's window (native/src/shm/shm_bcast.h); levels
   * between nodes keep their choice.
   */
  private windowBcastPlans(): CollectivePlans {
    if (this.windowPlans === undefined) {
      const { plans, shmGroups } = this.planParts;
      const levels: Record<string, string> = { ...this.config.bcast.levels };
      for (const [level, groups] of plans.plan.groups) {
        if (groups.every((g) => g.members.length < 2 || shmGroups.has(g))) levels[level] = 'shm';
      }
      const config: TopocollConfig = { ...this.config, bcast: { ...this.config.bcast, levels } };
      this.windowPlans = this.collectivePlans(plans, config, shmGroups);
    }
    return this.windowPlans;
  }

  /** Every schedule of this communicator gets its own native id, whichever plan it belongs to. */
  private nextScheduleId = 0;
  private readonly register = (encoded: Int32Array): number => {
    const id = this.nextScheduleId++;
    this.engine.setPlan(id, encoded);
    return id;
  };

  /** Binomial trees over channels and TCP only, reduce then bcast: never the shared-memory engines. */
  private controlPlans(plans: JobPlans): CollectivePlans {
    const binomial = Object.fromEntries(plans.plan.levels.map((l) => [l, 'binomial']));
    const config = {
      ...this.config,
      bcast: { algorithm: 'levels', pollMicros: 0, levels: binomial, segment: 0, shm: false },
      reduce: { levels: binomial, segment: 0, shm: false },
      allreduce: { algorithm: 'reduce-bcast', top: 'recursive-doubling', segment: 0, shm: false },
    } as TopocollConfig;
    return new CollectivePlans({
      plan: plans.plan,
      orderedPlan: plans.plan,
      rank: this.rank,
      config,
      shmGroups: new Map(),
      eagerBytes: plans.eagerBytes,
      oversubscribed: this.oversubscribed,
      cores: NODE_CORES,
      cpus: this.rankCpus,
      register: this.register,
    });
  }

  private controlAllreduce(send: Float64Array, recv: Float64Array, tag = CONTROL_TAG): void {
    const type = datatypeOf(send, 'send');
    const p = this.control.allreduce(send.byteLength, type.bytes, true);
    const call = this.nativeCall(NativeCollective.allreduce, p, send, recv, send.length, type.code, reduceOpCode('max', type), 0);
    call.planHash = (this.planHash ^ tag) >>> 0;
    call.segment = 0;
    this.engine.run(call);
  }

  /** Every rank receives `buf` of rank `root`. */
  bcastSync(buf: TypedArray, root = 0): void {
    const type = this.checkBuffer(buf, 'buf', root);
    if (this.asyncPending === 0 && this.router.fastBcast(buf.byteLength) && this.router.oneSidedTag(buf) === undefined) {
      if (this.fast!.bcast(buf, buf.length, type.code, root, this.planHash)) return;
    }
    this.engine.run(this.bcastCall(buf, type, root));
  }

  /** The native call of a bcast of `buf`: S1's one-sided bcast, or on the window plans, tagged, when it is a window bcast. */
  private bcastCall(buf: TypedArray, type: Datatype, root: number): NativeCall {
    const oneSided = this.router.oneSidedTag(buf);
    if (oneSided !== undefined) {
      const call = this.nativeCall(NativeCollective.bcast, this.plans.oneSidedBcast(root), null, buf, buf.length, type.code, 0, root);
      call.planHash = (this.planHash ^ oneSided) >>> 0;
      return call;
    }
    const windowed = this.router.windowBcast(buf);
    const p = (windowed ? this.windowBcastPlans() : this.plans).bcast(root, buf.byteLength, type.bytes);
    const call = this.nativeCall(NativeCollective.bcast, p, null, buf, buf.length, type.code, 0, root);
    if (windowed) call.planHash = (this.planHash ^ WINDOW_CALL_TAG) >>> 0;
    return call;
  }

  /** bcastSync as a Promise, run on the communicator's own thread; do not touch `buf` until it settles. */
  bcast(buf: TypedArray, root = 0): Promise<void> {
    return this.async(() => this.queueBcast(buf, root).done, buf);
  }

  /** bcast as a request (MPI_Ibcast); bad arguments throw here, before anything is queued. */
  ibcast(buf: TypedArray, root = 0): CollectiveRequest {
    return this.request(() => this.queueBcast(buf, root), buf);
  }

  private queueBcast(buf: TypedArray, root: number): NativeJob {
    const type = this.checkBuffer(buf, 'buf', root);
    return this.engine.runAsync(this.bcastCall(buf, type, root));
  }

  /**
   * Combines every rank's `send` element-wise with `op` into `recv` at `root`. At the root,
   * `send` may be IN_PLACE (then `recv` is the input); elsewhere `recv` may be null.
   */
  reduceSync(send: TypedArray | InPlace, recv: TypedArray | null, op: Operator = 'sum', root = 0): void {
    const input = this.reduceInput(send, recv, root);
    const type = this.checkReduce(input, recv, send === IN_PLACE, root);
    const out = this.rank === root ? recv : null;
    if (isUserOp(op)) return this.reduceWithUserOp(input, out, type, op, root);
    const opCode = reduceOpCode(op, type);
    if (this.asyncPending === 0 && this.router.fastReduce(input.byteLength)) {
      if (out !== null && send !== IN_PLACE && (input !== this.apartSend || out !== this.apartRecv))
        this.checkApart(input, out, 'Pass IN_PLACE as send to reduce in place.');
      if (this.fast!.reduce(input, out, input.length, type.code, opCode, root, this.planHash)) return;
    }
    const p = this.plans.reduce(root, input.byteLength, type.bytes, true);
    this.engine.run(this.nativeCall(NativeCollective.reduce, p, input, out, input.length, type.code, opCode, root));
  }

  // The user-operator paths live apart from the built-in ones: V8 inlines a hot function into its
  // caller only while the two stay small, and the latency path should not pay for code it skips.
  private reduceWithUserOp(input: TypedArray, out: TypedArray | null, type: Datatype, op: UserOp, root: number): void {
    const p = this.plans.reduce(root, input.byteLength, type.bytes, this.checkOrder(op));
    const call = this.nativeCall(NativeCollective.reduce, p, input, out, input.length, type.code, 0, root);
    call.user = nativeUserOp(op, type);
    this.engine.run(call);
  }

  /** With a user-defined operator the work happens on the calling thread (it calls JavaScript). */
  reduce(send: TypedArray | InPlace, recv: TypedArray | null, op: Operator = 'sum', root = 0): Promise<void> {
    if (isUserOp(op)) return this.async(() => Promise.resolve(this.reduceSync(send, recv, op, root)));
    return this.async(() => this.queueReduce(send, recv, op, root).done, send, recv);
  }

  /** reduce as a request (MPI_Ireduce). With a user-defined operator it runs here, as reduceSync. */
  ireduce(send: TypedArray | InPlace, recv: TypedArray | null, op: Operator = 'sum', root = 0): CollectiveRequest {
    if (isUserOp(op)) return this.request(() => this.reduceSync(send, recv, op, root));
    return this.request(() => this.queueReduce(send, recv, op, root), send, recv);
  }

  private queueReduce(send: TypedArray | InPlace, recv: TypedArray | null, op: ReduceOpName, root: number): NativeJob {
    const input = this.reduceInput(send, recv, root);
    const type = this.checkReduce(input, recv, send === IN_PLACE, root);
    const opCode = reduceOpCode(op, type);
    const p = this.plans.reduce(root, input.byteLength, type.bytes, true);
    return this.engine.runAsync(this.nativeCall(NativeCollective.reduce, p, input, this.rank === root ? recv : null, input.length, type.code, opCode, root));
  }

  /** Combines every rank's `send` with `op`; every rank receives the result in `recv`. */
  allreduceSync(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): void {
    const input = send === IN_PLACE ? recv : send;
    const type = this.checkAllreduce(input, recv, send === IN_PLACE);
    if (isUserOp(op)) return this.allreduceWithUserOp(input, recv, type, op);
    const opCode = reduceOpCode(op, type);
    const bytes = recv.byteLength;
    if (this.asyncPending === 0 && this.router.fastAllreduce(bytes)) {
      if (send !== IN_PLACE && (input !== this.apartSend || recv !== this.apartRecv)) this.checkApart(input, recv, 'Pass IN_PLACE as send to reduce in place.');
      if (this.fast!.allreduce(input, recv, recv.length, type.code, opCode, this.planHash)) return;
    }
    this.engine.run(this.allreduceCall(input, recv, type, opCode));
  }

  /** The native call of an allreduce with a built-in operator: the window allreduce, tagged, where it applies. */
  private allreduceCall(input: TypedArray, recv: TypedArray, type: Datatype, opCode: number): NativeCall {
    const w = this.windowAllreducePlan(input, recv);
    const p = w ?? this.plans.allreduce(recv.byteLength, type.bytes, true);
    const call = this.nativeCall(NativeCollective.allreduce, p, input, recv, recv.length, type.code, opCode, 0);
    if (w !== undefined) call.planHash = (this.planHash ^ WINDOW_CALL_TAG) >>> 0;
    return call;
  }

  /** The window allreduce's plan when the router sends the call there and the job is on one node; else undefined. */
  private windowAllreducePlan(input: TypedArray, recv: TypedArray): CallPlan | undefined {
    return this.router.windowAllreduce(input, recv) ? this.plans.windowAllreduce() : undefined;
  }

  private allreduceWithUserOp(input: TypedArray, recv: TypedArray, type: Datatype, op: UserOp): void {
    const p = this.plans.allreduce(recv.byteLength, type.bytes, this.checkOrder(op));
    const call = this.nativeCall(NativeCollective.allreduce, p, input, recv, recv.length, type.code, 0, 0);
    call.user = nativeUserOp(op, type);
    this.engine.run(call);
  }

  /** With a user-defined operator the work happens on the calling thread (it calls JavaScript). */
  allreduce(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): Promise<void> {
    if (isUserOp(op)) return this.async(() => Promise.resolve(this.allreduceSync(send, recv, op)));
    return this.async(() => this.queueAllreduce(send, recv, op).done, send, recv);
  }

  /** allreduce as a request (MPI_Iallreduce). With a user-defined operator it runs here, as allreduceSync. */
  iallreduce(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): CollectiveRequest {
    if (isUserOp(op)) return this.request(() => this.allreduceSync(send, recv, op));
    return this.request(() => this.queueAllreduce(send, recv, op), send, recv);
  }

  private queueAllreduce(send: TypedArray | InPlace, recv: TypedArray, op: ReduceOpName): NativeJob {
    const input = send === IN_PLACE ? recv : send;
    const type = this.checkAllreduce(input, recv, send === IN_PLACE);
    return this.engine.runAsync(this.allreduceCall(input, recv, type, reduceOpCode(op, type)));
  }

  /**
   * Every rank's `send` gathered in rank order into `recv` on every rank: rank r's elements land
   * at [r·n, (r+1)·n) with n = send.length, the same on every rank; recv needs size·n elements.
   * IN_PLACE as send: this rank's block is already at its place in recv (n = recv.length / size).
   */
  allgatherSync(send: TypedArray | InPlace, recv: TypedArray): void {
    const type = this.checkAllgather(send, recv, undefined);
    const count = send === IN_PLACE ? recv.length / this.size : send.length;
    if (this.asyncPending === 0 && this.router.fastAllgather(count * type.bytes)) {
      if (send !== IN_PLACE && (send !== this.apartSend || recv !== this.apartRecv))
        this.checkApart(send, recv, "Pass IN_PLACE as send when this rank's block is already in recv.");
      if (this.fast!.allgather(send === IN_PLACE ? recv : send, recv, count, type.code, this.planHash)) return;
    }
    const own = send === IN_PLACE ? recv : send;
    const p = this.allgatherPlan(own, count * this.size * type.bytes, type.bytes, count * type.bytes);
    this.engine.runAllgather(this.allgatherCall(p, own, recv, count, type, undefined));
  }

  /** allgatherSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  allgather(send: TypedArray | InPlace, recv: TypedArray): Promise<void> {
    return this.async(() => this.queueAllgather(send, recv).done, send, recv);
  }

  /** allgather as a request (MPI_Iallgather). */
  iallgather(send: TypedArray | InPlace, recv: TypedArray): CollectiveRequest {
    return this.request(() => this.queueAllgather(send, recv), send, recv);
  }

  private queueAllgather(send: TypedArray | InPlace, recv: TypedArray): NativeJob {
    const type = this.checkAllgather(send, recv, undefined);
    const count = send === IN_PLACE ? recv.length / this.size : send.length;
    const own = send === IN_PLACE ? recv : send;
    const p = this.allgatherPlan(own, count * this.size * type.bytes, type.bytes, count * type.bytes);
    return this.engine.runAllgatherAsync(this.allgatherCall(p, own, recv, count, type, undefined));
  }

  /**
   * Allgather of blocks of different lengths: rank r contributes `counts[r]` elements (its
   * `send`), placed in rank order one after another in `recv` on every rank. Every rank must pass
   * the same `counts` (a rank passing others gets EMISMATCH). IN_PLACE: this rank's block is
   * already at its place in recv.
   */
  allgathervSync(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>): void {
    const table = this.blockCounts(counts);
    const type = this.checkAllgather(send, recv, table);
    const own = send === IN_PLACE ? recv : send;
    const p = this.allgatherPlan(own, this.blockTotal * type.bytes, type.bytes, this.blockLargest * type.bytes);
    this.engine.runAllgather(this.allgatherCall(p, own, recv, 0, type, table));
  }

  /** allgathervSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  allgatherv(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>): Promise<void> {
    return this.async(() => this.queueAllgatherv(send, recv, counts).done, send, recv);
  }

  /** allgatherv as a request (MPI_Iallgatherv). */
  iallgatherv(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>): CollectiveRequest {
    return this.request(() => this.queueAllgatherv(send, recv, counts), send, recv);
  }

  private queueAllgatherv(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>): NativeJob {
    // Its own copy: the call may start after the caller changed `counts`.
    const table = Float64Array.from(this.blockCounts(counts));
    const type = this.checkAllgather(send, recv, table);
    const own = send === IN_PLACE ? recv : send;
    const p = this.allgatherPlan(own, this.blockTotal * type.bytes, type.bytes, this.blockLargest * type.bytes);
    return this.engine.runAllgatherAsync(this.allgatherCall(p, own, recv, 0, type, table));
  }

  /**
   * The plan of an allgather whose result holds `bytes`, at most `largest` from one rank: the
   * window allgather when the router sends it there (this rank's block, `own`: its send, or recv
   * for IN_PLACE, in a shared window, the largest block large enough) and the job is on one
   * node; else the plans'. Every rank decides alike when every rank passes a window (a
   * rank that does not gets EMISMATCH: allgatherCall tags window calls).
   */
  private allgatherPlan(own: TypedArray, bytes: number, elem: number, largest: number): AllgatherCallPlan {
    const windowed = this.router.windowAllgather(own, largest) ? this.plans.windowAllgather() : undefined;
    return windowed ?? this.plans.allgather(bytes, elem, largest);
  }

  /** Native ids of the schedules `runProbe` was given, by their encoded words and by the arrays themselves. */
  private readonly probes = new Map<string, number>();
  private readonly probeArrays = new WeakMap<Step[], number>();

  /**
   * @internal `topocoll tune`: runs `steps` as one call. Every rank must pass its part of one
   * schedule whose messages match, in the same call sequence as everything else. A schedule is
   * encoded once per array (its timing then holds no encoding): do not change the array after.
   *
   * Without `buffer`: a zero-byte call (a barrier's first phase; the second is empty). With one
   * (every rank passes the same length): an in-place float64 sum allreduce whose first phase is
   * `steps` and whose second is empty — B is `buffer` itself (nothing is copied first), so a step
   * without a range moves the whole buffer, a RecvReduce adds what arrives into it, and the call
   * runs in segments of `segment` elements (0: one segment; exchanges between nodes must fit
   * the native TCP limit, see schedule.ts).
   */
  runProbe(steps: Step[], buffer?: Float64Array, segment = 0): void {
    this.ensureOpen();
    const register = (s: Step[]): number => {
      let id = this.probeArrays.get(s);
      if (id !== undefined) return id;
      const encoded = encodeSchedule({ collective: 'reduce', root: 0, steps: s });
      const key = encoded.join(',');
      id = this.probes.get(key);
      if (id === undefined) this.probes.set(key, (id = this.register(encoded)));
      this.probeArrays.set(s, id);
      return id;
    };
    const p = { reduce: register(steps), bcast: register(NO_STEPS), segment: buffer === undefined ? 0 : segment };
    let call: NativeCall;
    if (buffer === undefined) {
      call = this.nativeCall(NativeCollective.barrier, p, null, null, 0, 1, 0, 0);
    } else {
      const type = datatypeOf(buffer, 'runProbe');
      call = this.nativeCall(NativeCollective.allreduce, p, buffer, buffer, buffer.length, type.code, reduceOpCode('sum', type), 0);
    }
    call.planHash = (this.planHash ^ PROBE_TAG) >>> 0;
    this.engine.run(call);
  }

  /** Returns once every rank has entered the barrier. */
  barrierSync(): void {
    this.ensureOpen();
    if (this.asyncPending === 0 && this.router.fastBarrier() && this.fast!.barrier(this.planHash)) return;
    const p = this.plans.barrier();
    this.engine.run(this.nativeCall(NativeCollective.barrier, p, null, null, 0, 1, 0, 0));
  }

  /** barrierSync as a Promise, run on the communicator's own thread: settles once every rank has entered the barrier. */
  barrier(): Promise<void> {
    return this.async(() => this.queueBarrier().done);
  }

  /** barrier as a request (MPI_Ibarrier): completes once every rank has entered it. */
  ibarrier(): CollectiveRequest {
    return this.request(() => this.queueBarrier());
  }

  private queueBarrier(): NativeJob {
    this.ensureOpen();
    const p = this.plans.barrier();
    return this.engine.runAsync(this.nativeCall(NativeCollective.barrier, p, null, null, 0, 1, 0, 0));
  }

  /**
   * The levels of the job, bottom-up, with this rank's place in each and the algorithm its
   * group there uses for small and large messages; switched-off levels have `enabled: false`.
   */
  levels(): LevelInfo[] {
    const chain = this.plan.chain(this.rank);
    const names = [...new Set([...this.allLevels.levels, ...this.plan.levels])];
    return names.map((name) => {
      const group = chain.find((g) => g.level === name);
      const enabled = this.plan.levels.includes(name);
      const info: LevelInfo = { name, enabled, groupSize: group?.members.length ?? 1, isLeader: group === undefined || group.leader === this.rank };
      if (group !== undefined) info.algorithms = this.plans.describe(group);
      return info;
    });
  }

  /**
   * Why a `collective` of `bytes` (allgather: the whole result) runs as it does: the path it takes
   * by buffer kind and form (`route`: the JavaScript fast path, the shared area, windows, S1's
   * one-sided bcast or the levels' schedules, as the router decides it for every call), and for
   * the levels per level every candidate algorithm's predicted time from the cost model (`model`
   * in the configuration), the choice, the segment candidates and the whole call's prediction.
   * Local: sends nothing.
   */
  explain(collective: Explanation['collective'], bytes: number): Explanation & { route: Route } {
    this.ensureOpen();
    if (!Number.isInteger(bytes) || bytes < 0) throw new TopocollError('EINVAL', `explain: bytes ${bytes} is not an integer ≥ 0`, { rank: this.rank });
    if (!['bcast', 'reduce', 'allreduce', 'allgather', 'barrier'].includes(collective))
      throw new TopocollError('EINVAL', `explain: "${String(collective)}" is not a collective (bcast, reduce, allreduce, allgather, barrier)`, {
        rank: this.rank,
      });
    return { ...this.plans.explain(collective, bytes), route: this.router.route(collective, bytes) };
  }

  /**
   * Where this rank's shared-memory queue really is: the NUMA node of each of its pages
   * (move_pages, query mode) against the node the rank runs on. First touch should make it
   * `local`; `unknown` when the rank is alone on its node or the kernel cannot say.
   */
  placement(): PlacementReport {
    this.ensureOpen();
    return summarizeResidency(this.engine.ownRegionNodes(), this.numaNode);
  }

  /**
   * MPI_Comm_split: the ranks that pass the same `color` form a new communicator, ranked by
   * `key` (ties: by rank here); a rank passing `undefined` gets undefined. Collective: every
   * rank of this communicator calls it, at the same point of its sequence of collectives, and
   * ranks create sub-communicators in the same order. The new communicator has its own groups
   * and plans (from its ranks' placement), its own engine thread and node segments — so its
   * collectives and this one's may interleave in any order, Promise forms included — and
   * reaches other nodes as this one does: new TCP connections, or the same host layer on a tag
   * of its own. Its configuration is this one's current one. close() it independently.
   */
  async split(color: number | undefined, key: number = this.rank): Promise<Communicator | undefined> {
    this.ensureOpen();
    const parent: SplitParent = {
      rank: this.rank,
      size: this.size,
      config: this.config,
      numaNode: this.numaNode,
      origin: this.origin,
      exchange: (send, recv) => this.splitExchange(send, recv),
    };
    const parts = await splitCommunicator(parent, color, key);
    return parts === undefined ? undefined : new Communicator(parts);
  }

  /** An allgather of bytes marked as split()'s: a rank in any other collective gets EMISMATCH. */
  private splitExchange(send: Uint8Array, recv: Uint8Array): Promise<void> {
    return this.async(
      () => {
        const type = this.checkAllgather(send, recv, undefined);
        const p = this.plans.allgather(recv.byteLength, 1, send.byteLength);
        const call = this.allgatherCall(p, send, recv, send.length, type, undefined);
        call.planHash = (this.planHash ^ SPLIT_TAG) >>> 0;
        return this.engine.runAllgatherAsync(call).done;
      },
      send,
      recv,
    );
  }

  /**
   * The node's shared memory as this communicator uses it: the budget, the segment and what it is
   * made of (every part a fixed size per local rank), the channels the node's ranks have made
   * so far out of their outboxes, and the windows. Local: reads the segment, sends nothing.
   */
  sharedMemory(): SharedMemoryReport {
    this.ensureOpen();
    return sharedMemoryReport(this.engine.sharedMemory(), this.config.shm.budgetBytes, this.localSize, this.windows.bytes);
  }

  /**
   * MPI_Win_allocate_shared: a typed array of `length` elements in the node's shared memory, an
   * ordinary typed array to this rank that every rank of the node can address (sharedQuery).
   * Collective over the communicator (ranks may ask for different lengths, including 0). Bcasts
   * and one-node allreduces and allgathers on windows are single-copy (docs/guide/collectives.md,
   * "Shared windows"). Counted with the node's segment against shm.budgetBytes (ENOMEM beyond);
   * freed by freeShared() or close(), after which the array reads as empty.
   */
  allocShared<T extends TypedArray>(type: TypedArrayClass<T>, length: number): T {
    this.ensureOpen();
    return this.windows.allocate(type, length);
  }

  /**
   * MPI_Win_free: unmaps the window `array` views (any view of it). Collective: returns once
   * every rank has called it, so no rank still reads a part freed here. Refused (EINVAL) while a
   * request or Promise collective of this rank is pending, since it may use the window.
   */
  freeShared(array: TypedArray): void {
    this.ensureOpen();
    this.windows.free(array, this.asyncPending);
  }

  /** MPI_Win_shared_query: the part of rank `rank` (on this node) of the window `array` views, as `array`'s type. Local. */
  sharedQuery<T extends TypedArray>(array: T, rank: number): T {
    this.ensureOpen();
    return this.windows.query(array, rank);
  }

  /** MPI_Comm_dup: the same ranks in the same order, a communicator of their own (split(0, rank)). Collective. */
  async dup(): Promise<Communicator> {
    return (await this.split(0, this.rank))!;
  }

  /** Releases shared memory, sockets and threads. Idempotent; collectives afterwards fail with ECLOSED. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    process.off('exit', this.closeAtExit);
    // Peers still in a call this rank made in JavaScript must not take it for one it skipped.
    this.fast?.publish();
    this.engine.close();
    this.windows.clear();
  }

  // --- argument checks: everything is validated before anything is sent ---
  // Each check only tests and throws what a cold method builds: the messages' code would use up
  // the bytecode budget within which V8 inlines the Sync calls' helpers.

  private ensureOpen(): void {
    if (this.closed) throw this.argumentError('ECLOSED', 'the communicator is closed');
  }

  private checkRoot(root: number): void {
    if (!Number.isInteger(root) || root < 0 || root >= this.size)
      throw this.argumentError('EINVAL', `root ${root} is not a rank of this communicator (0…${this.size - 1})`);
  }

  private argumentError(code: 'EINVAL' | 'ECLOSED', message: string, hint?: string): TopocollError {
    return new TopocollError(code, message, hint === undefined ? { rank: this.rank } : { rank: this.rank, hint });
  }

  private checkBuffer(buf: unknown, what: string, root: number): Datatype {
    this.ensureOpen();
    this.checkRoot(root);
    return datatypeOf(buf, what);
  }

  // The checks below allocate nothing: the Sync calls are the latency path, and garbage there
  // means collections while peers wait.

  /** The reduce input: `recv` when IN_PLACE (valid only at the root), else `send`. */
  private reduceInput(send: TypedArray | InPlace, recv: TypedArray | null, root: number): TypedArray {
    this.ensureOpen();
    this.checkRoot(root);
    if (send !== IN_PLACE) return send;
    if (this.rank !== root)
      throw this.argumentError('EINVAL', 'IN_PLACE is only valid at the root of a reduce', 'Pass the input buffer as send on the other ranks.');
    if (recv === null) throw this.argumentError('EINVAL', 'the root of a reduce needs a receive buffer');
    return recv;
  }

  private checkReduce(input: TypedArray, recv: TypedArray | null, inPlace: boolean, root: number): Datatype {
    const type = datatypeOf(input, 'send');
    if (this.rank === root && recv === null) throw this.argumentError('EINVAL', 'the root of a reduce needs a receive buffer');
    if (recv !== null) this.checkPair(input, type, recv, datatypeOf(recv, 'recv'), inPlace);
    return type;
  }

  private checkAllreduce(input: TypedArray, recv: TypedArray, inPlace: boolean): Datatype {
    this.ensureOpen();
    const type = datatypeOf(recv, 'recv');
    this.checkPair(input, datatypeOf(input, 'send'), recv, type, inPlace);
    return type;
  }

  /**
   * Same type and length; distinct arrays unless IN_PLACE. Two views that overlap only in part
   * are refused by the addon, which has the addresses at hand (reading `.buffer` here would
   * cost more than the rest of a small call).
   */
  private checkPair(send: TypedArray, sendType: Datatype, recv: TypedArray, recvType: Datatype, inPlace: boolean): void {
    if (sendType !== recvType || send.length !== recv.length || (!inPlace && send === recv && send.length > 0))
      throw this.pairError(send, sendType, recv, recvType);
  }

  /**
   * Refuses views of one buffer that share bytes, as the addon does from the addresses: for the
   * fast path, which does not enter the addon. Reading `.buffer` costs about a quarter of a fast
   * call, so the last pair found apart is remembered, and the callers compare with it before
   * they call this — a view's buffer, offset and length never change unless its buffer can be
   * resized (such pairs are checked every time).
   */
  private checkApart(send: TypedArray, recv: TypedArray, hint: string): void {
    const buffer = send.buffer;
    if (buffer === recv.buffer) {
      const start = send.byteOffset;
      const other = recv.byteOffset;
      if (start < other + recv.byteLength && other < start + send.byteLength) throw this.argumentError('EINVAL', 'send and recv overlap', hint);
    }
    if (fixedLength(buffer) && fixedLength(recv.buffer)) {
      this.apartSend = send;
      this.apartRecv = recv;
    }
  }

  private pairError(send: TypedArray, sendType: Datatype, recv: TypedArray, recvType: Datatype): TopocollError {
    if (sendType !== recvType) return this.argumentError('EINVAL', `send is ${sendType.name} but recv is ${recvType.name}`);
    if (send.length !== recv.length) return this.argumentError('EINVAL', `send has ${send.length} elements but recv has ${recv.length}`);
    return this.argumentError('EINVAL', 'send and recv overlap', 'Pass IN_PLACE as send to reduce in place.');
  }

  /** Checks an allgather's buffers (with `table`: allgatherv's counts); returns the datatype. */
  private checkAllgather(send: TypedArray | InPlace, recv: TypedArray, table: Float64Array | undefined): Datatype {
    this.ensureOpen();
    const type = datatypeOf(recv, 'recv');
    const own = table === undefined ? (send === IN_PLACE ? recv.length / this.size : send.length) : table[this.rank]!;
    const total = table === undefined ? own * this.size : this.blockTotal;
    if (send !== IN_PLACE) {
      const sendType = datatypeOf(send, 'send');
      if (sendType !== type) throw this.argumentError('EINVAL', `send is ${sendType.name} but recv is ${type.name}`);
      if (send === recv && send.length > 0)
        throw this.argumentError('EINVAL', 'send and recv are the same array', "Pass IN_PLACE as send when this rank's block is already in recv.");
      if (table !== undefined && send.length !== own) throw this.argumentError('EINVAL', `send has ${send.length} elements but counts[${this.rank}] is ${own}`);
    } else if (table === undefined && !Number.isInteger(own)) {
      throw this.argumentError('EINVAL', `with IN_PLACE recv holds every rank's block, but its ${recv.length} elements do not divide among ${this.size} ranks`);
    }
    if (recv.length < total) throw this.argumentError('EINVAL', `recv has ${recv.length} elements but the allgather gathers ${total}`);
    return type;
  }

  /** Sum and largest of the counts blockCounts last checked. */
  private blockTotal = 0;
  private blockLargest = 0;
  private countsScratch?: Float64Array;

  /** allgatherv's counts as a Float64Array of non-negative integers, one per rank (their sum in blockTotal). */
  private blockCounts(counts: ArrayLike<number>): Float64Array {
    this.ensureOpen();
    if (counts === null || typeof counts !== 'object' || counts.length !== this.size) {
      throw this.argumentError(
        'EINVAL',
        `allgatherv needs one count per rank (${this.size}), got ${counts === null || typeof counts !== 'object' ? String(counts) : counts.length}`,
      );
    }
    const table = counts instanceof Float64Array ? counts : (this.countsScratch ??= new Float64Array(this.size));
    let total = 0;
    let largest = 0;
    for (let r = 0; r < this.size; r++) {
      const c = counts[r]!;
      if (!Number.isSafeInteger(c) || c < 0) throw this.argumentError('EINVAL', `allgatherv: counts[${r}] is ${c}, not a non-negative integer`);
      table[r] = c;
      total += c;
      largest = Math.max(largest, c);
    }
    this.blockTotal = total;
    this.blockLargest = largest;
    return table;
  }

  /**
   * Fills and returns the one NativeCall of this communicator: collective `c` with the
   * schedules and segment of `p` (CollectivePlans gives -1 for a phase the collective lacks),
   * this communicator's plan hash and no user operator (callers that need others set the
   * fields after).
   */
  private nativeCall(
    c: NativeCollectiveCode,
    p: CallPlan,
    send: TypedArray | null,
    recv: TypedArray | null,
    count: number,
    dtype: number,
    op: number,
    root: number,
  ): NativeCall {
    const call = this.callArgs;
    call.collective = c;
    call.reducePlan = p.reduce;
    call.bcastPlan = p.bcast;
    call.send = send;
    call.recv = recv;
    call.count = count;
    call.dtype = dtype;
    call.op = op;
    call.root = root;
    call.planHash = this.planHash;
    call.segment = p.segment;
    call.user = undefined;
    return call;
  }

  /** Reused by every call but the allgathers (the native side reads it before the call returns or queues). */
  private readonly callArgs: NativeCall = {
    collective: NativeCollective.barrier,
    reducePlan: -1,
    bcastPlan: -1,
    send: null,
    recv: null,
    count: 0,
    dtype: 0,
    op: 0,
    root: 0,
    planHash: 0,
    segment: 0,
    user: undefined,
  };

  private allgatherCall(
    p: AllgatherCallPlan,
    send: TypedArray,
    recv: TypedArray,
    count: number,
    type: Datatype,
    counts: Float64Array | undefined,
  ): NativeAllgatherCall {
    const call = this.allgatherArgs;
    call.gatherPlan = p.gather;
    call.bcastPlan = p.bcast;
    call.send = send;
    call.recv = recv;
    call.count = count;
    call.counts = counts;
    call.dtype = type.code;
    call.planHash = p.windowed === true ? (this.planHash ^ WINDOW_CALL_TAG) >>> 0 : this.planHash;
    call.segment = p.segment;
    call.bcastSegment = p.bcastSegment;
    return call;
  }

  /** Reused by every allgather call (the native side reads it before the call returns or queues). */
  private readonly allgatherArgs: NativeAllgatherCall = {
    gatherPlan: -1,
    bcastPlan: -1,
    send: new Uint8Array(0),
    recv: new Uint8Array(0),
    count: 0,
    dtype: 0,
    planHash: 0,
    segment: 0,
    bcastSegment: 0,
  };

  /**
   * Whether a user operator may be applied in any order; a non-commutative one needs a plan
   * whose groups keep the ranks in order (each group covers consecutive ranks).
   */
  private checkOrder(op: UserOp): boolean {
    if (op.commutative) return true;
    if (!this.rankOrdered) {
      throw new TopocollError(
        'EINVAL',
        'a non-commutative operator needs groups of consecutive ranks, and this placement interleaves the ranks of different nodes or sockets',
        {
          rank: this.rank,
          hint: 'Place consecutive ranks together (topocoll run does; mpirun --map-by core), or use a commutative operator.',
        },
      );
    }
    return false;
  }

  /**
   * The progress thread writes a queued collective's buffers through the raw address of their
   * memory, which Node-API cannot hold. A resizable ArrayBuffer may shrink under it (its pages
   * are given back: a segmentation fault), so it is refused with EINVAL before anything is
   * queued.
   */
  private refuseResizable(buffers: readonly unknown[]): void {
    for (const b of buffers) {
      if (ArrayBuffer.isView(b) && (b.buffer as ArrayBuffer & { resizable?: boolean }).resizable === true) {
        throw this.argumentError(
          'EINVAL',
          'a buffer over a resizable ArrayBuffer cannot be used by a Promise collective or a request: it could shrink while the progress thread writes it',
          'Pass a fixed-length ArrayBuffer, or use the Sync form.',
        );
      }
    }
  }

  /**
   * Once a collective is queued: an ArrayBuffer of its buffers transferred away (postMessage,
   * structuredClone) would be detached, and its memory freed by its new owner while the progress
   * thread still writes it. Each is marked untransferable (worker_threads.markAsUntransferable, as
   * Node marks its own Buffer pool): a transfer list naming it throws DataCloneError (Node 21 and
   * later) or copies it (Node 20), and this rank's buffer stays valid. The mark is permanent.
   * Windows are left alone: freeShared() detaches them itself and is refused while a collective
   * is pending; SharedArrayBuffers cannot be detached.
   */
  private holdBuffers(buffers: readonly unknown[]): void {
    for (const b of buffers) {
      if (ArrayBuffer.isView(b) && b.buffer instanceof ArrayBuffer && this.windows.windowOf(b as TypedArray) === undefined) {
        markAsUntransferable(b.buffer);
      }
    }
  }

  /**
   * A request over a queued collective; `start` returning undefined means it ran on this thread
   * already. Argument errors throw here. Until its end is known it counts as pending, so that
   * Sync calls do not take the fast path past it.
   */
  private request(start: () => NativeJob | void, ...keepAlive: unknown[]): CollectiveRequest {
    this.refuseResizable(keepAlive);
    const job = start() ?? undefined;
    this.holdBuffers(keepAlive);
    this.asyncPending++;
    return new CollectiveRequest(this.engine, job, () => void this.asyncPending--, keepAlive);
  }

  /** Argument errors reject the Promise instead of throwing; buffers stay referenced until it settles. */
  private async(start: () => Promise<void>, ...keepAlive: unknown[]): Promise<void> {
    let pending: Promise<void>;
    try {
      this.refuseResizable(keepAlive);
      pending = start();
      this.holdBuffers(keepAlive);
    } catch (e) {
      return Promise.reject(e);
    }
    this.asyncPending++;
    return pending.then(
      () => {
        this.asyncPending--;
        return void keepAlive;
      },
      (e: unknown) => {
        this.asyncPending--;
        throw e;
      },
    );
  }
}

export type { ReduceOpName, TypedArray, NativeCollectiveCode };

/** Whether a buffer keeps its length: neither a resizable ArrayBuffer nor a growable SharedArrayBuffer. */
function fixedLength(buffer: ArrayBufferLike): boolean {
  const b = buffer as { resizable?: boolean; growable?: boolean };
  return b.resizable !== true && b.growable !== true;
}
