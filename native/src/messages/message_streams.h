// Point-to-point messages of one communicator (sendSync/recvSync/isend/irecv, … in TypeScript):
// streams of their own between the ranks that message, and a progress thread that owns them.
//
// Why streams of their own: the collective links (channels, TCP links, a host layer) are strict
// ordered streams read only by the collective executor, while it runs a collective. A message on
// them would be read by a collective, and a message waiting for its receiver would stall every
// collective behind it. Why a thread of its own: MPI programs do `isend(big, B); allreduce()`
// while B does `allreduce(); recv()`; the isend must progress while its sender is in the
// collective, so messages never wait on the collective job queue (job_queue.h) nor it on them.
//
// Streams. One TCP connection per ordered pair (sender → receiver) that messages, made by the
// sender the first time it sends to that receiver (lazily: most pairs never message). A rank
// that waits for a message from a specific source it has no stream from yet also connects to
// that source (a "watch" connection, that carries no message), so that the source's death or
// close reaches the receive. Every connection starts with a Hello (the job's token, the
// connecting rank, kHelloMagic); the listener drops connections whose hello is wrong.
//
// Channels inside a node. Where the communicator's node segment is attached (AttachNode), a
// message to a rank of the same node that takes at most half the ring (ShmChannel::TrySend: 128
// KiB of a 256 KiB ring) and fits it now is written at once into this rank's message channel to that rank
// (shm_channel_pool.h, kind kMessageChannel) as one channel message: ChannelHeader{tag, length,
// seq}, then the body. Anything else takes the TCP stream. Every message from one rank to
// another carries `seq`, 0, 1, 2, … in send order whatever path it takes, and the receiver
// matches a source's messages in seq order: a path whose next message is not the next seq
// stops (a TCP frame's header, a channel message's header, is held) until the other path has
// delivered the ones before it. So MPI's order holds across the two paths.
//
// Larger messages to a rank of the node go by a single copy where the ranks may read each
// other's memory (process_vm_readv; a probe of the peer's probe word, RankControl::messages_probe,
// decides, once per peer): the sender writes a descriptor through the channel —
// ChannelHeader{kind = kCopyOut}, then CopyOut{address, pid}, then an 8-byte trailer — and its
// op stays pending. The receiver consumes the header and CopyOut, copies the body straight out
// of the sender's memory (into the matched receive's buffer, or an unexpected message's own),
// and only then consumes the trailer: the channel's `tail` passing the descriptor's end is the
// sender's word that the copy is over and its op is done. A waiting sender sees `tail` itself;
// the receiver writes a Frame{kFrameDone} on the sender's stream, back the other way, to wake
// the sender's progress thread unless the sender published that it looks anyway (below), and
// that thread also looks every millisecond while copy-outs wait. A copy that fails (the sender
// is gone) fails its receive with EPEERLOST.
//
// Who notices a channel message: the receiver's waiters and loop read a source's channel
// whenever they read its stream (ReadFrom). A sender that wrote into a channel then sends a
// Frame{kFrameNudge} on its TCP stream so that the receiver's loop wakes — unless the receiver
// published (RankControl::messages_unnudged_until) that it looks at every channel until a time
// not yet reached: its loop does so whenever blocking waits drive its streams (Wait), scanning
// every channel each time it wakes, at the latest at that time. The store of that time and the
// loop's scan pair with the sender's write and its load of the time (a fence on each side), so
// a message is either nudged or found by the scan.
//
// Frames, written only by the connecting rank on its connection, in send order:
//   Frame{kFrameMessage, tag, length, seq}, then `length` bytes of body;
//   Frame{kFrameNudge, 0, 0, 0}: a message went through the channel (no body);
//   Frame{kFrameBye, 0, 0, 0} when the rank closes: nothing follows.
// The accepting rank writes only Frame{kFrameDone} (a copy-out is over) and a Bye, when it
// closes. A connection that ends (EOF, error, refused) without a Bye means the peer died.
//
// Progress thread, one per communicator, in a poll() loop over the listener, an eventfd the
// posting threads ring, and every connection. It writes queued sends in order (non-blocking,
// header and body with writev: the body straight out of the caller's buffer, no copy), reads
// frames, and matches each arriving message (message_match.h) against the posted receives: a
// matched message's body is read straight into the receive's buffer as it streams in (beyond
// its capacity: read and dropped, then ETRUNCATE); an unmatched one is read into a buffer of its
// own (the unexpected queue), from which a later receive copies it. So a sender never waits for
// its receiver to post a receive (no deadlock whatever the order of sends, receives and
// collectives), at the price of one copy for messages that arrive before their receive.
//
// Waits. A blocking wait reads (writes) its op's streams and channels itself, under the mutex,
// until drive_us pass without a byte moved (Wait); meanwhile the progress thread leaves the
// incoming streams out of its poll().
//
// Outcomes. Each send and receive is a MessageOp; the thread that ends it sets `done` and its
// outcome under the mutex, wakes the waiters (condition variable) and calls `on_complete` for
// ops posted with `notify` (the binding settles their Promise). A posted receive still unmatched
// after `timeout_ms` ends with ETIMEDOUT; a send not written after `timeout_ms` ends with
// ETIMEDOUT and closes its connection (the receiver sees the stream end: EPEERLOST). A peer that
// is gone (its connection ended) ends the sends to it and the receives from it that no message
// already queued matches with EPEERLOST. Close() ends everything pending with ECLOSED and reports
// the messages that arrived and were never received, by source.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/wait.h"
#include "shm/shm_channel_pool.h"
#include "shm/shm_segment.h"
#include "transport/message_match.h"
#include "transport/tcp_links.h"

