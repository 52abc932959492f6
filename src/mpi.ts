/**
 * topocoll/mpi: MPI communicators as topocoll's point-to-point layer (PointToPoint), over the
 * optional addon build/mpi/Release/topocoll_mpi.node (native/mpi/, built by
 * scripts/build-mpi.mjs when an MPI library is installed).
 *
 * ```js
 * import { initMpi } from 'topocoll/mpi';
 * const world = initMpi();               // MPI_Init_thread(MPI_THREAD_MULTIPLE), or joins MPI
 * const comm = await createCommunicator(world);
 * ```
 *
 * Every communicator carries two MPI communicators: its own (for `send`/`recv`, which topocoll
 * uses while it sets a communicator up, and for the reference collectives) and a private
 * duplicate behind `native`, over which topocoll's collectives run from topocoll's threads — so
 * their tags never meet the application's messages. Creating that duplicate is collective, which
 * is why `initMpi`, `split` and `dup` (collective already) make it at once.
 *
 * `send`/`recv` use the communicator's own tags: topocoll takes tags `tagBase` (0) … 3071 on it
 * while it sets up; an application that also sends its own messages on this communicator uses
 * other tags, or a `dup()`.
 *
 * MPI is finalized when the process exits (if this module initialised it). MPI objects are
 * process-wide: use one thread (the main thread) for MPI calls from JavaScript.
 *
 * @module topocoll/mpi
 */

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { TopocollError, rethrowNative } from './errors.js';
import type { PointToPoint } from './p2p/point-to-point.js';
import { datatypeOf, reduceOpCode, type Datatype, type ReduceOpName } from './runtime/datatypes.js';
import { PACKAGE_ROOT } from './util/package-root.js';
import { pollUntilDone } from './util/poll.js';
import type { TypedArray } from './util/typed-array.js';

/** MPI's thread support level (MPI_THREAD_*). topocoll's native layer needs `multiple`, or at least `serialized`. */
export type MpiThreadLevel = 'single' | 'funneled' | 'serialized' | 'multiple';

const THREAD_LEVELS: readonly MpiThreadLevel[] = ['single', 'funneled', 'serialized', 'multiple'];

/** The addon's exports (native/mpi/mpi_addon.cc). Handles: 0 = the world's duplicate. */
interface RawMpiAddon {
  init(isMainThread: boolean): { provided: number; rank: number; size: number; initializedHere: boolean; tagUb: number };
  commRank(handle: number): number;
  commSize(handle: number): number;
  commSplit(handle: number, color: number | undefined, key: number): number;
  commDup(handle: number): number;
  commFree(handle: number): void;
  isend(handle: number, peer: number, tag: number, data: Uint8Array): number;
  irecv(handle: number, peer: number, tag: number, maxBytes: number): number;
  test(id: number): undefined | true | Uint8Array;
  cancelRecv(id: number): boolean;
  p2p(handle: number, tagBase: number): object;
  p2pHandOut(native: object): boolean;
  p2pDrop(native: object): boolean;
  allreduce(handle: number, send: TypedArray, recv: TypedArray, dtype: string, op: string): void;
  reduce(handle: number, send: TypedArray, recv: TypedArray | null, dtype: string, op: string, root: number): void;
  bcast(handle: number, buf: TypedArray, dtype: string, root: number): void;
  allgather(handle: number, send: TypedArray, recv: TypedArray, dtype: string): void;
  gather(handle: number, send: TypedArray | null, recv: TypedArray | null, dtype: string, root: number, counts: Float64Array | null): void;
  scatter(handle: number, send: TypedArray | null, recv: TypedArray | null, dtype: string, root: number, counts: Float64Array | null): void;
  reduceScatter(handle: number, send: TypedArray | null, recv: TypedArray, dtype: string, op: string, counts: Float64Array | null): void;
  scan(handle: number, send: TypedArray | null, recv: TypedArray, dtype: string, op: string, exclusive: boolean): void;
  alltoall(handle: number, send: TypedArray | null, recv: TypedArray, dtype: string, sendCounts: Float64Array | null, recvCounts: Float64Array | null): void;
  barrier(handle: number): void;
  abort(code: number): never;
  setExitStatus(status: number): void;
}

const BUILD_HINT = 'Install Open MPI or MPICH (mpicc on PATH), then run "npm run build:mpi" in the topocoll package.';

let addon: RawMpiAddon | undefined;

/**
 * Loads build/mpi/Release/topocoll_mpi.node once; `TOPOCOLL_MPI_ADDON` names another build
 * instead (as TOPOCOLL_ADDON does for the main addon, src/native.ts): one against another MPI
 * (`npm run build:mpi -- --mpi mpich` writes build/mpich/Release/topocoll_mpi.node), relative to
 * the working directory.
 */
