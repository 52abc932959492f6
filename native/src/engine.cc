#include "engine.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "errors.h"
#include "placement.h"
#include "segment_layout.h"

namespace topocoll {

namespace {

uint32_t AbortCodeIndex(const std::string& code) {
  for (uint32_t i = 1; i < sizeof(kAbortCodes) / sizeof(kAbortCodes[0]); ++i) {
    if (code == kAbortCodes[i]) return i;
  }
  return 1;
}

// How long a failing rank waits, at most, for room to send its abort notice on its links.
constexpr int kLastWordsMs = 250;

}  // namespace

// Runs between waits: stops the wait when the communicator was aborted (by this process's
// watcher or by any other process of the node), and — once a wait on one peer has lasted
// kProbeAfter — checks that the peer is in the same collective: two ranks blocked on each other
// in different collectives would otherwise wait forever.
// What every wait of a call checks while it cannot go on (WaitGuard::Check runs only past the
// spin, so none of this is on the fast path):
//   1. an abort raised by any rank of the node (or learned from another node);
//   2. close() of this communicator during the call (ECLOSED here, EPEERLOST for the peers);
//   3. a local rank that left (close(), or its process exited through close at exit) before
//      this call: every rank takes part in every collective, so it never will — EPEERLOST
//      naming it. A rank that left after taking part in this call published everything it owed
//      before it set `departed` (release), so it is not counted;
//   4. the watchdog: the call has waited longer than the collective timeout — ETIMEDOUT
//      naming the ranks waited on, raised as an abort so that every rank reports it;
//   5. after 200 ms on one peer, whether that peer is in another call (EMISMATCH).
class Engine::Guard : public WaitGuard {
 public:
  Guard(Engine& engine, const MsgHeader& call, bool watchdog = true) : engine_(engine), call_(call), watchdog_(watchdog) {}

  // Called before each transfer with the peer it may wait on. The clock starts at the first
  // Check (waits call it only once they stopped spinning), which keeps it off the fast path.
  void WaitingOn(int peer) {
    peer_ = peer;
    timing_ = false;
    probed_ = false;
  }
  // A wait on every other rank of this node: the probe compares the calls of them all.
  void WaitingOnNode() { WaitingOn(kEveryLocal); }

  // The watcher shuts this rank's links when another rank of the node aborts (Watch); a read or
  // write cut short by that reports the abort, not the peer.
  void LinkEnded() override {
    if (engine_.header_ != nullptr && engine_.header_->abort_code.load(std::memory_order_acquire) != 0) {
      engine_.CloseLinksAfterAbort(engine_.NodeAbortCode());
      engine_.ThrowAborted();
    }
  }
  void SetPhase(uint8_t phase) { call_.phase = phase; }

  void Check() override {
    if (engine_.header_ != nullptr && engine_.header_->abort_code.load(std::memory_order_acquire) != 0) {
      engine_.CloseLinksAfterAbort(engine_.NodeAbortCode());
      engine_.ThrowAborted();
    }
    if (engine_.closing_.load(std::memory_order_acquire)) {
      throw CollError("ECLOSED", "the communicator was closed while this rank was in the " + CallName());
    }
    if (watchdog_) CheckDepartures();
    const auto now = std::chrono::steady_clock::now();
    if (watchdog_ && engine_.options_.collective_timeout_ms > 0) {
      if (!call_timing_) {
        call_timing_ = true;
        call_since_ = now;
      } else if (now - call_since_ > std::chrono::milliseconds(engine_.options_.collective_timeout_ms)) {
        const std::string text = "the " + CallName() + " did not complete within " +
                                 std::to_string(engine_.options_.collective_timeout_ms) + " ms (timeouts.collectiveMs) on rank " +
                                 std::to_string(engine_.options_.rank) + ", which was waiting on " + Awaited();
        engine_.Abort("ETIMEDOUT", text);
        throw CollError("ETIMEDOUT", text);
      }
    }
    if (probed_ || peer_ == -1) return;
    if (!timing_) {
      timing_ = true;
      since_ = now;
    }
    if (now - since_ < kProbeAfter) return;
    probed_ = true;
    if (peer_ == kEveryLocal) {
      for (size_t li = 0; li < engine_.locals_.size(); ++li) {
        if (static_cast<int>(li) != engine_.local_index_) CompareCall(static_cast<int>(li));
      }
      return;
    }
    const int li = engine_.LocalIndex(peer_);
    if (li >= 0) {
      CompareCall(li);
    } else {
      MsgHeader probe = call_;
      probe.magic = kProbeMagic;
      engine_.tcp_.TrySend(peer_, &probe, sizeof probe);
    }
  }

 private:
  static constexpr std::chrono::milliseconds kProbeAfter{200};
  static constexpr int kEveryLocal = -2;

  std::string CallName() const {
    return std::string(CollectiveName(static_cast<Collective>(call_.collective))) + " (call " + std::to_string(call_.seq) + ")";
  }

  // Whom this wait needs: one rank, or the ranks of the node whose published call is behind.
  std::string Awaited() const {
    if (peer_ >= 0) return "rank " + std::to_string(peer_);
    std::string behind;
    for (size_t li = 0; li < engine_.locals_.size(); ++li) {
      if (static_cast<int>(li) == engine_.local_index_) continue;
      MsgHeader theirs{};
      if (!engine_.ReadPublishedCall(static_cast<int>(li), &theirs) || static_cast<int32_t>(theirs.seq - call_.seq) < 0) {
        behind += (behind.empty() ? "" : ", ") + std::to_string(engine_.locals_[li].rank);
      }
    }
    return behind.empty() ? "the ranks of its node" : "rank(s) " + behind + " of its node, still in earlier calls";
  }

