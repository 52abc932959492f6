// The step codec (native/src/engine/step.h) on the words abi/abi.yaml lays out: every step kind
// encodes and decodes back, each field a kind carries in its word and the fields it does not
// carry at their defaults. test/step-codec.test.ts runs the same codec against TypeScript's.
#include "engine/step.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace topocoll::test {
namespace {

namespace word = abi::step_word;
namespace fallback = abi::step_default;

// A step of every kind, in kind order, with every field it carries unlike its default.
std::vector<Step> EveryKind() {
  std::vector<Step> steps;
  for (const abi::StepKindInfo& k : abi::kStepKindTable) {
    const auto n = static_cast<int32_t>(k.value);
    Step s;
    s.kind = k.value;
    s.peer = 100 + n;
    s.level = n % 3;
    s.first = static_cast<uint32_t>(n % 4);
    s.count = 2;
    s.of = 7;
    if (abi::StepHasGroup(k.value)) s.group = 200 + n;
    if (abi::StepHasPollMicros(k.value)) s.poll_us = 300 + n;
    if (abi::StepHasPeer2(k.value)) s.peer2 = 400 + n;
    if (abi::StepHasFirst2(k.value)) s.first2 = 3;
    if (abi::StepHasCount2(k.value)) s.count2 = 4;
    if (abi::StepHasOrder(k.value)) s.order = 1;
    if (abi::StepHasJoined(k.value)) s.joined = true;
    if (abi::StepHasEveryRankCombines(k.value)) s.every_rank_combines = true;
    steps.push_back(s);
  }
  return steps;
}

void ExpectSame(const Step& got, const Step& want) {
  const auto kind = static_cast<int32_t>(want.kind);
  EXPECT_EQ(static_cast<int32_t>(got.kind), kind);
  EXPECT_EQ(got.peer, want.peer) << "kind " << kind;
  EXPECT_EQ(got.level, want.level) << "kind " << kind;
  EXPECT_EQ(got.group, want.group) << "kind " << kind;
  EXPECT_EQ(got.poll_us, want.poll_us) << "kind " << kind;
  EXPECT_EQ(got.first, want.first) << "kind " << kind;
  EXPECT_EQ(got.count, want.count) << "kind " << kind;
  EXPECT_EQ(got.of, want.of) << "kind " << kind;
  EXPECT_EQ(got.peer2, want.peer2) << "kind " << kind;
  EXPECT_EQ(got.first2, want.first2) << "kind " << kind;
  EXPECT_EQ(got.count2, want.count2) << "kind " << kind;
  EXPECT_EQ(got.order, want.order) << "kind " << kind;
  EXPECT_EQ(got.joined, want.joined) << "kind " << kind;
  EXPECT_EQ(got.every_rank_combines, want.every_rank_combines) << "kind " << kind;
}

TEST(StepCodec, EveryKindEncodesAndDecodesBack) {
  const std::vector<Step> steps = EveryKind();
  ASSERT_EQ(steps.size(), abi::kStepKindCount);
  const std::vector<int32_t> words = EncodeSteps(steps);
  ASSERT_EQ(words.size(), steps.size() * kStepWords);
  const std::vector<Step> back = DecodeSteps(words.data(), words.size());
  ASSERT_EQ(back.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) ExpectSame(back[i], steps[i]);
  EXPECT_EQ(EncodeSteps(back), words);
}

TEST(StepCodec, TheSharedWordIsTheGroupOrThePollByKind) {
  Step bcast;
  bcast.kind = StepKind::kShmBcast;
  bcast.group = 7;
  Step await_put;
  await_put.kind = StepKind::kAwaitPut;
  await_put.poll_us = 50;
  // Values in fields a Send does not carry are not encoded.
  Step send;
  send.kind = StepKind::kSend;
  send.group = 9;
  send.poll_us = 9;
  send.peer2 = 9;
  send.order = 1;
  const std::vector<int32_t> words = EncodeSteps({bcast, await_put, send});
  EXPECT_EQ(words[word::kGroup], 7);
  EXPECT_EQ(words[kStepWords + word::kPollMicros], 50);
  EXPECT_EQ(words[2 * kStepWords + word::kGroup], fallback::kGroup);
  EXPECT_EQ(words[2 * kStepWords + word::kPeer2], fallback::kPeer2);
  EXPECT_EQ(words[2 * kStepWords + word::kOrder], fallback::kOrder);
  const std::vector<Step> back = DecodeSteps(words.data(), words.size());
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].group, 7);
  EXPECT_EQ(back[0].poll_us, fallback::kPollMicros);
  EXPECT_EQ(back[1].poll_us, 50);
  EXPECT_EQ(back[1].group, fallback::kGroup);
  EXPECT_EQ(back[2].group, fallback::kGroup);
  EXPECT_EQ(back[2].poll_us, fallback::kPollMicros);
}

// The words test/algorithms/schedule.test.ts expects encodeSchedule to write for the same step.
TEST(StepCodec, ReadsTheWordsSchedulesWrite) {
  const std::vector<int32_t> words = {6, 7, 0, 0, 2, 2, 4, 7, 0, 2, 0, 0};
  const std::vector<Step> steps = DecodeSteps(words.data(), words.size());
  ASSERT_EQ(steps.size(), 1u);
  const Step& s = steps[0];
  EXPECT_EQ(s.kind, StepKind::kSendRecvReduce);
  EXPECT_EQ(s.peer, 7);
  EXPECT_EQ(s.level, 0);
  EXPECT_EQ(s.first, 2u);
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.of, 4u);
  EXPECT_EQ(s.peer2, 7);
  EXPECT_EQ(s.first2, 0u);
  EXPECT_EQ(s.count2, 2u);
  EXPECT_EQ(s.order, 0);
  EXPECT_EQ(EncodeSteps(steps), words);
}

TEST(StepCodec, IgnoresWordsAfterTheLastWholeStep) {
  std::vector<int32_t> words = EncodeSteps(EveryKind());
  words.resize(kStepWords + kStepWords / 2);
  EXPECT_EQ(DecodeSteps(words.data(), words.size()).size(), 1u);
  EXPECT_TRUE(DecodeSteps(words.data(), kStepWords - 1).empty());
}

}  // namespace
}  // namespace topocoll::test
