// The node-wide small-message allreduce and the allgather, bcast, reduce, gather, scatter,
// alltoall, reduce-scatter and scans through its slots (shm_allreduce.h), threads as the local
// ranks: both protocols (every rank combines / the last to arrive computes) alternating from call
// to call as configure() may switch them, one-way bcasts, reduces, gathers, scatters and scans
// from every root between them (runs of them longer than the ring), calls
// back to back so the ring of slots, the columns and the results are reused while slow ranks
// lag (a bcast root and reduce senders run ahead), data at the slot's and column's limits,
// allgather blocks of several rounds.
// The operator is neither commutative nor associative (dst = 3·dst + src): only the fold in
// local order gives the reference. Headers that differ end every rank's call with EMISMATCH.
#include "shm/shm_allreduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/datatypes.h"
#include "base/errors.h"
#include "base/message.h"
#include "bcast_node.h"
#include "test_support.h"

namespace topocoll::test {
namespace {

constexpr auto kDeadline = std::chrono::seconds(20);

void Combine(void* dst_v, const void* src_v, size_t n) {
  auto* dst = static_cast<uint64_t*>(dst_v);
  const auto* src = static_cast<const uint64_t*>(src_v);
  for (size_t i = 0; i < n; ++i) dst[i] = dst[i] * 3 + src[i];
}

uint64_t InputValue(uint64_t call, uint64_t rank, uint64_t i) {
  uint64_t x = (call * 7919 + rank) * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL;
  return x ^ (x >> 31);
}

// The node-wide area (counters, two results, the rings of slots, the columns), zeroed, shared.
class NodeArea {
 public:
  explicit NodeArea(size_t local_size)
      : local_size_(local_size),
        counters_bytes_(RoundUp(sizeof(ShmAllreduce::Counters), kPageBytes)),
        results_bytes_(RoundUp(2 * ShmAllreduce::kMaxBytes, kPageBytes)),
        slots_bytes_(ShmAllreduce::SlotsBytes(local_size) + ShmAllreduce::ColumnsBytes(local_size)),
        memory_(counters_bytes_ + results_bytes_ + slots_bytes_ + RoundUp(local_size * sizeof(Doorbell), kPageBytes)) {
    area_.counters = new (memory_.base()) ShmAllreduce::Counters();
    area_.results = memory_.base() + counters_bytes_;
    area_.slots = reinterpret_cast<ShmAllreduce::Slot*>(memory_.base() + counters_bytes_ + results_bytes_);
    area_.columns = memory_.base() + counters_bytes_ + results_bytes_ + ShmAllreduce::SlotsBytes(local_size);
    auto* bells = reinterpret_cast<Doorbell*>(memory_.base() + counters_bytes_ + results_bytes_ + slots_bytes_);
    for (size_t i = 0; i < local_size; ++i) doorbells_.push_back(new (&bells[i]) Doorbell());
  }
  ShmAllreduce::Area area() const { return area_; }
  const std::vector<Doorbell*>& doorbells() const { return doorbells_; }
  // The area as if `calls` calls had been made before: every slot marked "entered calls − 1"
  // (a zeroed area is that for 0 calls).
  void StartAt(uint32_t calls) {
    for (size_t i = 0; i < ShmAllreduce::kDepth * local_size_; ++i) area_.slots[i].deposited.store(calls, std::memory_order_relaxed);
  }