  void CheckDepartures() {
    for (size_t li = 0; li < engine_.locals_.size(); ++li) {
      if (static_cast<int>(li) == engine_.local_index_) continue;
      const RankControl& peer = *engine_.locals_[li].control;
      if (peer.departed.load(std::memory_order_acquire) == 0) continue;
      MsgHeader theirs{};
      const bool called = engine_.ReadPublishedCall(static_cast<int>(li), &theirs);
      if (called && static_cast<int32_t>(theirs.seq - call_.seq) >= 0) continue;
      const int rank = engine_.locals_[li].rank;
      throw CollError("EPEERLOST", "rank " + std::to_string(rank) + " left the communicator (close() or exit) " +
                                       (called ? "after call " + std::to_string(theirs.seq) : "before its first collective") +
                                       ", so it will not take part in this " + CallName());
    }
  }

  // EMISMATCH when the rank with local index `li` has published a different call than this one.
  void CompareCall(int li) {
    MsgHeader theirs{};
    if (!engine_.ReadPublishedCall(li, &theirs)) return;
    const std::string mismatch = DescribeCallMismatch(call_, theirs, engine_.locals_[static_cast<size_t>(li)].rank);
    if (!mismatch.empty()) throw CollError("EMISMATCH", mismatch);
  }

  Engine& engine_;
  MsgHeader call_;
  // Off for the waits of setup (ConnectTcp), which have their own deadline and no call.
  bool watchdog_;
  int peer_ = -1;
  std::chrono::steady_clock::time_point since_{};
  bool timing_ = false;
  bool probed_ = false;
  std::chrono::steady_clock::time_point call_since_{};
  bool call_timing_ = false;
};

Engine::Engine(EngineOptions options) : options_(std::move(options)) {
  auto& locals = options_.local_ranks;
  std::sort(locals.begin(), locals.end());
  for (size_t i = 0; i < locals.size(); ++i) local_index_of_[locals[i]] = static_cast<int>(i);
  auto it = local_index_of_.find(options_.rank);
  if (it == local_index_of_.end()) throw CollError("EINVAL", "this rank is not among the local ranks");
  local_index_ = it->second;
  if (options_.oversubscribed) {
    // Another process needs this core to make the condition true: give it up quickly.
    policy_.spin_iterations = 16;
    policy_.yield_for = std::chrono::microseconds(1000);
  } else {
    tcp_.SetSpinReads(2000);
  }
  co_runner_.assign(locals.size(), false);
  for (int r : options_.co_runners) {
    const int li = LocalIndex(r);
    if (li < 0 || li == local_index_) throw CollError("EINVAL", "co-runner " + std::to_string(r) + " is not another rank of this node");
    co_runner_[static_cast<size_t>(li)] = true;
  }
  yield_policy_ = policy_;
  yield_policy_.spin_iterations = 0;
}

Engine::~Engine() { Close(); }

int Engine::ListenTcp(const std::string& address) { return tcp_.Listen(address); }

void Engine::CreateSegment(const std::string& name) {
  const size_t local_size = options_.local_ranks.size();
  const size_t bytes = SegmentLayout(local_size, options_.channel_bytes, options_.bcast).total_bytes();
  segment_ = ShmSegment::Create(name, bytes);
  created_name_ = name;
  auto* h = new (segment_.base()) SegmentHeader();
  h->magic = kSegmentMagic;
  h->version = kSegmentVersion;
  h->local_size = static_cast<uint32_t>(local_size);
  h->total_bytes = bytes;
  h->channel_capacity = options_.channel_bytes;
  h->asymmetric_fences = options_.asymmetric_fences && RegisterForMembarrier() ? 1 : 0;
  InitViews();
}

void Engine::OpenSegment(const std::string& name) {
  segment_ = ShmSegment::Open(name);
  const auto* h = reinterpret_cast<const SegmentHeader*>(segment_.base());
  if (h->magic != kSegmentMagic || h->version != kSegmentVersion || h->local_size != options_.local_ranks.size() ||
      h->channel_capacity != options_.channel_bytes ||
      h->total_bytes != SegmentLayout(options_.local_ranks.size(), options_.channel_bytes, options_.bcast).total_bytes()) {
    throw CollError("EINVAL", "shared segment " + name + " does not match this job's layout");
  }
  // The creator chose asymmetric fences for the whole node: every waker skips its fence from
  // now on, so every process must be reachable by the sleepers' membarrier.
  if (h->asymmetric_fences != 0 && !RegisterForMembarrier()) {
    throw CollError("EINVAL", "membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) failed in this process but worked in the node leader's");
  }
  InitViews();
}

void Engine::InitViews() {
  const size_t local_size = options_.local_ranks.size();
  const SegmentLayout layout(local_size, options_.channel_bytes, options_.bcast);
  uint8_t* base = segment_.base();
  header_ = layout.Header(base);
  policy_.asymmetric = yield_policy_.asymmetric = header_->asymmetric_fences != 0;
  RankControl* controls = layout.Controls(base);
  locals_.clear();
  for (size_t i = 0; i < local_size; ++i) locals_.push_back({options_.local_ranks[i], &controls[i]});
  co_runner_bells_.clear();
  for (size_t i = 0; i < local_size; ++i) {
    if (co_runner_[i]) co_runner_bells_.push_back(&controls[i].doorbell);
  }
  // Waits on anyone else spin while every co-runner is idle; waits on a co-runner must let it
  // run, so yield_policy_ has none.
  policy_.co_runners = co_runner_bells_.data();
  policy_.co_runner_count = co_runner_bells_.size();
  node_policy_ = policy_;
  if (!co_runner_bells_.empty()) node_policy_.spin_iterations = 0;
  channels_.assign(local_size * local_size, ShmChannel());
  for (size_t from = 0; from < local_size; ++from) {
    for (size_t to = 0; to < local_size; ++to) {
      if (from == to) continue;
      uint8_t* ring = layout.ChannelRing(base, from, to);
      channels_[from * local_size + to] = ShmChannel(layout.ChannelControlOf(base, from, to), ring, options_.channel_bytes,
                                                     &controls[from].doorbell, &controls[to].doorbell);
      // First touch: the writer of a channel places its pages on its own NUMA node.
      if (from == static_cast<size_t>(local_index_)) std::memset(ring, 0, options_.channel_bytes);
    }
  }
  std::vector<BcastRegion> regions;
  std::vector<Doorbell*> doorbells;
  for (size_t i = 0; i < local_size; ++i) {
    regions.push_back(layout.RegionViews(base, i));
    doorbells.push_back(&controls[i].doorbell);
  }
  {
    // First touch of this rank's own region (its queue is read by everyone but written only
    // here); random access advice keeps the kernel from faulting in neighbours' pages for us.
    uint8_t* own = layout.Region(base, static_cast<size_t>(local_index_));
    own_region_ = own;
    own_region_bytes_ = layout.region_bytes();
    madvise(own, own_region_bytes_, MADV_RANDOM);
    std::memset(own, 0, own_region_bytes_);
    regions[static_cast<size_t>(local_index_)].slot_waiter->store(-1, std::memory_order_relaxed);
  }
  shm_reduce_ = std::make_unique<ShmReduce>(regions, doorbells, local_index_, options_.bcast.queue_bytes);
  // The node-wide area is zero, as ftruncate left it.
  shm_allreduce_ = std::make_unique<ShmAllreduce>(layout.NodeArea(base), options_.local_ranks, doorbells, local_index_);
  shm_bcast_ = std::make_unique<ShmBcast>(options_.bcast, std::move(regions), std::move(doorbells), local_index_);

  RankControl& mine = controls[local_index_];
  mine.pid.store(getpid(), std::memory_order_relaxed);
  mine.departed.store(0, std::memory_order_relaxed);
  header_->mapped.fetch_add(1, std::memory_order_acq_rel);
}

bool Engine::AllMappedAndUnlink(int wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  const uint32_t local_size = static_cast<uint32_t>(options_.local_ranks.size());
  while (header_->mapped.load(std::memory_order_acquire) < local_size) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    usleep(200);
  }
  // Everyone holds a mapping now: the name is no longer needed, and without it nothing can be
  // left behind in /dev/shm whatever happens next.
  UnlinkCreated();
  return true;
}

