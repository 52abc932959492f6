// The window collectives: the node's shared windows this rank maps (shm_window.h, whose header is
// the protocol of their counters, word by word) and the collectives that work through them —
// the window allreduce and allgather (whole-call steps kShmWindowAllreduce, kShmWindowAllgather)
// and S1's one-sided bcast steps between ranks of one node (kPut, kAwaitPut, kCountDone,
// kAwaitDone). Engine owns one and hands it the node-wide area (shm_allreduce.h) their meetings
// run through and the wait policy; the executor runs its steps under the call's Guard. Calls run
// one at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/datatypes.h"
#include "base/message.h"
#include "base/wait.h"
#include "engine/liveness.h"
#include "engine/local_node.h"
#include "engine/step.h"
#include "shm/shm_allreduce.h"
#include "shm/shm_window.h"

namespace topocoll {

class WindowCollectives {
 public:
  // `size`: the job's ranks (the area's allgather takes blocks by global rank).
  WindowCollectives(const LocalNode& node, const Liveness& liveness, int size) : node_(node), liveness_(liveness), size_(size) {}
  WindowCollectives(const WindowCollectives&) = delete;
  WindowCollectives& operator=(const WindowCollectives&) = delete;

  // --- the windows: collective steps the communicator orders (allocShared, freeShared) ---
  // The node's lowest rank creates window `id` under `name` with one part per local rank of
  // `part_bytes[i]` bytes; the others open it after the creator said so. Returns the base of
  // the mapping (table().Base gives its size).
  uint8_t* Create(uint32_t id, const std::string& name, const std::vector<uint64_t>& part_bytes);
  uint8_t* Open(uint32_t id, const std::string& name, const std::vector<uint64_t>& part_bytes);
  // Unmaps window `id`; false when this rank does not map it.
  bool Free(uint32_t id) { return table_.Remove(id); }
  // Unmaps every window (close, once no thread runs a collective).
  void Clear() { table_.Clear(); }
  // The S0 bcast reads windows too (its window mode, shm_bcast.h).
  const WindowTable& table() const { return table_; }

  // --- the whole-call steps, every rank of a one-node job; `area`: the node-wide area their
  // meetings run through; `policy`: the wait on the node ---
  // kShmWindowAllreduce: single copy through the node's windows; send and recv lie in this
  // rank's window parts. Built-in operators only.
  void Allreduce(const uint8_t* send, uint8_t* recv, uint64_t count, size_t elem, const MsgHeader& h, const Reducer& fn, bool every_rank,
                 ShmAllreduce& area, const WaitPolicy& policy, Guard& guard);
  // kShmWindowAllgather: every block copied once, straight out of its owner's window. `own`:
  // this rank's block (in its window part); `recv`: the result, rank r's block at element
  // block_displs[r], block_counts[r] long.
  void Allgather(const uint8_t* own, uint8_t* recv, const std::vector<uint64_t>& block_counts, const std::vector<uint64_t>& block_displs,
                 size_t elem, const MsgHeader& h, bool every_rank, ShmAllreduce& area, const WaitPolicy& policy, Guard& guard);

  // --- S1's one-sided bcast: step `s` with a peer on this node (s.local_peer; kAwaitDone: the
  // node), on B = [b, b + bytes) in this rank's window part. `call`: the call's hash (the
  // put handshake's word); `policy`: the wait on s's peer (kAwaitDone: on the node) ---
  void OneSided(const Step& s, const MsgHeader& header, uint32_t call, uint8_t* b, size_t bytes, const WaitPolicy& policy, Guard& guard);

 private:
  // Waits until ready(): with the policy's doorbell wait when poll_us is 0, else S1's polling
  // (wait.h, PollUntil).
  template <typename Ready>
  void AwaitLocal(Ready&& ready, uint32_t poll_us, const WaitPolicy& policy, Guard& guard);
  // counts_ and displs_ for a meeting where every local rank publishes `words` words.
  void MeetingBlocks(uint64_t words);
  // The area's allgather of nothing that ends a window collective: afterwards no rank reads
  // another's buffers any more.
  void LastMeeting(const MsgHeader& h, bool every_rank, ShmAllreduce& area, const WaitPolicy& policy, Guard& guard);

  const LocalNode& node_;
  const Liveness& liveness_;
  const int size_;
  WindowTable table_;
  // The window allreduce's chunk: each rank combines, and the others copy, this much at a time.
  static constexpr uint64_t kWindowChunkBytes = 64 * 1024;
  // Reused call after call (no allocation per call): the meetings' words and blocks, and the
  // window allreduce's resolved places.
  std::vector<uint64_t> places_, counts_, displs_;
  std::vector<const uint8_t*> sends_;
  std::vector<uint8_t*> recvs_;
  std::vector<std::atomic<uint64_t>*> reduced_;
};

}  // namespace topocoll
