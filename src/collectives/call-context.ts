import { markAsUntransferable } from 'node:worker_threads';
import { TopocollError } from '../errors.js';
import { NativeCollective, type NativeAllgatherCall, type NativeCall, type NativeCollectiveCode, type NativeEngine, type NativeJob } from '../native.js';
import type { AllgatherCallPlan, CallPlan, CollectivePlans } from '../runtime/collective-plans.js';
import type { FastPath } from '../runtime/fast-path.js';
import { CollectiveRequest } from '../runtime/request.js';
import type { Router } from '../runtime/router.js';
import type { Windows } from '../runtime/windows.js';
import { datatypeOf, type Datatype, type ReduceOpName, type UserOp } from '../runtime/datatypes.js';
import type { TypedArray } from '../util/typed-array.js';

/** Pass as the send buffer to reduce in place: the receive buffer holds the input and the result. */
export const IN_PLACE: unique symbol = Symbol('topocoll.IN_PLACE');
export type InPlace = typeof IN_PLACE;

/** A built-in operator name, or a JavaScript operator made with userOp(). */
export type Operator = ReduceOpName | UserOp;

/**
 * Plan-hash tags: a call made for one purpose carries its tag mixed into the plan hash of its
 * messages, so that a rank in any other call (which carries another) gets EMISMATCH instead of
 * exchanging with a protocol its peers do not run.
 */
export const CallTag = {
  /** The collectives configure() runs itself. */
  control: 0x9e3779b9,
  /** runProbe's calls. */
  probe: 0x85ebca6b,
  /** The exchanges of split() and dup(). */
  split: 0xc2b2ae35,
  /** The agreements of allocShared() and freeShared(). */
  windowAgreement: 0x27d4eb2f,
  /** A bcast, allreduce or allgather on shared windows: such calls run other schedules. */
  windowCall: 0x165667b1,
} as const;

/**
 * One collective, declared once (src/collectives/<name>.ts): its argument checks, the native
 * call it makes (the header fields its messages carry), the plans it asks for and the fast path
 * it may take. The communicator's Sync, Promise and request forms all come from it: `sync` is the
 * blocking form; the Promise and request forms run `queue` through CallContext.promise and
 * CallContext.request, which hold `buffers` until the call ends. `A`: the form's arguments, as
 * the communicator's methods take them (defaults applied).
 */
export interface CollectiveDescriptor<A extends unknown[]> {
  /** The collective, as explain() and the router name it. */
  readonly name: string;
  /** The blocking form: checks, then the fast path where the router sends it, else the addon on this thread. */
  sync(ctx: CallContext, ...args: A): void;
  /**
   * Checks and queues the call on the communicator's progress thread; argument errors throw
   * before anything is queued. Undefined: the call ran on this thread (a user operator, which
   * calls JavaScript).
   */
  queue(ctx: CallContext, ...args: A): NativeJob | undefined;
  /** The buffers the queued call uses: held (and kept alive) until it ends. */
  buffers(...args: A): unknown[];
}

/** Everything that changes with the configuration: made anew by configure(). */
export interface CallState {
  plans: CollectivePlans;
  router: Router;
  planHash: number;
  /** The plan's groups keep the ranks in order (non-commutative operators may use it). */
  rankOrdered: boolean;
  /** Plans of bcasts on windows (made on first use). */
  windowBcastPlans: () => CollectivePlans;
}

/**
 * What every collective call needs of its communicator: the engine, this rank's place, the
 * current plans and router, the JavaScript fast path, the calls pending on the progress thread,
 * the argument checks the collectives share, the reused native call objects and the runners of
 * the Promise and request forms. The descriptors (src/collectives/*.ts) read and use it; the
 * communicator owns it and installs a new CallState at every configure().
 */
export class CallContext {
  plans: CollectivePlans;
  router: Router;
  planHash: number;
  private rankOrdered: boolean;
  private windowPlansOf: () => CollectivePlans;
  closed = false;
  /** Promise collectives and requests not settled yet: while any is, blocking calls queue behind them in the addon. */
  asyncPending = 0;
  /** The last send and recv of a fast-path call found apart (checkApart). */
  apartSend?: TypedArray;
  apartRecv?: TypedArray;
  /** Sum and largest of the counts blockCounts last checked. */
  blockTotal = 0;
  blockLargest = 0;
  private countsScratch?: Float64Array;

