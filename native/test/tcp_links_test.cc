// TcpLinks (tcp_links.h) between two threads of one process over the loopback interface. A
// sender that waits for room in the middle of a message runs its guard, and the engine's guard
// probes the peer it waits on (a 32-byte TrySend on the same connection): the probe must never
// land inside the message, whatever room the socket has when it is tried.
#include "transport/tcp_links.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "test_support.h"

namespace topocoll::test {
namespace {

constexpr auto kDeadline = std::chrono::seconds(30);
const std::string kToken = "tcp-links-test-token";

// Links rank 0 and rank 1 of a two-rank job: rank 1 connects, rank 0 accepts.
void Link(TcpLinks& zero, TcpLinks& one) {
  const int port0 = zero.Listen("127.0.0.1");
  const int port1 = one.Listen("127.0.0.1");
  std::vector<int> missing_one;
  std::thread connecting([&] {
    DeadlineGuard guard(kDeadline);
    missing_one = one.Establish(1, kToken, {TcpPeer{0, "127.0.0.1", port0}}, 5000, guard);
  });
  DeadlineGuard guard(kDeadline);
  const std::vector<int> missing_zero = zero.Establish(0, kToken, {TcpPeer{1, "127.0.0.1", port1}}, 5000, guard);
  connecting.join();
  ASSERT_TRUE(missing_zero.empty());
  ASSERT_TRUE(missing_one.empty());
}

TEST(TcpLinks, AProbeWhileAMessageIsGoingOutWaitsForItsEnd) {
  TcpLinks zero;
  TcpLinks one;
  ASSERT_NO_FATAL_FAILURE(Link(zero, one));
  // Far more than both socket buffers hold. The reader starts once the sender waits, then drains
  // a little at a time with pauses longer than the sender's poll slice: the sender's waits time
  // out (and probe) while the socket has some room, too little to report it writable.
  const size_t n = 48u << 20;
  std::vector<uint8_t> body(n);
  FillPattern(body.data(), n, 2);
  MsgHeader probe = HeaderOf(1, n, 1);
  probe.magic = kProbeMagic;
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> checks{0};
  JoiningThread writer(failed, [&] {
    ProbingGuard<TcpLinks> guard(one, 0, &probe, sizeof probe, checks, kDeadline, &failed);
    const MsgHeader h = HeaderOf(1, n, 1);
    const MsgHeader next = HeaderOf(2, 0, 1);
    const ByteSlice slices[2] = {{&h, sizeof h}, {body.data(), n}};
    const ByteSlice after{&next, sizeof next};
    try {
      one.Send(0, slices, 2, guard);
      one.Send(0, &after, 1, guard);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the sender failed: " << e.what();
    }
  });
  DeadlineGuard guard(kDeadline, &failed);
  // The reader starts only once the sender waited (and probed) with the socket full.
  AwaitCount(checks, 2, guard);
  MsgHeader got{};
  zero.ReadHeader(1, &got, guard);
  ASSERT_EQ(got.magic, kMsgMagic);
  ASSERT_EQ(got.count, n);
  std::vector<uint8_t> in(n);
  size_t at = 0;
  for (int i = 0; i < 12 && at < n; ++i, at += 4096) {
    zero.ReadBody(1, in.data() + at, 4096, guard);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  zero.ReadBody(1, in.data() + at, n - at, guard);
  EXPECT_EQ(FirstPatternMismatch(in.data(), n, 2), n);
  // What follows the message is the next message's header (probes would be skipped by the
  // engine; none may come before the message's end).
  for (;;) {
    zero.ReadHeader(1, &got, guard);
    if (got.magic != kProbeMagic) break;
  }
  EXPECT_EQ(got.magic, kMsgMagic);
  EXPECT_EQ(got.seq, 2u);
  writer.join();
}

TEST(TcpLinks, LastWordsWhileAMessageIsGoingOutSkipThatStream) {
  // The engine's watcher thread sends the abort notice (SendLastWords) while the executor's
  // thread is in the middle of a message to the same rank, waiting for room: the notice must
  // not land inside that message, and no message may start after it.
  TcpLinks zero;
  TcpLinks one;
  ASSERT_NO_FATAL_FAILURE(Link(zero, one));
  const size_t n = 48u << 20;
  std::vector<uint8_t> body(n);
  FillPattern(body.data(), n, 3);
  MsgHeader probe = HeaderOf(1, n, 1);
  probe.magic = kProbeMagic;
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> checks{0};
  std::atomic<bool> refused{false};
  JoiningThread writer(failed, [&] {
    ProbingGuard<TcpLinks> guard(one, 0, &probe, sizeof probe, checks, kDeadline, &failed);
    refused = SendMessageThenAnother(one, 0, 1, body.data(), n, guard);
  });
  DeadlineGuard guard(kDeadline, &failed);
  AwaitCount(checks, 2, guard);
  MsgHeader notice = HeaderOf(3, 0, 1);
  notice.magic = kAbortMagic;
  JoiningThread watcher(failed, [&] { one.SendLastWords(&notice, sizeof notice, 3000); });
  // The reader drains while the last words would still wait for room.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  MsgHeader got{};
  zero.ReadHeader(1, &got, guard);
  ASSERT_EQ(got.magic, kMsgMagic);
  std::vector<uint8_t> in(n);
  size_t at = 0;
  for (int i = 0; i < 12 && at < n; ++i, at += 4096) {
    zero.ReadBody(1, in.data() + at, 4096, guard);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  zero.ReadBody(1, in.data() + at, n - at, guard);
  EXPECT_EQ(FirstPatternMismatch(in.data(), n, 3), n);
  watcher.join();
  writer.join();
  EXPECT_TRUE(refused.load()) << "a message started after the last words";
  // Nothing follows the message: the links shut, the reader sees the end.
  one.ShutdownAll();
  EXPECT_THROW(zero.ReadHeader(1, &got, guard), PeerClosed);
}

TEST(TcpLinks, AWriteThePeerEndedKeepsWhatThePeerSentLast) {
  // The peer sends its abort notice and shuts its links while this rank is still writing a
  // message to it: the failed write reports PeerClosed with the notice, unread until then.
  TcpLinks zero;
  TcpLinks one;
  ASSERT_NO_FATAL_FAILURE(Link(zero, one));
  MsgHeader notice = HeaderOf(3, 0, 0);
  notice.magic = kAbortMagic;
  notice.op = 2;
  zero.SendLastWords(&notice, sizeof notice, 100);
  zero.ShutdownAll();
  const size_t n = 32u << 20;
  std::vector<uint8_t> body(n, 7);
  const MsgHeader h = HeaderOf(1, n, 1);
  const ByteSlice slices[2] = {{&h, sizeof h}, {body.data(), n}};
  DeadlineGuard guard(kDeadline);
  try {
    one.Send(0, slices, 2, guard);
    FAIL() << "the write to a shut link went on";
  } catch (const PeerClosed& e) {
    ASSERT_EQ(e.tail().size(), sizeof notice) << e.what();
    MsgHeader tail{};
    std::memcpy(&tail, e.tail().data(), sizeof tail);
    EXPECT_EQ(tail.magic, kAbortMagic);
    EXPECT_EQ(tail.op, 2);
    EXPECT_EQ(tail.sender, 0);
  }
}

// Exchanges far larger than both socket buffers, every rank sending before it reads: with Send
// then ReadBody each rank would wait for room its peer never makes. SendWhileReceiving writes
// while it reads, so every rank gets through, and what comes in is what the peer sent.
void ExchangeInRing(int ranks) {
  std::vector<TcpLinks> links(static_cast<size_t>(ranks));
  std::vector<int> ports;
  for (auto& l : links) ports.push_back(l.Listen("127.0.0.1"));
  std::atomic<bool> failed{false};
  const size_t n = 24u << 20;
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        try {
          std::vector<TcpPeer> peers;
          for (int q = 0; q < ranks; ++q)
            if (q != r) peers.push_back(TcpPeer{q, "127.0.0.1", ports[static_cast<size_t>(q)]});
          DeadlineGuard guard(kDeadline, &failed);
          TcpLinks& mine = links[static_cast<size_t>(r)];
          if (!mine.Establish(r, kToken, peers, 5000, guard).empty()) throw std::runtime_error("not linked");
          const int to = (r + 1) % ranks;
          const int from = (r + ranks - 1) % ranks;
          std::vector<uint8_t> out(n), in(n);
          FillPattern(out.data(), n, static_cast<uint64_t>(r));
          const MsgHeader h = HeaderOf(1, n, r);
          const ByteSlice slices[2] = {{&h, sizeof h}, {out.data(), n}};
          EXPECT_TRUE(mine.DuplexExchanges());
          MsgHeader got{};
          auto receive = [&] {
            mine.ReadHeader(from, &got, guard);
            // In pieces, as a combining reader takes a body.
            for (size_t at = 0; at < n; at += kStreamPieceBytes)
              mine.ReadBody(from, in.data() + at, std::min(kStreamPieceBytes, n - at), guard);
          };
          mine.SendWhileReceiving(to, slices, 2, Borrowed(receive), guard);
          EXPECT_EQ(got.sender, from);
          EXPECT_EQ(got.count, n);
          EXPECT_EQ(FirstPatternMismatch(in.data(), n, static_cast<uint64_t>(from)), n) << "rank " << r;
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(r)] = e.what();
          failed = true;
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(TcpLinks, AnExchangeWithOnePeerWritesWhileItReads) { ExchangeInRing(2); }

TEST(TcpLinks, ARingOfExchangesWritesWhileItReads) { ExchangeInRing(3); }

}  // namespace
}  // namespace topocoll::test
