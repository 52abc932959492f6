// The allreduce of small messages among all ranks of one node, in one of two protocols (the
// schedule's step says which; the planner picks, src/runtime/collective-plans.ts).
//
// Every rank copies its call's header and data into its own slot. Then:
//
// - Every rank combines (chosen while the ranks have a core each, at most 8 of them): the rank
//   marks its slot deposited and rings the others; each rank waits for every slot, checks
//   every header against its own (EMISMATCH otherwise) and combines the slots itself, in
//   local order (= rank order). One cache-line transfer from each peer, all in parallel:
//   at p = 2 an 8-byte call costs one transfer each way, where a rank that gathers and then
//   publishes costs two to three in a row.
// - The last to arrive computes (more ranks than cores): each rank adds one to a counter; the
//   rank whose addition completes the count checks that all headers agree, combines the slots
//   in local order into the result, publishes it and rings everyone; the others wait for it
//   and copy it out. Why not a tree, or every rank combining: with more ranks than cores every
//   rank of a core must run once per call, and each run that waits on a rank of the same core
//   costs a context switch. Here whoever runs last completes the call, so the
//   one run a rank gets after depositing call k + 1 often completes k + 1 as well: at 2 ranks
//   per core one switch per core and call instead of two.
//
// Both combine the same slots in the same order with the same code, so every rank gets the
// same bits, run after run, and operators need not commute.
//
// The allgather (Allgather) uses the same slots and the same two protocols, in rounds: in
// round k every rank deposits bytes [k·S, (k+1)·S) of its own block (S = kColumnBytes; nothing
// once its block is done), then, once it knows every slot holds this round's column (it waited
// for each mark itself, or the last to arrive told it), copies each peer's column from where it lies
// (below) to its place in the result. Every round counts as a call below. Nothing is combined and the
// result area is unused. Why rounds through the slots and not a schedule: with more ranks than
// cores each round costs every rank one run, where a ring or a tree of p − 1 or log p steps
// costs a context switch per step and rank.
//
// Small bcasts and reduces of a job on one node (chosen while the ranks have a core each) use
// the same slots one way, without the every-rank wait:
//
// - Bcast from local rank t: every rank deposits its header (t also its data) and marks its
//   slot; t returns at once; every other rank waits for t's mark, checks t's header and copies
//   t's data out.
// - Reduce to local rank t: every rank deposits header and data and marks its slot; the others
//   return at once; t waits for every mark, checks every header and combines the slots in local
//   order, as the every-rank allreduce does.
//
// The rest of a one-node job's small collectives (Gather … Scan, chosen while the ranks have a
// core each, the whole call at most kMaxBytes) use the same slots, each rank depositing what the
// others read of it and reading what it needs straight out of their slots, in local order:
//
// - Gather to t: every rank but t deposits its block, marks and returns; t deposits its header
//   only, marks, then waits for every other mark and copies each block to its place.
// - Scatter from t: t deposits the whole vector, marks and returns (its own block copied
//   straight); every other rank deposits its header, marks, waits for t's mark and copies its
//   block out of t's deposit.
// - Alltoall (equal blocks of n): every rank deposits its whole send, marks, then waits for
//   every other mark and copies block `me` of each deposit to its place.
// - Reduce-scatter: every rank deposits its whole input, marks, then waits for every other
//   mark and combines block `me` of every deposit, in local order.
// - Scan (exscan) of n: every rank deposits its input and marks; rank r waits for the marks of
//   ranks 0 … r − 1 and combines their deposits and (scan) its own, in local order; an
//   exscan's rank 0 reads nothing and leaves its result as it was.
//
// Reading from a slot before the deposit of one's own call would be wrong for IN_PLACE calls;
// every rank deposits first, so a result that overwrites its input never feeds a deposit.
// A rank that waited for every other mark records all_entered; the rest (a gather's senders,
// a scatter's root, scan ranks but the last) run ahead as a bcast root does (Reuse).
//
// Where a call's words live. Each rank has a ring of kDepth slots, call u in slot u mod kDepth:
// the mark, the header and up to kInlineBytes of data. Data larger than that goes to the rank's
// column of the call's parity (u mod 2, kColumnBytes each). The mark is written last (release),
// after header and data.
//
// Reuse. A mark of call u means "this rank has entered u": it finished u − 1 and so read
// everything of earlier calls. AreaCalls::all_entered is what this rank knows of the others:
// every rank has entered every call below it (it waited for all their marks, or every rank
// arrived at a last-arrival call). Before it deposits call u a rank needs every rank to have
// entered u − kDepth + 1 (its slot's previous call u − kDepth is read by all) — or u − 1 when
// the data goes to a column (the column's previous call u − 2 is read by all). If
// all_entered is not past that, it waits for every rank's mark of a later call than it needs —
// u − kDepth/2 (u − 1 for a column) — and sets all_entered after it: a sender that runs ahead
// (a bcast root, reduce senders) then reads the others' marks once every kDepth/2 calls, not
// once per call, and the reader always has calls queued. That wait cannot deadlock: this rank
// has deposited every call before u, and no call before u needs more of it. The calls between
// the needed one and u − 1 all marked (a last-arrival call among them would have moved
// all_entered past it), so the mark waited for will come. No rank gets more than kDepth − 2
// calls past u before this rank has entered u (it needs this rank's mark of its call −
// kDepth + 1), so the slot of the call waited for holds that call's mark + 1, or the mark of
// the call kDepth later: either means entered (marks are call + 1, 32 bits that wrap; a zeroed
// area is the marks of call −1). A wait for rank r's deposit of this rank's own call u
// compares for equality.
// The last rank of call u writes result u mod 2 only once everyone has deposited u, so everyone
// has read result u − 2.
//
// Mismatches: a rank that waits for a mark checks that rank's header against its own, so a
// one-way call's mismatch is seen by the readers of a bcast and the target of a reduce. Ranks
// that only deposited (two bcast "roots") meet at the next call: every header also carries the
// rank's previous call (engine_executor.cc), so that call's headers differ.
//
// The JavaScript fast path (src/runtime/fast-path.ts) runs the every-rank and one-way protocols
// of calls it takes itself, on the same slots, marks, headers and AreaCalls (shared with it),
// so a call made by either path meets calls made by the other. The addon hands it the layout
// (Engine::fast_path_layout).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/abi_generated.h"
#include "base/cache_line.h"
#include "base/datatypes.h"
#include "base/message.h"
#include "base/wait.h"