void Engine::UnlinkCreated() {
  if (created_name_.empty()) return;
  ShmSegment::Unlink(created_name_);
  created_name_.clear();
}

std::vector<int> Engine::ConnectTcp(const std::string& token, const std::vector<TcpPeer>& peers, int wait_ms) {
  Guard guard(*this, MsgHeader{}, /*watchdog=*/false);
  return tcp_.Establish(options_.rank, token, peers, wait_ms, guard);
}

void Engine::Start() {
  if (header_ == nullptr || watcher_.joinable()) return;
  watcher_ = std::thread([this] { Watch(); });
}

void Engine::Watch() {
  std::unique_lock<std::mutex> lock(watcher_mutex_);
  while (!watcher_stop_) {
    watcher_cv_.wait_for(lock, std::chrono::milliseconds(50));
    if (watcher_stop_) break;
    if (header_->abort_code.load(std::memory_order_acquire) != 0) {
      // Another process failed: pass its reason on and close our sockets, so the ranks of other
      // nodes that wait on us learn it now, not at their next call.
      CloseLinksAfterAbort(NodeAbortCode());
      break;
    }
    for (const LocalPeer& peer : locals_) {
      if (peer.rank == options_.rank) continue;
      const int pid = peer.control->pid.load(std::memory_order_relaxed);
      if (pid <= 0 || peer.control->departed.load(std::memory_order_acquire) != 0) continue;
      if (kill(pid, 0) != 0 && errno == ESRCH) {
        Abort("EPEERLOST", "rank " + std::to_string(peer.rank) + " (pid " + std::to_string(pid) +
                               ") on this node died");
        break;
      }
    }
  }
}

void Engine::Abort(const std::string& code, const std::string& message) {
  uint32_t code_index = AbortCodeIndex(code);
  if (header_ != nullptr) {
    uint32_t expected = 0;
    // The first failure wins; later ones are consequences of it.
    if (header_->abort_code.compare_exchange_strong(expected, 0xffffffffU, std::memory_order_acq_rel)) {
      std::string text = message.substr(0, sizeof(header_->abort_message) - 1);
      std::memcpy(header_->abort_message, text.c_str(), text.size() + 1);
      header_->abort_rank = options_.rank;
      header_->abort_code.store(AbortCodeIndex(code), std::memory_order_release);
    }
    for (const LocalPeer& peer : locals_) {
      peer.control->doorbell.bell.fetch_add(1, std::memory_order_seq_cst);
      FutexWakeAll(peer.control->doorbell.bell);
    }
    code_index = NodeAbortCode();
  }
  CloseLinksAfterAbort(code_index);
}

uint32_t Engine::NodeAbortCode() const {
  uint32_t code = header_->abort_code.load(std::memory_order_acquire);
  while (code == 0xffffffffU) code = header_->abort_code.load(std::memory_order_acquire);  // message being written
  return code;
}

void Engine::CloseLinksAfterAbort(uint32_t code_index) {
  // Once: by whichever thread sees the abort first (the caller's, or the watcher).
  if (links_shut_.exchange(true)) return;
  // Ranks of other nodes that read from us next learn the reason, then see the link close.
  MsgHeader notice{};
  notice.magic = kAbortMagic;
  notice.sender = options_.rank;
  notice.op = static_cast<uint8_t>(code_index);
  tcp_.SendLastWords(&notice, sizeof notice, kLastWordsMs);
  tcp_.ShutdownAll();
}

void Engine::ThrowAborted() const {
  const uint32_t code = NodeAbortCode();
  const char* name = code < sizeof(kAbortCodes) / sizeof(kAbortCodes[0]) ? kAbortCodes[code] : "EPEERLOST";
  throw CollError(name, "the communicator was aborted: rank " + std::to_string(header_->abort_rank) + ": " +
                            std::string(header_->abort_message));
}

