// Generated from abi/abi.yaml by scripts/gen-abi.mjs — do not edit: change the spec and run `npm run gen:abi`.
//
// What the TypeScript runtime and the addon (native/src/base/abi_generated.h, from the same spec)
// agree on; src/native.ts, src/algorithms/schedule.ts, src/runtime/datatypes.ts and
// src/runtime/fast-path.ts give it its meaning.

/**
 * What a step of a schedule does (src/algorithms/schedule.ts has the semantics: the phase's buffer
 * B, segments, block ranges, rank blocks, reduction order, exchanges).
 */
export const StepKind = {
  /** Send B[range] to `peer`. */
  Send: 1,
  /** Receive B[range] from `peer` (overwriting it). */
  Recv: 2,
  /** Receive X from `peer` and combine it into B[range] (see `order`). */
  RecvReduce: 3,
  /**
   * Broadcast B[range] inside a group of one node through the shared-memory engine (S0,
   * native/src/shm/shm_bcast.h): every member runs this one step; `peer` is the group's source,
   * `group` its id with the engine.
   */
  ShmBcast: 4,
  /** Send B[range] to `peer`, then receive B[range2] from `peer2` (overwriting it). */
  SendRecv: 5,
  /** Send B[range] to `peer`, then receive X from `peer2` and combine it into B[range2]. */
  SendRecvReduce: 6,
  /**
   * Reduce inside a group of one node through shared memory (native/src/shm/shm_reduce.h): every
   * member runs this one step; `peer` is the destination, whose B[range] becomes the members'
   * B[range] combined in member (= rank) order; `group` is the group's id with the engine.
   */
  ShmReduce: 7,
  /**
   * Allreduce of B among every rank of a job on one node through one shared area
   * (native/src/shm/shm_allreduce.h): every rank runs this one step and deposits B; with
   * `everyRankCombines` each rank then combines all deposits in rank order, else the last to arrive
   * does and every rank copies its result. Messages ≤ 8 KiB.
   */
  ShmAllreduce: 8,
  /**
   * Allgather among every rank of a job on one node through the same area: the whole gather phase
   * in one step (segment: the longest block), in rounds of 64 KiB columns. Every rank deposits its
   * column; with `everyRankCombines` each rank waits for every deposit itself, else the last to
   * arrive tells all; then each copies every column to its place.
   */
  ShmAllgather: 9,
  /**
   * Bcast of B (≤ 8 KiB) from `peer` among every rank of a job on one node through the same area,
   * one way: every rank deposits its header (`peer` also B) and marks its slot; `peer` returns at
   * once, the others wait for its mark and copy B out.
   */
  ShmAreaBcast: 10,
  /**
   * Reduce of B (≤ 8 KiB) to `peer` among every rank of a job on one node through the same area,
   * one way: every rank deposits B; the others return at once, `peer` waits for every deposit and
   * combines them in rank order.
   */
  ShmAreaReduce: 11,
  /**
   * Allreduce of a one-node job whose send and recv buffers are shared windows, the whole call in
   * one step of the reduce phase (native WindowCollectives::Allreduce): every rank publishes where
   * its buffers lie, combines its slice straight out of every rank's send into its own recv, then
   * copies every other slice out of its owner's recv — single copy, meetings through the area
   * (`everyRankCombines` picks their protocol).
   */
  ShmWindowAllreduce: 12,
  /**
   * S1's one-sided bcast (src/algorithms/one-sided-bcast.ts; native Engine::RunOneSided and
   * WindowCollectives::OneSided): put B[range] into `peer`'s B. The tree is the world's, whatever
   * the node: on this node the data goes straight into `peer`'s part of the shared window B lies
   * in, at the offset B has in this rank's part, then a descriptor and the arrival flag
   * (native/src/shm/shm_window.h); to another node it is a Send.
   */
  Put: 13,
  /**
   * Wait until `peer`'s Put into B arrived (from another node: a Recv into B). `pollMicros`: S1's
   * sleep between polls, 0 the doorbell.
   */
  AwaitPut: 14,
  /**
   * Tell the bcast's root `peer` this rank has its data and forwarded it: on this node 1 added to
   * the root's done counter, else an empty message.
   */
  CountDone: 15,
  /**
   * The root (`peer` is itself): wait until every other rank counted itself done (S1's
   * RMABcastFlush). `pollMicros` as AwaitPut.
   */
  AwaitDone: 16,
  /**
   * Allgather of a one-node job whose blocks lie in shared windows (each rank's send, or its recv
   * for IN_PLACE), the whole gather phase in one step (native WindowCollectives::Allgather): every
   * rank publishes where its block lies, copies every other block straight out of its owner's
   * window into its place in the result, then meets the others once more — single copy, meetings
   * through the area (`everyRankCombines` picks their protocol).
   */
  ShmWindowAllgather: 17,
  /**
   * The whole call of a gather(v), scatter(v), reduce-scatter, alltoall (equal blocks), scan or
   * exscan of a one-node job whose ranks have a core each, through the same area (native
   * ShmAllreduce::Gather … Scan; the collective is the call's): the only step of its first phase,
   * `peer` the root (0 for the unrooted ones). Each rank deposits what others read of it (≤ 8 KiB)
   * and reads what it needs straight out of their slots.
   */
  ShmAreaCall: 18,
} as const;
export type StepKind = (typeof StepKind)[keyof typeof StepKind];