namespace topocoll {

// A rank's calls of the area, in two words the JavaScript fast path reads and writes too.
struct AreaCalls {
  uint32_t count = 0;        // calls this rank has made (the same on every rank), wrapping
  uint32_t all_entered = 0;  // every rank has entered every call below this one (see Reuse above)
};

class ShmAllreduce {
 public:
  // (The sizes below but kDepth are abi/abi.yaml's sharedArea: the JavaScript side relies on them too.)
  // Largest one-way deposit (bytes of data) whose later lines a reader fetches before the mark
  // comes (PrefetchDeposit, in steps of kLineBytes; the JavaScript fast path reads them early).
  static constexpr size_t kPrefetchBytes = abi::kSharedAreaPrefetchBytes;
  static constexpr size_t kLineBytes = abi::kSharedAreaLineBytes;
  // Largest allreduce (bytes) it takes; larger ones go through the group schedules.
  static constexpr size_t kMaxBytes = abi::kSharedAreaMaxBytes;
  // Slots in each rank's ring: how many calls a one-way sender may run ahead of the slowest rank.
  static constexpr uint32_t kDepth = 16;
  // Data a slot holds itself: the JavaScript fast path's calls all fit.
  static constexpr size_t kInlineBytes = abi::kSharedAreaSlotDataBytes;
  // Bytes of a column: larger data of a call, and an allgather's column per round.
  static constexpr size_t kColumnBytes = abi::kSharedAreaColumnBytes;

  // The parts of the node-wide area (segment_layout.h carves them).
  struct Counters {
    // deposits ever made in last-arrival calls (L per call); written by every rank
    alignas(kFalseSharingBytes) std::atomic<uint64_t> arrived;
    // last-arrival calls whose result is published; written by the last to arrive
    alignas(kFalseSharingBytes) std::atomic<uint64_t> completed;
  };
  // The mark, the header and the first 24 bytes of data share a cache line: a peer waiting
  // for a small deposit takes all of it in one transfer.
  struct alignas(kFalseSharingBytes) Slot {
    std::atomic<uint32_t> deposited;  // call + 1 (wrapping) once this call's header and data are written
    uint32_t reserved;
    MsgHeader header;
    uint8_t data[kInlineBytes];  // 8-byte aligned: combined in place
  };
  struct Area {
    Counters* counters;
    uint8_t* results;  // 2 parities × kMaxBytes
    Slot* slots;       // kDepth × L, by place in the ring then local index
    uint8_t* columns;  // 2 parities × L × kColumnBytes, by parity then local index
  };
  // Bytes of the slots and of the columns of L local ranks (the columns follow the slots).
  static constexpr size_t SlotsBytes(size_t local_size) { return kDepth * local_size * sizeof(Slot); }
  static constexpr size_t ColumnsBytes(size_t local_size) { return 2 * local_size * kColumnBytes; }

