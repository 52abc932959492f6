// The point-to-point streams (message_streams.h) of three ranks in one process, over loopback:
// messages of every size from one sender arrive in send order, into the posted receive or through
// the unexpected queue; wildcards; truncation consumes the message and leaves the sender alone;
// a receive times out naming its source and tag; a peer that closes ends the receives waiting
// on it, and Close reports the messages never received. Every case runs with waits that sleep
// at once (the progress thread reads and writes everything) and with waits that drive their
// streams themselves first (drive_us), racing the progress thread for them; and with every
// message on TCP, and with the ranks on one node, where messages that go at once take their
// channels (a pool over outboxes in this process's memory) and larger ones TCP, interleaved.
#include "messages/message_streams.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <ostream>
#include <thread>
#include <vector>

namespace topocoll::test {
namespace {

struct Waits {
  int64_t drive_us;
  bool node;  // one node: channels for the messages that go at once
};
void PrintTo(const Waits& w, std::ostream* os) { *os << "drive_us " << w.drive_us << (w.node ? ", one node" : ", TCP"); }

// One node's outboxes, doorbells and rank controls, as a segment would hold them.
struct Node {
  static constexpr uint64_t kOutbox = 2 << 20;
  std::vector<std::unique_ptr<uint8_t[]>> outboxes;
  std::unique_ptr<Doorbell[]> bells;
  std::unique_ptr<RankControl[]> controls;
  std::vector<std::unique_ptr<ShmChannelPool>> pools;
  explicit Node(int n) : bells(new Doorbell[static_cast<size_t>(n)]), controls(new RankControl[static_cast<size_t>(n)]) {
    std::vector<uint8_t*> boxes;
    std::vector<Doorbell*> doorbells;
    for (int i = 0; i < n; ++i) {
      outboxes.emplace_back(new uint8_t[kOutbox]());
      boxes.push_back(outboxes.back().get());
      doorbells.push_back(&bells[static_cast<size_t>(i)]);
      controls[static_cast<size_t>(i)].messages_unnudged_until.store(0);
      controls[static_cast<size_t>(i)].pid.store(static_cast<int32_t>(getpid()));
    }
    for (int i = 0; i < n; ++i)
      pools.push_back(std::make_unique<ShmChannelPool>(boxes, doorbells, i, ChannelPoolParams{kOutbox, 1 << 20, 4096}));
  }
  MessageNode View(int i, int n) {
    MessageNode v;
    v.pool = pools[static_cast<size_t>(i)].get();
    for (int k = 0; k < n; ++k) {
      v.local_index.push_back(k);
      v.controls.push_back(&controls[static_cast<size_t>(k)]);
    }
    return v;
  }
};

struct Ranks {
  std::unique_ptr<Node> node;
  std::vector<std::unique_ptr<MessageStreams>> r;
  explicit Ranks(int n, Waits waits, int64_t timeout_ms = 10000) {
    if (waits.node) node = std::make_unique<Node>(n);
    std::vector<TcpPeer> peers;
    for (int i = 0; i < n; ++i) {
      MessageStreams::Options o;
      o.rank = i;
      o.size = n;
      o.timeout_ms = timeout_ms;
      o.drive_us = waits.drive_us;
      r.push_back(std::make_unique<MessageStreams>(o));
      peers.push_back({i, "127.0.0.1", r.back()->Bind()});
      r.back()->Listen();
      if (node) r.back()->AttachNode(node->View(i, n));
    }
    for (auto& s : r) s->Start("test-token", peers);
  }
  ~Ranks() {
    for (auto& s : r) s->Close();  // before the node's memory goes
  }
};

std::vector<uint8_t> Bytes(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return v;
}

class MessageStreamsTest : public ::testing::TestWithParam<Waits> {};

TEST_P(MessageStreamsTest, OrderAndContentPostedOrUnexpected) {
  Ranks ranks(3, GetParam());
  const std::vector<size_t> sizes = {0, 1, 100, 70000, 3 << 20, 5};
  std::vector<std::vector<uint8_t>> out;
  std::vector<MessageOpPtr> sends;
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back(Bytes(sizes[i], static_cast<int>(i)));
  // Half the receives posted before the sends, half after (unexpected).
  std::vector<std::vector<uint8_t>> in(sizes.size(), std::vector<uint8_t>(3 << 20));
  std::vector<MessageOpPtr> recvs;
  for (size_t i = 0; i < 3; ++i) recvs.push_back(ranks.r[1]->Recv(0, 4, in[i].data(), in[i].size(), false, 0));
  for (size_t i = 0; i < sizes.size(); ++i) sends.push_back(ranks.r[0]->Send(1, 4, out[i].data(), out[i].size(), 0));
  for (auto& s : sends) ranks.r[0]->Wait(s);
  for (size_t i = 3; i < sizes.size(); ++i) recvs.push_back(ranks.r[1]->Recv(kAnySource, kAnyTag, in[i].data(), in[i].size(), false, 0));
  for (size_t i = 0; i < sizes.size(); ++i) {
    ranks.r[1]->Wait(recvs[i]);
    ASSERT_EQ(recvs[i]->code, "") << recvs[i]->message;
    EXPECT_EQ(recvs[i]->source, 0);
    EXPECT_EQ(recvs[i]->status_tag, 4);
    ASSERT_EQ(recvs[i]->length, sizes[i]) << "message " << i;
    EXPECT_TRUE(std::equal(out[i].begin(), out[i].end(), in[i].begin())) << "message " << i;
  }
  // On one node the small ones took rank 0's channel to rank 1 (and nothing else made one), the
  // 3 MiB one was copied out of rank 0; else all went by TCP.
  const MessageStreams::Paths paths = ranks.r[0]->SentPaths();
  if (ranks.node) {
    EXPECT_EQ(ranks.node->pools[0]->Use().channels, 1u);
    EXPECT_EQ(paths.channel, 5u);
    EXPECT_EQ(paths.copy_out, 1u);
    EXPECT_EQ(paths.stream, 0u);
  } else {
    EXPECT_EQ(paths.stream, 6u);
  }
}

TEST_P(MessageStreamsTest, TruncationConsumesTheMessageAndTimeoutsNameSourceAndTag) {
  Ranks ranks(2, GetParam(), 300);
  auto big = Bytes(1000, 1);
  auto next = Bytes(10, 2);
  auto s1 = ranks.r[0]->Send(1, 9, big.data(), big.size(), 0);
  auto s2 = ranks.r[0]->Send(1, 9, next.data(), next.size(), 0);
  std::vector<uint8_t> small(10);
  auto r1 = ranks.r[1]->Recv(0, 9, small.data(), small.size(), false, 0);
  ranks.r[1]->Wait(r1);
  EXPECT_EQ(r1->code, "ETRUNCATE");
  auto r2 = ranks.r[1]->Recv(0, 9, small.data(), small.size(), false, 0);
  ranks.r[1]->Wait(r2);
  EXPECT_EQ(r2->code, "");
  EXPECT_EQ(small, next);
  ranks.r[0]->Wait(s1);
  ranks.r[0]->Wait(s2);
  EXPECT_EQ(s1->code, "");
  // Too large for half a ring: on one node copied out of the sender, and truncated the same way.
  auto huge = Bytes(300000, 5);
  auto s3 = ranks.r[0]->Send(1, 9, huge.data(), huge.size(), 0);
  auto r4 = ranks.r[1]->Recv(0, 9, small.data(), small.size(), false, 0);
  ranks.r[1]->Wait(r4);
  EXPECT_EQ(r4->code, "ETRUNCATE");
  EXPECT_EQ(r4->length, huge.size());
  EXPECT_TRUE(std::equal(small.begin(), small.end(), huge.begin()));
  ranks.r[0]->Wait(s3);
  EXPECT_EQ(s3->code, "");
  auto r3 = ranks.r[1]->Recv(0, 77, small.data(), small.size(), false, 0);
  ranks.r[1]->Wait(r3);
  EXPECT_EQ(r3->code, "ETIMEDOUT");
  EXPECT_NE(r3->message.find("rank 0 with tag 77"), std::string::npos) << r3->message;
}

TEST_P(MessageStreamsTest, APeerThatClosesEndsTheReceivesWaitingOnItAndCloseCountsTheUnreceived) {
  Ranks ranks(3, GetParam());
  auto m = Bytes(64, 3);
  for (int i = 0; i < 3; ++i) ranks.r[0]->Wait(ranks.r[0]->Send(2, 1, m.data(), m.size(), 0));
  ranks.r[0]->Wait(ranks.r[0]->Send(2, 2, m.data(), m.size(), 0));
  // One too large for half a ring: on one node its send ends once rank 2's progress thread has
  // copied it out (into its unexpected queue), before rank 2 closes.
  auto big = Bytes(1 << 20, 4);
  auto copied = ranks.r[0]->Send(2, 1, big.data(), big.size(), 0);
  ranks.r[0]->Wait(copied);
  ASSERT_EQ(copied->code, "");
  std::vector<uint8_t> in(64);
  // Rank 1 never had a stream from rank 2: its receive watches rank 2.
  auto waiting = ranks.r[1]->Recv(2, 5, in.data(), in.size(), false, 0);
  // Rank 2 takes one message, then closes with the other four unreceived.
  auto one = ranks.r[2]->Recv(0, 2, in.data(), in.size(), false, 0);
  ranks.r[2]->Wait(one);
  ASSERT_EQ(one->code, "");
  auto pending = ranks.r[2]->Recv(1, 0, in.data(), in.size(), false, 0);
  const auto unreceived = ranks.r[2]->Close();
  ASSERT_EQ(unreceived.size(), 1u);
  EXPECT_EQ(unreceived[0], std::make_pair(0, uint64_t{4}));
  EXPECT_EQ(pending->code, "ECLOSED");
  ranks.r[1]->Wait(waiting);
  EXPECT_EQ(waiting->code, "EPEERLOST");
  auto after = ranks.r[0]->Recv(2, kAnyTag, in.data(), in.size(), false, 0);
  ranks.r[0]->Wait(after);
  EXPECT_EQ(after->code, "EPEERLOST");
}

// Ranks on threads of their own: rank 0 answers every message from ranks 1 and 2 (any source,
// any tag) with its bytes reversed to the sender, ranks 1 and 2 check each answer and the order
// of their own; sizes cross the socket buffers, so sends and receives stall mid-message on
// whichever thread holds the stream.
TEST_P(MessageStreamsTest, RoundTripsOnThreadsOfTheirOwn) {
  Ranks ranks(3, GetParam());
  constexpr int kTrips = 300;
  const std::vector<size_t> sizes = {0, 8, 4096, 65536, 1 << 20};
  std::thread echo([&] {
    std::vector<uint8_t> in(1 << 20);
    for (int i = 0; i < 2 * kTrips; ++i) {
      auto r = ranks.r[0]->Recv(kAnySource, kAnyTag, in.data(), in.size(), false, 0);
      ranks.r[0]->Wait(r);
      ASSERT_EQ(r->code, "") << r->message;
      std::vector<uint8_t> back(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(r->length));
      std::reverse(back.begin(), back.end());
      auto s = ranks.r[0]->Send(r->source, r->status_tag, back.data(), back.size(), 0);
      ranks.r[0]->Wait(s);
      ASSERT_EQ(s->code, "") << s->message;
    }
  });
  auto client = [&](int me) {
    std::vector<uint8_t> in(1 << 20);
    for (int i = 0; i < kTrips; ++i) {
      auto out = Bytes(sizes[static_cast<size_t>(i * me) % sizes.size()], i + me);
      auto s = ranks.r[static_cast<size_t>(me)]->Send(0, i, out.data(), out.size(), 0);
      auto r = ranks.r[static_cast<size_t>(me)]->Recv(0, i, in.data(), in.size(), false, 0);
      ranks.r[static_cast<size_t>(me)]->Wait(s);
      ranks.r[static_cast<size_t>(me)]->Wait(r);
      ASSERT_EQ(r->code, "") << r->message;
      ASSERT_EQ(r->length, out.size());
      std::reverse(out.begin(), out.end());
      ASSERT_TRUE(std::equal(out.begin(), out.end(), in.begin())) << "rank " << me << " trip " << i;
    }
  };
  std::thread one(client, 1);
  std::thread two(client, 2);
  one.join();
  two.join();
  echo.join();
}

INSTANTIATE_TEST_SUITE_P(Waits, MessageStreamsTest, ::testing::Values(Waits{0, false}, Waits{200, false}, Waits{0, true}, Waits{200, true}),
                         [](const ::testing::TestParamInfo<Waits>& info) {
                           return std::string(info.param.drive_us == 0 ? "Sleeping" : "Driving") + (info.param.node ? "OneNode" : "Tcp");
                         });

}  // namespace
}  // namespace topocoll::test
