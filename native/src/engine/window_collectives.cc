// The window collectives (window_collectives.h): the window allreduce and allgather, and S1's
// one-sided bcast steps between ranks of one node, all through the node's shared windows.
#include "engine/window_collectives.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/errors.h"

namespace topocoll {

uint8_t* WindowCollectives::Create(uint32_t id, const std::string& name, const std::vector<uint64_t>& part_bytes) {
  ShmWindow w = ShmWindow::Create(name, WindowLayout(part_bytes));
  uint8_t* base = w.base();
  table_.Add(id, std::move(w));
  return base;
}

uint8_t* WindowCollectives::Open(uint32_t id, const std::string& name, const std::vector<uint64_t>& part_bytes) {
  ShmWindow w = ShmWindow::Open(name, WindowLayout(part_bytes));
  uint8_t* base = w.base();
  table_.Add(id, std::move(w));
  return base;
}

void WindowCollectives::MeetingBlocks(uint64_t words) {
  // The area's allgather takes blocks by global rank: `words` each for the ranks of this node
  // (all of the job's: the window collectives run on one-node jobs), in local order.
  counts_.assign(static_cast<size_t>(size_), 0);
  displs_.assign(static_cast<size_t>(size_), 0);
  for (size_t r = 0; r < node_.size(); ++r) {
    const auto rank = static_cast<size_t>(node_.peers()[r].rank);
    counts_[rank] = words;
    displs_[rank] = words * r;
  }
}

void WindowCollectives::LastMeeting(const MsgHeader& h, bool every_rank, ShmAllreduce& area, const WaitPolicy& policy, Guard& guard) {
  // An allgather of nothing (into a place that is never written).
  guard.WaitingOnNode();
  counts_.assign(static_cast<size_t>(size_), 0);
  uint8_t nowhere = 0;
  area.Allgather(&nowhere, counts_, counts_, 1, h, every_rank, policy, guard);
}

// The window allreduce (XHC's single copy), every rank of a one-node job:
//   1. every rank publishes where its send and recv buffers lie in its window parts (window id,
//      offset) and its `reduced` count (shm_window.h), through the node-wide area's allgather
//      (which also checks the headers);
//   2. the count is cut into one slice per rank, each slice into chunks; for each chunk k, rank
//      i combines chunk k of slice i of every rank's send — its own first, then the others in
//      local order — into its own recv and counts it in `reduced`, then copies chunk k − 1 of
//      every other slice j out of rank j's recv once rank j has counted it (one chunk behind,
//      so its owner has usually finished it); chunks keep each rank's working set in its
//      caches, and a chunk is read by the others while it is still in its writer's;
//   3. a last meeting (the area's allgather of nothing), after which no rank reads another's
//      buffers any more, so each may change them.
// A rank reads another's send only for that rank's slice's combining and its recv only in slice
// j, which rank j wrote before counting the chunk and nobody writes afterwards: IN_PLACE (send =
// recv) needs nothing else. Each element is combined once, by one rank, so every rank gets the
// same bits.
void WindowCollectives::Allreduce(const uint8_t* send, uint8_t* recv, uint64_t count, size_t elem, const MsgHeader& h, const Reducer& fn,
                                  bool every_rank, ShmAllreduce& area, const WaitPolicy& policy, Guard& guard) {
  if (fn.kernel == nullptr || fn.kernel3 == nullptr) throw CollError("EINVAL", "a window allreduce takes built-in operators only");
  const size_t n = node_.size();
  const auto me = static_cast<size_t>(node_.index());
  const size_t bytes = static_cast<size_t>(count) * elem;
  WindowPlace sp{}, rp{};
  if (!table_.Locate(send, bytes, me, &sp) || !table_.Locate(recv, bytes, me, &rp)) {
    throw CollError("EINVAL", "a window allreduce's send and recv buffers must both lie in this rank's parts of shared windows");
  }
  std::atomic<uint64_t>& my_reduced = table_.Counter(rp.id, me)->reduced;
  const uint64_t my_start = my_reduced.load(std::memory_order_relaxed);
  // 1. Every rank's places and start: kPlaceWords words per local rank, in local order.
  constexpr size_t kPlaceWords = 5;
  std::vector<uint64_t>& places = places_;
  places.assign(kPlaceWords * n, 0);
  uint64_t* mine = &places[kPlaceWords * me];
  mine[0] = sp.id;
  mine[1] = sp.offset;
  mine[2] = rp.id;
  mine[3] = rp.offset;
  mine[4] = my_start;
  MeetingBlocks(kPlaceWords);
  guard.WaitingOnNode();
  area.Allgather(reinterpret_cast<uint8_t*>(places.data()), counts_, displs_, sizeof(uint64_t), h, every_rank, policy, guard);
  const auto resolve = [&](size_t r, size_t word) -> uint8_t* {
    size_t window_bytes = 0;
    uint8_t* base = table_.Base(static_cast<uint32_t>(places[kPlaceWords * r + word]), &window_bytes);
    const uint64_t offset = places[kPlaceWords * r + word + 1];
    if (base == nullptr || offset + bytes > window_bytes) {
      throw CollError("EINVAL", "local rank " + std::to_string(r) + "'s allreduce buffer lies in a shared window this rank does not map");
    }
    return base + offset;
  };
  std::vector<const uint8_t*>& sends = sends_;
  std::vector<uint8_t*>& recvs = recvs_;
  std::vector<std::atomic<uint64_t>*>& reduced = reduced_;
  sends.assign(n, nullptr);
  recvs.assign(n, nullptr);
  reduced.assign(n, nullptr);
  for (size_t r = 0; r < n; ++r) {
    sends[r] = resolve(r, 0);
    recvs[r] = resolve(r, 2);
    reduced[r] = &table_.Counter(static_cast<uint32_t>(places[kPlaceWords * r + 2]), r)->reduced;
  }
  // 2. Slices and chunks of whole 64-byte lines (at least one element), so no two ranks write
  // one line; every slice has `per` elements but the last ones, which may be shorter or empty.
  const uint64_t quantum = std::max<uint64_t>(1, 64 / elem);
  const uint64_t per = ((count + n - 1) / n + quantum - 1) / quantum * quantum;
  const uint64_t chunk = std::max<uint64_t>(quantum, kWindowChunkBytes / elem / quantum * quantum);
  const uint64_t chunks = per == 0 ? 0 : (per + chunk - 1) / chunk;
  // Elements [lo, hi) of chunk k of slice r (empty past the slice's end).
  const auto piece = [&](size_t r, uint64_t k) {
    const uint64_t slice_lo = std::min<uint64_t>(count, r * per);
    const uint64_t slice_hi = r + 1 == n ? count : std::min<uint64_t>(count, (r + 1) * per);
    const uint64_t lo = std::min(slice_hi, slice_lo + k * chunk);
    const uint64_t hi = std::min(slice_hi, lo + chunk);
    return std::pair<uint64_t, uint64_t>{lo, hi};
  };
  const auto combine = [&](uint64_t k) {
    const auto [lo, hi] = piece(me, k);
    if (hi > lo) {
      const size_t at = static_cast<size_t>(lo * elem);
      const auto len = static_cast<size_t>(hi - lo);
      uint8_t* out = recv + at;
      size_t next = 0;
      if (out != send + at) {
        // out = own op the first other (kernel3), or a copy of its own when it is alone.
        while (next < n && next == me) ++next;
        if (next < n)
          fn.kernel3(out, send + at, sends[next++] + at, len);
        else
          std::memcpy(out, send + at, len * elem);
      }
      for (; next < n; ++next) {
        if (next != me) fn.kernel(out, sends[next] + at, len);
      }
    }
    my_reduced.store(my_start + k + 1, std::memory_order_release);
    for (size_t r = 0; r < n; ++r) {
      if (r != me) node_.control(r).doorbell.Ring(policy.asymmetric);
    }
  };
  const auto take = [&](uint64_t k) {
    for (size_t r = 0; r < n; ++r) {
      if (r == me) continue;
      const auto [lo, hi] = piece(r, k);
      if (hi <= lo) continue;
      const uint64_t want = places[kPlaceWords * r + 4] + k + 1;
      std::atomic<uint64_t>& done = *reduced[r];
      if (done.load(std::memory_order_acquire) < want) {
        guard.WaitingOn(node_.peers()[r].rank);
        WaitUntil([&] { return done.load(std::memory_order_acquire) >= want; }, node_.own().doorbell, policy, guard);
      }
      std::memcpy(recv + lo * elem, recvs[r] + lo * elem, static_cast<size_t>((hi - lo) * elem));
    }
  };
  for (uint64_t k = 0; k < chunks; ++k) {
    combine(k);
    if (k > 0) take(k - 1);
  }
  if (chunks > 0) take(chunks - 1);
  // 3. The last meeting.
  LastMeeting(h, every_rank, area, policy, guard);
}

// The window allgather, every rank of a one-node job:
//   1. every rank publishes where its own block lies in its window parts (window id, offset),
//      through the node-wide area's allgather (which also checks the headers: every rank's
//      block lengths are folded into them);
//   2. each rank copies every other rank's block straight out of that rank's window into its
//      place in its own result — one copy per block, where the area and the channels take two;
//   3. a last meeting (the area's allgather of nothing), after which no rank reads another's
//      block any more, so each may change its own.
// A rank reads only the others' own blocks, which nobody writes during the call (IN_PLACE: the
// owner's place in its result, which its owner does not write either: it writes the others').
void WindowCollectives::Allgather(const uint8_t* own, uint8_t* recv, const std::vector<uint64_t>& block_counts,
                                  const std::vector<uint64_t>& block_displs, size_t elem, const MsgHeader& h, bool every_rank,
                                  ShmAllreduce& area, const WaitPolicy& policy, Guard& guard) {
  const size_t n = node_.size();
  const auto me = static_cast<size_t>(node_.index());
  const auto block_bytes = [&](size_t r) { return static_cast<size_t>(block_counts[static_cast<size_t>(node_.peers()[r].rank)] * elem); };
  WindowPlace place{};
  // An empty block is read by nobody: wherever it lies.
  if (block_bytes(me) > 0 && !table_.Locate(own, block_bytes(me), me, &place)) {
    throw CollError("EINVAL",
                    "a window allgather's own block (send, or recv for IN_PLACE) must lie in this rank's part of a shared window");
  }
  // 1. Every rank's place: two words per local rank, in local order.
  std::vector<uint64_t>& places = places_;
  places.assign(2 * n, 0);
  places[2 * me] = place.id;
  places[2 * me + 1] = place.offset;
  MeetingBlocks(2);
  guard.WaitingOnNode();
  area.Allgather(reinterpret_cast<uint8_t*>(places.data()), counts_, displs_, sizeof(uint64_t), h, every_rank, policy, guard);
  // 2. Every other block, out of its owner's window.
  for (size_t r = 0; r < n; ++r) {
    const size_t bytes = block_bytes(r);
    if (r == me || bytes == 0) continue;
    size_t window_bytes = 0;
    const uint8_t* base = table_.Base(static_cast<uint32_t>(places[2 * r]), &window_bytes);
    const uint64_t offset = places[2 * r + 1];
    if (base == nullptr || offset + bytes > window_bytes) {
      throw CollError("EINVAL", "local rank " + std::to_string(r) + "'s allgather block lies in a shared window this rank does not map");
    }
    const auto rank = static_cast<size_t>(node_.peers()[r].rank);
    std::memcpy(recv + block_displs[rank] * elem, base + offset, bytes);
  }
  // 3. The last meeting.
  LastMeeting(h, every_rank, area, policy, guard);
}

template <typename Ready>
void WindowCollectives::AwaitLocal(Ready&& ready, uint32_t poll_us, const WaitPolicy& policy, Guard& guard) {
  if (poll_us == 0)
    WaitUntil(ready, node_.own().doorbell, policy, guard);
  else
    PollUntil(ready, std::chrono::microseconds(poll_us), policy, guard);
}

// S1's one-sided bcast, one step at a time (protocol: shm_window.h, counters[r].put and .done).
// Between ranks of this node every step works through the window holding B, at B's offset
// from the start of this rank's part — the same window and offset on every rank (the plan hash
// carries them: ranks that differ disagree on the call; a parent also checks its child's place
// before it writes). (Between nodes the executor sends puts and done counts as messages.)
void WindowCollectives::OneSided(const Step& s, const MsgHeader& header, uint32_t call, uint8_t* b, size_t bytes, const WaitPolicy& policy,
                                 Guard& guard) {
  const auto me = static_cast<size_t>(node_.index());
  const auto place = [&] {
    WindowPlace p{};
    if (!table_.Locate(b, bytes, me, &p)) {
      throw CollError("EINVAL",
                      "a one-sided bcast among ranks of one node needs its buffer in this rank's part of a shared window (allocShared)");
    }
    return p;
  };
  const auto poll_us = static_cast<uint32_t>(std::max<int32_t>(0, s.poll_us));
  const auto counter = [&](const WindowPlace& p, size_t local) -> WindowCounter& {
    WindowCounter* c = table_.Counter(p.id, local);
    if (c == nullptr) throw CollError("EINVAL", "the shared window of this one-sided bcast's buffer is no longer mapped");
    return *c;
  };
  // A peer this wait depends on that is past this call, or in it planned differently, will
  // never write what the wait waits for (it ran this bcast otherwise: the levels on ordinary
  // memory, another window). The guard compares calls once; this looks every 64th time.
  uint32_t looks = 0;
  const auto stray = [&](int local_peer) {
    if ((++looks & 63) != 0) return false;
    MsgHeader theirs{};
    if (!liveness_.ReadPublishedCall(local_peer, &theirs)) return false;
    return static_cast<int32_t>(theirs.seq - header.seq) > 0 || !DescribeCallMismatch(header, theirs, s.peer).empty();
  };
  const auto strayed = [&](int local_peer) {
    MsgHeader theirs{};
    liveness_.ReadPublishedCall(local_peer, &theirs);
    const std::string differs = DescribeCallMismatch(header, theirs, s.peer);
    return CollError("EMISMATCH", !differs.empty() ? differs
                                                   : "rank " + std::to_string(s.peer) + " went on to call " + std::to_string(theirs.seq) +
                                                         " without its part in this one-sided bcast (call " + std::to_string(header.seq) +
                                                         "): it ran this bcast otherwise (ordinary memory, or another window)");
  };
  switch (s.kind) {
    case StepKind::kPut: {
      const WindowPlace mine = place();
      const auto peer = static_cast<size_t>(s.local_peer);
      WindowPut& line = counter(mine, peer).put;
      guard.WaitingOn(s.peer);
      bool gone = false;
      const auto ready = [&] { return line.ready.load(std::memory_order_acquire) == call; };
      AwaitLocal([&] { return ready() || (gone = stray(s.local_peer) && !ready()); }, 0, policy, guard);
      if (gone) throw strayed(s.local_peer);
      uint64_t at = 0;
      uint8_t* into = table_.PeerPlace(mine, me, peer, bytes, &at);
      const uint64_t their_at = line.offset.load(std::memory_order_relaxed);
      const uint64_t their_bytes = line.bytes.load(std::memory_order_relaxed);
      if (into == nullptr || their_at != at || their_bytes != bytes) {
        throw CollError("EMISMATCH", "rank " + std::to_string(s.peer) + "'s one-sided bcast buffer lies elsewhere in the shared window (" +
                                         std::to_string(their_bytes) + " bytes at offset " + std::to_string(their_at) +
                                         " of its part) than this rank's (" + std::to_string(bytes) + " bytes at offset " +
                                         std::to_string(at) + " of its part): every rank's buffer must lie at the same offset of its part");
      }
      if (bytes > 0) std::memcpy(into, b, bytes);
      line.arrived.fetch_add(1, std::memory_order_release);
      node_.control(peer).doorbell.Ring(policy.asymmetric);
      return;
    }
    case StepKind::kAwaitPut: {
      const WindowPlace mine = place();
      uint64_t at = 0;
      table_.PeerPlace(mine, me, me, bytes, &at);
      WindowPut& line = counter(mine, me).put;
      line.offset.store(at, std::memory_order_relaxed);
      line.bytes.store(bytes, std::memory_order_relaxed);
      line.ready.store(call, std::memory_order_release);
      node_.control(static_cast<size_t>(s.local_peer)).doorbell.Ring(policy.asymmetric);
      guard.WaitingOn(s.peer);
      bool gone = false;
      // A parent that went on after its put raised `arrived` first: looked at again after the
      // stray check (which saw the parent's later call), it reads 1.
      const auto arrived = [&] { return line.arrived.load(std::memory_order_acquire) >= 1; };
      AwaitLocal([&] { return arrived() || (gone = stray(s.local_peer) && !arrived()); }, poll_us, policy, guard);
      if (gone) throw strayed(s.local_peer);
      line.arrived.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    case StepKind::kCountDone: {
      counter(place(), static_cast<size_t>(s.local_peer)).done.fetch_add(1, std::memory_order_release);
      node_.control(static_cast<size_t>(s.local_peer)).doorbell.Ring(policy.asymmetric);
      return;
    }
    case StepKind::kAwaitDone: {
      // (The executor has received the done counts of the other nodes.)
      const auto others = static_cast<uint32_t>(node_.size() - 1);
      if (others == 0) return;
      std::atomic<uint32_t>& done = counter(place(), me).done;
      guard.WaitingOnNode();
      AwaitLocal([&] { return done.load(std::memory_order_acquire) >= others; }, poll_us, policy, guard);
      done.fetch_sub(others, std::memory_order_relaxed);
      return;
    }
    default: throw CollError("EINVAL", "not a one-sided bcast step");
  }
}

}  // namespace topocoll