function load(): RawMpiAddon {
  if (addon !== undefined) return addon;
  const path = addonPath();
  // UCX (MPICH's ch4:ucx, Open MPI's pml/osc ucx) patches mmap, munmap, brk and sbrk in libc's
  // code ("bistro" hooks) while V8's threads run through those functions; under MPICH that
  // crashes Node now and then (V8 faults in its own heap; openucx/ucx#3831 under MPICH, #4870
  // under the JVM). libucm reads this variable once, when the dynamic loader brings it in with
  // the MPI library, so it is set before the addon loads. UCX then runs without its
  // registration cache (RDMA rendezvous registers per message); a value the user set is kept.
  process.env.UCX_MEM_MMAP_HOOK_MODE ??= 'none';
  try {
    addon = createRequire(import.meta.url)(path) as RawMpiAddon;
  } catch (e) {
    throw new TopocollError('EINVAL', `topocoll/mpi could not be loaded from ${path}: ${e instanceof Error ? e.message : String(e)}`, {
      hint: 'Is the MPI library it was built against still installed? Rebuild with "npm run build:mpi".',
      cause: e,
    });
  }
  return addon;
}

/** The file load() loads: TOPOCOLL_MPI_ADDON's, or the default build's. Throws EINVAL if there is none. */
function addonPath(): string {
  const chosen = process.env.TOPOCOLL_MPI_ADDON;
  if (chosen) {
    const path = resolve(chosen);
    if (existsSync(path)) return path;
    throw new TopocollError('EINVAL', `topocoll/mpi is not built at ${path} (TOPOCOLL_MPI_ADDON)`, {
      hint: 'Build it there ("npm run build:mpi -- --mpi <name>" writes build/<name>/Release/topocoll_mpi.node), or unset TOPOCOLL_MPI_ADDON to load the default build.',
    });
  }
  const candidates = ['build/mpi/Release/topocoll_mpi.node', 'build/mpi/Debug/topocoll_mpi.node'].map((p) => join(PACKAGE_ROOT, p));
  const path = candidates.find((p) => existsSync(p));
  // Not built: no MPI where the package was installed (scripts/build-mpi.mjs skips it then, and
  // recent npm runs no install script it was not allowed to), a capability this installation lacks.
  if (path === undefined) throw new TopocollError('ENOTSUP', `topocoll/mpi is not built (looked for ${candidates.join(', ')})`, { hint: BUILD_HINT });
  return path;
}

function call<T>(f: (a: RawMpiAddon) => T): T {
  const a = load();
  try {
    return f(a);
  } catch (e) {
    rethrowNative(e, { keepCause: true });
  }
}

/** Whether topocoll/mpi's addon is built and loads (it does not initialise MPI). */
export function mpiAvailable(): boolean {
  try {
    load();
    return true;
  } catch {
    return false;
  }
}

let world: MpiCommunicator | undefined;

/**
 * Initialises MPI (MPI_Init_thread with MPI_THREAD_MULTIPLE requested) unless it is initialised
 * already (then joins it), and returns the world communicator (a duplicate of MPI_COMM_WORLD).
 * Collective over MPI_COMM_WORLD the first time; later calls return the same object.
 */
export function initMpi(): MpiCommunicator {
  if (world !== undefined) return world;
  const info = call((a) => a.init(isMainThread));
  // A process leaving with a non-zero status does not finalize MPI (native/mpi/mpi_runtime.h):
  // after a peer's death MPI_Finalize may never return, and the launcher ends the job anyway.
  if (info.initializedHere && isMainThread) process.on('exit', (code) => load().setExitStatus(code));
  const level = THREAD_LEVELS[info.provided] ?? 'single';
  world = new MpiCommunicator(0, info.rank, info.size, level, info.tagUb, nativeAllowed(level) ? makeNative(0) : undefined);
  return world;
}

/**
 * topocoll calls the native layer from its own threads, which MPI allows from MPI_THREAD_SERIALIZED
 * on. Below that (MPI initialised by someone else, with less) there is no native layer and
 * topocoll carries its messages between nodes through send/recv (Promise collectives only).
 */
function nativeAllowed(level: MpiThreadLevel): boolean {
  return level === 'serialized' || level === 'multiple';
}

/** MPI_Abort(MPI_COMM_WORLD, code): ends every process of the job at once. */
export function abortMpi(code = 1): never {
  return call((a) => a.abort(code));
}

function makeNative(handle: number): object {
  return call((a) => a.p2p(handle, 0));
}

