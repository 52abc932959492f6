// WaitUntil (base/wait.h) under waits: auto: a wait that knows others' work holds the cores
// goes straight to its futex sleep, and a wait that sees itself lose the core records that. And
// TcpLinks' read spin (transport/tcp_links.h): bounded in time, and none at all while others'
// work holds the cores. What a stage does is observed through the doorbell's `sleeping` flag
// (set only by the sleep stage) and the waiting thread's own CPU time (a spin burns it, a sleep
// in poll() does not).
#include "base/wait.h"

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "test_support.h"
#include "transport/tcp_links.h"

namespace topocoll::test {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
constexpr auto kDeadline = std::chrono::seconds(30);

// A policy whose spin and yield stages would each outlast the test: a wait that sleeps within
// the test's time skipped both.
WaitPolicy EndlessSpinAndYield(ContentionSignal* contention) {
  WaitPolicy policy;
  policy.spin_iterations = 1u << 31;
  policy.yield_for = std::chrono::seconds(60);
  policy.contention = contention;
  return policy;
}

// Runs a WaitUntil on `policy` in a thread; reports whether the waiter announced a sleep within
// `within`, then releases it.
bool SleepsWithin(const WaitPolicy& policy, milliseconds within) {
  Doorbell bell;
  std::atomic<bool> ready{false};
  std::thread waiter([&] {
    DeadlineGuard guard(kDeadline);
    WaitUntil([&] { return ready.load(std::memory_order_acquire); }, bell, policy, guard);
  });
  const auto until = std::chrono::steady_clock::now() + within;
  bool slept = false;
  while (!slept && std::chrono::steady_clock::now() < until) {
    slept = bell.sleeping.load() != 0;
    std::this_thread::sleep_for(microseconds(200));
  }
  ready.store(true, std::memory_order_release);
  bell.Ring(false);
  waiter.join();
  return slept;
}

TEST(WaitPolicy, ARecentSightingOfOthersWorkSleepsAtOnce) {
  ContentionSignal contention;
  contention.Seen(std::chrono::steady_clock::now());
  EXPECT_TRUE(SleepsWithin(EndlessSpinAndYield(&contention), milliseconds(2000)));
}

TEST(WaitPolicy, WithoutTheSignalTheWaitSpinsAndYieldsFirst) {
  // waits: spin: the same stages, no sighting consulted: no sleep while they last.
  EXPECT_FALSE(SleepsWithin(EndlessSpinAndYield(nullptr), milliseconds(100)));
}

TEST(WaitPolicy, ASightingExpires) {
  ContentionSignal contention;
  const auto now = std::chrono::steady_clock::now();
  contention.Seen(now);
  EXPECT_TRUE(contention.Recent(now + ContentionSignal::kMemory - microseconds(1)));
  EXPECT_FALSE(contention.Recent(now + ContentionSignal::kMemory));
}

TEST(WaitPolicy, ASpinThatSeesAGapRecordsItAndSleeps) {
  // Any gap counts as a lost core here: the first look at the clock records a sighting, and the
  // wait goes to sleep without the yield stage.
  ContentionSignal contention;
  WaitPolicy policy = EndlessSpinAndYield(&contention);
  policy.taken_after = microseconds(0);
  EXPECT_TRUE(SleepsWithin(policy, milliseconds(2000)));
  EXPECT_TRUE(contention.Recent(std::chrono::steady_clock::now()));
}

// A file that reads like /proc/loadavg with `runnable` threads runnable; removed when it goes.
class FakeLoadavg {
 public:
  explicit FakeLoadavg(int runnable) {
    char name[] = "/tmp/wait-test-loadavg-XXXXXX";
    const int fd = mkstemp(name);
    path_ = name;
    const std::string text = "0.52 0.58 0.59 " + std::to_string(runnable) + "/812 4242\n";
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  ~FakeLoadavg() { unlink(path_.c_str()); }
  const char* path() const { return path_.c_str(); }

 private:
  std::string path_;
};

TEST(WaitPolicy, ALostCoreIsOthersWorkOnlyWhenMoreRunThanTheJobsRanks) {
  // Three runnable: two ranks of the job and the slack account for them; one rank and the slack
  // do not.
  const FakeLoadavg three(3);
  ContentionSignal two_ranks(2, three.path());
  ContentionSignal one_rank(1, three.path());
  const auto now = std::chrono::steady_clock::now();
  EXPECT_FALSE(two_ranks.Sighted(now));
  EXPECT_FALSE(two_ranks.Recent(now));
  EXPECT_TRUE(one_rank.Sighted(now));
  EXPECT_TRUE(one_rank.Recent(now));
  // Unknown ranks, or a count that cannot be read: every lost core counts.
  EXPECT_TRUE(ContentionSignal(-1, three.path()).OthersRun());
  EXPECT_TRUE(ContentionSignal(2, "/nonexistent/loadavg").OthersRun());
}

TEST(WaitPolicy, ASpinThatLosesItsCoreToTheJobsOwnRanksSpinsOn) {
  // Every gap counts as a lost core, but no more threads run than the job's ranks: the wait goes
  // on spinning and yielding as waits: spin does, and nothing is recorded.
  const FakeLoadavg two(2);
  ContentionSignal contention(4, two.path());
  WaitPolicy policy = EndlessSpinAndYield(&contention);
  policy.taken_after = microseconds(0);
  EXPECT_FALSE(SleepsWithin(policy, milliseconds(100)));
  EXPECT_FALSE(contention.Recent(std::chrono::steady_clock::now()));
}

// The calling thread's CPU time.
milliseconds ThreadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::duration_cast<milliseconds>(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

// Rank 0 reads a message rank 1 sends only after `delay`; returns rank 0's CPU time meanwhile.
milliseconds CpuOfAReadThatWaits(const TcpLinks::ReadSpin& spin, milliseconds delay) {
  TcpLinks zero;
  TcpLinks one;
  const int port0 = zero.Listen("127.0.0.1");
  const int port1 = one.Listen("127.0.0.1");
  std::thread connecting([&] {
    DeadlineGuard guard(kDeadline);
    EXPECT_TRUE(one.Establish(1, "wait-test", {TcpPeer{0, "127.0.0.1", port0}}, 5000, guard).empty());
  });
  DeadlineGuard guard(kDeadline);
  EXPECT_TRUE(zero.Establish(0, "wait-test", {TcpPeer{1, "127.0.0.1", port1}}, 5000, guard).empty());
  connecting.join();
  zero.SetReadSpin(spin);
  const MsgHeader sent = HeaderOf(1, 0, 1);
  std::thread sender([&] {
    std::this_thread::sleep_for(delay);
    DeadlineGuard send_guard(kDeadline);
    const ByteSlice slice{&sent, sizeof sent};
    one.Send(0, &slice, 1, send_guard);
  });
  const milliseconds before = ThreadCpu();
  MsgHeader got{};
  zero.ReadHeader(1, &got, guard);
  const milliseconds used = ThreadCpu() - before;
  sender.join();
  EXPECT_EQ(got.magic, kMsgMagic);
  return used;
}

TEST(TcpReadSpin, IsBoundedInTime) {
  // Attempts enough for seconds of spinning; the bound stops it after 1 ms of the 300 ms wait.
  TcpLinks::ReadSpin spin;
  spin.attempts = 1u << 31;
  spin.for_at_most = milliseconds(1);
  EXPECT_LT(CpuOfAReadThatWaits(spin, milliseconds(300)).count(), 100);
}

TEST(TcpReadSpin, NoneWhileOthersWorkHoldsTheCores) {
  // A sighting that still holds a second from now, past the links' setup and the whole read.
  ContentionSignal contention;
  contention.Seen(std::chrono::steady_clock::now() + milliseconds(1000));
  TcpLinks::ReadSpin spin;
  spin.attempts = 1u << 31;
  spin.contention = &contention;
  EXPECT_LT(CpuOfAReadThatWaits(spin, milliseconds(300)).count(), 100);
}

}  // namespace
}  // namespace topocoll::test
