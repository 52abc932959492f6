#include "transport/p2p_links.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/errors.h"

namespace topocoll {

namespace {

std::mutex registry_mutex;
std::unordered_map<const topocoll_p2p_v1*, std::weak_ptr<P2PLayer>>& Registry() {
  static auto* layers = new std::unordered_map<const topocoll_p2p_v1*, std::weak_ptr<P2PLayer>>();
  return *layers;
}

// How a wait on the layer backs off: the layer progresses inside test() (MPI) or on another
// thread (the JavaScript bridge), so the waiter tests often at first, then gives its core away.
void Backoff(uint64_t attempt) {
  if (attempt < 64) {
    CpuRelax();
  } else if (attempt < 2048) {
    sched_yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace

std::shared_ptr<P2PLayer> P2PLayer::For(const topocoll_p2p_v1* p2p) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto& registry = Registry();
  if (auto found = registry[p2p].lock()) return found;
  auto layer = std::make_shared<P2PLayer>(p2p);
  registry[p2p] = layer;
  return layer;
}

P2PLayer::P2PLayer(const topocoll_p2p_v1* p2p) : p2p_(p2p) {
  if (p2p == nullptr) throw CollError("EINVAL", "no point-to-point struct");
  if (p2p->version != TOPOCOLL_P2P_VERSION || p2p->struct_size != sizeof(topocoll_p2p_v1)) {
    throw CollError("EINVAL", "the point-to-point struct has version " + std::to_string(p2p->version) + " and size " +
                                  std::to_string(p2p->struct_size) + "; this topocoll takes version " +
                                  std::to_string(TOPOCOLL_P2P_VERSION) + " of size " + std::to_string(sizeof(topocoll_p2p_v1)));
  }
  if (p2p->isend == nullptr || p2p->irecv == nullptr || p2p->test == nullptr || p2p->abandon == nullptr) {
    throw CollError("EINVAL", "the point-to-point struct lacks isend, irecv, test or abandon");
  }
  if (p2p->size < 1 || p2p->rank < 0 || p2p->rank >= p2p->size) {
    throw CollError("EINVAL", "the point-to-point struct says rank " + std::to_string(p2p->rank) + " of " + std::to_string(p2p->size));
  }
  if (p2p->tag_base < 0 || p2p->tag_base > INT32_MAX - TOPOCOLL_P2P_TAGS + 1) {
    throw CollError("EINVAL",
                    "the point-to-point struct's tag_base " + std::to_string(p2p->tag_base) + " leaves no room for topocoll's tags");
  }
}

P2PLayer::~P2PLayer() {
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto& registry = Registry();
    auto it = registry.find(p2p_);
    if (it != registry.end() && it->second.expired()) registry.erase(it);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ReapAdoptedLocked();
  if (p2p_->release != nullptr) p2p_->release(p2p_->context);
  // Sends still not done may still be read by a layer that cannot cancel them (MPI): their
  // copies are left to the process (topocoll_p2p.h, REQUESTS AND OWNERSHIP).
  for (PendingSend& s : adopted_) static_cast<void>(s.copy.release());
}

int P2PLayer::Isend(int peer, int32_t tag, const void* data, size_t bytes, void** request) {
  std::lock_guard<std::mutex> lock(mutex_);
  return p2p_->isend(p2p_->context, peer, tag, data, bytes, request);
}

int P2PLayer::Irecv(int peer, int32_t tag, void* buffer, size_t capacity, void** request) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!adopted_.empty()) ReapAdoptedLocked();
  return p2p_->irecv(p2p_->context, peer, tag, buffer, capacity, request);
}

int P2PLayer::Test(void* request, bool* done, size_t* bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  int flag = 0;
  size_t got = 0;
  const int rc = p2p_->test(p2p_->context, request, &flag, &got);
  *done = flag != 0;
  *bytes = got;
  return rc;
}

void P2PLayer::Abandon(void* request) {
  std::lock_guard<std::mutex> lock(mutex_);
  p2p_->abandon(p2p_->context, request);
}

std::string P2PLayer::Describe(int code) {
  std::lock_guard<std::mutex> lock(mutex_);
  const char* text = p2p_->describe != nullptr ? p2p_->describe(p2p_->context, code) : nullptr;
  return text != nullptr ? std::string(text) : "error " + std::to_string(code);
}

void P2PLayer::Adopt(std::vector<PendingSend> sends) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& s : sends) adopted_.push_back(std::move(s));
  ReapAdoptedLocked();
}

void P2PLayer::ReapAdoptedLocked() {
  // A failed send is over too: its copy can go.
  adopted_.erase(std::remove_if(adopted_.begin(), adopted_.end(),
                                [&](const PendingSend& s) {
                                  int flag = 0;
                                  size_t got = 0;
                                  return p2p_->test(p2p_->context, s.request, &flag, &got) != 0 || flag != 0;
                                }),
                 adopted_.end());
}