namespace topocoll {

struct MessageOp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  int peer = kAnySource;  // send: the destination; receive: the source or kAnySource
  int32_t tag = 0;        // receive: or kAnyTag
  uint8_t* data = nullptr;
  uint64_t bytes = 0;     // send: the message; receive: the buffer's capacity
  bool allocate = false;  // receive: into `owned`, as long as the message (objects)
  bool notify = false;    // call on_complete when done
  bool nudge = false;     // send: a Frame{kFrameNudge} of no one's, not a message
  uint64_t seq = 0;       // send: its place among this rank's messages to `peer`
  uint64_t id = 0;        // the poster's number for it
  std::chrono::steady_clock::time_point deadline;
  // The outcome, written once under the engine's mutex; read after `done` (under it, or after Wait).
  bool done = false;
  std::string code;  // empty: success
  std::string message;
  int source = -1;  // receive: the message's source, tag and length in bytes
  int32_t status_tag = -1;
  uint64_t length = 0;
  std::unique_ptr<uint8_t[]> owned;
};
using MessageOpPtr = std::shared_ptr<MessageOp>;

class MessageStreams {
 public:
  struct Options {
    int rank = 0;
    int size = 1;
    int64_t timeout_ms = 0;  // 0: receives and sends wait without a limit
    // How long Wait() drives the op's streams on the waiting thread before it sleeps, µs (0:
    // sleeps at once; waits: sleep).
    int64_t drive_us = 0;
    // Called (on any thread, under the mutex: it must not call back in) for ops posted with notify.
    std::function<void(const MessageOpPtr&)> on_complete;
  };

  explicit MessageStreams(Options options);
  MessageStreams(const MessageStreams&) = delete;
  MessageStreams& operator=(const MessageStreams&) = delete;
  ~MessageStreams();

  // Binds the socket to an ephemeral port of every interface; returns the port. Before the
  // ranks agree on anything: the port travels with the rank's information (join.ts), and the
  // peers reach it at the address their collective links use for this rank. Strangers are
  // dropped by the hello's token.
  int Bind();
  // Listens on the bound port: once the rank has joined, before the join's last barrier, so no
  // peer can connect (it starts messaging only after that barrier) before it listens.
  void Listen();
  // The communicator's token (the hellos carry it) and every rank's address, then the progress
  // thread starts.
  void Start(const std::string& token, std::vector<TcpPeer> peers);
  // The node segment's channels, before Start; the segment stays mapped until Close().
  void AttachNode(MessageNode node);

  // Post a send of `bytes` at `data` (which stays valid until the op is done) to `dest`.
  // notify_id > 0: on_complete is called for the op, which carries that id.
  MessageOpPtr Send(int dest, int32_t tag, const uint8_t* data, uint64_t bytes, uint64_t notify_id);
  // Post a receive into `data` (capacity bytes), or into a buffer of the message's length when
  // `allocate`. A receive an unexpected message matches may end here, on the calling thread.
  MessageOpPtr Recv(int source, int32_t tag, uint8_t* data, uint64_t capacity, bool allocate, uint64_t notify_id);
  // How this rank's messages went so far: whole through a channel, copied out of this rank by
  // the receiver, or on a TCP stream (diagnostics and tests).
  struct Paths {
    uint64_t channel = 0;
    uint64_t copy_out = 0;
    uint64_t stream = 0;
  };
  Paths SentPaths();