void Engine::SetPlan(int id, std::vector<Step> steps) {
  if (id < 0) throw CollError("EINVAL", "schedule ids are not negative");
  for (Step& s : steps) {
    if (s.of == 0) {
      // Rank blocks: one rank's block each, in the ranges that move data (a ShmBcast of one
      // block: the shared-memory allgather, where each member publishes its own blocks).
      const bool exchange = s.kind == StepKind::kSendRecv || s.kind == StepKind::kSendRecvReduce;
      const bool moves = s.kind == StepKind::kSend || s.kind == StepKind::kRecv || s.kind == StepKind::kShmBcast || exchange;
      if (!moves || s.count != 1 || s.first >= static_cast<uint32_t>(options_.size) ||
          (exchange && (s.count2 != 1 || s.first2 >= static_cast<uint32_t>(options_.size)))) {
        throw CollError("EINVAL", "schedule " + std::to_string(id) + " has a rank-block range that is not one rank's block of a send or receive");
      }
    } else if (static_cast<uint64_t>(s.first) + s.count > s.of || static_cast<uint64_t>(s.first2) + s.count2 > s.of) {
      throw CollError("EINVAL", "schedule " + std::to_string(id) + " has a block range outside its segment");
    }
    s.local_peer = LocalIndex(s.peer);
    s.local_peer2 = s.peer2 >= 0 ? LocalIndex(s.peer2) : -1;
    const bool node_wide = s.kind == StepKind::kShmAllreduce || s.kind == StepKind::kShmAllgather;
    if (node_wide && (options_.local_ranks.size() != static_cast<size_t>(options_.size) || options_.size < 2)) {
      throw CollError("EINVAL", "schedule " + std::to_string(id) + " has a node-wide shared-memory step, but the job is not one node of several ranks");
    }
  }
  if (plans_.size() <= static_cast<size_t>(id)) plans_.resize(static_cast<size_t>(id) + 1);
  plans_[static_cast<size_t>(id)] = std::make_unique<std::vector<Step>>(std::move(steps));
}

std::vector<int32_t> Engine::OwnRegionNodes() const {
  if (own_region_ == nullptr || header_ == nullptr) return {};
  return PageNodes(own_region_, own_region_bytes_);
}

void Engine::SetShmGroup(int id, const std::vector<int>& ranks) {
  if (!shm_bcast_) throw CollError("EINVAL", "no shared segment: this rank is alone on its node");
  std::vector<int> locals;
  for (int r : ranks) {
    const int li = LocalIndex(r);
    if (li < 0) throw CollError("EINVAL", "rank " + std::to_string(r) + " of a shared-memory group is on another node");
    locals.push_back(li);
  }
  std::sort(locals.begin(), locals.end());
  shm_bcast_->SetGroup(id, locals);
  shm_reduce_->SetGroup(id, locals);
  if (group_has_co_runner_.size() <= static_cast<size_t>(id)) group_has_co_runner_.resize(static_cast<size_t>(id) + 1, false);
  group_has_co_runner_[static_cast<size_t>(id)] = std::any_of(locals.begin(), locals.end(), [&](int li) { return co_runner_[static_cast<size_t>(li)]; });
}

const WaitPolicy& Engine::PolicyFor(int local_peer) const {
  return local_peer >= 0 && co_runner_[static_cast<size_t>(local_peer)] ? yield_policy_ : policy_;
}

const WaitPolicy& Engine::GroupPolicy(int group) const {
  return static_cast<size_t>(group) < group_has_co_runner_.size() && group_has_co_runner_[static_cast<size_t>(group)] ? yield_policy_ : policy_;
}

void Engine::ResetShm() {
  if (!shm_bcast_) return;
  shm_bcast_->Reset();
  shm_reduce_->Reset();
}

const std::vector<Step>* Engine::Plan(int id) const {
  if (id < 0 || static_cast<size_t>(id) >= plans_.size()) return nullptr;
  return plans_[static_cast<size_t>(id)].get();
}

int Engine::LocalIndex(int rank) const {
  auto it = local_index_of_.find(rank);
  return it == local_index_of_.end() ? -1 : it->second;
}

