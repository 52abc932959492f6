import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import nodeGypBuild from 'node-gyp-build';
import { CallField, Collective, type JsP2POperation, type TreeKind, type WaitMode } from './abi.generated.js';
import { TopocollError, rethrowNative } from './errors.js';
import { PACKAGE_ROOT } from './util/package-root.js';
import type { TypedArray } from './util/typed-array.js';

/**
 * The one typed wrapper over the C++ addon (native/src/binding/addon.cc). Nothing else loads the
 * addon. Native failures arrive as Errors with a `code`; every wrapper rethrows them as
 * TopocollError so callers see one error type.
 */

/** Byte offsets in the segment (native FastPathLayout), read by the JavaScript fast path (src/runtime/fast-path.ts). */
export interface FastPathLayout {
  abortCode: number;
  controls: number;
  controlStride: number;
  sleeping: number;
  idle: number;
  callVersion: number;
  call: number;
  slots: number;
  slotStride: number;
  slotHeader: number;
  slotData: number;
  slotDataBytes: number;
  slotDepth: number;
}

/** What NativeEngine.fastPath() hands over. */
export interface NativeFastPath {
  segment: ArrayBuffer;
  counters: ArrayBuffer;
  layout: FastPathLayout;
  localIndex: number;
  asymmetric: boolean;
}

/** The two addon calls the protocol makes only off its fast path. */
export interface FastPathEngine {
  /** Waits for local ranks from … to − 1 (not this one) to deposit `call`, and checks their headers. */
  awaitAreaDeposits(call: number, from: number, to: number): void;
  ringLocal(localIndex: number): void;
}

// The numbers shared with the addon are abi/abi.yaml's (src/abi.generated.ts): collective codes,
// the S0 engine's notification trees, the call descriptor's slots. test/native-tables.test.ts
// checks that the addon was built from the same spec.
export { Collective as NativeCollective, TreeKind as NativeTree, WaitMode, CALL_FIELDS } from './abi.generated.js';
/** A collective's code (NativeCollective). */
export type NativeCollectiveCode = Collective;

export interface NativeEngineOptions {
  rank: number;
  size: number;
  /** Global ranks on this node (this rank included). */
  localRanks: readonly number[];
  /** The largest one-way shared-memory channel, bytes; a power of two (native/src/shm/shm_channel_pool.h). */
  channelBytes: number;
  /** The smallest channel a rank's outbox must still hold for each peer it sends to; a power of two. */
  channelMinBytes: number;
  /** Bytes of each rank's outbox, from which its channels are made. */
  channelPoolBytes: number;
  /** More processes on the node than cores: spin less before yielding. */
  oversubscribed: boolean;
  /** How waits spend the time before they sleep (`waits.mode`; native/src/base/wait.h). */
  waits: WaitMode;
  /** waits: auto: the longest non-blocking spin on a TCP peer before poll(), µs. */
  remoteSpinUs: number;
  /** The job's ranks on this rank's machine (its kernel: emulated nodes and namespace hosts share it), this one included. */
  machineRanks: number;
  /** The smallest bcast the S0 engine runs in window mode: the router's (runtime/router.ts, windowThresholds). */
  windowBcastMinBytes: number;
  /** Ranks of this node bound to this rank's CPUs, which they oversubscribe: waits on them yield at once. */
  coRunners: readonly number[];
  /** The S0 shared-memory bcast engine (native/src/shm/shm_bcast.h). */
  bcast: NativeBcastParams;
  /** Sleepers fence with membarrier(2) so wakers need not (when the kernel offers it). */
  asymmetricFences: boolean;
  /** The watchdog: a collective waiting longer fails with ETIMEDOUT on every rank; 0 = no limit. */
  collectiveTimeoutMs: number;
  /** The scheduler slice the threads running collectives request (native/src/base/wait.h), µs; 0 = the kernel's. */
  schedulerSliceUs: number;
}

/**
 * A node's shared segment, by part (bytes; native/src/shm/segment_layout.h), and its channels now:
 * how many the node's ranks have made, their bytes, and the most one rank's outbox holds.
 */
export interface SharedMemoryUse {
  segmentBytes: number;
  controlBytes: number;
  outboxesBytes: number;
  outboxBytes: number;
  bcastRegionsBytes: number;
  nodeAreaBytes: number;
  channels: number;
  channelsBytes: number;
  largestOutboxUse: number;
}

