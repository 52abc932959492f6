// The S0 regions of a node's ranks (shm_bcast.h's BcastRegion) and their doorbells, in one
// anonymous shared mapping, for tests whose threads stand in for the ranks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "shm/shm_bcast.h"
#include "test_support.h"

namespace topocoll::test {

constexpr size_t kPageBytes = 4096;

inline size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// One rank's counters, then its control rings, then its queue (the engine's order; the exact
// offsets are the segment layout's business, not the protocol's).
struct RankCounters {
  SetCounter sets[kMaxSets];
  alignas(128) std::atomic<int32_t> slot_waiter;
  PaddedCounter consumed[kMaxRings];
  ReduceCounters reduce[kMaxRings];
};

// The node's regions and doorbells for `ranks` threads.
class Node {
 public:
  Node(const ShmBcastParams& params, size_t ranks)
      : blocks_(params.queue_bytes / params.min_fragment),
        counters_bytes_(RoundUp(sizeof(RankCounters), kPageBytes)),
        rings_bytes_(RoundUp(kMaxRings * blocks_ * sizeof(FragmentControl), kPageBytes)),
        region_bytes_(counters_bytes_ + rings_bytes_ + params.queue_bytes),
        memory_(ranks * region_bytes_ + RoundUp(ranks * sizeof(Doorbell), kPageBytes)) {
    doorbell_array_ = reinterpret_cast<Doorbell*>(memory_.base() + ranks * region_bytes_);
    for (size_t i = 0; i < ranks; ++i) {
      uint8_t* r = memory_.base() + i * region_bytes_;
      auto* counters = new (r) RankCounters();
      counters->slot_waiter.store(-1);
      BcastRegion region{};
      region.sets = counters->sets;
      region.slot_waiter = &counters->slot_waiter;
      region.consumed = counters->consumed;
      region.reduce = counters->reduce;
      region.rings = reinterpret_cast<FragmentControl*>(r + counters_bytes_);
      region.queue = r + counters_bytes_ + rings_bytes_;
      regions_.push_back(region);
      doorbells_.push_back(new (&doorbell_array_[i]) Doorbell());
    }
  }
  const std::vector<BcastRegion>& regions() const { return regions_; }
  const std::vector<Doorbell*>& doorbells() const { return doorbells_; }

 private:
  uint64_t blocks_;
  size_t counters_bytes_, rings_bytes_, region_bytes_;
  Mapping memory_;
  Doorbell* doorbell_array_;
  std::vector<BcastRegion> regions_;
  std::vector<Doorbell*> doorbells_;
};

}  // namespace topocoll::test