  // Byte offsets the JavaScript fast path needs (from the area's slots, within a slot).
  static constexpr size_t kSlotStride = sizeof(Slot);
  static constexpr size_t kHeaderAt = offsetof(Slot, header);
  static constexpr size_t kDataAt = offsetof(Slot, data);

  // `area`: the node-wide area of the shared segment, zeroed by its creator; `ranks`: the
  // global ranks of the L local ranks, ascending; `me`: this rank's local index; `calls`: this
  // rank's calls of the area, which the JavaScript fast path also advances.
  ShmAllreduce(Area area, std::vector<int> ranks, std::vector<Doorbell*> doorbells, int me, AreaCalls* calls);

  // Combines every local rank's `buf` (count elements of elem bytes; the same `header` on every
  // rank) into every rank's `buf`; `every_rank_combines` picks the protocol (the same on every
  // rank). Throws CollError EMISMATCH when the headers differ.
  void Run(void* buf, uint64_t count, size_t elem, const MsgHeader& header, bool every_rank_combines, const Reducer& combine,
           const WaitPolicy& policy, WaitGuard& guard);

  // Allgather: local rank r's block (counts[ranks[r]] elements of elem bytes) lies at
  // displs[ranks[r]] in every rank's `result`; this rank's own block is there already.
  // `every_rank_waits`: each rank waits for every deposit itself, else the last to arrive tells
  // all (the same on every rank, as for Run). Throws EMISMATCH when the headers differ.
  void Allgather(uint8_t* result, const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs, size_t elem,
                 const MsgHeader& header, bool every_rank_waits, const WaitPolicy& policy, WaitGuard& guard);

  // Bcast of `bytes` of `buf` from local rank `root` (one-way, every rank has a core; at most
  // kMaxBytes). Throws EMISMATCH when root's header differs from this rank's.
  void Bcast(void* buf, size_t bytes, const MsgHeader& header, size_t root, const WaitPolicy& policy, WaitGuard& guard);
  // Reduce of every local rank's `buf` (count elements of elem bytes, at most kMaxBytes) into
  // local rank root's `buf`, combined in local order (one-way). Throws EMISMATCH at the root
  // when a header differs.
  void Reduce(void* buf, uint64_t count, size_t elem, const MsgHeader& header, size_t root, const Reducer& combine,
              const WaitPolicy& policy, WaitGuard& guard);

  // The calls below: local rank r's block has counts[ranks[r]] elements at displs[ranks[r]] of
  // the whole vector (elem bytes each; the same on every rank); the whole call (every deposit)
  // at most kMaxBytes. Each throws EMISMATCH where a rank it waits for made another call.
  //
  // Gather to local rank `root` of `own` (this rank's block) into the root's `whole` (null
  // elsewhere); at the root `own` may be its place in `whole` (IN_PLACE).
  void Gather(const uint8_t* own, uint8_t* whole, const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs, size_t elem,
              const MsgHeader& header, size_t root, const WaitPolicy& policy, WaitGuard& guard);
  // Scatter from local rank `root`'s `whole` (null elsewhere) into `own` (this rank's block; at
  // the root null or its place in `whole` for IN_PLACE).
  void Scatter(const uint8_t* whole, uint8_t* own, const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs, size_t elem,
               const MsgHeader& header, size_t root, const WaitPolicy& policy, WaitGuard& guard);
  // Alltoall of blocks of n elements: block j of `send` to local rank j, block i of `recv` from
  // local rank i (send may be recv: IN_PLACE).
  void Alltoall(const uint8_t* send, uint8_t* recv, uint64_t n, size_t elem, const MsgHeader& header, const WaitPolicy& policy,
                WaitGuard& guard);
  // Reduce-scatter of the whole vector `send` into `recv` (this rank's block; send may be recv:
  // IN_PLACE), combined in local order.
  void ReduceScatter(const uint8_t* send, uint8_t* recv, const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs,
                     size_t elem, const MsgHeader& header, const Reducer& combine, const WaitPolicy& policy, WaitGuard& guard);
  // Inclusive (exclusive: `exclusive`) scan of n elements of `send` into `recv` (send may be
  // recv: IN_PLACE), combined in local order.
  void Scan(const uint8_t* send, uint8_t* recv, uint64_t n, size_t elem, bool exclusive, const MsgHeader& header, const Reducer& combine,
            const WaitPolicy& policy, WaitGuard& guard);

