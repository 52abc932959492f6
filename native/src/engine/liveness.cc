// Liveness (liveness.h): the checks every wait makes (Guard), the watcher thread that notices
// dead local peers, aborts (raised, read, passed on to other nodes), the published call that
// lets a waiting peer compare calls, and leaving.
#include "engine/liveness.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/errors.h"
#include "transport/p2p_links.h"

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

void Guard::ThrowIfAborted() {
  if (liveness_.aborted()) {
    liveness_.CloseLinksAfterAbort(liveness_.NodeAbortCode());
    liveness_.ThrowAborted();
  }
}

void Guard::LinkEnded() { ThrowIfAborted(); }

void Guard::Check() {
  ThrowIfAborted();
  if (liveness_.closing_.load(std::memory_order_acquire)) {
    throw CollError("ECLOSED", "the communicator was closed while this rank was in the " + CallName());
  }
  if (watchdog_) CheckDepartures();
  const auto now = std::chrono::steady_clock::now();
  const int64_t timeout_ms = liveness_.collective_timeout_ms_;
  if (watchdog_ && timeout_ms > 0) {
    if (!call_timing_) {
      call_timing_ = true;
      call_since_ = now;
    } else if (now - call_since_ > std::chrono::milliseconds(timeout_ms)) {
      const std::string text = "the " + CallName() + " did not complete within " + std::to_string(timeout_ms) +
                               " ms (timeouts.collectiveMs) on rank " + std::to_string(liveness_.node_.rank()) + ", which was waiting on " +
                               Awaited();
      liveness_.Abort("ETIMEDOUT", text);
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
  const LocalNode& node = liveness_.node_;
  if (peer_ == kEveryLocal) {
    for (size_t li = 0; li < node.peers().size(); ++li) {
      if (static_cast<int>(li) != node.index()) CompareCall(static_cast<int>(li));
    }
    return;
  }
  const int li = node.IndexOf(peer_);
  if (li >= 0) {
    CompareCall(li);
  } else {
    MsgHeader probe = call_;
    probe.magic = kProbeMagic;
    liveness_.remote_->TrySend(peer_, &probe, sizeof probe);
  }
}

std::string Guard::CallName() const {
  return std::string(CollectiveName(static_cast<Collective>(call_.collective))) + " (call " + std::to_string(call_.seq) + ")";
}

std::string Guard::Awaited() const {
  const LocalNode& node = liveness_.node_;
  if (peer_ >= 0 && liveness_.p2p_ != nullptr && node.IndexOf(peer_) < 0) {
    return "rank " + std::to_string(peer_) + " (tag " + std::to_string(liveness_.p2p_->tag()) + " of the point-to-point layer)";
  }
  if (peer_ >= 0) return "rank " + std::to_string(peer_);
  std::string behind;
  for (size_t li = 0; li < node.peers().size(); ++li) {
    if (static_cast<int>(li) == node.index()) continue;
    MsgHeader theirs{};
    if (!liveness_.ReadPublishedCall(static_cast<int>(li), &theirs) || static_cast<int32_t>(theirs.seq - call_.seq) < 0) {
      behind += (behind.empty() ? "" : ", ") + std::to_string(node.peers()[li].rank);
    }
  }
  return behind.empty() ? "the ranks of its node" : "rank(s) " + behind + " of its node, still in earlier calls";
}

void Guard::CheckDepartures() {
  const LocalNode& node = liveness_.node_;
  for (size_t li = 0; li < node.peers().size(); ++li) {
    if (static_cast<int>(li) == node.index()) continue;
    const RankControl& peer = node.control(li);
    if (peer.departed.load(std::memory_order_acquire) == 0) continue;
    MsgHeader theirs{};
    const bool called = liveness_.ReadPublishedCall(static_cast<int>(li), &theirs);
    if (called && static_cast<int32_t>(theirs.seq - call_.seq) >= 0) continue;
    const int rank = node.peers()[li].rank;
    throw CollError("EPEERLOST", "rank " + std::to_string(rank) + " left the communicator (close() or exit) " +
                                     (called ? "after call " + std::to_string(theirs.seq) : "before its first collective") +
                                     ", so it will not take part in this " + CallName());
  }
}

void Guard::CompareCall(int li) {
  MsgHeader theirs{};
  if (!liveness_.ReadPublishedCall(li, &theirs)) return;
  const std::string mismatch = DescribeCallMismatch(call_, theirs, liveness_.node_.peers()[static_cast<size_t>(li)].rank);
  if (!mismatch.empty()) throw CollError("EMISMATCH", mismatch);
}

void Liveness::Start() {
  if (!node_.mapped() || watcher_.joinable()) return;
  watcher_ = std::thread([this] { Watch(); });
}

void Liveness::Watch() {
  std::unique_lock<std::mutex> lock(watcher_mutex_);
  while (!watcher_stop_) {
    watcher_cv_.wait_for(lock, std::chrono::milliseconds(50));
    if (watcher_stop_) break;
    if (node_.header()->abort_code.load(std::memory_order_acquire) != 0) {
      // Another process failed: pass its reason on and close our sockets, so the ranks of other
      // nodes that wait on us learn it now, not at their next call.
      CloseLinksAfterAbort(NodeAbortCode());
      break;
    }
    for (const LocalPeer& peer : node_.peers()) {
      if (peer.rank == node_.rank()) continue;
      const int pid = peer.control->pid.load(std::memory_order_relaxed);
      if (pid <= 0 || peer.control->departed.load(std::memory_order_acquire) != 0) continue;
      if (kill(pid, 0) != 0 && errno == ESRCH) {
        Abort("EPEERLOST", "rank " + std::to_string(peer.rank) + " (pid " + std::to_string(pid) + ") on this node died");
        break;
      }
    }
  }
}

void Liveness::Leave() {
  if (node_.mapped()) node_.own().departed.store(1, std::memory_order_release);
  StopWatcher();
}

void Liveness::StopWatcher() {
  {
    std::lock_guard<std::mutex> lock(watcher_mutex_);
    watcher_stop_ = true;
  }
  watcher_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void Liveness::Abort(const std::string& code, const std::string& message) {
  uint32_t code_index = AbortCodeIndex(code);
  SegmentHeader* header = node_.header();
  if (header != nullptr) {
    uint32_t expected = 0;
    // The first failure wins; later ones are consequences of it.
    if (header->abort_code.compare_exchange_strong(expected, 0xffffffffU, std::memory_order_acq_rel)) {
      std::string text = message.substr(0, sizeof(header->abort_message) - 1);
      std::memcpy(header->abort_message, text.c_str(), text.size() + 1);
      header->abort_rank = node_.rank();
      header->abort_code.store(AbortCodeIndex(code), std::memory_order_release);
    }
    for (const LocalPeer& peer : node_.peers()) {
      peer.control->doorbell.bell.fetch_add(1, std::memory_order_seq_cst);
      FutexWakeAll(peer.control->doorbell.bell);
    }
    code_index = NodeAbortCode();
  }
  CloseLinksAfterAbort(code_index);
}

uint32_t Liveness::NodeAbortCode() const {
  const SegmentHeader* header = node_.header();
  uint32_t code = header->abort_code.load(std::memory_order_acquire);
  while (code == 0xffffffffU) code = header->abort_code.load(std::memory_order_acquire);  // message being written
  return code;
}

void Liveness::CloseLinksAfterAbort(uint32_t code_index) {
  // Once: by whichever thread sees the abort first (the caller's, or the watcher).
  if (links_shut_.exchange(true)) return;
  // Ranks of other nodes that read from us next learn the reason, then see the link close.
  MsgHeader notice{};
  notice.magic = kAbortMagic;
  notice.sender = node_.rank();
  notice.op = static_cast<uint8_t>(code_index);
  remote_->SendLastWords(&notice, sizeof notice, kLastWordsMs);
  remote_->ShutdownAll();
}

void Liveness::ThrowAborted() const {
  const uint32_t code = NodeAbortCode();
  const char* name = code < sizeof(kAbortCodes) / sizeof(kAbortCodes[0]) ? kAbortCodes[code] : "EPEERLOST";
  const SegmentHeader* header = node_.header();
  throw CollError(name,
                  "the communicator was aborted: rank " + std::to_string(header->abort_rank) + ": " + std::string(header->abort_message));
}

void Liveness::PublishCall(const MsgHeader& call) {
  if (!node_.mapped()) return;
  RankControl& mine = node_.own();
  uint64_t words[4];
  std::memcpy(words, &call, sizeof words);
  const uint32_t v = mine.call_version.load(std::memory_order_relaxed);
  mine.call_version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int i = 0; i < 4; ++i) mine.call[i].store(words[i], std::memory_order_relaxed);
  mine.call_version.store(v + 2, std::memory_order_release);
}

bool Liveness::ReadPublishedCall(int local_index, MsgHeader* out) const {
  const RankControl& peer = node_.control(static_cast<size_t>(local_index));
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

}  // namespace topocoll
