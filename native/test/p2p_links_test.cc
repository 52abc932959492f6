// P2PLinks (p2p_links.h) over an in-process message layer: threads stand in for ranks of
// different nodes, a FakeLayer for the host's point-to-point layer (a topocoll_p2p_v1 whose
// messages are matched per (sender, receiver, tag) in order, and that never completes a send
// before its receive is posted — the layer with the least buffering the header allows). The
// stream the executor sees must come out whole: headers and bodies of every size around the
// inline limit and the piece size, read whole or in pieces; both sides of an exchange sending
// before they receive; an abort notice in the middle of a body; receives abandoned by a failing
// wait; and the layer's failures reported with the peer and the tag. A sub-communicator's links
// address the layer's ranks its ranks map to and name its own ranks in errors, and the engine
// takes only a mapping onto distinct ranks of the layer with its own at its place.
#include "transport/p2p_links.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "engine/engine.h"
#include "test_support.h"

namespace topocoll::test {
namespace {

constexpr auto kDeadline = std::chrono::seconds(20);

// The layer of one process with `size` ranks: one struct per rank, one shared matching table.
class FakeLayer {
 public:
  explicit FakeLayer(int size) : structs_(static_cast<size_t>(size)), contexts_(static_cast<size_t>(size)) {
    for (int r = 0; r < size; ++r) {
      contexts_[static_cast<size_t>(r)] = {this, r};
      topocoll_p2p_v1& s = structs_[static_cast<size_t>(r)];
      s.version = TOPOCOLL_P2P_VERSION;
      s.struct_size = sizeof s;
      s.rank = r;
      s.size = size;
      s.tag_base = 100;
      s.context = &contexts_[static_cast<size_t>(r)];
      s.isend = [](void* c, int32_t peer, int32_t tag, const void* data, size_t bytes, void** request) {
        auto* ctx = static_cast<Context*>(c);
        return ctx->layer->Post(Op{true, ctx->rank, peer, tag, const_cast<void*>(data), bytes}, request);
      };
      s.irecv = [](void* c, int32_t peer, int32_t tag, void* buffer, size_t capacity, void** request) {
        auto* ctx = static_cast<Context*>(c);
        return ctx->layer->Post(Op{false, peer, ctx->rank, tag, buffer, capacity}, request);
      };
      s.test = [](void* c, void* request, int* done, size_t* bytes) { return static_cast<Context*>(c)->layer->Test(request, done, bytes); };
      s.abandon = [](void* c, void* request) { static_cast<Context*>(c)->layer->Abandon(request); };
      s.describe = [](void*, int code) { return code == kFailed ? "the fake layer failed on purpose" : "unknown"; };
      s.release = nullptr;
    }
  }
  const topocoll_p2p_v1* Struct(int rank) const { return &structs_[static_cast<size_t>(rank)]; }

