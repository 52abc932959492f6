// The engine's liveness: the checks every wait makes (Engine::Guard), the watcher thread that
// notices dead local peers, aborts (raised, read, passed on to other nodes), the published call
// that lets a waiting peer compare calls, and leaving (close).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/errors.h"
#include "engine/engine.h"
#include "engine/engine_guard.h"

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

void Engine::Guard::ThrowIfAborted() {
  if (engine_.header_ != nullptr && engine_.header_->abort_code.load(std::memory_order_acquire) != 0) {
    engine_.CloseLinksAfterAbort(engine_.NodeAbortCode());
    engine_.ThrowAborted();
  }
}

void Engine::Guard::LinkEnded() { ThrowIfAborted(); }

void Engine::Guard::Check() {
  ThrowIfAborted();
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
      const std::string text = "the " + CallName() + " did not complete within " + std::to_string(engine_.options_.collective_timeout_ms) +
                               " ms (timeouts.collectiveMs) on rank " + std::to_string(engine_.options_.rank) + ", which was waiting on " +
                               Awaited();
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
    engine_.remote_->TrySend(peer_, &probe, sizeof probe);
  }
}

std::string Engine::Guard::CallName() const {
  return std::string(CollectiveName(static_cast<Collective>(call_.collective))) + " (call " + std::to_string(call_.seq) + ")";
}

std::string Engine::Guard::Awaited() const {
  if (peer_ >= 0 && engine_.p2p_ != nullptr && engine_.LocalIndex(peer_) < 0) {
    return "rank " + std::to_string(peer_) + " (tag " + std::to_string(engine_.p2p_->tag()) + " of the point-to-point layer)";
  }
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

void Engine::Guard::CheckDepartures() {
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

void Engine::Guard::CompareCall(int li) {
  MsgHeader theirs{};
  if (!engine_.ReadPublishedCall(li, &theirs)) return;
  const std::string mismatch = DescribeCallMismatch(call_, theirs, engine_.locals_[static_cast<size_t>(li)].rank);
  if (!mismatch.empty()) throw CollError("EMISMATCH", mismatch);
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
        Abort("EPEERLOST", "rank " + std::to_string(peer.rank) + " (pid " + std::to_string(pid) + ") on this node died");
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
  remote_->SendLastWords(&notice, sizeof notice, kLastWordsMs);
  remote_->ShutdownAll();
}

void Engine::ThrowAborted() const {
  const uint32_t code = NodeAbortCode();
  const char* name = code < sizeof(kAbortCodes) / sizeof(kAbortCodes[0]) ? kAbortCodes[code] : "EPEERLOST";
  throw CollError(name,
                  "the communicator was aborted: rank " + std::to_string(header_->abort_rank) + ": " + std::string(header_->abort_message));
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
  remote_->CloseAll();
  header_ = nullptr;
  own_region_ = nullptr;
  locals_.clear();
  channels_.reset();
  segment_ = ShmSegment();
}

}  // namespace topocoll