export interface NativeBcastParams {
  /** Bytes of each rank's queue (S · f of S0); a multiple of minFragment. */
  queueBytes: number;
  /** Smallest fragment; the queue has queueBytes / minFragment control blocks. */
  minFragment: number;
  /** Buffer sets (q). */
  sets: number;
  tree: TreeKind;
  radix: number;
  /** Fragment size for messages of up to 2^i bytes, by i; the last entry serves larger ones. */
  fragmentForLog2: number[];
}

export interface TcpPeerAddress {
  rank: number;
  host: string;
  port: number;
}

/** What the addon needs to run a user operator: scratch arrays and a chunk combiner. */
export interface NativeUserOp {
  combine: (count: number) => void;
  dst: TypedArray;
  src: TypedArray;
}

type BufferArg = ArrayBufferView | null;

/**
 * One collective call other than an allgather (NativeEngine.run, runAsync). Callers fill one
 * object per communicator and pass it again and again: a call allocates nothing.
 */
export interface NativeCall {
  collective: NativeCollectiveCode;
  /** Schedule ids of the two phases; -1 where the collective has no such phase. */
  reducePlan: number;
  bcastPlan: number;
  send: BufferArg;
  recv: BufferArg;
  count: number;
  dtype: number;
  op: number;
  root: number;
  planHash: number;
  segment: number;
  /** A JavaScript operator in place of `op` (run only: it is called back on this thread). */
  user: NativeUserOp | undefined;
}

/**
 * One call on rank blocks (NativeEngine.runAllgather): an allgather, or with `collective` gather
 * or scatter a call to or from `root` whose one phase is `gatherPlan` (send and recv as the
 * addon's CallArgs::block_counts describes them; a buffer a rank does not use is null).
 */
export interface NativeAllgatherCall {
  /** Allgather when absent. */
  collective?:
    | typeof Collective.allgather
    | typeof Collective.gather
    | typeof Collective.scatter
    | typeof Collective.reduceScatter
    | typeof Collective.alltoall
    | typeof Collective.alltoallv;
  root?: number;
  /** reduceScatter: the operator's code, or a JavaScript operator in its place (run only: it is called back on this thread). */
  op?: number;
  user?: NativeUserOp | undefined;
  gatherPlan: number;
  bcastPlan: number;
  send: ArrayBufferView | null;
  recv: ArrayBufferView | null;
  /** Elements per rank (ignored with `counts`). */
  count: number;
  /** Elements of every rank's block (allgatherv), one per rank; alltoallv: 2·size, the counts sent to each rank, then those received from each. */
  counts?: Float64Array;
  dtype: number;
  planHash: number;
  segment: number;
  bcastSegment: number;
}

/**
 * The numbers the addon is built with, taken from its C++ enums and constants
 * (nativeTables in native/src/binding/addon.cc): those of abi/abi.yaml as the addon was compiled
 * with them, and a few more. test/native-tables.test.ts asserts that TypeScript's equal these.
 */
export interface NativeTables {
  /** StepKind. */
  readonly stepKinds: Readonly<Record<string, number>>;
  /** Int32 words per encoded step (kStepWords). */
  readonly stepWords: number;
  /** Slots of the call descriptor (CallField). */
  readonly callFields: Readonly<Record<string, number>>;
  /** Collective. */
  readonly collectives: Readonly<Record<string, number>>;
  /** Dtype, by DtypeName. */
  readonly datatypes: Readonly<Record<string, number>>;
  /** Bytes of an element of each datatype (DtypeSize). */
  readonly datatypeBytes: Readonly<Record<string, number>>;
  /** ReduceOp, by OpName. */
  readonly reduceOps: Readonly<Record<string, number>>;
  /** The operators with a kernel for each datatype (FindReduce). */
  readonly reduceOpsByDatatype: Readonly<Record<string, readonly string[]>>;
  /** TreeKind. */
  readonly trees: Readonly<Record<string, number>>;
  /** WaitMode. */
  readonly waitModes: Readonly<Record<string, number>>;
  /** Largest allreduce of the node-wide shared area (ShmAllreduce::kMaxBytes). */
  readonly shmAllreduceMaxBytes: number;
  /** Bytes of the shared-area allgather's column per round (ShmAllreduce::kSlotBytes). */
  readonly shmAllgatherColumnBytes: number;
  /** The codes an abort carries between ranks (kAbortCodes of native/src/engine/engine.h, by index from 1). */
  readonly abortCodes: readonly string[];
  /** Bytes of a rank's outbox header, and of each channel block's header (native/src/shm/shm_channel_pool.h). */
  readonly outboxHeaderBytes: number;
  readonly channelBlockHeaderBytes: number;
  readonly eagerBytes: number;
  readonly layerExchangeBytes: number;
  readonly messageHeaderBytes: number;
}