  // From now on every operation of `rank` fails.
  void Break(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = rank;
  }
  size_t Outstanding() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ops_.size();
  }
  // From now on the sends of `rank` not yet matched have failed (test() reports it).
  void FailPendingSends(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, ids] : queue_) {
      if (!std::get<3>(key) || std::get<0>(key) != rank) continue;
      for (uint64_t id : ids) ops_.at(id).done = ops_.at(id).failed = true;
      ids.clear();
    }
  }

  // Every isend and irecv posted (refused ones too), by the layer's ranks.
  struct Posted {
    bool send;
    int from, to;
    int32_t tag;
    size_t bytes;
  };
  std::vector<Posted> Log() {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_;
  }

  static constexpr int kFailed = 7;

 private:
  struct Context {
    FakeLayer* layer;
    int rank;
  };
  struct Op {
    bool send;
    int from, to;
    int32_t tag;
    void* data;
    size_t bytes;
    bool done = false;
    bool failed = false;
    size_t got = 0;
  };

  int Post(Op op, void** request) {
    std::lock_guard<std::mutex> lock(mutex_);
    log_.push_back({op.send, op.from, op.to, op.tag, op.bytes});
    if (broken_ == (op.send ? op.from : op.to)) return kFailed;
    const uint64_t id = next_++;
    ops_.emplace(id, op);
    queue_[{op.from, op.to, op.tag, op.send}].push_back(id);
    Match(op.from, op.to, op.tag);
    *request = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
    return 0;
  }
  // Pairs the oldest unmatched send and receive of one (from, to, tag): order kept per tag.
  void Match(int from, int to, int32_t tag) {
    auto& sends = queue_[{from, to, tag, true}];
    auto& recvs = queue_[{from, to, tag, false}];
    while (!sends.empty() && !recvs.empty()) {
      Op& s = ops_.at(sends.front());
      Op& r = ops_.at(recvs.front());
      sends.pop_front();
      recvs.pop_front();
      s.done = r.done = true;
      s.got = s.bytes;
      if (s.bytes > r.bytes) {
        r.failed = true;  // truncated
      } else {
        if (s.bytes > 0) std::memcpy(r.data, s.data, s.bytes);
        r.got = s.bytes;
      }
    }
  }
  int Test(void* request, int* done, size_t* bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ops_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(request)));
    if (it == ops_.end()) ADD_FAILURE() << "test() of an unknown request";
    if (it == ops_.end()) return kFailed;
    *done = it->second.done ? 1 : 0;
    *bytes = it->second.got;
    const bool failed = it->second.failed;
    if (it->second.done) ops_.erase(it);
    return failed ? kFailed : 0;
  }
  void Abandon(void* request) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(request));
    auto it = ops_.find(id);
    if (it == ops_.end() || it->second.send) {
      ADD_FAILURE() << "abandon() of a send or an unknown request";
      return;
    }
    auto& recvs = queue_[{it->second.from, it->second.to, it->second.tag, false}];
    for (auto q = recvs.begin(); q != recvs.end(); ++q) {
      if (*q == id) {
        recvs.erase(q);
        break;
      }
    }
    ops_.erase(it);
  }

  std::vector<topocoll_p2p_v1> structs_;
  std::vector<Context> contexts_;
  std::mutex mutex_;
  std::map<uint64_t, Op> ops_;
  std::map<std::tuple<int, int, int32_t, bool>, std::deque<uint64_t>> queue_;
  uint64_t next_ = 1;
  int broken_ = -1;
  std::vector<Posted> log_;
};

uint8_t ByteAt(size_t message, size_t i) { return static_cast<uint8_t>(message * 131 + i * 7 + (i >> 9)); }

// Message sizes around every boundary of the framing: the inline limit, the piece size, the
// eager limit, and several pieces.
std::vector<size_t> BodySizes() {
  std::vector<size_t> sizes{0, 1, 7, 64};
  for (size_t base : {P2PLinks::kInlineBytes, kStreamPieceBytes, static_cast<size_t>(kEagerBytes), 3 * kStreamPieceBytes}) {
    for (int d = -1; d <= 1; ++d) sizes.push_back(base + static_cast<size_t>(d));
  }
  sizes.push_back(1000003);
  return sizes;
}

TEST(P2PLinks, StreamsComeOutWholeReadWholeOrInPieces) {
  FakeLayer layer(2);
  P2PLinks a(std::make_shared<P2PLayer>(layer.Struct(0)), 100);
  P2PLinks b(std::make_shared<P2PLayer>(layer.Struct(1)), 100);
  const std::vector<size_t> sizes = BodySizes();
  std::atomic<bool> failed{false};
  std::thread writer([&] {
    DeadlineGuard guard(kDeadline, &failed);
    for (size_t m = 0; m < 2 * sizes.size(); ++m) {
      const size_t n = sizes[m % sizes.size()];
      std::vector<uint8_t> body(n);
      for (size_t i = 0; i < n; ++i) body[i] = ByteAt(m, i);
      const MsgHeader h = HeaderOf(static_cast<uint32_t>(m), n, 0);
      const ByteSlice slices[2] = {{&h, sizeof h}, {body.data(), n}};
      a.Send(1, slices, 2, guard);
      // The sender owns its memory again at once: scribbling on it must not reach the reader.
      std::fill(body.begin(), body.end(), 0xEE);
    }
  });
  DeadlineGuard guard(kDeadline, &failed);
  try {
    for (size_t m = 0; m < 2 * sizes.size(); ++m) {
      const size_t n = sizes[m % sizes.size()];
      MsgHeader h{};
      b.ReadHeader(0, &h, guard);
      ASSERT_EQ(h.seq, m);
      ASSERT_EQ(h.count, n);
      std::vector<uint8_t> got(n);
      if (m < sizes.size()) {
        b.ReadBody(0, got.data(), n, guard);
      } else {
        for (size_t at = 0; at < n; at += kStreamPieceBytes) b.ReadBody(0, got.data() + at, std::min(kStreamPieceBytes, n - at), guard);
      }
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], ByteAt(m, i)) << "message " << m << " of " << n << " bytes, byte " << i;
    }
  } catch (...) {
    failed = true;
    writer.join();
    throw;
  }
  writer.join();
}