/**
 * The collective of a call: the call descriptor's `collective` slot and MsgHeader's `collective`
 * byte.
 */
export const Collective = {
  barrier: 1,
  bcast: 2,
  reduce: 3,
  allreduce: 4,
  allgather: 5,
  gather: 6,
  scatter: 7,
  reduceScatter: 8,
  scan: 9,
  exscan: 10,
  alltoall: 11,
  alltoallv: 12,
} as const;
export type Collective = (typeof Collective)[keyof typeof Collective];

/**
 * Element types: the call descriptor's `dtype` slot and MsgHeader's `dtype` byte. `bytes`: of one
 * element; `integer`: the bitwise and logical operators apply to it. The names are the datatypes'
 * names in errors and in topocoll/mpi.
 */
export const Dtype = {
  int8: 0,
  uint8: 1,
  uint8clamped: 2,
  int16: 3,
  uint16: 4,
  int32: 5,
  uint32: 6,
  float32: 7,
  float64: 8,
  int64: 9,
  uint64: 10,
} as const;
export type Dtype = (typeof Dtype)[keyof typeof Dtype];
/** Each Dtype's bytes and integer, by value. */
export const DTYPE_INFO = [
  { name: 'int8', bytes: 1, integer: true },
  { name: 'uint8', bytes: 1, integer: true },
  { name: 'uint8clamped', bytes: 1, integer: true },
  { name: 'int16', bytes: 2, integer: true },
  { name: 'uint16', bytes: 2, integer: true },
  { name: 'int32', bytes: 4, integer: true },
  { name: 'uint32', bytes: 4, integer: true },
  { name: 'float32', bytes: 4, integer: false },
  { name: 'float64', bytes: 8, integer: false },
  { name: 'int64', bytes: 8, integer: true },
  { name: 'uint64', bytes: 8, integer: true },
] as const;

/**
 * Built-in reduction operators: the call descriptor's `op` slot and MsgHeader's `op` byte (255
 * there: a user-defined operator). `integerOnly`: for integer datatypes only (the engine has no
 * kernel for the others).
 */
export const ReduceOp = {
  sum: 0,
  prod: 1,
  min: 2,
  max: 3,
  band: 4,
  bor: 5,
  bxor: 6,
  land: 7,
  lor: 8,
} as const;
export type ReduceOp = (typeof ReduceOp)[keyof typeof ReduceOp];
/** Each ReduceOp's integerOnly, by value. */
export const REDUCE_OP_INFO = [
  { name: 'sum', integerOnly: false },
  { name: 'prod', integerOnly: false },
  { name: 'min', integerOnly: false },
  { name: 'max', integerOnly: false },
  { name: 'band', integerOnly: true },
  { name: 'bor', integerOnly: true },
  { name: 'bxor', integerOnly: true },
  { name: 'land', integerOnly: true },
  { name: 'lor', integerOnly: true },
] as const;