interface RawEngine {
  listenTcp(address: string): number;
  createSegment(name: string): void;
  openSegment(name: string): void;
  allMappedAndUnlink(waitMs: number): boolean;
  connectTcp(token: string, peers: TcpPeerAddress[], waitMs: number): { missing: Int32Array; lastError: string };
  useP2P(layer: object, tag: number, layerRanks?: readonly number[]): void;
  addP2PPeers(ranks: readonly number[]): void;
  attachMessages(messages: RawMessages): void;
  start(): void;
  setPlan(id: number, steps: Int32Array): void;
  setShmGroup(id: number, ranks: readonly number[]): void;
  resetShm(): void;
  /** The call descriptor (CallField's slots), read by run and runAsync. */
  readonly callArea: Float64Array;
  /** Buffers after the first may be left out when null (fewer arguments, faster calls). */
  run(recv: BufferArg, send?: BufferArg, user?: NativeUserOp | null, counts?: Float64Array): void;
  runAsync(recv: BufferArg, send: BufferArg, counts?: Float64Array): Promise<void>;
  /** The number of the job runAsync queued last (jobs are numbered 1, 2, … in queue order). */
  readonly lastJob: number;
  /** Whether job `id` has run; throws its error if it failed. */
  testJob(id: number): boolean;
  /** Blocks until job `id` has run; throws its error if it failed. */
  waitJob(id: number): void;
  close(): void;
  ownRegionNodes(): Int32Array;
  fastPath(): NativeFastPath | undefined;
  awaitAreaDeposits(call: number, from: number, to: number): void;
  ringLocal(localIndex: number): void;
  readonly segmentBytes: number;
  sharedMemory(): SharedMemoryUse;
  createWindow(id: number, name: string, partBytes: readonly number[]): ArrayBuffer;
  openWindow(id: number, name: string, partBytes: readonly number[]): ArrayBuffer;
  freeWindow(id: number): boolean;
  unlinkWindow(name: string): void;
}

interface RawJsPointToPoint {
  native(): object;
  complete(id: number, error?: string, bytes?: Uint8Array): void;
  flush(operate: NativeP2POperate): void;
}

interface RawAddon {
  NativeEngine: new (options: NativeEngineOptions) => RawEngine;
  JsPointToPoint: new (rank: number, size: number, tagBase: number, operate: NativeP2POperate) => RawJsPointToPoint;
  NativeMessages: new (options: { rank: number; size: number; timeoutMs: number; driveUs: number }) => RawMessages;
  openP2PLayer(native: object): NativeP2PLayer;
  layerIsend(layer: object, peer: number, tag: number, data: Uint8Array): number;
  layerIrecv(layer: object, peer: number, tag: number, maxBytes: number): number;
  layerTest(id: number): undefined | true | Uint8Array;
  layerAbandon(id: number): void;
  setThreadAffinity(cpus: readonly number[]): number[];
  segmentBytes(localSize: number, channelPoolBytes: number, bcast: NativeBcastParams): number;
  pageNodes(view: ArrayBufferView): Int32Array;
  crossCoreRates(bytes: number, rounds: number, writerCpu: number, readerCpu: number): CrossCoreRates;
  crossCoreLatencyNs(cpuA: number, cpuB: number, roundTrips: number): number;
  combineRate(bytes: number, rounds: number): number;
  readonly eagerBytes: number;
  readonly layerExchangeBytes: number;
  readonly messageHeaderBytes: number;
  readonly nativeTables: NativeTables;
  stepRoundTrip(words: Int32Array): NativeStepRoundTrip;
}

/** [source, tag, bytes], and for a receive of unknown length (buffer null) the message's bytes. */
export type NativeMessageStatus = [number, number, number, ArrayBuffer?];

interface RawMessages {
  bind(): number;
  listen(): void;
  start(token: string, hosts: readonly string[], ports: readonly number[]): void;
  sendSync(buf: ArrayBufferView, dest: number, tag: number): void;
  recvSync(buf: ArrayBufferView | null, source: number, tag: number): NativeMessageStatus;
  post(kind: 0 | 1, buf: ArrayBufferView | null, peer: number, tag: number): [number, Promise<NativeMessageStatus>];
  test(id: number): false | NativeMessageStatus;
  wait(id: number): NativeMessageStatus;
  close(): [number, number][];
}

/** A message posted for a Promise (isend, irecv): its number for test/wait and the Promise of its status. */
export interface NativeMessageOp {
  readonly id: number;
  readonly done: Promise<NativeMessageStatus>;
}

