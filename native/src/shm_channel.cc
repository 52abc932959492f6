#include "shm_channel.h"

namespace topocoll {

void ShmChannel::Send(const ByteSlice* slices, size_t count, const WaitPolicy& policy, WaitGuard& guard) {
  uint64_t head = control_->head.load(std::memory_order_relaxed);
  // The receiver's tail as last read: reading its line on every send would cost a cache miss
  // each; it is read again only when the ring looks full.
  uint64_t& tail = known_tail_;
  uint64_t unpublished = 0;
  auto publish = [&] {
    control_->head.store(head, std::memory_order_release);
    receiver_->Ring(policy.asymmetric);
    unpublished = 0;
  };
  for (size_t s = 0; s < count; ++s) {
    const uint8_t* src = static_cast<const uint8_t*>(slices[s].data);
    size_t left = slices[s].size;
    while (left > 0) {
      if (head - tail == capacity_) tail = control_->tail.load(std::memory_order_acquire);
      if (head - tail == capacity_) {
        if (unpublished > 0) publish();
        // Wait for half the ring, not for one byte: the receiver wakes a sleeping sender only
        // once that much is free, instead of with a system call per message it consumes.
        WaitUntil([&] { return head - (tail = control_->tail.load(std::memory_order_acquire)) <= capacity_ / 2; }, *sender_,
                  policy, guard);
      }
      const uint64_t offset = head & (capacity_ - 1);
      uint64_t piece = capacity_ - (head - tail);
      if (piece > capacity_ - offset) piece = capacity_ - offset;
      if (piece > left) piece = left;
      if (piece > kPiece - unpublished) piece = kPiece - unpublished;
      std::memcpy(data_ + offset, src, piece);
      src += piece;
      left -= piece;
      head += piece;
      unpublished += piece;
      // Only the last piece of a slice can end off an 8-byte boundary; never publish there, so
      // the receiver never sees part of an element.
      if (unpublished >= kPiece && (head & 7) == 0) publish();
    }
  }
  // Pad to 8 bytes. `tail` and the capacity are multiples of 8, so the padded end still fits.
  head = (head + 7) & ~uint64_t{7};
  publish();
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
