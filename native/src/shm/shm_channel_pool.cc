#include "shm/shm_channel_pool.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/errors.h"

namespace topocoll {

namespace {

OutboxHeader* HeaderOf(uint8_t* outbox) { return reinterpret_cast<OutboxHeader*>(outbox); }

uint64_t FloorPowerOfTwo(uint64_t n) {
  uint64_t p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

}  // namespace

ShmChannelPool::ShmChannelPool(std::vector<uint8_t*> outboxes, std::vector<Doorbell*> doorbells, int local_index,
                               const ChannelPoolParams& params)
    : outboxes_(std::move(outboxes)),
      doorbells_(std::move(doorbells)),
      local_index_(local_index),
      params_(params),
      out_(outboxes_.size()),
      in_(outboxes_.size()),
      message_out_(outboxes_.size()),
      message_in_(outboxes_.size()),
      message_refused_(outboxes_.size(), false),
      scanned_{std::vector<uint32_t>(outboxes_.size(), 0), std::vector<uint32_t>(outboxes_.size(), 0)},
      scan_offset_{std::vector<uint64_t>(outboxes_.size(), kOutboxHeaderBytes),
                   std::vector<uint64_t>(outboxes_.size(), kOutboxHeaderBytes)},
      wanted_(outboxes_.size(), false) {}

uint64_t ShmChannelPool::Left() const { return params_.pool_bytes - kOutboxHeaderBytes - made_bytes_; }

uint64_t ShmChannelPool::SmallestBlock() const { return kChannelBlockHeaderBytes + params_.min_capacity; }

uint64_t ShmChannelPool::MostChannels() const {
  const uint64_t fit = (params_.pool_bytes - kOutboxHeaderBytes) / SmallestBlock();
  const uint64_t peers = out_.size() - 1;
  return fit < peers ? fit : peers;
}

void ShmChannelPool::Want(const std::vector<int>& local_peers, int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t missing = wanted_missing_;
  std::vector<int> added;
  for (int peer : local_peers) {
    const size_t i = static_cast<size_t>(peer);
    if (peer == local_index_ || wanted_[i] || out_[i].valid()) continue;
    if (std::find(added.begin(), added.end(), peer) != added.end()) continue;
    added.push_back(peer);
    ++missing;
  }
  if (added.empty()) return;
  const uint64_t smallest = SmallestBlock();
  if (Left() < missing * smallest) {
    throw CollError("ECONFIG", "rank " + std::to_string(rank) + " sends to " + std::to_string(missing) +
                                   " more ranks of its node than it has channels for: its outbox (shm.channelPoolBytes, page-rounded: " +
                                   std::to_string(params_.pool_bytes) + ") has " + std::to_string(Left()) + " bytes left, " +
                                   std::to_string(missing * smallest) + " needed for channels of " + std::to_string(params_.min_capacity) +
                                   " bytes; raise shm.channelPoolBytes");
  }
  for (int peer : added) wanted_[static_cast<size_t>(peer)] = true;
  wanted_missing_ = missing;
}

void ShmChannelPool::MakeChannels(int to) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t smallest = SmallestBlock();
  if (!wanted_[static_cast<size_t>(to)]) {
    // Nobody declared this peer: it takes a share like the wanted ones, if there is room.
    if (Left() < (wanted_missing_ + 1) * smallest) {
      throw CollError("ECONFIG", "no room for a channel to local rank " + std::to_string(to) + " in an outbox of " +
                                     std::to_string(params_.pool_bytes) + " bytes (shm.channelPoolBytes); raise it");
    }
    wanted_[static_cast<size_t>(to)] = true;
    ++wanted_missing_;
  }
  // One share for the whole batch, after setting aside the smallest channel for every peer
  // that may still come (Want's guarantee; see the header).
  const uint64_t most = MostChannels();
  const uint64_t later = most > collective_made_ + wanted_missing_ ? most - collective_made_ - wanted_missing_ : 0;
  const uint64_t set_aside = later * smallest < Left() ? later * smallest : 0;
  const uint64_t share = (Left() - set_aside) / wanted_missing_;
  uint64_t capacity = share > kChannelBlockHeaderBytes ? FloorPowerOfTwo(share - kChannelBlockHeaderBytes) : 0;
  if (capacity > params_.max_capacity) capacity = params_.max_capacity;
  if (capacity < params_.min_capacity) capacity = params_.min_capacity;  // the invariant keeps share ≥ smallest
  for (size_t peer = 0; peer < out_.size(); ++peer) {
    if (!wanted_[peer] || out_[peer].valid()) continue;
    out_[peer] = MakeBlock(static_cast<int>(peer), kCollectiveChannel, capacity);
    --wanted_missing_;
    ++collective_made_;
  }
}

ShmChannel ShmChannelPool::MakeBlock(int to, uint32_t kind, uint64_t capacity) {
  uint8_t* outbox = outboxes_[static_cast<size_t>(local_index_)];
  OutboxHeader* header = HeaderOf(outbox);
  const uint64_t offset = kOutboxHeaderBytes + made_bytes_;
  auto* block = reinterpret_cast<ChannelBlock*>(outbox + offset);
  block->to = static_cast<uint32_t>(to);
  block->kind = kind;
  block->capacity = capacity;
  uint8_t* ring = outbox + offset + kChannelBlockHeaderBytes;
  std::memset(ring, 0, capacity);  // first touch: on the sender's NUMA node
  made_bytes_ += kChannelBlockHeaderBytes + capacity;
  header->used.store(made_bytes_, std::memory_order_relaxed);
  header->count.store(header->count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  return ShmChannel(&block->control, ring, capacity, doorbells_[static_cast<size_t>(local_index_)], doorbells_[static_cast<size_t>(to)]);
}

ShmChannel* ShmChannelPool::MessageOutgoing(int to) {
  const auto t = static_cast<size_t>(to);
  std::lock_guard<std::mutex> lock(mutex_);
  if (message_out_[t].valid()) return &message_out_[t];
  if (message_refused_[t]) return nullptr;
  // Spare: beyond the smallest channel for every peer that has no collective channel yet.
  const uint64_t most = MostChannels();
  const uint64_t reserve = (most > collective_made_ ? most - collective_made_ : 0) * SmallestBlock();
  const uint64_t spare = Left() > reserve ? Left() - reserve : 0;
  uint64_t capacity = kMessageRingBytes < params_.max_capacity ? kMessageRingBytes : params_.max_capacity;
  while (capacity >= params_.min_capacity && kChannelBlockHeaderBytes + capacity > spare) capacity /= 2;
  if (capacity < params_.min_capacity) {
    message_refused_[t] = true;
    return nullptr;
  }
  message_out_[t] = MakeBlock(to, kMessageChannel, capacity);
  return &message_out_[t];
}

ShmChannel* ShmChannelPool::MessageIncoming(int from) {
  std::lock_guard<std::mutex> lock(mutex_);
  ShmChannel& c = message_in_[static_cast<size_t>(from)];
  return c.valid() || Find(from, kMessageChannel) ? &c : nullptr;
}

bool ShmChannelPool::Find(int from, uint32_t kind) {
  const size_t s = static_cast<size_t>(from);
  std::vector<ShmChannel>& found = kind == kMessageChannel ? message_in_ : in_;
  uint32_t& scanned = scanned_[kind][s];
  uint64_t& offset = scan_offset_[kind][s];
  uint8_t* outbox = outboxes_[s];
  const uint32_t count = HeaderOf(outbox)->count.load(std::memory_order_acquire);
  while (scanned < count) {
    auto* block = reinterpret_cast<ChannelBlock*>(outbox + offset);
    uint8_t* ring = outbox + offset + kChannelBlockHeaderBytes;
    ++scanned;
    offset += kChannelBlockHeaderBytes + block->capacity;
    if (block->to == static_cast<uint32_t>(local_index_) && block->kind == kind) {
      found[s] = ShmChannel(&block->control, ring, block->capacity, doorbells_[s], doorbells_[static_cast<size_t>(local_index_)]);
      return true;
    }
  }
  return false;
}

ChannelPoolUse ShmChannelPool::Use() const {
  ChannelPoolUse use;
  for (uint8_t* outbox : outboxes_) {
    const OutboxHeader* h = HeaderOf(outbox);
    const uint64_t bytes = h->used.load(std::memory_order_relaxed);
    use.channels += h->count.load(std::memory_order_relaxed);
    use.bytes += bytes;
    if (bytes > use.largest_rank_bytes) use.largest_rank_bytes = bytes;
  }
  return use;
}

}  // namespace topocoll
