// The links to the ranks of other nodes, whatever carries them (TcpLinks: topocoll's own TCP
// connections; P2PLinks: a host layer's point-to-point messages). To the executor each link is
// a pair of ordered byte streams, one per direction: what Send writes to a rank, that rank's
// ReadExact calls read back in order.
//
// A message is a 32-byte MsgHeader and a body whose length both sides know once the header
// checked out. The reader says which it reads (ReadHeader, ReadBody), and reads a body whole or
// — when it combines — in pieces of kStreamPieceBytes from the body's start (the last one
// shorter): the message-based carrier frames bodies in exactly those pieces.
#pragma once

#include <atomic>
#include <cstddef>

#include "base/message.h"
#include "base/wait.h"

namespace topocoll {

// The pieces a body is read in when it is combined as it arrives (and the largest message a
// message-based carrier sends: bodies travel in pieces of this size).
constexpr size_t kStreamPieceBytes = 256 * 1024;
// Longest exchange between nodes: both sides send before they receive, so the carrier must take
// it without a reader (TCP: the socket buffers hold it on any Linux default; P2PLinks: copied
// and sent eagerly). Between ranks of one node the limit is the channel's capacity less two
// message headers.
constexpr uint64_t kEagerBytes = 64 * 1024;

// A callable borrowed for the length of one call (no copy, no allocation: the caller's lambda
// outlives the call that runs it).
class Borrowed {
 public:
  template <class F>
  explicit Borrowed(F& f) : object_(&f), call_([](void* o) { (*static_cast<F*>(o))(); }) {}
  void operator()() const { call_(object_); }

 private:
  void* object_;
  void (*call_)(void*);
};

class RemoteLinks {
 public:
  virtual ~RemoteLinks() = default;
  // The longest message body Send takes while no reader reads: an exchange that sends before it
  // receives must fit it (kEagerBytes, what socket buffers hold on any Linux default).
  virtual uint64_t BufferedBytes() const { return kEagerBytes; }
  // Whether SendWhileReceiving keeps a send going while it reads: an exchange between two
  // remote peers then needs no carrier to hold its segment (no eager limit).
  virtual bool DuplexExchanges() const { return false; }
  // An exchange between two remote peers: sends the slices to `rank` and runs `receive` (the
  // caller's reads from these links), returning once both are done. The memory of the slices
  // must not change until then. Carriers that buffer a send whole (kEagerBytes) send first,
  // then receive; a duplex carrier writes more of the message whenever a read inside `receive`
  // would wait.
  virtual void SendWhileReceiving(int rank, const ByteSlice* slices, size_t count, Borrowed receive, WaitGuard& guard) {
    Send(rank, slices, count, guard);
    receive();
  }
  // Writes the slices, back to back, to `rank`'s stream. Returns once they are on their way: the
  // caller may reuse the memory. Messages up to kEagerBytes plus a header never wait for the
  // reader (both sides of an exchange send before they receive). A stream the peer ended may
  // throw PeerClosed, with what the peer sent last and this rank had not read (its abort notice).
  virtual void Send(int rank, const ByteSlice* slices, size_t count, WaitGuard& guard) = 0;
  // Reads the next message's header, then n bytes of its body (all of it, or the next piece). A
  // stream that ended (peer gone, links shut) throws PeerClosed, with the bytes read last before
  // the end when there were some (a peer's abort notice).
  virtual void ReadHeader(int rank, MsgHeader* header, WaitGuard& guard) = 0;
  virtual void ReadBody(int rank, void* dst, size_t n, WaitGuard& guard) = 0;
  // Sends a small message only if it can go at once, never waiting (probes). Nothing goes to a
  // rank whose message Send is still writing: the waits inside Send run the guard, whose probe
  // would otherwise land inside that message and corrupt the stream.
  virtual void TrySend(int rank, const void* data, size_t n) = 0;
  // Sends a failing rank's notice to every linked rank, waiting at most budget_ms in all;
  // failures are ignored: the links close next. Any thread. Once it began, Send refuses to start
  // a message (PeerClosed), and a stream with a message under way gets no notice: it must not
  // land inside that message (InsideMessage).
  virtual void SendLastWords(const void* data, size_t n, int budget_ms) = 0;
  // Ends every link so that waits on them (here, and where the carrier can tell, at the peers)
  // fail at once. Any thread.
  virtual void ShutdownAll() = 0;
  // Releases the links; nothing is sent or received after.
  virtual void CloseAll() = 0;

 protected:
  // Marks `rank`'s stream as inside a message for the scope of one Send (the calling thread's:
  // Send and the guard it runs share it), so that TrySend leaves that stream alone — and so
  // that last words, from whichever thread, never land inside a message either. The two sides
  // meet as in Dekker's protocol, each storing its own word before it reads the other's
  // (sequentially consistent): either Send sees that last words began and sends nothing, or
  // SendLastWords sees the message under way and skips that stream (its peer learns of the
  // failure when the links shut), or both. `entered()` false: last words began, the message
  // must not start.
  class InsideMessage {
   public:
    InsideMessage(RemoteLinks& links, int rank) : links_(links) {
      links_.inside_message_to_.store(rank, std::memory_order_seq_cst);
      entered_ = !links_.last_words_.load(std::memory_order_seq_cst);
    }
    ~InsideMessage() { links_.inside_message_to_.store(-1, std::memory_order_release); }
    InsideMessage(const InsideMessage&) = delete;
    InsideMessage& operator=(const InsideMessage&) = delete;
    bool entered() const { return entered_; }

   private:
    RemoteLinks& links_;
    bool entered_;
  };
  bool InsideMessageTo(int rank) const { return inside_message_to_.load(std::memory_order_relaxed) == rank; }
  // SendLastWords's side: no message starts from now on; returns the rank whose message is under
  // way (its stream must not get the notice), or −1.
  int BeginLastWords() {
    last_words_.store(true, std::memory_order_seq_cst);
    return inside_message_to_.load(std::memory_order_seq_cst);
  }

 private:
  std::atomic<int> inside_message_to_{-1};
  std::atomic<bool> last_words_{false};
};

}  // namespace topocoll
