// The NUMA-aware pipelined shared-memory broadcast of S0 (seeds.md), for the groups of one node.
//
// Every local rank owns, in the node's segment: `kMaxSets` set counters, a ring of fragment
// control blocks, and a queue of `queue_bytes` that only it writes (first-touched by it, so its
// pages sit on its NUMA node). A bcast rooted at r copies fragments into r's queue and notifies
// r's children in the notification tree through their control blocks; each rank forwards the
// notification to its own children before copying the fragment out of r's queue, so
// notification runs down the tree while data is copied in parallel. The queue is split into
// `sets`; a set is refilled only when every reader has released it, so with two sets the root
// fills one while the readers drain the other. Messages that fit in a control block's spare
// bytes travel inside it (no queue copy at all).
//
// The root writes its queue as a ring with a cursor that persists across calls, and every rank
// has one ring of control blocks per group it belongs to: all members of a group see the same
// sequence of that group's broadcasts, so each knows, for every member, how many fragments the
// member has been sent in the group — the index of its next block — without asking it. A
// parent only waits when the child is a whole ring behind (flow control on the child's
// published count of consumed blocks), so back-to-back broadcasts stream: a root runs ahead of
// its readers by up to the queue (minus the set being drained) instead of waiting for them.
//
// The protocol, by word (r: the root; p: a parent in the notification tree; c: its child):
//
//   Queue placement: no word carries it, every member computes it. The queue is `set_count` =
//   min(sets, queue_bytes / min_fragment) sets of `set_bytes` (whole min_fragments of an equal
//   share); the last set also takes what the division leaves, so a set index is always below
//   set_count ≤ kMaxSets. A call's fragments all take `frag` bytes of the queue (its last piece
//   may fill less), and frag ≤ set_bytes. A fragment never crosses a set boundary: it goes
//   where the previous fragment (of this call or, for the first, of r's previous call in any
//   group) ended when it fits in that set there, else at the start of the next set (0 after the
//   last). A reader derives the next fragment's place from the current one's the same way.
//   Entering a set (its start, or any first fragment of r after Reset) is the only step that
//   waits for that set's readers.
//   queue bytes [offset, offset + size): r writes them once the set they lie in has
//     pending = 0 (entering) or holds this call's count (continuing), then notifies its
//     children; readers copy them after seeing the block's tag.
//   sets[s].pending (r's region): r, entering set s, waits until it is 0, then stores the
//     readers of its call (n − 1); r, starting a call in the set its previous fragment is in,
//     adds n − 1. Each reader subtracts 1 (acq_rel) after copying the call's last fragment in s
//     (the next would be in another set, or at 0, or there is none), then rings r's doorbell.
//   FragmentControl block k of ring g (c's region): p waits until c's consumed[g] > k − blocks
//     (the block's previous use was read), writes offset, size, call_hash and inline data, then
//     tag (release), then rings c's doorbell. c waits for a tag other than the block's previous
//     one (acquire), checks it, notifies its own children, copies, then stores
//     consumed[g] = k + 1 (release).
//   slot_waiter (c's region): p, about to wait on c's consumed count, stores its own index
//     (seq_cst) and loads the count again; c, after storing consumed, fences, loads it, and if
//     it is a rank, exchanges −1 and rings that rank (the Dekker pair of wait.h).
//
// Window mode (single copy): when the root's buffer lies in its own part of a window
// (shm_window.h) and the message is at least window_min_bytes (and does not fit a control block), the call is one block per member
// and no queue at all. The block's offset is kWindowFlag | id << kWindowIdShift | the buffer's
// offset in window `id`, its size the whole message; readers tell the mode from that first
// block (so they learn how many blocks the call takes only after reading it) and copy straight
// out of the root's part. The root stores n − 1 in its WindowCounter of that window before it
// notifies; each reader, after copying, subtracts 1 (acq_rel) and rings the root's doorbell;
// the root returns once it reads 0.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/abi_generated.h"
#include "base/cache_line.h"
#include "base/wait.h"
#include "shm/shm_segment.h"
#include "shm/shm_window.h"