TEST(P2PLinks, BothSidesOfAnExchangeSendBeforeTheyReceive) {
  // The fake layer completes no send before its receive is posted: eager copies are what lets
  // both sides of an exchange (up to kEagerBytes) go on to their receive.
  FakeLayer layer(2);
  std::atomic<bool> failed{false};
  auto side = [&](int me) {
    P2PLinks links(std::make_shared<P2PLayer>(layer.Struct(me)), 100);
    DeadlineGuard guard(kDeadline, &failed);
    std::vector<uint8_t> out(kEagerBytes, static_cast<uint8_t>(me + 1)), in(kEagerBytes);
    for (uint32_t round = 0; round < 20; ++round) {
      const MsgHeader h = HeaderOf(round, out.size(), me);
      const ByteSlice slices[2] = {{&h, sizeof h}, {out.data(), out.size()}};
      links.Send(1 - me, slices, 2, guard);
      MsgHeader got{};
      links.ReadHeader(1 - me, &got, guard);
      links.ReadBody(1 - me, in.data(), in.size(), guard);
      if (got.seq != round || in[0] != static_cast<uint8_t>(2 - me) || in.back() != static_cast<uint8_t>(2 - me)) failed = true;
    }
    links.CloseAll();
  };
  std::thread other(side, 1);
  side(0);
  other.join();
  EXPECT_FALSE(failed);
}

TEST(P2PLinks, AnAbortNoticeInsteadOfTheRestOfABodyEndsTheStream) {
  FakeLayer layer(2);
  P2PLinks a(std::make_shared<P2PLayer>(layer.Struct(0)), 100);
  P2PLinks b(std::make_shared<P2PLayer>(layer.Struct(1)), 100);
  DeadlineGuard guard(kDeadline);
  // A header that announces two pieces, then the notice where the first piece should be.
  const MsgHeader h = HeaderOf(1, 2 * kStreamPieceBytes, 0);
  const ByteSlice header{&h, sizeof h};
  a.Send(1, &header, 1, guard);
  MsgHeader notice = HeaderOf(1, 0, 0);
  notice.magic = kAbortMagic;
  notice.op = 2;
  a.AddPeers({1});
  a.SendLastWords(&notice, sizeof notice, 100);
  MsgHeader got{};
  b.ReadHeader(0, &got, guard);
  std::vector<uint8_t> body(kStreamPieceBytes);
  try {
    b.ReadBody(0, body.data(), body.size(), guard);
    FAIL() << "the body read went on";
  } catch (const PeerClosed& e) {
    ASSERT_EQ(e.tail().size(), sizeof notice);
    MsgHeader tail{};
    std::memcpy(&tail, e.tail().data(), sizeof tail);
    EXPECT_EQ(tail.magic, kAbortMagic);
    EXPECT_EQ(tail.op, 2);
  }
}

