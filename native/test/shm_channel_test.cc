// The one-way ring (shm_channel.h) between a writer thread and a reader thread: messages whose
// bytes straddle the ring's end, messages at once and streamed (larger than the ring), slow
// readers that make the writer wait for room, and reads split the way the engine splits them
// (a header first, then the body in pieces).
#include "shm/shm_channel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "test_support.h"

namespace topocoll::test {
namespace {

constexpr auto kDeadline = std::chrono::seconds(20);

// The ring's shared state as the segment holds it: control words, the ring zeroed, doorbells.
struct Ring {
  explicit Ring(uint64_t capacity) : capacity(capacity), memory(kPage + capacity + kPage) {
    control = new (memory.base()) ChannelControl();
    data = memory.base() + kPage;
  }
  ShmChannel Writer() { return ShmChannel(control, data, capacity, &bells[0], &bells[1]); }
  ShmChannel Reader() { return ShmChannel(control, data, capacity, &bells[0], &bells[1]); }

  static constexpr size_t kPage = 4096;
  uint64_t capacity;
  Mapping memory;
  ChannelControl* control;
  uint8_t* data;
  Doorbell bells[2];  // [0] the sender's, [1] the receiver's
};

// Message sizes for one run: every size from 1 to 80 (frames and padding at every offset
// against the ring's end), sizes around the ring's at-once limit and capacity, sizes of several
// capacities, and random ones. The same seed gives writer and reader the same list.
std::vector<size_t> MessageSizes(uint64_t capacity, uint64_t total_bytes, uint32_t seed) {
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= 80; ++n) sizes.push_back(n);
  const uint64_t half = capacity / 2;
  for (uint64_t base : {half - 16, half - 8, half, half + 8, capacity - 16, capacity - 8, capacity, capacity + 8, 3 * capacity + 5,
                        uint64_t{64 * 1024}, uint64_t{64 * 1024 + 8}}) {
    for (int64_t d = -3; d <= 3; ++d) sizes.push_back(static_cast<size_t>(static_cast<int64_t>(base) + d));
  }
  std::mt19937 rng(seed);
  uint64_t sum = 0;
  for (size_t s : sizes) sum += s;
  while (sum < total_bytes) {
    size_t n;
    switch (rng() % 4) {
      case 0: n = 1 + rng() % 64; break;                          // small: many frames per lap
      case 1: n = 1 + rng() % capacity; break;                    // up to the ring
      case 2: n = 1 + rng() % (4 * capacity); break;              // streamed through several laps
      default: n = 1 + rng() % (2 * half > 0 ? half : 1); break;  // around the at-once limit
    }
    sizes.push_back(n);
    sum += n;
  }
  std::shuffle(sizes.begin() + 80, sizes.end(), rng);
  return sizes;
}

struct Case {
  uint64_t capacity;
  uint64_t total_bytes;
};

void PrintTo(const Case& c, std::ostream* os) { *os << "ring of " << c.capacity << " bytes, " << c.total_bytes << " bytes sent"; }

class ShmChannelTest : public ::testing::TestWithParam<Case> {};

// Writer and reader in two threads; the reader is slow now and then (so the writer runs a whole
// ring ahead and must wait for room) and reads every message in random parts. Every byte of
// every message must arrive, in order, unchanged.
TEST_P(ShmChannelTest, EveryMessageArrivesIntactThroughWrapAndFlowControl) {
  const Case c = GetParam();
  Ring ring(c.capacity);
  const std::vector<size_t> sizes = MessageSizes(c.capacity, c.total_bytes, 7);
  std::atomic<bool> stop{false};
  const WaitPolicy policy = TestPolicy();
  std::atomic<uint64_t> received_bytes{0};

  const std::string error = RunThreads(
      2,
      [&](size_t who) {
        DeadlineGuard guard(kDeadline, &stop);
        std::mt19937 rng(static_cast<uint32_t>(100 + who));
        if (who == 0) {
          ShmChannel writer = ring.Writer();
          std::vector<uint8_t> body;
          for (size_t m = 0; m < sizes.size(); ++m) {
            body.resize(sizes[m]);
            FillPattern(body.data(), body.size(), m);
            // One to three slices, split anywhere (the engine sends a header and a body).
            ByteSlice slices[3];
            size_t count = 1 + rng() % 3;
            if (count > body.size()) count = body.size();
            size_t at = 0;
            for (size_t s = 0; s < count; ++s) {
              const size_t left = body.size() - at;
              const size_t len = s + 1 == count ? left : rng() % (left - (count - s - 1)) + 1;
              slices[s] = ByteSlice{body.data() + at, len};
              at += len;
            }
            writer.Send(slices, count, policy, guard);
          }
          return;
        }
        ShmChannel reader = ring.Reader();
        std::vector<uint8_t> got;
        for (size_t m = 0; m < sizes.size(); ++m) {
          const size_t n = sizes[m];
          got.assign(n, 0);
          size_t at = 0;
          // Parts in multiples of 8 but the last, as ReadExact and Consume require.
          while (at < n) {
            size_t part = n - at;
            if (rng() % 2 == 0 && part > 8) part = std::min(part, (1 + rng() % 64) * 8);
            if (part < n - at) part = part / 8 * 8;
            if (rng() % 2 == 0 && part % 8 == 0) {
              reader.ReadExact(got.data() + at, part, policy, guard);
            } else {
              size_t copied = 0;
              reader.Consume(
                  part,
                  [&](const uint8_t* p, size_t len) {
                    // Pieces are multiples of 8 but the message's last.
                    if (len % 8 != 0 && at + copied + len != n) throw std::runtime_error("a piece ends inside an element");
                    std::memcpy(got.data() + at + copied, p, len);
                    copied += len;
                  },
                  policy, guard);
              if (copied != part)
                throw std::runtime_error("Consume handed on " + std::to_string(copied) + " bytes of " + std::to_string(part));
            }
            at += part;
          }
          const size_t bad = FirstPatternMismatch(got.data(), n, m);
          if (bad != n) {
            throw std::runtime_error("message " + std::to_string(m) + " (" + std::to_string(n) + " bytes): byte " + std::to_string(bad) +
                                     " differs");
          }
          received_bytes += n;
          // Slow now and then: the writer fills the ring and waits for room.
          if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
        }
      },
      stop);
  EXPECT_EQ(error, "");
  uint64_t total = 0;
  for (size_t s : sizes) total += s;
  EXPECT_EQ(received_bytes.load(), total);
}

INSTANTIATE_TEST_SUITE_P(Capacities, ShmChannelTest,
                         ::testing::Values(Case{256, 1 << 20}, Case{4096, 4 << 20}, Case{64 * 1024, 8 << 20},
                                           // Above 128 KiB the at-once limit is the 64 KiB piece,
                                           // not half the ring.
                                           Case{512 * 1024, 16 << 20}),
                         [](const ::testing::TestParamInfo<Case>& info) { return "ring" + std::to_string(info.param.capacity); });

// A writer far ahead of a reader that does not read: it stops once the ring is full — having
// completed no more than the ring holds — and resumes as the reader drains it, every byte intact.
TEST(ShmChannelFlowControl, WriterBlocksOnAFullRingAndNeverOverwritesUnreadBytes) {
  constexpr uint64_t kCapacity = 4096;
  Ring ring(kCapacity);
  std::atomic<bool> stop{false};
  std::atomic<size_t> sent{0};
  const WaitPolicy policy = TestPolicy();
  // 24-byte messages take 32 bytes of the ring (frame + body): 127 fit with the 8 bytes that
  // always stay free, the 128th does not.
  constexpr size_t kBody = 24;
  constexpr size_t kMessages = 4000;
  constexpr size_t kFit = (kCapacity - 8) / (8 + kBody);

  JoiningThread writer(stop, [&] {
    DeadlineGuard guard(kDeadline, &stop);
    ShmChannel w = ring.Writer();
    uint8_t body[kBody];
    try {
      for (size_t m = 0; m < kMessages; ++m) {
        FillPattern(body, kBody, m);
        ByteSlice slice{body, kBody};
        w.Send(&slice, 1, policy, guard);
        sent.store(m + 1);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "writer: " << e.what();
      stop = true;
    }
  });
  // Give the writer time to fill the ring; it must then be blocked, not overwriting.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);  // ends as soon as it is full
  while (std::chrono::steady_clock::now() < until && sent.load() < kFit) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(sent.load(), kFit) << "the writer completed more messages than the ring holds before anything was read";

  // The ring holds exactly the first kFit messages, unread, at their places.
  for (size_t m = 0; m < kFit; ++m) {
    const uint8_t* frame = ring.data + m * (8 + kBody);
    uint64_t length;
    std::memcpy(&length, frame, 8);
    ASSERT_EQ(length, kBody) << "frame of message " << m;
    ASSERT_EQ(FirstPatternMismatch(frame + 8, kBody, m), kBody) << "body of message " << m;
  }

  {
    DeadlineGuard guard(kDeadline, &stop);
    ShmChannel r = ring.Reader();
    uint8_t got[kBody];
    for (size_t m = 0; m < kMessages && !stop; ++m) {
      r.ReadExact(got, kBody, policy, guard);
      ASSERT_EQ(FirstPatternMismatch(got, kBody, m), kBody) << "message " << m;
      // The writer never gets more than a ring ahead.
      ASSERT_LE(sent.load(), m + 1 + kFit) << "after message " << m;
    }
  }
  writer.join();
  EXPECT_EQ(sent.load(), kMessages);
}

// A message of no bytes would have a frame word of 0, which reads as "no message": its receiver
// would wait for good. Send and SendSome refuse it at once (EINVAL) and write nothing: the next
// message arrives as if it had not been tried.
TEST(ShmChannelEmptyMessage, IsRefusedAtOnceAndLeavesTheRingAsItWas) {
  Ring ring(4096);
  ShmChannel w = ring.Writer();
  ShmChannel r = ring.Reader();
  std::atomic<bool> stop{false};
  DeadlineGuard guard(std::chrono::seconds(5), &stop);
  const WaitPolicy policy = TestPolicy();
  uint8_t body[16];
  const ByteSlice empty_slices[2] = {{body, 0}, {body + 8, 0}};
  auto expect_einval = [](auto&& send) {
    try {
      send();
      ADD_FAILURE() << "a message of 0 bytes was accepted";
    } catch (const CollError& e) {
      EXPECT_EQ(e.code(), "EINVAL");
    }
  };
  expect_einval([&] { w.Send(nullptr, 0, policy, guard); });
  expect_einval([&] { w.Send(empty_slices, 2, policy, guard); });
  ShmChannel::Outgoing streamed{empty_slices, 2};
  expect_einval([&] { w.SendSome(streamed, ~uint64_t{0}, policy); });
  EXPECT_EQ(ring.control->head.load(), 0u);
  EXPECT_FALSE(r.Arrived());

  // Then a real message, at once and streamed: both arrive intact.
  FillPattern(body, sizeof body, 1);
  const ByteSlice one{body, sizeof body};
  w.Send(&one, 1, policy, guard);
  uint8_t got[sizeof body] = {};
  r.ReadExact(got, sizeof got, policy, guard);
  EXPECT_EQ(FirstPatternMismatch(got, sizeof got, 1), sizeof got);
  ShmChannel::Outgoing more{&one, 1};
  while (!more.done) ASSERT_TRUE(w.SendSome(more, ~uint64_t{0}, policy));
  std::fill(std::begin(got), std::end(got), uint8_t{0});
  r.ReadExact(got, sizeof got, policy, guard);
  EXPECT_EQ(FirstPatternMismatch(got, sizeof got, 1), sizeof got);
}

// A streamed message larger than the ring, with the reader asleep: the writer publishes what
// fits and waits, mid-message, for the reader.
TEST(ShmChannelFlowControl, StreamedMessageWaitsMidwayForTheReader) {
  constexpr uint64_t kCapacity = 1024;
  constexpr size_t kSize = 10 * kCapacity + 3;
  Ring ring(kCapacity);
  std::atomic<bool> stop{false};
  std::atomic<bool> done{false};
  const WaitPolicy policy = TestPolicy();
  std::vector<uint8_t> body(kSize);
  FillPattern(body.data(), kSize, 42);
  JoiningThread writer(stop, [&] {
    DeadlineGuard guard(kDeadline, &stop);
    ShmChannel w = ring.Writer();
    ByteSlice slice{body.data(), body.size()};
    try {
      w.Send(&slice, 1, policy, guard);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "writer: " << e.what();
    }
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(done.load()) << "a message ten rings long was sent with nothing read";
  EXPECT_LE(ring.control->head.load(), kCapacity) << "more than a ring published before anything was consumed";
  DeadlineGuard guard(kDeadline, &stop);
  ShmChannel r = ring.Reader();
  std::vector<uint8_t> got(kSize);
  // Slowly: a piece at a time, sleeping between.
  size_t at = 0;
  while (at < kSize) {
    const size_t part = std::min<size_t>(kSize - at, 96);
    r.ReadExact(got.data() + at, part, policy, guard);
    at += part;
    if (at % 960 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  writer.join();
  EXPECT_TRUE(done.load());
  EXPECT_EQ(FirstPatternMismatch(got.data(), kSize, 42), kSize);
}

// Both directions at once (the engine's exchange of large messages between local peers): each
// of `ranks` threads streams a message to the next thread while taking one from the previous,
// a budgeted piece at a time with SendSome and ConsumeArrived, and waits — after announcing it
// wants room — until either its ring to the next has half free or bytes arrived from the
// previous. Every thread's ring fills (messages of several rings), so an exchange that loses a
// wake-up or needs a whole ring free hangs; every byte must arrive in order.
class ShmChannelExchange : public ::testing::TestWithParam<size_t> {};

TEST_P(ShmChannelExchange, StreamsBothWaysWithoutDeadlockOrDamage) {
  const size_t ranks = GetParam();
  constexpr uint64_t kCapacity = 4096;
  constexpr size_t kHeader = 32;
  std::vector<std::unique_ptr<Ring>> rings;  // rings[r]: r → r + 1
  for (size_t r = 0; r < ranks; ++r) rings.push_back(std::make_unique<Ring>(kCapacity));
  // Doorbells by rank: the ring r → r + 1 rings r as its sender and r + 1 as its receiver.
  std::vector<Doorbell> bells(ranks);
  std::vector<ShmChannel> tx, rx;
  for (size_t r = 0; r < ranks; ++r) {
    tx.emplace_back(rings[r]->control, rings[r]->data, kCapacity, &bells[r], &bells[(r + 1) % ranks]);
  }
  for (size_t r = 0; r < ranks; ++r) {
    const size_t from = (r + ranks - 1) % ranks;
    rx.emplace_back(rings[from]->control, rings[from]->data, kCapacity, &bells[from], &bells[r]);
  }
  std::mt19937 sizes_rng(5);
  std::vector<size_t> sizes;  // body bytes of round k (the same on every thread)
  for (int k = 0; k < 200; ++k) {
    const size_t options[] = {kCapacity - kHeader, kCapacity, 3 * kCapacity + 5, kCapacity / 2 + sizes_rng() % (8 * kCapacity)};
    sizes.push_back(options[sizes_rng() % 4]);
  }
  std::atomic<bool> stop{false};
  const WaitPolicy policy = TestPolicy();
  const std::string error = RunThreads(
      ranks,
      [&](size_t me) {
        DeadlineGuard guard(kDeadline, &stop);
        const size_t from = (me + ranks - 1) % ranks;
        std::mt19937 rng(static_cast<uint32_t>(me) + 17);
        std::vector<uint8_t> header(kHeader), body, got_header(kHeader), got;
        for (size_t k = 0; k < sizes.size(); ++k) {
          // Message (k, sender): header and body from one pattern.
          const uint64_t id = k * ranks + me;
          FillPattern(header.data(), kHeader, id);
          body.resize(sizes[k]);
          FillPattern(body.data(), body.size(), id, kHeader);
          if (tx[me].AtOnce(kHeader + body.size())) throw std::runtime_error("the exchange test needs streamed messages");
          const ByteSlice slices[2] = {{header.data(), kHeader}, {body.data(), body.size()}};
          ShmChannel::Outgoing out{slices, 2};
          got.assign(sizes[k], 0);
          size_t header_left = kHeader, body_left = got.size();
          size_t header_at = 0, body_at = 0;  // where the sinks copy to (ConsumeArrived may call them several times)
          const uint64_t piece = std::min<uint64_t>(1 + rng() % (kCapacity / 2), kCapacity / 4) / 8 * 8 + 8;
          while (!out.done || header_left > 0 || body_left > 0) {
            bool moved = !out.done && tx[me].SendSome(out, piece, policy);
            if (header_left > 0) {
              const size_t n = rx[me].ConsumeArrived(
                  header_left,
                  [&](const uint8_t* p, size_t len) {
                    std::memcpy(got_header.data() + header_at, p, len);
                    header_at += len;
                  },
                  policy);
              header_left -= n;
              moved = moved || n > 0;
            }
            if (header_left == 0 && body_left > 0) {
              const size_t n = rx[me].ConsumeArrived(
                  std::min<size_t>(body_left, piece),
                  [&](const uint8_t* p, size_t len) {
                    std::memcpy(got.data() + body_at, p, len);
                    body_at += len;
                  },
                  policy);
              body_left -= n;
              moved = moved || n > 0;
            }
            if (moved) continue;
            const bool receiving = header_left > 0 || body_left > 0;
            if (!out.done) tx[me].AnnounceWaitForRoom(policy);
            WaitUntil([&] { return (!out.done && tx[me].HalfFree()) || (receiving && rx[me].Arrived()); }, bells[me], policy, guard);
          }
          const uint64_t their = k * ranks + from;
          if (FirstPatternMismatch(got_header.data(), kHeader, their) != kHeader ||
              FirstPatternMismatch(got.data(), got.size(), their, kHeader) != got.size()) {
            throw std::runtime_error("round " + std::to_string(k) + ": the message from thread " + std::to_string(from) +
                                     " arrived damaged");
          }
          if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
        }
      },
      stop);
  EXPECT_EQ(error, "");
}

INSTANTIATE_TEST_SUITE_P(Peers, ShmChannelExchange, ::testing::Values(size_t{2}, size_t{3}),
                         [](const ::testing::TestParamInfo<size_t>& info) { return std::to_string(info.param) + "_threads"; });

}  // namespace
}  // namespace topocoll::test
