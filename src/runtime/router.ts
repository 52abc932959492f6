import type { TopocollConfig } from '../config/schema.js';
import type { Group } from '../groups/plan.js';
import type { TypedArray } from '../util/typed-array.js';
import type { CollectivePlans } from './collective-plans.js';
import type { Windows } from './windows.js';

/**
 * The one place that decides which path a collective call takes, and every size threshold
 * behind it (the configuration's `routing`, whose defaults are the machine profile's):
 *
 * - `fast`: a small blocking call of a one-node job runs the node-wide shared area's protocol in
 *   JavaScript (runtime/fast-path.ts), without entering the addon;
 * - `one-sided`: with `bcast.algorithm: one-sided`, a bcast of a buffer in this rank's part of a
 *   shared window runs S1's one-sided bcast;
 * - `window`: a large enough call whose buffers are shared windows runs the single-copy window
 *   algorithm (one node for allreduce and allgather);
 * - `shared-area`: the addon runs the node-wide shared area's step (CollectivePlans decides by
 *   its protocol and the area's size; `takesArea`);
 * - `levels`: the schedules the levels' algorithms compose (CollectivePlans).
 *
 * Built with the communicator and again at every configure(). The per-call questions below are
 * comparisons with numbers fixed here (−1: never), so that the blocking calls' latency path
 * pays no more than it did with the thresholds inline. What `explain()` prints (`route`) comes
 * from the same numbers.
 */

/** A collective the router answers for. */
export type RoutedCollective =
  'bcast' | 'reduce' | 'allreduce' | 'allgather' | 'gather' | 'scatter' | 'reduce-scatter' | 'scan' | 'exscan' | 'alltoall' | 'barrier';
/** A path a call takes. */
export type PathName = 'fast' | 'one-sided' | 'window' | 'shared-area' | 'levels';

/** Where a call of some size goes, by the kind of its buffers and the form of the call. */
export interface Route {
  /** Ordinary memory: the blocking form (with no Promise or request pending), and the Promise and request forms. */
  memory: { sync: PathName; async: PathName };
  /** Every buffer a shared window (bcast: in this rank's part, for one-sided). */
  window: { sync: PathName; async: PathName };
}

/** What the router is built from. */
export interface RouterParts {
  config: TopocollConfig;
  plans: CollectivePlans;
  windows: Windows;
  /** The JavaScript fast path exists here (a one-node job of more than one rank on x64). */
  fastPathAvailable: boolean;
  /** More ranks on this node than cores (the windows' `shared` thresholds). */
  oversubscribed: boolean;
  /** Ranks of the communicator (an allgather's block from its whole result). */
  size: number;
}

/** The window thresholds that apply on a node: `shared` with more ranks than cores. */
export function windowThresholds(routing: TopocollConfig['routing'], oversubscribed: boolean): TopocollConfig['routing']['windows']['dedicated'] {
  return oversubscribed ? routing.windows.shared : routing.windows.dedicated;
}

/** One-sided bcasts carry this, mixed with the window and offset, as their plan-hash tag. */
const ONE_SIDED_CALL_TAG = 0x61c88647;

export class Router {
  /** The largest call of each collective that takes the fast path; −1: none. */
  private readonly fastBcastMax: number;
  private readonly fastReduceMax: number;
  private readonly fastAllreduceMax: number;
  private readonly fastAllgatherMax: number;
  private readonly fastBarrierOn: boolean;
  /** The same for the calls of the area's other protocols (ShmAreaCall): by the bytes each rank deposits at most. */
  private readonly fastGatherMax: number;
  private readonly fastScatterMax: number;
  private readonly fastAlltoallMax: number;
  private readonly fastReduceScatterMax: number;
  private readonly fastScanMax: number;
  /** The smallest call on windows that takes the window algorithm. */
  private readonly windowBcastMin: number;
  private readonly windowAllreduceMin: number;
  private readonly windowAllgatherMin: number;
  private readonly oneSided: boolean;

  constructor(private readonly parts: RouterParts) {
    const { config, plans } = parts;
    const fast = parts.fastPathAvailable && config.collectives.jsFastPath;
    const { copyMaxBytes, combineMaxBytes } = config.routing.fastPath;
    this.fastBcastMax = fast && plans.shmBcast ? copyMaxBytes : -1;
    this.fastReduceMax = fast && plans.shmReduce ? combineMaxBytes : -1;
    this.fastAllreduceMax = fast && plans.shmAllreduce === 'every-rank' ? combineMaxBytes : -1;
    this.fastAllgatherMax = fast && plans.shmAllgather === 'every-rank' ? copyMaxBytes : -1;
    this.fastBarrierOn = fast && plans.shmBarrier === 'every-rank';
    const area = plans.areaCalls;
    this.fastGatherMax = fast && area.gather ? copyMaxBytes : -1;
    this.fastScatterMax = fast && area.scatter ? copyMaxBytes : -1;
    this.fastAlltoallMax = fast && area.alltoall ? copyMaxBytes : -1;
    this.fastReduceScatterMax = fast && area.reduceScatter ? combineMaxBytes : -1;
    this.fastScanMax = fast && area.scan ? combineMaxBytes : -1;
    const windows = windowThresholds(config.routing, parts.oversubscribed);
    this.windowBcastMin = windows.bcast;
    this.windowAllreduceMin = windows.allreduce;
    this.windowAllgatherMin = windows.allgather;
    this.oneSided = config.bcast.algorithm === 'one-sided';
  }

  // --- per call: the blocking forms ask the fast-path questions only when nothing is pending ---