TEST(P2PLinks, AProbeWhileAMessageIsGoingOutWaitsForItsEnd) {
  // A body of more than kMaxPendingBytes: the sender waits for room between two of its pieces
  // (the fake layer completes no send before the reader posts its receive), and its guard
  // probes the reader there. The probe must not go out between the pieces; after the message
  // it may.
  FakeLayer layer(2);
  P2PLinks a(std::make_shared<P2PLayer>(layer.Struct(0)), 100);
  P2PLinks b(std::make_shared<P2PLayer>(layer.Struct(1)), 100);
  const size_t n = P2PLinks::kMaxPendingBytes + 3 * kStreamPieceBytes + 5;
  std::vector<uint8_t> body(n);
  FillPattern(body.data(), n, 1);
  MsgHeader probe = HeaderOf(1, n, 0);
  probe.magic = kProbeMagic;
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> checks{0};
  JoiningThread writer(failed, [&] {
    ProbingGuard<P2PLinks> guard(a, 1, &probe, sizeof probe, checks, kDeadline, &failed);
    const MsgHeader h = HeaderOf(1, n, 0);
    const ByteSlice slices[2] = {{&h, sizeof h}, {body.data(), n}};
    try {
      a.Send(1, slices, 2, guard);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the sender failed: " << e.what();
    }
  });
  DeadlineGuard guard(kDeadline, &failed);
  // The reader starts only once the sender waited (and probed) in the middle of the message.
  AwaitCount(checks, 2, guard);
  MsgHeader got{};
  b.ReadHeader(0, &got, guard);
  ASSERT_EQ(got.magic, kMsgMagic);
  std::vector<uint8_t> in(n);
  for (size_t at = 0; at < n; at += kStreamPieceBytes) b.ReadBody(0, in.data() + at, std::min(kStreamPieceBytes, n - at), guard);
  EXPECT_EQ(FirstPatternMismatch(in.data(), n, 1), n);
  writer.join();
}

TEST(P2PLinks, LastWordsWhileAMessageIsGoingOutSkipThatStream) {
  // The abort notice, sent from another thread while the sender waits for room between two
  // pieces of a message to the same rank, must not go out between the pieces; no message may
  // start after it.
  FakeLayer layer(2);
  P2PLinks a(std::make_shared<P2PLayer>(layer.Struct(0)), 100);
  P2PLinks b(std::make_shared<P2PLayer>(layer.Struct(1)), 100);
  a.AddPeers({1});
  const size_t n = P2PLinks::kMaxPendingBytes + 3 * kStreamPieceBytes + 5;
  std::vector<uint8_t> body(n);
  FillPattern(body.data(), n, 4);
  MsgHeader probe = HeaderOf(1, n, 0);
  probe.magic = kProbeMagic;
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> checks{0};
  std::atomic<bool> refused{false};
  JoiningThread writer(failed, [&] {
    ProbingGuard<P2PLinks> guard(a, 1, &probe, sizeof probe, checks, kDeadline, &failed);
    refused = SendMessageThenAnother(a, 1, 0, body.data(), n, guard);
  });
  DeadlineGuard guard(kDeadline, &failed);
  AwaitCount(checks, 2, guard);
  MsgHeader notice = HeaderOf(3, 0, 0);
  notice.magic = kAbortMagic;
  a.SendLastWords(&notice, sizeof notice, 50);
  MsgHeader got{};
  b.ReadHeader(0, &got, guard);
  ASSERT_EQ(got.magic, kMsgMagic);
  std::vector<uint8_t> in(n);
  for (size_t at = 0; at < n; at += kStreamPieceBytes) b.ReadBody(0, in.data() + at, std::min(kStreamPieceBytes, n - at), guard);
  EXPECT_EQ(FirstPatternMismatch(in.data(), n, 4), n);
  writer.join();
  EXPECT_TRUE(refused.load()) << "a message started after the last words";
}

TEST(P2PLinks, AWaitThatFailsAbandonsItsReceive) {
  FakeLayer layer(2);
  P2PLinks b(std::make_shared<P2PLayer>(layer.Struct(1)), 100);
  DeadlineGuard guard(std::chrono::milliseconds(50));
  MsgHeader got{};
  EXPECT_THROW(b.ReadHeader(0, &got, guard), CollError);
  // Nothing will write the abandoned buffer: the layer forgot the receive.
  EXPECT_EQ(layer.Outstanding(), 0u);
}

