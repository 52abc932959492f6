// The per-process communication engine: the node's shared segment with its channels, the links
// to other nodes (TCP, or a host layer's point-to-point messages), the schedules TypeScript
// compiled, and the executor that runs one collective per call. No Node-API here: the addon
// layer wraps it.
//
// Engine wires its parts together: LocalNode (local_node.h: this node's ranks and controls),
// Liveness (liveness.h: Guard, the watcher, aborts, the published call), WindowCollectives
// (window_collectives.h: the shared windows, the window allreduce and allgather, S1's one-sided
// steps inside the node), and its own two concerns, setup (engine.cc: segment, links,
// schedules, groups, close) and the executor (engine_executor.cc: Run — phases, segments,
// steps, transfers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/datatypes.h"
#include "base/errors.h"
#include "base/message.h"
#include "base/pending_input.h"
#include "base/wait.h"
#include "engine/liveness.h"
#include "engine/local_node.h"
#include "engine/step.h"
#include "engine/window_collectives.h"
#include "shm/shm_allreduce.h"
#include "shm/shm_bcast.h"
#include "shm/shm_channel.h"
#include "shm/shm_channel_pool.h"
#include "shm/shm_reduce.h"
#include "shm/shm_segment.h"
#include "shm/shm_window.h"
#include "transport/p2p_links.h"
#include "transport/tcp_links.h"

namespace topocoll {

class SegmentLayout;  // segment_layout.h

struct EngineOptions {
  int rank = 0;
  int size = 1;
  // Global ranks on this node, ascending; this rank is among them.
  std::vector<int> local_ranks;
  // The one-way shared-memory channels (shm_channel_pool.h): each rank's outbox, and the
  // largest and smallest capacity of a channel (powers of two).
  ChannelPoolParams channels{8 << 20, 1 << 20, 64 << 10};
  // More processes on the node than cores: spin less before yielding.
  bool oversubscribed = false;
  // How waits spend the time before they sleep (abi::WaitMode, `waits.mode`; base/wait.h).
  abi::WaitMode waits = abi::WaitMode::kSpin;
  // waits: auto: the longest non-blocking spin on a TCP peer before poll() (`waits.remoteSpinUs`).
  uint32_t remote_spin_us = 50;
  // The job's ranks on this machine's kernel, whatever nodes or hosts they are made into (this
  // one included): the runnable threads a lost core may be theirs (ContentionSignal).
  int machine_ranks = 1;
  // The smallest bcast the S0 engine sends in window mode (ShmBcastParams::window_min_bytes): the
  // router's threshold (src/runtime/router.ts), which picks the window plans from the same size.
  uint64_t window_bcast_min_bytes = 0;
  // Global ranks of this node bound to the same CPUs as this rank, which they oversubscribe:
  // such a peer cannot run while this rank spins, so waits on it yield at once.
  std::vector<int> co_runners;
  // The S0 shared-memory bcast engine's queues and trees.
  ShmBcastParams bcast;
  // Node leader: use membarrier-based asymmetric fences when the kernel offers them (wait.h).
  bool asymmetric_fences = true;
  // The watchdog: a call that has waited longer than this fails with ETIMEDOUT on every rank
  // (0: no limit).
  int64_t collective_timeout_ms = 0;
};

// Where a received body goes, piece by piece: copied to dst, or combined into it in the step's
// order (incoming_first: dst = incoming op dst, else dst op incoming) — or, given `own`, with
// own in dst's place (dst = own op incoming in one pass; the reducer has kernel3).
class Delivery {
 public:
  Delivery(void* dst, const Reducer& reducer, bool incoming_first, size_t elem, const void* own, std::vector<uint8_t>& scratch)
      : out_(static_cast<uint8_t*>(dst)),
        own_(static_cast<const uint8_t*>(own)),
        reducer_(reducer),
        incoming_first_(incoming_first),
        elem_(elem),
        scratch_(scratch) {}
  // Takes the next `len` bytes (whole elements).
  void operator()(const uint8_t* in, size_t len);
  bool combines() const { return static_cast<bool>(reducer_); }
  // Where the next bytes go.
  uint8_t* next() const { return out_; }