uint8_t* Engine::Scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void Engine::Run(const CallArgs& args) {
  if (closed_) throw CollError("ECLOSED", "the communicator is closed");
  if (header_ != nullptr && header_->abort_code.load(std::memory_order_acquire) != 0) ThrowAborted();
  ++seq_;
  const size_t elem = DtypeSize(args.dtype);
  const size_t bytes = static_cast<size_t>(args.count) * elem;
  const bool reduces = args.collective == Collective::kReduce || args.collective == Collective::kAllreduce;
  MsgHeader h{};
  h.magic = kMsgMagic;
  h.seq = seq_;
  h.collective = static_cast<uint8_t>(args.collective);
  h.dtype = static_cast<uint8_t>(args.dtype);
  const bool custom = static_cast<bool>(args.custom);
  h.op = !reduces ? 0 : custom ? kUserOpCode : static_cast<uint8_t>(args.op);
  h.phase = 0;
  h.root = args.root;
  h.count = args.count;
  h.plan_hash = args.plan_hash;
  h.sender = options_.rank;
  Reducer fn;
  if (reduces && custom) {
    fn.custom = &args.custom;
  } else if (reduces) {
    const ReduceKernels kernels = FindReduce(args.dtype, args.op);
    fn.kernel = kernels.in_place;
    fn.kernel3 = kernels.apart;
    const bool floating = args.dtype == Dtype::kFloat32 || args.dtype == Dtype::kFloat64;
    // Floating-point min and max pick an operand, and which one differs for NaN and ±0.
    fn.symmetric = !floating || args.op == ReduceOp::kSum || args.op == ReduceOp::kProd;
  }
  if (reduces && !fn) throw CollError("EINVAL", "unsupported reduction");
  if (args.collective == Collective::kAllreduce || args.collective == Collective::kBarrier) h.root = 0;
  BlockTable& table = block_table_;
  if (args.collective == Collective::kAllgather) {
    h.root = 0;
    FillAllgatherBlocks(args, table);
    // Ranks that disagree on the block lengths disagree on the call: fold them into what the
    // header compares (the total, and a hash of the lengths for allgatherv).
    h.count = table.displs.back() + table.counts.back();
    if (!args.block_counts.empty()) h.plan_hash ^= BlockCountsHash(args.block_counts);
  }
  // Every message of this call also carries the identity of this rank's previous call: ranks
  // that disagreed on it without noticing (a bcast whose two "roots" only sent) disagree here.
  const uint32_t this_call = CallHash(h);
  h.plan_hash ^= previous_call_;
  previous_call_ = this_call;
  const uint64_t segment = args.segment == 0 || args.segment > args.count ? args.count : args.segment;
  PublishCall(h);
  Guard guard(*this, h);
  try {
    auto* recv = static_cast<uint8_t*>(args.recv);
    const auto* send = static_cast<const uint8_t*>(args.send);
    switch (args.collective) {
      case Collective::kBcast: {
        PhaseData data{recv, args.count, segment, elem};
        RunPhase(*args.bcast, h, data, Reducer{}, guard);
        break;
      }
      case Collective::kReduce: {
        // The accumulator: the result buffer at the root, scratch elsewhere — needed only by a
        // rank that receives; one that only sends reads its input.
        const bool root = options_.rank == args.root;
        uint8_t* acc = root ? recv : ReceivesIn(*args.reduce) ? Scratch(bytes) : nullptr;
        // A rank that only sends never writes B: its input serves as B.
        PhaseData data{acc != nullptr ? acc : const_cast<uint8_t*>(send), args.count, segment, elem};
        if (acc != nullptr && acc != send && bytes > 0) StartAccumulator(data, send, fn);
        RunPhase(*args.reduce, h, data, fn, guard);
        // The root's result must be whole; scratch elsewhere is dropped.
        if (root && data.pending != nullptr) data.pending->Materialize(0, args.count);
        if (root) NormalizeAlone(args, fn, bytes);
        break;
      }
      case Collective::kAllreduce:
      case Collective::kBarrier: {
        // The result buffer is every rank's accumulator; the bcast phase then spreads it. A
        // lazy accumulator stays lazy through it: what the bcast phase overwrites (at two
        // ranks, the half the other rank reduced) is never copied from the input first.
        PhaseData data{recv, args.count, segment, elem};
        if (recv != send && bytes > 0) StartAccumulator(data, send, fn);
        RunPhase(*args.reduce, h, data, fn, guard);
        h.phase = 1;
        guard.SetPhase(1);
        RunPhase(*args.bcast, h, data, Reducer{}, guard);
        if (data.pending != nullptr) data.pending->Materialize(0, args.count);
        NormalizeAlone(args, fn, bytes);
        break;
      }
      case Collective::kAllgather: {
        // This rank's block to its place, then the gather phase in column segments (every step
        // moves one rank's block, at most `segment` elements of it), then the whole result down
        // in the bcast phase's segments.
        const uint64_t own = table.counts[static_cast<size_t>(options_.rank)];
        uint8_t* place = recv + table.displs[static_cast<size_t>(options_.rank)] * elem;
        // send == recv is IN_PLACE: the block is at its place already.
        if (send != recv && send != place && own > 0) std::memcpy(place, send, static_cast<size_t>(own * elem));
        const uint64_t longest = *std::max_element(table.counts.begin(), table.counts.end());
        const uint64_t column = args.segment == 0 || args.segment > longest ? longest : args.segment;
        PhaseData gather{recv, longest, column, elem};
        gather.blocks = &table;
        RunPhase(*args.reduce, h, gather, Reducer{}, guard);
        h.phase = 1;
        guard.SetPhase(1);
        const uint64_t total = h.count;
        PhaseData down{recv, total, args.bcast_segment == 0 || args.bcast_segment > total ? total : args.bcast_segment, elem};
        RunPhase(*args.bcast, h, down, Reducer{}, guard);
        break;
      }
    }
  } catch (const CollError& e) {
    // Whatever went wrong mid-collective leaves peers waiting: tell them.
    Abort(e.code(), e.what());
    throw;
  }
}

bool Engine::ReceivesIn(const std::vector<Step>& steps) {
  for (const Step& s : steps) {
    if (s.kind != StepKind::kSend) return true;
  }
  return false;
}

void Engine::StartAccumulator(PhaseData& data, const uint8_t* input, const Reducer& reducer) {
  const size_t bytes = static_cast<size_t>(data.count) * data.elem;
  // Small messages copy at once: the copy costs less than keeping track. User operators have
  // no one-pass form.
  if (bytes < kLazyInputBytes || reducer.kernel3 == nullptr) {
    std::memcpy(data.buffer, input, bytes);
    return;
  }
  pending_.Start(input, data.buffer, data.elem);
  data.pending = &pending_;
}

void Engine::RunPhase(const std::vector<Step>& steps, MsgHeader& header, PhaseData& data, const Reducer& reducer,
                      Guard& guard) {
  const uint64_t segments = data.count == 0 ? 1 : (data.count + data.segment - 1) / data.segment;
  for (uint64_t k = 0; k < segments; ++k) {
    const uint64_t start = k * data.segment;
    const uint64_t n = data.count == 0 ? 0 : std::min(data.segment, data.count - start);
    for (const Step& s : steps) RunStep(s, header, data, start, n, k, reducer, guard);
  }
}

namespace {

// Elements [begin, end) of blocks [first, first + count) of `of` blocks over n elements.
struct ElementRange {
  uint64_t begin, end;
};
ElementRange Blocks(uint64_t n, uint32_t first, uint32_t count, uint32_t of) {
  return {n * first / of, n * (static_cast<uint64_t>(first) + count) / of};
}

}  // namespace