  /** A blocking bcast of `bytes` in JavaScript (unless it runs one-sided: oneSidedTag first). */
  fastBcast(bytes: number): boolean {
    return bytes <= this.fastBcastMax;
  }

  fastReduce(bytes: number): boolean {
    return bytes <= this.fastReduceMax;
  }

  fastAllreduce(bytes: number): boolean {
    return bytes <= this.fastAllreduceMax;
  }

  /** `blockBytes`: one rank's block (each rank deposits its block in its own slot). */
  fastAllgather(blockBytes: number): boolean {
    return blockBytes <= this.fastAllgatherMax;
  }

  fastBarrier(): boolean {
    return this.fastBarrierOn;
  }

  // The area's other protocols (gather, scatter, reduce-scatter of equal blocks, alltoall, scans;
  // built-in operators): each rank deposits at most `deposit` bytes — a gather's sender its block,
  // a scatter's root, an alltoall's and a reduce-scatter's every rank the whole vector, a scan its
  // input.

  fastGather(blockBytes: number): boolean {
    return blockBytes <= this.fastGatherMax;
  }

  fastScatter(wholeBytes: number): boolean {
    return wholeBytes <= this.fastScatterMax;
  }

  fastAlltoall(wholeBytes: number): boolean {
    return wholeBytes <= this.fastAlltoallMax;
  }

  fastReduceScatter(wholeBytes: number): boolean {
    return wholeBytes <= this.fastReduceScatterMax;
  }

  fastScan(bytes: number): boolean {
    return bytes <= this.fastScanMax;
  }

  /**
   * With bcast.algorithm `one-sided`, the plan-hash tag of a bcast of `buf` that runs S1's
   * one-sided bcast — when `buf` lies in this rank's part of a shared window, on every rank (a
   * rank alone on its node included: every rank must decide alike) — else undefined. The tag
   * mixes ONE_SIDED_CALL_TAG with the window's id and `buf`'s offset in the part, the same on
   * every rank when the buffers match: a rank that runs another path, or passes another window or
   * offset, disagrees on the call and gets EMISMATCH.
   */
  oneSidedTag(buf: TypedArray): number | undefined {
    if (!this.oneSided) return undefined;
    const place = this.parts.windows.placeOf(buf);
    if (place === undefined) return undefined;
    return (ONE_SIDED_CALL_TAG ^ Math.imul(place.id, 0x9e3779b1) ^ Math.imul(place.offset + 1, 0x85ebca6b)) >>> 0;
  }

  /** A bcast of `buf` runs as a window bcast: large enough, and in a window. */
  windowBcast(buf: TypedArray): boolean {
    return buf.byteLength >= this.windowBcastMin && this.parts.windows.windowOf(buf) !== undefined;
  }

  /** An allreduce runs the window allreduce: `recv` large enough, and both buffers in windows (the plans have it on one node only). */
  windowAllreduce(input: TypedArray, recv: TypedArray): boolean {
    if (recv.byteLength < this.windowAllreduceMin || this.parts.windows.windowOf(recv) === undefined) return false;
    return input === recv || this.parts.windows.windowOf(input) !== undefined;
  }

  /** An allgather runs the window allgather: its largest block large enough, and this rank's block (`own`) in a window. */
  windowAllgather(own: TypedArray, largestBlock: number): boolean {
    return largestBlock >= this.windowAllgatherMin && this.parts.windows.windowOf(own) !== undefined;
  }

  // --- what explain() and levels() print ---

  /**
   * The algorithm `group` runs for calls that take the levels' schedules, per collective, by runs
   * of message sizes (`area`: sizes a one-node job runs through the shared area instead).
   */
  algorithms(group: Group): ReturnType<CollectivePlans['describe']> {
    return this.parts.plans.describe(group);
  }

  /**
   * The path of a call of `bytes` (allgather, gather, scatter, reduce-scatter, alltoall: the whole
   * vector — an alltoall's one rank's send — in equal blocks) by buffer kind and form (with a
   * built-in operator).
   * Gather, scatter, reduce-scatter, alltoall and the scans have no window algorithm.
   */
  route(collective: RoutedCollective, bytes: number): Route {
    const plans = this.parts.plans;
    const addon: PathName = plans.takesArea(collective, bytes) ? 'shared-area' : 'levels';
    const size = this.parts.size;
    const fast = ((): boolean => {
      switch (collective) {
        case 'bcast':
          return this.fastBcast(bytes);
        case 'reduce':
          return this.fastReduce(bytes);
        case 'allreduce':
          return this.fastAllreduce(bytes);
        case 'allgather':
          return this.fastAllgather(bytes / size);
        case 'barrier':
          return this.fastBarrier();
        case 'gather':
          return this.fastGather(bytes / size);
        case 'scatter':
          return this.fastScatter(bytes);
        case 'alltoall':
          return this.fastAlltoall(bytes);
        case 'reduce-scatter':
          return this.fastReduceScatter(bytes);
        case 'scan':
        case 'exscan':
          return this.fastScan(bytes);
      }
    })();
    const memory = { sync: fast ? 'fast' : addon, async: addon } as const;
    const windowed =
      collective === 'bcast'
        ? this.oneSided
          ? 'one-sided'
          : bytes >= this.windowBcastMin && 'window'
        : collective === 'allreduce'
          ? plans.windowAlgorithms && bytes >= this.windowAllreduceMin && 'window'
          : collective === 'allgather'
            ? plans.windowAlgorithms && bytes / this.parts.size >= this.windowAllgatherMin && 'window'
            : false;
    return { memory, window: windowed === false ? memory : { sync: windowed, async: windowed } };
  }
}
