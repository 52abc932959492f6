// One POSIX shared-memory segment per node and communicator. The node leader creates it with
// O_EXCL and mode 0600; the other local ranks map it; the leader unlinks the name as soon as
// every local rank has mapped it, so no exit — clean or not — leaves anything in /dev/shm.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/cache_line.h"
#include "base/wait.h"

namespace topocoll {

constexpr uint64_t kSegmentMagic = 0x4c4c4f434f504f54ULL;  // "TOPOCOLL"
constexpr uint32_t kSegmentVersion = 7;                    // raised whenever segment_layout.h changes
constexpr size_t kPage = 4096;

// First page of the segment.
struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t local_size;
  uint64_t total_bytes;
  uint64_t outbox_bytes;
  // 1 when every process of the segment registered for membarrier(2): wakers skip their
  // store-load fence and sleepers pay it (wait.h). Decided by the creator for everyone.
  uint32_t asymmetric_fences;
  alignas(kFalseSharingBytes) std::atomic<uint32_t> mapped;
  // Set once by the first process that fails; every waiter checks it and stops.
  alignas(kFalseSharingBytes) std::atomic<uint32_t> abort_code;
  int32_t abort_rank;
  char abort_message[512];
};

// Per local rank: its doorbell, and its pid with a flag saying it left on purpose (close()),
// for liveness checks: a pid that vanished without `departed` is a crashed peer.
// `call` is the collective the rank is in (a MsgHeader's bytes), published under a seqlock
// (`call_version` odd while it is written) so a peer that waits long can check it is in the
// same collective.
struct alignas(kFalseSharingBytes) RankControl {
  Doorbell doorbell;
  alignas(kFalseSharingBytes) std::atomic<int32_t> pid;
  std::atomic<uint32_t> departed;
  alignas(kFalseSharingBytes) std::atomic<uint32_t> call_version;
  std::atomic<uint64_t> call[4];
  // Point-to-point messages (message_streams.h): until this steady-clock time (ns) the rank's
  // messages look at their incoming channels without being told, so a sender skips the nudge
  // it otherwise sends over TCP after a message through a channel. Written by the rank.
  alignas(kFalseSharingBytes) std::atomic<int64_t> messages_unnudged_until;
  // The address, in the rank's own memory, of a word holding kMessagesProbe: a peer that can
  // read it with process_vm_readv may hand this rank large messages to copy out of its memory.
  std::atomic<uint64_t> messages_probe;
};

// Owner of one mapping. Move-only.
class ShmSegment {
 public:
  static ShmSegment Create(const std::string& name, size_t bytes);
  static ShmSegment Open(const std::string& name);
  static void Unlink(const std::string& name);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  uint8_t* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  ShmSegment(uint8_t* base, size_t size) : base_(base), size_(size) {}
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace topocoll