 private:
  uint8_t* out_;
  const uint8_t* own_;
  Reducer reducer_;
  bool incoming_first_;
  size_t elem_;
  std::vector<uint8_t>& scratch_;
};

// Header op code of user-defined operators (ranks cannot tell two such operators apart).
constexpr uint8_t kUserOpCode = 255;

// Everything one collective call needs.
struct CallArgs {
  Collective collective;
  const std::vector<Step>* reduce = nullptr;  // reduce phase (reduce, allreduce, barrier)
  const std::vector<Step>* bcast = nullptr;   // bcast phase (bcast, allreduce, barrier)
  const void* send = nullptr;                 // reduce input; equals recv when IN_PLACE
  void* recv = nullptr;                       // bcast buffer / reduce result
  uint64_t count = 0;
  Dtype dtype = Dtype::kUint8;
  ReduceOp op = ReduceOp::kSum;
  // Set for a user-defined operator (then `op` is ignored); runs on the calling thread.
  CustomReduce custom;
  int root = 0;
  uint32_t plan_hash = 0;
  // Elements per segment (0: the whole message in one); the same on every rank of the call.
  // Allgather: the column segments of the gather phase (see Run).
  uint64_t segment = 0;
  // Allgather, gather and scatter. `count` is each rank's block length, unless `block_counts`
  // holds one length per rank (the v forms; every rank passes the same). Allgather: recv holds
  // the blocks in rank order; send is this rank's block, or recv itself (IN_PLACE: the block is
  // at its place). Gather: the root's recv holds them, send is this rank's block (recv itself at
  // the root: IN_PLACE); the others' recv is unused. Scatter: the root's send holds them, recv
  // gets this rank's block (send itself at the root: IN_PLACE, the block stays in send).
  std::vector<uint64_t> block_counts;
  // Alltoallv: the elements this rank receives from each rank (block_counts: sends to each).
  // Alltoall: both empty, `count` elements per block. Send holds this rank's blocks in rank
  // order, recv gets every rank's in rank order; send == recv is IN_PLACE (the input is recv).
  std::vector<uint64_t> recv_counts;
  // Allgather: elements per segment of the bcast phase (0: one segment).
  uint64_t bcast_segment = 0;
};

// The per-call counters that the executor and the JavaScript fast path (src/runtime/fast-path.ts)
// both advance, so that a call made by either counts for both: JavaScript reads and writes them
// through a Uint32Array over this struct (words as abi::call_counter numbers them), on the
// thread that runs blocking calls, and only while no Promise collective is queued.
struct CallCounters {
  uint32_t seq = 0;            // calls made: the last call's MsgHeader::seq
  uint32_t previous_call = 0;  // CallHash of the last call, folded into the next one's plan hash
  AreaCalls area;              // calls of the node-wide shared area (ShmAllreduce)
};
static_assert(sizeof(CallCounters) == 4 * abi::kCallCounterWords, "CallCounters has abi/abi.yaml's words");
static_assert(offsetof(CallCounters, seq) == 4 * abi::call_counter::kSeq, "seq is where abi/abi.yaml puts it");
static_assert(offsetof(CallCounters, previous_call) == 4 * abi::call_counter::kPreviousCall, "previous_call likewise");
static_assert(offsetof(CallCounters, area) + offsetof(AreaCalls, count) == 4 * abi::call_counter::kAreaCalls, "area.count likewise");
static_assert(offsetof(CallCounters, area) + offsetof(AreaCalls, all_entered) == 4 * abi::call_counter::kAllEntered,
              "area.all_entered likewise");

// Where the JavaScript fast path finds what it reads and writes in the node's segment: byte
// offsets from the segment's base (FastPathLayout; the addon hands them over with the segment).
struct FastPathLayout {
  size_t abort_code;      // SegmentHeader::abort_code
  size_t controls;        // RankControl[L]
  size_t control_stride;  // sizeof(RankControl)
  size_t sleeping;        // within a RankControl: doorbell.sleeping
  size_t idle;            // doorbell.idle
  size_t call_version;    // call_version (the published call's seqlock)
  size_t call;            // call[4]
  size_t slots;           // ShmAllreduce's Slot[kDepth][L]
  size_t slot_stride, slot_header, slot_data;
  size_t slot_data_bytes;  // kInlineBytes
  size_t slot_depth;       // kDepth
  size_t span;             // bytes from the base that cover all of the above
};

class Engine {
 public:
  explicit Engine(EngineOptions options);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }

  // --- setup, in this order ---
  int ListenTcp(const std::string& address);
  // The node leader creates the segment; the others open it once the leader said so.
  void CreateSegment(const std::string& name);
  void OpenSegment(const std::string& name);
  // Leader: waits at most wait_ms for every local rank to map the segment; once they all have,
  // unlinks its name and returns true. (A short wait per call lets the caller watch for aborts.)
  bool AllMappedAndUnlink(int wait_ms);
  // Links to peers (TcpLinks::Establish): waits at most wait_ms, returns the ranks not linked yet.
  std::vector<int> ConnectTcp(const std::string& token, const std::vector<TcpPeer>& peers, int wait_ms);
  const std::string& last_connect_error() const { return tcp_.last_connect_error(); }
  // Instead of TCP: the ranks of other nodes are reached through a host layer's point-to-point
  // messages on `tag` (before Start); `layer_ranks[r]`: the layer's rank of rank r (empty: the
  // layer's ranks are the communicator's). AddP2PPeers names the ranks of other nodes this
  // rank's plans exchange with (they get its abort notice).
  void UseP2P(std::shared_ptr<P2PLayer> layer, int32_t tag, std::vector<int> layer_ranks = {});
  void AddP2PPeers(const std::vector<int>& ranks);
  // Starts the watcher that notices dead local peers and aborts.
  void Start();

  // --- use ---
  void SetPlan(int id, std::vector<Step> steps);
  // A group of ranks of this node that broadcasts through the S0 engine (global ranks).
  void SetShmGroup(int id, const std::vector<int>& ranks);
  const std::vector<Step>* Plan(int id) const;
  // After a reconfiguration, between two barriers that do not use the shared-memory engines:
  // clears this rank's S0 and shared-memory reduce state (groups are then registered anew).
  void ResetShm();
  void Run(const CallArgs& args);
  // Makes a call in progress on another thread fail with ECLOSED at its next check (then the
  // thread that runs it can be joined). Any thread.
  void RequestClose() { liveness_.RequestClose(); }
  // Marks this rank as gone on purpose, stops the watcher, closes links. Idempotent.
  void Close();

  size_t segment_bytes() const { return segment_.size(); }
  // What the node's segment is made of and how much of its outboxes the node's channels use
  // (all zero without a segment).
  struct SharedMemoryUse {
    size_t segment = 0, controls = 0, outboxes = 0, outbox = 0, regions = 0, node_area = 0;
    ChannelPoolUse channels;
  };
  SharedMemoryUse shared_memory_use() const;

  // --- windows (shm_window.h): collective steps the communicator orders (allocShared) ---
  // The node's lowest rank creates window `id` under `name` with one part per local rank of
  // `part_bytes[i]` bytes; the others open it after the creator said so. Returns the base of
  // the mapping (WindowTable::Base gives its size).
  uint8_t* CreateWindow(uint32_t id, const std::string& name, const std::vector<uint64_t>& part_bytes) {
    return windows_.Create(id, name, part_bytes);
  }
  uint8_t* OpenWindow(uint32_t id, const std::string& name, const std::vector<uint64_t>& part_bytes) {
    return windows_.Open(id, name, part_bytes);
  }
  const WindowTable& windows() const { return windows_.table(); }
  // Unmaps window `id`; false when this rank does not map it.
  bool FreeWindow(uint32_t id) { return windows_.Free(id); }
  // Unmaps every window (close, once no thread runs a collective).
  void ClearWindows() { windows_.Clear(); }

  // --- point-to-point messages (message_streams.h) ---
  // What they use of the node's segment: its channel pool (null without a segment), every
  // rank's local index (-1: another node) and the local ranks' controls. Valid until Close().
  MessageNode MessagesView();