TEST(P2PLinks, ShutLinksEndAWaitAtOnce) {
  FakeLayer layer(2);
  P2PLinks b(std::make_shared<P2PLayer>(layer.Struct(1)), 100);
  std::thread shut([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    b.ShutdownAll();
  });
  DeadlineGuard guard(kDeadline);
  MsgHeader got{};
  EXPECT_THROW(b.ReadHeader(0, &got, guard), PeerClosed);
  shut.join();
  EXPECT_EQ(layer.Outstanding(), 0u);
}

TEST(P2PLinks, LayerFailuresNameThePeerAndTheTag) {
  FakeLayer layer(2);
  P2PLinks a(std::make_shared<P2PLayer>(layer.Struct(0)), 104);
  layer.Break(0);
  DeadlineGuard guard(kDeadline);
  const MsgHeader h = HeaderOf(1, 0, 0);
  const ByteSlice slice{&h, sizeof h};
  try {
    a.Send(1, &slice, 1, guard);
    FAIL() << "the send did not fail";
  } catch (const CollError& e) {
    EXPECT_EQ(std::string(e.code()), "EPEERLOST");
    EXPECT_NE(std::string(e.what()).find("rank 1 (tag 104)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("failed on purpose"), std::string::npos) << e.what();
  }
}

// A sub-communicator of a layer of 4 ranks: its rank 0 is the layer's rank 3, its rank 1 the
// layer's rank 1 (rank 1 maps to itself, rank 0 does not).
const std::vector<int> kSubRanks{3, 1};

// Expects every operation the layer saw on `tag` to be between layer ranks 3 and 1; returns how
// many sends went from layer rank `from` to `to`.
size_t SendsBetweenSubRanks(FakeLayer& layer, int32_t tag, int from, int to) {
  size_t sends = 0;
  for (const FakeLayer::Posted& p : layer.Log()) {
    if (p.tag != tag) continue;
    EXPECT_TRUE((p.from == 3 && p.to == 1) || (p.from == 1 && p.to == 3))
        << (p.send ? "an isend" : "an irecv") << " from layer rank " << p.from << " to " << p.to;
    if (p.send && p.from == from && p.to == to) ++sends;
  }
  return sends;
}

TEST(P2PLinks, ASubCommunicatorsMessagesGoBetweenTheLayerRanksItsRanksMapTo) {
  FakeLayer layer(4);
  P2PLinks sub0(std::make_shared<P2PLayer>(layer.Struct(3)), 100, kSubRanks);
  P2PLinks sub1(std::make_shared<P2PLayer>(layer.Struct(1)), 100, kSubRanks);
  DeadlineGuard guard(kDeadline);
  // An inline body, and one streamed in three pieces after its header.
  const std::vector<size_t> sizes{64, 2 * kStreamPieceBytes + 1};
  static_assert(64 <= P2PLinks::kInlineBytes && 2 * kStreamPieceBytes + 1 > P2PLinks::kInlineBytes);
  auto send = [&](P2PLinks& links, int to, size_t m, int me) {
    const size_t n = sizes[m % sizes.size()];
    std::vector<uint8_t> body(n);
    for (size_t i = 0; i < n; ++i) body[i] = ByteAt(m, i);
    const MsgHeader h = HeaderOf(static_cast<uint32_t>(m), n, me);
    const ByteSlice slices[2] = {{&h, sizeof h}, {body.data(), n}};
    links.Send(to, slices, 2, guard);  // copies: returns before the receive is posted
  };
  auto receive = [&](P2PLinks& links, int from, size_t m) {
    const size_t n = sizes[m % sizes.size()];
    MsgHeader h{};
    links.ReadHeader(from, &h, guard);
    ASSERT_EQ(h.seq, m);
    ASSERT_EQ(h.count, n);
    ASSERT_EQ(h.sender, from);
    std::vector<uint8_t> got(n);
    links.ReadBody(from, got.data(), n, guard);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], ByteAt(m, i)) << "message " << m << " of " << n << " bytes, byte " << i;
  };
  // Sub rank 0 to sub rank 1, then back.
  for (size_t m = 0; m < 2; ++m) send(sub0, 1, m, 0);
  for (size_t m = 0; m < 2; ++m) receive(sub1, 0, m);
  for (size_t m = 2; m < 4; ++m) send(sub1, 0, m, 1);
  for (size_t m = 2; m < 4; ++m) receive(sub0, 1, m);
  // Each way: the inline message, and the streamed one's header and three pieces.
  EXPECT_EQ(SendsBetweenSubRanks(layer, 100, 3, 1), 5u);
  EXPECT_EQ(SendsBetweenSubRanks(layer, 100, 1, 3), 5u);
}

