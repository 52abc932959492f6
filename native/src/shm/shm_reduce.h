// The shared-memory reduce of one node's groups: every member works, not only the destination.
//
// A message is reduced in chunks that fit a member's S0 queue (half of it, so two chunks are in
// flight). For each chunk every member copies its part of B into its own queue and publishes
// it; member j then combines slice j of the chunk across all members' queues — in member
// order, so the result is in rank order and any operator is allowed — and writes the result
// over its own slice (only member j ever reads slice j of its own queue); the destination
// finally copies every member's result slice into its B and releases the chunk. Copy-in,
// combining and copy-out all run on every core at once.
//
// The queue is the one S0 broadcasts use: before its first chunk a member waits until readers
// of its earlier broadcasts have released every set, and it returns only when the destination
// has released its last chunk, so a broadcast that follows finds the queue free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/datatypes.h"
#include "base/wait.h"
#include "shm/shm_bcast.h"

namespace topocoll {

class ShmReduce {
 public:
  ShmReduce(std::vector<BcastRegion> regions, std::vector<Doorbell*> doorbells, int me, uint64_t queue_bytes);

  // Declares group `id` (local indices, ascending), as for ShmBcast.
  void SetGroup(int id, const std::vector<int>& members);

  // Reduces `count` elements of `elem` bytes of every member's `buf` into the `buf` of the
  // member with local index `destination`. Every member calls it with the same arguments.
  void Run(int id, int destination, void* buf, uint64_t count, size_t elem, const Reducer& combine, const WaitPolicy& policy,
           WaitGuard& guard);

  // Forgets every group's progress (after a reconfiguration, when no collective is running).
  void Reset();

 private:
  struct Group {
    std::vector<int> members;
    uint64_t chunks = 0;  // chunks this group has reduced so far (the same on every member)
    // The destination (local index) of the last chunk in each half of the queues: its `free`
    // counter says when the half may be refilled, whichever call that chunk belonged to.
    int last_destination[2] = {-1, -1};
  };
  void RingAll(const Group& g, const WaitPolicy& policy);

  std::vector<BcastRegion> regions_;
  std::vector<Doorbell*> doorbells_;
  int me_;
  uint64_t half_queue_;
  std::vector<Group> groups_;
  std::vector<uint8_t> scratch_;
};

}  // namespace topocoll
