// A one-way message ring between two processes of a node, in the shared segment.
//
// Every message starts with an 8-byte frame word on an 8-byte boundary: its length and whether
// it is streamed. The receiver waits on the frame word itself, so a small message costs it the
// cache lines of the message and nothing else — no separate counter to pull from the sender's
// cache first (the fast-box technique of shared-memory MPI transports). The sender writes the
// body, zeroes the frame word after it (where the receiver will look next), then stores the
// frame with release order. Because the next frame is zeroed before the message is published,
// the receiver never takes stale bytes of an earlier lap for a frame.
//
// A message that is too large to be written at once (more than a piece, or more than half the
// ring) is streamed: its frame says so and `head`, the count of bytes published, grows piece by
// piece as the sender writes, so the receiver copies one piece while the sender writes the next.
// `tail` is the receiver's count of bytes consumed; the sender reads it only when the ring looks
// full. Bodies are padded to 8 bytes, which lets the receiver reduce elements straight out of
// the ring.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/cache_line.h"
#include "base/message.h"
#include "base/wait.h"

namespace topocoll {

struct ChannelControl {
  alignas(kFalseSharingBytes) std::atomic<uint64_t> head;  // bytes published (sender; streamed messages only)
  alignas(kFalseSharingBytes) std::atomic<uint64_t> tail;  // bytes consumed (receiver)
};

class ShmChannel {
 public:
  ShmChannel() = default;
  ShmChannel(ChannelControl* control, uint8_t* data, uint64_t capacity, Doorbell* sender, Doorbell* receiver)
      : control_(control), data_(data), capacity_(capacity), sender_(sender), receiver_(receiver) {}

  bool valid() const { return control_ != nullptr; }
  uint64_t capacity() const { return capacity_; }

  // Sender: writes the slices back to back as one message (of at least one byte: EINVAL and
  // nothing written otherwise).
  void Send(const ByteSlice* slices, size_t count, const WaitPolicy& policy, WaitGuard& guard);
  // Sender: writes the slices as one message, at once, if it takes at most half the ring and
  // fits it now; false, and nothing written, otherwise. Never waits. (Unlike Send, up to half
  // the ring rather than a piece: nothing pipelines a message that is written whole.)
  bool TrySend(const ByteSlice* slices, size_t count, const WaitPolicy& policy);
  // Sender: where the next message will start (after the last one written: TrySend's end).
  uint64_t head() const { return head_; }
  // Sender: whether the receiver has consumed everything before `position`.
  bool Consumed(uint64_t position) const { return control_->tail.load(std::memory_order_acquire) >= position; }

  // Receiver: waits for `n` bytes of the current message (the next one when the last is done)
  // and copies them out (n a multiple of 8, e.g. the header).
  void ReadExact(void* dst, size_t n, const WaitPolicy& policy, WaitGuard& guard);

  // Receiver: hands `n` bytes of the current message to consume(const uint8_t*, size_t) in
  // pieces whose sizes are multiples of 8 (but the last); a message read to its end is done.
  template <typename Sink>
  void Consume(size_t n, Sink&& consume, const WaitPolicy& policy, WaitGuard& guard);

  // --- both directions at once (an exchange: send to one peer while receiving from another) ---
  // A streamed message written in parts between other work: its slices and how far they are
  // written.
  struct Outgoing {
    const ByteSlice* slices;
    size_t count;
    size_t slice = 0;
    uint64_t written = 0;  // bytes of slices[slice]
    bool framed = false;
    bool done = false;
  };
  // Whether Send writes a message of `length` bytes at once; larger ones are streamed.
  bool AtOnce(uint64_t length) const { return 8 + Padded(length) <= AtOnceLimit(); }
  // Sender: streams up to `budget` more bytes of m that fit the ring now and publishes them;
  // false when the ring had no room. m has at least one byte (EINVAL otherwise).
  bool SendSome(Outgoing& m, uint64_t budget, const WaitPolicy& policy);
  // Sender, before waiting for room: publishes its position, so the receiver rings once half
  // the ring is free (HalfFree).
  void AnnounceWaitForRoom(const WaitPolicy& policy);
  bool HalfFree() { return head_ - (known_tail_ = control_->tail.load(std::memory_order_acquire)) <= capacity_ / 2; }
  // Receiver: whether bytes of the current (or next) message have arrived to be consumed.
  bool Arrived() {
    if (tail_ == message_end_ && !TryBeginMessage()) return false;
    return published_ > tail_ || TryMorePublished();
  }
  // Receiver: Consume without waiting — takes what has arrived, at most n bytes; returns how
  // many it took.
  template <typename Sink>
  size_t ConsumeArrived(size_t n, Sink&& consume, const WaitPolicy& policy);

