// The engine's liveness: aborts (raised, read, passed on to other nodes), the watcher thread that
// notices dead local peers, the published call that lets a waiting peer compare calls, close()
// during a call, leaving — and Guard, the checks every wait of a call makes. Engine owns one
// Liveness; the executor and the window collectives wait under its Guard.
//
// Who writes which word of the node's segment (shm_segment.h):
//   - SegmentHeader::abort_code: 0 until the first failure on the node; Abort claims it with a
//     compare-and-swap to 0xffffffff, writes abort_message and abort_rank, then stores the code
//     index (release). Nobody writes it afterwards. Readers (every wait, the watcher, the
//     JavaScript fast path) acquire it, and wait out 0xffffffff before reading the message.
//   - RankControl::call_version, call[4]: written only by their rank (PublishCall, at the start
//     of each call: version odd, the four words, version even), read by any local peer
//     (ReadPublishedCall, a seqlock read).
//   - RankControl::departed: set once by its rank when it leaves (Leave, release), after it
//     published everything it owed; pid: written by its rank when it maps the segment.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "base/message.h"
#include "base/wait.h"
#include "engine/local_node.h"
#include "transport/remote_links.h"

namespace topocoll {

class P2PLinks;  // p2p_links.h

// Error codes an abort carries, by the index that travels in the node's segment and in abort
// notices (index 0: no abort). Append only: ranks of one job must agree on the indices.
inline constexpr const char* kAbortCodes[] = {"", "EPEERLOST", "EMISMATCH", "ETIMEDOUT", "EINVAL", "ECONFIG"};

class Liveness {
 public:
  // collective_timeout_ms: the watchdog's limit on one call's waits (0: none).
  Liveness(const LocalNode& node, int64_t collective_timeout_ms) : node_(node), collective_timeout_ms_(collective_timeout_ms) {}
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;
  ~Liveness() { StopWatcher(); }

  // The links to other nodes that an abort notifies and shuts and a waiting guard probes (before
  // Start); `p2p` when they are a host layer's (its tag names a peer a call waits on there).
  void UseLinks(RemoteLinks* remote, const P2PLinks* p2p) {
    remote_ = remote;
    p2p_ = p2p;
  }
  // Starts the watcher, once the segment is mapped (else nothing).
  void Start();
  bool started() const { return watcher_.joinable(); }
  // Marks this rank as gone on purpose (when the segment is mapped) and stops the watcher.
  // Idempotent.
  void Leave();

  // --- aborts ---
  // Whether any rank of the node (or another node, through it) raised an abort.
  bool aborted() const { return node_.mapped() && node_.header()->abort_code.load(std::memory_order_acquire) != 0; }
  // Raises the node's abort (the first one wins), wakes every local rank, notifies and shuts
  // the links to other nodes.
  void Abort(const std::string& code, const std::string& message);
  // The code index of the node's abort (waits out the moment its message is being written).
  uint32_t NodeAbortCode() const;
  // Sends the abort notice (code index) on every link to another node and shuts them; once.
  void CloseLinksAfterAbort(uint32_t code_index);
  [[noreturn]] void ThrowAborted() const;

  // --- close() during a call ---
  // Makes a call in progress on another thread fail with ECLOSED at its next check. Any thread.
  void RequestClose() { closing_.store(true, std::memory_order_release); }

  // --- the published call ---
  void PublishCall(const MsgHeader& call);
  // The call local rank `local_index` published last; false if none (or it is being written).
  bool ReadPublishedCall(int local_index, MsgHeader* out) const;

 private:
  friend class Guard;
  void Watch();
  void StopWatcher();

  const LocalNode& node_;
  const int64_t collective_timeout_ms_;
  RemoteLinks* remote_ = nullptr;
  const P2PLinks* p2p_ = nullptr;
  std::atomic<bool> closing_{false};
  std::atomic<bool> links_shut_{false};

  std::thread watcher_;
  std::mutex watcher_mutex_;
  std::condition_variable watcher_cv_;
  bool watcher_stop_ = false;
};

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
class Guard : public WaitGuard {
 public:
  Guard(Liveness& liveness, const MsgHeader& call, bool watchdog = true) : liveness_(liveness), call_(call), watchdog_(watchdog) {}

  // Called before each transfer with the peer it may wait on. The clock starts at the first
  // Check (waits call it only once they stopped spinning), which keeps it off the fast path.
  void WaitingOn(int peer) {
    peer_ = peer;
    timing_ = false;
    probed_ = false;
  }
  // A wait on every other rank of this node: the probe compares the calls of them all.
  void WaitingOnNode() { WaitingOn(kEveryLocal); }

  void SetPhase(uint8_t phase) { call_.phase = phase; }

  // The watcher shuts this rank's links when another rank of the node aborts (Watch); a read or
  // write cut short by that reports the abort, not the peer.
  void LinkEnded() override;
  void Check() override;

 private:
  static constexpr std::chrono::milliseconds kProbeAfter{200};
  static constexpr int kEveryLocal = -2;

  // The node's abort, if one was raised: links shut (once) and its error thrown.
  void ThrowIfAborted();
  std::string CallName() const;
  // Whom this wait needs: one rank, or the ranks of the node whose published call is behind.
  std::string Awaited() const;
  void CheckDepartures();
  // EMISMATCH when the rank with local index `li` has published a different call than this one.
  void CompareCall(int li);

  Liveness& liveness_;
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

}  // namespace topocoll
