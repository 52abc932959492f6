// The per-rank outboxes (shm_channel_pool.h): the ring capacities a rank's channels get from
// the size of its outbox and the peers it declares (Want), Want's refusal of a peer set the
// outbox cannot hold, channels to peers nobody declared, and ranks (threads) that find the
// channels addressed to them in each other's outboxes while those are being made, every byte of
// every message intact.
#include "shm/shm_channel_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/errors.h"
#include "test_support.h"

namespace topocoll::test {
namespace {

constexpr auto kDeadline = std::chrono::seconds(20);
constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr size_t kPage = 4096;

// The pool's part of a node segment, zeroed as a new segment is: L doorbells, then L outboxes of
// `pool_bytes` each, every one in its own pages (as SegmentLayout lays them out).
class Node {
 public:
  Node(size_t ranks, const ChannelPoolParams& params)
      : params_(params), stride_((params.pool_bytes + kPage - 1) / kPage * kPage), memory_(BellBytes(ranks) + ranks * stride_) {
    for (size_t i = 0; i < ranks; ++i) {
      bells_.push_back(new (memory_.base() + i * sizeof(Doorbell)) Doorbell());
      outboxes_.push_back(memory_.base() + BellBytes(ranks) + i * stride_);
    }
  }
  // Local rank i's view of the node's channels.
  std::unique_ptr<ShmChannelPool> Pool(int i) const { return std::make_unique<ShmChannelPool>(outboxes_, bells_, i, params_); }
  Doorbell& bell(size_t i) const { return *bells_[i]; }
  size_t ranks() const { return bells_.size(); }

 private:
  static size_t BellBytes(size_t ranks) { return (ranks * sizeof(Doorbell) + kPage - 1) / kPage * kPage; }