/**
 * One communicator's point-to-point messages (native/src/messages/message_streams.h): streams
 * of their own and a progress thread of their own, apart from the collectives'. The arguments
 * are checked by the caller (src/p2p/messages.ts); errors come back as TopocollError.
 */
export class NativeMessages {
  private readonly raw: RawMessages;
  /** The addon's object (NativeEngine.attachMessages takes it). */
  get handle(): RawMessages {
    return this.raw;
  }
  private readonly rethrowAsync = (e: unknown): never => rethrowNative(e, { rank: this.rank });

  constructor(
    private readonly rank: number,
    size: number,
    timeoutMs: number,
    /** How long a blocking wait reads or writes its streams itself before it sleeps, µs (message_streams.h, Wait). */
    driveUs: number,
  ) {
    this.raw = guarded(rank, () => new (load().NativeMessages)({ rank, size, timeoutMs, driveUs }));
  }
  /** Binds the socket to an ephemeral port of every interface (its hellos are checked); returns the port. */
  bind(): number {
    return guarded(this.rank, () => this.raw.bind());
  }
  /** Listens on the bound port (once joined, before the join's last barrier). */
  listen(): void {
    guarded(this.rank, () => this.raw.listen());
  }
  /** The communicator's token and every rank's address; starts the progress thread. */
  start(token: string, hosts: readonly string[], ports: readonly number[]): void {
    guarded(this.rank, () => this.raw.start(token, hosts, ports));
  }
  sendSync(buf: ArrayBufferView, dest: number, tag: number): void {
    guarded(this.rank, () => this.raw.sendSync(buf, dest, tag));
  }
  recvSync(buf: ArrayBufferView | null, source: number, tag: number): NativeMessageStatus {
    return guarded(this.rank, () => this.raw.recvSync(buf, source, tag));
  }
  /** Posts a send (kind 0) or a receive (kind 1; buf null: of any length). */
  post(kind: 0 | 1, buf: ArrayBufferView | null, peer: number, tag: number): NativeMessageOp {
    const [id, done] = guarded(this.rank, () => this.raw.post(kind, buf, peer, tag));
    return { id, done: done.catch(this.rethrowAsync) };
  }
  /** False while op `id` runs, else its status (throws its error); only before its Promise settled. */
  test(id: number): false | NativeMessageStatus {
    return guarded(this.rank, () => this.raw.test(id));
  }
  /** Blocks until op `id` ended; its status (throws its error); only before its Promise settled. */
  wait(id: number): NativeMessageStatus {
    return guarded(this.rank, () => this.raw.wait(id));
  }
  /** Ends pending messages with ECLOSED; the messages that arrived and no receive took, [source, count]. */
  close(): [number, number][] {
    return guarded(this.rank, () => this.raw.close());
  }
}

/**
 * A host layer's topocoll_p2p_v1 opened once per process (native/src/transport/p2p_links.h,
 * P2PLayer): `handle` keeps it while referenced; engines given it keep it too.
 */
export interface NativeP2PLayer {
  readonly handle: object;
  readonly rank: number;
  readonly size: number;
  readonly tagBase: number;
}

/**
 * Called on the JavaScript thread for each operation the executor starts through a JavaScript
 * layer (native/src/binding/js_p2p.h): JsP2POperation.send sends `payload` (bytes), receive
 * receives at most `payload` bytes; the operation ends with JsPointToPointBridge.complete(id, …).
 */
export type NativeP2POperate = (kind: JsP2POperation, id: number, peer: number, tag: number, payload: Uint8Array | number) => void;

/** The addon's bridge from its threads to a JavaScript layer: a topocoll_p2p_v1 (`native()`). */
export class JsPointToPointBridge {
  private readonly raw: RawJsPointToPoint;
  constructor(
    rank: number,
    size: number,
    tagBase: number,
    private readonly operate: NativeP2POperate,
  ) {
    this.raw = new (load().JsPointToPoint)(rank, size, tagBase, operate);
  }
  /**
   * Calls `operate` now, on this thread, for every operation the addon's threads started and
   * did not hand to JavaScript yet (in the order they were started), rather than when the event
   * loop next runs.
   */
  flush(): void {
    this.raw.flush(this.operate);
  }
  /** The struct, as an External. */
  native(): object {
    return this.raw.native();
  }
  /** Settles operation `id`: failed with `error`, else done (a receive with `bytes`). */
  complete(id: number, error?: string, bytes?: Uint8Array): void {
    this.raw.complete(id, error, bytes);
  }
}

/** Opens a host layer's struct (an External of a topocoll_p2p_v1): checks its version and reads its rank, size and tags. */
export function openP2PLayer(native: object): NativeP2PLayer {
  return guarded(undefined, () => load().openP2PLayer(native));
}

