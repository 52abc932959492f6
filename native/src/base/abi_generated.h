// Generated from abi/abi.yaml by scripts/gen-abi.mjs — do not edit: change the spec and run `npm run gen:abi`.
//
// What the addon and the TypeScript runtime (src/abi.generated.ts, from the same spec) agree on:
// step kinds and the encoded step, datatype, operator and collective codes, the call descriptor,
// the message header and the call counters both sides write, and the shared area and window sizes
// they both lay out.
#pragma once

#include <cstddef>
#include <cstdint>

namespace topocoll::abi {

// What a step of a schedule does (src/algorithms/schedule.ts has the semantics: the phase's buffer
// B, segments, block ranges, rank blocks, reduction order, exchanges).
enum class StepKind : int32_t {
  // Send B[range] to `peer`.
  kSend = 1,
  // Receive B[range] from `peer` (overwriting it).
  kRecv = 2,
  // Receive X from `peer` and combine it into B[range] (see `order`).
  kRecvReduce = 3,
  // Broadcast B[range] inside a group of one node through the shared-memory engine (S0,
  // native/src/shm/shm_bcast.h): every member runs this one step; `peer` is the group's source,
  // `group` its id with the engine.
  kShmBcast = 4,
  // Send B[range] to `peer`, then receive B[range2] from `peer2` (overwriting it).
  kSendRecv = 5,
  // Send B[range] to `peer`, then receive X from `peer2` and combine it into B[range2].
  kSendRecvReduce = 6,
  // Reduce inside a group of one node through shared memory (native/src/shm/shm_reduce.h): every
  // member runs this one step; `peer` is the destination, whose B[range] becomes the members'
  // B[range] combined in member (= rank) order; `group` is the group's id with the engine.
  kShmReduce = 7,
  // Allreduce of B among every rank of a job on one node through one shared area
  // (native/src/shm/shm_allreduce.h): every rank runs this one step and deposits B; with
  // `everyRankCombines` each rank then combines all deposits in rank order, else the last to arrive
  // does and every rank copies its result. Messages ≤ 8 KiB.
  kShmAllreduce = 8,
  // Allgather among every rank of a job on one node through the same area: the whole gather phase
  // in one step (segment: the longest block), in rounds of 64 KiB columns. Every rank deposits its
  // column; with `everyRankCombines` each rank waits for every deposit itself, else the last to
  // arrive tells all; then each copies every column to its place.
  kShmAllgather = 9,
  // Bcast of B (≤ 8 KiB) from `peer` among every rank of a job on one node through the same area,
  // one way: every rank deposits its header (`peer` also B) and marks its slot; `peer` returns at
  // once, the others wait for its mark and copy B out.
  kShmAreaBcast = 10,
  // Reduce of B (≤ 8 KiB) to `peer` among every rank of a job on one node through the same area,
  // one way: every rank deposits B; the others return at once, `peer` waits for every deposit and
  // combines them in rank order.
  kShmAreaReduce = 11,
  // Allreduce of a one-node job whose send and recv buffers are shared windows, the whole call in
  // one step of the reduce phase (native WindowCollectives::Allreduce): every rank publishes where
  // its buffers lie, combines its slice straight out of every rank's send into its own recv, then
  // copies every other slice out of its owner's recv — single copy, meetings through the area
  // (`everyRankCombines` picks their protocol).
  kShmWindowAllreduce = 12,
  // S1's one-sided bcast (src/algorithms/one-sided-bcast.ts; native Engine::RunOneSided and
  // WindowCollectives::OneSided): put B[range] into `peer`'s B. The tree is the world's, whatever
  // the node: on this node the data goes straight into `peer`'s part of the shared window B lies
  // in, at the offset B has in this rank's part, then a descriptor and the arrival flag
  // (native/src/shm/shm_window.h); to another node it is a Send.
  kPut = 13,
  // Wait until `peer`'s Put into B arrived (from another node: a Recv into B). `pollMicros`: S1's
  // sleep between polls, 0 the doorbell.
  kAwaitPut = 14,
  // Tell the bcast's root `peer` this rank has its data and forwarded it: on this node 1 added to
  // the root's done counter, else an empty message.
  kCountDone = 15,
  // The root (`peer` is itself): wait until every other rank counted itself done (S1's
  // RMABcastFlush). `pollMicros` as AwaitPut.
  kAwaitDone = 16,
  // Allgather of a one-node job whose blocks lie in shared windows (each rank's send, or its recv
  // for IN_PLACE), the whole gather phase in one step (native WindowCollectives::Allgather): every
  // rank publishes where its block lies, copies every other block straight out of its owner's
  // window into its place in the result, then meets the others once more — single copy, meetings
  // through the area (`everyRankCombines` picks their protocol).
  kShmWindowAllgather = 17,
  // The whole call of a gather(v), scatter(v), reduce-scatter, alltoall (equal blocks), scan or
  // exscan of a one-node job whose ranks have a core each, through the same area (native
  // ShmAllreduce::Gather … Scan; the collective is the call's): the only step of its first phase,
  // `peer` the root (0 for the unrooted ones). Each rank deposits what others read of it (≤ 8 KiB)
  // and reads what it needs straight out of their slots.
  kShmAreaCall = 18,
};
inline constexpr size_t kStepKindCount = 18;
// Each StepKind by value, with its name in TypeScript (and in the addon's messages and tables).
struct StepKindInfo {
  const char* name;
  StepKind value;
};
// clang-format off
inline constexpr StepKindInfo kStepKindTable[] = {
    {"Send", StepKind::kSend},
    {"Recv", StepKind::kRecv},
    {"RecvReduce", StepKind::kRecvReduce},
    {"ShmBcast", StepKind::kShmBcast},
    {"SendRecv", StepKind::kSendRecv},
    {"SendRecvReduce", StepKind::kSendRecvReduce},
    {"ShmReduce", StepKind::kShmReduce},
    {"ShmAllreduce", StepKind::kShmAllreduce},
    {"ShmAllgather", StepKind::kShmAllgather},
    {"ShmAreaBcast", StepKind::kShmAreaBcast},
    {"ShmAreaReduce", StepKind::kShmAreaReduce},
    {"ShmWindowAllreduce", StepKind::kShmWindowAllreduce},
    {"Put", StepKind::kPut},
    {"AwaitPut", StepKind::kAwaitPut},
    {"CountDone", StepKind::kCountDone},
    {"AwaitDone", StepKind::kAwaitDone},
    {"ShmWindowAllgather", StepKind::kShmWindowAllgather},
    {"ShmAreaCall", StepKind::kShmAreaCall},
};
// clang-format on

// The collective of a call: the call descriptor's `collective` slot and MsgHeader's `collective`
// byte.
enum class Collective : uint8_t {
  kBarrier = 1,
  kBcast = 2,
  kReduce = 3,
  kAllreduce = 4,
  kAllgather = 5,
  kGather = 6,
  kScatter = 7,
  kReduceScatter = 8,
  kScan = 9,
  kExscan = 10,
  kAlltoall = 11,
  kAlltoallv = 12,
};
inline constexpr size_t kCollectiveCount = 12;
// Each Collective by value, with its name in TypeScript (and in the addon's messages and tables).
struct CollectiveInfo {
  const char* name;
  Collective value;
};
// clang-format off
inline constexpr CollectiveInfo kCollectiveTable[] = {
    {"barrier", Collective::kBarrier},
    {"bcast", Collective::kBcast},
    {"reduce", Collective::kReduce},
    {"allreduce", Collective::kAllreduce},
    {"allgather", Collective::kAllgather},
    {"gather", Collective::kGather},
    {"scatter", Collective::kScatter},
    {"reduceScatter", Collective::kReduceScatter},
    {"scan", Collective::kScan},
    {"exscan", Collective::kExscan},
    {"alltoall", Collective::kAlltoall},
    {"alltoallv", Collective::kAlltoallv},
};
// clang-format on

// Element types: the call descriptor's `dtype` slot and MsgHeader's `dtype` byte. `bytes`: of one
// element; `integer`: the bitwise and logical operators apply to it. The names are the datatypes'
// names in errors and in topocoll/mpi.
enum class Dtype : uint8_t {
  kInt8 = 0,
  kUint8 = 1,
  kUint8Clamped = 2,
  kInt16 = 3,
  kUint16 = 4,
  kInt32 = 5,
  kUint32 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kInt64 = 9,
  kUint64 = 10,
};
inline constexpr size_t kDtypeCount = 11;
// Each Dtype by value, with its name in TypeScript (and in the addon's messages and tables).
struct DtypeInfo {
  const char* name;
  Dtype value;
  uint8_t bytes;
  bool integer;
};
// clang-format off
inline constexpr DtypeInfo kDtypeTable[] = {
    {"int8", Dtype::kInt8, 1, true},
    {"uint8", Dtype::kUint8, 1, true},
    {"uint8clamped", Dtype::kUint8Clamped, 1, true},
    {"int16", Dtype::kInt16, 2, true},
    {"uint16", Dtype::kUint16, 2, true},
    {"int32", Dtype::kInt32, 4, true},
    {"uint32", Dtype::kUint32, 4, true},
    {"float32", Dtype::kFloat32, 4, false},
    {"float64", Dtype::kFloat64, 8, false},
    {"int64", Dtype::kInt64, 8, true},
    {"uint64", Dtype::kUint64, 8, true},
};
// clang-format on

// Built-in reduction operators: the call descriptor's `op` slot and MsgHeader's `op` byte (255
// there: a user-defined operator). `integerOnly`: for integer datatypes only (the engine has no
// kernel for the others).
enum class ReduceOp : uint8_t {
  kSum = 0,
  kProd = 1,
  kMin = 2,
  kMax = 3,
  kBand = 4,
  kBor = 5,
  kBxor = 6,
  kLand = 7,
  kLor = 8,
};
inline constexpr size_t kReduceOpCount = 9;
// Each ReduceOp by value, with its name in TypeScript (and in the addon's messages and tables).
struct ReduceOpInfo {
  const char* name;
  ReduceOp value;
  bool integer_only;
};
// clang-format off
inline constexpr ReduceOpInfo kReduceOpTable[] = {
    {"sum", ReduceOp::kSum, false},
    {"prod", ReduceOp::kProd, false},
    {"min", ReduceOp::kMin, false},
    {"max", ReduceOp::kMax, false},
    {"band", ReduceOp::kBand, true},
    {"bor", ReduceOp::kBor, true},
    {"bxor", ReduceOp::kBxor, true},
    {"land", ReduceOp::kLand, true},
    {"lor", ReduceOp::kLor, true},
};
// clang-format on

// Notification tree shapes of the S0 bcast engine (NativeBcastParams.tree): the root notifies
// everyone (flat), a chain, a k-ary tree, or a k-nomial tree.
enum class TreeKind : int32_t {
  kFlat = 0,
  kChain = 1,
  kKary = 2,
  kKnomial = 3,
};
inline constexpr size_t kTreeKindCount = 4;
// Each TreeKind by value, with its name in TypeScript (and in the addon's messages and tables).
struct TreeKindInfo {
  const char* name;
  TreeKind value;
};
// clang-format off
inline constexpr TreeKindInfo kTreeKindTable[] = {
    {"flat", TreeKind::kFlat},
    {"chain", TreeKind::kChain},
    {"kary", TreeKind::kKary},
    {"knomial", TreeKind::kKnomial},
};
// clang-format on

// How a rank waits for its peers (`waits.mode` in the YAML; native/src/base/wait.h): auto spins and
// yields only while that can gain (not once others' work was seen to take this rank's cores), spin
// always spins and yields first (ranks that own their cores), sleep goes straight to the futex or
// poll() sleep.
enum class WaitMode : int32_t {
  kAuto = 0,
  kSpin = 1,
  kSleep = 2,
};
inline constexpr size_t kWaitModeCount = 3;
// Each WaitMode by value, with its name in TypeScript (and in the addon's messages and tables).
struct WaitModeInfo {
  const char* name;
  WaitMode value;
};
// clang-format off
inline constexpr WaitModeInfo kWaitModeTable[] = {
    {"auto", WaitMode::kAuto},
    {"spin", WaitMode::kSpin},
    {"sleep", WaitMode::kSleep},
};
// clang-format on

// Slots of the call descriptor: a Float64Array the addon owns (NativeEngine.callArea), which
// src/native.ts fills before each run and runAsync instead of passing the numbers as arguments
// (converting ten arguments cost more than the rest of a small collective).
enum class CallField : size_t {
  kCollective = 0,
  kReducePlan = 1,
  kBcastPlan = 2,
  kCount = 3,
  kDtype = 4,
  kOp = 5,
  kRoot = 6,
  kPlanHash = 7,
  kSegment = 8,
  // Allgather only - elements per segment of the bcast phase.
  kBcastSegment = 9,
};
inline constexpr size_t kCallFieldCount = 10;
// Each CallField by value, with its name in TypeScript (and in the addon's messages and tables).
struct CallFieldInfo {
  const char* name;
  CallField value;
};
// clang-format off
inline constexpr CallFieldInfo kCallFieldTable[] = {
    {"collective", CallField::kCollective},
    {"reducePlan", CallField::kReducePlan},
    {"bcastPlan", CallField::kBcastPlan},
    {"count", CallField::kCount},
    {"dtype", CallField::kDtype},
    {"op", CallField::kOp},
    {"root", CallField::kRoot},
    {"planHash", CallField::kPlanHash},
    {"segment", CallField::kSegment},
    {"bcastSegment", CallField::kBcastSegment},
};
// clang-format on

// What the addon asks of a JavaScript point-to-point layer (native/src/binding/js_p2p.h,
// src/p2p/js-layer.ts): the first argument of `operate`.
enum class JsP2POperation : int32_t {
  // Send the payload (a copy of the bytes).
  kSend = 0,
  // Receive at most the payload's number of bytes.
  kReceive = 1,
};
inline constexpr size_t kJsP2POperationCount = 2;
// Each JsP2POperation by value, with its name in TypeScript (and in the addon's messages and
// tables).
struct JsP2POperationInfo {
  const char* name;
  JsP2POperation value;
};
// clang-format off
inline constexpr JsP2POperationInfo kJsP2POperationTable[] = {
    {"send", JsP2POperation::kSend},
    {"receive", JsP2POperation::kReceive},
};
// clang-format on

// A schedule crosses into the addon as int32 words, a fixed number per step (encodeSchedule in
// src/algorithms/schedule.ts writes them, DecodeSteps in native/src/engine/step.h reads them).
inline constexpr size_t kStepWords = 12;
// The word of each field of an encoded step.
namespace step_word {
// The StepKind.
inline constexpr size_t kKind = 0;
// Global rank of the other side (the receiver of an exchange's send; ShmBcast, ShmAreaBcast: the
// source; ShmReduce, ShmAreaReduce: the destination).
inline constexpr size_t kPeer = 1;
// Index into the plan's levels of the group the step runs in (diagnostics, message headers, S0
// tags).
inline constexpr size_t kLevel = 2;
// The shared-memory group id the rank registered with the engine (setShmGroup).
inline constexpr size_t kGroup = 3;
// Microseconds slept between polls (S1's helper thread); 0 the engine's doorbell wait.
inline constexpr size_t kPollMicros = 3;
// The step's range is blocks [first, first + count) of the segment cut into `of` equal blocks (the
// default: the whole segment); `of` 0: rank block `first` (count 1) of an allgather's result.
inline constexpr size_t kFirst = 4;
inline constexpr size_t kCount = 5;
inline constexpr size_t kOf = 6;
// The rank an exchange receives from.
inline constexpr size_t kPeer2 = 7;
// Where an exchange's received data goes - blocks [first2, first2 + count2) of `of`.
inline constexpr size_t kFirst2 = 8;
inline constexpr size_t kCount2 = 9;
// 0 computes B op X (X covers higher ranks than B), 1 computes X op B.
inline constexpr size_t kOrder = 10;
// 1: this step's pair blocks travel in one message with the next step's (an alltoall's packed
// messages: a run of steps of one kind and the same peers, every one but the last joined - Bruck's
// rounds, the hierarchical form's bundles).
inline constexpr size_t kJoined = 10;
// 1 picks the area's every-rank protocol (every rank combines, or waits for every deposit itself),
// 0 the last-arrival one.
inline constexpr size_t kEveryRankCombines = 11;
}  // namespace step_word
// What a step encodes for a field it has no value for, and what the kinds that do not carry the
// field write there.
namespace step_default {
inline constexpr int32_t kGroup = 0;
inline constexpr int32_t kPollMicros = 0;
inline constexpr int32_t kFirst = 0;
inline constexpr int32_t kCount = 1;
inline constexpr int32_t kOf = 1;
inline constexpr int32_t kPeer2 = -1;
inline constexpr int32_t kFirst2 = 0;
inline constexpr int32_t kCount2 = 0;
inline constexpr int32_t kOrder = 0;
inline constexpr int32_t kJoined = 0;
inline constexpr int32_t kEveryRankCombines = 0;
}  // namespace step_default
// Whether a step of `kind` carries group: only these kinds read it, every other kind writes its
// default.
constexpr bool StepHasGroup(StepKind kind) {
  switch (kind) {
    case StepKind::kShmBcast:
    case StepKind::kShmReduce: return true;
    default: return false;
  }
}
// Whether a step of `kind` carries pollMicros: only these kinds read it, every other kind writes
// its default.
constexpr bool StepHasPollMicros(StepKind kind) {
  switch (kind) {
    case StepKind::kAwaitPut:
    case StepKind::kAwaitDone: return true;
    default: return false;
  }
}
// Whether a step of `kind` carries peer2: only these kinds read it, every other kind writes its
// default.
constexpr bool StepHasPeer2(StepKind kind) {
  switch (kind) {
    case StepKind::kSendRecv:
    case StepKind::kSendRecvReduce: return true;
    default: return false;
  }
}
// Whether a step of `kind` carries first2: only these kinds read it, every other kind writes its
// default.
constexpr bool StepHasFirst2(StepKind kind) {
  switch (kind) {
    case StepKind::kSendRecv:
    case StepKind::kSendRecvReduce: return true;
    default: return false;
  }
}
// Whether a step of `kind` carries count2: only these kinds read it, every other kind writes its
// default.
constexpr bool StepHasCount2(StepKind kind) {
  switch (kind) {
    case StepKind::kSendRecv:
    case StepKind::kSendRecvReduce: return true;
    default: return false;
  }
}
// Whether a step of `kind` carries order: only these kinds read it, every other kind writes its
// default.
constexpr bool StepHasOrder(StepKind kind) {
  switch (kind) {
    case StepKind::kRecvReduce:
    case StepKind::kSendRecvReduce: return true;
    default: return false;
  }
}
// Whether a step of `kind` carries joined: only these kinds read it, every other kind writes its
// default.
constexpr bool StepHasJoined(StepKind kind) {
  switch (kind) {
    case StepKind::kSend:
    case StepKind::kRecv:
    case StepKind::kSendRecv: return true;
    default: return false;
  }
}
// Whether a step of `kind` carries everyRankCombines: only these kinds read it, every other kind
// writes its default.
constexpr bool StepHasEveryRankCombines(StepKind kind) {
  switch (kind) {
    case StepKind::kShmAllreduce:
    case StepKind::kShmAllgather:
    case StepKind::kShmWindowAllreduce:
    case StepKind::kShmWindowAllgather: return true;
    default: return false;
  }
}

// MsgHeader (native/src/base/message.h): the 32 bytes every message, shared-area deposit and
// published call starts with. Byte offsets, little-endian; the JavaScript fast path
// (src/runtime/fast-path.ts) writes it as eight 32-bit words.
// MsgHeader's magic: "TPCL".
inline constexpr uint32_t kMsgMagic = 0x5450434cU;
inline constexpr size_t kMsgHeaderBytes = 32;
// Byte offsets of MsgHeader's fields.
namespace msg_header {
inline constexpr size_t kMagic = 0;
// The per-communicator call number (low 32 bits).
inline constexpr size_t kSeq = 4;
inline constexpr size_t kCollective = 8;
inline constexpr size_t kDtype = 9;
// 0 where the collective has none.
inline constexpr size_t kOp = 10;
// 1 in the bcast half of an allreduce (else 0).
inline constexpr size_t kPhase = 11;
inline constexpr size_t kRoot = 12;
// Elements.
inline constexpr size_t kCount = 16;
// The plan's hash, the previous call's hash folded in.
inline constexpr size_t kPlanHash = 24;
inline constexpr size_t kSender = 28;
}  // namespace msg_header

// CallCounters (native/src/engine/engine.h): the per-call counters the executor and the JavaScript
// fast path both advance; JavaScript reads and writes them as 32-bit words.
inline constexpr size_t kCallCounterWords = 4;
// The word of each counter.
namespace call_counter {
// Calls made - the last call's MsgHeader seq.
inline constexpr size_t kSeq = 0;
// CallHash of the last call.
inline constexpr size_t kPreviousCall = 1;
// Calls of the node-wide shared area (AreaCalls count).
inline constexpr size_t kAreaCalls = 2;
// Every rank has entered every area call below this one (AreaCalls all_entered).
inline constexpr size_t kAllEntered = 3;
}  // namespace call_counter

// The node-wide shared area (native/src/shm/shm_allreduce.h, ShmAllreduce).
// Largest allreduce, bcast and reduce it takes (the planner's SHM_ALLREDUCE_MAX_BYTES).
inline constexpr size_t kSharedAreaMaxBytes = 8192;
// Data a slot holds itself; larger data goes to a column. The fast path's calls all fit.
inline constexpr size_t kSharedAreaSlotDataBytes = 1024;
// Bytes of a column - larger data of a call, and an allgather's column per round.
inline constexpr size_t kSharedAreaColumnBytes = 65536;
// Largest one-way deposit whose later cache lines a reader fetches before the mark comes.
inline constexpr size_t kSharedAreaPrefetchBytes = 256;
// The cache line those early reads step by.
inline constexpr size_t kSharedAreaLineBytes = 64;

// Block ranges of a step (src/algorithms/schedule.ts): `of` 0 names one rank's block, this `of` one
// pair block of an alltoall (`first` = source · size + destination).
// The `of` word of a pair-block range (0xffffffff as the executor's uint32).
inline constexpr int32_t kBlocksPairBlocksOf = -1;

// A shared window's segment (native/src/shm/shm_window.h): its header, a counter block per local
// rank, then one part per local rank on page boundaries (windowLayout in src/runtime/windows.ts
// computes the same offsets).
// WindowHeader's line.
inline constexpr size_t kWindowHeaderBytes = 128;
// One WindowCounter - four lines.
inline constexpr size_t kWindowCounterBytes = 512;
// Parts start on multiples of this.
inline constexpr size_t kWindowPageBytes = 4096;

// Point-to-point messages (src/p2p/messages.ts, native/src/transport/message_match.h): the
// wildcards of a receive and the largest tag.
// A receive's source that matches any rank (ANY_SOURCE).
inline constexpr int32_t kMessagesAnySource = -1;
// A receive's tag that matches any tag (ANY_TAG).
inline constexpr int32_t kMessagesAnyTag = -1;
// The largest tag (tags are 0 … 2³¹−1).
inline constexpr int32_t kMessagesMaxTag = 2147483647;

}  // namespace topocoll::abi
