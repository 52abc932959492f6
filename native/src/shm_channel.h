// A one-way byte ring between two processes of a node, in the shared segment. The sender owns
// `head`, the receiver owns `tail`, each on its own cache lines; data is published with a
// release store of `head` after it is written and consumed with an acquire load, so no other
// synchronisation is needed. Every message starts and ends on an 8-byte boundary, which lets the
// receiver reduce elements straight out of the ring.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "wait.h"

namespace topocoll {

struct ChannelControl {
  alignas(128) std::atomic<uint64_t> head;  // bytes written (sender)
  alignas(128) std::atomic<uint64_t> tail;  // bytes consumed (receiver)
};

struct ByteSlice {
  const void* data;
  size_t size;
};

class ShmChannel {
 public:
  ShmChannel() = default;
  ShmChannel(ChannelControl* control, uint8_t* data, uint64_t capacity, Doorbell* sender, Doorbell* receiver)
      : control_(control), data_(data), capacity_(capacity), sender_(sender), receiver_(receiver) {}

  bool valid() const { return control_ != nullptr; }

  // Sender: writes the slices back to back as one message, padded to 8 bytes.
  void Send(const ByteSlice* slices, size_t count, const WaitPolicy& policy, WaitGuard& guard);

  // Receiver: waits for `n` bytes and copies them out (n a multiple of 8, e.g. the header).
  void ReadExact(void* dst, size_t n, const WaitPolicy& policy, WaitGuard& guard);

  // Receiver: hands `n` payload bytes to consume(const uint8_t*, size_t) in pieces whose sizes
  // are multiples of 8 (but the last), then skips the padding.
  template <typename Sink>
  void Consume(size_t n, Sink&& consume, const WaitPolicy& policy, WaitGuard& guard);

 private:
  // Largest piece published at once: small enough that the receiver copies one piece while the
  // sender writes the next.
  static constexpr uint64_t kPiece = 64 * 1024;

  uint64_t WaitForData(uint64_t tail, const WaitPolicy& policy, WaitGuard& guard);

  ChannelControl* control_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t capacity_ = 0;  // a power of two
  Doorbell* sender_ = nullptr;
  Doorbell* receiver_ = nullptr;
  // Sender side: the receiver's `tail` as last read (it only grows).
  uint64_t known_tail_ = 0;
  // Receiver side: the sender's `head` as last read (it only grows).
  uint64_t known_head_ = 0;
};

inline uint64_t ShmChannel::WaitForData(uint64_t tail, const WaitPolicy& policy, WaitGuard& guard) {
  uint64_t head = control_->head.load(std::memory_order_acquire);
  if (head != tail) return head;
  WaitUntil([&] { return (head = control_->head.load(std::memory_order_acquire)) != tail; }, *receiver_, policy, guard);
  return head;
}

template <typename Sink>
void ShmChannel::Consume(size_t n, Sink&& consume, const WaitPolicy& policy, WaitGuard& guard) {
  uint64_t tail = control_->tail.load(std::memory_order_relaxed);
  const uint64_t end = tail + n;
  const uint64_t padded_end = (end + 7) & ~uint64_t{7};
  while (tail < end) {
    // The sender's head as last read: reloaded only when everything up to it is consumed, so
    // a receiver behind a streaming sender does not pull the sender's line for every message.
    if (known_head_ == tail) known_head_ = WaitForData(tail, policy, guard);
    const uint64_t head = known_head_;
    const uint64_t offset = tail & (capacity_ - 1);
    uint64_t piece = head - tail;
    if (piece > end - tail) piece = end - tail;
    if (piece > capacity_ - offset) piece = capacity_ - offset;
    consume(data_ + offset, static_cast<size_t>(piece));
    tail += piece;
    // The sender publishes only 8-aligned heads, so the padding after the last byte is already
    // there: step over it at once and keep `tail` aligned.
    const uint64_t consumed = tail == end ? padded_end : tail;
    control_->tail.store(consumed, std::memory_order_release);
    if (known_head_ < consumed) known_head_ = consumed;  // the padding, published with the message
    // A sender waits (Send) until half the ring is free; until then there is nobody to wake.
    if (known_head_ - consumed <= capacity_ / 2) sender_->Ring(policy.asymmetric);
  }
}

}  // namespace topocoll
