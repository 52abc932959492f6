// The header every point-to-point message starts with, on both transports. It lets a receiver
// check that sender and receiver are in the same call of the same collective with the same
// arguments — a mismatch becomes EMISMATCH instead of a hang or wrong data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/abi_generated.h"

namespace topocoll {

// The header's magic (abi/abi.yaml: the JavaScript fast path writes headers too).
using abi::kMsgMagic;
// A probe carries only the sender's current call: a rank that waits long on a peer of another
// node sends one, so that two ranks blocked on each other in different collectives find out.
constexpr uint32_t kProbeMagic = 0x54504350U;  // "TPCP"
// Sent on every TCP link by a rank whose collective failed, just before it shuts the links:
// `op` carries the error's code, so ranks of other nodes learn why, not only that it left.
constexpr uint32_t kAbortMagic = 0x54504341U;  // "TPCA"

using abi::Collective;
const char* CollectiveName(Collective c);

struct MsgHeader {
  uint32_t magic;
  uint32_t seq;        // per-communicator call number (low 32 bits)
  uint8_t collective;  // Collective
  uint8_t dtype;       // Dtype
  uint8_t op;          // ReduceOp (0 where there is none)
  uint8_t phase;       // 0 = reduce / bcast alone, 1 = the bcast half of an allreduce
  int32_t root;
  uint64_t count;      // elements
  uint32_t plan_hash;  // identifies the level configuration the sender planned with
  int32_t sender;
};
// The header is part of the wire format, and the JavaScript fast path writes it word by word:
// its layout is abi/abi.yaml's.
static_assert(sizeof(MsgHeader) == abi::kMsgHeaderBytes, "MsgHeader's size is abi/abi.yaml's");
static_assert(offsetof(MsgHeader, magic) == abi::msg_header::kMagic, "MsgHeader::magic is where abi/abi.yaml puts it");
static_assert(offsetof(MsgHeader, seq) == abi::msg_header::kSeq, "MsgHeader::seq is where abi/abi.yaml puts it");
static_assert(offsetof(MsgHeader, collective) == abi::msg_header::kCollective, "MsgHeader::collective is where abi/abi.yaml puts it");
static_assert(offsetof(MsgHeader, dtype) == abi::msg_header::kDtype, "MsgHeader::dtype is where abi/abi.yaml puts it");
static_assert(offsetof(MsgHeader, op) == abi::msg_header::kOp, "MsgHeader::op is where abi/abi.yaml puts it");
static_assert(offsetof(MsgHeader, phase) == abi::msg_header::kPhase, "MsgHeader::phase is where abi/abi.yaml puts it");
static_assert(offsetof(MsgHeader, root) == abi::msg_header::kRoot, "MsgHeader::root is where abi/abi.yaml puts it");
static_assert(offsetof(MsgHeader, count) == abi::msg_header::kCount, "MsgHeader::count is where abi/abi.yaml puts it");
static_assert(offsetof(MsgHeader, plan_hash) == abi::msg_header::kPlanHash, "MsgHeader::plan_hash is where abi/abi.yaml puts it");
static_assert(offsetof(MsgHeader, sender) == abi::msg_header::kSender, "MsgHeader::sender is where abi/abi.yaml puts it");

// One piece of a message a transport writes: a header and a body go out as two slices, back to
// back, in one message (ShmChannel::Send, TcpLinks::Send).
struct ByteSlice {
  const void* data;
  size_t size;
};

// Empty when `got` is what the receiver expected from `peer`; else a description of the
// difference for an EMISMATCH error.
std::string DescribeMismatch(const MsgHeader& expected, const MsgHeader& got, int peer);

// For two calls with the same sequence number: empty when they are the same collective with the
// same arguments (the phase of an allreduce aside), else what differs.
std::string DescribeCallMismatch(const MsgHeader& mine, const MsgHeader& theirs, int peer);

}  // namespace topocoll