  // --- the JavaScript fast path (src/runtime/fast-path.ts) ---
  CallCounters& call_counters() { return counters_; }
  // The segment's base (null without one) and where the fast path's words are in it.
  uint8_t* segment_base() { return node_.mapped() ? segment_.base() : nullptr; }
  FastPathLayout fast_path_layout() const;
  uint32_t local_index() const { return static_cast<uint32_t>(node_.index()); }
  bool asymmetric_fences() const { return policy_.asymmetric; }
  // The waits of a shared-area call that the fast path deposited, marked and published itself
  // (its header is this rank's published call): waits for local ranks from, from + 1, …,
  // to − 1 to deposit `call` and checks their headers, with the call's checks (Guard) and, on
  // failure, the abort the executor would raise.
  void AwaitAreaDeposits(uint32_t call, size_t from, size_t to);
  // Rings local rank i's doorbell (the fast path saw it announce a sleep).
  void RingLocal(size_t i);
  // NUMA node of every page of this rank's own S0 region (empty without a segment).
  std::vector<int32_t> OwnRegionNodes() const;

 private:
  // --- setup (engine.cc) ---
  void InitViews();
  // Removes the name of the segment this rank created, if it has not yet.
  void UnlinkCreated();

  // --- the executor (engine_executor.cc) ---

