// The node's shared segment: its map, its size and where each region starts. One segment per
// node and communicator (shm_segment.h maps it). Every offset is a function of L (the local
// ranks, indexed by ascending global rank), the outbox size and the S0 parameters alone, so every
// process of the node computes the same map; the creator's header records L, the outbox size and
// the total, which every opener checks. Every region is a fixed size per local rank: the segment
// grows linearly with L.
//
// Regions in offset order (all page-aligned), and who writes them:
//
//   offset        region                                         written by
//   0             SegmentHeader, one page: magic, version,        creator; `mapped`: every rank
//                 local_size, total_bytes, outbox_bytes,           once; abort_*: the first rank
//                 asymmetric_fences, mapped, abort_code/rank/msg   that fails
//   controls      RankControl[L], pages: doorbell {bell,          rank i its own entry; bell and
//                 sleeping, idle}, pid, departed, call_version +   idle: whoever rings rank i
//                 call[4] (the published MsgHeader, a seqlock)
//   outboxes      L outboxes of pool_bytes, by local index: each    its owner (the sender): the
//                 rank's one-way channels to the ranks it sends    blocks and rings; a receiver:
//                 to, made when first needed (shm_channel_pool.h)  its channels' `tail`
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

#include "base/cache_line.h"
#include "shm/shm_allreduce.h"
#include "shm/shm_bcast.h"
#include "shm/shm_channel_pool.h"
#include "shm/shm_segment.h"

namespace topocoll {

class SegmentLayout {
 public:
  SegmentLayout(size_t local_size, uint64_t outbox_bytes, const ShmBcastParams& bcast);

  size_t total_bytes() const { return total_bytes_; }
  // Bytes of one rank's S0 region.
  size_t region_bytes() const { return region_bytes_; }
  // Bytes of one rank's outbox (the size asked for, page-rounded).
  size_t outbox_bytes() const { return outbox_bytes_; }
  // What the segment is made of, in bytes: the header and rank controls, every outbox, every S0
  // region, the node-wide area.
  size_t control_bytes() const { return outboxes_; }
  size_t outboxes_bytes() const { return regions_ - outboxes_; }
  size_t regions_bytes() const { return node_area_ - regions_; }
  size_t node_area_bytes() const { return total_bytes_ - node_area_; }

  // --- the regions, given the segment's base address ---
  SegmentHeader* Header(uint8_t* base) const { return reinterpret_cast<SegmentHeader*>(base); }
  // RankControl of every local rank, by local index.
  RankControl* Controls(uint8_t* base) const { return reinterpret_cast<RankControl*>(base + controls_); }
  // Local rank i's outbox (shm_channel_pool.h).
  uint8_t* Outbox(uint8_t* base, size_t i) const { return base + outboxes_ + i * outbox_bytes_; }
  // Local rank i's S0 region: its start, and its parts.
  uint8_t* Region(uint8_t* base, size_t i) const { return base + regions_ + i * region_bytes_; }
  BcastRegion RegionViews(uint8_t* base, size_t i) const;
  ShmAllreduce::Area NodeArea(uint8_t* base) const;

 private:
  size_t local_size_;
  size_t controls_;
  size_t outboxes_;
  size_t outbox_bytes_;
  size_t regions_;
  size_t region_bytes_;
  size_t region_queue_;  // offset of the queue in a region
  size_t node_area_;
  size_t total_bytes_;
};

}  // namespace topocoll