/**
 * Notification tree shapes of the S0 bcast engine (NativeBcastParams.tree): the root notifies
 * everyone (flat), a chain, a k-ary tree, or a k-nomial tree.
 */
export const TreeKind = {
  flat: 0,
  chain: 1,
  kary: 2,
  knomial: 3,
} as const;
export type TreeKind = (typeof TreeKind)[keyof typeof TreeKind];

/**
 * How a rank waits for its peers (`waits.mode` in the YAML; native/src/base/wait.h): auto spins and
 * yields only while that can gain (not once others' work was seen to take this rank's cores), spin
 * always spins and yields first (ranks that own their cores), sleep goes straight to the futex or
 * poll() sleep.
 */
export const WaitMode = {
  auto: 0,
  spin: 1,
  sleep: 2,
} as const;
export type WaitMode = (typeof WaitMode)[keyof typeof WaitMode];

/**
 * Slots of the call descriptor: a Float64Array the addon owns (NativeEngine.callArea), which
 * src/native.ts fills before each run and runAsync instead of passing the numbers as arguments
 * (converting ten arguments cost more than the rest of a small collective).
 */
export const enum CallField {
  collective = 0,
  reducePlan = 1,
  bcastPlan = 2,
  count = 3,
  dtype = 4,
  op = 5,
  root = 6,
  planHash = 7,
  segment = 8,
  /** Allgather only - elements per segment of the bcast phase. */
  bcastSegment = 9,
}
/** CallField as an object (a const enum has none at run time). */
export const CALL_FIELDS = {
  collective: 0,
  reducePlan: 1,
  bcastPlan: 2,
  count: 3,
  dtype: 4,
  op: 5,
  root: 6,
  planHash: 7,
  segment: 8,
  bcastSegment: 9,
} as const;

/**
 * What the addon asks of a JavaScript point-to-point layer (native/src/binding/js_p2p.h,
 * src/p2p/js-layer.ts): the first argument of `operate`.
 */
export const JsP2POperation = {
  /** Send the payload (a copy of the bytes). */
  send: 0,
  /** Receive at most the payload's number of bytes. */
  receive: 1,
} as const;
export type JsP2POperation = (typeof JsP2POperation)[keyof typeof JsP2POperation];

/**
 * A schedule crosses into the addon as int32 words, a fixed number per step (encodeSchedule in
 * src/algorithms/schedule.ts writes them, DecodeSteps in native/src/engine/step.h reads them).
 */
export const STEP_WORDS = 12;
/** The word of each field of an encoded step. */
export const StepWord = {
  /** The StepKind. */
  kind: 0,
  /**
   * Global rank of the other side (the receiver of an exchange's send; ShmBcast, ShmAreaBcast: the
   * source; ShmReduce, ShmAreaReduce: the destination).
   */
  peer: 1,
  /**
   * Index into the plan's levels of the group the step runs in (diagnostics, message headers, S0
   * tags).
   */
  level: 2,
  /** The shared-memory group id the rank registered with the engine (setShmGroup). */
  group: 3,
  /** Microseconds slept between polls (S1's helper thread); 0 the engine's doorbell wait. */
  pollMicros: 3,
  /**
   * The step's range is blocks [first, first + count) of the segment cut into `of` equal blocks
   * (the default: the whole segment); `of` 0: rank block `first` (count 1) of an allgather's
   * result.
   */
  first: 4,
  count: 5,
  of: 6,
  /** The rank an exchange receives from. */
  peer2: 7,
  /** Where an exchange's received data goes - blocks [first2, first2 + count2) of `of`. */
  first2: 8,
  count2: 9,
  /** 0 computes B op X (X covers higher ranks than B), 1 computes X op B. */
  order: 10,
  /**
   * 1: this step's pair blocks travel in one message with the next step's (an alltoall's packed
   * messages: a run of steps of one kind and the same peers, every one but the last joined -
   * Bruck's rounds, the hierarchical form's bundles).
   */
  joined: 10,
  /**
   * 1 picks the area's every-rank protocol (every rank combines, or waits for every deposit
   * itself), 0 the last-arrival one.
   */
  everyRankCombines: 11,
} as const;
/**
 * What a step encodes for a field it has no value for, and what the kinds that do not carry the
 * field write there.
 */
