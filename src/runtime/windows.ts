import { randomBytes } from 'node:crypto';
import { WINDOW_COUNTER_BYTES, WINDOW_HEADER_BYTES, WINDOW_PAGE_BYTES } from '../abi.generated.js';
import { TopocollError } from '../errors.js';
import type { NativeEngine } from '../native.js';
import type { TypedArray } from '../util/typed-array.js';
import { DATATYPES } from './datatypes.js';
import { segmentPrefix } from './segment-name.js';

/**
 * Shared windows (comm.allocShared, MPI_Win_allocate_shared): memory in one POSIX segment per
 * node and window that every rank of the node maps, one part per local rank
 * (native/src/shm/shm_window.h has the segment's layout and protocol; windowLayout mirrors it).
 *
 * Allocation is a collective of three agreements over the communicator (max-allreduces marked as
 * the window's, so a rank in any other collective gets EMISMATCH):
 *   1. every rank's length in bytes, and a random name part from rank 0;
 *   2. the node's lowest rank checks the node's budget and creates the segment; every rank says
 *      whether that worked (a failure anywhere fails the call everywhere);
 *   3. the other local ranks map it and say so; then the name is unlinked.
 * Any failure or lost peer on the way unlinks the name and unmaps, so nothing stays in /dev/shm;
 * names carry the job's segment prefix, which the launcher sweeps after a crash.
 */

/** A typed array class (Float64Array, …): what allocShared allocates. */
export interface TypedArrayClass<T extends TypedArray = TypedArray> {
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): T;
  readonly BYTES_PER_ELEMENT: number;
  readonly name: string;
}

/** The largest window part (bytes); a part's offset must stay below 2^40 (shm_bcast.h). */
export const MAX_WINDOW_PART_BYTES = 2 ** 36;

const pageUp = (bytes: number): number => Math.ceil(bytes / WINDOW_PAGE_BYTES) * WINDOW_PAGE_BYTES;

/**
 * Where each local rank's part lies (WindowLayout of shm_window.cc, the same arithmetic on
 * abi/abi.yaml's sizes): the header, a counter block per local rank, then the parts on page
 * boundaries.
 */
export function windowLayout(partBytes: readonly number[]): { offsets: number[]; totalBytes: number } {
  let at = pageUp(WINDOW_HEADER_BYTES + WINDOW_COUNTER_BYTES * partBytes.length);
  const offsets = partBytes.map((bytes) => {
    const offset = at;
    at += pageUp(bytes);
    return offset;
  });
  return { offsets, totalBytes: at };
}

interface Window {
  readonly id: number;
  readonly buffer: ArrayBuffer;
  readonly offsets: readonly number[];
  readonly lengths: readonly number[];
  readonly totalBytes: number;
}

/** What a window collective needs of its communicator. */
export interface WindowHost {
  readonly engine: NativeEngine;
  readonly rank: number;
  readonly size: number;
  /** Global ranks of this node, ascending. */
  readonly localRanks: readonly number[];
  readonly segmentToken: string;
  /** shm.budgetBytes (it may change with configure()): the node's segment and its windows together. */
  budgetBytes(): number;
  /** An element-wise max-allreduce over every rank, marked as a window collective. */
  agree(values: Float64Array): Float64Array;
}

const STATUS_NOMEM = 1;
const STATUS_FAILED = 2;

/** One communicator's windows. */
export class Windows {
  private readonly byId = new Map<number, Window>();
  private readonly byBuffer = new WeakMap<ArrayBufferLike, Window>();
  /** Ids follow the order of allocShared calls, which every rank makes in the same order. */
  private nextId = 1;

  constructor(private readonly host: WindowHost) {}

  /** Bytes of this node's windows. */
  get bytes(): number {
    let sum = 0;
    for (const w of this.byId.values()) sum += w.totalBytes;
    return sum;
  }

