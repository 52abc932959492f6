#include "base/wait.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "base/errors.h"

namespace topocoll {

ContentionSignal::ContentionSignal(int machine_ranks, const char* loadavg) : machine_ranks_(machine_ranks) {
  if (machine_ranks_ >= 0) loadavg_fd_ = open(loadavg, O_RDONLY | O_CLOEXEC);
}

ContentionSignal::~ContentionSignal() {
  if (loadavg_fd_ >= 0) close(loadavg_fd_);
}

bool ContentionSignal::OthersRun() const {
  if (loadavg_fd_ < 0) return true;
  // "0.52 0.58 0.59 3/812 4242": pread renders the file anew at offset 0, from any thread.
  char text[128];
  const ssize_t n = pread(loadavg_fd_, text, sizeof text - 1, 0);
  if (n <= 0) return true;
  text[n] = '\0';
  const char* p = text;
  for (int field = 0; field < 3; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return true;
    ++p;
  }
  char* end = nullptr;
  const long runnable = std::strtol(p, &end, 10);
  if (end == p || *end != '/') return true;
  return runnable > static_cast<long>(machine_ranks_) + kSlack;
}

void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::milliseconds timeout) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  ts.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1000000L);
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory shared between processes.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

namespace {

// sched_setattr(2)'s argument (the first version of the struct; the kernel accepts any size it
// knows, and this one has no utilisation clamps).
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};

bool GetSchedAttr(SchedAttr& attr) {
  std::memset(&attr, 0, sizeof attr);
  return syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) == 0;
}

// SCHED_FLAG_RESET_ON_FORK of <linux/sched.h> (which clashes with glibc's <sched.h>).
constexpr uint64_t kResetOnFork = 0x01;

// Writes `attr` back with another slice (0: the default); reset-on-fork stays as it was.
bool SetSliceNs(SchedAttr attr, uint64_t ns) {
  attr.size = sizeof attr;
  attr.sched_flags &= kResetOnFork;
  attr.sched_runtime = ns;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

// This thread's SchedulerSlice holders, and whether the first one's request was accepted.
thread_local int slice_holders = 0;
thread_local bool slice_applied = false;

}  // namespace

SchedulerSlice::SchedulerSlice(uint32_t us) {
  if (us == 0) return;
  thread_ = syscall(SYS_gettid);
  holding_ = true;
  if (slice_holders++ == 0) {
    SchedAttr attr;
    // The whole attribute set is written back: nice and policy stay as they are.
    slice_applied = GetSchedAttr(attr) && attr.sched_policy == SCHED_OTHER && SetSliceNs(attr, uint64_t{us} * 1000);
  }
  applied_ = slice_applied;
}

SchedulerSlice::~SchedulerSlice() {
  if (!holding_ || syscall(SYS_gettid) != thread_) return;
  if (--slice_holders > 0 || !slice_applied) return;
  slice_applied = false;
  SchedAttr attr;
  if (GetSchedAttr(attr) && attr.sched_policy == SCHED_OTHER) SetSliceNs(attr, 0);
}

bool RegisterForMembarrier() {
  const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (supported < 0 || (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return false;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
}

void HeavyFence() {
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0) {
    throw CollError("EINVAL", "membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) failed: " + ErrnoText(errno));
  }
}

void Doorbell::Ring(bool asymmetric) {
  // The caller's store of the condition must be ordered before the load of `sleeping`: by the
  // sleeper's membarrier, or here.
  if (asymmetric)
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
  if (idle.load(std::memory_order_relaxed) != 0) idle.store(0, std::memory_order_relaxed);
  // The first ringer takes the announcement: one wake-up syscall per sleep, however many ring
  // (the sleeper announces again, and looks again, before it sleeps again).
  if (sleeping.load(std::memory_order_seq_cst) != 0 && sleeping.exchange(0, std::memory_order_seq_cst) != 0) {
    bell.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(bell);
  }
}

std::string ErrnoText(int err) {
  char buf[256];
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return std::string(strerror_r(err, buf, sizeof buf));
#else
  strerror_r(err, buf, sizeof buf);
  return std::string(buf);
#endif
}

}  // namespace topocoll
