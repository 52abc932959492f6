#include "wait.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

#include "errors.h"

namespace topocoll {

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
  if (asymmetric) std::atomic_signal_fence(std::memory_order_seq_cst);
  else std::atomic_thread_fence(std::memory_order_seq_cst);
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