P2PLinks::P2PLinks(std::shared_ptr<P2PLayer> layer, int32_t tag, std::vector<int> layer_ranks)
    : layer_(std::move(layer)), tag_(tag), layer_ranks_(std::move(layer_ranks)) {}

P2PLinks::~P2PLinks() { CloseAll(); }

void P2PLinks::AddPeers(const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  peers_.insert(ranks.begin(), ranks.end());
}

void P2PLinks::Failed(int code, const char* what, int rank) {
  throw CollError("EPEERLOST", std::string("the point-to-point layer failed ") + what + " rank " + std::to_string(rank) + " (tag " +
                                   std::to_string(tag_) + "): " + layer_->Describe(code));
}

void P2PLinks::ThrowIfShut(WaitGuard& guard) {
  if (!shut_.load(std::memory_order_acquire)) return;
  guard.LinkEnded();
  throw PeerClosed("the links to other nodes were shut (this rank's communicator was aborted)", {});
}

void P2PLinks::Post(int rank, const ByteSlice* slices, size_t count, size_t from, size_t n) {
  P2PLayer::PendingSend send{nullptr, std::make_unique<uint8_t[]>(n == 0 ? 1 : n), n, rank};
  size_t at = 0;  // offset of slice i in the concatenation
  for (size_t i = 0; i < count && at < from + n; at += slices[i].size, ++i) {
    const size_t b = std::max(from, at);
    const size_t e = std::min(from + n, at + slices[i].size);
    if (b < e) std::memcpy(send.copy.get() + (b - from), static_cast<const uint8_t*>(slices[i].data) + (b - at), e - b);
  }
  const int rc = layer_->Isend(LayerRank(rank), tag_, send.copy.get(), n, &send.request);
  if (rc != 0) Failed(rc, "sending to", rank);
  std::lock_guard<std::mutex> lock(mutex_);
  peers_.insert(rank);
  pending_bytes_ += n;
  pending_.push_back(std::move(send));
}

void P2PLinks::ReapLocked() {
  auto done = [&](const P2PLayer::PendingSend& s) {
    bool finished = false;
    size_t got = 0;
    const int rc = layer_->Test(s.request, &finished, &got);
    // A failed send is over too; this rank reports it at its next send or wait (the peer would
    // wait for it in vain).
    if (rc != 0 && send_failure_ == 0) {
      send_failure_ = rc;
      send_failure_peer_ = s.peer;
    }
    if (rc != 0) finished = true;
    if (finished) pending_bytes_ -= s.bytes;
    return finished;
  };
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), done), pending_.end());
}

void P2PLinks::ReapAndThrowIfSendFailed() {
  int code = 0;
  int peer = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ReapLocked();
    code = send_failure_;
    peer = send_failure_peer_;
  }
  if (code != 0) Failed(code, "sending to", peer);
}

void P2PLinks::Send(int rank, const ByteSlice* slices, size_t count, WaitGuard& guard) {
  ThrowIfShut(guard);
  const InsideMessage inside(*this, rank);
  if (!inside.entered()) throw PeerClosed("the links to rank " + std::to_string(rank) + " are closing after a failure", "");
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += slices[i].size;
  if (total <= kHeaderCapacity) {
    Post(rank, slices, count, 0, total);
  } else {
    Post(rank, slices, count, 0, sizeof(MsgHeader));
    for (size_t at = sizeof(MsgHeader); at < total;) {
      // Room for the copy first: at most kMaxPendingBytes in flight (a piece may exceed it once).
      for (uint64_t attempt = 0;; ++attempt) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ReapLocked();
          if (pending_bytes_ < kMaxPendingBytes) break;
        }
        ThrowIfShut(guard);
        Backoff(attempt);
        if ((attempt & 255) == 255) guard.Check();
      }
      const size_t piece = std::min(kStreamPieceBytes, total - at);
      Post(rank, slices, count, at, piece);
      at += piece;
    }
  }
  ReapAndThrowIfSendFailed();
}

size_t P2PLinks::AwaitReceive(void* request, int rank, WaitGuard& guard) {
  // However the wait ends, a receive not completed is abandoned: nothing writes its buffer later.
  struct AbandonUnlessDone {
    P2PLayer& layer;
    void* request;
    bool done = false;
    ~AbandonUnlessDone() {
      if (!done) layer.Abandon(request);
    }
  } outstanding{*layer_, request};
  for (uint64_t attempt = 0;; ++attempt) {
    bool done = false;
    size_t got = 0;
    const int rc = layer_->Test(request, &done, &got);
    if (rc != 0) {
      outstanding.done = true;  // a failed operation is over
      Failed(rc, "receiving from", rank);
    }
    if (done) {
      outstanding.done = true;
      return got;
    }
    ThrowIfShut(guard);
    Backoff(attempt);
    if ((attempt & 255) == 255) {
      // Sends of this rank may be what the peer waits for before it sends: keep them moving, and
      // report one that failed (the peer may be waiting for it).
      ReapAndThrowIfSendFailed();
      guard.Check();
    }
  }
}