export const StepDefault = {
  group: 0,
  pollMicros: 0,
  first: 0,
  count: 1,
  of: 1,
  peer2: -1,
  first2: 0,
  count2: 0,
  order: 0,
  joined: 0,
  everyRankCombines: 0,
} as const;
/**
 * Whether a step of `kind` carries group: only these kinds read it, every other kind writes its
 * default.
 */
export function stepHasGroup(kind: StepKind): boolean {
  return kind === StepKind.ShmBcast || kind === StepKind.ShmReduce;
}
/**
 * Whether a step of `kind` carries pollMicros: only these kinds read it, every other kind writes
 * its default.
 */
export function stepHasPollMicros(kind: StepKind): boolean {
  return kind === StepKind.AwaitPut || kind === StepKind.AwaitDone;
}
/**
 * Whether a step of `kind` carries peer2: only these kinds read it, every other kind writes its
 * default.
 */
export function stepHasPeer2(kind: StepKind): boolean {
  return kind === StepKind.SendRecv || kind === StepKind.SendRecvReduce;
}
/**
 * Whether a step of `kind` carries first2: only these kinds read it, every other kind writes its
 * default.
 */
export function stepHasFirst2(kind: StepKind): boolean {
  return kind === StepKind.SendRecv || kind === StepKind.SendRecvReduce;
}
/**
 * Whether a step of `kind` carries count2: only these kinds read it, every other kind writes its
 * default.
 */
export function stepHasCount2(kind: StepKind): boolean {
  return kind === StepKind.SendRecv || kind === StepKind.SendRecvReduce;
}
/**
 * Whether a step of `kind` carries order: only these kinds read it, every other kind writes its
 * default.
 */
export function stepHasOrder(kind: StepKind): boolean {
  return kind === StepKind.RecvReduce || kind === StepKind.SendRecvReduce;
}
/**
 * Whether a step of `kind` carries joined: only these kinds read it, every other kind writes its
 * default.
 */
export function stepHasJoined(kind: StepKind): boolean {
  return kind === StepKind.Send || kind === StepKind.Recv || kind === StepKind.SendRecv;
}
/**
 * Whether a step of `kind` carries everyRankCombines: only these kinds read it, every other kind
 * writes its default.
 */
export function stepHasEveryRankCombines(kind: StepKind): boolean {
  return kind === StepKind.ShmAllreduce || kind === StepKind.ShmAllgather || kind === StepKind.ShmWindowAllreduce || kind === StepKind.ShmWindowAllgather;
}

/**
 * MsgHeader (native/src/base/message.h): the 32 bytes every message, shared-area deposit and
 * published call starts with. Byte offsets, little-endian; the JavaScript fast path
 * (src/runtime/fast-path.ts) writes it as eight 32-bit words. The magic: "TPCL".
 */
