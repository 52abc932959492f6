#include "shm/shm_allreduce.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "base/errors.h"

namespace topocoll {

ShmAllreduce::ShmAllreduce(Area area, std::vector<int> ranks, std::vector<Doorbell*> doorbells, int me, AreaCalls* calls)
    : counters_(area.counters),
      results_(area.results),
      slots_(area.slots),
      columns_(area.columns),
      ranks_(std::move(ranks)),
      doorbells_(std::move(doorbells)),
      me_(me),
      calls_(calls) {}

static_assert((ShmAllreduce::kDepth & (ShmAllreduce::kDepth - 1)) == 0 && ShmAllreduce::kDepth >= 4,
              "the ring's place is the call's low bits, and its refill mark lies between needed and the call");

ShmAllreduce::Slot& ShmAllreduce::SlotOf(int rank, uint32_t call) const {
  return slots_[(call & (kDepth - 1)) * doorbells_.size() + static_cast<size_t>(rank)];
}

uint8_t* ShmAllreduce::DataOf(int rank, uint32_t call, size_t bytes) const {
  if (bytes <= kInlineBytes) return SlotOf(rank, call).data;
  return columns_ + ((call & 1) * doorbells_.size() + static_cast<size_t>(rank)) * kColumnBytes;
}

namespace {
// Whether call number `a` comes before `b` (32-bit numbers that wrap; they differ by far less
// than 2^31).
bool Before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }
}  // namespace

void ShmAllreduce::EnsureEntered(uint32_t needed, uint32_t target, const WaitPolicy& policy, WaitGuard& guard) {
  if (Before(needed, calls_->all_entered)) return;
  for (size_t r = 0; r < doorbells_.size(); ++r) {
    if (static_cast<int>(r) == me_) continue;
    const Slot& theirs = SlotOf(static_cast<int>(r), target);
    // Entered: the slot holds target's mark, or that of target + kDepth (Reuse: r is at most
    // kDepth − 2 calls past this one); any other value is of an earlier call.
    auto entered = [&] {
      const uint32_t ahead = theirs.deposited.load(std::memory_order_acquire) - (target + 1);
      return ahead == 0 || ahead == kDepth;
    };
    if (!entered()) WaitUntil(entered, *doorbells_[static_cast<size_t>(me_)], policy, guard);
  }
  calls_->all_entered = target + 1;
}

uint8_t* ShmAllreduce::Result(uint32_t call) const { return results_ + (call & 1) * kMaxBytes; }

void ShmAllreduce::CheckHeader(const MsgHeader& mine, const MsgHeader& theirs, size_t r) const {
  MsgHeader want = mine;
  want.sender = ranks_[r];
  const std::string mismatch = DescribeMismatch(want, theirs, ranks_[r]);
  if (!mismatch.empty()) throw CollError("EMISMATCH", mismatch);
}

void ShmAllreduce::CheckFits(const char* collective, size_t bytes) {
  if (bytes > kMaxBytes) {
    throw CollError("EINVAL", std::string("shared-memory ") + collective + " of " + std::to_string(bytes) + " bytes (at most " +
                                  std::to_string(kMaxBytes) + ")");
  }
}

uint32_t ShmAllreduce::Deposit(const void* data, size_t bytes, const MsgHeader& header, const WaitPolicy& policy, WaitGuard& guard) {
  const uint32_t call = calls_->count;
  if (bytes > kInlineBytes)
    EnsureEntered(call - 1, call - 1, policy, guard);
  else
    EnsureEntered(call - (kDepth - 1), call - kDepth / 2, policy, guard);
  calls_->count = call + 1;
  Slot& mine = SlotOf(me_, call);
  // The data before the header: the mark's line (which holds the header and the data's first
  // bytes) is then written in one burst just before the mark, not given up to a reader's spin
  // between its header and its mark while the data's later lines are written.
  if (bytes > 0) std::memcpy(DataOf(me_, call, bytes), data, bytes);
  mine.header = header;
  mine.header.sender = ranks_[static_cast<size_t>(me_)];
  return call;
}

