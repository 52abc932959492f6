// Engine::Guard, the WaitGuard of every wait a call makes (private to the engine's .cc files:
// engine.cc, engine_executor.cc, engine_liveness.cc; the checks live in engine_liveness.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/message.h"
#include "base/wait.h"
#include "engine/engine.h"

namespace topocoll {

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

}  // namespace topocoll