  /**
   * comm.allocShared (MPI_Win_allocate_shared): this rank's part of a new window, `length`
   * elements of `type`. Collective; the arguments are checked first (EINVAL).
   */
  allocate<T extends TypedArray>(type: TypedArrayClass<T>, length: number): T {
    const known = typeof type === 'function' && DATATYPES.some((d) => d.array === (type as unknown));
    if (!known) {
      const name = typeof type === 'function' ? type.name : typeof type;
      throw this.argumentError(`allocShared: ${name} is not a typed array class (Float64Array, Int32Array, …)`);
    }
    if (!Number.isInteger(length) || length < 0 || length * type.BYTES_PER_ELEMENT > MAX_WINDOW_PART_BYTES) {
      throw this.argumentError(`allocShared: length must be an integer in 0 … ${MAX_WINDOW_PART_BYTES / type.BYTES_PER_ELEMENT}, got ${String(length)}`);
    }
    const h = this.host;
    const localIndex = h.localRanks.indexOf(h.rank);
    const id = this.nextId++;
    const sizes = new Float64Array(h.size + 1);
    sizes[h.rank] = length * type.BYTES_PER_ELEMENT;
    if (h.rank === 0) sizes[h.size] = randomBytes(6).readUIntBE(0, 6);
    const all = h.agree(sizes);
    const parts = h.localRanks.map((r) => all[r]!);
    const { offsets, totalBytes } = windowLayout(parts);
    const name = `/${segmentPrefix(h.segmentToken)}w${h.localRanks[0]}-${all[h.size]!.toString(16)}-${id}`;
    let buffer: ArrayBuffer | undefined;
    let failure: Error | undefined;
    const step = (work: () => void): void => {
      const status = new Float64Array(h.size);
      try {
        work();
      } catch (e) {
        failure = e instanceof Error ? e : new Error(String(e));
        status[h.rank] = e instanceof TopocollError && e.code === 'ENOMEM' ? STATUS_NOMEM : STATUS_FAILED;
      }
      const everyone = h.agree(status);
      const failed = everyone.findIndex((s) => s !== 0);
      if (failed < 0) return;
      if (failure !== undefined) throw failure;
      throw new TopocollError(
        everyone[failed] === STATUS_NOMEM ? 'ENOMEM' : 'EINVAL',
        `allocShared: the window could not be ${everyone[failed] === STATUS_NOMEM ? 'allocated within its node’s budget' : 'mapped'} on rank ${failed}`,
        { rank: h.rank },
      );
    };
    try {
      step(() => {
        if (localIndex !== 0) return;
        const segment = h.engine.segmentBytes;
        const used = this.bytes;
        const budget = h.budgetBytes();
        if (segment + used + totalBytes > budget) {
          throw new TopocollError(
            'ENOMEM',
            `allocShared: a window of ${totalBytes} bytes on this node (${parts.join(' + ')} bytes of parts, page-rounded, and its header) does not fit: the node's segment takes ${segment} bytes and its windows ${used} of shm.budgetBytes = ${budget}`,
            { rank: h.rank, hint: 'Raise shm.budgetBytes, or freeShared() windows no longer needed.' },
          );
        }
        buffer = h.engine.mapWindow(true, id, name, parts);
      });
      step(() => {
        if (localIndex !== 0) buffer = h.engine.mapWindow(false, id, name, parts);
      });
    } catch (e) {
      h.engine.freeWindow(id);
      throw e;
    } finally {
      // Every local rank has mapped it, or the allocation failed: either way the name goes
      // (whoever unlinks first; the others find it gone).
      h.engine.unlinkWindow(name);
    }
    const window: Window = { id, buffer: buffer!, offsets, lengths: parts, totalBytes };
    this.byId.set(id, window);
    this.byBuffer.set(window.buffer, window);
    return new type(window.buffer, offsets[localIndex]!, length);
  }

  /** The window `array` is a view of, or undefined. */
  windowOf(array: TypedArray): Window | undefined {
    return this.byBuffer.get(array.buffer);
  }

  /** The window `array` views and its byte offset from the start of this rank's part; undefined outside this rank's part of a window. */
  placeOf(array: TypedArray): { id: number; offset: number } | undefined {
    const window = this.windowOf(array);
    if (window === undefined) return undefined;
    const local = this.host.localRanks.indexOf(this.host.rank);
    const offset = array.byteOffset - window.offsets[local]!;
    if (offset < 0 || offset + array.byteLength > window.lengths[local]!) return undefined;
    return { id: window.id, offset };
  }

  /** comm.sharedQuery (MPI_Win_shared_query): the part of rank `rank` (of this node) of the window `array` views, as `array`'s type (whole elements). Local. */
  query<T extends TypedArray>(array: T, rank: number): T {
    const window = this.windowOf(array);
    if (window === undefined) throw this.argumentError('sharedQuery: the array is not a window of this communicator (or it was freed already)');
    const local = this.host.localRanks.indexOf(rank);
    if (local < 0) throw this.argumentError(`sharedQuery: rank ${String(rank)} is not on this rank's node (its ranks: ${this.host.localRanks.join(', ')})`);
    const type = array.constructor as TypedArrayClass<T>;
    return new type(window.buffer, window.offsets[local]!, Math.floor(window.lengths[local]! / type.BYTES_PER_ELEMENT));
  }

  /**
   * comm.freeShared (MPI_Win_free): unmaps the window `array` views. Collective: returns once
   * every rank has called it, so no rank still reads a part freed here. Refused (EINVAL) while
   * `pending` collectives of this rank may use it.
   */
  free(array: TypedArray, pending: number): void {
    const window = this.windowOf(array);
    if (window === undefined) throw this.argumentError('freeShared: the array is not a window of this communicator (or it was freed already)');
    if (pending > 0) {
      throw this.argumentError(`freeShared: ${pending} collective(s) of this rank are still pending and may use the window`, 'wait() for them first.');
    }
    this.host.agree(new Float64Array(1));
    this.byId.delete(window.id);
    this.byBuffer.delete(window.buffer);
    this.host.engine.freeWindow(window.id);
  }

  private argumentError(message: string, hint?: string): TopocollError {
    return new TopocollError('EINVAL', message, hint === undefined ? { rank: this.host.rank } : { rank: this.host.rank, hint });
  }

  /** Forgets every window (the engine's close() detached and unmapped them). */
  clear(): void {
    this.byId.clear();
  }
}
