// Waiting for a condition another process will make true: spin briefly, then yield the CPU,
// then sleep on a shared futex. The last stage matters when processes outnumber cores (8 ranks
// on 2 cores is normal): a spinning waiter would steal the core its peer needs to make progress.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "base/cache_line.h"

namespace topocoll {

// A per-process wake-up word in shared memory. Whoever makes a condition true that this
// process may be sleeping on calls Ring(); the futex syscall is made only when the owner has
// announced that it sleeps, so the fast path is one load.
//
// Announcing the sleep and publishing the condition form a Dekker pair: each side stores, then
// loads what the other stored, which needs a store-load fence on one side or the other. With
// `asymmetric` the sleeper pays it all — a membarrier(2) that makes every process of the
// segment pass a full barrier — and the wakers, the fast path, need none (the technique of
// liburcu's membarrier flavour). Without membarrier both sides fence.
struct alignas(kFalseSharingBytes) Doorbell {
  std::atomic<uint32_t> bell{0};
  std::atomic<uint32_t> sleeping{0};
  // Set while the owner waits (past its spin) and nobody has rung since: the owner cannot go
  // on, so a process sharing its CPU gains nothing by yielding to it (see WaitPolicy::co_runners).
  std::atomic<uint32_t> idle{0};

  void Ring(bool asymmetric);
};

// Checks made while waiting: aborts raised by other processes, dead peers, the deadline. Throws
// CollError to end the wait.
class WaitGuard {
 public:
  virtual ~WaitGuard() = default;
  virtual void Check() = 0;
  // Called when a link ended (closed, reset, failed) just before that is reported. A guard whose
  // own side shut the links — an abort raised on this node while the wait was on — throws that
  // abort's error instead: the link ended because of it, not because the peer failed.
  virtual void LinkEnded() {}
};

// Whether work other than this wait's peers was seen to take this process's cores lately: a
// wait that lost its CPU mid-spin, or whose sched_yield() handed the core away for longer than a
// peer's step takes. While it holds, waits neither spin nor yield but sleep at once. Spinning
// or yielding then gains nothing and loses a scheduler slice: a spinning or yielding thread is
// runnable, so when its condition comes true it waits for the busy process's slice to end. A
// sleeping thread that is rung preempts it at once (its short slice, SchedulerSlice).
// Shared by every wait of one engine, from any thread.
//
// A lost core is only a sighting of others' work when more threads are runnable on the machine
// than the job itself can account for: the job's own ranks on this kernel (`machine_ranks`, one
// busy thread each) and one more (a V8 helper thread, the launcher). Otherwise the core went to
// one of the job's ranks — the peer the wait yielded to, which is about to answer — and sleeping
// would only add a wake-up to every message. The kernel's count of runnable threads is the
// fourth field of /proc/loadavg ("R/T"), read at the moment of the gap.
class ContentionSignal {
 public:
  using Clock = std::chrono::steady_clock;
  // How long one sighting keeps waits from spinning: long enough to cover the next messages of
  // a busy stretch, short enough that a wait finds out soon once the cores are free again (the
  // price of a wrong guess is one slice per this period).
  static constexpr std::chrono::milliseconds kMemory{20};
  // Runnable threads beyond the job's ranks that are not yet others' work.
  static constexpr int kSlack = 1;

  // machine_ranks < 0: unknown, every lost core counts. `loadavg`: where the runnable count is
  // read (tests give a file of their own); a file that cannot be read counts every lost core too.
  explicit ContentionSignal(int machine_ranks = -1, const char* loadavg = "/proc/loadavg");
  ~ContentionSignal();
  ContentionSignal(const ContentionSignal&) = delete;
  ContentionSignal& operator=(const ContentionSignal&) = delete;

  bool Recent(Clock::time_point now) const { return now.time_since_epoch().count() < until_.load(std::memory_order_relaxed); }
  void Seen(Clock::time_point now) { until_.store((now + kMemory).time_since_epoch().count(), std::memory_order_relaxed); }
  // A wait lost its core at `now`: records a sighting when others' work shows (OthersRun) and
  // says whether it did.
  bool Sighted(Clock::time_point now) {
    if (!OthersRun()) return false;
    Seen(now);
    return true;
  }
  // Whether more threads are runnable on the machine than the job's ranks there and kSlack.
  bool OthersRun() const;

