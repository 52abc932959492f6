#include "shm/shm_reduce.h"

#include <algorithm>
#include <cstring>

#include "base/errors.h"

namespace topocoll {

ShmReduce::ShmReduce(std::vector<BcastRegion> regions, std::vector<Doorbell*> doorbells, int me, uint64_t queue_bytes)
    : regions_(std::move(regions)), doorbells_(std::move(doorbells)), me_(me), half_queue_(queue_bytes / 2 / 64 * 64) {}

void ShmReduce::SetGroup(int id, const std::vector<int>& members) {
  if (id < 0 || id >= static_cast<int>(kMaxRings)) {
    throw CollError("EINVAL", "shared-memory group id " + std::to_string(id) + " is outside 0…" + std::to_string(kMaxRings - 1));
  }
  if (groups_.size() <= static_cast<size_t>(id)) groups_.resize(static_cast<size_t>(id) + 1);
  groups_[static_cast<size_t>(id)] = Group{members, 0, {-1, -1}};
}

void ShmReduce::Reset() {
  for (Group& g : groups_) g = Group{g.members, 0, {-1, -1}};
  ReduceCounters* mine = regions_[static_cast<size_t>(me_)].reduce;
  for (uint32_t i = 0; i < kMaxRings; ++i) {
    ReduceCounters& c = mine[i];
    c.in.value.store(0, std::memory_order_relaxed);
    c.out.value.store(0, std::memory_order_relaxed);
    c.free.value.store(0, std::memory_order_release);
  }
}

void ShmReduce::RingAll(const Group& g, const WaitPolicy& policy) {
  for (int m : g.members) {
    if (m != me_) doorbells_[static_cast<size_t>(m)]->Ring(policy.asymmetric);
  }
}

void ShmReduce::Run(int id, int destination, void* buf, uint64_t count, size_t elem, const Reducer& combine, const WaitPolicy& policy,
                    WaitGuard& guard) {
  if (id < 0 || static_cast<size_t>(id) >= groups_.size() || groups_[static_cast<size_t>(id)].members.empty()) {
    throw CollError("EINVAL", "unknown shared-memory group " + std::to_string(id));
  }
  Group& g = groups_[static_cast<size_t>(id)];
  const size_t n = g.members.size();
  const auto my_it = std::find(g.members.begin(), g.members.end(), me_);
  if (my_it == g.members.end() || std::find(g.members.begin(), g.members.end(), destination) == g.members.end()) {
    throw CollError("EINVAL", "the reduce destination or this rank is not in shared-memory group " + std::to_string(id));
  }
  const size_t my_pos = static_cast<size_t>(my_it - g.members.begin());
  if (n < 2 || count == 0) return;
  Doorbell& mine = *doorbells_[static_cast<size_t>(me_)];
  BcastRegion& own = regions_[static_cast<size_t>(me_)];
  ReduceCounters& my_counters = own.reduce[id];
  const ReduceCounters& dest_counters = regions_[static_cast<size_t>(destination)].reduce[id];
  auto counters_of = [&](size_t pos) -> const ReduceCounters& { return regions_[static_cast<size_t>(g.members[pos])].reduce[id]; };
  auto wait_all = [&](auto field_of, uint64_t seq) {
    for (size_t k = 0; k < n; ++k) {
      const std::atomic<uint64_t>& v = field_of(counters_of(k)).value;
      if (v.load(std::memory_order_acquire) < seq) WaitUntil([&] { return v.load(std::memory_order_acquire) >= seq; }, mine, policy, guard);
    }
  };

  // Readers of this rank's earlier broadcasts may still copy out of its queue.
  for (uint32_t s = 0; s < kMaxSets; ++s) {
    std::atomic<uint32_t>& pending = own.sets[s].pending;
    if (pending.load(std::memory_order_acquire) != 0)
      WaitUntil([&] { return pending.load(std::memory_order_acquire) == 0; }, mine, policy, guard);
  }

  uint8_t* data = static_cast<uint8_t*>(buf);
  const uint64_t chunk = std::max<uint64_t>(1, half_queue_ / elem);
  const uint64_t chunks = (count + chunk - 1) / chunk;
  auto slice = [&](uint64_t len, size_t pos) { return std::pair<uint64_t, uint64_t>{len * pos / n, len * (pos + 1) / n}; };
  for (uint64_t c = 0; c < chunks; ++c) {
    const uint64_t seq = g.chunks + c + 1;
    const uint64_t offset = (seq & 1) * half_queue_;
    const uint64_t start = c * chunk;
    const uint64_t len = std::min(chunk, count - start);
    // This half of the queues held chunk seq − 2: its destination must have copied it out.
    const int previous = g.last_destination[seq & 1];
    if (previous >= 0) {
      const std::atomic<uint64_t>& freed = regions_[static_cast<size_t>(previous)].reduce[id].free.value;
      if (freed.load(std::memory_order_acquire) < seq - 2) {
        WaitUntil([&] { return freed.load(std::memory_order_acquire) >= seq - 2; }, mine, policy, guard);
      }
    }
    g.last_destination[seq & 1] = destination;
    std::memcpy(own.queue + offset, data + start * elem, len * elem);
    my_counters.in.value.store(seq, std::memory_order_release);
    RingAll(g, policy);

    // Combine this member's slice across every member's queue, in member (= rank) order.
    const auto [a, b] = slice(len, my_pos);
    if (b > a) {
      wait_all([](const ReduceCounters& rc) -> const PaddedCounter& { return rc.in; }, seq);
      const size_t bytes = static_cast<size_t>((b - a) * elem);
      if (scratch_.size() < bytes) scratch_.resize(bytes);
      std::memcpy(scratch_.data(), regions_[static_cast<size_t>(g.members[0])].queue + offset + a * elem, bytes);
      for (size_t k = 1; k < n; ++k) combine(scratch_.data(), regions_[static_cast<size_t>(g.members[k])].queue + offset + a * elem, b - a);
      // Only this member reads its own slice: the result can take its place.
      std::memcpy(own.queue + offset + a * elem, scratch_.data(), bytes);
    }
    my_counters.out.value.store(seq, std::memory_order_release);
    RingAll(g, policy);

    if (me_ == destination) {
      wait_all([](const ReduceCounters& rc) -> const PaddedCounter& { return rc.out; }, seq);
      for (size_t k = 0; k < n; ++k) {
        const auto [ka, kb] = slice(len, k);
        if (kb > ka)
          std::memcpy(data + (start + ka) * elem, regions_[static_cast<size_t>(g.members[k])].queue + offset + ka * elem, (kb - ka) * elem);
      }
      my_counters.free.value.store(seq, std::memory_order_release);
      RingAll(g, policy);
    }
  }
  g.chunks += chunks;
  // Return with the queue free: a broadcast from this rank may refill it right away.
  if (me_ != destination && dest_counters.free.value.load(std::memory_order_acquire) < g.chunks) {
    WaitUntil([&] { return dest_counters.free.value.load(std::memory_order_acquire) >= g.chunks; }, mine, policy, guard);
  }
}

}  // namespace topocoll
