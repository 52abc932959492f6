// The one-way channels between the ranks of a node (shm_channel.h is one channel's protocol),
// made only for the pairs that use them, so the node's shared memory grows with its ranks and not
// with their pairs. Every local rank owns an outbox of `pool_bytes` in the segment
// (segment_layout.h) and carves each channel it sends on out of it, the first time it needs one.
//
// An outbox, written only by its owner, the sender:
//
//   offset               what                                         written by
//   0                    OutboxHeader: count (channels published),    the sender (release);
//                        used (bytes of the blocks), one page         read by any rank
//   kOutboxHeaderBytes   block 0: ChannelBlock {ChannelControl,       the sender: `to`,
//                        to, capacity}, kChannelBlockHeaderBytes,     `capacity`, the ring;
//                        then its ring of `capacity` bytes            the receiver: `tail`
//   …                    block 1, … back to back
//
// Making channel k, in this order:
//   1. the sender writes block k's `to` and `capacity` and first-touches its ring (zeroes it, so
//      its pages sit on the sender's NUMA node);
//   2. it stores count = k + 1 with release: the block is visible, and never moves, changes size
//      or changes hands again;
//   3. then the channel's own protocol runs (shm_channel.h): frames, `head`, `tail`.
// A receiver that needs the channel from s scans s's outbox from the block it scanned last up to
// `count` (acquire) for a block addressed to it. Until it finds one it waits on its doorbell,
// which the sender's first message rings, after step 2.
//
// Capacities. Each rank declares the local ranks its schedules send to (Want, from SetPlan). When
// it makes its channels (at the first send that needs one), every declared peer without a channel
// gets the same share, a power of two in [min_capacity, max_capacity], of what the outbox has left
// after the smallest channel (min_capacity and its header) is set aside for every other peer that
// may still come — every other local rank, or as many as the outbox holds at that size, whichever
// is fewer. So however schedules are registered (they may be, one root at a time, after channels
// were made), a rank can always make a channel to that many peers, and Want refuses (ECONFIG) only
// a set beyond them. With 8 MiB outboxes and 1 MiB the largest: 1 MiB to each of 7 peers, 512 KiB
// to 7 peers of 40 ranks, 64 KiB for every peer at 128 (TypeScript picks the largest per node
// size: src/runtime/shm-budget.ts).
// A message to a rank nobody declared (none today) takes a share the same way.
//
// Point-to-point messages (message_streams.h) have channels of their own, kind kMessages in the
// block, made one at a time (MessageOutgoing) from what the outbox has beyond the smallest
// collective channel set aside for every local rank that has none yet, so they never take room
// a collective will need; where there is none, the messages to that rank go by TCP.
//
// Threads: Want runs where schedules are registered (the JavaScript thread); Outgoing and
// Incoming where collectives run, one collective at a time; MessageOutgoing and
// MessageIncoming on the messages' threads. Making blocks, scanning outboxes and the wanted set
// are under a mutex; each channel view belongs to its one user (the collective that runs, or the
// messages' threads under their own mutex).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/cache_line.h"
#include "base/wait.h"
#include "shm/shm_channel.h"
#include "shm/shm_segment.h"