  // Where one phase of a call works: its buffer B, the input B starts from, and the segments.
  // Allgather's rank blocks: rank r's block is elements [displs[r], displs[r] + counts[r]) of B.
  struct BlockTable {
    std::vector<uint64_t> counts;
    std::vector<uint64_t> displs;
  };
  // An alltoall's pair blocks (schedule.ts, "Pair blocks"): block b = s·p + d is what rank s sends
  // rank d. This rank's row (s = rank) lies in `send`, its column (d = rank) in `recv`, both in
  // rank order; every other block a schedule moves passes through `staged`, where its message
  // put it (offset and length, in elements of `arena`): a block's length is known to its source
  // and its destination only, so a rank that passes one on takes the length its message carries.
  struct PairTable {
    const uint8_t* send = nullptr;
    uint8_t* recv = nullptr;
    std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
    // Alltoall (not v): every block has the call's length n, known everywhere (packed exchanges).
    bool uniform = false;
    uint64_t n = 0;
    // Staged blocks by block index: where in `arena` (bytes) and how many elements.
    struct Staged {
      size_t at;
      uint64_t count;
    };
    std::unordered_map<uint64_t, Staged> staged;
    std::vector<uint8_t> arena;
    size_t used = 0;  // bytes of the arena this call has staged
  };
  struct PhaseData {
    uint8_t* buffer;   // B
    uint64_t count;    // elements of the whole message (rank-block phases: of the longest block)
    uint64_t segment;  // elements per segment
    size_t elem;
    // Set when B starts as a copy of the input that is made lazily (large reductions).
    PendingInput* pending = nullptr;
    // Set for a phase whose steps name rank blocks (of = 0): segment k is then elements
    // [k·segment, (k+1)·segment) of every rank's block (column segments).
    const BlockTable* blocks = nullptr;
    // Set for an alltoall's phase: its steps name pair blocks (of = kPairBlocks), never segmented.
    PairTable* pairs = nullptr;
    // Set, instead of an accumulator, for a phase that is one whole-call step which reads the
    // call's input itself: the window allreduce's send, the window allgather's own block.
    const uint8_t* input = nullptr;
  };
  // Whether a schedule writes B on this rank (anything but sends).
  bool ReceivesIn(const std::vector<Step>& steps) const;
  // A call whose first phase is the one node-wide kShmAreaCall step: a gather, scatter,
  // reduce-scatter, alltoall, scan or exscan through the shared area (ShmAllreduce::Gather …
  // Scan) with the call's buffers, not phases of steps.
  void RunAreaCall(const CallArgs& args, const MsgHeader& header, const BlockTable& table, const Reducer& reducer, Guard& guard);
  // Whether every step of a rank-block schedule moves this rank's own block only.
  bool MovesOnlyOwnBlock(const std::vector<Step>& steps) const;
  // kPut, kAwaitPut, kCountDone, kAwaitDone: S1's one-sided bcast on B — messages to and from
  // other nodes here, the windows (WindowCollectives::OneSided) inside the node.
  void RunOneSided(const Step& s, const MsgHeader& header, uint8_t* b, size_t bytes, Guard& guard);
  // Makes data.buffer start as a copy of `input`: at once, or lazily through pending_ for large
  // messages (then data.pending is set).
  void StartAccumulator(PhaseData& data, const uint8_t* input, const Reducer& reducer);
  static constexpr size_t kLazyInputBytes = 16 * 1024;
  void RunPhase(const std::vector<Step>& steps, MsgHeader& header, PhaseData& data, const Reducer& reducer, Guard& guard);
  void RunStep(const Step& s, const MsgHeader& header, PhaseData& data, uint64_t seg_start, uint64_t seg_n, uint64_t seg_index,
               const Reducer& reducer, Guard& guard);
  void NormalizeAlone(const CallArgs& args, const Reducer& reducer, size_t bytes);
  static uint32_t CallHash(const MsgHeader& h);
  // Allgather: every rank's block length (args.count each, or args.block_counts) and place.
  // An allgather's block lengths and places, into `t` (reused call after call: no allocation).
  void FillAllgatherBlocks(const CallArgs& args, BlockTable& t) const;
  static uint32_t BlockCountsHash(const std::vector<uint64_t>& counts);
  void SendTo(int peer, int local_peer, const MsgHeader& header, const void* data, size_t bytes, Guard& guard);
  // The channel from a local peer, once it has made it (waits until then).
  ShmChannel& IncomingChannel(int local_peer, const WaitPolicy& policy, Guard& guard);
  // Receives a message of `bytes` from `peer` and hands its body to `into`.
  void RecvFrom(int peer, int local_peer, const MsgHeader& expected, size_t bytes, Delivery& into, Guard& guard);
  // RecvFrom in two halves: the next message's header (probes from another node skipped, an
  // abort notice thrown; not checked), then its body of `bytes`.
  void ReceiveHeader(int peer, int local_peer, const MsgHeader& expected, MsgHeader& got, Guard& guard);
  void ReceiveBody(int peer, int local_peer, size_t bytes, Delivery& into, Guard& guard);
  // A step that sends to s.peer while it receives from s.peer2, both on this node: the send in
  // pieces between the pieces received (large messages), so neither ring must hold it all. The
  // message sent carries `header`, the one received must match `expected`.
  void ExchangeLocal(const Step& s, const MsgHeader& header, const MsgHeader& expected, const uint8_t* data, size_t bytes, Delivery& into,
                     size_t in_bytes, Guard& guard);
  // The largest segment an exchange step that sends to a peer (local_peer: its local rank, or
  // −1) while it receives from another may carry: what the carriers must hold without a reader.
  // Both peers remote over a duplex carrier: no limit (ExchangeRemote).
  uint64_t ExchangeLimit(int local_peer, int local_peer2) const;
  // Whether an exchange between these peers runs as ExchangeRemote.
  bool DuplexBetween(int local_peer, int local_peer2) const { return local_peer < 0 && local_peer2 < 0 && remote_->DuplexExchanges(); }
  // A step that sends to remote `peer` while `receive` reads from another remote rank: the send
  // goes on whenever the reads wait (RemoteLinks::SendWhileReceiving). `data` must not change
  // meanwhile (Unaliased).
  template <class Receive>
  void ExchangeRemote(int peer, const MsgHeader& header, const void* data, size_t bytes, Receive&& receive, Guard& guard);
  // `data`, or a copy of it where the receive of an exchange writes into the range it sends.
  const uint8_t* Unaliased(const uint8_t* data, size_t bytes, const uint8_t* into, size_t in_bytes);
  // An alltoall's step on pair blocks (Send, Recv, SendRecv; see PairTable), one block a message.
  void RunPairStep(const Step& s, const MsgHeader& call, PairTable& t, size_t elem, Guard& guard);
  // Steps [begin, end), a run of joined Sends, Recvs or SendRecvs: one packed message each way
  // (an alltoall's, n elements a block).
  void RunPackedRun(const std::vector<Step>& steps, size_t begin, size_t end, const MsgHeader& call, PairTable& t, size_t elem,
                    Guard& guard);
  // Receives pair block `block` from `peer`: into recv (this rank's column: its length known,
  // compared with the message's), or staged (the length the message carries).
  void ReceivePairBlock(int peer, int local_peer, const MsgHeader& call, PairTable& t, uint64_t block, size_t elem, Guard& guard);
  // The alltoall's pair table from its counts and buffers (send: the input, recv itself or a copy).
  void FillPairTable(const CallArgs& args, const uint8_t* send, PairTable& t) const;
  // How much an exchange sends before it looks at what came in (at most a quarter of the ring).
  static constexpr uint64_t kExchangePiece = 256 * 1024;
  void CheckHeader(const MsgHeader& expected, const MsgHeader& got, int peer);
  // Rethrows a link `peer` ended: as the peer's abort code when its notice is what came last.
  [[noreturn]] static void ThrowPeersNotice(const PeerClosed& e, int peer);
  uint8_t* Scratch(size_t bytes);

