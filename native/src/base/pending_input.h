// The part of a reduction's accumulator that so far exists only in the caller's input.
//
// A reduction runs its schedule on an accumulator (the result buffer, or scratch), which starts
// as a copy of the input. For large messages that copy is a whole pass over the message before
// any communication starts. Instead, each range is copied when a step first needs it in the
// accumulator; a step that combines an incoming block into a range still only in the input
// writes `input op incoming` into the accumulator directly (one pass instead of a copy and a
// combine, with the same bits); and a range sent before anything was combined into it is sent
// from the input. An allreduce keeps it lazy through its bcast phase too, so what that phase
// overwrites is never copied. For two ranks' Rabenseifner allreduce no byte is copied at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace topocoll {

class PendingInput {
 public:
  // Everything of `acc` is pending in `input` (count elements of `elem` bytes).
  void Start(const uint8_t* input, uint8_t* acc, size_t elem);
  // Whether elements [begin, end) are all still only in the input.
  bool Untouched(uint64_t begin, uint64_t end) const;
  // The input's copy of element `at`.
  const uint8_t* Input(uint64_t at) const { return input_ + at * elem_; }
  // Copies what of [begin, end) is still only in the input; the range is then written.
  void Materialize(uint64_t begin, uint64_t end);
  // [begin, end) of the accumulator has been written by a step.
  void MarkWritten(uint64_t begin, uint64_t end);

 private:
  const uint8_t* input_ = nullptr;
  uint8_t* acc_ = nullptr;
  size_t elem_ = 0;
  // Written ranges: sorted, disjoint and not touching (merged on insertion). Steps run in
  // segment order and cover their segment, so the list stays a few entries long.
  std::vector<std::pair<uint64_t, uint64_t>> written_;
};

}  // namespace topocoll