/**
 * JavaScript's own messages over an opened native layer (native/src/binding/layer_messages.h):
 * start returns an id, test is polled until it gives true (a send) or the bytes (a receive);
 * abandon gives up a receive.
 */
export const layerMessages = {
  isend: (layer: NativeP2PLayer, peer: number, tag: number, data: Uint8Array): number =>
    guarded(layer.rank, () => load().layerIsend(layer.handle, peer, tag, data)),
  irecv: (layer: NativeP2PLayer, peer: number, tag: number, maxBytes: number): number =>
    guarded(layer.rank, () => load().layerIrecv(layer.handle, peer, tag, maxBytes)),
  test: (layer: NativeP2PLayer, id: number): undefined | true | Uint8Array => guarded(layer.rank, () => load().layerTest(id)),
  abandon: (layer: NativeP2PLayer, id: number): void => guarded(layer.rank, () => load().layerAbandon(id)),
};

let addon: RawAddon | undefined;

/**
 * Loads the addon once. `TOPOCOLL_ADDON` names a build to load instead (a sanitizer build:
 * native/CMakeLists.txt, TOPOCOLL_SANITIZE) and nothing else is tried. Otherwise node-gyp-build
 * chooses, in this order: build/Release, build/Debug (a local compile — a development checkout,
 * or the install script's fallback — always wins over what the package ships), then the prebuilt
 * binary of prebuilds/<platform>-<arch>/ whose tags fit this process (napi, glibc or musl;
 * scripts/prebuild.mjs names it). Its build/ lookup takes the first `*.node` of the directory,
 * so build/Release must hold topocoll.node alone (the MPI addon builds into build/mpi/).
 */
function load(): RawAddon {
  if (addon !== undefined) return addon;
  const chosen = process.env.TOPOCOLL_ADDON;
  let path: string;
  if (chosen) {
    if (!existsSync(chosen))
      throw new TopocollError('EINVAL', `TOPOCOLL_ADDON names ${chosen}, which does not exist`, { hint: 'Unset it to load the installed addon.' });
    // Absolute: require() would take a relative path without ./ for a package name.
    path = resolve(chosen);
  } else {
    try {
      path = nodeGypBuild.path(PACKAGE_ROOT);
    } catch (cause) {
      throw new TopocollError('EINVAL', `no native addon fits this machine (${firstLine(cause)})`, {
        cause,
        hint: 'No prebuilt binary is shipped for it: compile one with "npm install-scripts approve topocoll && npm rebuild topocoll" (it needs cmake and a C++17 compiler).',
      });
    }
  }
  try {
    addon = createRequire(import.meta.url)(path) as RawAddon;
  } catch (cause) {
    // A binary that does not link here: a prebuilt one on a glibc or libstdc++ older than the
    // build machine's (scripts/prebuild.mjs), or a build for another architecture.
    throw new TopocollError('EINVAL', `the native addon ${path} does not load (${firstLine(cause)})`, {
      cause,
      hint: 'Compile it for this machine with "npm install-scripts approve topocoll && npm_config_build_from_source=true npm rebuild topocoll" (it needs cmake and a C++17 compiler).',
    });
  }
  return addon;
}

function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0]!.trim();
}

/**
 * `f()`, its native errors rethrown as TopocollError. For the calls made once or rarely: the
 * closure each call allocates would be garbage on the collectives' latency path, which has its
 * own try/catch (NativeEngine.invoke).
 */
function guarded<T>(rank: number | undefined, f: () => T): T {
  try {
    return f();
  } catch (e) {
    rethrowNative(e, { rank });
  }
}

/** A collective queued to the progress thread: its number there and the Promise it settles. */
export interface NativeJob {
  readonly id: number;
  readonly done: Promise<void>;
}

/** The native side of one communicator: shared segment, TCP links, schedules, executor. */
export class NativeEngine {
  private readonly raw: RawEngine;
  private readonly callArea: Float64Array;
  /** Named in the errors the addon raises. */
  private readonly rank: number;
  /** Why blocking collectives cannot run (a JavaScript layer between nodes), once refuseBlocking() said so. */
  private blockingRefused?: string;
  /** Rejects a Promise collective's failure as TopocollError; made once, not per call. */
  private readonly rethrowAsync = (e: unknown): never => rethrowNative(e, { rank: this.rank });

  constructor(options: NativeEngineOptions) {
    this.rank = options.rank;
    this.raw = guarded(this.rank, () => new (load().NativeEngine)(options));
    this.callArea = this.raw.callArea;
  }