void ShmAllreduce::MarkDeposited(uint32_t call, const WaitPolicy& policy) {
  SlotOf(me_, call).deposited.store(call + 1, std::memory_order_release);
  for (size_t r = 0; r < doorbells_.size(); ++r) {
    if (static_cast<int>(r) != me_) doorbells_[r]->Ring(policy.asymmetric);
  }
}

void ShmAllreduce::PrefetchDeposit(uint32_t call, size_t r, size_t bytes) const {
  if (bytes > kPrefetchBytes) return;
  const uint8_t* slot = reinterpret_cast<const uint8_t*>(&SlotOf(static_cast<int>(r), call));
  for (size_t at = kLineBytes; at < kDataAt + bytes; at += kLineBytes) __builtin_prefetch(slot + at);
}

void ShmAllreduce::AwaitDeposit(uint32_t call, size_t r, const MsgHeader& header, const WaitPolicy& policy, WaitGuard& guard) {
  const Slot& theirs = SlotOf(static_cast<int>(r), call);
  auto deposited = [&] { return theirs.deposited.load(std::memory_order_acquire) == call + 1; };
  if (!deposited()) WaitUntil(deposited, *doorbells_[static_cast<size_t>(me_)], policy, guard);
  CheckHeader(header, theirs.header, r);
}

void ShmAllreduce::AwaitDeposits(uint32_t call, size_t from, size_t to, const MsgHeader& header, const WaitPolicy& policy,
                                 WaitGuard& guard) {
  for (size_t r = from; r < std::min(to, doorbells_.size()); ++r) {
    if (static_cast<int>(r) != me_) AwaitDeposit(call, r, header, policy, guard);
  }
}

// `round`: the call's number among the last-arrival calls, which alone count in `arrived` and
// `completed` (the protocol can change between calls, configure()).
bool ShmAllreduce::Arrive(uint32_t call, uint64_t round, const MsgHeader& header) {
  const uint64_t ranks = doorbells_.size();
  // acq_rel: publishes this slot, and the last adder sees every slot the others published.
  const uint64_t before = counters_->arrived.fetch_add(1, std::memory_order_acq_rel);
  if (before != round * ranks + ranks - 1) return false;
  for (uint64_t r = 0; r < ranks; ++r) CheckHeader(header, SlotOf(static_cast<int>(r), call).header, r);
  return true;
}

void ShmAllreduce::Complete(uint64_t round, const WaitPolicy& policy) {
  counters_->completed.store(round + 1, std::memory_order_release);
  for (size_t r = 0; r < doorbells_.size(); ++r) {
    if (static_cast<int>(r) != me_) doorbells_[r]->Ring(policy.asymmetric);
  }
}

void ShmAllreduce::AwaitComplete(uint64_t round, const WaitPolicy& policy, WaitGuard& guard) {
  auto done = [&] { return counters_->completed.load(std::memory_order_acquire) > round; };
  if (!done()) WaitUntil(done, *doorbells_[static_cast<size_t>(me_)], policy, guard);
}

void ShmAllreduce::Run(void* buf, uint64_t count, size_t elem, const MsgHeader& header, bool every_rank_combines, const Reducer& combine,
                       const WaitPolicy& policy, WaitGuard& guard) {
  const size_t bytes = static_cast<size_t>(count) * elem;
  CheckFits("allreduce", bytes);
  const uint32_t call = Deposit(buf, bytes, header, policy, guard);
  if (every_rank_combines)
    EveryRankCombines(call, buf, bytes, count, header, combine, policy, guard);
  else
    LastCombines(call, last_arrival_calls_++, buf, bytes, count, header, combine, policy, guard);
}