/**
 * A communicator collected without free() lets go of its MPI communicator and its native layer
 * (which lives on while topocoll holds it: native/mpi/p2p_layer.h, Ownership). Never throws:
 * MPI may have been finalized by then.
 */
const collected = new FinalizationRegistry<{ handle: number; nativeLayer: object | undefined }>(({ handle, nativeLayer }) => {
  try {
    const a = load();
    if (nativeLayer !== undefined) a.p2pDrop(nativeLayer);
    a.commFree(handle);
  } catch {
    // MPI finalized, or the communicator freed some other way: nothing left to free
  }
});

function completion(id: number): Promise<true | Uint8Array> {
  return pollUntilDone(() => call((a) => a.test(id)));
}

function checkInteger(value: unknown, what: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new TopocollError('EINVAL', `${what} must be an integer in ${min} … ${max}, got ${String(value)}`);
  }
  return value;
}

/** The datatype of a collective's buffer: any TypedArray but Uint8ClampedArray (MPI's arithmetic wraps). */
function mpiType(buffer: unknown, what: string): Datatype {
  const type = datatypeOf(buffer, what);
  if (type.name === 'uint8clamped') throw new TopocollError('EINVAL', `${what}: Uint8ClampedArray has no MPI datatype (MPI's arithmetic does not saturate)`);
  return type;
}

function sameType(a: Datatype, b: Datatype, what: string): void {
  if (a.name !== b.name) throw new TopocollError('EINVAL', `${what}: send is ${a.name} but recv is ${b.name}`);
}

/**
 * An MPI communicator: topocoll's point-to-point layer (pass it to createCommunicator), MPI's
 * messages, split/dup, and MPI's own collectives as a reference (blocking, for tests and
 * comparisons). Made by initMpi, split and dup.
 */
export class MpiCommunicator implements PointToPoint {
  /** The first tag topocoll uses on this layer (its communicators and their sub-communicators take tagBase … tagBase + 3071). */
  readonly tagBase = 0;
  private freed = false;

  /** @internal Use initMpi(), split() or dup(). */
  constructor(
    private readonly handle: number,
    readonly rank: number,
    readonly size: number,
    /** The thread level MPI gave this process. */
    readonly threadLevel: MpiThreadLevel,
    /** The largest tag MPI allows (MPI_TAG_UB). */
    readonly tagUpperBound: number,
    private readonly nativeLayer: object | undefined,
  ) {
    if (handle !== 0) collected.register(this, { handle, nativeLayer }, this);
  }

  /**
   * The native topocoll_p2p_v1 over this communicator's private duplicate (an External):
   * topocoll's collectives call it from their own threads. It lives while this communicator
   * does and until topocoll released it, whichever is later. Undefined when MPI's thread level
   * is below `serialized`.
   */
  get native(): object | undefined {
    this.ensureOpen();
    const layer = this.nativeLayer;
    if (layer !== undefined) call((a) => a.p2pHandOut(layer));
    return layer;
  }