namespace topocoll {

// Notification tree shapes (S0): abi/abi.yaml's, which src/runtime/shm-budget.ts passes.
using abi::TreeKind;

struct ShmBcastParams {
  // Bytes of each rank's queue; a multiple of `min_fragment`.
  uint64_t queue_bytes = 512 * 1024;
  // Smallest fragment; the queue has queue_bytes / min_fragment control blocks.
  uint32_t min_fragment = 4096;
  // Buffer sets (q of S0): 1 or 2 (up to kMaxSets; fewer when the queue has fewer
  // min_fragments).
  uint32_t sets = 2;
  TreeKind tree = TreeKind::kKnomial;
  uint32_t radix = 2;
  // Fragment size for a message of 2^i bytes (i = ceil(log2 m)), chosen by the cost model; the
  // last entry serves every larger message.
  std::vector<uint32_t> fragment_for_log2;
  // Window mode only from this many bytes: its root waits for every reader's copy before it
  // returns, where the queue lets it run ahead; below this the queue's run-ahead wins (the engine
  // sets it, higher when ranks outnumber cores and each wait costs context switches).
  uint64_t window_min_bytes = 0;
};

constexpr uint32_t kMaxSets = 4;
// Groups a rank can broadcast in through the engine (one control ring each): its levels inside
// the node.
constexpr uint32_t kMaxRings = 8;
constexpr size_t kInlineBytes = 104;
// Window mode's block offset: the flag, the window id above kWindowIdShift, the byte offset below.
constexpr uint64_t kWindowFlag = uint64_t{1} << 63;
constexpr int kWindowIdShift = 40;
constexpr uint32_t kMaxWindowId = (1u << 23) - 1;

// One fragment's notification, written by the parent, read by the owner; a block changes only
// when the parent writes a new tag (tags are unique per call, level and fragment).
struct alignas(kFalseSharingBytes) FragmentControl {
  std::atomic<uint64_t> tag;  // 0 before the first use
  uint64_t offset;            // where the fragment sits in the root's queue
  uint32_t size;
  uint32_t call_hash;
  uint8_t inline_data[kInlineBytes];
};
static_assert(sizeof(FragmentControl) == kFalseSharingBytes,
              "a control block fills its padding: kInlineBytes is what the other fields leave");

struct alignas(kFalseSharingBytes) SetCounter {
  std::atomic<uint32_t> pending;  // readers that have not released this set of the owner's queue
};

// A counter on a cache line of its own.
struct alignas(kFalseSharingBytes) PaddedCounter {
  std::atomic<uint64_t> value;
};

// A shared-memory reduce's progress in one group (shm_reduce.h): chunks this rank has copied in,
// has combined its slice of, and (at the destination) has copied out and released.
struct ReduceCounters {
  PaddedCounter in, out, free;
};

// Views of one rank's S0 region of the segment (segment_layout.h carves it).
struct BcastRegion {
  SetCounter* sets;
  std::atomic<int32_t>* slot_waiter;  // local index of a writer sleeping on this rank, or -1
  // Per control ring: blocks this rank has consumed (it only grows). A parent writes block k
  // only once k < consumed + blocks, i.e. the block's previous use was read.
  PaddedCounter* consumed;
  // kMaxRings rings of `blocks` control blocks each.
  FragmentControl* rings;
  // Per group id (kMaxRings): the shared-memory reduce's counters.
  ReduceCounters* reduce;
  uint8_t* queue;
};

class ShmBcast {
 public:
  // `windows`: the windows this rank maps (null: no window mode).
  ShmBcast(ShmBcastParams params, std::vector<BcastRegion> regions, std::vector<Doorbell*> doorbells, int me,
           const WindowTable* windows = nullptr);

  // Declares a group of local ranks (local indices, ascending) under `id` and precomputes this
  // rank's parent and children in the notification tree for every possible root.
  void SetGroup(int id, const std::vector<int>& members);
  bool HasGroup(int id) const { return id >= 0 && static_cast<size_t>(id) < groups_.size() && !groups_[id].members.empty(); }