void ShmAllreduce::Bcast(void* buf, size_t bytes, const MsgHeader& header, size_t root, const WaitPolicy& policy, WaitGuard& guard) {
  CheckFits("bcast", bytes);
  const bool mine = root == static_cast<size_t>(me_);
  const uint32_t call = Deposit(buf, mine ? bytes : 0, header, policy, guard);
  MarkDeposited(call, policy);
  if (mine) return;
  PrefetchDeposit(call, root, bytes);
  AwaitDeposit(call, root, header, policy, guard);
  // It saw the root's mark; at two ranks that is every mark.
  if (doorbells_.size() == 2) calls_->all_entered = call + 1;
  if (bytes > 0) std::memcpy(buf, DataOf(static_cast<int>(root), call, bytes), bytes);
}

void ShmAllreduce::Reduce(void* buf, uint64_t count, size_t elem, const MsgHeader& header, size_t root, const Reducer& combine,
                          const WaitPolicy& policy, WaitGuard& guard) {
  const size_t bytes = static_cast<size_t>(count) * elem;
  CheckFits("reduce", bytes);
  const uint32_t call = Deposit(buf, bytes, header, policy, guard);
  if (root != static_cast<size_t>(me_)) {
    MarkDeposited(call, policy);
    return;
  }
  for (size_t r = 0; r < doorbells_.size(); ++r) {
    if (static_cast<int>(r) != me_) PrefetchDeposit(call, r, bytes);
  }
  EveryRankCombines(call, buf, bytes, count, header, combine, policy, guard);
}

void ShmAllreduce::EveryRankCombines(uint32_t call, void* buf, size_t bytes, uint64_t count, const MsgHeader& header,
                                     const Reducer& combine, const WaitPolicy& policy, WaitGuard& guard) {
  MarkDeposited(call, policy);
  // A barrier has nothing to combine (and no operator): bytes 0.
  FoldDeposits(call, doorbells_.size(), bytes, 0, static_cast<uint8_t*>(buf), bytes, count, header, combine, policy, guard);
  calls_->all_entered = call + 1;
}

void ShmAllreduce::FoldDeposits(uint32_t call, size_t upto, size_t deposit_bytes, size_t at, uint8_t* out, size_t out_bytes, uint64_t count,
                                const MsgHeader& header, const Reducer& combine, const WaitPolicy& policy, WaitGuard& guard) {
  for (size_t r = 0; r < upto; ++r) {
    if (static_cast<int>(r) != me_) AwaitDeposit(call, r, header, policy, guard);
    // This rank's own term is in its slot too.
    if (out_bytes == 0) continue;
    const uint8_t* theirs = DataOf(static_cast<int>(r), call, deposit_bytes) + at;
    if (r == 0)
      std::memcpy(out, theirs, out_bytes);
    else
      combine(out, theirs, count);
  }
}

void ShmAllreduce::LastCombines(uint32_t call, uint64_t round, void* buf, size_t bytes, uint64_t count, const MsgHeader& header,
                                const Reducer& combine, const WaitPolicy& policy, WaitGuard& guard) {
  uint8_t* result = Result(call);
  if (Arrive(call, round, header)) {
    // A barrier has nothing to combine (and no operator).
    if (bytes > 0) {
      std::memcpy(result, DataOf(0, call, bytes), bytes);
      for (size_t r = 1; r < doorbells_.size(); ++r) combine(result, DataOf(static_cast<int>(r), call, bytes), count);
    }
    Complete(round, policy);
  } else {
    AwaitComplete(round, policy, guard);
  }
  // Every rank arrived, so entered this call.
  calls_->all_entered = call + 1;
  // A barrier passes no buffer (memcpy of nothing from or to null is still undefined).
  if (bytes > 0) std::memcpy(buf, result, bytes);
}