  /** Opens a TCP listening socket on an ephemeral port of `address` (IPv4) only; returns the port. */
  listenTcp(address: string): number {
    return guarded(this.rank, () => this.raw.listenTcp(address));
  }

  /** Node leader: creates the node's segment (O_EXCL, mode 0600) and maps it. */
  createSegment(name: string): void {
    guarded(this.rank, () => this.raw.createSegment(name));
  }

  /** Other local ranks: maps the segment the leader created. */
  openSegment(name: string): void {
    guarded(this.rank, () => this.raw.openSegment(name));
  }

  /**
   * Node leader: waits at most `waitMs` for every local rank to map the segment; once they all
   * have, removes its name and returns true. (close() removes it too, if it is still there.)
   */
  allMappedAndUnlink(waitMs: number): boolean {
    return guarded(this.rank, () => this.raw.allMappedAndUnlink(waitMs));
  }

  /**
   * Connects to lower-ranked peers and accepts higher-ranked ones (each hello carries the token),
   * waiting at most `waitMs`. Returns the ranks not linked yet — call again for them — and why
   * the last connect failed. Links made and connections still greeting are kept between calls.
   */
  connectTcp(token: string, peers: TcpPeerAddress[], waitMs: number): { missing: Int32Array; lastError: string } {
    return guarded(this.rank, () => this.raw.connectTcp(token, peers, waitMs));
  }

  /**
   * Instead of TCP: ranks of other nodes are reached through `layer` on `tag` (before start());
   * `layerRanks[r]`, when given, is the layer's rank of this communicator's rank r.
   */
  useP2P(layer: NativeP2PLayer, tag: number, layerRanks?: readonly number[]): void {
    guarded(this.rank, () => (layerRanks === undefined ? this.raw.useP2P(layer.handle, tag) : this.raw.useP2P(layer.handle, tag, layerRanks)));
  }

  /** The ranks of other nodes this rank's plans exchange with over the layer (they get its abort notice). */
  addP2PPeers(ranks: readonly number[]): void {
    guarded(this.rank, () => this.raw.addP2PPeers(ranks));
  }

  /** The communicator's messages use this engine's node channels (before they start; they close first). */
  attachMessages(messages: NativeMessages): void {
    guarded(this.rank, () => this.raw.attachMessages(messages.handle));
  }

  /** From now on every blocking (Sync) collective fails with EINVAL and `reason`, before anything is sent. */
  refuseBlocking(reason: string): void {
    this.blockingRefused = reason;
  }

  /** Whether this thread may block on a call (not refused by refuseBlocking). */
  get blocking(): boolean {
    return this.blockingRefused === undefined;
  }

  /** Starts the watcher thread that turns a dead local peer into an abort. */
  start(): void {
    this.raw.start();
  }

  /**
   * Clears this rank's shared-memory engine state after a reconfiguration. Only between two
   * barriers that do not use the engines: no collective may be running anywhere on the node.
   */
  resetShm(): void {
    this.raw.resetShm();
  }

  /** Declares a group of this node's ranks that broadcasts through the S0 engine as `id`. */
  setShmGroup(id: number, ranks: readonly number[]): void {
    guarded(this.rank, () => this.raw.setShmGroup(id, ranks));
  }

  /** Registers a compiled schedule (`encodeSchedule`) under `id`. */
  setPlan(id: number, steps: Int32Array): void {
    guarded(this.rank, () => this.raw.setPlan(id, steps));
  }

  /**
   * What the JavaScript fast path works on (src/runtime/fast-path.ts): views of the node's
   * segment and of the engine's call counters, valid until close(). Undefined without a segment
   * or where the runtime refuses ArrayBuffers over memory it does not own.
   */
  fastPath(): NativeFastPath | undefined {
    return this.raw.fastPath();
  }

  /**
   * Maps shared window `id` (native/src/shm/shm_window.h): the node's lowest rank creates it under
   * `name`, the others open it once it exists; one part per local rank of `partBytes[i]` bytes.
   * Returns one ArrayBuffer over the whole window, detached by freeWindow() and close().
   */
  mapWindow(create: boolean, id: number, name: string, partBytes: readonly number[]): ArrayBuffer {
    return guarded(this.rank, () => (create ? this.raw.createWindow(id, name, partBytes) : this.raw.openWindow(id, name, partBytes)));
  }

  /** Detaches window `id`'s ArrayBuffer and unmaps it; false when this rank does not map it. */
  freeWindow(id: number): boolean {
    return this.raw.freeWindow(id);
  }

  /** Removes a window's name (any rank may; a missing name is no error). */
  unlinkWindow(name: string): void {
    this.raw.unlinkWindow(name);
  }

