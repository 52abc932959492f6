import { cpus } from 'node:os';
import type { Explanation, SizeRun } from './algorithms/selection.js';
import type { Step } from './algorithms/schedule.js';
import { CallContext, CallTag, IN_PLACE, type InPlace, type Operator } from './collectives/call-context.js';
import { allgatherObject, bcastObject, gatherObject, runAsync, runSync, scatterObject } from './collectives/objects.js';
import { Probes } from './collectives/probe.js';
import { collectives, explainedCollectives } from './collectives/registry.js';
import type { RuntimeConfigInput } from './config/load.js';
import { TopocollError } from './errors.js';
import type { GroupPlan } from './groups/plan.js';
import type { NativeCollectiveCode, NativeEngine } from './native.js';
import { configurationOf, controlAllreduce, reconfigure, type Configuration, type ConfigurationParts } from './runtime/configuration.js';
import { checkAllgather } from './collectives/allgather.js';
import { FastPath } from './runtime/fast-path.js';
import type { JobPlanner } from './runtime/job-planner.js';
import { machineOf, nodeFactsOf } from './runtime/co-runners.js';
import { linkAddress, type CommunicatorParts, type JoinOrigin } from './runtime/join.js';
import { Messages, MessageRequest, ANY_SOURCE, ANY_TAG, type MessageStatus, type ObjectMessage } from './p2p/messages.js';
import type { CollectiveRequest } from './runtime/request.js';
import { levelColor, splitCommunicator, type SplitParent } from './runtime/sub-communicator.js';
import type { Route } from './runtime/router.js';
import { sharedMemoryReport, type SharedMemoryReport } from './runtime/shm-budget.js';
import { Windows, type TypedArrayClass } from './runtime/windows.js';
import { summarizeResidency, type PlacementReport } from './runtime/numa-residency.js';
import type { ReduceOpName } from './runtime/datatypes.js';
import { parseIndexList } from './topology/index-list.js';
import type { TypedArray } from './util/typed-array.js';

/**
 * Reads of a peer's mark before a fast-path wait hands over to the addon's wait (which spins,
 * yields, then sleeps): long enough to cover a peer that is a few hundred nanoseconds behind;
 * short when ranks outnumber cores, where a spinning rank holds off the peer it waits for.
 */
const FAST_SPIN = 4000;
const FAST_SPIN_SHARED = 64;

/** Cores of this machine: every rank of a node sees the same. */
const NODE_CORES = Math.max(1, cpus().length);

export { IN_PLACE, type InPlace, type Operator };

export interface LevelInfo {
  name: string;
  enabled: boolean;
  /** Size of this rank's group at the level (1 when it is in none there). */
  groupSize: number;
  isLeader: boolean;
  /** The algorithm of this rank's group at the level, per collective, by runs of message sizes (allgather, gather, scatter: of the whole vector). */
  algorithms?: {
    bcast: SizeRun[];
    reduce: SizeRun[];
    allgather: SizeRun[];
    gather: SizeRun[];
    scatter: SizeRun[];
    barrier: string;
  };
}

const {
  bcast,
  reduce,
  allreduce,
  allgather,
  allgatherv,
  gather,
  gatherv,
  scatter,
  scatterv,
  reduceScatterBlock,
  reduceScatter,
  scan,
  exscan,
  alltoall,
  alltoallv,
  barrier,
} = collectives;

/**
 * A group of processes that run collectives together. Every rank must call the same
 * collectives in the same order with matching arguments (MPI semantics); mismatches that can be
 * detected raise EMISMATCH. `*Sync` methods run on the calling thread and block the event loop
 * (fastest); the Promise twins run on the communicator's own native thread. Do not touch a
 * buffer while a Promise collective that uses it is pending.
 *
 * A facade: each collective is declared once in src/collectives/ (its checks, native call and
 * paths), and its three forms here call it; the control plane lives in runtime/configuration.ts
 * (configure), runtime/sub-communicator.ts (split, dup) and runtime/windows.ts (allocShared).
 */
export class Communicator {
  readonly rank: number;
  readonly size: number;
  readonly node: string;
  readonly localRank: number;
  readonly localSize: number;