namespace topocoll {

struct OutboxHeader {
  alignas(kFalseSharingBytes) std::atomic<uint32_t> count;  // channels published
  std::atomic<uint64_t> used;                               // bytes of their blocks
};

struct ChannelBlock {
  ChannelControl control;
  alignas(kFalseSharingBytes) uint32_t to;  // the receiver's local index
  uint32_t kind;                            // kCollectiveChannel or kMessageChannel
  uint64_t capacity;                        // ring bytes, a power of two
};
inline constexpr uint32_t kCollectiveChannel = 0;
inline constexpr uint32_t kMessageChannel = 1;
// A message channel's ring: messages up to half of it go through it at once (ShmChannel::TrySend);
// a smaller ring where the outbox has less to spare.
inline constexpr uint64_t kMessageRingBytes = 256 * 1024;

inline constexpr size_t kOutboxHeaderBytes = 4096;
inline constexpr size_t kChannelBlockHeaderBytes = 512;
static_assert(sizeof(OutboxHeader) <= kOutboxHeaderBytes && sizeof(ChannelBlock) <= kChannelBlockHeaderBytes,
              "an outbox's header and a block's header fit their reserved bytes");

struct ChannelPoolParams {
  uint64_t pool_bytes;    // each rank's outbox, header included
  uint64_t max_capacity;  // a power of two
  uint64_t min_capacity;  // a power of two, at most max_capacity
};

// What the node's outboxes hold, summed over its ranks (read from the segment: any rank sees all).
struct ChannelPoolUse {
  uint64_t channels = 0;
  uint64_t bytes = 0;  // blocks: their headers and rings
  uint64_t largest_rank_bytes = 0;
};

class ShmChannelPool;

// What a communicator's point-to-point messages (messages/message_streams.h) use of its node
// segment (Engine::MessagesView).
struct MessageNode {
  ShmChannelPool* pool = nullptr;      // null: no channels (every message by TCP)
  std::vector<int> local_index;        // by rank: its local index, or -1 on another node
  std::vector<RankControl*> controls;  // by local index
  bool asymmetric = false;             // the segment's fences (wait.h)
};

class ShmChannelPool {
 public:
  // outboxes[i]: local rank i's outbox; doorbells[i]: its doorbell.
  ShmChannelPool(std::vector<uint8_t*> outboxes, std::vector<Doorbell*> doorbells, int local_index, const ChannelPoolParams& params);

  // The channels this rank will send on (local indices); throws ECONFIG if the outbox cannot
  // hold them all. Idempotent.
  void Want(const std::vector<int>& local_peers, int rank);

  // This rank's channel to `to`, made (with every other wanted one still missing) if need be.
  ShmChannel& Outgoing(int to) {
    ShmChannel& c = out_[static_cast<size_t>(to)];
    if (!c.valid()) MakeChannels(to);
    return c;
  }
  // The channel from `from` to this rank; null while `from` has not made it.
  ShmChannel* Incoming(int from) {
    ShmChannel& c = in_[static_cast<size_t>(from)];
    return c.valid() || Find(from, kCollectiveChannel) ? &c : nullptr;
  }

  // This rank's message channel to `to`, made at the first call; null where the outbox has no
  // room to spare for it (then never: the answer is kept).
  ShmChannel* MessageOutgoing(int to);
  // The message channel from `from` to this rank; null while `from` has not made one.
  ShmChannel* MessageIncoming(int from);

  ChannelPoolUse Use() const;

 private:
  void MakeChannels(int to);
  // Scans `from`'s outbox for a block of `kind` addressed to this rank; whether a channel of
  // that kind from it is known now. Each kind keeps its own place in every outbox, so each
  // scan writes only its own kind's views (no lock for the collectives').
  bool Find(int from, uint32_t kind);
  // Under mutex_: appends a block of `kind` to `to` with a ring of `capacity` bytes.
  ShmChannel MakeBlock(int to, uint32_t kind, uint64_t capacity);
  // Bytes this rank's outbox has left (under mutex_).
  uint64_t Left() const;
  // A block of the smallest channel: its header and min_capacity.
  uint64_t SmallestBlock() const;
  // The most channels an outbox is sure to hold: one to every other rank at min_capacity, or as
  // many as fit.
  uint64_t MostChannels() const;

  std::vector<uint8_t*> outboxes_;
  std::vector<Doorbell*> doorbells_;
  int local_index_;
  ChannelPoolParams params_;
  std::vector<ShmChannel> out_;
  std::vector<ShmChannel> in_;
  std::vector<ShmChannel> message_out_;
  std::vector<ShmChannel> message_in_;
  std::vector<bool> message_refused_;  // by peer: no room was spare for its message channel
  // By kind, then sender: the next block of its outbox to look at, and where it starts.
  std::vector<uint32_t> scanned_[2];
  std::vector<uint64_t> scan_offset_[2];

  mutable std::mutex mutex_;
  std::vector<bool> wanted_;  // by local index
  size_t wanted_missing_ = 0;
  uint64_t made_bytes_ = 0;       // blocks made in this rank's outbox
  uint32_t collective_made_ = 0;  // collective channels among them
};

}  // namespace topocoll
