// One step of a schedule as the executor runs it, and the words it crosses into the addon as.
// The kinds, the words and their defaults are abi/abi.yaml's (abi_generated.h); what each kind
// and field means is src/algorithms/schedule.ts's (the phase's buffer B, segments, block ranges,
// rank blocks, reduction order, exchanges), which writes the words (encodeSchedule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/abi_generated.h"

namespace topocoll {

using abi::kStepWords;
using abi::StepKind;

// `of` of a pair-block range: block `first` = s·p + d of an alltoall (the word −1).
inline constexpr uint32_t kPairBlocks = static_cast<uint32_t>(abi::kBlocksPairBlocksOf);

struct Step {
  StepKind kind = StepKind::kSend;
  // The other rank (the receiver of an exchange's send); kShmBcast, kShmAreaBcast: the source;
  // kShmReduce, kShmAreaReduce: the destination.
  int32_t peer = 0;
  int32_t level = 0;
  // kShmBcast, kShmReduce: the shared-memory group id registered with SetShmGroup.
  int32_t group = abi::step_default::kGroup;
  // kAwaitPut, kAwaitDone: S1's sleep between polls, µs (0: the engine's doorbell wait).
  int32_t poll_us = abi::step_default::kPollMicros;
  // Blocks [first, first + count) of the segment cut into `of` blocks. of = 0: rank block
  // `first` (count 1) of an allgather's result (engine.cc, RunStep; schedule.ts); of =
  // kPairBlocks: an alltoall's pair block `first` (count 1).
  uint32_t first = abi::step_default::kFirst, count = abi::step_default::kCount, of = abi::step_default::kOf;
  // Exchanges: the rank received from (−1: none), and where its data goes (blocks of `of`).
  int32_t peer2 = abi::step_default::kPeer2;
  uint32_t first2 = abi::step_default::kFirst2, count2 = abi::step_default::kCount2;
  // RecvReduce, SendRecvReduce: 0 = B op X, 1 = X op B.
  int32_t order = abi::step_default::kOrder;
  // Send, Recv, SendRecv of pair blocks: its blocks travel in one message with the next step's.
  bool joined = abi::step_default::kJoined != 0;
  // kShmAllreduce: every rank combines the deposits (else the last to arrive does);
  // kShmAllgather: every rank waits for each deposit itself (else the last to arrive tells all);
  // kShmWindowAllreduce, kShmWindowAllgather: the protocol of their meetings.
  bool every_rank_combines = abi::step_default::kEveryRankCombines != 0;
  // Resolved by SetPlan: local indices of peer and peer2 (−1: on another node).
  int32_t local_peer = -1, local_peer2 = -1;
};

// The steps of `n` encoded words, kStepWords each (words after the last whole step are
// ignored). A field a kind does not carry (abi::StepHas…) keeps its default, whatever its word
// holds; nothing is checked here (Engine::SetPlan checks the ranges).
std::vector<Step> DecodeSteps(const int32_t* words, size_t n);

// The words of `steps`, kStepWords each: what encodeSchedule writes for the same steps, so
// DecodeSteps(EncodeSteps(s)) is s for steps DecodeSteps made. For tests and diagnostics.
std::vector<int32_t> EncodeSteps(const std::vector<Step>& steps);

}  // namespace topocoll
