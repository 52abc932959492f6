// The node's shared segment: its map, its size and where each region starts. One segment per
// node and communicator (shm_segment.h maps it). Every offset is a function of L (the local
// ranks, indexed by ascending global rank), the channel capacity and the S0 parameters alone,
// so every process of the node computes the same map; the creator's header records the first
// two and the total, which every opener checks.
//
// Regions in offset order (all page-aligned), and who writes them:
//
//   offset        region                                         written by
//   0             SegmentHeader, one page: magic, version,        creator; `mapped`: every rank
//                 local_size, total_bytes, channel_capacity,       once; abort_*: the first rank
//                 asymmetric_fences, mapped, abort_code/rank/msg   that fails
//   controls      RankControl[L], pages: doorbell {bell,          rank i its own entry; bell and
//                 sleeping, idle}, pid, departed, call_version +   idle: whoever rings rank i
//                 call[4] (the published MsgHeader, a seqlock)
//   channels      L·(L−1) one-way channels, by `from` ascending    from: the ring and `head`;
//                 then `to` (from = to skipped); each one page     to: `tail`
//                 of ChannelControl {head, tail} and a ring of
//                 channel_bytes, first-touched by `from`
//   regions       L S0 regions, by local index; each:              the owner: queue, set and
//                   counter pages: SetCounter[kMaxSets],           consumed counters, reduce
//                   slot_waiter, consumed PaddedCounter[kMaxRings],  counters; a parent: its
//                   ReduceCounters[kMaxRings] (shm_reduce.h)       children's control blocks and
//                   kMaxRings rings of queue_bytes / min_fragment  slot_waiter (the owner too)
//                   FragmentControl, pages
//                   the queue (queue_bytes), first-touched by the owner
//   node_area     ShmAllreduce's area, pages: Counters {arrived,   rank r: its slots and
//                 completed}, results[2] × kMaxBytes,              columns; every rank: arrived;
//                 Slot[kDepth][L] {deposited, MsgHeader,           the last to arrive: results
//                 data[kInlineBytes]}, columns[2][L] ×             and completed
//                 kColumnBytes
//
// The segment is zero when created (ftruncate): beyond the header only each rank's own S0
// region needs initialising (by its owner, as first touch, with slot_waiter = −1). Writers of
// different data are kFalseSharingBytes apart (cache_line.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cache_line.h"
#include "shm_allreduce.h"
#include "shm_bcast.h"
#include "shm_channel.h"
#include "shm_segment.h"

namespace topocoll {

class SegmentLayout {
 public:
  SegmentLayout(size_t local_size, uint64_t channel_bytes, const ShmBcastParams& bcast);

  size_t total_bytes() const { return total_bytes_; }
  // Bytes of one rank's S0 region.
  size_t region_bytes() const { return region_bytes_; }

  // --- the regions, given the segment's base address ---
  SegmentHeader* Header(uint8_t* base) const { return reinterpret_cast<SegmentHeader*>(base); }
  // RankControl of every local rank, by local index.
  RankControl* Controls(uint8_t* base) const { return reinterpret_cast<RankControl*>(base + controls_); }
  // The channel from local rank `from` to `to` (from ≠ to): its control page and its ring.
  ChannelControl* ChannelControlOf(uint8_t* base, size_t from, size_t to) const {
    return reinterpret_cast<ChannelControl*>(ChannelBlock(base, from, to));
  }
  uint8_t* ChannelRing(uint8_t* base, size_t from, size_t to) const { return ChannelBlock(base, from, to) + kPage; }
  // Local rank i's S0 region: its start, and its parts.
  uint8_t* Region(uint8_t* base, size_t i) const { return base + regions_ + i * region_bytes_; }
  BcastRegion RegionViews(uint8_t* base, size_t i) const;
  ShmAllreduce::Area NodeArea(uint8_t* base) const;

 private:
  uint8_t* ChannelBlock(uint8_t* base, size_t from, size_t to) const {
    // Pairs in (from, to) order without from = to: `from` owns the L − 1 blocks from
    // from·(L − 1) on.
    const size_t slot = from * (local_size_ - 1) + (to < from ? to : to - 1);
    return base + channels_ + slot * channel_stride_;
  }

  size_t local_size_;
  size_t controls_;
  size_t channels_;
  size_t channel_stride_;
  size_t regions_;
  size_t region_bytes_;
  size_t region_queue_;  // offset of the queue in a region
  size_t node_area_;
  size_t total_bytes_;
};

}  // namespace topocoll
