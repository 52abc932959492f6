// The allreduce of small messages among all ranks of one node: the last to arrive computes.
//
// Every rank copies its call's header and data into its own slot and adds one to a counter;
// the rank whose addition completes the count checks that all headers agree (EMISMATCH
// otherwise), combines the slots in local order (= rank order) into the result, publishes it
// and rings everyone; the others wait for it and copy it out. One rank computes the result
// once, in a fixed order, so every rank gets the same bits, run after run, and operators need
// not commute.
//
// Why not a tree: with more ranks than cores every rank of a core must run once per call, and
// with a fixed leader per core each of those runs costs a context switch (~2.3 µs here) in
// every call. Here whoever runs last completes the call, so the one run a rank gets after
// depositing call k + 1 often completes k + 1 as well: at 2 ranks per core one switch per core
// and call instead of two.
//
// Slots and results come in two parities: a rank writes call u's slot only after call u − 1
// completed, so the previous user of that slot (call u − 2) was combined long before; and the
// last rank of call u writes result u mod 2 only once everyone has deposited u, so everyone
// has read result u − 2.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "message.h"
#include "shm_reduce.h"
#include "wait.h"

namespace topocoll {

class ShmAllreduce {
 public:
  // Largest message (bytes) it takes; larger ones go through the group schedules.
  static constexpr size_t kMaxBytes = 8192;

  // Bytes of the node-wide area for `local_size` ranks (a multiple of the page size).
  static size_t AreaBytes(size_t local_size);

  // `area`: AreaBytes(L) bytes of the shared segment, zeroed by its creator; `ranks`: the
  // global ranks of the L local ranks, ascending; `me`: this rank's local index.
  ShmAllreduce(uint8_t* area, std::vector<int> ranks, std::vector<Doorbell*> doorbells, int me);

  // Combines every local rank's `buf` (count elements of elem bytes; the same `header` on every
  // rank) into every rank's `buf`. Throws CollError EMISMATCH when the headers differ.
  void Run(void* buf, uint64_t count, size_t elem, const MsgHeader& header, const ReduceChunk& combine,
           const WaitPolicy& policy, WaitGuard& guard);

 private:
  struct alignas(64) Counters {
    std::atomic<uint64_t> arrived;  // deposits ever made (L per call)
    uint8_t pad[56];
    std::atomic<uint64_t> completed;  // calls whose result is published
  };
  struct alignas(64) Slot {
    MsgHeader header;
    uint8_t pad[64 - sizeof(MsgHeader)];
    uint8_t data[kMaxBytes];
  };
  Slot& SlotOf(int rank, uint64_t call) const;
  uint8_t* Result(uint64_t call) const;

  Counters* counters_;
  uint8_t* results_;
  Slot* slots_;
  std::vector<int> ranks_;
  std::vector<Doorbell*> doorbells_;
  int me_;
  uint64_t calls_ = 0;  // calls this rank has made (the same on every rank)
};

}  // namespace topocoll