  // Broadcasts `bytes` of `buf` inside group `id` from its member with local index `root`.
  // `tag_base` is unique per (collective call, level); `call_hash` identifies the call's
  // arguments so a rank in a different call is detected. `guard` runs while waiting.
  void Run(int id, int root, void* buf, size_t bytes, uint64_t tag_base, uint32_t call_hash, const WaitPolicy& policy, WaitGuard& guard);

  // Starts over after a reconfiguration, when no collective runs and none has notifications in
  // flight: forgets every group's counts and clears this rank's own control blocks and
  // counters (the other members do the same before anyone broadcasts again).
  void Reset();

  // The fragment size used for a message of `bytes`.
  size_t FragmentFor(size_t bytes) const;
  // At most how many fragments (control blocks) one Run of up to `bytes` uses.
  uint64_t MaxFragments(size_t bytes) const { return bytes / params_.min_fragment + 2; }

 private:
  struct TreeLinks {
    int parent = -1;
    std::vector<int> children;  // local indices
  };
  struct Group {
    std::vector<int> members;
    // links[r]: this rank's parent and children when the member at position r is the root.
    std::vector<TreeLinks> links;
    // Fragments each member has been sent in this group's broadcasts so far: the index of its
    // next control block in this group's ring (the same on every member).
    std::vector<uint64_t> sent;
  };

  TreeLinks LinksFor(int n, int root_pos, int my_pos, const std::vector<int>& members) const;
  FragmentControl& Block(int owner, int ring, uint64_t index);
  void Notify(int child, int ring, uint64_t index, uint64_t tag, uint64_t offset, uint32_t size, uint32_t call_hash,
              const uint8_t* inline_data, size_t inline_bytes, const WaitPolicy& policy, WaitGuard& guard);
  void Release(int ring, uint64_t index, const WaitPolicy& policy);
  // Waits for block `index` of this rank's ring to carry `tag` and checks it is this call's.
  FragmentControl& AwaitBlock(int ring, uint64_t index, uint64_t tag, uint32_t call_hash, const WaitPolicy& policy, WaitGuard& guard);
  void WakeWaiter(BcastRegion& region, const WaitPolicy& policy);

  // The queue's sets (see the protocol above): the set an offset lies in, the end of a set,
  // and where a fragment of `frag` bytes goes when the previous one ended at `end`.
  uint32_t SetOf(uint64_t offset) const {
    const uint64_t s = offset / set_bytes_;
    return s < set_count_ ? static_cast<uint32_t>(s) : set_count_ - 1;
  }
  uint64_t SetEnd(uint32_t set) const { return set + 1 == set_count_ ? params_.queue_bytes : (set + uint64_t{1}) * set_bytes_; }
  uint64_t Place(uint64_t end, uint64_t frag) const {
    const uint32_t set = SetOf(end);
    if (end + frag <= SetEnd(set)) return end;
    return set + 1 < set_count_ ? (set + uint64_t{1}) * set_bytes_ : 0;
  }

  // Where this rank, as a root, writes next in its queue, and the set it last wrote in.
  struct QueueCursor {
    uint64_t offset = 0;
    int64_t set = -1;
  };

  ShmBcastParams params_;
  uint64_t blocks_;     // control blocks per rank
  uint32_t set_count_;  // 1 … kMaxSets
  uint64_t set_bytes_;  // a multiple of min_fragment, ≥ min_fragment; the last set may be larger
  QueueCursor cursor_;
  std::vector<BcastRegion> regions_;
  std::vector<Doorbell*> doorbells_;
  int me_;
  const WindowTable* windows_;
  std::vector<Group> groups_;
  // Per (child, ring): the child's consumed count as last read (it only grows).
  std::vector<uint64_t> known_consumed_;
  // Per own control block: the tag of its last use, to tell a new notification from the old.
  std::vector<uint64_t> last_tag_;
  // Scratch of Run: each child's first control block of the current call.
  std::vector<uint64_t> child_first_;
};

}  // namespace topocoll