  private readonly engine: NativeEngine;
  /** What collective calls use of this communicator (src/collectives/call-context.ts). */
  private readonly calls: CallContext;
  /** The configuration in force, and what stays the same through every configure(). */
  private configuration: Configuration;
  private readonly configurationParts: ConfigurationParts;
  private readonly planner: JobPlanner;
  private readonly allLevels: GroupPlan;
  private readonly numaNode?: number;
  private readonly origin: JoinOrigin;
  /** Shared windows (allocShared). */
  private readonly windows: Windows;
  private readonly probes: Probes;
  /** Point-to-point messages (src/p2p/messages.ts); undefined where they are not available (why: `messagesMissing`). */
  private messages?: Messages;
  private messagesMissing?: string;
  /** Every schedule of this communicator gets its own native id, whichever plan it belongs to. */
  private nextScheduleId = 0;
  /** Closes the communicator when the process exits without close() (see constructor). */
  private readonly closeAtExit = (): void => {
    if (this.calls.closed) return;
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
      budgetBytes: () => this.configuration.config.shm.budgetBytes,
      agree: (values) => {
        const out = new Float64Array(values.length);
        controlAllreduce(this.calls, this.configuration.control, values, out, CallTag.windowAgreement);
        return out;
      },
    });
    this.numaNode = parts.numaNode;
    this.origin = parts.origin;
    this.allLevels = parts.planner.buildAllLevels();
    const register = (encoded: Int32Array): number => {
      const id = this.nextScheduleId++;
      this.engine.setPlan(id, encoded);
      return id;
    };
    this.probes = new Probes(register);
    const native = process.arch === 'x64' && this.size > 1 && this.localSize === this.size ? this.engine.fastPath() : undefined;
    const fast =
      native === undefined ? undefined : new FastPath(native, this.engine.fastPathEngine, this.rank, parts.oversubscribed ? FAST_SPIN_SHARED : FAST_SPIN);
    this.configurationParts = {
      rank: this.rank,
      size: this.size,
      oversubscribed: parts.oversubscribed,
      cores: NODE_CORES,
      cpus: parts.origin.infos.map((info) => ({ machine: machineOf(info), cpus: parseIndexList(info.cpus) })),
      nodes: nodeFactsOf(parts.origin.infos, NODE_CORES),
      windows: this.windows,
      fastPathAvailable: fast !== undefined,
      register,
    };
    this.configuration = configurationOf(this.configurationParts, parts.plans, parts.config, parts.shmGroups);
    this.calls = new CallContext(this.engine, this.rank, this.size, fast, this.windows, this.configuration);
    this.openMessages(parts);
    // Nothing of the communicator keeps the event loop alive, so a script that returns without
    // close() exits; at exit (a return, process.exit() or an uncaught exception) it closes, so
    // that peers still expecting this rank in a collective get EPEERLOST rather than wait.
    process.on('exit', this.closeAtExit);
  }

  /**
   * Starts the messages' streams (src/p2p/messages.ts): every rank's port came with its
   * information (RankInfo.messagesPort), and peers reach it at the address their TCP links use.
   */
  private openMessages(parts: CommunicatorParts): void {
    const infos = parts.origin.infos;
    const opened = parts.messages;
    if (opened === undefined || infos.some((i) => i.messagesPort === undefined)) {
      this.messagesMissing = 'this communicator has no point-to-point messages';
    } else if (parts.origin.links.kind === 'p2p' && !infos.every((i) => i.host === infos[0]!.host)) {
      this.messagesMissing = 'point-to-point messages between the hosts of a host layer (createCommunicator, transport: mpi) are not available yet';
    } else {
      // Messages to ranks of this node go through the node segment's channels where they can.
      this.engine.attachMessages(opened.native);
      opened.native.start(
        opened.token,
        infos.map((_, r) => linkAddress(infos, r)),
        infos.map((i) => i.messagesPort!),
      );
      this.messages = new Messages(opened.native, this.rank, this.size, () => this.calls.ensureOpen(), this.engine);
      return;
    }
    opened?.native.close();
  }

  private msg(): Messages {
    if (this.messages === undefined) {
      this.calls.ensureOpen();
      throw new TopocollError('ENOTSUP', this.messagesMissing!, { rank: this.rank });
    }
    return this.messages;
  }

  // --- point-to-point messages (src/p2p/messages.ts) ---

  /** MPI_Send: sends `buf` to rank `dest` with `tag` (0 … 2³¹−1); returns once `buf` may be changed. */
  sendSync(buf: TypedArray, dest: number, tag = 0): void {
    this.msg().sendSync(buf, dest, tag);
  }

  /** MPI_Recv: receives the first matching message into `buf`; its source, tag and length in elements of `buf`'s type. ETRUNCATE if it is longer than `buf`. */
  recvSync(buf: TypedArray, source: number = ANY_SOURCE, tag: number = ANY_TAG): MessageStatus {
    return this.msg().recvSync(buf, source, tag);
  }

  /** MPI_Sendrecv: sends and receives at once (neither waits for the other); the receive's status. */
  sendrecvSync(sendBuf: TypedArray, dest: number, sendTag: number, recvBuf: TypedArray, source: number = ANY_SOURCE, recvTag: number = ANY_TAG): MessageStatus {
    return this.msg().sendrecvSync(sendBuf, dest, sendTag, recvBuf, source, recvTag);
  }

  /** sendSync as a Promise; do not touch `buf` until it settles. */
  send(buf: TypedArray, dest: number, tag = 0): Promise<void> {
    try {
      return Promise.resolve(this.msg().isend(buf, dest, tag));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** recvSync as a Promise. */
  recv(buf: TypedArray, source: number = ANY_SOURCE, tag: number = ANY_TAG): Promise<MessageStatus> {
    try {
      return Promise.resolve(this.msg().irecv(buf, source, tag));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** sendrecvSync as a Promise. */
  sendrecv(
    sendBuf: TypedArray,
    dest: number,
    sendTag: number,
    recvBuf: TypedArray,
    source: number = ANY_SOURCE,
    recvTag: number = ANY_TAG,
  ): Promise<MessageStatus> {
    try {
      return this.msg().sendrecv(sendBuf, dest, sendTag, recvBuf, source, recvTag);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** MPI_Isend: a request; bad arguments throw here, before anything is sent. */
  isend(buf: TypedArray, dest: number, tag = 0): MessageRequest<void> {
    return this.msg().isend(buf, dest, tag);
  }

  /** MPI_Irecv: a request whose wait() and await give the status. */
  irecv(buf: TypedArray, source: number = ANY_SOURCE, tag: number = ANY_TAG): MessageRequest<MessageStatus> {
    return this.msg().irecv(buf, source, tag);
  }

  /** Sends a value (structured clone, v8.serialize) to `dest`; EINVAL before anything is sent if it cannot be cloned. */
  sendObjectSync(value: unknown, dest: number, tag = 0): void {
    this.msg().sendObjectSync(value, dest, tag);
  }

  /** sendObjectSync as a Promise. */
  sendObject(value: unknown, dest: number, tag = 0): Promise<void> {
    try {
      return this.msg().sendObject(value, dest, tag);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Receives a value sent with sendObject: `{ value, source, tag }`. */
  recvObjectSync<T = unknown>(source: number = ANY_SOURCE, tag: number = ANY_TAG): ObjectMessage<T> {
    return this.msg().recvObjectSync<T>(source, tag);
  }

  /** recvObjectSync as a Promise. */
  recvObject<T = unknown>(source: number = ANY_SOURCE, tag: number = ANY_TAG): Promise<ObjectMessage<T>> {
    try {
      return this.msg().recvObject<T>(source, tag);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Changes the configuration while the communicator runs — which levels are on, the algorithm
   * of every level, segments (see RUNTIME_KEYS). Collective: every rank calls it at the same
   * point of its sequence of collectives with the same settings. Ranks that pass different
   * settings all get EMISMATCH and keep the old configuration; a rank that is in another
   * collective meanwhile gets EMISMATCH there. Cached schedules are dropped.
   */
  configure(partial: RuntimeConfigInput): void {
    this.calls.ensureOpen();
    this.configuration = reconfigure(this.calls, this.configuration, this.planner, this.configurationParts, partial);
  }

  /** Switches a level on or off (`world` cannot be switched off). Collective, like configure(). */
  setLevelEnabled(level: string, enabled: boolean): void {
    this.configure({ levels: { [level]: { enabled } } });
  }

  // --- the collectives: each declared once in src/collectives/, in three forms ---

  /** Every rank receives `buf` of rank `root`. */
  bcastSync(buf: TypedArray, root = 0): void {
    bcast.sync(this.calls, buf, root);
  }

  /** bcastSync as a Promise, run on the communicator's own thread; do not touch `buf` until it settles. */
  bcast(buf: TypedArray, root = 0): Promise<void> {
    return this.calls.promise(bcast, buf, root);
  }

  /** bcast as a request (MPI_Ibcast); bad arguments throw here, before anything is queued. */
  ibcast(buf: TypedArray, root = 0): CollectiveRequest {
    return this.calls.request(bcast, buf, root);
  }

  /**
   * Combines every rank's `send` element-wise with `op` into `recv` at `root`. At the root,
   * `send` may be IN_PLACE (then `recv` is the input); elsewhere `recv` may be null.
   */
  reduceSync(send: TypedArray | InPlace, recv: TypedArray | null, op: Operator = 'sum', root = 0): void {
    reduce.sync(this.calls, send, recv, op, root);
  }

  /** With a user-defined operator the work happens on the calling thread (it calls JavaScript). */
  reduce(send: TypedArray | InPlace, recv: TypedArray | null, op: Operator = 'sum', root = 0): Promise<void> {
    return this.calls.promise(reduce, send, recv, op, root);
  }

  /** reduce as a request (MPI_Ireduce). With a user-defined operator it runs here, as reduceSync. */
  ireduce(send: TypedArray | InPlace, recv: TypedArray | null, op: Operator = 'sum', root = 0): CollectiveRequest {
    return this.calls.request(reduce, send, recv, op, root);
  }

  /** Combines every rank's `send` with `op`; every rank receives the result in `recv`. */
  allreduceSync(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): void {
    allreduce.sync(this.calls, send, recv, op);
  }

  /** With a user-defined operator the work happens on the calling thread (it calls JavaScript). */
  allreduce(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): Promise<void> {
    return this.calls.promise(allreduce, send, recv, op);
  }

  /** allreduce as a request (MPI_Iallreduce). With a user-defined operator it runs here, as allreduceSync. */
  iallreduce(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): CollectiveRequest {
    return this.calls.request(allreduce, send, recv, op);
  }

  /**
   * Every rank's `send` gathered in rank order into `recv` on every rank: rank r's elements land
   * at [r·n, (r+1)·n) with n = send.length, the same on every rank; recv needs size·n elements.
   * IN_PLACE as send: this rank's block is already at its place in recv (n = recv.length / size).
   */
  allgatherSync(send: TypedArray | InPlace, recv: TypedArray): void {
    allgather.sync(this.calls, send, recv);
  }

  /** allgatherSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  allgather(send: TypedArray | InPlace, recv: TypedArray): Promise<void> {
    return this.calls.promise(allgather, send, recv);
  }

  /** allgather as a request (MPI_Iallgather). */
  iallgather(send: TypedArray | InPlace, recv: TypedArray): CollectiveRequest {
    return this.calls.request(allgather, send, recv);
  }

  /**
   * Allgather of blocks of different lengths: rank r contributes `counts[r]` elements (its
   * `send`), placed in rank order one after another in `recv` on every rank. Every rank must pass
   * the same `counts` (a rank passing others gets EMISMATCH). IN_PLACE: this rank's block is
   * already at its place in recv.
   */
  allgathervSync(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>): void {
    allgatherv.sync(this.calls, send, recv, counts);
  }

  /** allgathervSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  allgatherv(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>): Promise<void> {
    return this.calls.promise(allgatherv, send, recv, counts);
  }

  /** allgatherv as a request (MPI_Iallgatherv). */
  iallgatherv(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>): CollectiveRequest {
    return this.calls.request(allgatherv, send, recv, counts);
  }

  /**
   * Every rank's `send` gathered in rank order into `recv` at `root`: rank r's elements land at
   * [r·n, (r+1)·n) with n = send.length, the same on every rank; the root's recv needs size·n
   * elements, the others' is not used (pass null). IN_PLACE as send at the root: its block is
   * already at its place in recv (n = recv.length / size).
   */
  gatherSync(send: TypedArray | InPlace, recv: TypedArray | null, root = 0): void {
    gather.sync(this.calls, send, recv, root);
  }

  /** gatherSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  gather(send: TypedArray | InPlace, recv: TypedArray | null, root = 0): Promise<void> {
    return this.calls.promise(gather, send, recv, root);
  }

  /** gather as a request (MPI_Igather). */
  igather(send: TypedArray | InPlace, recv: TypedArray | null, root = 0): CollectiveRequest {
    return this.calls.request(gather, send, recv, root);
  }

  /**
   * Gather of blocks of different lengths: rank r contributes `counts[r]` elements (its `send`),
   * placed in rank order one after another in the root's `recv`. Every rank must pass the same
   * `counts` (a rank passing others gets EMISMATCH). IN_PLACE at the root: its block is already
   * at its place in recv.
   */
  gathervSync(send: TypedArray | InPlace, recv: TypedArray | null, counts: ArrayLike<number>, root = 0): void {
    gatherv.sync(this.calls, send, recv, counts, root);
  }

  /** gathervSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  gatherv(send: TypedArray | InPlace, recv: TypedArray | null, counts: ArrayLike<number>, root = 0): Promise<void> {
    return this.calls.promise(gatherv, send, recv, counts, root);
  }

  /** gatherv as a request (MPI_Igatherv). */
  igatherv(send: TypedArray | InPlace, recv: TypedArray | null, counts: ArrayLike<number>, root = 0): CollectiveRequest {
    return this.calls.request(gatherv, send, recv, counts, root);
  }

  /**
   * The root's `send` (size·n elements in rank order) scattered: rank r receives block r in
   * `recv`, n = recv.length, the same on every rank; the others' send is not used (pass null).
   * IN_PLACE as recv at the root: its block stays in send (n = send.length / size).
   */
  scatterSync(send: TypedArray | null, recv: TypedArray | InPlace, root = 0): void {
    scatter.sync(this.calls, send, recv, root);
  }

  /** scatterSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  scatter(send: TypedArray | null, recv: TypedArray | InPlace, root = 0): Promise<void> {
    return this.calls.promise(scatter, send, recv, root);
  }

  /** scatter as a request (MPI_Iscatter). */
  iscatter(send: TypedArray | null, recv: TypedArray | InPlace, root = 0): CollectiveRequest {
    return this.calls.request(scatter, send, recv, root);
  }

  /**
   * Scatter of blocks of different lengths: rank r receives `counts[r]` elements (its recv holds
   * at least as many) of the root's `send`, where the blocks lie in rank order one after
   * another. Every rank must pass the same `counts`. IN_PLACE at the root: its block stays in send.
   */
  scattervSync(send: TypedArray | null, recv: TypedArray | InPlace, counts: ArrayLike<number>, root = 0): void {
    scatterv.sync(this.calls, send, recv, counts, root);
  }

  /** scattervSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  scatterv(send: TypedArray | null, recv: TypedArray | InPlace, counts: ArrayLike<number>, root = 0): Promise<void> {
    return this.calls.promise(scatterv, send, recv, counts, root);
  }

  /** scatterv as a request (MPI_Iscatterv). */
  iscatterv(send: TypedArray | null, recv: TypedArray | InPlace, counts: ArrayLike<number>, root = 0): CollectiveRequest {
    return this.calls.request(scatterv, send, recv, counts, root);
  }

  /**
   * Every rank sends every rank a block: block j of `send` (n = send.length / size elements, the
   * same on every rank) goes to rank j, and block i of `recv` comes from rank i. IN_PLACE as
   * send: the input is `recv`, replaced by the result.
   */
  alltoallSync(send: TypedArray | InPlace, recv: TypedArray): void {
    alltoall.sync(this.calls, send, recv);
  }

  /** alltoallSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  alltoall(send: TypedArray | InPlace, recv: TypedArray): Promise<void> {
    return this.calls.promise(alltoall, send, recv);
  }

  /** alltoall as a request (MPI_Ialltoall). */
  ialltoall(send: TypedArray | InPlace, recv: TypedArray): CollectiveRequest {
    return this.calls.request(alltoall, send, recv);
  }

  /**
   * Alltoall of blocks of different lengths, packed in rank order: `sendCounts[j]` elements of
   * `send` go to rank j, `recvCounts[i]` elements of `recv` come from rank i. Rank i's
   * sendCounts[j] must equal rank j's recvCounts[i] (ranks that disagree get EMISMATCH).
   * IN_PLACE as send: the input is `recv`, laid out by `recvCounts` (`sendCounts` is not read).
   */
  alltoallvSync(send: TypedArray | InPlace, sendCounts: ArrayLike<number> | null, recv: TypedArray, recvCounts: ArrayLike<number>): void {
    alltoallv.sync(this.calls, send, sendCounts, recv, recvCounts);
  }

  /** alltoallvSync as a Promise, run on the communicator's own thread; do not touch the buffers until it settles. */
  alltoallv(send: TypedArray | InPlace, sendCounts: ArrayLike<number> | null, recv: TypedArray, recvCounts: ArrayLike<number>): Promise<void> {
    return this.calls.promise(alltoallv, send, sendCounts, recv, recvCounts);
  }

  /** alltoallv as a request (MPI_Ialltoallv). */
  ialltoallv(send: TypedArray | InPlace, sendCounts: ArrayLike<number> | null, recv: TypedArray, recvCounts: ArrayLike<number>): CollectiveRequest {
    return this.calls.request(alltoallv, send, sendCounts, recv, recvCounts);
  }

  /**
   * Every rank's `send` (size·n elements) combined element-wise with `op`; rank r receives block
   * r of the result (n = recv.length elements) in `recv`. IN_PLACE as send: the input is `recv`
   * (size·n elements) and the result its first n.
   */
  reduceScatterBlockSync(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): void {
    reduceScatterBlock.sync(this.calls, send, recv, op);
  }

  /** With a user-defined operator the work happens on the calling thread (it calls JavaScript). */
  reduceScatterBlock(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): Promise<void> {
    return this.calls.promise(reduceScatterBlock, send, recv, op);
  }

  /** reduceScatterBlock as a request (MPI_Ireduce_scatter_block). With a user-defined operator it runs here. */
  ireduceScatterBlock(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): CollectiveRequest {
    return this.calls.request(reduceScatterBlock, send, recv, op);
  }

  /**
   * Reduce-scatter of blocks of different lengths: `send` holds every rank's block one after
   * another (`counts[r]` elements for rank r), combined element-wise with `op`; rank r receives
   * its block of the result in `recv`. Every rank passes the same `counts`. IN_PLACE as send: the
   * input is `recv`, the result its first counts[rank] elements.
   */
  reduceScatterSync(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>, op: Operator = 'sum'): void {
    reduceScatter.sync(this.calls, send, recv, counts, op);
  }

  /** With a user-defined operator the work happens on the calling thread (it calls JavaScript). */
  reduceScatter(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>, op: Operator = 'sum'): Promise<void> {
    return this.calls.promise(reduceScatter, send, recv, counts, op);
  }

  /** reduceScatter as a request (MPI_Ireduce_scatter). With a user-defined operator it runs here. */
  ireduceScatter(send: TypedArray | InPlace, recv: TypedArray, counts: ArrayLike<number>, op: Operator = 'sum'): CollectiveRequest {
    return this.calls.request(reduceScatter, send, recv, counts, op);
  }

  /**
   * Inclusive scan (MPI_Scan): rank r receives x0 op x1 op … op xr in `recv`, x being every rank's
   * `send` (IN_PLACE: `recv` holds the input). Every operator in rank order, commutative or not.
   */
  scanSync(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): void {
    scan.sync(this.calls, send, recv, op);
  }

  /** With a user-defined operator the work happens on the calling thread (it calls JavaScript). */
  scan(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): Promise<void> {
    return this.calls.promise(scan, send, recv, op);
  }

  /** scan as a request (MPI_Iscan). With a user-defined operator it runs here. */
  iscan(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): CollectiveRequest {
    return this.calls.request(scan, send, recv, op);
  }

  /** Exclusive scan (MPI_Exscan): rank r receives x0 op … op x(r−1); rank 0's `recv` is left untouched. */
  exscanSync(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): void {
    exscan.sync(this.calls, send, recv, op);
  }

  /** With a user-defined operator the work happens on the calling thread (it calls JavaScript). */
  exscan(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): Promise<void> {
    return this.calls.promise(exscan, send, recv, op);
  }

  /** exscan as a request (MPI_Iexscan). With a user-defined operator it runs here. */
  iexscan(send: TypedArray | InPlace, recv: TypedArray, op: Operator = 'sum'): CollectiveRequest {
    return this.calls.request(exscan, send, recv, op);
  }

  /** Returns once every rank has entered the barrier. */
  barrierSync(): void {
    barrier.sync(this.calls);
  }

  /** barrierSync as a Promise, run on the communicator's own thread: settles once every rank has entered the barrier. */
  barrier(): Promise<void> {
    return this.calls.promise(barrier);
  }

  /** barrier as a request (MPI_Ibarrier): completes once every rank has entered it. */
  ibarrier(): CollectiveRequest {
    return this.calls.request(barrier);
  }

  // --- the object forms: values by structured clone (v8.serialize), src/collectives/objects.ts ---

  /**
   * Every rank gets rank `root`'s value, cloned as `structuredClone` would (nested objects, Maps,
   * Sets, typed arrays, Dates; no functions). A value that cannot be cloned: EINVAL on every rank.
   */
  bcastObjectSync<T>(value: T, root = 0): T {
    return runSync(this, bcastObject(this, value, root));
  }

  /** bcastObjectSync as a Promise. */
  bcastObject<T>(value: T, root = 0): Promise<T> {
    return runAsync(this, bcastObject(this, value, root));
  }

  /** Every rank's value in rank order at rank `root`; null on the other ranks. */
  gatherObjectSync<T>(value: T, root = 0): T[] | null {
    return runSync(this, gatherObject(this, value, root));
  }

  /** gatherObjectSync as a Promise. */
  gatherObject<T>(value: T, root = 0): Promise<T[] | null> {
    return runAsync(this, gatherObject(this, value, root));
  }

  /** Every rank's value in rank order, at every rank. */
  allgatherObjectSync<T>(value: T): T[] {
    return runSync(this, allgatherObject(this, value));
  }

  /** allgatherObjectSync as a Promise. */
  allgatherObject<T>(value: T): Promise<T[]> {
    return runAsync(this, allgatherObject(this, value));
  }

  /** Rank i gets `values[i]` of rank `root`, which passes one value per rank (the others pass null). */
  scatterObjectSync<T>(values: readonly T[] | null, root = 0): T {
    return runSync(this, scatterObject(this, values, root));
  }

  /** scatterObjectSync as a Promise. */
  scatterObject<T>(values: readonly T[] | null, root = 0): Promise<T> {
    return runAsync(this, scatterObject(this, values, root));
  }

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
    this.probes.run(this.calls, steps, buffer, segment);
  }

  // --- what runs, and where ---

  /**
   * The levels of the job, bottom-up, with this rank's place in each and the algorithm its
   * group there uses for small and large messages (as the router sends calls there); switched-off
   * levels have `enabled: false`.
   */
  levels(): LevelInfo[] {
    const { plan, router } = this.configuration;
    const chain = plan.chain(this.rank);
    const names = [...new Set([...this.allLevels.levels, ...plan.levels])];
    return names.map((name) => {
      const group = chain.find((g) => g.level === name);
      const enabled = plan.levels.includes(name);
      const info: LevelInfo = { name, enabled, groupSize: group?.members.length ?? 1, isLeader: group === undefined || group.leader === this.rank };
      if (group !== undefined) info.algorithms = router.algorithms(group);
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
    this.calls.ensureOpen();
    if (!Number.isInteger(bytes) || bytes < 0) throw new TopocollError('EINVAL', `explain: bytes ${bytes} is not an integer ≥ 0`, { rank: this.rank });
    if (!(explainedCollectives as readonly string[]).includes(collective))
      throw new TopocollError('EINVAL', `explain: "${String(collective)}" is not a collective (${explainedCollectives.join(', ')})`, {
        rank: this.rank,
      });
    const { plans, router } = this.configuration;
    return { ...plans.explain(collective, bytes), route: router.route(collective, bytes) };
  }

  /**
   * Where this rank's shared-memory queue really is: the NUMA node of each of its pages
   * (move_pages, query mode) against the node the rank runs on. First touch should make it
   * `local`; `unknown` when the rank is alone on its node or the kernel cannot say.
   */
  placement(): PlacementReport {
    this.calls.ensureOpen();
    return summarizeResidency(this.engine.ownRegionNodes(), this.numaNode);
  }

  /**
   * The node's shared memory as this communicator uses it: the budget, the segment and what it is
   * made of (every part a fixed size per local rank), the channels the node's ranks have made
   * so far out of their outboxes, and the windows. Local: reads the segment, sends nothing.
   */
  sharedMemory(): SharedMemoryReport {
    this.calls.ensureOpen();
    return sharedMemoryReport(this.engine.sharedMemory(), this.configuration.config.shm.budgetBytes, this.localSize, this.windows.bytes);
  }

  // --- communicators and windows (the control plane's other modules) ---

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
    this.calls.ensureOpen();
    const parent: SplitParent = {
      rank: this.rank,
      size: this.size,
      config: this.configuration.config,
      numaNode: this.numaNode,
      origin: this.origin,
      exchange: (send, recv) => this.splitExchange(send, recv),
    };
    const parts = await splitCommunicator(parent, color, key);
    return parts === undefined ? undefined : new Communicator(parts);
  }

  /** An allgather of bytes marked as split()'s: a rank in any other collective gets EMISMATCH. */
  private splitExchange(send: Uint8Array, recv: Uint8Array): Promise<void> {
    const calls = this.calls;
    return calls.async(
      () => {
        const type = checkAllgather(calls, send, recv, undefined);
        const p = calls.plans.allgather(recv.byteLength, 1, send.byteLength);
        const call = calls.allgatherCall(p, send, recv, send.length, type, undefined);
        call.planHash = calls.tagged(CallTag.split);
        return this.engine.runAllgatherAsync(call).done;
      },
      send,
      recv,
    );
  }

  /**
   * MPI_Comm_split_type with hardware levels: the communicator of the ranks that share this
   * rank's unit at `level` (a name `levels()` lists, e.g. `'numa'`, `'node'`, a switch level;
   * switched off or not), ranked as in this one. Collective, as split(); EINVAL for a level the
   * job does not have.
   */
  async splitByLevel(level: string): Promise<Communicator> {
    this.calls.ensureOpen();
    return (await this.split(levelColor(this.allLevels, this.rank, level), this.rank))!;
  }

  /** MPI_Comm_dup: the same ranks in the same order, a communicator of their own (split(0, rank)). Collective. */
  async dup(): Promise<Communicator> {
    return (await this.split(0, this.rank))!;
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
    this.calls.ensureOpen();
    return this.windows.allocate(type, length);
  }

  /**
   * MPI_Win_free: unmaps the window `array` views (any view of it). Collective: returns once
   * every rank has called it, so no rank still reads a part freed here. Refused (EINVAL) while a
   * request or Promise collective of this rank is pending, since it may use the window.
   */
  freeShared(array: TypedArray): void {
    this.calls.ensureOpen();
    this.windows.free(array, this.calls.asyncPending);
  }

  /** MPI_Win_shared_query: the part of rank `rank` (on this node) of the window `array` views, as `array`'s type. Local. */
  sharedQuery<T extends TypedArray>(array: T, rank: number): T {
    this.calls.ensureOpen();
    return this.windows.query(array, rank);
  }

  /**
   * Releases shared memory, sockets and threads. Idempotent; collectives afterwards fail with
   * ECLOSED. Over a JavaScript layer (createCommunicator), the sends of the collectives that
   * returned are in the layer when close() returns, and the process stays alive until the
   * layer settled them (at most the setup's time limit, timeouts.initMs): a collective may return
   * before its last sends have left, as in MPI, and they still arrive.
   */
  close(): void {
    if (this.calls.closed) return;
    this.calls.closed = true;
    process.off('exit', this.closeAtExit);
    // Pending messages end with ECLOSED; those that arrived and were never received are reported.
    this.messages?.close();
    // Peers still in a call this rank made in JavaScript must not take it for one it skipped.
    this.calls.fast?.publish();
    this.engine.close();
    this.windows.clear();
    const links = this.origin.links;
    if (links.kind === 'p2p') links.finishSends?.(this.origin.timeoutMs);
  }
}

export type { ReduceOpName, TypedArray, NativeCollectiveCode };