void Engine::RunStep(const Step& s, const MsgHeader& header, PhaseData& data, uint64_t seg_start, uint64_t seg_n,
                     uint64_t seg_index, const Reducer& reducer, Guard& guard) {
  const size_t elem = data.elem;
  // Elements of B a range names in this segment: blocks of the segment, or the segment's column
  // of one rank's block.
  auto elements = [&](uint32_t first, uint32_t count) -> ElementRange {
    if (s.of != 0) {
      const ElementRange r = Blocks(seg_n, first, count, s.of);
      return {seg_start + r.begin, seg_start + r.end};
    }
    if (data.blocks == nullptr) throw CollError("EINVAL", "a rank-block step outside an allgather");
    const uint64_t len = data.blocks->counts[first];
    const uint64_t at = data.blocks->displs[first];
    return {at + std::min(seg_start, len), at + std::min(seg_start + seg_n, len)};
  };
  const ElementRange range = elements(s.first, s.count);
  const uint64_t begin = range.begin;
  const uint64_t end = range.end;
  const size_t bytes = static_cast<size_t>((end - begin) * elem);
  PendingInput* pending = data.pending;
  // Where a step reads elements [b, e) of B from: the input while nothing was combined into
  // them, else B (after copying whatever of them is still only in the input).
  auto source = [&](uint64_t b, uint64_t e) -> const uint8_t* {
    if (pending != nullptr) {
      if (pending->Untouched(b, e)) return pending->Input(b);
      pending->Materialize(b, e);
    }
    return data.buffer + b * elem;
  };
  // Where elements [b, e) of B arrive: into B, copied or combined with the reducer — with the
  // input standing in for B's own operand while they are untouched (a lazy accumulator).
  auto arriving = [&](uint64_t b, uint64_t e, bool reduce) {
    const void* own = nullptr;
    if (pending != nullptr) {
      if (reduce && pending->Untouched(b, e)) own = pending->Input(b);
      else if (reduce) pending->Materialize(b, e);
      pending->MarkWritten(b, e);
    }
    return Delivery(data.buffer + b * elem, reduce ? reducer : Reducer{}, s.order == 1, elem, own, combine_scratch_);
  };
  switch (s.kind) {
    case StepKind::kSend:
      SendTo(s.peer, s.local_peer, header, source(begin, end), bytes, guard);
      return;
    case StepKind::kRecv:
    case StepKind::kRecvReduce: {
      Delivery into = arriving(begin, end, s.kind == StepKind::kRecvReduce);
      RecvFrom(s.peer, s.local_peer, header, bytes, into, guard);
      return;
    }
    case StepKind::kShmBcast: {
      if (pending != nullptr) pending->Materialize(begin, end);
      guard.WaitingOn(s.peer);
      // Tags: the call, the phase and the level, then a fragment number that runs on across the
      // call's segments (every member runs the same segments, so it agrees on the numbers).
      // A rank-block step (the shared-memory allgather) numbers its fragments per block as well:
      // one source may publish several blocks in one segment.
      const uint64_t per_segment = shm_bcast_->MaxFragments(static_cast<size_t>(data.segment * elem));
      const uint64_t publication = s.of == 0 ? seg_index * static_cast<uint64_t>(options_.size) + s.first : seg_index;
      const uint64_t tag_base = (static_cast<uint64_t>(header.seq) << 32) | (static_cast<uint64_t>(header.phase) << 31) |
                                (static_cast<uint64_t>(s.level & 0x7f) << 24) | ((publication * per_segment) & 0xffffff);
      shm_bcast_->Run(s.group, s.local_peer, data.buffer + begin * elem, bytes, tag_base, CallHash(header), GroupPolicy(s.group), guard);
      return;
    }
    case StepKind::kShmReduce: {
      if (pending != nullptr) pending->Materialize(begin, end);
      guard.WaitingOn(s.peer);
      shm_reduce_->Run(s.group, s.local_peer, data.buffer + begin * elem, end - begin, elem, reducer, GroupPolicy(s.group), guard);
      return;
    }
    case StepKind::kShmAllreduce: {
      if (pending != nullptr) pending->Materialize(begin, end);
      guard.WaitingOnNode();
      shm_allreduce_->Run(data.buffer + begin * elem, end - begin, elem, header, s.every_rank_combines, reducer,
                          node_policy_, guard);
      return;
    }
    case StepKind::kShmAllgather: {
      // The whole call in one step: every block at once, so one column segment of the longest.
      if (data.blocks == nullptr || seg_index != 0 || seg_n != data.count) {
        throw CollError("EINVAL", "a node-wide shared-memory allgather step outside a whole allgather's gather phase");
      }
      guard.WaitingOnNode();
      shm_allreduce_->Allgather(data.buffer, data.blocks->counts, data.blocks->displs, elem, header, s.every_rank_combines,
                                node_policy_, guard);
      return;
    }
    case StepKind::kSendRecv:
    case StepKind::kSendRecvReduce: {
      const ElementRange into_range = elements(s.first2, s.count2);
      const uint64_t b2 = into_range.begin;
      const uint64_t e2 = into_range.end;
      const size_t in_bytes = static_cast<size_t>((e2 - b2) * elem);
      const uint8_t* out = source(begin, end);
      if (s.local_peer >= 0 && s.local_peer2 >= 0) {
        // Both inside the node: sends and receives interleave, so no transport has to hold the
        // whole segment.
        Delivery into = arriving(b2, e2, s.kind == StepKind::kSendRecvReduce);
        ExchangeLocal(s, header, out, bytes, into, in_bytes, guard);
        return;
      }
      // Both sides send before they receive: the transports must hold the whole segment.
      const uint64_t limit = s.local_peer >= 0 ? options_.channel_bytes - 2 * sizeof(MsgHeader) : kEagerBytes;
      if (bytes > limit) {
        throw CollError("EINVAL", "an exchange step of " + std::to_string(bytes) + " bytes between nodes; schedules with such exchanges must run with segments of at most " + std::to_string(limit) + " bytes here");
      }
      SendTo(s.peer, s.local_peer, header, out, bytes, guard);
      Delivery into = arriving(b2, e2, s.kind == StepKind::kSendRecvReduce);
      RecvFrom(s.peer2, s.local_peer2, header, in_bytes, into, guard);
      return;
    }
  }
  throw CollError("EINVAL", "unknown schedule step kind " + std::to_string(static_cast<int>(s.kind)));
}