 private:
  std::atomic<Clock::rep> until_{0};
  int machine_ranks_;
  int loadavg_fd_ = -1;
};

struct WaitPolicy {
  // Iterations of a pause loop before yielding; small when oversubscribed.
  uint32_t spin_iterations = 2000;
  // How long to keep yielding before sleeping on the futex.
  std::chrono::microseconds yield_for{200};
  // Longest single futex sleep: the guard runs at least this often.
  std::chrono::milliseconds sleep_slice{20};
  // Every process of the segment is registered for membarrier: sleepers issue one before
  // their last look, wakers skip the fence (see Doorbell).
  bool asymmetric = false;
  // The doorbells of the processes bound to this one's CPUs (which they oversubscribe). While
  // every one of them is idle, yielding would only hand the CPU to a process that yields it
  // straight back, so the wait spins instead — for at most idle_spin_for, since an `idle` a
  // racing Ring missed would otherwise hold a runnable co-runner off. Empty: always yield.
  const Doorbell* const* co_runners = nullptr;
  size_t co_runner_count = 0;
  std::chrono::microseconds idle_spin_for{50};
  // waits: auto (ContentionSignal): where sightings of others' work are kept, or null to spin
  // and yield whatever else runs (waits: spin, and waits: sleep, which has neither stage).
  ContentionSignal* contention = nullptr;
  // A gap this long between two looks at the condition, in the spin or around one sched_yield(),
  // means something else had the core meanwhile: longer than a peer's step between two rings
  // on a core of its own.
  std::chrono::microseconds taken_after{50};
};

// Whether the spin and yield stages are skipped: others' work took the cores lately.
inline bool SleepAtOnce(const WaitPolicy& policy, std::chrono::steady_clock::time_point now) {
  return policy.contention != nullptr && policy.contention->Recent(now);
}

// Whether every co-runner waits with nothing rung since (then yielding is pointless).
inline bool CoRunnersIdle(const WaitPolicy& policy) {
  if (policy.co_runner_count == 0) return false;
  for (size_t i = 0; i < policy.co_runner_count; ++i) {
    if (policy.co_runners[i]->idle.load(std::memory_order_relaxed) == 0) return false;
  }
  return true;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Waits until ready() returns true. `mine` is the calling process's doorbell.
template <typename Ready>
void WaitUntil(Ready&& ready, Doorbell& mine, const WaitPolicy& policy, WaitGuard& guard);

// membarrier(2) registration of this process; true when it can take part in asymmetric fences.
bool RegisterForMembarrier();
// The heavy side of an asymmetric fence: every running thread of every registered process
// executes a full memory barrier before this returns.
void HeavyFence();

// The calling thread's scheduler slice (EEVDF's per-task request, sched_attr.sched_runtime of a
// SCHED_OTHER thread; Linux 6.12 and later honour it, clamped to 0.1–100 ms). A thread whose
// slice is short gets an early virtual deadline when it wakes, so it preempts a CPU-bound process
// that does not yield instead of waiting out that process's slice; the ranks of a collective
// wake each other many times per call, and each such wait would otherwise cost a whole slice
// of whatever else runs on the core. Holders on one thread nest (every communicator's engine
// holds one on the JavaScript thread): the first to arrive makes the request, the last to leave
// returns the thread to the kernel's default slice — not to a custom slice it had before, which
// sched_getattr cannot tell from the default one (it reports the slice in effect). Best effort:
// other policies (batch, idle, real-time) and kernels without the call are left alone.
class SchedulerSlice {
 public:
  SchedulerSlice() = default;
  // Requests `us` microseconds (0: leave the slice alone).
  explicit SchedulerSlice(uint32_t us);
  ~SchedulerSlice();
  SchedulerSlice(const SchedulerSlice&) = delete;
  SchedulerSlice& operator=(const SchedulerSlice&) = delete;
  // Whether the request was made and accepted.
  bool applied() const { return applied_; }

 private:
  bool applied_ = false;
  bool holding_ = false;
  long thread_ = 0;
};

// Sleeps on `word` while it equals `expected`, at most `timeout` (FUTEX_WAIT on a shared map).
void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::milliseconds timeout);
void FutexWakeAll(std::atomic<uint32_t>& word);

// Spins up to policy.spin_iterations looks at ready(); true once it holds. Under waits: auto
// it also watches the clock every few looks, and stops (recording the sighting) when the gap
// shows that the thread lost its core meanwhile.
template <typename Ready>
bool Spin(Ready& ready, const WaitPolicy& policy) {
  constexpr uint32_t kLooksPerClock = 64;
  if (policy.contention == nullptr) {
    for (uint32_t i = 0; i < policy.spin_iterations; ++i) {
      if (ready()) return true;
      CpuRelax();
    }
    return false;
  }
  auto last = std::chrono::steady_clock::now();
  if (policy.spin_iterations > 0 && policy.contention->Recent(last)) return ready();
  for (uint32_t i = 0; i < policy.spin_iterations; ++i) {
    if (ready()) return true;
    CpuRelax();
    if (i % kLooksPerClock == kLooksPerClock - 1) {
      const auto now = std::chrono::steady_clock::now();
      // A lost core others took: stop spinning (the wait sleeps). One the job's ranks took:
      // spin on, as waits: spin would.
      if (now - last > policy.taken_after && policy.contention->Sighted(now)) return ready();
      last = now;
    }
  }
  return false;
}

template <typename Ready>
void WaitUntil(Ready&& ready, Doorbell& mine, const WaitPolicy& policy, WaitGuard& guard) {
  if (Spin(ready, policy)) return;
  const auto started = std::chrono::steady_clock::now();
  // Others' work holds the cores: no yield stage, straight to the sleep.
  const auto yield_until = SleepAtOnce(policy, started) ? started : started + policy.yield_for;
  const auto idle_spin_until = started + policy.idle_spin_for;
  uint32_t yields = 0;
  mine.idle.store(1, std::memory_order_seq_cst);
  // However the wait ends (an error included), the owner runs again.
  struct IdleUntilReturn {
    Doorbell& bell;
    ~IdleUntilReturn() { bell.idle.store(0, std::memory_order_relaxed); }
  } idle_until_return{mine};
  for (auto now = started; now < yield_until; now = std::chrono::steady_clock::now()) {
    if (ready()) return;
    if (now < idle_spin_until && CoRunnersIdle(policy)) {
      CpuRelax();
    } else {
      sched_yield();
      if ((++yields & 255) == 0) guard.Check();
      // The yield handed the core to something that kept it: sleep from now on, so that the
      // ring that ends this wait preempts it instead of waiting out its slice.
      if (policy.contention != nullptr) {
        const auto after = std::chrono::steady_clock::now();
        if (after - now > policy.taken_after && policy.contention->Sighted(after)) break;
      }
    }
    // A Ring cleared it (perhaps for another condition): still waiting, so idle again.
    if (mine.idle.load(std::memory_order_relaxed) == 0) mine.idle.store(1, std::memory_order_seq_cst);
  }
  for (;;) {
    // Announce the sleep before the last look, so a writer that publishes after this look sees
    // the announcement and rings (both sides use sequentially consistent operations).
    mine.sleeping.store(1, std::memory_order_seq_cst);
    if (policy.asymmetric) HeavyFence();
    const uint32_t seen = mine.bell.load(std::memory_order_seq_cst);
    if (ready()) {
      mine.sleeping.store(0, std::memory_order_relaxed);
      return;
    }
    FutexWait(mine.bell, seen, policy.sleep_slice);
    mine.sleeping.store(0, std::memory_order_relaxed);
    if (ready()) return;
    guard.Check();
  }
}

// S1's helper-thread polling: spins like WaitUntil, then looks every `sleep` (a sleep between
// polls instead of a doorbell), running the guard at least every sleep_slice.
template <typename Ready>
void PollUntil(Ready&& ready, std::chrono::microseconds sleep, const WaitPolicy& policy, WaitGuard& guard) {
  if (Spin(ready, policy)) return;
  auto checked = std::chrono::steady_clock::now();
  for (;;) {
    if (ready()) return;
    std::this_thread::sleep_for(sleep);
    const auto now = std::chrono::steady_clock::now();
    if (now - checked >= policy.sleep_slice) {
      checked = now;
      guard.Check();
    }
  }
}

}  // namespace topocoll