void P2PLinks::ReadHeader(int rank, MsgHeader* header, WaitGuard& guard) {
  Inbox& in = inbox_[rank];
  in.data.resize(kHeaderCapacity);
  in.at = in.data.size();  // empty until the message is in
  void* request = nullptr;
  const int rc = layer_->Irecv(LayerRank(rank), tag_, in.data.data(), in.data.size(), &request);
  if (rc != 0) Failed(rc, "receiving from", rank);
  const size_t got = AwaitReceive(request, rank, guard);
  if (got < sizeof(MsgHeader))
    throw CollError("EMISMATCH", "a corrupt message (" + std::to_string(got) + " bytes) arrived from rank " + std::to_string(rank));
  std::memcpy(header, in.data.data(), sizeof *header);
  in.data.resize(got);
  in.at = sizeof(MsgHeader);
}

void P2PLinks::ReadBody(int rank, void* dst, size_t n, WaitGuard& guard) {
  if (n == 0) return;
  Inbox& in = inbox_[rank];
  if (in.at < in.data.size()) {
    // The body came with its header.
    if (in.data.size() - in.at < n) {
      throw CollError("EMISMATCH", "rank " + std::to_string(rank) + " sent a shorter message than its header announced");
    }
    std::memcpy(dst, in.data.data() + in.at, n);
    in.at += n;
    return;
  }
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < n;) {
    const size_t piece = std::min(kStreamPieceBytes, n - done);
    void* request = nullptr;
    const int rc = layer_->Irecv(LayerRank(rank), tag_, out + done, piece, &request);
    if (rc != 0) Failed(rc, "receiving from", rank);
    const size_t got = AwaitReceive(request, rank, guard);
    if (got != piece) {
      // The peer stopped sending this body: what came instead is its abort notice, if any.
      if (got == sizeof(MsgHeader))
        throw PeerClosed("rank " + std::to_string(rank) + " stopped in the middle of a message",
                         std::string(reinterpret_cast<const char*>(out + done), got));
      throw CollError("EMISMATCH", "rank " + std::to_string(rank) + " sent a piece of " + std::to_string(got) + " bytes where " +
                                       std::to_string(piece) + " were due");
    }
    done += piece;
  }
}

void P2PLinks::TrySend(int rank, const void* data, size_t n) {
  if (shut_.load(std::memory_order_acquire) || n > kHeaderCapacity || InsideMessageTo(rank)) return;
  const ByteSlice slice{data, n};
  try {
    Post(rank, &slice, 1, 0, n);
  } catch (const CollError&) {
    // A probe is advice: the wait it belongs to goes on and reports what it finds.
  }
}

void P2PLinks::SendLastWords(const void* data, size_t n, int budget_ms) {
  if (shut_.load(std::memory_order_acquire)) return;
  const int inside = BeginLastWords();
  std::vector<int> peers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    peers.assign(peers_.begin(), peers_.end());
  }
  const ByteSlice slice{data, n};
  for (int peer : peers) {
    if (peer == inside) continue;
    try {
      Post(peer, &slice, 1, 0, n);
    } catch (const CollError&) {
      // That peer's layer is broken already; tell the others.
    }
  }
  // A layer that progresses only inside its calls (MPI) needs them to push the notices out.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
  for (uint64_t attempt = 0; std::chrono::steady_clock::now() < deadline; ++attempt) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ReapLocked();
      if (pending_.empty()) return;
    }
    Backoff(attempt);
  }
}

void P2PLinks::ShutdownAll() { shut_.store(true, std::memory_order_release); }

void P2PLinks::DrainArrived() {
  std::vector<int> peers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    peers.assign(peers_.begin(), peers_.end());
  }
  std::vector<uint8_t> sink(kHeaderCapacity);
  for (int peer : peers) {
    for (int taken = 0; taken < kMaxDrainedPerPeer; ++taken) {
      void* request = nullptr;
      if (layer_->Irecv(LayerRank(peer), tag_, sink.data(), sink.size(), &request) != 0) break;
      bool done = false;
      size_t got = 0;
      for (int test = 0; test < kDrainTests && !done; ++test) {
        if (layer_->Test(request, &done, &got) != 0) break;
        if (!done) std::this_thread::yield();
      }
      if (!done) {
        layer_->Abandon(request);
        break;
      }
    }
  }
}

void P2PLinks::CloseAll() {
  // A clean close takes in what peers sent that no call read: the probes of their last waits
  // on this rank (header-only messages sent while they waited, read only by a next call). Left
  // in the layer they are unmatched messages at its end (MPI's UCX warns of each).
  if (!shut_.load(std::memory_order_acquire)) DrainArrived();
  shut_.store(true, std::memory_order_release);
  std::vector<P2PLayer::PendingSend> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ReapLocked();
    left.swap(pending_);
    pending_bytes_ = 0;
  }
  if (!left.empty()) layer_->Adopt(std::move(left));
  inbox_.clear();
}

}  // namespace topocoll