export const MSG_MAGIC = 0x5450434c;
export const MSG_HEADER_BYTES = 32;
/** Byte offsets of MsgHeader's fields. */
export const enum MsgHeaderOffset {
  magic = 0,
  /** The per-communicator call number (low 32 bits). */
  seq = 4,
  collective = 8,
  dtype = 9,
  /** 0 where the collective has none. */
  op = 10,
  /** 1 in the bcast half of an allreduce (else 0). */
  phase = 11,
  root = 12,
  /** Elements. */
  count = 16,
  /** The plan's hash, the previous call's hash folded in. */
  planHash = 24,
  sender = 28,
}
/** MsgHeaderOffset as an object (a const enum has none at run time). */
export const MSG_HEADER_OFFSETS = {
  magic: 0,
  seq: 4,
  collective: 8,
  dtype: 9,
  op: 10,
  phase: 11,
  root: 12,
  count: 16,
  planHash: 24,
  sender: 28,
} as const;
/** The 32-bit word each field that starts a word is (the fast path writes the header as words). */
export const enum MsgHeaderWord {
  magic = 0,
  seq = 1,
  collective = 2,
  root = 3,
  count = 4,
  planHash = 6,
  sender = 7,
}
/**
 * Where each byte field starts in its word (the word of the first byte field before it that starts
 * one), in bits (little-endian).
 */
export const enum MsgHeaderShift {
  collective = 0,
  dtype = 8,
  op = 16,
  phase = 24,
}

/**
 * CallCounters (native/src/engine/engine.h): the per-call counters the executor and the JavaScript
 * fast path both advance; JavaScript reads and writes them as 32-bit words.
 */
export const CALL_COUNTER_WORDS = 4;
/** The word of each counter. */
export const enum CallCounter {
  /** Calls made - the last call's MsgHeader seq. */
  seq = 0,
  /** CallHash of the last call. */
  previousCall = 1,
  /** Calls of the node-wide shared area (AreaCalls count). */
  areaCalls = 2,
  /** Every rank has entered every area call below this one (AreaCalls all_entered). */
  allEntered = 3,
}
/** CallCounter as an object (a const enum has none at run time). */
export const CALL_COUNTERS = {
  seq: 0,
  previousCall: 1,
  areaCalls: 2,
  allEntered: 3,
} as const;

// The node-wide shared area (native/src/shm/shm_allreduce.h, ShmAllreduce).
/** Largest allreduce, bcast and reduce it takes (the planner's SHM_ALLREDUCE_MAX_BYTES). */
export const SHARED_AREA_MAX_BYTES = 8192;
/** Data a slot holds itself; larger data goes to a column. The fast path's calls all fit. */
export const SHARED_AREA_SLOT_DATA_BYTES = 1024;
/** Bytes of a column - larger data of a call, and an allgather's column per round. */
export const SHARED_AREA_COLUMN_BYTES = 65536;
/** Largest one-way deposit whose later cache lines a reader fetches before the mark comes. */
export const SHARED_AREA_PREFETCH_BYTES = 256;
/** The cache line those early reads step by. */
export const SHARED_AREA_LINE_BYTES = 64;

// Block ranges of a step (src/algorithms/schedule.ts): `of` 0 names one rank's block, this `of` one
// pair block of an alltoall (`first` = source · size + destination).
/** The `of` word of a pair-block range (0xffffffff as the executor's uint32). */
export const BLOCKS_PAIR_BLOCKS_OF = -1;

// A shared window's segment (native/src/shm/shm_window.h): its header, a counter block per local
// rank, then one part per local rank on page boundaries (windowLayout in src/runtime/windows.ts
// computes the same offsets).
/** WindowHeader's line. */
export const WINDOW_HEADER_BYTES = 128;
/** One WindowCounter - four lines. */
export const WINDOW_COUNTER_BYTES = 512;
/** Parts start on multiples of this. */
export const WINDOW_PAGE_BYTES = 4096;

// Point-to-point messages (src/p2p/messages.ts, native/src/transport/message_match.h): the
// wildcards of a receive and the largest tag.
/** A receive's source that matches any rank (ANY_SOURCE). */
export const MESSAGES_ANY_SOURCE = -1;
/** A receive's tag that matches any tag (ANY_TAG). */
export const MESSAGES_ANY_TAG = -1;
/** The largest tag (tags are 0 … 2³¹−1). */
export const MESSAGES_MAX_TAG = 2147483647;