  // --- lookups (engine.cc) ---
  // The node segment's map, from this job's options (the same on every rank of the node).
  SegmentLayout Layout() const;
  int LocalIndex(int rank) const { return node_.IndexOf(rank); }
  // How to wait on a local peer (a local index), or on a shared-memory group's members.
  const WaitPolicy& PolicyFor(int local_peer) const;
  const WaitPolicy& GroupPolicy(int group) const;

  EngineOptions options_;  // local_ranks ascending
  LocalNode node_;
  Liveness liveness_;
  // Sightings of others' work on this rank's cores (waits: auto), shared by every policy below
  // and the TCP links' read spin.
  ContentionSignal contention_;
  WaitPolicy policy_;
  // policy_ without the spin: for waits on a co-runner (EngineOptions::co_runners).
  WaitPolicy yield_policy_;
  // Waits on the whole node (ShmAllreduce): no spin when co-runners are among those waited
  // on, but still spinning while every co-runner is idle.
  WaitPolicy node_policy_;
  // By local index: bound to this rank's CPUs. By shm group id: the group has such a member.
  std::vector<bool> co_runner_;
  std::vector<bool> group_has_co_runner_;
  std::vector<const Doorbell*> co_runner_bells_;

  ShmSegment segment_;
  // The windows this rank maps (the single-copy bcast reads them too; shm_bcast.h) and the
  // collectives that run through them.
  WindowCollectives windows_;
  // The name of the segment this rank created until it is unlinked.
  std::string created_name_;
  std::unique_ptr<ShmChannelPool> channels_;

  std::unique_ptr<ShmBcast> shm_bcast_;
  std::unique_ptr<ShmReduce> shm_reduce_;
  std::unique_ptr<ShmAllreduce> shm_allreduce_;
  uint8_t* own_region_ = nullptr;
  size_t own_region_bytes_ = 0;
  TcpLinks tcp_;
  std::unique_ptr<P2PLinks> p2p_;
  // The links to other nodes in use: &tcp_, or p2p_.
  RemoteLinks* remote_ = &tcp_;
  // By id (ids are small and dense). Each schedule is allocated on its own: queued Promise
  // collectives hold pointers to theirs while new ones are registered.
  std::vector<std::unique_ptr<std::vector<Step>>> plans_;
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> staging_;
  std::vector<uint8_t> combine_scratch_;
  // The block table of the allgather in progress (calls run one at a time).
  BlockTable block_table_;
  // The alltoall in progress's (its arena kept from call to call), and IN_PLACE's copy of the input.
  PairTable pair_table_;
  std::vector<uint8_t> alltoall_input_;
  std::vector<uint8_t> pack_out_, pack_in_;
  std::vector<uint8_t> exchange_copy_;
  PendingInput pending_;
  // seq, the previous call's hash (folded into the plan hash of the next call's messages: ranks
  // that disagreed on a call without noticing disagree on the next) and the shared area's calls.
  // Calls run one at a time, in call order.
  CallCounters counters_;
  bool closed_ = false;
};

}  // namespace topocoll
