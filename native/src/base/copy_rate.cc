#include "base/copy_rate.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "base/cache_line.h"
#include "base/datatypes.h"
#include "base/errors.h"
#include "base/wait.h"

namespace topocoll {

namespace {

bool PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

double MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

CrossCoreRates MeasureCrossCoreRates(size_t bytes, int rounds, int writer_cpu, int reader_cpu) {
  std::vector<uint8_t> source(bytes), shared(bytes), local(bytes);
  // Round r is written when `written` = r and copied out when `copied` = r; both threads spin
  // (the two CPUs are theirs for the few milliseconds this takes).
  std::atomic<int> written{0}, copied{0};
  std::atomic<bool> pinned{true};
  double write_us = 0, read_us = 0;
  std::thread reader([&] {
    if (!PinTo(reader_cpu)) pinned = false;
    for (int r = 1; r <= rounds; ++r) {
      while (written.load(std::memory_order_acquire) != r) CpuRelax();
      const auto start = std::chrono::steady_clock::now();
      std::memcpy(local.data(), shared.data(), bytes);
      read_us += MicrosSince(start);
      copied.store(r, std::memory_order_release);
    }
  });
  std::thread writer([&] {
    if (!PinTo(writer_cpu)) pinned = false;
    for (int r = 1; r <= rounds; ++r) {
      std::memset(source.data(), r & 0xff, bytes);
      const auto start = std::chrono::steady_clock::now();
      std::memcpy(shared.data(), source.data(), bytes);
      write_us += MicrosSince(start);
      written.store(r, std::memory_order_release);
      while (copied.load(std::memory_order_acquire) != r) CpuRelax();
    }
  });
  writer.join();
  reader.join();
  if (!pinned) {
    throw CollError("EINVAL",
                    "could not place the copy threads on CPUs " + std::to_string(writer_cpu) + " and " + std::to_string(reader_cpu));
  }
  // Reading the result keeps the copies from being optimised away.
  if (bytes > 0 && local[bytes / 2] != static_cast<uint8_t>(rounds & 0xff)) throw CollError("EINVAL", "copy-rate check failed");
  const double total = static_cast<double>(bytes) * rounds;
  return {write_us > 0 ? total / write_us : 0, read_us > 0 ? total / read_us : 0};
}

double MeasureCrossCoreLatencyNs(int cpu_a, int cpu_b, int round_trips) {
  // The counter goes 0 → 1 on cpu_a, 1 → 2 on cpu_b, and so on: each step waits for the line
  // the other thread has just written. Two threads of their own: the caller's CPUs stay as
  // they are.
  alignas(kFalseSharingBytes) std::atomic<int64_t> turn{0};
  std::atomic<bool> pinned{true};
  std::atomic<int> ready{0};
  double us = 0;
  auto player = [&](int cpu, int64_t parity) {
    if (!PinTo(cpu)) pinned = false;
    ready.fetch_add(1);
    while (ready.load() < 2) CpuRelax();
    const auto start = std::chrono::steady_clock::now();
    for (int64_t step = parity; step < 2 * static_cast<int64_t>(round_trips); step += 2) {
      while (turn.load(std::memory_order_acquire) != step) {
        if (!pinned.load(std::memory_order_relaxed)) return;
        CpuRelax();
      }
      turn.store(step + 1, std::memory_order_release);
    }
    if (parity == 0) us = MicrosSince(start);
  };
  std::thread a(player, cpu_a, 0);
  std::thread b(player, cpu_b, 1);
  a.join();
  b.join();
  if (!pinned)
    throw CollError("EINVAL", "could not place the latency threads on CPUs " + std::to_string(cpu_a) + " and " + std::to_string(cpu_b));
  return us * 1000.0 / (2.0 * round_trips);
}

double MeasureCombineRate(size_t bytes, int rounds) {
  const size_t n = bytes / sizeof(double);
  std::vector<double> into(n, 0.0), from(n, 1.0);
  const ReduceFn sum = FindReduce(Dtype::kFloat64, ReduceOp::kSum).in_place;
  if (n == 0 || rounds <= 0) return 0;
  // One untimed round brings both buffers into the cache and the page tables.
  sum(into.data(), from.data(), n);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) sum(into.data(), from.data(), n);
  const double us = MicrosSince(start);
  // Reading the result keeps the sums from being optimised away.
  if (into[n / 2] != static_cast<double>(rounds) + 1) throw CollError("EINVAL", "combine-rate check failed");
  return us > 0 ? static_cast<double>(n * sizeof(double)) * rounds / us : 0;
}

}  // namespace topocoll
