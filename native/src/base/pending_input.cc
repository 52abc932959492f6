#include "base/pending_input.h"

#include <algorithm>
#include <cstring>

namespace topocoll {

void PendingInput::Start(const uint8_t* input, uint8_t* acc, size_t elem) {
  input_ = input;
  acc_ = acc;
  elem_ = elem;
  written_.clear();
}

bool PendingInput::Untouched(uint64_t begin, uint64_t end) const {
  for (const auto& [b, e] : written_) {
    if (b < end && begin < e) return false;
  }
  return true;
}

void PendingInput::Materialize(uint64_t begin, uint64_t end) {
  uint64_t at = begin;
  for (const auto& [b, e] : written_) {
    if (e <= at) continue;
    if (b >= end) break;
    if (b > at) std::memcpy(acc_ + at * elem_, input_ + at * elem_, (b - at) * elem_);
    at = std::max(at, e);
  }
  if (at < end) std::memcpy(acc_ + at * elem_, input_ + at * elem_, (end - at) * elem_);
  MarkWritten(begin, end);
}

void PendingInput::MarkWritten(uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  // The first range that ends at or after `begin`: everything from there that starts at or
  // before `end` merges with the new one.
  auto first = std::lower_bound(written_.begin(), written_.end(), begin,
                                [](const std::pair<uint64_t, uint64_t>& r, uint64_t v) { return r.second < v; });
  auto last = first;
  while (last != written_.end() && last->first <= end) {
    begin = std::min(begin, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  first = written_.erase(first, last);
  written_.insert(first, {begin, end});
}

}  // namespace topocoll
