#include "shm/segment_layout.h"

namespace topocoll {

namespace {

constexpr size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// An S0 region's counter pages: the set counters, slot_waiter on a line of its own, the
// consumed counts, the reduce counters; the control rings start on the next page.
constexpr size_t kSetsAt = 0;
constexpr size_t kSlotWaiterAt = kSetsAt + kMaxSets * sizeof(SetCounter);
constexpr size_t kConsumedAt = kSlotWaiterAt + kFalseSharingBytes;
constexpr size_t kReduceAt = kConsumedAt + kMaxRings * sizeof(PaddedCounter);
constexpr size_t kRingsAt = RoundUp(kReduceAt + kMaxRings * sizeof(ReduceCounters), kPage);
static_assert(kConsumedAt % alignof(PaddedCounter) == 0 && kReduceAt % alignof(ReduceCounters) == 0,
              "each counter array starts at its alignment");

// The node-wide area: counters, the two results, the slots, then the columns.
constexpr size_t kResultsAt = sizeof(ShmAllreduce::Counters);
constexpr size_t kSlotsAt = RoundUp(kResultsAt + 2 * ShmAllreduce::kMaxBytes, alignof(ShmAllreduce::Slot));

}  // namespace

SegmentLayout::SegmentLayout(size_t local_size, uint64_t outbox_bytes, const ShmBcastParams& bcast)
    : local_size_(local_size), outbox_bytes_(RoundUp(static_cast<size_t>(outbox_bytes), kPage)) {
  const size_t blocks = static_cast<size_t>(bcast.queue_bytes / bcast.min_fragment);
  controls_ = kPage;
  outboxes_ = controls_ + RoundUp(local_size * sizeof(RankControl), kPage);
  regions_ = outboxes_ + local_size * outbox_bytes_;
  region_queue_ = kRingsAt + RoundUp(kMaxRings * blocks * sizeof(FragmentControl), kPage);
  region_bytes_ = region_queue_ + static_cast<size_t>(bcast.queue_bytes);
  node_area_ = regions_ + local_size * region_bytes_;
  total_bytes_ = node_area_ + RoundUp(kSlotsAt + ShmAllreduce::SlotsBytes(local_size) + ShmAllreduce::ColumnsBytes(local_size), kPage);
}

BcastRegion SegmentLayout::RegionViews(uint8_t* base, size_t i) const {
  uint8_t* r = Region(base, i);
  BcastRegion region{};
  region.sets = reinterpret_cast<SetCounter*>(r + kSetsAt);
  region.slot_waiter = reinterpret_cast<std::atomic<int32_t>*>(r + kSlotWaiterAt);
  region.consumed = reinterpret_cast<PaddedCounter*>(r + kConsumedAt);
  region.reduce = reinterpret_cast<ReduceCounters*>(r + kReduceAt);
  region.rings = reinterpret_cast<FragmentControl*>(r + kRingsAt);
  region.queue = r + region_queue_;
  return region;
}

ShmAllreduce::Area SegmentLayout::NodeArea(uint8_t* base) const {
  uint8_t* a = base + node_area_;
  return {reinterpret_cast<ShmAllreduce::Counters*>(a), a + kResultsAt, reinterpret_cast<ShmAllreduce::Slot*>(a + kSlotsAt),
          a + kSlotsAt + ShmAllreduce::SlotsBytes(local_size_)};
}

}  // namespace topocoll
