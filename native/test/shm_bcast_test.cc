// The S0 shared-memory broadcast (shm_bcast.h): threads as the local ranks, their regions in
// one anonymous shared mapping. Many broadcasts back to back — sizes around the inline limit,
// the fragment, a set and the queue, larger than the queue; roots changing; two groups sharing
// the ranks' queues; readers slow now and then — every reader must receive every message
// intact. A root that refilled a set or a control block a reader had not finished with shows
// as a reader copying another message's bytes.
#include "shm/shm_bcast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bcast_node.h"
#include "test_support.h"

namespace topocoll::test {
namespace {

constexpr auto kDeadline = std::chrono::seconds(20);
struct BcastCase {
  const char* name;
  uint64_t queue_bytes;
  uint32_t sets;
  TreeKind tree;
  uint32_t radix;
  size_t ranks;
  // Every message's fragment (FragmentFor clamps it to a set); 0: the size grows with the
  // message, as the cost model's tables make it.
  uint32_t fragment;
};

void PrintTo(const BcastCase& c, std::ostream* os) { *os << c.name; }

// One broadcast of the sequence every rank runs.
struct Message {
  int group;
  int root;
  size_t bytes;
};

std::vector<Message> MessageSequence(const BcastCase& c, const std::vector<std::vector<int>>& groups, size_t count) {
  const uint64_t q = c.queue_bytes;
  const uint64_t set = std::max<uint64_t>(q / c.sets / 4096 * 4096, 4096);
  std::vector<size_t> interesting = {
      0,        1,     8, kInlineBytes, kInlineBytes + 1, 4095,     4096, 4097, 8192 + 8, set - 1, set, set + 1,
      q - 4096, q - 1, q, q + 1,        2 * q + 4096 + 3, 3 * q + 7};
  std::mt19937 rng(2024);
  std::vector<Message> out;
  for (size_t k = 0; k < count; ++k) {
    Message m;
    m.group = groups.size() > 1 && rng() % 3 == 0 ? 1 : 0;
    const auto& members = groups[static_cast<size_t>(m.group)];
    m.root = members[rng() % members.size()];
    switch (rng() % 3) {
      case 0: m.bytes = interesting[rng() % interesting.size()]; break;
      case 1: m.bytes = rng() % (kInlineBytes * 2); break;
      default: m.bytes = rng() % (2 * q); break;
    }
    out.push_back(m);
  }
  return out;
}

ShmBcastParams ParamsOf(const BcastCase& c) {
  ShmBcastParams p;
  p.queue_bytes = c.queue_bytes;
  p.min_fragment = 4096;
  p.sets = c.sets;
  p.tree = c.tree;
  p.radix = c.radix;
  // Fragments grow with the message (as the cost model's tables do), up to a set and beyond:
  // FragmentFor clamps them.
  for (uint32_t log2 = 0; log2 <= 26; ++log2) {
    p.fragment_for_log2.push_back(c.fragment != 0 ? c.fragment : log2 < 13 ? 4096 : log2 < 15 ? 8192 : log2 < 17 ? 16384 : 65536);
  }
  return p;
}

class ShmBcastTest : public ::testing::TestWithParam<BcastCase> {};

TEST_P(ShmBcastTest, EveryReaderReceivesEveryMessageIntact) {
  const BcastCase c = GetParam();
  const ShmBcastParams params = ParamsOf(c);
  Node node(params, c.ranks);
  std::vector<int> everyone;
  std::vector<int> odd;  // a second group over some of the same ranks: their queues are shared
  for (size_t i = 0; i < c.ranks; ++i) {
    everyone.push_back(static_cast<int>(i));
    if (i % 2 == 1 || i == 0) odd.push_back(static_cast<int>(i));
  }
  std::vector<std::vector<int>> groups = {everyone};
  if (odd.size() >= 2 && odd.size() < everyone.size()) groups.push_back(odd);
  const std::vector<Message> messages = MessageSequence(c, groups, 400);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> verified{0};
  const WaitPolicy policy = TestPolicy();

  const std::string error = RunThreads(
      c.ranks,
      [&](size_t me) {
        DeadlineGuard guard(kDeadline, &stop);
        ShmBcast bcast(params, node.regions(), node.doorbells(), static_cast<int>(me));
        for (size_t g = 0; g < groups.size(); ++g) {
          if (std::find(groups[g].begin(), groups[g].end(), static_cast<int>(me)) != groups[g].end()) {
            bcast.SetGroup(static_cast<int>(g), groups[g]);
          }
        }
        std::mt19937 rng(static_cast<uint32_t>(me) * 77 + 1);
        std::vector<uint8_t> buf;
        for (size_t k = 0; k < messages.size(); ++k) {
          const Message& m = messages[k];
          if (!bcast.HasGroup(m.group)) continue;
          buf.resize(m.bytes);
          const bool root = m.root == static_cast<int>(me);
          if (root)
            FillPattern(buf.data(), buf.size(), k);
          else
            std::fill(buf.begin(), buf.end(), uint8_t{0xEE});
          // Unique per call: the engine's tags put the call in the high bits, fragments in the low.
          const uint64_t tag_base = (uint64_t{k} + 1) << 24;
          bcast.Run(m.group, m.root, buf.data(), buf.size(), tag_base, static_cast<uint32_t>(k * 2654435761u), policy, guard);
          if (!root) {
            const size_t bad = FirstPatternMismatch(buf.data(), buf.size(), k);
            if (bad != buf.size()) {
              // Whose bytes arrived instead: an earlier or later message's, at which offset.
              std::string whose = "unknown bytes";
              for (size_t other = 0; other < messages.size() && bad + 8 <= buf.size(); ++other) {
                for (size_t from = 0; from < 4 * c.queue_bytes; from += 4096) {
                  if (FirstPatternMismatch(buf.data() + bad, 8, other, from) == 8) {
                    whose = "bytes " + std::to_string(from) + "… of message " + std::to_string(other);
                    other = messages.size();
                    break;
                  }
                }
              }
              throw std::runtime_error("message " + std::to_string(k) + " (" + std::to_string(m.bytes) + " bytes from rank " +
                                       std::to_string(m.root) + "): byte " + std::to_string(bad) + " differs (" + whose + ")");
            }
            ++verified;
          }
          // Readers fall behind now and then: the root streams ahead until the queue or a control
          // ring is full, and must then wait.
          if (!root && rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
        }
      },
      stop);
  EXPECT_EQ(error, "");
  uint64_t expected = 0;
  for (const Message& m : messages) expected += groups[static_cast<size_t>(m.group)].size() - 1;
  EXPECT_EQ(verified.load(), expected);
}

std::string CaseName(const ::testing::TestParamInfo<BcastCase>& info) { return std::string(info.param.name); }

// One fragment size per case: the root's queue cursor then stays a multiple of it.
INSTANTIATE_TEST_SUITE_P(Shapes, ShmBcastTest,
                         ::testing::Values(BcastCase{"one_set_flat", 64 * 1024, 1, TreeKind::kFlat, 2, 3, 4096},
                                           BcastCase{"two_sets_knomial", 64 * 1024, 2, TreeKind::kKnomial, 2, 4, 8192},
                                           BcastCase{"two_sets_chain", 32 * 1024, 2, TreeKind::kChain, 2, 4, 4096},
                                           BcastCase{"four_sets_kary3", 64 * 1024, 4, TreeKind::kKary, 3, 5, 16384},
                                           BcastCase{"two_ranks_whole_set_fragments", 16 * 1024, 2, TreeKind::kKnomial, 2, 2, 65536},
                                           BcastCase{"knomial3_six_ranks", 128 * 1024, 2, TreeKind::kKnomial, 3, 6, 16384},
                                           // The queue is a multiple of the page, not necessarily of the fragment
                                           // or of sets · fragment.
                                           BcastCase{"queue_of_5_pages", 20 * 1024, 2, TreeKind::kKnomial, 2, 3, 4096}),
                         CaseName);

// Fragment sizes that change from call to call, as with the cost model's tables (4 KiB for small
// messages, up to a whole set for large ones): the root's queue cursor is then a multiple of
// the last call's fragment only, and a larger fragment that would run from one set into the
// next must start at the next set (waiting for its readers) instead. ShmBcastStraddle below is
// the same case, deterministic.
INSTANTIATE_TEST_SUITE_P(MixedFragments, ShmBcastTest,
                         ::testing::Values(BcastCase{"two_sets_knomial", 64 * 1024, 2, TreeKind::kKnomial, 2, 4, 0},
                                           BcastCase{"two_ranks", 16 * 1024, 2, TreeKind::kKnomial, 2, 2, 0},
                                           BcastCase{"queue_of_5_pages", 20 * 1024, 2, TreeKind::kKnomial, 2, 3, 0}),
                         CaseName);

// Queues that are not a multiple of sets · min_fragment: the sets are whole min_fragments of an
// equal share and the last one also takes the rest of the queue (were the rest a set of its
// own, its counter — sets[4] with four sets in 5 pages — would lie past the region's kMaxSets
// counters). More sets than the queue has min_fragments: one set per min_fragment.
INSTANTIATE_TEST_SUITE_P(RestOfTheQueueInTheLastSet, ShmBcastTest,
                         ::testing::Values(BcastCase{"four_sets_in_5_pages", 20 * 1024, 4, TreeKind::kKnomial, 2, 3, 4096},
                                           BcastCase{"three_sets_in_5_pages_mixed", 20 * 1024, 3, TreeKind::kKnomial, 2, 3, 0},
                                           BcastCase{"four_sets_in_7_pages_mixed", 28 * 1024, 4, TreeKind::kFlat, 2, 4, 0},
                                           BcastCase{"three_sets_in_11_pages_8k", 44 * 1024, 3, TreeKind::kChain, 2, 3, 8192},
                                           BcastCase{"four_sets_in_3_pages", 12 * 1024, 4, TreeKind::kKnomial, 2, 3, 0}),
                         CaseName);

// A root far ahead of a reader that has not started: it fills the queue and then waits — it
// completes no more broadcasts than the queue has fragments — and the reader, once it runs,
// receives every message intact.
TEST(ShmBcastFlowControl, RootBlocksOnAFullQueueAndNeverOverwritesUnreadFragments) {
  const BcastCase c{"", 64 * 1024, 2, TreeKind::kFlat, 2, 2, 4096};
  const ShmBcastParams params = ParamsOf(c);
  Node node(params, 2);
  std::atomic<bool> stop{false};
  std::atomic<size_t> completed{0};
  constexpr size_t kMessages = 200;
  constexpr size_t kBytes = 3000;  // one 4 KiB fragment each
  const WaitPolicy policy = TestPolicy();
  JoiningThread root(stop, [&] {
    DeadlineGuard guard(kDeadline, &stop);
    ShmBcast bcast(params, node.regions(), node.doorbells(), 0);
    bcast.SetGroup(0, {0, 1});
    std::vector<uint8_t> buf(kBytes);
    try {
      for (size_t k = 0; k < kMessages; ++k) {
        FillPattern(buf.data(), kBytes, k);
        bcast.Run(0, 0, buf.data(), kBytes, (uint64_t{k} + 1) << 24, 7, policy, guard);
        completed.store(k + 1);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "root: " << e.what();
      stop = true;
    }
  });
  const size_t slots = c.queue_bytes / 4096;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);  // ends as soon as it is full
  while (std::chrono::steady_clock::now() < until && completed.load() < slots) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(completed.load(), slots) << "the root completed more broadcasts than its queue holds before anyone read";
  {
    DeadlineGuard guard(kDeadline, &stop);
    ShmBcast bcast(params, node.regions(), node.doorbells(), 1);
    bcast.SetGroup(0, {0, 1});
    std::vector<uint8_t> buf(kBytes);
    for (size_t k = 0; k < kMessages && !stop; ++k) {
      std::fill(buf.begin(), buf.end(), uint8_t{0xEE});
      bcast.Run(0, 0, buf.data(), kBytes, (uint64_t{k} + 1) << 24, 7, policy, guard);
      ASSERT_EQ(FirstPatternMismatch(buf.data(), kBytes, k), kBytes) << "message " << k;
      ASSERT_LE(completed.load(), k + 1 + slots) << "the root ran more than a queue ahead after message " << k;
    }
  }
  root.join();
  EXPECT_EQ(completed.load(), kMessages);
}

// The straddle, step by step (2 ranks; 64 KiB queue in two 32 KiB sets; 4 KiB fragments up to
// 16 KiB messages, 32 KiB above). Lap 1: M0 (32 KiB) fills set 0, M1 and M2 (16 KiB each, 4 KiB
// fragments) fill set 1. The reader reads M0 only: set 0 is free, set 1 is not. Lap 2: M3 (one
// 4 KiB fragment) wraps to offset 0, in set 0; M4 (32 KiB) goes at 4 KiB, still "in set 0" by
// its start, and covers [4 KiB, 36 KiB) — M1's first fragment, unread. The root must wait for
// set 1 before M4 (it goes at set 1's start, 32 KiB, once the reader has read M1 and M2);
// otherwise the reader finds M4's bytes in M1.
TEST(ShmBcastStraddle, AFragmentRunningIntoTheNextSetWaitsForThatSet) {
  ShmBcastParams params;
  params.queue_bytes = 64 * 1024;
  params.min_fragment = 4096;
  params.sets = 2;
  params.tree = TreeKind::kFlat;
  for (uint32_t log2 = 0; log2 <= 26; ++log2) params.fragment_for_log2.push_back(log2 <= 14 ? 4096 : 32768);
  Node node(params, 2);
  const size_t sizes[] = {32768, 16384, 16384, 3000, 32768};
  constexpr size_t kCount = sizeof(sizes) / sizeof(sizes[0]);
  std::atomic<bool> stop{false};
  std::atomic<bool> reader_done_with_m0{false};
  std::atomic<size_t> completed{0};
  const WaitPolicy policy = TestPolicy();
  JoiningThread root(stop, [&] {
    DeadlineGuard guard(std::chrono::seconds(5), &stop);
    ShmBcast bcast(params, node.regions(), node.doorbells(), 0);
    bcast.SetGroup(0, {0, 1});
    try {
      for (size_t k = 0; k < kCount; ++k) {
        // M3 wraps to offset 0 only once set 0 is free: the reader has read M0.
        if (k == 3)
          while (!reader_done_with_m0.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::vector<uint8_t> buf(sizes[k]);
        FillPattern(buf.data(), buf.size(), k);
        bcast.Run(0, 0, buf.data(), buf.size(), (uint64_t{k} + 1) << 24, 7, policy, guard);
        completed.store(k + 1);
      }
    } catch (const std::exception&) {
      // Waiting here for set 1 is the correct behaviour: the reader has not read M1 yet, and
      // ends the wait below by reading it.
    }
  });
  DeadlineGuard guard(std::chrono::seconds(5), &stop);
  ShmBcast bcast(params, node.regions(), node.doorbells(), 1);
  bcast.SetGroup(0, {0, 1});
  std::vector<uint8_t> buf(sizes[0]);
  bcast.Run(0, 0, buf.data(), buf.size(), uint64_t{1} << 24, 7, policy, guard);
  EXPECT_EQ(FirstPatternMismatch(buf.data(), buf.size(), 0), buf.size());
  reader_done_with_m0 = true;
  // Let the root run as far as it can before M1 is read.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until && completed.load() < kCount) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (size_t k = 1; k < kCount; ++k) {
    buf.assign(sizes[k], 0xEE);
    bcast.Run(0, 0, buf.data(), buf.size(), (uint64_t{k} + 1) << 24, 7, policy, guard);
    EXPECT_EQ(FirstPatternMismatch(buf.data(), buf.size(), k), buf.size()) << "message " << k;
  }
  root.join();
}

}  // namespace
}  // namespace topocoll::test