  // Blocks until `op` is done. Until drive_us pass without a byte moved it reads (a receive) or
  // writes (a send) the op's streams itself, yielding the core between passes, unless ops posted
  // with notify are pending (the loop reads for them anyway); then it sleeps until the progress
  // thread ends the op: a message that arrives while the receiver waits then costs no thread
  // hand-off (the progress thread's wake-up and the waiter's, most of a small message's latency).
  void Wait(const MessageOpPtr& op);
  bool Done(const MessageOpPtr& op);

  // Ends every pending op with ECLOSED, says Bye on every connection, stops the thread, closes
  // the sockets. Returns the messages that arrived and no receive took, counted by source.
  // Idempotent (later calls return nothing).
  std::vector<std::pair<int, uint64_t>> Close();

  struct Hello {
    char token[TcpLinks::kTokenBytes];
    int32_t rank;
    uint32_t magic;
  };
  struct Frame {
    uint32_t kind;
    int32_t tag;
    uint64_t length;
    uint64_t seq;
  };
  struct ChannelHeader {
    int32_t tag;
    uint32_t kind;  // kInline: the body follows; kCopyOut: a CopyOut and a trailer follow
    uint64_t length;
    uint64_t seq;
  };
  struct CopyOut {
    uint64_t address;
    int64_t pid;
  };
  static constexpr uint32_t kInline = 0;
  static constexpr uint32_t kCopyOut = 1;
  static constexpr uint64_t kMessagesProbe = 0x65626f7270677363;  // "csgprobe"
  static constexpr uint32_t kHelloMagic = 0x74637032;             // "tcp2"
  static constexpr uint32_t kFrameMessage = 0x6d736731;           // "msg1"
  static constexpr uint32_t kFrameBye = 0x62796531;               // "bye1"
  static constexpr uint32_t kFrameNudge = 0x6e756431;             // "nud1"
  static constexpr uint32_t kFrameDone = 0x646e6531;              // "dne1": the accepting rank's, a copy-out is over

 private:
  // A new op of `kind` with `peer`, `tag`, buffer and byte count, its notify id and its deadline
  // (timeout_ms from now).
  MessageOpPtr NewOp(MessageOp::Kind kind, int peer, int32_t tag, uint8_t* data, uint64_t bytes, uint64_t notify_id) const;
  struct Arrival;
  struct Conn;
  struct ChannelIn;
  void Loop();
  void Wake();
  // Under mutex_:
  void Complete(const MessageOpPtr& op, std::string code = {}, std::string message = {});
  void Deliver(Arrival& arrival, const MessageOpPtr& op);
  // A receive whose message of `length` bytes is in its buffer (as much as `capacity` held):
  // done, or ETRUNCATE.
  void CompleteReceive(const MessageOpPtr& op, int source, int32_t tag, uint64_t length, uint64_t capacity);
  // The next message of `peer` (its seq the next): the posted receive it matches, its status set
  // and its buffer allocated if it asked for one; else null, and `arrival` a new unexpected
  // message of `length` bytes (not queued yet).
  MessageOpPtr Match(int peer, int32_t tag, uint64_t length, std::shared_ptr<Arrival>& arrival);
  // Copies out `n` bytes of the channel's current message, which have arrived.
  void TakeArrived(ShmChannel& ch, void* dst, size_t n);
  // Connected and greeted: sends may be written on it now.
  static bool Greeted(const Conn& c);
  // One non-blocking pass over the streams `op` waits on, on the waiting thread (`streams`
  // false: a local source's channel only).
  void Drive(const MessageOp& op, bool streams);
  void Posted(const MessageOp& op);
  void Connect(Conn& c);
  void HandleRead(Conn& c);
  void HandleWrite(Conn& c);
  bool ReadFrames(Conn& c);
  // Reads `peer`'s stream (unless `stream` is false) and its channel to this rank in turn, until
  // neither can go on.
  void ReadFrom(int peer, bool stream = true);
  // Takes the messages of `peer`'s channel to this rank, in seq order (stops at a later one).
  void ReadChannel(int peer);
  // Every local rank's channel to this rank (the loop's look for messages nobody nudged).
  void ReadChannels();
  // A send through the channel to `dest`: kByStream (it did not go), kSent (done) or kCopyOut
  // (its descriptor went; the op waits in copy_outs_ for the receiver's copy).
  enum class ChannelSend { kByStream, kSent, kCopyOut };
  ChannelSend SendThroughChannel(const MessageOpPtr& op, int dest, int32_t tag, const uint8_t* data, uint64_t bytes, uint64_t seq);
  // Whether this rank may hand `dest` messages to copy out of its memory (probed once).
  bool CopyOutWorks(int dest);
  // Ends the copy-outs to `dest` whose descriptors the receiver has consumed.
  void CheckCopyOuts(int dest);
  // Takes a copy-out message (header read) into `dst` (room bytes of it): the body from the
  // sender's memory, then the trailer; an error text when the copy failed.
  std::string TakeCopyOut(int peer, ChannelIn& in, uint8_t* dst, uint64_t room);
  // After a message through the channel: a nudge on the stream unless `dest` looks anyway.
  void Nudge(int dest);
  // Writes `until` (ns) to this rank's messages_unnudged_until, then fences.
  void PublishUnnudged(int64_t until);
  void Greet(Conn& c);
  void AcceptAll();
  // At close, with the thread stopped: takes in what arrived and no pass of the loop read yet
  // (connections in the backlog, frames in the sockets), so that the close notice counts those
  // messages, and no unread bytes turn the close into a reset at the peer, which would then see
  // its stream break instead of the Bye.
  void DrainArrived();
  // `why`: the whole reason the peer is gone, should this end show it.
  void EndConn(Conn& c, const std::string& why);
  void PeerGone(int peer, const std::string& why);
  void FailRecvsFrom(int peer);
  // Ends the copy-outs to `peer` still waiting for its copy.
  void FailCopyOuts(int peer, const std::string& code, const std::string& why);
  void Expire(std::chrono::steady_clock::time_point now);
  std::chrono::steady_clock::time_point Deadline() const;
  Conn& OutConn(int peer);
  std::string Describe(int source, int32_t tag) const;
  static std::string Gone(int peer, const std::string& why);