 private:
  // Largest piece published at once: small enough that the receiver copies one piece while the
  // sender writes the next.
  static constexpr uint64_t kPiece = 64 * 1024;
  // Frame word: the body's length in bytes, and this bit for a streamed message. Never zero:
  // every message carries at least a header.
  static constexpr uint64_t kStreamed = uint64_t{1} << 63;

  std::atomic<uint64_t>& FrameAt(uint64_t position) {
    return *reinterpret_cast<std::atomic<uint64_t>*>(data_ + (position & (capacity_ - 1)));
  }
  static uint64_t Padded(uint64_t n) { return (n + 7) & ~uint64_t{7}; }
  // Copies `n` bytes into the ring at `position`, across its end if need be.
  void CopyIn(uint64_t position, const uint8_t* src, uint64_t n);
  // Sender: one message of `length` bytes that goes at once and fits the ring.
  void WriteAtOnce(const ByteSlice* slices, size_t count, uint64_t length, const WaitPolicy& policy);
  // Sender: waits until `bytes` more fit in the ring.
  void WaitForRoom(uint64_t bytes, const WaitPolicy& policy, WaitGuard& guard);
  uint64_t AtOnceLimit() const { return capacity_ / 2 - 8 < kPiece ? capacity_ / 2 - 8 : kPiece; }
  // Sender: bytes it may write as far as it knows (known_tail_). 8 bytes always stay free: the
  // zeroed frame after the newest message must not overwrite one the receiver has yet to read.
  uint64_t Room() const { return capacity_ - 8 - (head_ - known_tail_); }
  // Sender: whether `bytes` fit, reading the receiver's `tail` again if need be.
  bool HasRoom(uint64_t bytes);
  // Receiver: reads the frame of the next message at `tail_` if it is there.
  bool TryBeginMessage();
  // Receiver: whether the streamed message has more than `tail_` published (updates published_).
  bool TryMorePublished();
  // Receiver: hands on up to n bytes of what is published (published_ > tail_) and frees them.
  template <typename Sink>
  size_t ConsumePublished(size_t n, Sink& consume, const WaitPolicy& policy);

  ChannelControl* control_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t capacity_ = 0;  // a power of two
  Doorbell* sender_ = nullptr;
  Doorbell* receiver_ = nullptr;
  // Sender side: the next message's position, and the receiver's `tail` as last read (it only
  // grows).
  uint64_t head_ = 0;
  uint64_t known_tail_ = 0;
  // Receiver side: the position it has consumed up to, the end of the current message's body
  // (== tail_ between messages), and how far that message is known to be published.
  uint64_t tail_ = 0;
  uint64_t message_end_ = 0;
  uint64_t published_ = 0;
};

template <typename Sink>
size_t ShmChannel::ConsumePublished(size_t n, Sink& consume, const WaitPolicy& policy) {
  const uint64_t offset = tail_ & (capacity_ - 1);
  uint64_t piece = published_ - tail_;
  if (piece > n) piece = n;
  if (piece > capacity_ - offset) piece = capacity_ - offset;
  consume(data_ + offset, static_cast<size_t>(piece));
  tail_ += piece;
  // The end of a body: step over its padding, so the next frame is where tail_ points.
  if (tail_ == message_end_) message_end_ = published_ = tail_ = Padded(tail_);
  control_->tail.store(tail_, std::memory_order_release);
  // A sender that waits for room (WaitForRoom) has first stored its position in `head`, which
  // is then at or past tail_; it waits for half the ring. Only such a sender is rung. A `head`
  // behind tail_ is from an earlier wait or stream, and ringing on it would wake the sender
  // from whatever else it sleeps on (a barrier, say) once per message consumed — each time a
  // futex wake, a context switch and the sleeper's membarrier, far more than the message
  // itself. The store of tail_ and the load of `head` pair with the sender's store of `head`
  // and load of `tail` (Dekker): a fence here, or the membarrier the sender makes before it
  // sleeps.
  if (policy.asymmetric)
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint64_t advertised = control_->head.load(std::memory_order_relaxed);
  if (advertised >= tail_ && advertised - tail_ <= capacity_ / 2) sender_->Ring(policy.asymmetric);
  return static_cast<size_t>(piece);
}

template <typename Sink>
void ShmChannel::Consume(size_t n, Sink&& consume, const WaitPolicy& policy, WaitGuard& guard) {
  while (n > 0) {
    if (tail_ == message_end_ && !TryBeginMessage()) WaitUntil([&] { return TryBeginMessage(); }, *receiver_, policy, guard);
    if (published_ == tail_ && !TryMorePublished()) WaitUntil([&] { return TryMorePublished(); }, *receiver_, policy, guard);
    n -= ConsumePublished(n, consume, policy);
  }
}

template <typename Sink>
size_t ShmChannel::ConsumeArrived(size_t n, Sink&& consume, const WaitPolicy& policy) {
  size_t taken = 0;
  while (taken < n && Arrived()) taken += ConsumePublished(n - taken, consume, policy);
  return taken;
}

}  // namespace topocoll
