#include "shm_channel.h"

namespace topocoll {

void ShmChannel::CopyIn(uint64_t position, const uint8_t* src, uint64_t n) {
  const uint64_t offset = position & (capacity_ - 1);
  const uint64_t first = n < capacity_ - offset ? n : capacity_ - offset;
  std::memcpy(data_ + offset, src, first);
  if (n > first) std::memcpy(data_, src + first, n - first);
}

void ShmChannel::WaitForRoom(uint64_t bytes, const WaitPolicy& policy, WaitGuard& guard) {
  // 8 bytes always stay free: the zeroed frame after the newest message must not overwrite one
  // the receiver has yet to read.
  auto room = [&] { return capacity_ - 8 - (head_ - known_tail_); };
  if (room() >= bytes) return;
  known_tail_ = control_->tail.load(std::memory_order_acquire);
  if (room() >= bytes) return;
  // Everything before head_ is written: publish it (a streamed message is waited on) and tell
  // the receiver where this side stands, so it wakes us only once half the ring is free — not
  // with a system call per message it consumes.
  control_->head.store(head_, std::memory_order_release);
  receiver_->Ring(policy.asymmetric);
  WaitUntil([&] { return head_ - (known_tail_ = control_->tail.load(std::memory_order_acquire)) <= capacity_ / 2; }, *sender_,
            policy, guard);
}

void ShmChannel::Send(const ByteSlice* slices, size_t count, const WaitPolicy& policy, WaitGuard& guard) {
  uint64_t length = 0;
  for (size_t s = 0; s < count; ++s) length += slices[s].size;
  const uint64_t end = head_ + 8 + Padded(length);
  const uint64_t limit = capacity_ / 2 - 8 < kPiece ? capacity_ / 2 - 8 : kPiece;
  if (end - head_ <= limit) {
    // At once: the body, the next frame zeroed, then the frame.
    WaitForRoom(end - head_, policy, guard);
    uint64_t at = head_ + 8;
    for (size_t s = 0; s < count; ++s) {
      CopyIn(at, static_cast<const uint8_t*>(slices[s].data), slices[s].size);
      at += slices[s].size;
    }
    FrameAt(end).store(0, std::memory_order_relaxed);
    FrameAt(head_).store(length, std::memory_order_release);
    head_ = end;
    receiver_->Ring(policy.asymmetric);
    return;
  }
  // Streamed: the frame first, then pieces published through `head`.
  WaitForRoom(8, policy, guard);
  FrameAt(head_).store(kStreamed | length, std::memory_order_release);
  head_ += 8;
  uint64_t unpublished = 0;
  auto publish = [&] {
    control_->head.store(head_, std::memory_order_release);
    receiver_->Ring(policy.asymmetric);
    unpublished = 0;
  };
  for (size_t s = 0; s < count; ++s) {
    const uint8_t* src = static_cast<const uint8_t*>(slices[s].data);
    uint64_t left = slices[s].size;
    while (left > 0) {
      // Room is a multiple of 8, so a piece ends off an 8-byte boundary only at the end of a
      // slice — and only the last slice can: the receiver never sees part of an element.
      WaitForRoom(8, policy, guard);
      uint64_t piece = capacity_ - 8 - (head_ - known_tail_);
      if (piece > left) piece = left;
      if (piece > kPiece - unpublished) piece = kPiece - unpublished;
      CopyIn(head_, src, piece);
      src += piece;
      left -= piece;
      head_ += piece;
      unpublished += piece;
      // Not the end of the message: that is published below, after the next frame is zeroed —
      // a receiver that saw the whole body would otherwise read that frame's stale bytes.
      const bool last = left == 0 && s + 1 == count;
      if (unpublished >= kPiece && (head_ & 7) == 0 && !last) publish();
    }
  }
  head_ = Padded(head_);
  FrameAt(head_).store(0, std::memory_order_relaxed);
  publish();
}

void ShmChannel::BeginMessage(const WaitPolicy& policy, WaitGuard& guard) {
  std::atomic<uint64_t>& word = FrameAt(tail_);
  uint64_t frame = word.load(std::memory_order_acquire);
  if (frame == 0) WaitUntil([&] { return (frame = word.load(std::memory_order_acquire)) != 0; }, *receiver_, policy, guard);
  tail_ += 8;
  message_end_ = tail_ + (frame & ~kStreamed);
  published_ = (frame & kStreamed) != 0 ? tail_ : message_end_;
}

void ShmChannel::WaitForPiece(const WaitPolicy& policy, WaitGuard& guard) {
  uint64_t head = control_->head.load(std::memory_order_acquire);
  if (head <= tail_) {
    WaitUntil([&] { return (head = control_->head.load(std::memory_order_acquire)) > tail_; }, *receiver_, policy, guard);
  }
  published_ = head < message_end_ ? head : message_end_;
}

void ShmChannel::ReadExact(void* dst, size_t n, const WaitPolicy& policy, WaitGuard& guard) {
  uint8_t* out = static_cast<uint8_t*>(dst);
  Consume(
      n,
      [&](const uint8_t* p, size_t len) {
        std::memcpy(out, p, len);
        out += len;
      },
      policy, guard);
}

}  // namespace topocoll