  Options options_;
  std::string token_;
  std::vector<TcpPeer> peers_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool stopping_ = false;
  // When the progress thread's current sleep ends at the latest (min: it is awake, or not started).
  std::chrono::steady_clock::time_point loop_wakes_at_ = std::chrono::steady_clock::time_point::min();
  // Until when blocking waits drive the incoming streams (Wait), and whether the loop's current
  // sleep leaves them out; ops posted with notify and not done yet (the loop must read for them).
  std::chrono::steady_clock::time_point driven_until_ = std::chrono::steady_clock::time_point::min();
  bool loop_skips_inputs_ = false;
  int pending_notify_ = 0;
  uint64_t moved_ = 0;  // bytes read and written on every stream so far (Wait's progress)
  bool closed_ = false;
  MatchQueues<MessageOpPtr, std::shared_ptr<Arrival>> match_;
  std::vector<std::unique_ptr<Conn>> out_;       // by peer: this rank's connection to it
  std::vector<std::unique_ptr<Conn>> in_;        // by peer: its connection to this rank
  std::vector<std::unique_ptr<Conn>> greeting_;  // accepted, hello not read yet
  std::vector<std::string> gone_;                // by peer: why it is gone (empty: not gone)
  std::vector<bool> gone_evidence_;              // an end seen on out_[peer] while in_[peer] still streams
  std::vector<uint8_t> discard_;                 // the bytes of a message beyond its receive's capacity
  MessageNode node_;
  WaitPolicy channel_policy_;                           // only its `asymmetric` matters (the rings' fences)
  std::vector<uint64_t> sent_seq_;                      // by destination: the next message's seq
  std::vector<uint64_t> next_seq_;                      // by source: the seq of the next message to match
  std::vector<std::unique_ptr<ChannelIn>> channel_in_;  // by source (local ranks only)
  // By destination: copy-outs whose descriptors went, with the channel position after each.
  std::vector<std::deque<std::pair<MessageOpPtr, uint64_t>>> copy_outs_;
  std::vector<int8_t> copy_out_works_;  // by destination: 0 not probed yet, 1 yes, -1 no
  int copy_outs_pending_ = 0;
  Paths paths_;
  std::vector<ShmChannel*> channel_out_;  // by destination: this rank's message channel to it, once made
};

}  // namespace topocoll
