#include "base/message.h"

#include "base/datatypes.h"

namespace topocoll {

const char* CollectiveName(Collective c) {
  for (const abi::CollectiveInfo& e : abi::kCollectiveTable) {
    if (e.value == c) return e.name;
  }
  return "unknown collective";
}

namespace {

std::string Describe(const MsgHeader& h) {
  std::string s = CollectiveName(static_cast<Collective>(h.collective));
  s += "(count=" + std::to_string(h.count) + ", " + DtypeName(static_cast<Dtype>(h.dtype));
  auto c = static_cast<Collective>(h.collective);
  if (c == Collective::kReduce || c == Collective::kAllreduce || c == Collective::kReduceScatter || c == Collective::kScan ||
      c == Collective::kExscan)
    s += std::string(", ") + OpName(static_cast<ReduceOp>(h.op));
  if (c == Collective::kReduce || c == Collective::kBcast || c == Collective::kGather || c == Collective::kScatter)
    s += ", root=" + std::to_string(h.root);
  s += ") as call #" + std::to_string(h.seq);
  return s;
}

}  // namespace

std::string DescribeMismatch(const MsgHeader& expected, const MsgHeader& got, int peer) {
  if (got.magic != kMsgMagic) return "a corrupt message arrived from rank " + std::to_string(peer);
  if (got.sender != peer) {
    return "expected a message from rank " + std::to_string(peer) + " but got one from rank " + std::to_string(got.sender);
  }
  if (got.plan_hash != expected.plan_hash && got.seq == expected.seq) {
    return "rank " + std::to_string(peer) +
           " differs from this rank in the plan or in the previous collective call: a different level configuration (configure() or "
           "setLevelEnabled() not called on every rank), different allgatherv counts, shared windows (allocShared) as buffers on some "
           "ranks only, or different arguments to the previous collective";
  }
  const bool alltoall =
      static_cast<Collective>(got.collective) == Collective::kAlltoall || static_cast<Collective>(got.collective) == Collective::kAlltoallv;
  if (alltoall && got.seq == expected.seq && got.collective == expected.collective && got.dtype == expected.dtype &&
      got.count != expected.count) {
    // An alltoall's message carries one block (or a packed exchange's blocks), its count their length.
    return "rank " + std::to_string(peer) + " sent this rank " + std::to_string(got.count) + " elements in " +
           CollectiveName(static_cast<Collective>(got.collective)) + " call #" + std::to_string(got.seq) + " where this rank expects " +
           std::to_string(expected.count) + " (their counts of the blocks between them differ)";
  }
  if (got.seq != expected.seq || got.collective != expected.collective || got.dtype != expected.dtype || got.op != expected.op ||
      got.root != expected.root || got.count != expected.count || got.phase != expected.phase) {
    return "rank " + std::to_string(peer) + " called " + Describe(got) + " but this rank called " + Describe(expected);
  }
  return {};
}

std::string DescribeCallMismatch(const MsgHeader& mine, const MsgHeader& theirs, int peer) {
  if (theirs.seq != mine.seq) return {};
  if (theirs.collective == mine.collective && theirs.dtype == mine.dtype && theirs.op == mine.op && theirs.root == mine.root &&
      theirs.count == mine.count && theirs.plan_hash == mine.plan_hash) {
    return {};
  }
  const std::string both = "rank " + std::to_string(peer) + " called " + Describe(theirs) + " but this rank called " + Describe(mine);
  if (Describe(theirs) != Describe(mine)) return both;
  return both +
         ", planned differently: a different level configuration, shared windows (allocShared) as buffers on some ranks only, or "
         "different arguments to the previous collective";
}

}  // namespace topocoll
