// This rank's node as the engine's parts see it (the executor, liveness, the window
// collectives): the global ranks on it, ascending — a rank's local index is its place among
// them — and, while the node's segment is mapped, the segment's header and every local rank's
// RankControl (shm_segment.h). Engine maps and unmaps it; the others only read it.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/errors.h"
#include "shm/shm_segment.h"

namespace topocoll {

struct LocalPeer {
  int rank;
  RankControl* control;
};

class LocalNode {
 public:
  // `ranks`: the global ranks on this node, ascending; `rank` must be among them.
  LocalNode(int rank, const std::vector<int>& ranks) : rank_(rank), ranks_(ranks) {
    for (size_t i = 0; i < ranks.size(); ++i) index_of_[ranks[i]] = static_cast<int>(i);
    const auto it = index_of_.find(rank);
    if (it == index_of_.end()) throw CollError("EINVAL", "this rank is not among the local ranks");
    index_ = it->second;
  }

  int rank() const { return rank_; }
  // Ranks on this node.
  size_t size() const { return ranks_.size(); }
  // This rank's local index.
  int index() const { return index_; }
  // The local index of global rank `rank`; −1 when it is on another node.
  int IndexOf(int rank) const {
    const auto it = index_of_.find(rank);
    return it == index_of_.end() ? -1 : it->second;
  }

  // --- while the segment is mapped (else: no header, no peers) ---
  bool mapped() const { return header_ != nullptr; }
  SegmentHeader* header() const { return header_; }
  // By local index.
  const std::vector<LocalPeer>& peers() const { return peers_; }
  RankControl& control(size_t local_index) const { return *peers_[local_index].control; }
  RankControl& own() const { return control(static_cast<size_t>(index_)); }

  // `controls`: the segment's RankControl array, one per local rank in local order.
  void Map(SegmentHeader* header, RankControl* controls) {
    header_ = header;
    peers_.clear();
    for (size_t i = 0; i < ranks_.size(); ++i) peers_.push_back({ranks_[i], &controls[i]});
  }
  void Unmap() {
    header_ = nullptr;
    peers_.clear();
  }

 private:
  int rank_;
  std::vector<int> ranks_;
  int index_ = 0;
  std::unordered_map<int, int> index_of_;
  SegmentHeader* header_ = nullptr;
  std::vector<LocalPeer> peers_;
};

}  // namespace topocoll