void Engine::FillAllgatherBlocks(const CallArgs& args, BlockTable& t) const {
  const auto size = static_cast<size_t>(options_.size);
  if (args.block_counts.empty()) t.counts.assign(size, args.count);
  else if (args.block_counts.size() == size) t.counts = args.block_counts;
  else throw CollError("EINVAL", "allgatherv: " + std::to_string(args.block_counts.size()) + " block lengths for " + std::to_string(size) + " ranks");
  t.displs.resize(size);
  uint64_t at = 0;
  for (size_t r = 0; r < size; ++r) {
    t.displs[r] = at;
    at += t.counts[r];
  }
}

uint32_t Engine::BlockCountsHash(const std::vector<uint64_t>& counts) {
  // FNV-1a over the lengths: equal vectors give equal hashes on every rank.
  uint64_t x = 0xcbf29ce484222325ULL;
  for (uint64_t c : counts) {
    x ^= c;
    x *= 0x100000001b3ULL;
  }
  return static_cast<uint32_t>(x ^ (x >> 32));
}

uint32_t Engine::CallHash(const MsgHeader& h) {
  // A 64-bit mix (splitmix64's finaliser) of the fields every rank of a call must agree on.
  auto mix = [](uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  uint64_t x = mix((static_cast<uint64_t>(h.seq) << 32) | h.plan_hash);
  x = mix(x ^ ((static_cast<uint64_t>(h.collective) << 56) | (static_cast<uint64_t>(h.dtype) << 48) |
               (static_cast<uint64_t>(h.op) << 40) | (static_cast<uint64_t>(h.phase) << 32) |
               static_cast<uint32_t>(h.root)));
  x = mix(x ^ h.count);
  return static_cast<uint32_t>(x ^ (x >> 32));
}

void Engine::PublishCall(const MsgHeader& call) {
  if (header_ == nullptr) return;
  RankControl& mine = *locals_[static_cast<size_t>(local_index_)].control;
  uint64_t words[4];
  std::memcpy(words, &call, sizeof words);
  const uint32_t v = mine.call_version.load(std::memory_order_relaxed);
  mine.call_version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int i = 0; i < 4; ++i) mine.call[i].store(words[i], std::memory_order_relaxed);
  mine.call_version.store(v + 2, std::memory_order_release);
}

bool Engine::ReadPublishedCall(int local_index, MsgHeader* out) const {
  const RankControl& peer = *locals_[static_cast<size_t>(local_index)].control;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint32_t before = peer.call_version.load(std::memory_order_acquire);
    if (before == 0) return false;  // the peer has not called any collective yet
    if ((before & 1) != 0) continue;
    uint64_t words[4];
    for (int i = 0; i < 4; ++i) words[i] = peer.call[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (peer.call_version.load(std::memory_order_relaxed) == before) {
      std::memcpy(out, words, sizeof words);
      return true;
    }
  }
  return false;
}

void Engine::NormalizeAlone(const CallArgs& args, const Reducer& fn, size_t bytes) {
  // Alone in the job, no operator was applied: logical operators still owe a 0/1 result, which
  // combining the value with itself gives.
  if (options_.size != 1 || bytes == 0 || args.custom) return;
  if (args.op != ReduceOp::kLand && args.op != ReduceOp::kLor) return;
  uint8_t* copy = Scratch(bytes);
  std::memcpy(copy, args.recv, bytes);
  fn(args.recv, copy, args.count);
}

void Engine::SendTo(int peer, int local_peer, const MsgHeader& header, const void* data, size_t bytes, Guard& guard) {
  guard.WaitingOn(peer);
  const ByteSlice slices[2] = {{&header, sizeof header}, {data, bytes}};
  if (local_peer >= 0) {
    const size_t local_size = locals_.size();
    channels_[static_cast<size_t>(local_index_) * local_size + static_cast<size_t>(local_peer)].Send(slices, 2, PolicyFor(local_peer), guard);
  } else {
    tcp_.Send(peer, slices, 2, guard);
  }
}

void Engine::CheckHeader(const MsgHeader& expected, const MsgHeader& got, int peer) {
  MsgHeader want = expected;
  want.sender = peer;
  const std::string mismatch = DescribeMismatch(want, got, peer);
  if (!mismatch.empty()) throw CollError("EMISMATCH", mismatch);
}

void Engine::RecvFrom(int peer, int local_peer, const MsgHeader& expected, size_t bytes, Delivery& into, Guard& guard) {
  guard.WaitingOn(peer);
  MsgHeader got{};
  if (local_peer >= 0) {
    ShmChannel& channel = channels_[static_cast<size_t>(local_peer) * locals_.size() + static_cast<size_t>(local_index_)];
    const WaitPolicy& policy = PolicyFor(local_peer);
    channel.ReadExact(&got, sizeof got, policy, guard);
    CheckHeader(expected, got, peer);
    channel.Consume(bytes, into, policy, guard);
    return;
  }
  // Probes a waiting peer sent us come before its next message: a mismatched one is an error,
  // the others (the peer was merely slower) are skipped.
  for (;;) {
    tcp_.ReadExact(peer, &got, sizeof got, guard);
    if (got.magic == kAbortMagic) {
      const char* code = got.op < sizeof(kAbortCodes) / sizeof(kAbortCodes[0]) && got.op > 0 ? kAbortCodes[got.op] : "EPEERLOST";
      throw CollError(code, "rank " + std::to_string(got.sender) + " stopped the collective (" + code + " there)");
    }
    if (got.magic != kProbeMagic) break;
    MsgHeader mine = expected;
    const std::string mismatch = DescribeCallMismatch(mine, got, peer);
    if (!mismatch.empty()) throw CollError("EMISMATCH", mismatch);
  }
  CheckHeader(expected, got, peer);
  try {
    if (!into.combines()) {
      tcp_.ReadExact(peer, into.next(), bytes, guard);
      return;
    }
    constexpr size_t kStaging = 256 * 1024;  // a multiple of every element size
    if (staging_.size() < kStaging) staging_.resize(kStaging);
    for (size_t done = 0; done < bytes;) {
      const size_t piece = std::min(kStaging, bytes - done);
      tcp_.ReadExact(peer, staging_.data(), piece, guard);
      into(staging_.data(), piece);
      done += piece;
    }
  } catch (const PeerClosed& e) {
    // The peer stopped in the middle of this body: its abort notice, if it sent one, is what
    // came last — report its reason rather than only the closed link.
    MsgHeader notice{};
    if (e.tail().size() == sizeof notice) {
      std::memcpy(&notice, e.tail().data(), sizeof notice);
      if (notice.magic == kAbortMagic && notice.sender == peer && notice.op > 0 && notice.op < sizeof(kAbortCodes) / sizeof(kAbortCodes[0])) {
        const char* code = kAbortCodes[notice.op];
        throw CollError(code, "rank " + std::to_string(peer) + " stopped the collective (" + code + " there)");
      }
    }
    throw;
  }
}

