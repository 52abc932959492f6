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
      scanned_(outboxes_.size(), 0),
      scan_offset_(outboxes_.size(), kOutboxHeaderBytes),
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
  uint8_t* outbox = outboxes_[static_cast<size_t>(local_index_)];
  OutboxHeader* header = HeaderOf(outbox);
  uint32_t count = header->count.load(std::memory_order_relaxed);
  // One share for the whole batch, after setting aside the smallest channel for every peer
  // that may still come (Want's guarantee; see the header).
  const uint64_t most = MostChannels();
  const uint64_t later = most > count + wanted_missing_ ? most - count - wanted_missing_ : 0;
  const uint64_t set_aside = later * smallest < Left() ? later * smallest : 0;
  const uint64_t share = (Left() - set_aside) / wanted_missing_;
  uint64_t capacity = share > kChannelBlockHeaderBytes ? FloorPowerOfTwo(share - kChannelBlockHeaderBytes) : 0;
  if (capacity > params_.max_capacity) capacity = params_.max_capacity;
  if (capacity < params_.min_capacity) capacity = params_.min_capacity;  // the invariant keeps share ≥ smallest
  for (size_t peer = 0; peer < out_.size(); ++peer) {
    if (!wanted_[peer] || out_[peer].valid()) continue;
    const uint64_t offset = kOutboxHeaderBytes + made_bytes_;
    auto* block = reinterpret_cast<ChannelBlock*>(outbox + offset);
    block->to = static_cast<uint32_t>(peer);
    block->capacity = capacity;
    uint8_t* ring = outbox + offset + kChannelBlockHeaderBytes;
    std::memset(ring, 0, capacity);  // first touch: on the sender's NUMA node
    made_bytes_ += kChannelBlockHeaderBytes + capacity;
    --wanted_missing_;
    header->used.store(made_bytes_, std::memory_order_relaxed);
    header->count.store(++count, std::memory_order_release);
    out_[peer] = ShmChannel(&block->control, ring, capacity, doorbells_[static_cast<size_t>(local_index_)], doorbells_[peer]);
  }
}

bool ShmChannelPool::Find(int from) {
  const size_t s = static_cast<size_t>(from);
  uint8_t* outbox = outboxes_[s];
  const uint32_t count = HeaderOf(outbox)->count.load(std::memory_order_acquire);
  while (scanned_[s] < count) {
    auto* block = reinterpret_cast<ChannelBlock*>(outbox + scan_offset_[s]);
    uint8_t* ring = outbox + scan_offset_[s] + kChannelBlockHeaderBytes;
    ++scanned_[s];
    scan_offset_[s] += kChannelBlockHeaderBytes + block->capacity;
    if (block->to == static_cast<uint32_t>(local_index_)) {
      in_[s] = ShmChannel(&block->control, ring, block->capacity, doorbells_[s], doorbells_[static_cast<size_t>(local_index_)]);
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