  constructor(
    readonly engine: NativeEngine,
    readonly rank: number,
    readonly size: number,
    /** Small one-node calls in JavaScript (src/runtime/fast-path.ts); undefined where it cannot run. */
    readonly fast: FastPath | undefined,
    private readonly windows: Windows,
    state: CallState,
  ) {
    this.plans = state.plans;
    this.router = state.router;
    this.planHash = state.planHash;
    this.rankOrdered = state.rankOrdered;
    this.windowPlansOf = state.windowBcastPlans;
  }

  /** Switches to the plans of a new configuration (configure(), between its two agreements). */
  install(state: CallState): void {
    this.plans = state.plans;
    this.router = state.router;
    this.planHash = state.planHash;
    this.rankOrdered = state.rankOrdered;
    this.windowPlansOf = state.windowBcastPlans;
  }

  /** The plans of a bcast whose buffer is a shared window. */
  windowBcastPlans(): CollectivePlans {
    return this.windowPlansOf();
  }

  /** The plan hash mixed with `tag` (CallTag): the call's messages then match only calls with the same tag. */
  tagged(tag: number): number {
    return (this.planHash ^ tag) >>> 0;
  }

  // --- argument checks: everything is validated before anything is sent ---
  // Each check only tests and throws what a cold method builds: the messages' code would use up
  // the bytecode budget within which V8 inlines the Sync calls' helpers. They allocate nothing:
  // the Sync calls are the latency path, and garbage there means collections while peers wait.

  ensureOpen(): void {
    if (this.closed) throw this.argumentError('ECLOSED', 'the communicator is closed');
  }

  checkRoot(root: number): void {
    if (!Number.isInteger(root) || root < 0 || root >= this.size)
      throw this.argumentError('EINVAL', `root ${root} is not a rank of this communicator (0…${this.size - 1})`);
  }

  argumentError(code: 'EINVAL' | 'ECLOSED', message: string, hint?: string): TopocollError {
    return new TopocollError(code, message, hint === undefined ? { rank: this.rank } : { rank: this.rank, hint });
  }

  /** An open communicator, a rank as `root`, and `buf` a typed array: its datatype. */
  checkBuffer(buf: unknown, what: string, root: number): Datatype {
    this.ensureOpen();
    this.checkRoot(root);
    return datatypeOf(buf, what);
  }

  /**
   * Same type and length; distinct arrays unless IN_PLACE. Two views that overlap only in part
   * are refused by the addon, which has the addresses at hand (reading `.buffer` here would
   * cost more than the rest of a small call).
   */
  checkPair(send: TypedArray, sendType: Datatype, recv: TypedArray, recvType: Datatype, inPlace: boolean): void {
    if (sendType !== recvType || send.length !== recv.length || (!inPlace && send === recv && send.length > 0))
      throw this.pairError(send, sendType, recv, recvType);
  }

  private pairError(send: TypedArray, sendType: Datatype, recv: TypedArray, recvType: Datatype): TopocollError {
    if (sendType !== recvType) return this.argumentError('EINVAL', `send is ${sendType.name} but recv is ${recvType.name}`);
    if (send.length !== recv.length) return this.argumentError('EINVAL', `send has ${send.length} elements but recv has ${recv.length}`);
    return this.argumentError('EINVAL', 'send and recv overlap', 'Pass IN_PLACE as send to reduce in place.');
  }

  /**
   * Refuses views of one buffer that share bytes, as the addon does from the addresses: for the
   * fast path, which does not enter the addon. Reading `.buffer` costs about a quarter of a fast
   * call, so the last pair found apart is remembered (apartSend, apartRecv), and callers compare
   * with it before they call this — a view's buffer, offset and length never change unless its
   * buffer can be resized (such pairs are checked every time).
   */
  /** checkApart, unless `send` and `recv` are the last pair found apart. */
  ensureApart(send: TypedArray, recv: TypedArray, hint: string): void {
    if (send !== this.apartSend || recv !== this.apartRecv) this.checkApart(send, recv, hint);
  }