void Delivery::operator()(const uint8_t* in, size_t len) {
  if (!reducer_) {
    std::memcpy(out_, in, len);
  } else if (own_ != nullptr) {
    // Left operand first, as below: the same bits as copying `own` into out and combining.
    if (!incoming_first_ || reducer_.symmetric) reducer_.kernel3(out_, own_, in, len / elem_);
    else reducer_.kernel3(out_, in, own_, len / elem_);
    own_ += len;
  } else if (!incoming_first_ || reducer_.symmetric) {
    reducer_(out_, in, len / elem_);
  } else {
    // out = in op out: the operator writes its left operand, so work on a copy of `in`.
    if (scratch_.size() < len) scratch_.resize(len);
    std::memcpy(scratch_.data(), in, len);
    reducer_(scratch_.data(), out_, len / elem_);
    std::memcpy(out_, scratch_.data(), len);
  }
  out_ += len;
}

void Engine::ExchangeLocal(const Step& s, const MsgHeader& header, const uint8_t* data, size_t bytes, Delivery& into,
                           size_t in_bytes, Guard& guard) {
  const size_t local_size = locals_.size();
  ShmChannel& tx = channels_[static_cast<size_t>(local_index_) * local_size + static_cast<size_t>(s.local_peer)];
  ShmChannel& rx = channels_[static_cast<size_t>(s.local_peer2) * local_size + static_cast<size_t>(local_index_)];
  if (tx.AtOnce(sizeof header + bytes)) {
    // Small: one write the ring holds, then the receive (the fastest path for both).
    SendTo(s.peer, s.local_peer, header, data, bytes, guard);
    RecvFrom(s.peer2, s.local_peer2, header, in_bytes, into, guard);
    return;
  }
  // Large: a piece out, then whatever has come in, and so on. The peers run in step, each
  // piece is read soon after it was written, and no ring has to hold a whole message. What is
  // sent must not change while it is being sent: a step that receives into the range it sends
  // (recursive doubling) sends a copy.
  const uint8_t* into_at = into.next();
  if (bytes > 0 && in_bytes > 0 && data < into_at + in_bytes && into_at < data + bytes) {
    if (exchange_copy_.size() < bytes) exchange_copy_.resize(bytes);
    std::memcpy(exchange_copy_.data(), data, bytes);
    data = exchange_copy_.data();
  }
  const ByteSlice slices[2] = {{&header, sizeof header}, {data, bytes}};
  ShmChannel::Outgoing out{slices, 2};
  MsgHeader got{};
  uint8_t* got_at = reinterpret_cast<uint8_t*>(&got);
  size_t header_left = sizeof got;
  size_t body_left = in_bytes;
  auto read_header = [&](const uint8_t* p, size_t n) {
    std::memcpy(got_at, p, n);
    got_at += n;
  };
  Doorbell& mine = locals_[static_cast<size_t>(local_index_)].control->doorbell;
  // A quarter of the ring: the sender streams on while the receiver frees the half it waits for.
  const uint64_t piece = std::min<uint64_t>(kExchangePiece, tx.capacity() / 4);
  // Either peer may be the one that must run for this rank to go on.
  const WaitPolicy& policy = PolicyFor(co_runner_[static_cast<size_t>(s.local_peer)] ? s.local_peer : s.local_peer2);
  while (!out.done || header_left > 0 || body_left > 0) {
    bool moved = !out.done && tx.SendSome(out, piece, policy);
    if (header_left > 0) {
      const size_t n = rx.ConsumeArrived(header_left, read_header, policy);
      header_left -= n;
      moved = moved || n > 0;
      if (n > 0 && header_left == 0) CheckHeader(header, got, s.peer2);
    }
    if (header_left == 0 && body_left > 0) {
      const size_t n = rx.ConsumeArrived(std::min<size_t>(body_left, piece), into, policy);
      body_left -= n;
      moved = moved || n > 0;
    }
    if (moved) continue;
    const bool receiving = header_left > 0 || body_left > 0;
    if (!out.done) tx.AnnounceWaitForRoom(policy);
    guard.WaitingOn(receiving ? s.peer2 : s.peer);
    WaitUntil([&] { return (!out.done && tx.HalfFree()) || (receiving && rx.Arrived()); }, mine, policy, guard);
  }
}

void Engine::RequestClose() { closing_.store(true, std::memory_order_release); }

void Engine::Close() {
  if (closed_) return;
  closed_ = true;
  // A leader whose init failed before every local rank mapped the segment.
  UnlinkCreated();
  if (header_ != nullptr) locals_[static_cast<size_t>(local_index_)].control->departed.store(1, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(watcher_mutex_);
    watcher_stop_ = true;
  }
  watcher_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  tcp_.CloseAll();
  header_ = nullptr;
  own_region_ = nullptr;
  locals_.clear();
  channels_.clear();
  segment_ = ShmSegment();
}

}  // namespace topocoll
