#include "shm/shm_bcast.h"

#include <algorithm>
#include <cstring>

#include "base/errors.h"

namespace topocoll {

namespace {

const ShmBcastParams& Checked(const ShmBcastParams& p) {
  if (p.min_fragment == 0 || p.queue_bytes < p.min_fragment) {
    throw CollError("EINVAL", "the S0 queue (" + std::to_string(p.queue_bytes) + " bytes) holds no fragment of " +
                                  std::to_string(p.min_fragment) + " bytes");
  }
  return p;
}

size_t SlotCount(const ShmBcastParams& p) { return static_cast<size_t>(p.queue_bytes / p.min_fragment); }

// Sets of at least one min_fragment each, at most kMaxSets: a counter for each in the region.
uint32_t SetCount(const ShmBcastParams& p) {
  const uint64_t wanted = std::clamp<uint32_t>(p.sets, 1, kMaxSets);
  return static_cast<uint32_t>(std::min<uint64_t>(wanted, SlotCount(p)));
}

}  // namespace

ShmBcast::ShmBcast(ShmBcastParams params, std::vector<BcastRegion> regions, std::vector<Doorbell*> doorbells, int me,
                   const WindowTable* windows)
    : params_(Checked(params)),
      blocks_(SlotCount(params_)),
      set_count_(SetCount(params_)),
      set_bytes_(blocks_ / set_count_ * params_.min_fragment),
      regions_(std::move(regions)),
      doorbells_(std::move(doorbells)),
      me_(me),
      windows_(windows),
      known_consumed_(regions_.size() * kMaxRings, 0),
      last_tag_(kMaxRings * blocks_, 0) {}

size_t ShmBcast::FragmentFor(size_t bytes) const {
  if (bytes <= kInlineBytes) return 0;  // inside the control block
  size_t log2 = 0;
  while ((size_t{1} << log2) < bytes) ++log2;
  const auto& table = params_.fragment_for_log2;
  size_t f = table.empty() ? params_.min_fragment : table[std::min(log2, table.size() - 1)];
  // Within a set (a fragment never crosses a set boundary), a whole number of minimal fragments.
  f = std::clamp<size_t>(f, params_.min_fragment, static_cast<size_t>(set_bytes_));
  return f / params_.min_fragment * params_.min_fragment;
}

ShmBcast::TreeLinks ShmBcast::LinksFor(int n, int root_pos, int my_pos, const std::vector<int>& members) const {
  const int v = (my_pos - root_pos + n) % n;
  const int k = std::max<int>(2, static_cast<int>(params_.radix));
  int parent = -1;
  std::vector<int> children;
  switch (params_.tree) {
    case TreeKind::kFlat:
      if (v > 0)
        parent = 0;
      else
        for (int c = 1; c < n; ++c) children.push_back(c);
      break;
    case TreeKind::kChain:
      if (v > 0) parent = v - 1;
      if (v + 1 < n) children.push_back(v + 1);
      break;
    case TreeKind::kKary:
      if (v > 0) parent = (v - 1) / k;
      for (int c = k * v + 1; c <= k * v + k && c < n; ++c) children.push_back(c);
      break;
    case TreeKind::kKnomial: {
      // v's lowest non-zero base-k digit sits at power `low`; its children add j·k^i for every
      // i below that, largest subtrees (highest powers) first.
      long low = 1;
      if (v == 0) {
        while (low < n) low *= k;
      } else {
        while ((v / low) % k == 0) low *= k;
        parent = v - static_cast<int>(((v / low) % k) * low);
      }
      for (long power = low / k; power >= 1; power /= k) {
        for (int j = 1; j < k; ++j) {
          const long c = v + j * power;
          if (c < n) children.push_back(static_cast<int>(c));
        }
      }
      break;
    }
  }
  TreeLinks links;
  links.parent = parent < 0 ? -1 : members[static_cast<size_t>((parent + root_pos) % n)];
  for (int c : children) links.children.push_back(members[static_cast<size_t>((c + root_pos) % n)]);
  return links;
}

void ShmBcast::SetGroup(int id, const std::vector<int>& members) {
  if (id < 0 || id >= static_cast<int>(kMaxRings)) {
    throw CollError("EINVAL", "shared-memory group id " + std::to_string(id) + " is outside 0…" + std::to_string(kMaxRings - 1));
  }
  if (groups_.size() <= static_cast<size_t>(id)) groups_.resize(static_cast<size_t>(id) + 1);
  Group& g = groups_[static_cast<size_t>(id)];
  g.members = members;
  g.links.clear();
  g.sent.assign(members.size(), 0);
  const int n = static_cast<int>(members.size());
  const auto it = std::find(members.begin(), members.end(), me_);
  if (it == members.end()) throw CollError("EINVAL", "this rank is not a member of shared-memory group " + std::to_string(id));
  const int my_pos = static_cast<int>(it - members.begin());
  for (int r = 0; r < n; ++r) g.links.push_back(LinksFor(n, r, my_pos, members));
}

void ShmBcast::Reset() {
  cursor_ = QueueCursor{};
  std::fill(known_consumed_.begin(), known_consumed_.end(), 0);
  std::fill(last_tag_.begin(), last_tag_.end(), 0);
  for (Group& g : groups_) std::fill(g.sent.begin(), g.sent.end(), 0);
  BcastRegion& own = regions_[static_cast<size_t>(me_)];
  for (uint32_t s = 0; s < kMaxSets; ++s) own.sets[s].pending.store(0, std::memory_order_relaxed);
  for (uint32_t r = 0; r < kMaxRings; ++r) own.consumed[r].value.store(0, std::memory_order_relaxed);
  for (uint64_t b = 0; b < kMaxRings * blocks_; ++b) own.rings[b].tag.store(0, std::memory_order_relaxed);
  own.slot_waiter->store(-1, std::memory_order_release);
}

FragmentControl& ShmBcast::Block(int owner, int ring, uint64_t index) {
  return regions_[static_cast<size_t>(owner)].rings[static_cast<uint64_t>(ring) * blocks_ + index % blocks_];
}

void ShmBcast::Notify(int child, int ring, uint64_t index, uint64_t tag, uint64_t offset, uint32_t size, uint32_t call_hash,
                      const uint8_t* inline_data, size_t inline_bytes, const WaitPolicy& policy, WaitGuard& guard) {
  BcastRegion& region = regions_[static_cast<size_t>(child)];
  // The child's consumed count is read only when the copy known here says the block may still
  // be in use: reading the child's line on every notification would cost a cache miss each.
  uint64_t& known = known_consumed_[static_cast<size_t>(child) * kMaxRings + static_cast<size_t>(ring)];
  if (index >= known + blocks_) {
    std::atomic<uint64_t>& consumed = region.consumed[ring].value;
    known = consumed.load(std::memory_order_acquire);
    if (index >= known + blocks_) {
      // The child is a whole ring behind: wait until it has read this block's previous use.
      region.slot_waiter->store(me_, std::memory_order_seq_cst);
      WaitUntil([&] { return index < (known = consumed.load(std::memory_order_acquire)) + blocks_; }, *doorbells_[static_cast<size_t>(me_)],
                policy, guard);
    }
  }
  FragmentControl& c = Block(child, ring, index);
  c.offset = offset;
  c.size = size;
  c.call_hash = call_hash;
  if (inline_bytes > 0) std::memcpy(c.inline_data, inline_data, inline_bytes);
  c.tag.store(tag, std::memory_order_release);
  doorbells_[static_cast<size_t>(child)]->Ring(policy.asymmetric);
}

void ShmBcast::WakeWaiter(BcastRegion& region, const WaitPolicy& policy) {
  // The same Dekker pair as a doorbell's (wait.h): the consumed count stored, then the waiter
  // loaded; the parent stores itself as waiter, then loads the count.
  if (policy.asymmetric)
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
  if (region.slot_waiter->load(std::memory_order_relaxed) >= 0) {
    const int waiter = region.slot_waiter->exchange(-1, std::memory_order_acq_rel);
    if (waiter >= 0) doorbells_[static_cast<size_t>(waiter)]->Ring(policy.asymmetric);
  }
}

void ShmBcast::Release(int ring, uint64_t index, const WaitPolicy& policy) {
  BcastRegion& own = regions_[static_cast<size_t>(me_)];
  own.consumed[ring].value.store(index + 1, std::memory_order_release);
  WakeWaiter(own, policy);
}

FragmentControl& ShmBcast::AwaitBlock(int ring, uint64_t index, uint64_t tag, uint32_t call_hash, const WaitPolicy& policy,
                                      WaitGuard& guard) {
  FragmentControl& c = Block(me_, ring, index);
  // The block still holds the tag of its previous use (blocks are not reset: that write would
  // pull the line back here once more per fragment); a new tag is this fragment, or — when it
  // is another one — a parent in a different call.
  uint64_t& previous = last_tag_[static_cast<size_t>(ring) * blocks_ + index % blocks_];
  uint64_t seen = c.tag.load(std::memory_order_acquire);
  if (seen != tag) {
    if (seen == previous) {
      WaitUntil([&] { return (seen = c.tag.load(std::memory_order_acquire)) != previous; }, *doorbells_[static_cast<size_t>(me_)], policy,
                guard);
    }
    if (seen != tag) {
      throw CollError(
          "EMISMATCH",
          "a shared-memory bcast fragment from another collective call arrived (the ranks of this group are in different calls)");
    }
  }
  previous = tag;
  if (c.call_hash != call_hash) throw CollError("EMISMATCH", "a shared-memory bcast fragment of a call with other arguments arrived");
  return c;
}

void ShmBcast::Run(int id, int root, void* buf, size_t bytes, uint64_t tag_base, uint32_t call_hash, const WaitPolicy& policy,
                   WaitGuard& guard) {
  if (!HasGroup(id)) throw CollError("EINVAL", "unknown shared-memory group " + std::to_string(id));
  const Group& g = groups_[static_cast<size_t>(id)];
  const int n = static_cast<int>(g.members.size());
  if (n < 2) return;
  const auto root_it = std::find(g.members.begin(), g.members.end(), root);
  if (root_it == g.members.end()) throw CollError("EINVAL", "the bcast source is not in shared-memory group " + std::to_string(id));
  const TreeLinks& links = g.links[static_cast<size_t>(root_it - g.members.begin())];

  uint8_t* data = static_cast<uint8_t*>(buf);
  const size_t frag = FragmentFor(bytes);
  const bool inline_mode = frag == 0;
  const size_t fragments = inline_mode ? 1 : (bytes + frag - 1) / frag;
  BcastRegion& source = regions_[static_cast<size_t>(root)];
  Doorbell& mine = *doorbells_[static_cast<size_t>(me_)];

  // Where this bcast's fragments go in each member's control ring; every member advances the
  // same counts, so the next bcast in this group finds them without any exchange.
  const int ring = id;
  Group& group = groups_[static_cast<size_t>(id)];
  auto member_index = [&](int member) {
    return static_cast<size_t>(std::find(g.members.begin(), g.members.end(), member) - g.members.begin());
  };
  const uint64_t first_block = group.sent[member_index(me_)];
  std::vector<uint64_t>& child_first = child_first_;  // reused: no allocation per call
  child_first.clear();
  for (int child : links.children) child_first.push_back(group.sent[member_index(child)]);
  auto advance = [&](size_t blocks) {
    for (size_t m = 0; m < g.members.size(); ++m) {
      if (g.members[m] != root) group.sent[m] += blocks;
    }
  };
  auto notify_children = [&](size_t i, uint64_t tag, uint64_t offset, uint32_t size, const uint8_t* inline_src) {
    for (size_t c = 0; c < links.children.size(); ++c) {
      Notify(links.children[c], ring, child_first[c] + i, tag, offset, size, call_hash, inline_src, inline_src ? size : 0, policy, guard);
    }
  };
  if (me_ == root) {
    WindowPlace place{};
    if (!inline_mode && windows_ != nullptr && bytes >= params_.window_min_bytes && bytes <= UINT32_MAX &&
        windows_->Locate(data, bytes, static_cast<size_t>(me_), &place) && place.id <= kMaxWindowId &&
        place.offset < (uint64_t{1} << kWindowIdShift)) {
      // Window mode: the readers copy out of this rank's part; it may change once they all have.
      std::atomic<uint32_t>& readers = windows_->Counter(place.id, static_cast<size_t>(me_))->readers;
      readers.store(static_cast<uint32_t>(n - 1), std::memory_order_relaxed);  // published by the notification's release
      advance(1);
      notify_children(0, tag_base, kWindowFlag | uint64_t{place.id} << kWindowIdShift | place.offset, static_cast<uint32_t>(bytes),
                      nullptr);
      if (readers.load(std::memory_order_acquire) != 0) {
        WaitUntil([&] { return readers.load(std::memory_order_acquire) == 0; }, mine, policy, guard);
      }
      return;
    }
    advance(fragments);
    for (size_t i = 0; i < fragments; ++i) {
      const size_t piece = inline_mode ? bytes : std::min(frag, bytes - i * frag);
      uint64_t offset = 0;
      if (!inline_mode) {
        // Where the previous fragment ended, or — when this one would run into the next set —
        // that set's start, which is entered (and waited for) below.
        offset = Place(cursor_.offset, frag);
        const int64_t set = SetOf(offset);
        std::atomic<uint32_t>& pending = source.sets[set].pending;
        const bool enters = set != cursor_.set || offset == 0 || (i == 0 && cursor_.set < 0);
        if (enters) {
          // Refill a set only when every reader of every earlier call has released it.
          if (pending.load(std::memory_order_acquire) != 0) {
            WaitUntil([&] { return pending.load(std::memory_order_acquire) == 0; }, mine, policy, guard);
          }
          pending.store(static_cast<uint32_t>(n - 1), std::memory_order_relaxed);
        } else if (i == 0) {
          // This call continues in the set the root is filling: its readers join the count.
          pending.fetch_add(static_cast<uint32_t>(n - 1), std::memory_order_relaxed);
        }
        std::memcpy(source.queue + offset, data + i * frag, piece);
        cursor_.set = set;
        cursor_.offset = offset + frag;
      }
      notify_children(i, tag_base + i, offset, static_cast<uint32_t>(piece), inline_mode ? data : nullptr);
    }
    return;
  }

  // A reader learns from the first block whether the root sends in window mode.
  FragmentControl& first = AwaitBlock(ring, first_block, tag_base, call_hash, policy, guard);
  if (!inline_mode && (first.offset & kWindowFlag) != 0) {
    if (first.size != bytes) {
      throw CollError("EMISMATCH", "the bcast root sends " + std::to_string(first.size) + " bytes where this rank expects " +
                                       std::to_string(bytes) + " (count or datatype differ)");
    }
    advance(1);
    const uint64_t word = first.offset;
    const auto window = static_cast<uint32_t>((word & ~kWindowFlag) >> kWindowIdShift);
    const uint64_t offset = word & ((uint64_t{1} << kWindowIdShift) - 1);
    size_t window_bytes = 0;
    const uint8_t* base = windows_ == nullptr ? nullptr : windows_->Base(window, &window_bytes);
    if (base == nullptr || offset + bytes > window_bytes) {
      throw CollError("EINVAL",
                      "the bcast root's buffer lies in shared window " + std::to_string(window) + ", which this rank does not map");
    }
    notify_children(0, tag_base, word, static_cast<uint32_t>(bytes), nullptr);
    std::memcpy(data, base + offset, bytes);
    Release(ring, first_block, policy);
    windows_->Counter(window, static_cast<size_t>(root))->readers.fetch_sub(1, std::memory_order_acq_rel);
    doorbells_[static_cast<size_t>(root)]->Ring(policy.asymmetric);
    return;
  }
  advance(fragments);
  for (size_t i = 0; i < fragments; ++i) {
    const size_t piece = inline_mode ? bytes : std::min(frag, bytes - i * frag);
    const uint64_t tag = tag_base + i;
    FragmentControl& c = i == 0 ? first : AwaitBlock(ring, first_block + i, tag, call_hash, policy, guard);
    if (c.size != piece) {
      throw CollError("EMISMATCH", "the bcast root sends " + std::to_string(c.size) + "-byte fragments where this rank expects " +
                                       std::to_string(piece) + " (count or datatype differ)");
    }
    const uint64_t offset = c.offset;
    // Notify the children first, so they copy in parallel with this rank.
    notify_children(i, tag, offset, static_cast<uint32_t>(piece), inline_mode ? c.inline_data : nullptr);
    if (inline_mode)
      std::memcpy(data, c.inline_data, piece);
    else
      std::memcpy(data + i * frag, source.queue + offset, piece);
    Release(ring, first_block + i, policy);
    if (inline_mode) continue;
    // Release the root's set after this call's last fragment in it: the next one, placed as the
    // root places it, is in another set or starts the only set over.
    const uint64_t next = Place(offset + frag, frag);
    if (i + 1 == fragments || SetOf(next) != SetOf(offset) || next == 0) {
      source.sets[SetOf(offset)].pending.fetch_sub(1, std::memory_order_acq_rel);
      doorbells_[static_cast<size_t>(root)]->Ring(policy.asymmetric);
    }
  }
}

}  // namespace topocoll