  // The waits of a call the fast path deposited and marked itself: waits for local ranks
  // from, from + 1, …, to − 1 (not this one) to deposit `call`, checking each header as Run
  // does (EMISMATCH).
  void AwaitDeposits(uint32_t call, size_t from, size_t to, const MsgHeader& header, const WaitPolicy& policy, WaitGuard& guard);

 private:
  // Throws EINVAL when `bytes` exceed what a call of the area takes (kMaxBytes).
  static void CheckFits(const char* collective, size_t bytes);
  Slot& SlotOf(int rank, uint32_t call) const;
  // Where local rank `rank`'s `bytes` of data of `call` lie: its slot, or its column.
  uint8_t* DataOf(int rank, uint32_t call, size_t bytes) const;
  // Makes sure every rank has entered `needed` (Reuse, above), waiting for their marks of
  // `target` (needed ≤ target < the current call) when all_entered is not past it.
  void EnsureEntered(uint32_t needed, uint32_t target, const WaitPolicy& policy, WaitGuard& guard);
  uint8_t* Result(uint32_t call) const;
  // Checks that `theirs`, the header local rank r deposited, is this call's.
  void CheckHeader(const MsgHeader& mine, const MsgHeader& theirs, size_t r) const;
  // Waits until this call's slot (and column) may be reused, then writes this call's header
  // into this rank's slot and `bytes` of `data` to DataOf; returns the call's number.
  uint32_t Deposit(const void* data, size_t bytes, const MsgHeader& header, const WaitPolicy& policy, WaitGuard& guard);
  // Marks this rank's slot of `call` deposited and rings the others.
  void MarkDeposited(uint32_t call, const WaitPolicy& policy);
  // Starts fetching the cache lines past the mark's of local rank r's slot of `call` that a
  // deposit of `bytes` fills, when it is at most kPrefetchBytes. A one-way call's reader does it
  // before it waits for the mark: its writer has usually long written the deposit, so those
  // lines then come with the mark's line, not after it when the copy reads them. Prefetches do
  // not wait and do not change what the copy after the mark (acquire) reads. Every-rank calls
  // do not: their peers are usually still writing, and an early read then takes a line away
  // from its writer. Larger deposits neither: prefetching them was measured not to help
  // (CHANGELOG.md, "p = 2 in the far state").
  void PrefetchDeposit(uint32_t call, size_t r, size_t bytes) const;
  // Waits until local rank r has deposited `call`, then checks its header.
  void AwaitDeposit(uint32_t call, size_t r, const MsgHeader& header, const WaitPolicy& policy, WaitGuard& guard);
  // Counts this rank's arrival in last-arrival call `round` (publishing its slot); true for the
  // last to arrive, which has then checked every header and must Complete the round.
  bool Arrive(uint32_t call, uint64_t round, const MsgHeader& header);
  // The last to arrive: marks `round` complete (its result published) and rings the others.
  void Complete(uint64_t round, const WaitPolicy& policy);
  // The others: wait until `round` is complete.
  void AwaitComplete(uint64_t round, const WaitPolicy& policy, WaitGuard& guard);
  void LastCombines(uint32_t call, uint64_t round, void* buf, size_t bytes, uint64_t count, const MsgHeader& header, const Reducer& combine,
                    const WaitPolicy& policy, WaitGuard& guard);
  void EveryRankCombines(uint32_t call, void* buf, size_t bytes, uint64_t count, const MsgHeader& header, const Reducer& combine,
                         const WaitPolicy& policy, WaitGuard& guard);
  // Waits for local ranks 0 … upto − 1 (this one aside) to deposit `call` (deposit_bytes each)
  // and folds out_bytes (count elements) at byte `at` of each deposit into `out`, in local order:
  // the first copied, each later one combined on its right. out_bytes 0: only the waits.
  void FoldDeposits(uint32_t call, size_t upto, size_t deposit_bytes, size_t at, uint8_t* out, size_t out_bytes, uint64_t count,
                    const MsgHeader& header, const Reducer& combine, const WaitPolicy& policy, WaitGuard& guard);

  Counters* counters_;
  uint8_t* results_;
  Slot* slots_;
  uint8_t* columns_;
  std::vector<int> ranks_;
  std::vector<Doorbell*> doorbells_;
  int me_;
  AreaCalls* calls_;
  uint64_t last_arrival_calls_ = 0;  // of them, those of the last-arrival protocol
};

}  // namespace topocoll