  /** The two addon calls the fast path makes off its fast path, with errors as TopocollError. */
  readonly fastPathEngine: FastPathEngine = {
    awaitAreaDeposits: (call, from, to) => guarded(this.rank, () => this.raw.awaitAreaDeposits(call, from, to)),
    ringLocal: (localIndex) => this.raw.ringLocal(localIndex),
  };

  /**
   * Runs one collective on the calling thread. `call.user` replaces `call.op` with a JavaScript
   * operator (called back on this thread). The addon has read `call` when this returns.
   */
  run(call: NativeCall): void {
    this.describe(call.collective, call.reducePlan, call.bcastPlan, call.count, call.dtype, call.op, call.root, call.planHash, call.segment);
    this.invoke(call.recv, call.send, call.user, undefined);
  }

  /**
   * The same queued to the communicator's progress thread; collectives still run in call order.
   * (No `user`: a JavaScript operator runs through `run`.) The addon has read `call` when this
   * returns. A call the addon refuses to queue throws here.
   */
  runAsync(call: NativeCall): NativeJob {
    this.describe(call.collective, call.reducePlan, call.bcastPlan, call.count, call.dtype, call.op, call.root, call.planHash, call.segment);
    return this.invokeAsync(call.recv, call.send, undefined);
  }

  /**
   * An allgather on the calling thread: `count` elements from every rank, or `counts[r]` from
   * rank r (allgatherv); recv holds them in rank order; `send` may be `recv` itself (IN_PLACE:
   * this rank's block is at its place). The gather phase runs in column segments of `segment`
   * elements of every block, the bcast phase in segments of `bcastSegment` elements.
   */
  runAllgather(call: NativeAllgatherCall): void {
    this.describeAllgather(call);
    this.invoke(call.recv, call.send, call.user, call.counts);
  }

  /** The same queued to the communicator's progress thread. */
  runAllgatherAsync(call: NativeAllgatherCall): NativeJob {
    this.describeAllgather(call);
    return this.invokeAsync(call.recv, call.send, call.counts);
  }

  /**
   * The one crossing into the addon's `run`, with the descriptor written: every Sync collective
   * passes through this try/catch. Arguments after the last one needed are left out (fewer
   * arguments, faster calls).
   */
  private invoke(recv: BufferArg, send: BufferArg, user: NativeUserOp | undefined, counts: Float64Array | undefined): void {
    this.ensureBlocking();
    try {
      if (user !== undefined || counts !== undefined) this.raw.run(recv, send, user ?? null, counts);
      else if (send === null) this.raw.run(recv);
      else this.raw.run(recv, send);
    } catch (e) {
      rethrowNative(e, { rank: this.rank });
    }
  }

  /** The same for `runAsync`, with the job's number. */
  private invokeAsync(recv: BufferArg, send: BufferArg, counts: Float64Array | undefined): NativeJob {
    const done = guarded(this.rank, () => this.raw.runAsync(recv, send, counts)).catch(this.rethrowAsync);
    return { id: this.raw.lastJob, done };
  }

  /** Whether queued job `id` has run; throws its error (TopocollError) if it failed. */
  testJob(id: number): boolean {
    return guarded(this.rank, () => this.raw.testJob(id));
  }

  /** Blocks until queued job `id` has run; throws its error if it failed. Call ensureBlocking() first. */
  waitJob(id: number): void {
    guarded(this.rank, () => this.raw.waitJob(id));
  }

  /** Throws EINVAL where this thread may not block on a collective (refuseBlocking said why). */
  ensureBlocking(): void {
    if (this.blockingRefused !== undefined) throw new TopocollError('EINVAL', this.blockingRefused, { rank: this.rank });
  }

  private describeAllgather(call: NativeAllgatherCall): void {
    this.describe(
      call.collective ?? Collective.allgather,
      call.gatherPlan,
      call.bcastPlan,
      call.count,
      call.dtype,
      call.op ?? 0,
      call.root ?? 0,
      call.planHash,
      call.segment,
    );
    this.callArea[CallField.bcastSegment] = call.bcastSegment;
  }

  private describe(
    c: NativeCollectiveCode,
    reducePlan: number,
    bcastPlan: number,
    count: number,
    dtype: number,
    op: number,
    root: number,
    planHash: number,
    segment: number,
  ): void {
    const area = this.callArea;
    area[CallField.collective] = c;
    area[CallField.reducePlan] = reducePlan;
    area[CallField.bcastPlan] = bcastPlan;
    area[CallField.count] = count;
    area[CallField.dtype] = dtype;
    area[CallField.op] = op;
    area[CallField.root] = root;
    area[CallField.planHash] = planHash;
    area[CallField.segment] = segment;
  }

