// Windows: shared memory that every rank of a node maps, one part per local rank
// (comm.allocShared; MPI_Win_allocate_shared). One POSIX segment per node and window:
//
//   [ WindowHeader (a line) | one WindowCounter (four lines) per local rank | part 0 | part 1 | … ]
//
// Parts start on page boundaries in local-rank order; part i has the length local rank i asked
// for (rounded up to a page). Every local rank computes the same layout from the same lengths
// (exchanged by the communicator before anything is created), so nothing but the header's
// check words travels in the segment.
//
// The protocol, by word:
//   header (magic, local_size, total_bytes): the creator (the node's lowest rank) writes them
//     before it tells the others the window exists (the communicator's barrier); an opener
//     checks them against its own layout.
//   counters[r].readers: the single-copy bcast's (shm_bcast.h, window mode). Root r stores the
//     number of readers before it notifies them; each reader subtracts 1 (acq_rel) once it has
//     copied out of r's part, then rings r's doorbell; r returns only when it reads 0, so its
//     part may change as soon as its call returns.
//   counters[r].reduced: the window allreduce's (WindowCollectives::Allreduce). Only local rank r
//     writes it, in the window its recv buffer lies in: the chunks of its slice it has combined,
//     counted over every call (it only grows). r publishes its value at the call's start with
//     its buffers' places; after combining chunk k it stores start + k + 1 (release) and rings
//     every local rank; a rank copies chunk k of r's slice once it reads at least that
//     (acquire).
//   counters[r].put: S1's one-sided bcast (WindowCollectives::OneSided: kPut, kAwaitPut),
//     between r and its parent in the bcast's tree. r, once in the call, stores where its
//     buffer lies (offset from its part's start, bytes), then `ready` = the call's hash
//     (release), and rings the parent's doorbell. The parent waits for `ready` to equal its own
//     call's hash (acquire) — so it never writes into r's memory before r called, nor into a
//     call r does not make — checks that the place is its own buffer's, copies the data into
//     r's part there, adds 1 to `arrived` (release) and rings r's doorbell. r waits for
//     `arrived` ≥ 1 (acquire) and subtracts 1: `arrived` is 0 between calls.
//   counters[r].done: S1's done counter, at the bcast's root r. Every other local rank adds 1
//     (release) once it has its data and has forwarded it, then rings r's doorbell; r waits for
//     the count of its other local ranks (acquire) and subtracts it, so it is 0 between calls.
//
// Lifetime: the name is unlinked as soon as every local rank has mapped it (or any step of the
// allocation failed), so no exit leaves it in /dev/shm; the mappings go with freeShared() or the
// communicator. The engine's table is changed only between collectives (allocShared and
// freeShared are collectives themselves, refused while a request is pending), and read by the
// thread that runs the current one; its mutex makes that hand-over explicit.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/abi_generated.h"
#include "base/cache_line.h"
#include "shm/shm_segment.h"

namespace topocoll {

constexpr uint64_t kWindowMagic = 0x574f444e49574354ULL;  // "TCWINDOW"

struct WindowHeader {
  uint64_t magic;
  uint32_t local_size;
  uint64_t total_bytes;
};

// The one-sided bcast's handshake: the child's place and readiness, the parent's arrival (counters[r].put above).
struct WindowPut {
  std::atomic<uint32_t> ready;
  std::atomic<uint32_t> arrived;
  std::atomic<uint64_t> offset;
  std::atomic<uint64_t> bytes;
};

struct WindowCounter {
  alignas(kFalseSharingBytes) std::atomic<uint32_t> readers;
  alignas(kFalseSharingBytes) std::atomic<uint64_t> reduced;
  alignas(kFalseSharingBytes) WindowPut put;
  alignas(kFalseSharingBytes) std::atomic<uint32_t> done;
};
// src/runtime/windows.ts lays windows out too, from abi/abi.yaml's sizes (window).
static_assert(sizeof(WindowHeader) <= abi::kWindowHeaderBytes && abi::kWindowHeaderBytes % alignof(WindowCounter) == 0 &&
                  sizeof(WindowCounter) == abi::kWindowCounterBytes,
              "a window is laid out as abi/abi.yaml says");

// Where each local rank's part lies in a window of these lengths.
struct WindowLayout {
  explicit WindowLayout(const std::vector<uint64_t>& part_bytes);
  std::vector<uint64_t> offsets;  // of each part, from the segment's base
  std::vector<uint64_t> lengths;  // as asked
  uint64_t total_bytes;
};

// A place in a window: which window, and the byte offset from its segment's base.
struct WindowPlace {
  uint32_t id;
  uint64_t offset;
};

class ShmWindow {
 public:
  // The creator sizes the segment and writes the header; an opener checks it.
  static ShmWindow Create(const std::string& name, const WindowLayout& layout);
  static ShmWindow Open(const std::string& name, const WindowLayout& layout);

  uint8_t* base() const { return segment_.base(); }
  size_t bytes() const { return segment_.size(); }
  WindowCounter& counter(size_t local) const { return reinterpret_cast<WindowCounter*>(segment_.base() + abi::kWindowHeaderBytes)[local]; }
  const WindowLayout& layout() const { return layout_; }
  // Bytes of the header and the counters of `locals` local ranks, before the first part.
  static constexpr size_t CountersBytes(size_t locals) { return abi::kWindowHeaderBytes + abi::kWindowCounterBytes * locals; }

 private:
  ShmWindow(ShmSegment segment, WindowLayout layout) : segment_(std::move(segment)), layout_(std::move(layout)) {}
  ShmSegment segment_;
  WindowLayout layout_;
};

// The windows this process maps, by the id the communicator gave them (the same on every rank).
class WindowTable {
 public:
  void Add(uint32_t id, ShmWindow window);
  // Unmaps; false when there is no such window.
  bool Remove(uint32_t id);
  void Clear();
  // The window holding [p, p + bytes) inside this rank's own part (`local`), if any.
  bool Locate(const void* p, size_t bytes, size_t local, WindowPlace* place) const;
  // Base of window `id` and its size; null when this rank does not map it.
  uint8_t* Base(uint32_t id, size_t* bytes) const;
  // The counters of local rank `local` in window `id` (null: no such window).
  WindowCounter* Counter(uint32_t id, size_t local) const;
  // The place `mine` (inside local rank `me`'s part) has in local rank `peer`'s part: the same
  // offset from the part's start, which must hold `bytes` bytes there; null when it does not (or
  // no such window). `offset`: that offset from the part's start.
  uint8_t* PeerPlace(const WindowPlace& mine, size_t me, size_t peer, size_t bytes, uint64_t* offset) const;

 private:
  mutable std::mutex mutex_;
  std::map<uint32_t, ShmWindow> windows_;
};

}  // namespace topocoll