void ShmAllreduce::Allgather(uint8_t* result, const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs, size_t elem,
                             const MsgHeader& header, bool every_rank_waits, const WaitPolicy& policy, WaitGuard& guard) {
  const size_t ranks = doorbells_.size();
  // Local rank r's block: its place in the result and its bytes.
  const auto block = [&](size_t r) {
    const auto rank = static_cast<size_t>(ranks_[r]);
    return std::pair<uint8_t*, uint64_t>{result + displs[rank] * elem, counts[rank] * elem};
  };
  uint64_t longest = 0;
  for (size_t r = 0; r < ranks; ++r) longest = std::max(longest, block(r).second);
  // At least one round: an allgather of nothing still checks that every rank makes this call.
  const uint64_t rounds = longest == 0 ? 1 : (longest + kColumnBytes - 1) / kColumnBytes;
  // Bytes [k·S, (k+1)·S) of a block of `bytes`: their offset and length.
  const auto column = [](uint64_t k, uint64_t bytes) {
    const uint64_t at = std::min(k * kColumnBytes, bytes);
    return std::pair<uint64_t, size_t>{at, static_cast<size_t>(std::min<uint64_t>(kColumnBytes, bytes - at))};
  };
  const auto [own, own_bytes] = block(static_cast<size_t>(me_));
  for (uint64_t k = 0; k < rounds; ++k) {
    const auto [own_at, own_n] = column(k, own_bytes);
    const uint32_t call = Deposit(own + own_at, own_n, header, policy, guard);
    // Copies local rank r's column of this round out of its slot or column.
    const auto take = [&](size_t r) {
      const auto [place, bytes] = block(r);
      const auto [at, n] = column(k, bytes);
      if (n > 0) std::memcpy(place + at, DataOf(static_cast<int>(r), call, n), n);
    };
    if (every_rank_waits) {
      MarkDeposited(call, policy);
      for (size_t r = 0; r < ranks; ++r) {
        if (static_cast<int>(r) == me_) continue;
        AwaitDeposit(call, r, header, policy, guard);
        take(r);
      }
      calls_->all_entered = call + 1;
      continue;
    }
    const uint64_t round = last_arrival_calls_++;
    if (Arrive(call, round, header))
      Complete(round, policy);
    else
      AwaitComplete(round, policy, guard);
    calls_->all_entered = call + 1;
    for (size_t r = 0; r < ranks; ++r) {
      if (static_cast<int>(r) != me_) take(r);
    }
  }
}

namespace {
// The bytes of the whole vector of blocks (elem bytes per element).
size_t WholeBytes(const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs, size_t elem) {
  return counts.empty() ? 0 : static_cast<size_t>((displs.back() + counts.back()) * elem);
}
}  // namespace

void ShmAllreduce::Gather(const uint8_t* own, uint8_t* whole, const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs,
                          size_t elem, const MsgHeader& header, size_t root, const WaitPolicy& policy, WaitGuard& guard) {
  CheckFits("gather", WholeBytes(counts, displs, elem));
  const auto block = [&](size_t r) { return static_cast<size_t>(counts[static_cast<size_t>(ranks_[r])] * elem); };
  const auto place = [&](size_t r) { return whole + displs[static_cast<size_t>(ranks_[r])] * elem; };
  const auto me = static_cast<size_t>(me_);
  if (root != me) {
    MarkDeposited(Deposit(own, block(me), header, policy, guard), policy);
    return;
  }
  const uint32_t call = Deposit(nullptr, 0, header, policy, guard);
  MarkDeposited(call, policy);
  if (block(me) > 0 && own != place(me)) std::memcpy(place(me), own, block(me));
  for (size_t r = 0; r < doorbells_.size(); ++r) {
    if (r != me) PrefetchDeposit(call, r, block(r));
  }
  for (size_t r = 0; r < doorbells_.size(); ++r) {
    if (r == me) continue;
    AwaitDeposit(call, r, header, policy, guard);
    if (block(r) > 0) std::memcpy(place(r), DataOf(static_cast<int>(r), call, block(r)), block(r));
  }
  calls_->all_entered = call + 1;
}