  ChannelPoolParams params_;
  size_t stride_;
  Mapping memory_;
  std::vector<Doorbell*> bells_;
  std::vector<uint8_t*> outboxes_;
};

// Local ranks first..last.
std::vector<int> Ranks(int first, int last) {
  std::vector<int> r;
  for (int i = first; i <= last; ++i) r.push_back(i);
  return r;
}

bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// Runs f, which must throw CollError ECONFIG whose message contains `names`.
template <typename F>
void ExpectEconfig(F&& f, const std::string& names) {
  try {
    f();
    ADD_FAILURE() << "accepted; ECONFIG naming \"" << names << "\" expected";
  } catch (const CollError& e) {
    EXPECT_EQ(e.code(), "ECONFIG") << e.what();
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << "the message does not name \"" << names << "\": " << e.what();
  }
}

// An outbox of 8 blocks of 1 MiB rings with their headers, and its own header.
constexpr ChannelPoolParams kEightLargest{8 * (kMiB + kChannelBlockHeaderBytes) + kOutboxHeaderBytes, 1 * kMiB, 64 * kKiB};

// Room for 8 channels at the largest ring: 7 wanted peers get the largest ring each — made all
// at once, at the first send to any of them — and each receiver finds a channel of that size.
TEST(ShmChannelPoolCapacity, SevenWantedPeersGetTheLargestRingEach) {
  Node node(8, kEightLargest);
  auto sender = node.Pool(0);
  sender->Want(Ranks(1, 7), 0);
  EXPECT_EQ(sender->Use().channels, 0u) << "Want makes no channel";
  EXPECT_EQ(sender->Outgoing(3).capacity(), 1 * kMiB);
  EXPECT_EQ(sender->Use().channels, 7u) << "the first send makes every wanted channel";
  for (int to = 1; to <= 7; ++to) {
    EXPECT_EQ(sender->Outgoing(to).capacity(), 1 * kMiB) << "to " << to;
    auto receiver = node.Pool(to);
    ShmChannel* in = receiver->Incoming(0);
    ASSERT_NE(in, nullptr) << "local rank " << to << " finds no channel from 0";
    EXPECT_EQ(in->capacity(), 1 * kMiB) << "to " << to;
  }
  const ChannelPoolUse use = sender->Use();
  EXPECT_EQ(use.channels, 7u);
  EXPECT_EQ(use.bytes, 7 * (kMiB + kChannelBlockHeaderBytes));
  EXPECT_EQ(use.largest_rank_bytes, use.bytes);
}

// The boundary: 8 wanted peers fill that outbox to its last byte, every ring still the largest.
TEST(ShmChannelPoolCapacity, EightWantedPeersFillTheOutboxExactly) {
  Node node(9, kEightLargest);
  auto sender = node.Pool(0);
  sender->Want(Ranks(1, 8), 0);
  for (int to = 1; to <= 8; ++to) EXPECT_EQ(sender->Outgoing(to).capacity(), 1 * kMiB) << "to " << to;
  EXPECT_EQ(sender->Use().bytes + kOutboxHeaderBytes, kEightLargest.pool_bytes);
}

// 20 wanted peers in that outbox: every ring a power of two within [min, max], and the blocks
// with the outbox's header within the outbox (Use agrees with the capacities).
TEST(ShmChannelPoolCapacity, TwentyWantedPeersGetPowersOfTwoWithinBoundsThatFit) {
  Node node(21, kEightLargest);
  auto sender = node.Pool(0);
  sender->Want(Ranks(1, 20), 0);
  uint64_t blocks = 0;
  for (int to = 1; to <= 20; ++to) {
    const uint64_t c = sender->Outgoing(to).capacity();
    EXPECT_TRUE(IsPowerOfTwo(c)) << "to " << to << ": " << c;
    EXPECT_GE(c, kEightLargest.min_capacity) << "to " << to;
    EXPECT_LE(c, kEightLargest.max_capacity) << "to " << to;
    blocks += c + kChannelBlockHeaderBytes;
  }
  EXPECT_LE(blocks + kOutboxHeaderBytes, kEightLargest.pool_bytes);
  EXPECT_EQ(sender->Use().channels, 20u);
  EXPECT_EQ(sender->Use().bytes, blocks);
}

// Wanted peers made together share the outbox equally: all 20 rings the same size, whichever
// local index the peer has.
TEST(ShmChannelPoolCapacity, TwentyWantedPeersGetEqualRings) {
  Node node(21, kEightLargest);
  auto sender = node.Pool(0);
  sender->Want(Ranks(1, 20), 0);
  std::string capacities;
  std::vector<uint64_t> c;
  for (int to = 1; to <= 20; ++to) {
    c.push_back(sender->Outgoing(to).capacity());
    capacities += " " + std::to_string(c.back() / kKiB);
  }
  EXPECT_EQ(std::count(c.begin(), c.end(), c[0]), 20) << "capacities in KiB, to 1..20:" << capacities;
}

// Schedules may be registered after channels were made (one root at a time): the first peers
// still get large rings, yet every other rank of the node can be declared later and gets a
// channel of at least the smallest ring. 41 ranks, room for 8 of the largest rings: 7 peers first
// (512 KiB each: 1 MiB each would leave too little for the 33 others at 64 KiB), then the 33
// others at once.
TEST(ShmChannelPoolCapacity, PeersDeclaredAfterChannelsWereMadeStillFit) {
  Node node(41, kEightLargest);
  auto sender = node.Pool(0);
  sender->Want(Ranks(1, 7), 0);
  uint64_t blocks = 0;
  for (int to = 1; to <= 7; ++to) {
    const uint64_t c = sender->Outgoing(to).capacity();
    EXPECT_EQ(c, 512 * kKiB) << "to " << to;
    blocks += c + kChannelBlockHeaderBytes;
  }
  sender->Want(Ranks(8, 40), 0);
  for (int to = 8; to <= 40; ++to) {
    const uint64_t c = sender->Outgoing(to).capacity();
    EXPECT_GE(c, kEightLargest.min_capacity) << "to " << to;
    blocks += c + kChannelBlockHeaderBytes;
  }
  EXPECT_LE(blocks + kOutboxHeaderBytes, kEightLargest.pool_bytes);
  EXPECT_EQ(sender->Use().channels, 40u);
}

// Room for two channels of the smallest ring.
constexpr ChannelPoolParams kTwoSmallest{kOutboxHeaderBytes + 2 * (kChannelBlockHeaderBytes + 64 * kKiB), 1 * kMiB, 64 * kKiB};

// Three peers do not fit at the smallest ring: refused, naming the rank (the global one passed
// to Want, not the local index); the refusal reserves nothing, so two are then accepted, and
// made at the smallest ring.
TEST(ShmChannelPoolWant, RefusesPeersTheOutboxCannotHoldAtTheSmallestRing) {
  Node node(4, kTwoSmallest);
  auto sender = node.Pool(0);
  ExpectEconfig([&] { sender->Want({1, 2, 3}, 17); }, "rank 17");
  EXPECT_NO_THROW(sender->Want({1, 2}, 17));
  EXPECT_EQ(sender->Outgoing(1).capacity(), 64 * kKiB);
  EXPECT_EQ(sender->Outgoing(2).capacity(), 64 * kKiB);
  EXPECT_EQ(sender->Use().bytes + kOutboxHeaderBytes, kTwoSmallest.pool_bytes);
}

// A peer counts once however often it is declared — in one call, across calls, or after its
// channel is made — and the rank itself not at all; but a third peer is still refused, and the
// two declared ones still get their channels.
TEST(ShmChannelPoolWant, CountsEachPeerOnce) {
  Node node(4, kTwoSmallest);
  auto sender = node.Pool(0);
  EXPECT_NO_THROW(sender->Want({1, 2}, 17));
  EXPECT_NO_THROW(sender->Want({1, 2}, 17));
  EXPECT_NO_THROW(sender->Want({2, 2, 1, 1, 0}, 17));
  ExpectEconfig([&] { sender->Want({3}, 17); }, "rank 17");
  EXPECT_EQ(sender->Outgoing(2).capacity(), 64 * kKiB);
  EXPECT_EQ(sender->Outgoing(1).capacity(), 64 * kKiB);
  EXPECT_NO_THROW(sender->Want({1, 2}, 17));
  ExpectEconfig([&] { sender->Want({1, 3}, 17); }, "rank 17");
  EXPECT_EQ(sender->Use().channels, 2u);
}

// A peer nobody declared gets a channel at its first send while the outbox has room for it and
// for every declared peer still without one; the declared peer's channel is made with it.
// Once the room is gone, a send to another undeclared peer is refused (ECONFIG naming it), and
// the channels made are untouched: their receivers find them and a message goes through.
TEST(ShmChannelPoolUnwanted, GetsAChannelWhileRoomRemainsThenEconfig) {
  Node node(4, kTwoSmallest);
  auto sender = node.Pool(0);
  sender->Want({1}, 0);
  EXPECT_EQ(sender->Outgoing(2).capacity(), 64 * kKiB);
  EXPECT_EQ(sender->Use().channels, 2u) << "the declared peer's channel is made with the undeclared one's";
  EXPECT_EQ(sender->Outgoing(1).capacity(), 64 * kKiB);
  ExpectEconfig([&] { sender->Outgoing(3); }, "local rank 3");
  EXPECT_EQ(sender->Use().channels, 2u);
  EXPECT_EQ(node.Pool(3)->Incoming(0), nullptr);

  std::atomic<bool> stop{false};
  DeadlineGuard guard(kDeadline, &stop);
  const WaitPolicy policy = TestPolicy();
  for (int to = 1; to <= 2; ++to) {
    auto receiver = node.Pool(to);
    ShmChannel* in = receiver->Incoming(0);
    ASSERT_NE(in, nullptr) << "to " << to;
    EXPECT_EQ(in->capacity(), 64 * kKiB);
    uint8_t body[40];
    FillPattern(body, sizeof body, static_cast<uint64_t>(to));
    const ByteSlice slice{body, sizeof body};
    sender->Outgoing(to).Send(&slice, 1, policy, guard);
    uint8_t got[sizeof body] = {};
    in->ReadExact(got, sizeof got, policy, guard);
    EXPECT_EQ(FirstPatternMismatch(got, sizeof got, static_cast<uint64_t>(to)), sizeof got) << "to " << to;
  }
}

// Declared peers hold their room: with two declared and room for two, a send to an undeclared
// third is refused before any channel exists, and the declared ones still get theirs.
TEST(ShmChannelPoolUnwanted, IsRefusedTheRoomOfDeclaredPeers) {
  Node node(4, kTwoSmallest);
  auto sender = node.Pool(0);
  sender->Want({1, 2}, 0);
  ExpectEconfig([&] { sender->Outgoing(3); }, "local rank 3");
  EXPECT_EQ(sender->Use().channels, 0u);
  EXPECT_EQ(sender->Outgoing(1).capacity(), 64 * kKiB);
  EXPECT_EQ(sender->Outgoing(2).capacity(), 64 * kKiB);
}

// --- discovery across ranks ---

// Which ranks declare their peers before sending: all (as SetPlan does), none (each channel is
// made at its first send, one at a time, in the rank's send order), or every other rank.
enum class Declared { kAll, kNone, kEven };

void PrintTo(Declared d, std::ostream* os) { *os << (d == Declared::kAll ? "all" : d == Declared::kNone ? "none" : "even"); }

class ShmChannelPoolDiscovery : public ::testing::TestWithParam<Declared> {};

// 6 ranks (threads) on one node; each sends every other rank a 100-byte message and a 300 KiB
// one (streamed: larger than a piece), in its own order of peers, and takes both from every
// other in yet another order, waiting on its doorbell while the channel is not there yet. The
// outboxes hold 5 channels of the largest ring (512 KiB), so every ring is that size on both
// sides, and a sender never waits for room: a rank blocks only while receiving. Ranks 0 and 3
// send everything first; the others first receive from the ranks below them (so those find
// channels that appear while they wait), then send, then receive the rest — each wait is on a
// lower rank, or on one that has sent, so none deadlocks. Before a rank sends, the higher ranks
// that receive first cannot have made their channels yet: Incoming must say so (null).
TEST_P(ShmChannelPoolDiscovery, EveryRankFindsItsChannelsAndEveryByteArrives) {
  constexpr size_t kRanks = 6;
  constexpr uint64_t kRing = 512 * kKiB;
  constexpr size_t kSizes[2] = {100, 300 * 1024};
  const ChannelPoolParams params{kOutboxHeaderBytes + (kRanks - 1) * (kChannelBlockHeaderBytes + kRing), kRing, 64 * kKiB};
  const Declared declared = GetParam();
  Node node(kRanks, params);
  std::vector<std::unique_ptr<ShmChannelPool>> pools;
  for (size_t i = 0; i < kRanks; ++i) pools.push_back(node.Pool(static_cast<int>(i)));
  // Message k from `from` to `to`: its pattern.
  auto id = [&](size_t from, size_t to, size_t k) { return (from * kRanks + to) * 2 + k; };
  std::vector<uint64_t> made_bytes(kRanks, 0);  // by sender: its blocks, from the capacities it saw
  std::atomic<bool> stop{false};
  const WaitPolicy policy = TestPolicy();

  const std::string error = RunThreads(
      kRanks,
      [&](size_t me) {
        DeadlineGuard guard(kDeadline, &stop);
        ShmChannelPool& pool = *pools[me];
        std::mt19937 rng(static_cast<uint32_t>(1000 + me));
        std::vector<int> peers;
        for (size_t p = 0; p < kRanks; ++p) {
          if (p != me) peers.push_back(static_cast<int>(p));
        }
        std::vector<int> send_order = peers, recv_order = peers;
        std::rotate(send_order.begin(), send_order.begin() + static_cast<long>(me % peers.size()), send_order.end());
        std::shuffle(send_order.begin() + 1, send_order.end(), rng);
        std::shuffle(recv_order.begin(), recv_order.end(), rng);
        if (declared == Declared::kAll || (declared == Declared::kEven && me % 2 == 0)) pool.Want(peers, 100 + static_cast<int>(me));

        auto send_all = [&] {
          std::vector<uint8_t> body;
          for (int to : send_order) {
            ShmChannel& out = pool.Outgoing(to);
            if (out.capacity() != kRing)
              throw std::runtime_error("to " + std::to_string(to) + ": ring of " + std::to_string(out.capacity()));
            made_bytes[me] += kChannelBlockHeaderBytes + out.capacity();
            for (size_t k = 0; k < 2; ++k) {
              body.resize(kSizes[k]);
              FillPattern(body.data(), body.size(), id(me, static_cast<size_t>(to), k));
              const ByteSlice slice{body.data(), body.size()};
              out.Send(&slice, 1, policy, guard);
            }
          }
        };
        auto receive_from = [&](int from) {
          ShmChannel* in = pool.Incoming(from);
          if (in == nullptr) WaitUntil([&] { return (in = pool.Incoming(from)) != nullptr; }, node.bell(me), policy, guard);
          if (in->capacity() != kRing)
            throw std::runtime_error("from " + std::to_string(from) + ": ring of " + std::to_string(in->capacity()));
          std::vector<uint8_t> got;
          for (size_t k = 0; k < 2; ++k) {
            got.assign(kSizes[k], 0);
            size_t at = 0;
            in->Consume(
                got.size(),
                [&](const uint8_t* p, size_t len) {
                  std::memcpy(got.data() + at, p, len);
                  at += len;
                },
                policy, guard);
            const size_t bad = FirstPatternMismatch(got.data(), got.size(), id(static_cast<size_t>(from), me, k));
            if (bad != got.size()) {
              throw std::runtime_error("message " + std::to_string(k) + " from " + std::to_string(from) + ": byte " + std::to_string(bad) +
                                       " of " + std::to_string(got.size()) + " differs");
            }
          }
        };

        const bool sends_first = me % 3 == 0;
        // A higher rank that receives first sends only after this rank has sent to it: until
        // then its outbox holds no channel here (its first send makes them).
        for (int from : peers) {
          if (from > static_cast<int>(me) && from % 3 != 0 && pool.Incoming(from) != nullptr) {
            throw std::runtime_error("a channel from " + std::to_string(from) + " before it sent anything");
          }
        }
        if (sends_first) send_all();
        for (int from : recv_order) {
          if (from < static_cast<int>(me) && !sends_first) receive_from(from);
        }
        if (!sends_first) send_all();
        for (int from : recv_order) {
          if (from > static_cast<int>(me) || sends_first) receive_from(from);
        }
      },
      stop);
  ASSERT_EQ(error, "");

  uint64_t sum = 0, largest = 0;
  for (uint64_t b : made_bytes) {
    sum += b;
    largest = std::max(largest, b);
  }
  EXPECT_EQ(sum, kRanks * (kRanks - 1) * (kChannelBlockHeaderBytes + kRing));
  for (size_t i = 0; i < kRanks; ++i) {
    const ChannelPoolUse use = pools[i]->Use();
    EXPECT_EQ(use.channels, kRanks * (kRanks - 1)) << "seen by " << i;
    EXPECT_EQ(use.bytes, sum) << "seen by " << i;
    EXPECT_EQ(use.largest_rank_bytes, largest) << "seen by " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Outboxes, ShmChannelPoolDiscovery, ::testing::Values(Declared::kAll, Declared::kNone, Declared::kEven),
                         [](const ::testing::TestParamInfo<Declared>& info) {
                           return info.param == Declared::kAll    ? "all_declared"
                                  : info.param == Declared::kNone ? "none_declared"
                                                                  : "even_declared";
                         });

}  // namespace
}  // namespace topocoll::test