 private:
  size_t local_size_, counters_bytes_, results_bytes_, slots_bytes_;
  Mapping memory_;
  ShmAllreduce::Area area_{};
  std::vector<Doorbell*> doorbells_;
};

MsgHeader HeaderOf(Collective collective, uint64_t call, uint64_t count) {
  MsgHeader h{};
  h.magic = kMsgMagic;
  h.seq = static_cast<uint32_t>(call);
  h.collective = static_cast<uint8_t>(collective);
  h.dtype = static_cast<uint8_t>(Dtype::kUint64);
  h.count = count;
  return h;
}

struct Case {
  const char* name;
  std::vector<int> ranks;  // global ranks of the local ranks, ascending
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ShmAllreduceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShmAllreduceTest, EveryRankGetsTheLocalOrderFoldAndEveryBlock) {
  const Case c = GetParam();
  const size_t local = c.ranks.size();
  const size_t global = static_cast<size_t>(c.ranks.back()) + 1;
  NodeArea node(local);
  // Starts near the wrap of the 32-bit call count, so the runs cross it.
  constexpr uint32_t kFirstCall = 0xffffffffU - 40;
  node.StartAt(kFirstCall);
  enum Kind { kAllreduce, kAllgather, kBcast, kReduce, kGather, kScatter, kAlltoall, kReduceScatter, kScan, kExscan, kKinds };
  struct Call {
    Kind kind;
    bool every_rank;                       // the protocol (allreduce, allgather)
    size_t root;                           // local index (bcast, reduce, gather, scatter)
    uint64_t count;                        // allreduce, bcast, reduce, scan elements; an alltoall's block
    std::vector<uint64_t> counts, displs;  // allgather, gather, scatter, reduce-scatter blocks (elements, by global rank)
  };
  std::vector<Call> calls;
  std::mt19937 rng(31);
  constexpr uint64_t kMaxCount = ShmAllreduce::kMaxBytes / sizeof(uint64_t);
  constexpr uint64_t kColumn = ShmAllreduce::kColumnBytes / sizeof(uint64_t);
  constexpr uint64_t kInline = ShmAllreduce::kInlineBytes / sizeof(uint64_t);
  // Runs of one-way calls from one root, longer than the ring, make the root (bcast) or the
  // senders (reduce) wrap the ring while readers lag.
  int run = 0;
  while (calls.size() < 600) {
    Call call;
    if (run > 0) {
      --run;
      call = calls.back();
    } else {
      call.kind = static_cast<Kind>(rng() % kKinds);
      call.every_rank = rng() % 2 == 0;
      call.root = rng() % local;
      const bool one_way =
          call.kind == kBcast || call.kind == kReduce || call.kind == kGather || call.kind == kScatter || call.kind == kScan;
      if (one_way && rng() % 3 == 0) run = static_cast<int>(ShmAllreduce::kDepth + rng() % 40);
    }
    // A run's calls stay in the slots (a column call waits for every rank).
    const uint64_t counts[] = {0, 1, 2, 3, kInline, kInline + 1, kMaxCount - 1, kMaxCount, 1 + rng() % kMaxCount};
    call.count = counts[rng() % (run > 0 ? 5 : 9)];
    if (call.kind == kAlltoall) call.count = std::min(call.count, kMaxCount / local);
    if (call.kind == kGather || call.kind == kScatter || call.kind == kReduceScatter) {
      // Blocks of one call hold at most kMaxCount in all; a run's deposits stay in the slots
      // (a gather's: each block; the others': the whole vector).
      const uint64_t most = run > 0 ? (call.kind == kGather ? kInline : kInline / local) : kMaxCount / local;
      call.counts.assign(global, 0);
      call.displs.assign(global, 0);
      uint64_t at = 0;
      for (size_t g = 0; g < global; ++g) {
        call.displs[g] = at;
        if (std::find(c.ranks.begin(), c.ranks.end(), static_cast<int>(g)) == c.ranks.end()) continue;
        const uint64_t blocks[] = {0, 1, most, rng() % (most + 1)};
        call.counts[g] = blocks[rng() % 4];
        at += call.counts[g];
      }
    }
    if (call.kind == kAllgather) {
      uint64_t at = 0;
      call.counts.assign(global, 0);
      call.displs.assign(global, 0);
      for (int r : c.ranks) {
        const uint64_t blocks[] = {0, 1, kInline, kInline + 1, kColumn - 1, kColumn, kColumn + 1, 2 * kColumn + 3, rng() % 100};
        call.counts[static_cast<size_t>(r)] = blocks[rng() % 9];
        call.displs[static_cast<size_t>(r)] = at;
        at += call.counts[static_cast<size_t>(r)];
      }
    }
    calls.push_back(call);
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> checked{0};
  const WaitPolicy policy = TestPolicy();
  const CustomReduce combine_fn = Combine;
  Reducer combine;
  combine.custom = &combine_fn;

  const std::string error = RunThreads(
      local,
      [&](size_t me) {
        DeadlineGuard guard(kDeadline, &stop);
        AreaCalls call_count{kFirstCall, kFirstCall};
        ShmAllreduce engine(node.area(), c.ranks, node.doorbells(), static_cast<int>(me), &call_count);
        const int my_rank = c.ranks[me];
        std::mt19937 late(static_cast<uint32_t>(me) + 11);
        std::vector<uint64_t> buf;
        for (size_t k = 0; k < calls.size(); ++k) {
          const Call& call = calls[k];
          if (late() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(late() % 200));
          // The fold of every local rank's input in local order (allreduce, reduce).
          const auto fold = [&](uint64_t i) {
            uint64_t expected = InputValue(k, static_cast<uint64_t>(c.ranks[0]), i);
            for (size_t r = 1; r < local; ++r) expected = expected * 3 + InputValue(k, static_cast<uint64_t>(c.ranks[r]), i);
            return expected;
          };
          const auto fail = [&](const char* what, uint64_t i) {
            throw std::runtime_error(std::string(what) + " " + std::to_string(k) + " (" + std::to_string(call.count) + " elements, root " +
                                     std::to_string(call.root) + "): element " + std::to_string(i) + " differs");
          };
          if (call.kind == kBcast) {
            const auto root = static_cast<uint64_t>(c.ranks[call.root]);
            buf.assign(call.count, ~uint64_t{0});
            if (me == call.root)
              for (uint64_t i = 0; i < call.count; ++i) buf[i] = InputValue(k, root, i);
            MsgHeader h = HeaderOf(Collective::kBcast, k, call.count);
            h.root = c.ranks[call.root];
            engine.Bcast(buf.data(), call.count * sizeof(uint64_t), h, call.root, policy, guard);
            for (uint64_t i = 0; i < call.count; ++i)
              if (buf[i] != InputValue(k, root, i)) fail("bcast", i);
          } else if (call.kind == kReduce) {
            buf.resize(call.count);
            for (uint64_t i = 0; i < call.count; ++i) buf[i] = InputValue(k, static_cast<uint64_t>(my_rank), i);
            MsgHeader h = HeaderOf(Collective::kReduce, k, call.count);
            h.root = c.ranks[call.root];
            engine.Reduce(buf.data(), call.count, sizeof(uint64_t), h, call.root, combine, policy, guard);
            for (uint64_t i = 0; i < call.count; ++i) {
              // The root gets the fold; the others' input stays as it was.
              const uint64_t want = me == call.root ? fold(i) : InputValue(k, static_cast<uint64_t>(my_rank), i);
              if (buf[i] != want) fail("reduce", i);
            }
          } else if (call.kind == kGather || call.kind == kScatter) {
            const bool gather = call.kind == kGather;
            const auto mine = static_cast<size_t>(my_rank);
            const uint64_t total = call.displs.back() + call.counts.back();
            // The whole vector at the root, this rank's block (its input, or where its block lands).
            std::vector<uint64_t> whole(me == call.root ? total : 0, ~uint64_t{0});
            buf.assign(call.counts[mine], ~uint64_t{0});
            if (gather) {
              for (uint64_t i = 0; i < call.counts[mine]; ++i) buf[i] = InputValue(k, mine, i);
            } else if (me == call.root) {
              for (int r : c.ranks)
                for (uint64_t i = 0; i < call.counts[static_cast<size_t>(r)]; ++i)
                  whole[call.displs[static_cast<size_t>(r)] + i] = InputValue(k, static_cast<uint64_t>(r), i);
            }
            MsgHeader h = HeaderOf(gather ? Collective::kGather : Collective::kScatter, k, total);
            h.root = c.ranks[call.root];
            auto* w = me == call.root ? reinterpret_cast<uint8_t*>(whole.data()) : nullptr;
            auto* own = reinterpret_cast<uint8_t*>(buf.data());
            if (gather)
              engine.Gather(own, w, call.counts, call.displs, sizeof(uint64_t), h, call.root, policy, guard);
            else
              engine.Scatter(w, own, call.counts, call.displs, sizeof(uint64_t), h, call.root, policy, guard);
            for (uint64_t i = 0; i < call.counts[mine]; ++i)
              if (buf[i] != InputValue(k, mine, i)) fail(gather ? "gather (own block)" : "scatter", i);
            if (gather && me == call.root) {
              for (int r : c.ranks)
                for (uint64_t i = 0; i < call.counts[static_cast<size_t>(r)]; ++i)
                  if (whole[call.displs[static_cast<size_t>(r)] + i] != InputValue(k, static_cast<uint64_t>(r), i)) fail("gather", i);
            }
          } else if (call.kind == kAlltoall) {
            // Block d of local rank s: InputValue(k, s·local + d, i).
            const uint64_t n = call.count;
            std::vector<uint64_t> send(n * local);
            for (size_t d = 0; d < local; ++d)
              for (uint64_t i = 0; i < n; ++i) send[d * n + i] = InputValue(k, me * local + d, i);
            buf.assign(n * local, ~uint64_t{0});
            // Every third call in place.
            const bool in_place = k % 3 == 0;
            if (in_place) buf = send;
            engine.Alltoall(reinterpret_cast<const uint8_t*>(in_place ? buf.data() : send.data()), reinterpret_cast<uint8_t*>(buf.data()),
                            n, sizeof(uint64_t), HeaderOf(Collective::kAlltoall, k, n), policy, guard);
            for (size_t s = 0; s < local; ++s)
              for (uint64_t i = 0; i < n; ++i)
                if (buf[s * n + i] != InputValue(k, s * local + me, i)) fail("alltoall", i);
          } else if (call.kind == kReduceScatter) {
            const auto mine = static_cast<size_t>(my_rank);
            const uint64_t total = call.displs.back() + call.counts.back();
            std::vector<uint64_t> input(total);
            for (uint64_t x = 0; x < total; ++x) input[x] = InputValue(k, mine, x);
            // Every third call in place: the input is buf, the block its first elements.
            const bool in_place = k % 3 == 0;
            buf = in_place ? input : std::vector<uint64_t>(call.counts[mine], ~uint64_t{0});
            engine.ReduceScatter(reinterpret_cast<const uint8_t*>(in_place ? buf.data() : input.data()),
                                 reinterpret_cast<uint8_t*>(buf.data()), call.counts, call.displs, sizeof(uint64_t),
                                 HeaderOf(Collective::kReduceScatter, k, total), combine, policy, guard);
            for (uint64_t i = 0; i < call.counts[mine]; ++i)
              if (buf[i] != fold(call.displs[mine] + i)) fail("reduce-scatter", i);
          } else if (call.kind == kScan || call.kind == kExscan) {
            const bool exclusive = call.kind == kExscan;
            buf.resize(call.count);
            for (uint64_t i = 0; i < call.count; ++i) buf[i] = InputValue(k, static_cast<uint64_t>(my_rank), i);
            // In place: the result overwrites the input (an exscan's rank 0 keeps it).
            MsgHeader h = HeaderOf(exclusive ? Collective::kExscan : Collective::kScan, k, call.count);
            engine.Scan(reinterpret_cast<const uint8_t*>(buf.data()), reinterpret_cast<uint8_t*>(buf.data()), call.count, sizeof(uint64_t),
                        exclusive, h, combine, policy, guard);
            const size_t upto = exclusive ? me : me + 1;
            for (uint64_t i = 0; i < call.count; ++i) {
              uint64_t want = InputValue(k, static_cast<uint64_t>(my_rank), i);
              if (upto > 0) {
                want = InputValue(k, static_cast<uint64_t>(c.ranks[0]), i);
                for (size_t r = 1; r < upto; ++r) want = want * 3 + InputValue(k, static_cast<uint64_t>(c.ranks[r]), i);
              }
              if (buf[i] != want) fail(exclusive ? "exscan" : "scan", i);
            }
          } else if (call.kind == kAllgather) {
            uint64_t total = 0;
            for (uint64_t n : call.counts) total += n;
            buf.assign(total, ~uint64_t{0});
            const auto mine = static_cast<size_t>(my_rank);
            for (uint64_t i = 0; i < call.counts[mine]; ++i) buf[call.displs[mine] + i] = InputValue(k, mine, i);
            engine.Allgather(reinterpret_cast<uint8_t*>(buf.data()), call.counts, call.displs, sizeof(uint64_t),
                             HeaderOf(Collective::kAllgather, k, total), call.every_rank, policy, guard);
            for (int r : c.ranks) {
              const auto g = static_cast<size_t>(r);
              for (uint64_t i = 0; i < call.counts[g]; ++i) {
                if (buf[call.displs[g] + i] != InputValue(k, g, i)) {
                  throw std::runtime_error("allgather " + std::to_string(k) + ": element " + std::to_string(i) + " of rank " +
                                           std::to_string(r) + "'s block differs");
                }
              }
            }
          } else {
            buf.resize(call.count);
            for (uint64_t i = 0; i < call.count; ++i) buf[i] = InputValue(k, static_cast<uint64_t>(my_rank), i);
            engine.Run(buf.data(), call.count, sizeof(uint64_t), HeaderOf(Collective::kAllreduce, k, call.count), call.every_rank, combine,
                       policy, guard);
            for (uint64_t i = 0; i < call.count; ++i)
              if (buf[i] != fold(i)) fail(call.every_rank ? "allreduce (every rank combines)" : "allreduce (last to arrive)", i);
          }
          ++checked;
        }
      },
      stop);
  EXPECT_EQ(error, "");
  EXPECT_EQ(checked.load(), calls.size() * local);
}

INSTANTIATE_TEST_SUITE_P(Nodes, ShmAllreduceTest,
                         ::testing::Values(Case{"two_ranks", {0, 1}}, Case{"three_ranks_of_a_job", {1, 4, 5}},
                                           Case{"five_ranks", {0, 1, 2, 3, 4}}),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// One rank calls with another count: the call ends in EMISMATCH (on the ranks that see the
// headers; the others' waits end through the test's stop flag, as an abort ends them in a job).
TEST(ShmAllreduceMismatch, DifferentCountsEndTheCallWithEmismatch) {
  for (bool every_rank : {true, false}) {
    SCOPED_TRACE(every_rank ? "every rank combines" : "last to arrive");
    const std::vector<int> ranks = {0, 1, 2};
    NodeArea node(ranks.size());
    std::atomic<bool> stop{false};
    const CustomReduce combine_fn = Combine;
    Reducer combine;
    combine.custom = &combine_fn;
    std::atomic<int> mismatches{0};
    const std::string error = RunThreads(
        ranks.size(),
        [&](size_t me) {
          DeadlineGuard guard(std::chrono::seconds(5), &stop);
          AreaCalls call_count;
          ShmAllreduce engine(node.area(), ranks, node.doorbells(), static_cast<int>(me), &call_count);
          const uint64_t count = me == 2 ? 5 : 4;
          std::vector<uint64_t> buf(count, 1);
          try {
            engine.Run(buf.data(), count, sizeof(uint64_t), HeaderOf(Collective::kAllreduce, 0, count), every_rank, combine, TestPolicy(),
                       guard);
          } catch (const CollError& e) {
            if (e.code() == "EMISMATCH") ++mismatches;
            throw;
          }
        },
        stop);
    EXPECT_NE(error, "");
    EXPECT_GE(mismatches.load(), 1);
  }
}

// A one-way bcast where local rank 2 names another root: rank 1 (which thinks it is a reader of
// rank 0) passes, rank 2 reads rank 1's slot and finds a header with another root.
TEST(ShmAllreduceMismatch, ABcastReaderOfTheWrongRootGetsEmismatch) {
  const std::vector<int> ranks = {0, 1, 2};
  NodeArea node(ranks.size());
  std::atomic<bool> stop{false};
  std::atomic<int> mismatches_at_2{0};
  const std::string error = RunThreads(
      ranks.size(),
      [&](size_t me) {
        DeadlineGuard guard(std::chrono::seconds(5), &stop);
        AreaCalls calls;
        ShmAllreduce engine(node.area(), ranks, node.doorbells(), static_cast<int>(me), &calls);
        const size_t root = me == 2 ? 1 : 0;
        MsgHeader h = HeaderOf(Collective::kBcast, 0, 4);
        h.root = static_cast<int32_t>(root);
        std::vector<uint64_t> buf(4, me);
        try {
          engine.Bcast(buf.data(), buf.size() * sizeof(uint64_t), h, root, TestPolicy(), guard);
        } catch (const CollError& e) {
          if (e.code() == "EMISMATCH" && me == 2) ++mismatches_at_2;
          throw;
        }
      },
      stop);
  EXPECT_NE(error, "");
  EXPECT_EQ(mismatches_at_2.load(), 1);
}

}  // namespace
}  // namespace topocoll::test