void ShmAllreduce::Scatter(const uint8_t* whole, uint8_t* own, const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs,
                           size_t elem, const MsgHeader& header, size_t root, const WaitPolicy& policy, WaitGuard& guard) {
  const size_t bytes = WholeBytes(counts, displs, elem);
  CheckFits("scatter", bytes);
  const auto me = static_cast<size_t>(me_);
  const auto rank = static_cast<size_t>(ranks_[me]);
  const size_t own_bytes = static_cast<size_t>(counts[rank] * elem);
  const size_t at = static_cast<size_t>(displs[rank] * elem);
  if (root == me) {
    MarkDeposited(Deposit(whole, bytes, header, policy, guard), policy);
    if (own_bytes > 0 && own != nullptr && own != whole + at) std::memcpy(own, whole + at, own_bytes);
    return;
  }
  const uint32_t call = Deposit(nullptr, 0, header, policy, guard);
  MarkDeposited(call, policy);
  PrefetchDeposit(call, root, bytes);
  AwaitDeposit(call, root, header, policy, guard);
  // It saw the root's mark; at two ranks that is every mark.
  if (doorbells_.size() == 2) calls_->all_entered = call + 1;
  if (own_bytes > 0) std::memcpy(own, DataOf(static_cast<int>(root), call, bytes) + at, own_bytes);
}

void ShmAllreduce::Alltoall(const uint8_t* send, uint8_t* recv, uint64_t n, size_t elem, const MsgHeader& header, const WaitPolicy& policy,
                            WaitGuard& guard) {
  const size_t ranks = doorbells_.size();
  const auto block = static_cast<size_t>(n * elem);
  const size_t bytes = ranks * block;
  CheckFits("alltoall", bytes);
  const auto me = static_cast<size_t>(me_);
  // The deposit first: with IN_PLACE the blocks below overwrite the input it copied.
  const uint32_t call = Deposit(send, bytes, header, policy, guard);
  MarkDeposited(call, policy);
  if (block > 0 && send != recv) std::memcpy(recv + me * block, send + me * block, block);
  for (size_t r = 0; r < ranks; ++r) {
    if (r == me) continue;
    AwaitDeposit(call, r, header, policy, guard);
    if (block > 0) std::memcpy(recv + r * block, DataOf(static_cast<int>(r), call, bytes) + me * block, block);
  }
  calls_->all_entered = call + 1;
}

void ShmAllreduce::ReduceScatter(const uint8_t* send, uint8_t* recv, const std::vector<uint64_t>& counts,
                                 const std::vector<uint64_t>& displs, size_t elem, const MsgHeader& header, const Reducer& combine,
                                 const WaitPolicy& policy, WaitGuard& guard) {
  const size_t bytes = WholeBytes(counts, displs, elem);
  CheckFits("reduce-scatter", bytes);
  const auto me = static_cast<size_t>(me_);
  const auto rank = static_cast<size_t>(ranks_[me]);
  const uint64_t own = counts[rank];
  const size_t at = static_cast<size_t>(displs[rank] * elem);
  // The deposit first: with IN_PLACE recv is the input, and its first elements get the result.
  const uint32_t call = Deposit(send, bytes, header, policy, guard);
  MarkDeposited(call, policy);
  FoldDeposits(call, doorbells_.size(), bytes, at, recv, static_cast<size_t>(own * elem), own, header, combine, policy, guard);
  calls_->all_entered = call + 1;
}

void ShmAllreduce::Scan(const uint8_t* send, uint8_t* recv, uint64_t n, size_t elem, bool exclusive, const MsgHeader& header,
                        const Reducer& combine, const WaitPolicy& policy, WaitGuard& guard) {
  const auto bytes = static_cast<size_t>(n * elem);
  CheckFits(exclusive ? "exscan" : "scan", bytes);
  const auto me = static_cast<size_t>(me_);
  // The deposit first: with IN_PLACE recv is the input (this rank's own term comes from its slot).
  const uint32_t call = Deposit(send, bytes, header, policy, guard);
  MarkDeposited(call, policy);
  FoldDeposits(call, exclusive ? me : me + 1, bytes, 0, recv, bytes, n, header, combine, policy, guard);
  // The last rank waited for every other mark.
  if (me + 1 == doorbells_.size()) calls_->all_entered = call + 1;
}

}  // namespace topocoll
