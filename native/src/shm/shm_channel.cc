#include "shm/shm_channel.h"

#include "base/errors.h"

namespace topocoll {

namespace {

// A frame word of 0 means "no message yet": a message without bytes would never arrive, and its
// receiver would wait for good.
void CheckNotEmpty(uint64_t length) {
  if (length == 0) {
    throw CollError("EINVAL", "a shared-memory channel message needs at least one byte (a frame of length 0 reads as no message)");
  }
}

}  // namespace

void ShmChannel::CopyIn(uint64_t position, const uint8_t* src, uint64_t n) {
  const uint64_t offset = position & (capacity_ - 1);
  const uint64_t first = n < capacity_ - offset ? n : capacity_ - offset;
  std::memcpy(data_ + offset, src, first);
  if (n > first) std::memcpy(data_, src + first, n - first);
}

void ShmChannel::AnnounceWaitForRoom(const WaitPolicy& policy) {
  // Everything before head_ is written: publish it (a streamed message is waited on) and tell
  // the receiver where this side stands, so it wakes us only once half the ring is free — not
  // with a system call per message it consumes.
  control_->head.store(head_, std::memory_order_release);
  receiver_->Ring(policy.asymmetric);
}

bool ShmChannel::HasRoom(uint64_t bytes) {
  if (Room() >= bytes) return true;
  // The receiver's `tail` is read only when the copy known here says the ring is too full.
  known_tail_ = control_->tail.load(std::memory_order_acquire);
  return Room() >= bytes;
}

void ShmChannel::WaitForRoom(uint64_t bytes, const WaitPolicy& policy, WaitGuard& guard) {
  if (HasRoom(bytes)) return;
  AnnounceWaitForRoom(policy);
  WaitUntil([&] { return HalfFree(); }, *sender_, policy, guard);
}

void ShmChannel::WriteAtOnce(const ByteSlice* slices, size_t count, uint64_t length, const WaitPolicy& policy) {
  // The body, the next frame zeroed, then the frame.
  const uint64_t end = head_ + 8 + Padded(length);
  uint64_t at = head_ + 8;
  for (size_t s = 0; s < count; ++s) {
    CopyIn(at, static_cast<const uint8_t*>(slices[s].data), slices[s].size);
    at += slices[s].size;
  }
  FrameAt(end).store(0, std::memory_order_relaxed);
  FrameAt(head_).store(length, std::memory_order_release);
  head_ = end;
  receiver_->Ring(policy.asymmetric);
}

bool ShmChannel::TrySend(const ByteSlice* slices, size_t count, const WaitPolicy& policy) {
  uint64_t length = 0;
  for (size_t s = 0; s < count; ++s) length += slices[s].size;
  CheckNotEmpty(length);
  if (8 + Padded(length) > capacity_ / 2 || !HasRoom(8 + Padded(length))) return false;
  WriteAtOnce(slices, count, length, policy);
  return true;
}

void ShmChannel::Send(const ByteSlice* slices, size_t count, const WaitPolicy& policy, WaitGuard& guard) {
  uint64_t length = 0;
  for (size_t s = 0; s < count; ++s) length += slices[s].size;
  CheckNotEmpty(length);
  if (AtOnce(length)) {
    WaitForRoom(8 + Padded(length), policy, guard);
    WriteAtOnce(slices, count, length, policy);
    return;
  }
  Outgoing message{slices, count};
  while (!message.done) {
    if (!SendSome(message, ~uint64_t{0}, policy)) WaitForRoom(8, policy, guard);
  }
}

bool ShmChannel::SendSome(Outgoing& m, uint64_t budget, const WaitPolicy& policy) {
  // Streamed: the frame first, then pieces published through `head`. Room is a multiple of 8,
  // so a piece ends off an 8-byte boundary only at the end of a slice — and only the last
  // slice can: the receiver never sees part of an element.
  if (!HasRoom(8)) return false;
  if (!m.framed) {
    uint64_t length = 0;
    for (size_t s = 0; s < m.count; ++s) length += m.slices[s].size;
    CheckNotEmpty(length);
    FrameAt(head_).store(kStreamed | length, std::memory_order_release);
    head_ += 8;
    m.framed = true;
  }
  auto publish = [&] {
    control_->head.store(head_, std::memory_order_release);
    receiver_->Ring(policy.asymmetric);
  };
  uint64_t unpublished = 0;
  while (m.slice < m.count) {
    const ByteSlice& slice = m.slices[m.slice];
    if (m.written == slice.size) {
      ++m.slice;
      m.written = 0;
      continue;
    }
    if (budget == 0) break;
    uint64_t piece = slice.size - m.written;
    if (piece > Room()) piece = Room();
    if (piece > kPiece - unpublished) piece = kPiece - unpublished;
    if (piece > budget) piece = budget;
    if (piece == 0) break;
    CopyIn(head_, static_cast<const uint8_t*>(slice.data) + m.written, piece);
    m.written += piece;
    head_ += piece;
    unpublished += piece;
    budget -= piece;
    // Not the end of the message: that is published below, after the next frame is zeroed —
    // a receiver that saw the whole body would otherwise read that frame's stale bytes.
    const bool last = m.written == slice.size && m.slice + 1 == m.count;
    if (unpublished >= kPiece && (head_ & 7) == 0 && !last) {
      publish();
      unpublished = 0;
    }
  }
  if (m.slice == m.count) {
    head_ = Padded(head_);
    FrameAt(head_).store(0, std::memory_order_relaxed);
    publish();
    m.done = true;
  } else if (unpublished > 0 && (head_ & 7) == 0) {
    // The receiver takes this while the caller does other work.
    publish();
  }
  return true;
}

bool ShmChannel::TryBeginMessage() {
  const uint64_t frame = FrameAt(tail_).load(std::memory_order_acquire);
  if (frame == 0) return false;
  tail_ += 8;
  message_end_ = tail_ + (frame & ~kStreamed);
  published_ = (frame & kStreamed) != 0 ? tail_ : message_end_;
  return true;
}

bool ShmChannel::TryMorePublished() {
  const uint64_t head = control_->head.load(std::memory_order_acquire);
  if (head <= tail_) return false;
  published_ = head < message_end_ ? head : message_end_;
  return true;
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