  /** Sends `data` (copied at once: the array may be reused) to `peer`; resolves when MPI is done with it. */
  send(peer: number, tag: number, data: Uint8Array): Promise<void> {
    try {
      this.ensureOpen();
      this.checkPeerTag(peer, tag);
      if (!(data instanceof Uint8Array)) throw new TopocollError('EINVAL', 'send: data must be a Uint8Array or a Buffer');
      const id = call((a) => a.isend(this.handle, peer, tag, data));
      return completion(id).then(() => undefined);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * The next message from `peer` with `tag` (MPI's order: two messages from one sender with one
   * tag arrive in the order sent). One longer than `maxBytes` rejects with EMISMATCH.
   */
  recv(peer: number, tag: number, maxBytes: number): Promise<Uint8Array> {
    try {
      this.ensureOpen();
      this.checkPeerTag(peer, tag);
      checkInteger(maxBytes, 'recv: maxBytes', 0, 2 ** 31 - 1);
      const id = call((a) => a.irecv(this.handle, peer, tag, maxBytes));
      return completion(id) as Promise<Uint8Array>;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * MPI_Comm_split: ranks with the same `color` form a communicator, ordered by `key` (then by
   * rank here); `undefined` as color leaves this rank out (it gets undefined). Collective.
   */
  split(color: number | undefined, key: number): MpiCommunicator | undefined {
    this.ensureOpen();
    if (color !== undefined) checkInteger(color, 'split: color', 0, 2 ** 31 - 1);
    checkInteger(key, 'split: key', -(2 ** 31), 2 ** 31 - 1);
    const handle = call((a) => a.commSplit(this.handle, color, key));
    return handle < 0 ? undefined : this.adopt(handle);
  }

  /** MPI_Comm_dup: the same ranks, separate messages. Collective. */
  dup(): MpiCommunicator {
    this.ensureOpen();
    return this.adopt(call((a) => a.commDup(this.handle)));
  }

  /**
   * Frees the MPI communicator, and the native layer once topocoll no longer holds it (a layer
   * topocoll was given lives until topocoll releases it): the collectives of topocoll
   * communicators made over this one keep working, but no more can be made over it (their setup
   * needs send/recv). The world communicator cannot be freed. (A communicator collected without
   * free() is freed the same way.)
   */
  free(): void {
    if (this.freed) return;
    if (this.handle === 0) throw new TopocollError('EINVAL', 'the world communicator cannot be freed (MPI finalizes it at exit)');
    this.freed = true;
    collected.unregister(this);
    call((a) => {
      if (this.nativeLayer !== undefined) a.p2pDrop(this.nativeLayer);
      a.commFree(this.handle);
    });
  }

  /** MPI_Allreduce: `op` over every rank's `send`, into `recv` on every rank (send === recv: in place). */
  allreduceSync(send: TypedArray, recv: TypedArray, op: ReduceOpName = 'sum'): void {
    this.ensureOpen();
    const type = mpiType(send, 'allreduce: send');
    sameType(type, mpiType(recv, 'allreduce: recv'), 'allreduce');
    reduceOpCode(op, type);
    call((a) => a.allreduce(this.handle, send, recv, type.name, op));
  }

  /** MPI_Reduce: `op` over every rank's `send`, into `recv` at `root` (null elsewhere). */
  reduceSync(send: TypedArray, recv: TypedArray | null, op: ReduceOpName = 'sum', root = 0): void {
    this.ensureOpen();
    checkInteger(root, 'reduce: root', 0, this.size - 1);
    const type = mpiType(send, 'reduce: send');
    if (this.rank === root) sameType(type, mpiType(recv, 'reduce: recv'), 'reduce');
    reduceOpCode(op, type);
    call((a) => a.reduce(this.handle, send, this.rank === root ? recv : null, type.name, op, root));
  }

  /** MPI_Bcast: `buf` of `root` on every rank. */
  bcastSync(buf: TypedArray, root = 0): void {
    this.ensureOpen();
    checkInteger(root, 'bcast: root', 0, this.size - 1);
    const type = mpiType(buf, 'bcast: buf');
    call((a) => a.bcast(this.handle, buf, type.name, root));
  }

  /** MPI_Allgather: every rank's `send` in rank order in `recv` (size × send.length elements). */
  allgatherSync(send: TypedArray, recv: TypedArray): void {
    this.ensureOpen();
    const type = mpiType(send, 'allgather: send');
    sameType(type, mpiType(recv, 'allgather: recv'), 'allgather');
    if (recv.length !== send.length * this.size) {
      throw new TopocollError('EINVAL', `allgather: recv has ${recv.length} elements, not size × send.length = ${send.length * this.size}`);
    }
    call((a) => a.allgather(this.handle, send, recv, type.name));
  }

  /**
   * MPI_Gather (with `counts`: MPI_Gatherv): every rank's `send` in rank order in `recv` at `root`
   * (null elsewhere); `send` null at the root: in place, its block already in recv. A reference for
   * topocoll's gather: nothing but MPI's own call is checked here.
   */
  gatherSync(send: TypedArray | null, recv: TypedArray | null, root = 0, counts?: ArrayLike<number>): void {
    this.ensureOpen();
    checkInteger(root, 'gather: root', 0, this.size - 1);
    const type = mpiType(send ?? recv, 'gather: send');
    call((a) => a.gather(this.handle, send, this.rank === root ? recv : null, type.name, root, counts === undefined ? null : Float64Array.from(counts)));
  }

  /**
   * MPI_Scatter (with `counts`: MPI_Scatterv): block r of the root's `send` into rank r's `recv`;
   * `recv` null at the root: in place, its block stays in send. A reference for topocoll's scatter.
   */
  scatterSync(send: TypedArray | null, recv: TypedArray | null, root = 0, counts?: ArrayLike<number>): void {
    this.ensureOpen();
    checkInteger(root, 'scatter: root', 0, this.size - 1);
    const type = mpiType(recv ?? send, 'scatter: recv');
    call((a) => a.scatter(this.handle, this.rank === root ? send : null, recv, type.name, root, counts === undefined ? null : Float64Array.from(counts)));
  }

  /**
   * MPI_Reduce_scatter_block (with `counts`: MPI_Reduce_scatter): `op` over every rank's `send`,
   * rank r's block of the result in its `recv`; `send` null: in place, the input in recv. A
   * reference for topocoll's reduce-scatters.
   */
  reduceScatterSync(send: TypedArray | null, recv: TypedArray, op: ReduceOpName = 'sum', counts?: ArrayLike<number>): void {
    this.ensureOpen();
    const type = mpiType(recv, 'reduceScatter: recv');
    if (send !== null) sameType(mpiType(send, 'reduceScatter: send'), type, 'reduceScatter');
    reduceOpCode(op, type);
    call((a) => a.reduceScatter(this.handle, send, recv, type.name, op, counts === undefined ? null : Float64Array.from(counts)));
  }

  /**
   * MPI_Scan: rank r receives x0 op … op xr in `recv` (x: every rank's `send`); `send` null: in
   * place, the input in recv. A reference for topocoll's scan.
   */
  scanSync(send: TypedArray | null, recv: TypedArray, op: ReduceOpName = 'sum'): void {
    this.scanCall(send, recv, op, false);
  }

  /**
   * MPI_Exscan: rank r receives x0 op … op x(r−1) in `recv`; rank 0's recv is undefined (MPI's
   * rule). A reference for topocoll's exscan.
   */
  exscanSync(send: TypedArray | null, recv: TypedArray, op: ReduceOpName = 'sum'): void {
    this.scanCall(send, recv, op, true);
  }

  private scanCall(send: TypedArray | null, recv: TypedArray, op: ReduceOpName, exclusive: boolean): void {
    this.ensureOpen();
    const name = exclusive ? 'exscan' : 'scan';
    const type = mpiType(recv, `${name}: recv`);
    if (send !== null) {
      sameType(mpiType(send, `${name}: send`), type, name);
      if (send.length !== recv.length) throw new TopocollError('EINVAL', `${name}: send has ${send.length} elements but recv has ${recv.length}`);
    }
    reduceOpCode(op, type);
    call((a) => a.scan(this.handle, send, recv, type.name, op, exclusive));
  }

  /**
   * MPI_Alltoall: block j of `send` (recv.length / size elements) to rank j, block i of `recv`
   * from rank i; `send` null: in place, the input in recv. A reference for topocoll's alltoall.
   */
  alltoallSync(send: TypedArray | null, recv: TypedArray): void {
    this.ensureOpen();
    const type = mpiType(recv, 'alltoall: recv');
    if (send !== null) sameType(mpiType(send, 'alltoall: send'), type, 'alltoall');
    call((a) => a.alltoall(this.handle, send, recv, type.name, null, null));
  }

  /**
   * MPI_Alltoallv with the displacements the counts give (blocks packed in rank order):
   * `sendCounts[j]` elements of `send` to rank j, `recvCounts[i]` of `recv` from rank i; `send`
   * null: in place, the input in recv laid out by `recvCounts`. A reference for topocoll's alltoallv.
   */
  alltoallvSync(send: TypedArray | null, sendCounts: ArrayLike<number> | null, recv: TypedArray, recvCounts: ArrayLike<number>): void {
    this.ensureOpen();
    const type = mpiType(recv, 'alltoallv: recv');
    if (send !== null) sameType(mpiType(send, 'alltoallv: send'), type, 'alltoallv');
    const sent = send === null || sendCounts === null ? null : Float64Array.from(sendCounts);
    call((a) => a.alltoall(this.handle, send, recv, type.name, sent, Float64Array.from(recvCounts)));
  }

  /** MPI_Barrier. */
  barrierSync(): void {
    this.ensureOpen();
    call((a) => a.barrier(this.handle));
  }

  private adopt(handle: number): MpiCommunicator {
    const a = load();
    let nativeLayer: object | undefined;
    try {
      if (nativeAllowed(this.threadLevel)) nativeLayer = a.p2p(handle, 0);
    } catch (e) {
      try {
        a.commFree(handle);
      } catch {
        // the first error is the one to report
      }
      rethrowNative(e, { keepCause: true });
    }
    const rank = call((x) => x.commRank(handle));
    const size = call((x) => x.commSize(handle));
    return new MpiCommunicator(handle, rank, size, this.threadLevel, this.tagUpperBound, nativeLayer);
  }

  private checkPeerTag(peer: number, tag: number): void {
    checkInteger(peer, 'peer', 0, this.size - 1);
    checkInteger(tag, 'tag', 0, this.tagUpperBound);
  }

  private ensureOpen(): void {
    if (this.freed) throw new TopocollError('ECLOSED', 'this MPI communicator was freed');
  }
}