  checkApart(send: TypedArray, recv: TypedArray, hint: string): void {
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

  /** allgatherv's counts as a Float64Array of non-negative integers, one per rank (their sum in blockTotal, the largest in blockLargest). */
  blockCounts(counts: ArrayLike<number>): Float64Array {
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
   * Whether a user operator may be applied in any order; a non-commutative one needs a plan
   * whose groups keep the ranks in order (each group covers consecutive ranks).
   */
  checkOrder(op: UserOp): boolean {
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

  // --- the native call objects ---

  /**
   * Fills and returns the one NativeCall of this communicator: collective `c` with the
   * schedules and segment of `p` (CollectivePlans gives -1 for a phase the collective lacks),
   * this communicator's plan hash and no user operator (callers that need others set the
   * fields after).
   */
  nativeCall(
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

  /** Fills and returns the one NativeAllgatherCall of this communicator (window plans carry CallTag.windowCall). */
  allgatherCall(
    p: AllgatherCallPlan,
    send: TypedArray,
    recv: TypedArray,
    count: number,
    type: Datatype,
    counts: Float64Array | undefined,
  ): NativeAllgatherCall {
    const call = this.rootedCall(NativeCollective.allgather, 0, p, send, recv, count, type, counts);
    if (p.windowed === true) call.planHash = this.tagged(CallTag.windowCall);
    return call;
  }

  /**
   * Fills and returns the one NativeAllgatherCall of this communicator for collective `c` on
   * rank blocks: an allgather (allgatherCall), a gather to `root`, a scatter from it, or a
   * reduce-scatter (root 0; the caller sets `op` or `user`) — send and recv as the addon's
   * CallArgs::block_counts says, the phases as `p` gives.
   */
  rootedCall(
    c: NonNullable<NativeAllgatherCall['collective']>,
    root: number,
    p: AllgatherCallPlan,
    send: TypedArray | null,
    recv: TypedArray | null,
    count: number,
    type: Datatype,
    counts: Float64Array | undefined,
  ): NativeAllgatherCall {
    const call = this.allgatherArgs;
    call.collective = c;
    call.root = root;
    call.op = 0;
    call.user = undefined;
    call.gatherPlan = p.gather;
    call.bcastPlan = p.bcast;
    call.send = send;
    call.recv = recv;
    call.count = count;
    call.counts = counts;
    call.dtype = type.code;
    call.planHash = this.planHash;
    call.segment = p.segment;
    call.bcastSegment = p.bcastSegment;
    return call;
  }

  /** Reused by every allgather, gather, scatter and reduce-scatter call (the native side reads it before the call returns or queues). */
  private readonly allgatherArgs: NativeAllgatherCall = {
    collective: NativeCollective.allgather,
    root: 0,
    op: 0,
    user: undefined,
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

  // --- the Promise and request forms ---

  /** `d`'s Promise form: argument errors reject the Promise; its buffers stay referenced until it settles. */
  promise<A extends unknown[]>(d: CollectiveDescriptor<A>, ...args: A): Promise<void> {
    return this.async(
      () => {
        const job = d.queue(this, ...args);
        return job === undefined ? Promise.resolve() : job.done;
      },
      ...d.buffers(...args),
    );
  }

  /** `d`'s request form (MPI_I*): argument errors throw here, before anything is queued. */
  request<A extends unknown[]>(d: CollectiveDescriptor<A>, ...args: A): CollectiveRequest {
    return this.requestOf(() => d.queue(this, ...args), ...d.buffers(...args));
  }

  /**
   * A request over a queued collective; `start` returning undefined means it ran on this thread
   * already. Argument errors throw here. Until its end is known it counts as pending, so that
   * Sync calls do not take the fast path past it.
   */
  private requestOf(start: () => NativeJob | undefined, ...keepAlive: unknown[]): CollectiveRequest {
    this.refuseResizable(keepAlive);
    const job = start();
    this.holdBuffers(keepAlive);
    this.asyncPending++;
    return new CollectiveRequest(this.engine, job, () => void this.asyncPending--, keepAlive);
  }

  /** Argument errors reject the Promise instead of throwing; buffers stay referenced until it settles. */
  async(start: () => Promise<void>, ...keepAlive: unknown[]): Promise<void> {
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
}

/** Whether a buffer keeps its length: neither a resizable ArrayBuffer nor a growable SharedArrayBuffer. */
function fixedLength(buffer: ArrayBufferLike): boolean {
  const b = buffer as { resizable?: boolean; growable?: boolean };
  return b.resizable !== true && b.growable !== true;
}