TEST(P2PLinks, ASubCommunicatorsLayerFailuresNameItsRanks) {
  FakeLayer layer(4);
  DeadlineGuard guard(kDeadline);
  // Sub rank 1 (layer rank 1) sends to sub rank 0 (layer rank 3).
  const MsgHeader h = HeaderOf(1, 0, 1);
  const ByteSlice slice{&h, sizeof h};
  auto expect_names_sub_rank_0 = [](const CollError& e, int32_t tag) {
    EXPECT_EQ(std::string(e.code()), "EPEERLOST");
    EXPECT_NE(std::string(e.what()).find("sending to rank 0 (tag " + std::to_string(tag) + ")"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("failed on purpose"), std::string::npos) << e.what();
  };
  // A send the layer fails as it completes: reported by the next send.
  P2PLinks failing(std::make_shared<P2PLayer>(layer.Struct(1)), 104, kSubRanks);
  failing.Send(0, &slice, 1, guard);
  layer.FailPendingSends(1);
  try {
    failing.Send(0, &slice, 1, guard);
    FAIL() << "the failed send was not reported";
  } catch (const CollError& e) {
    expect_names_sub_rank_0(e, 104);
  }
  EXPECT_EQ(SendsBetweenSubRanks(layer, 104, 1, 3), 2u);
  // A send the layer refuses.
  P2PLinks refused(std::make_shared<P2PLayer>(layer.Struct(1)), 105, kSubRanks);
  layer.Break(1);
  try {
    refused.Send(0, &slice, 1, guard);
    FAIL() << "the send did not fail";
  } catch (const CollError& e) {
    expect_names_sub_rank_0(e, 105);
  }
  EXPECT_EQ(SendsBetweenSubRanks(layer, 105, 1, 3), 1u);
}

TEST(EngineUseP2P, TakesOnlyDistinctRanksOfTheLayerWithItsOwnAtItsPlace) {
  FakeLayer layer(4);
  auto layer3 = std::make_shared<P2PLayer>(layer.Struct(3));
  // Rank 0 of a communicator of 2 ranks (alone on its node), over the layer's rank 3 of 4.
  auto engine = [] {
    EngineOptions options;
    options.rank = 0;
    options.size = 2;
    options.local_ranks = {0};
    return std::make_unique<Engine>(options);
  };
  const std::vector<std::pair<const char*, std::vector<int>>> refused{
      {"too few", {3}},
      {"too many", {3, 1, 2}},
      {"a rank twice", {3, 3}},
      {"past the layer's size", {3, 4}},
      {"negative", {3, -1}},
      {"its own rank elsewhere", {1, 3}},
      {"without its own", {0, 1}},
      {"another at its place", {2, 3}},
  };
  for (const auto& [what, ranks] : refused) {
    try {
      engine()->UseP2P(layer3, 100, ranks);
      ADD_FAILURE() << "layer ranks " << what << " were taken";
    } catch (const CollError& e) {
      EXPECT_EQ(std::string(e.code()), "EINVAL") << what << ": " << e.what();
    }
  }
  EXPECT_NO_THROW(engine()->UseP2P(layer3, 100, kSubRanks));
  // Without a mapping the layer's ranks must be the communicator's: rank 3 of 4 is not rank 0 of 2.
  EXPECT_THROW(engine()->UseP2P(layer3, 100, {}), CollError);
}

TEST(P2PLinks, RefusesAStructOfAnotherVersion) {
  FakeLayer layer(1);
  topocoll_p2p_v1 other = *layer.Struct(0);
  other.version = 2;
  EXPECT_THROW(P2PLayer{&other}, CollError);
}

}  // namespace
}  // namespace topocoll::test
