// The shared-memory reduce (shm_reduce.h) with threads as a group's members: messages of one to
// many chunks (half a queue each), members arriving late, destinations changing, and S0
// broadcasts interleaved in the same queues. The operator is deliberately neither commutative
// nor associative (dst = 3·dst + src), so the result equals the reference — a fold in member
// order — only if every member's slice is combined in that order, from the right chunk.
#include "shm/shm_reduce.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/datatypes.h"
#include "bcast_node.h"
#include "shm/shm_bcast.h"
#include "test_support.h"

namespace topocoll::test {
namespace {

constexpr auto kDeadline = std::chrono::seconds(20);
uint64_t InputValue(uint64_t call, uint64_t member, uint64_t i) {
  uint64_t x = (call * 1000003 + member) * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL;
  return x ^ (x >> 29);
}

// dst = 3·dst + src: neither commutative nor associative.
void Combine(void* dst_v, const void* src_v, size_t n) {
  auto* dst = static_cast<uint64_t*>(dst_v);
  const auto* src = static_cast<const uint64_t*>(src_v);
  for (size_t i = 0; i < n; ++i) dst[i] = dst[i] * 3 + src[i];
}

struct ReduceCase {
  const char* name;
  size_t ranks;
  uint64_t queue_bytes;
};

void PrintTo(const ReduceCase& c, std::ostream* os) { *os << c.name; }

class ShmReduceTest : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(ShmReduceTest, DestinationGetsTheMemberOrderFoldWithBroadcastsInBetween) {
  const ReduceCase c = GetParam();
  ShmBcastParams params;
  params.queue_bytes = c.queue_bytes;
  params.min_fragment = 4096;
  params.sets = 2;
  params.tree = TreeKind::kKnomial;
  params.fragment_for_log2.assign(27, 4096);
  Node node(params, c.ranks);
  std::vector<int> members;
  for (size_t i = 0; i < c.ranks; ++i) members.push_back(static_cast<int>(i));
  // Elements of one chunk (half a queue), to size messages around it.
  const uint64_t chunk = c.queue_bytes / 2 / 64 * 64 / sizeof(uint64_t);
  struct Call {
    bool bcast;
    int root;  // the destination of a reduce
    uint64_t count;
  };
  std::vector<Call> calls;
  std::mt19937 rng(99);
  const uint64_t interesting[] = {1, 2, c.ranks - 1, c.ranks, c.ranks + 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 3 * chunk + 5};
  for (int k = 0; k < 150; ++k) {
    Call call;
    call.bcast = rng() % 4 == 0;
    call.root = static_cast<int>(rng() % c.ranks);
    call.count = rng() % 2 == 0 ? interesting[rng() % 10] : 1 + rng() % (4 * chunk);
    calls.push_back(call);
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> checked{0};
  const WaitPolicy policy = TestPolicy();
  const CustomReduce combine_fn = Combine;
  Reducer combine;
  combine.custom = &combine_fn;

  const std::string error = RunThreads(
      c.ranks,
      [&](size_t me_index) {
        const int me = static_cast<int>(me_index);
        DeadlineGuard guard(kDeadline, &stop);
        ShmReduce reduce(node.regions(), node.doorbells(), me, c.queue_bytes);
        ShmBcast bcast(params, node.regions(), node.doorbells(), me);
        reduce.SetGroup(0, members);
        bcast.SetGroup(0, members);
        std::mt19937 late(static_cast<uint32_t>(me) + 5);
        std::vector<uint64_t> buf;
        for (size_t k = 0; k < calls.size(); ++k) {
          const Call& call = calls[k];
          // Some members arrive late: the others wait for their chunks.
          if (late() % 6 == 0) std::this_thread::sleep_for(std::chrono::microseconds(late() % 300));
          buf.resize(call.count);
          if (call.bcast) {
            const size_t bytes = call.count * sizeof(uint64_t);
            if (me == call.root)
              FillPattern(reinterpret_cast<uint8_t*>(buf.data()), bytes, k);
            else
              std::fill(buf.begin(), buf.end(), 0);
            bcast.Run(0, call.root, buf.data(), bytes, (uint64_t{k} + 1) << 24, static_cast<uint32_t>(k), policy, guard);
            if (FirstPatternMismatch(reinterpret_cast<uint8_t*>(buf.data()), bytes, k) != bytes) {
              throw std::runtime_error("broadcast " + std::to_string(k) + " arrived damaged");
            }
            continue;
          }
          for (uint64_t i = 0; i < call.count; ++i) buf[i] = InputValue(k, me_index, i);
          reduce.Run(0, call.root, buf.data(), call.count, sizeof(uint64_t), combine, policy, guard);
          if (me != call.root) continue;
          for (uint64_t i = 0; i < call.count; ++i) {
            uint64_t expected = InputValue(k, 0, i);
            for (size_t m = 1; m < c.ranks; ++m) expected = expected * 3 + InputValue(k, m, i);
            if (buf[i] != expected) {
              throw std::runtime_error("reduce " + std::to_string(k) + " (" + std::to_string(call.count) + " elements to rank " +
                                       std::to_string(call.root) + "): element " + std::to_string(i) + " differs");
            }
          }
          ++checked;
        }
      },
      stop);
  EXPECT_EQ(error, "");
  size_t reduces = 0;
  for (const Call& call : calls) reduces += call.bcast ? 0 : 1;
  EXPECT_EQ(checked.load(), reduces);
}

INSTANTIATE_TEST_SUITE_P(Groups, ShmReduceTest,
                         ::testing::Values(ReduceCase{"two_members", 2, 16 * 1024}, ReduceCase{"three_members", 3, 32 * 1024},
                                           ReduceCase{"five_members", 5, 16 * 1024}),
                         [](const ::testing::TestParamInfo<ReduceCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace topocoll::test
