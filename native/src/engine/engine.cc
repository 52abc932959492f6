// The engine's setup and registries: the local ranks and wait policies, the shared segment
// (created or opened, carved by segment_layout.h, first touch), the TCP links, schedules and
// shared-memory groups, and close. The executor is in engine_executor.cc, liveness in
// liveness.cc.
#include "engine/engine.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <set>

#include "base/errors.h"
#include "base/placement.h"
#include "shm/segment_layout.h"

namespace topocoll {

namespace {

EngineOptions WithLocalRanksSorted(EngineOptions options) {
  std::sort(options.local_ranks.begin(), options.local_ranks.end());
  return options;
}

}  // namespace

Engine::Engine(EngineOptions options)
    : options_(WithLocalRanksSorted(std::move(options))),
      node_(options_.rank, options_.local_ranks),
      liveness_(node_, options_.collective_timeout_ms),
      contention_(options_.waits == abi::WaitMode::kAuto ? options_.machine_ranks : -1),
      windows_(node_, liveness_, options_.size) {
  const auto& locals = options_.local_ranks;
  liveness_.UseLinks(&tcp_, nullptr);
  TcpLinks::ReadSpin read_spin;
  if (options_.oversubscribed) {
    // Another process needs this core to make the condition true: give it up quickly.
    policy_.spin_iterations = 16;
    policy_.yield_for = std::chrono::microseconds(1000);
  } else {
    read_spin.attempts = 2000;
  }
  switch (options_.waits) {
    case abi::WaitMode::kAuto:
      policy_.contention = &contention_;
      read_spin.contention = &contention_;
      read_spin.for_at_most = std::chrono::microseconds(options_.remote_spin_us);
      break;
    case abi::WaitMode::kSpin: break;
    case abi::WaitMode::kSleep:
      policy_.spin_iterations = 0;
      policy_.yield_for = std::chrono::microseconds(0);
      read_spin.attempts = 0;
      break;
  }
  tcp_.SetReadSpin(read_spin);
  co_runner_.assign(locals.size(), false);
  for (int r : options_.co_runners) {
    const int li = LocalIndex(r);
    if (li < 0 || li == node_.index()) throw CollError("EINVAL", "co-runner " + std::to_string(r) + " is not another rank of this node");
    co_runner_[static_cast<size_t>(li)] = true;
  }
  yield_policy_ = policy_;
  yield_policy_.spin_iterations = 0;
}

Engine::~Engine() { Close(); }

int Engine::ListenTcp(const std::string& address) { return tcp_.Listen(address); }

void Engine::CreateSegment(const std::string& name) {
  const size_t local_size = options_.local_ranks.size();
  const SegmentLayout layout = Layout();
  const size_t bytes = layout.total_bytes();
  segment_ = ShmSegment::Create(name, bytes);
  created_name_ = name;
  auto* h = new (segment_.base()) SegmentHeader();
  h->magic = kSegmentMagic;
  h->version = kSegmentVersion;
  h->local_size = static_cast<uint32_t>(local_size);
  h->total_bytes = bytes;
  h->outbox_bytes = layout.outbox_bytes();
  h->asymmetric_fences = options_.asymmetric_fences && RegisterForMembarrier() ? 1 : 0;
  InitViews();
}

void Engine::OpenSegment(const std::string& name) {
  segment_ = ShmSegment::Open(name);
  const auto* h = reinterpret_cast<const SegmentHeader*>(segment_.base());
  const SegmentLayout layout = Layout();
  if (h->magic != kSegmentMagic || h->version != kSegmentVersion || h->local_size != options_.local_ranks.size() ||
      h->outbox_bytes != layout.outbox_bytes() || h->total_bytes != layout.total_bytes()) {
    throw CollError("EINVAL", "shared segment " + name + " does not match this job's layout");
  }
  // The creator chose asymmetric fences for the whole node: every waker skips its fence from
  // now on, so every process must be reachable by the sleepers' membarrier.
  if (h->asymmetric_fences != 0 && !RegisterForMembarrier()) {
    throw CollError("EINVAL",
                    "membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) failed in this process but worked in the node leader's");
  }
  InitViews();
}

void Engine::InitViews() {
  const size_t local_size = options_.local_ranks.size();
  const SegmentLayout layout = Layout();
  uint8_t* base = segment_.base();
  SegmentHeader* header = layout.Header(base);
  policy_.asymmetric = yield_policy_.asymmetric = header->asymmetric_fences != 0;
  RankControl* controls = layout.Controls(base);
  node_.Map(header, controls);
  const int local_index = node_.index();
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
  {
    std::vector<uint8_t*> outboxes;
    std::vector<Doorbell*> bells;
    for (size_t i = 0; i < local_size; ++i) {
      outboxes.push_back(layout.Outbox(base, i));
      bells.push_back(&controls[i].doorbell);
    }
    ChannelPoolParams params = options_.channels;
    params.pool_bytes = layout.outbox_bytes();
    // The outbox's header is first-touched by its owner; its channels' rings when they are made.
    std::memset(outboxes[static_cast<size_t>(local_index)], 0, kOutboxHeaderBytes);
    channels_ = std::make_unique<ShmChannelPool>(std::move(outboxes), std::move(bells), local_index, params);
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
    uint8_t* own = layout.Region(base, static_cast<size_t>(local_index));
    own_region_ = own;
    own_region_bytes_ = layout.region_bytes();
    madvise(own, own_region_bytes_, MADV_RANDOM);
    std::memset(own, 0, own_region_bytes_);
    regions[static_cast<size_t>(local_index)].slot_waiter->store(-1, std::memory_order_relaxed);
  }
  shm_reduce_ = std::make_unique<ShmReduce>(regions, doorbells, local_index, options_.bcast.queue_bytes);
  // The node-wide area is zero, as ftruncate left it.
  shm_allreduce_ = std::make_unique<ShmAllreduce>(layout.NodeArea(base), options_.local_ranks, doorbells, local_index, &counters_.area);
  ShmBcastParams bcast = options_.bcast;
  bcast.window_min_bytes = options_.window_bcast_min_bytes;
  shm_bcast_ = std::make_unique<ShmBcast>(bcast, std::move(regions), std::move(doorbells), local_index, &windows_.table());

  RankControl& mine = controls[local_index];
  mine.pid.store(getpid(), std::memory_order_relaxed);
  mine.departed.store(0, std::memory_order_relaxed);
  header->mapped.fetch_add(1, std::memory_order_acq_rel);
}

bool Engine::AllMappedAndUnlink(int wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  const uint32_t local_size = static_cast<uint32_t>(options_.local_ranks.size());
  while (node_.header()->mapped.load(std::memory_order_acquire) < local_size) {
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

void Engine::UseP2P(std::shared_ptr<P2PLayer> layer, int32_t tag, std::vector<int> layer_ranks) {
  if (liveness_.started()) throw CollError("EINVAL", "the point-to-point layer must be set before the engine starts");
  if (layer_ranks.empty() && (layer->rank() != options_.rank || layer->size() != options_.size)) {
    throw CollError("EINVAL", "the point-to-point layer is rank " + std::to_string(layer->rank()) + " of " + std::to_string(layer->size()) +
                                  ", the communicator rank " + std::to_string(options_.rank) + " of " + std::to_string(options_.size));
  }
  if (!layer_ranks.empty()) {
    // Distinct ranks of the layer, this one's own among them at this rank's place.
    std::set<int> distinct(layer_ranks.begin(), layer_ranks.end());
    const bool valid = static_cast<int>(layer_ranks.size()) == options_.size && distinct.size() == layer_ranks.size() &&
                       *distinct.begin() >= 0 && *distinct.rbegin() < layer->size() &&
                       layer_ranks[static_cast<size_t>(options_.rank)] == layer->rank();
    if (!valid) {
      throw CollError("EINVAL", "the layer ranks of a sub-communicator of " + std::to_string(options_.size) + " ranks are not " +
                                    std::to_string(options_.size) + " distinct ranks of the layer's " + std::to_string(layer->size()) +
                                    " with rank " + std::to_string(layer->rank()) + " at this rank's place");
    }
  }
  p2p_ = std::make_unique<P2PLinks>(std::move(layer), tag, std::move(layer_ranks));
  remote_ = p2p_.get();
  liveness_.UseLinks(p2p_.get(), p2p_.get());
}

void Engine::AddP2PPeers(const std::vector<int>& ranks) {
  if (p2p_ == nullptr) throw CollError("EINVAL", "this communicator does not use a point-to-point layer");
  p2p_->AddPeers(ranks);
}

std::vector<int> Engine::ConnectTcp(const std::string& token, const std::vector<TcpPeer>& peers, int wait_ms) {
  Guard guard(liveness_, MsgHeader{}, /*watchdog=*/false);
  return tcp_.Establish(options_.rank, token, peers, wait_ms, guard);
}

void Engine::SetPlan(int id, std::vector<Step> steps) {
  if (id < 0) throw CollError("EINVAL", "schedule ids are not negative");
  const uint64_t pairs = static_cast<uint64_t>(options_.size) * static_cast<uint64_t>(options_.size);
  for (Step& s : steps) {
    if (s.of == kPairBlocks) {
      // Pair blocks: one block (s, d) of an alltoall each, of a send, a receive or an exchange.
      const bool exchange = s.kind == StepKind::kSendRecv;
      const bool moves = s.kind == StepKind::kSend || s.kind == StepKind::kRecv || exchange;
      if (!moves || s.count != 1 || s.first >= pairs || (exchange && (s.count2 != 1 || s.first2 >= pairs))) {
        throw CollError("EINVAL", "schedule " + std::to_string(id) + " has a pair-block range that is not one block of a send or receive");
      }
    } else if (s.joined) {
      throw CollError("EINVAL", "schedule " + std::to_string(id) + " joins a step that does not move a pair block");
    } else if (s.of == 0) {
      // Rank blocks: one rank's block each, in the ranges that move data (a ShmBcast of one
      // block: the shared-memory allgather, where each member publishes its own blocks; the
      // combining kinds: a reduce-scatter's).
      const bool exchange = s.kind == StepKind::kSendRecv || s.kind == StepKind::kSendRecvReduce;
      const bool moves = s.kind == StepKind::kSend || s.kind == StepKind::kRecv || s.kind == StepKind::kRecvReduce ||
                         s.kind == StepKind::kShmBcast || exchange;
      if (!moves || s.count != 1 || s.first >= static_cast<uint32_t>(options_.size) ||
          (exchange && (s.count2 != 1 || s.first2 >= static_cast<uint32_t>(options_.size)))) {
        throw CollError("EINVAL",
                        "schedule " + std::to_string(id) + " has a rank-block range that is not one rank's block of a send or receive");
      }
    } else if (static_cast<uint64_t>(s.first) + s.count > s.of || static_cast<uint64_t>(s.first2) + s.count2 > s.of) {
      throw CollError("EINVAL", "schedule " + std::to_string(id) + " has a block range outside its segment");
    }
    s.local_peer = LocalIndex(s.peer);
    s.local_peer2 = s.peer2 >= 0 ? LocalIndex(s.peer2) : -1;
    const bool node_wide = s.kind == StepKind::kShmAllreduce || s.kind == StepKind::kShmAllgather || s.kind == StepKind::kShmAreaBcast ||
                           s.kind == StepKind::kShmAreaReduce || s.kind == StepKind::kShmWindowAllreduce ||
                           s.kind == StepKind::kShmWindowAllgather || s.kind == StepKind::kShmAreaCall;
    if (node_wide && (options_.local_ranks.size() != static_cast<size_t>(options_.size) || options_.size < 2)) {
      throw CollError(
          "EINVAL", "schedule " + std::to_string(id) + " has a node-wide shared-memory step, but the job is not one node of several ranks");
    }
  }
  // A joined step is followed by the rest of its run: the same kind and peers, pair blocks.
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].joined) continue;
    if (i + 1 == steps.size() || steps[i + 1].kind != steps[i].kind || steps[i + 1].of != kPairBlocks ||
        steps[i + 1].peer != steps[i].peer || steps[i + 1].peer2 != steps[i].peer2) {
      throw CollError("EINVAL", "schedule " + std::to_string(id) + " joins a step to one that is not of its kind and peers");
    }
  }
  // The local ranks this schedule sends to get their channels (refused now if they cannot).
  if (channels_) {
    std::vector<int> sends_to;
    for (const Step& s : steps) {
      const bool sends = s.kind == StepKind::kSend || s.kind == StepKind::kSendRecv || s.kind == StepKind::kSendRecvReduce;
      if (sends && s.local_peer >= 0) sends_to.push_back(s.local_peer);
    }
    try {
      channels_->Want(sends_to, options_.rank);
    } catch (const CollError& e) {
      // The others of the node will wait for this rank's messages: they learn why at once.
      liveness_.Abort(e.code(), e.what());
      throw;
    }
  }
  if (plans_.size() <= static_cast<size_t>(id)) plans_.resize(static_cast<size_t>(id) + 1);
  plans_[static_cast<size_t>(id)] = std::make_unique<std::vector<Step>>(std::move(steps));
}

