#include "engine/step.h"

namespace topocoll {

namespace w = abi::step_word;

std::vector<Step> DecodeSteps(const int32_t* words, size_t n) {
  std::vector<Step> steps;
  steps.reserve(n / kStepWords);
  for (size_t i = 0; i + kStepWords <= n; i += kStepWords) {
    const int32_t* at = words + i;
    Step s;
    s.kind = static_cast<StepKind>(at[w::kKind]);
    s.peer = at[w::kPeer];
    s.level = at[w::kLevel];
    if (abi::StepHasGroup(s.kind)) s.group = at[w::kGroup];
    if (abi::StepHasPollMicros(s.kind)) s.poll_us = at[w::kPollMicros];
    s.first = static_cast<uint32_t>(at[w::kFirst]);
    s.count = static_cast<uint32_t>(at[w::kCount]);
    s.of = static_cast<uint32_t>(at[w::kOf]);
    if (abi::StepHasPeer2(s.kind)) s.peer2 = at[w::kPeer2];
    if (abi::StepHasFirst2(s.kind)) s.first2 = static_cast<uint32_t>(at[w::kFirst2]);
    if (abi::StepHasCount2(s.kind)) s.count2 = static_cast<uint32_t>(at[w::kCount2]);
    if (abi::StepHasOrder(s.kind)) s.order = at[w::kOrder];
    if (abi::StepHasJoined(s.kind)) s.joined = at[w::kJoined] != 0;
    if (abi::StepHasEveryRankCombines(s.kind)) s.every_rank_combines = at[w::kEveryRankCombines] != 0;
    steps.push_back(s);
  }
  return steps;
}

std::vector<int32_t> EncodeSteps(const std::vector<Step>& steps) {
  namespace d = abi::step_default;
  std::vector<int32_t> words(steps.size() * kStepWords);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    int32_t* at = words.data() + i * kStepWords;
    at[w::kKind] = static_cast<int32_t>(s.kind);
    at[w::kPeer] = s.peer;
    at[w::kLevel] = s.level;
    // group and poll_us share a word: each kind writes the one it carries, or the default.
    static_assert(w::kGroup == w::kPollMicros && d::kGroup == d::kPollMicros, "group and poll_us share a word and its default");
    at[w::kGroup] = abi::StepHasGroup(s.kind) ? s.group : abi::StepHasPollMicros(s.kind) ? s.poll_us : d::kGroup;
    at[w::kFirst] = static_cast<int32_t>(s.first);
    at[w::kCount] = static_cast<int32_t>(s.count);
    at[w::kOf] = static_cast<int32_t>(s.of);
    at[w::kPeer2] = abi::StepHasPeer2(s.kind) ? s.peer2 : d::kPeer2;
    at[w::kFirst2] = abi::StepHasFirst2(s.kind) ? static_cast<int32_t>(s.first2) : d::kFirst2;
    at[w::kCount2] = abi::StepHasCount2(s.kind) ? static_cast<int32_t>(s.count2) : d::kCount2;
    // order and joined share a word: each kind writes the one it carries, or the default.
    static_assert(w::kOrder == w::kJoined && d::kOrder == d::kJoined, "order and joined share a word and its default");
    at[w::kOrder] = abi::StepHasOrder(s.kind) ? s.order : abi::StepHasJoined(s.kind) ? (s.joined ? 1 : 0) : d::kOrder;
    at[w::kEveryRankCombines] = abi::StepHasEveryRankCombines(s.kind) ? (s.every_rank_combines ? 1 : 0) : d::kEveryRankCombines;
  }
  return words;
}

}  // namespace topocoll