  /** Leaves on purpose (so peers do not take the exit for a crash) and frees everything. */
  close(): void {
    this.raw.close();
  }

  /**
   * The NUMA node of every page of this rank's own S0 region (move_pages in query mode; a
   * negative entry is an errno). Empty when the rank is alone on its node.
   */
  ownRegionNodes(): Int32Array {
    return this.raw.ownRegionNodes();
  }

  /** Bytes of the node's shared segment (0 when this rank is alone on its node). */
  get segmentBytes(): number {
    return this.raw.segmentBytes;
  }

  /** What the node's segment is made of, and how much of the outboxes its channels use now. */
  sharedMemory(): SharedMemoryUse {
    return this.raw.sharedMemory();
  }
}

/**
 * Binds the calling thread to `cpus` and returns its previous CPUs. The launcher binds its
 * main thread around each spawn so the child starts (and stays) on its CPUs.
 */
export function setThreadAffinity(cpus: readonly number[]): number[] {
  return guarded(undefined, () => load().setThreadAffinity(cpus));
}

/** Bytes of a node segment for `localSize` ranks, outboxes of `channelPoolBytes` and these bcast queues. */
export function segmentBytes(localSize: number, channelPoolBytes: number, bcast: NativeBcastParams): number {
  return load().segmentBytes(localSize, channelPoolBytes, bcast);
}

/** The NUMA node of every page of `view` (move_pages in query mode; negative entries are errnos). */
export function pageNodes(view: ArrayBufferView): Int32Array {
  return load().pageNodes(view);
}

/** Copy rates across two cores, bytes per µs (native/src/base/copy_rate.h). */
export interface CrossCoreRates {
  /** Copying into lines the other core has read (S0's copy-in by the root). */
  writeShared: number;
  /** Copying lines the other core has just written (S0's copy-out by a reader). */
  readRemote: number;
}

/** Measures both copies of an S0 bcast across `writerCpu` and `readerCpu` over `rounds` rounds of `bytes`. */
export function crossCoreRates(bytes: number, rounds: number, writerCpu: number, readerCpu: number): CrossCoreRates {
  return guarded(undefined, () => load().crossCoreRates(bytes, rounds, writerCpu, readerCpu));
}

/** One-way ns of a cache line between `cpuA` and `cpuB`, the mean of `roundTrips` round trips (native/src/base/copy_rate.h). */
export function crossCoreLatencyNs(cpuA: number, cpuB: number, roundTrips: number): number {
  return guarded(undefined, () => load().crossCoreLatencyNs(cpuA, cpuB, roundTrips));
}

/** Bytes/µs the built-in float64 sum combines on this thread, the operator alone: the mean of `rounds` rounds over `bytes` (native/src/base/copy_rate.h). */
export function combineRate(bytes: number, rounds: number): number {
  return guarded(undefined, () => load().combineRate(bytes, rounds));
}

/**
 * Limits of the native layer the planner must respect: the longest segment an exchange that
 * sends before it receives may carry over TCP (`eagerBytes`) and over a host layer
 * (`layerExchangeBytes`), and the bytes of a message header.
 */
export function nativeLimits(): { eagerBytes: number; layerExchangeBytes: number; messageHeaderBytes: number } {
  const a = load();
  return { eagerBytes: a.eagerBytes, layerExchangeBytes: a.layerExchangeBytes, messageHeaderBytes: a.messageHeaderBytes };
}

/** The addon's copy of every table TypeScript mirrors (see NativeTables). */
export function nativeTables(): NativeTables {
  return load().nativeTables;
}

/** A step as the addon decoded it: every field of abi/abi.yaml's step, defaults included. */
export interface NativeStep {
  kind: number;
  peer: number;
  level: number;
  group: number;
  pollMicros: number;
  first: number;
  count: number;
  of: number;
  peer2: number;
  first2: number;
  count2: number;
  order: number;
  joined: boolean;
  everyRankCombines: boolean;
}

/** What the addon's step codec makes of encoded steps: the steps it decodes, and its own encoding of them. */
export interface NativeStepRoundTrip {
  steps: NativeStep[];
  words: Int32Array;
}

/**
 * The addon's DecodeSteps and EncodeSteps (native/src/engine/step.h) on `words` (encodeSchedule's
 * form), for the test that runs both sides' codecs on one list (test/step-codec.test.ts).
 * @internal
 */
export function nativeStepRoundTrip(words: Int32Array): NativeStepRoundTrip {
  return load().stepRoundTrip(words);
}
