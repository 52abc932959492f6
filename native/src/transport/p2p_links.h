// Links to the ranks of other nodes over a host layer's point-to-point messages (a
// topocoll_p2p_v1, native/include/topocoll_p2p.h): MPI through topocoll/mpi, or a JavaScript
// layer through the addon's bridge (js_p2p.h).
//
// Framing on the communicator's tag, per ordered pair of ranks (the layer keeps one pair's
// messages of one tag in order):
//   - a message whose body is at most kInlineBytes: ONE layer message, header and body;
//   - a longer one: the header alone, then the body in pieces of kStreamPieceBytes (the last
//     one shorter), each one layer message.
// The reader receives a header into its own buffer of kHeaderCapacity (so an inline body comes
// with it and is served from there), and a separate body piece by piece straight into where it
// goes. Probes and abort notices are header-only messages on the same stream, as over TCP.
//
// Sends copy what they send and return at once (the eager semantics an exchange between nodes
// needs, whatever the layer's own eager limit); the copies are freed as the layer reports the
// sends done, and a sender waits for room once kMaxPendingBytes are in flight.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "topocoll_p2p.h"
#include "transport/remote_links.h"

namespace topocoll {

// One layer struct, shared by every communicator made over it in this process: it serialises
// the calls into the struct (the header's threading rule), keeps the sends that outlived the
// communicator that made them, and calls release() when the last holder lets go.
class P2PLayer {
 public:
  // The layer of `p2p` (the same object for the same struct while anyone holds it). EINVAL for
  // a struct of another version or size, or without the functions topocoll calls.
  static std::shared_ptr<P2PLayer> For(const topocoll_p2p_v1* p2p);
  explicit P2PLayer(const topocoll_p2p_v1* p2p);
  P2PLayer(const P2PLayer&) = delete;
  P2PLayer& operator=(const P2PLayer&) = delete;
  ~P2PLayer();

  int rank() const { return p2p_->rank; }
  int size() const { return p2p_->size; }
  int32_t tag_base() const { return p2p_->tag_base; }

  // A send in flight and the copy it sends from.
  struct PendingSend {
    void* request;
    std::unique_ptr<uint8_t[]> copy;
    size_t bytes;
    int peer;
  };

  // The struct's functions, one call at a time; each returns the struct's code (0: success).
  int Isend(int peer, int32_t tag, const void* data, size_t bytes, void** request);
  int Irecv(int peer, int32_t tag, void* buffer, size_t capacity, void** request);
  int Test(void* request, bool* done, size_t* bytes);
  void Abandon(void* request);
  std::string Describe(int code);
  // Takes sends a closing communicator could not see complete; they are tested whenever the
  // layer is used, and their copies live until they complete (or forever, past release()).
  void Adopt(std::vector<PendingSend> sends);

 private:
  void ReapAdoptedLocked();
  const topocoll_p2p_v1* p2p_;
  std::mutex mutex_;
  std::vector<PendingSend> adopted_;
};

class P2PLinks final : public RemoteLinks {
 public:
  // The links of one communicator: its messages use `tag` of the layer. `layer_ranks[r]` is the
  // layer's rank of the communicator's rank r (a sub-communicator's ranks are some of the
  // layer's, renumbered); empty: the same numbers. Errors name communicator ranks.
  P2PLinks(std::shared_ptr<P2PLayer> layer, int32_t tag, std::vector<int> layer_ranks = {});
  ~P2PLinks() override;

  int32_t tag() const { return tag_; }
  // Ranks that get this rank's abort notice (the remote peers of its plans).
  void AddPeers(const std::vector<int>& ranks);

  void Send(int rank, const ByteSlice* slices, size_t count, WaitGuard& guard) override;
  void ReadHeader(int rank, MsgHeader* header, WaitGuard& guard) override;
  void ReadBody(int rank, void* dst, size_t n, WaitGuard& guard) override;
  void TrySend(int rank, const void* data, size_t n) override;
  void SendLastWords(const void* data, size_t n, int budget_ms) override;
  void ShutdownAll() override;
  void CloseAll() override;

  // Bodies up to this many bytes travel with their header.
  static constexpr size_t kInlineBytes = 4096;
  static constexpr size_t kHeaderCapacity = sizeof(MsgHeader) + kInlineBytes;
  // Bytes of copies in flight before a sender waits for some to complete.
  static constexpr size_t kMaxPendingBytes = 64u << 20;
  // What an exchange may send before it receives: sends are copies posted without waiting for
  // their receives, so a segment needs no reader while the copies in flight stay under
  // kMaxPendingBytes. A quarter of it leaves room for the segments before it that a ring's
  // neighbours have not received yet.
  static constexpr uint64_t kExchangeBytes = kMaxPendingBytes / 4;
  uint64_t BufferedBytes() const override { return kExchangeBytes; }

 private:
  // Copies the bytes [from, from + n) of the slices' concatenation and sends them as one message.
  void Post(int rank, const ByteSlice* slices, size_t count, size_t from, size_t n);
  // Tests the sends in flight and frees the copies of those done; the first that failed is kept
  // in send_failure_. Under mutex_.
  void ReapLocked();
  // Reaps, and throws the failure of a send the layer reported (EPEERLOST naming peer and tag).
  void ReapAndThrowIfSendFailed();
  // Waits for a receive this thread posted; returns the bytes received.
  size_t AwaitReceive(void* request, int rank, WaitGuard& guard);
  [[noreturn]] void Failed(int code, const char* what, int rank);
  // Once ShutdownAll ran: the guard's abort if it has one (LinkEnded), else PeerClosed.
  void ThrowIfShut(WaitGuard& guard);
  // Receives and drops, per peer, the messages that have arrived and no call read (at most
  // kMaxDrainedPerPeer; a receive not done after kDrainTests tests is abandoned).
  void DrainArrived();
  static constexpr int kMaxDrainedPerPeer = 64;
  static constexpr int kDrainTests = 4;

  // The layer's rank of communicator rank `rank`.
  int LayerRank(int rank) const { return layer_ranks_.empty() ? rank : layer_ranks_[static_cast<size_t>(rank)]; }

  std::shared_ptr<P2PLayer> layer_;
  int32_t tag_;
  std::vector<int> layer_ranks_;
  // Sends in flight and the peers known: the calling thread and an aborting watcher.
  std::mutex mutex_;
  std::vector<P2PLayer::PendingSend> pending_;
  size_t pending_bytes_ = 0;
  std::set<int> peers_;
  // The layer's code and the peer of the first send that failed (code 0: none).
  int send_failure_ = 0;
  int send_failure_peer_ = -1;
  // Per peer, the message whose header was read last: the bytes of its inline body not read yet
  // are data[at, end). The calling thread only.
  struct Inbox {
    std::vector<uint8_t> data;
    size_t at = 0;
  };
  std::unordered_map<int, Inbox> inbox_;
  std::atomic<bool> shut_{false};
};

}  // namespace topocoll