std::vector<int32_t> Engine::OwnRegionNodes() const {
  if (own_region_ == nullptr || !node_.mapped()) return {};
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
  group_has_co_runner_[static_cast<size_t>(id)] =
      std::any_of(locals.begin(), locals.end(), [&](int li) { return co_runner_[static_cast<size_t>(li)]; });
}

const WaitPolicy& Engine::PolicyFor(int local_peer) const {
  return local_peer >= 0 && co_runner_[static_cast<size_t>(local_peer)] ? yield_policy_ : policy_;
}

const WaitPolicy& Engine::GroupPolicy(int group) const {
  return static_cast<size_t>(group) < group_has_co_runner_.size() && group_has_co_runner_[static_cast<size_t>(group)] ? yield_policy_
                                                                                                                      : policy_;
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

SegmentLayout Engine::Layout() const { return SegmentLayout(options_.local_ranks.size(), options_.channels.pool_bytes, options_.bcast); }

Engine::SharedMemoryUse Engine::shared_memory_use() const {
  SharedMemoryUse use;
  if (!node_.mapped()) return use;
  const SegmentLayout layout = Layout();
  use.segment = layout.total_bytes();
  use.controls = layout.control_bytes();
  use.outboxes = layout.outboxes_bytes();
  use.outbox = layout.outbox_bytes();
  use.regions = layout.regions_bytes();
  use.node_area = layout.node_area_bytes();
  use.channels = channels_->Use();
  return use;
}

FastPathLayout Engine::fast_path_layout() const {
  FastPathLayout l{};
  if (!node_.mapped()) return l;
  const SegmentLayout layout = Layout();
  auto* base = reinterpret_cast<uint8_t*>(node_.header());
  const auto at = [base](const void* p) { return static_cast<size_t>(static_cast<const uint8_t*>(p) - base); };
  l.abort_code = at(&node_.header()->abort_code);
  l.controls = at(layout.Controls(base));
  l.control_stride = sizeof(RankControl);
  l.sleeping = offsetof(RankControl, doorbell) + offsetof(Doorbell, sleeping);
  l.idle = offsetof(RankControl, doorbell) + offsetof(Doorbell, idle);
  l.call_version = offsetof(RankControl, call_version);
  l.call = offsetof(RankControl, call);
  l.slots = at(layout.NodeArea(base).slots);
  l.slot_stride = ShmAllreduce::kSlotStride;
  l.slot_header = ShmAllreduce::kHeaderAt;
  l.slot_data = ShmAllreduce::kDataAt;
  l.slot_data_bytes = ShmAllreduce::kInlineBytes;
  l.slot_depth = ShmAllreduce::kDepth;
  l.span = l.slots + ShmAllreduce::SlotsBytes(options_.local_ranks.size());
  return l;
}

void Engine::AwaitAreaDeposits(uint32_t call, size_t from, size_t to) {
  if (closed_ || !node_.mapped()) throw CollError("ECLOSED", "the communicator is closed");
  MsgHeader h{};
  liveness_.ReadPublishedCall(node_.index(), &h);
  Guard guard(liveness_, h);
  guard.WaitingOnNode();
  try {
    shm_allreduce_->AwaitDeposits(call, from, to, h, node_policy_, guard);
  } catch (const CollError& e) {
    liveness_.Abort(e.code(), e.what());
    throw;
  }
}

void Engine::RingLocal(size_t i) {
  if (!node_.mapped() || i >= node_.size()) return;
  node_.control(i).doorbell.Ring(policy_.asymmetric);
}

void Engine::Start() { liveness_.Start(); }

MessageNode Engine::MessagesView() {
  MessageNode view;
  if (!node_.mapped() || !channels_) return view;
  view.pool = channels_.get();
  view.asymmetric = policy_.asymmetric;
  view.local_index.assign(static_cast<size_t>(options_.size), -1);
  for (size_t i = 0; i < options_.local_ranks.size(); ++i)
    view.local_index[static_cast<size_t>(options_.local_ranks[i])] = static_cast<int>(i);
  RankControl* controls = Layout().Controls(segment_.base());
  for (size_t i = 0; i < options_.local_ranks.size(); ++i) view.controls.push_back(&controls[i]);
  return view;
}

void Engine::Close() {
  if (closed_) return;
  closed_ = true;
  // A leader whose init failed before every local rank mapped the segment.
  UnlinkCreated();
  // Departed, and the watcher stopped, before the links and the segment go.
  liveness_.Leave();
  remote_->CloseAll();
  node_.Unmap();
  own_region_ = nullptr;
  channels_.reset();
  segment_ = ShmSegment();
}

}  // namespace topocoll
