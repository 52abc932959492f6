// MPI's matching of point-to-point messages against receives, for one communicator: the posted
// receives in the order they were posted, the unexpected messages (arrived, no receive yet) in
// the order they arrived. Pure bookkeeping, no I/O and no locking (the caller's).
//
// Ordering (MPI's non-overtaking rule). Every message from one source arrives on one ordered
// stream, so arrival order per source is send order. A message takes the first posted receive
// that matches it; a receive takes the first unexpected message that matches it. Hence two
// messages from one sender that both match one receive are received in the order sent, and two
// receives that both match one message take it in the order they were posted.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "base/abi_generated.h"

namespace topocoll {

// The wildcards and the largest tag, as TypeScript has them (abi/abi.yaml, constants.messages).
inline constexpr int kAnySource = abi::kMessagesAnySource;
inline constexpr int32_t kAnyTag = abi::kMessagesAnyTag;
inline constexpr int32_t kMaxTag = abi::kMessagesMaxTag;

// Whether a receive for (want_source, want_tag) — either may be a wildcard — takes a message
// from `source` with `tag`.
inline bool Matches(int want_source, int32_t want_tag, int source, int32_t tag) {
  return (want_source == kAnySource || want_source == source) && (want_tag == kAnyTag || want_tag == tag);
}

// R: a posted receive's handle; M: an unexpected message's handle (both cheap to copy).
template <typename R, typename M>
class MatchQueues {
 public:
  struct Posted {
    int source;   // or kAnySource
    int32_t tag;  // or kAnyTag
    R recv;
  };
  struct Unexpected {
    int source;
    int32_t tag;
    M message;
  };

  // A message's envelope arrived: the first posted receive it matches, removed from the queue;
  // none: the caller queues the message (AddUnexpected).
  std::optional<R> TakePosted(int source, int32_t tag) {
    for (auto it = posted_.begin(); it != posted_.end(); ++it) {
      if (!Matches(it->source, it->tag, source, tag)) continue;
      R r = std::move(it->recv);
      posted_.erase(it);
      return r;
    }
    return std::nullopt;
  }
  void AddUnexpected(int source, int32_t tag, M message) { unexpected_.push_back({source, tag, std::move(message)}); }

  // A receive is posted: the first unexpected message it matches, removed from the queue; none:
  // the caller queues the receive (AddPosted).
  std::optional<M> TakeUnexpected(int source, int32_t tag) {
    for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
      if (!Matches(source, tag, it->source, it->tag)) continue;
      M m = std::move(it->message);
      unexpected_.erase(it);
      return m;
    }
    return std::nullopt;
  }
  void AddPosted(int source, int32_t tag, R recv) { posted_.push_back({source, tag, std::move(recv)}); }

  // Removes the posted receives for which `drop(posted)` is true (timed out, failed), in order.
  template <typename F>
  void DropPosted(F&& drop) {
    for (auto it = posted_.begin(); it != posted_.end();) it = drop(*it) ? posted_.erase(it) : it + 1;
  }

  // Removes the unexpected messages for which `drop(unexpected)` is true (cut short by their sender's end).
  template <typename F>
  void DropUnexpected(F&& drop) {
    for (auto it = unexpected_.begin(); it != unexpected_.end();) it = drop(*it) ? unexpected_.erase(it) : it + 1;
  }

  const std::deque<Posted>& posted() const { return posted_; }
  const std::deque<Unexpected>& unexpected() const { return unexpected_; }
  void Clear() {
    posted_.clear();
    unexpected_.clear();
  }

 private:
  std::deque<Posted> posted_;
  std::deque<Unexpected> unexpected_;
};

}  // namespace topocoll
