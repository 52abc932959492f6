// Helpers for the protocol tests: threads stand in for the ranks of one node, ordinary memory
// (an anonymous shared mapping) for the node's segment.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "base/message.h"
#include "base/wait.h"

namespace topocoll::test {

// A wait that outlives its deadline, or that another thread's failure made pointless, throws
// instead of hanging the test: a protocol that loses a wake-up or deadlocks fails, not stalls.
class DeadlineGuard : public WaitGuard {
 public:
  explicit DeadlineGuard(std::chrono::milliseconds limit, const std::atomic<bool>* stop = nullptr)
      : deadline_(std::chrono::steady_clock::now() + limit), stop_(stop) {}
  void Check() override {
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) throw CollError("EABORTED", "another thread of the test failed");
    if (std::chrono::steady_clock::now() > deadline_) throw CollError("ETIMEDOUT", "a wait outlived the test's deadline");
  }

 private:
  std::chrono::steady_clock::time_point deadline_;
  const std::atomic<bool>* stop_;
};

// The header of a message of a links test: call `seq`, `count` body bytes, from `sender`.
inline MsgHeader HeaderOf(uint32_t seq, uint64_t count, int sender) {
  MsgHeader h{};
  h.magic = kMsgMagic;
  h.seq = seq;
  h.count = count;
  h.sender = sender;
  return h;
}

// A DeadlineGuard that does what the engine's guard does once a wait on a remote peer has gone
// on: it probes the peer (RemoteLinks::TrySend of a 32-byte probe) — here at every Check, which
// it counts in `checks` (another thread may wait for the count: the sender really waited).
template <typename Links>
class ProbingGuard : public DeadlineGuard {
 public:
  ProbingGuard(Links& links, int peer, const void* probe, size_t bytes, std::atomic<uint64_t>& checks, std::chrono::milliseconds limit,
               const std::atomic<bool>* stop)
      : DeadlineGuard(limit, stop), links_(links), peer_(peer), probe_(probe), bytes_(bytes), checks_(checks) {}
  void Check() override {
    DeadlineGuard::Check();
    links_.TrySend(peer_, probe_, bytes_);
    checks_.fetch_add(1);
  }

 private:
  Links& links_;
  int peer_;
  const void* probe_;
  size_t bytes_;
  std::atomic<uint64_t>& checks_;
};

// Waits (under `guard`) until `count` reaches `at_least`.
// A writer's part in the last-words tests: message 1 (header and the `n` bytes of `body`) to
// `to`, then a header-only message 2. Returns whether message 2 was refused (PeerClosed); a
// failure of message 1 fails the test.
template <typename Links>
bool SendMessageThenAnother(Links& links, int to, int sender, const uint8_t* body, size_t n, WaitGuard& guard) {
  const MsgHeader h = HeaderOf(1, n, sender);
  const MsgHeader next = HeaderOf(2, 0, sender);
  const ByteSlice slices[2] = {{&h, sizeof h}, {body, n}};
  const ByteSlice after{&next, sizeof next};
  try {
    links.Send(to, slices, 2, guard);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the message under way failed: " << e.what();
    return false;
  }
  try {
    links.Send(to, &after, 1, guard);
  } catch (const PeerClosed&) {
    return true;
  }
  return false;
}

inline void AwaitCount(const std::atomic<uint64_t>& count, uint64_t at_least, WaitGuard& guard) {
  while (count.load() < at_least) {
    guard.Check();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Short stages, so the guard runs often and the futex path (sleep, Ring) is exercised: the
// threads outnumber the cores of a CI machine.
inline WaitPolicy TestPolicy() {
  WaitPolicy p;
  p.spin_iterations = 64;
  p.yield_for = std::chrono::microseconds(20);
  p.sleep_slice = std::chrono::milliseconds(5);
  return p;
}

// Zeroed, page-aligned memory shared like a segment (MAP_SHARED | MAP_ANONYMOUS).
class Mapping {
 public:
  explicit Mapping(size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<uint8_t*>(p);
  }
  ~Mapping() { munmap(base_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  uint8_t* base() const { return base_; }
  size_t size() const { return bytes_; }

 private:
  uint8_t* base_;
  size_t bytes_;
};

// Runs body(i) on `count` threads and waits for all. The first exception any of them throws
// stops the others' waits (through `stop`, which their guards watch) and is returned as text;
// empty when every thread finished.
inline std::string RunThreads(size_t count, const std::function<void(size_t)>& body, std::atomic<bool>& stop) {
  std::mutex m;
  std::string first_error;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      try {
        body(i);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(m);
        if (first_error.empty()) first_error = "thread " + std::to_string(i) + ": " + e.what();
        stop.store(true);
      }
    });
  }
  for (auto& t : threads) t.join();
  return first_error;
}

// A thread that is joined however the test ends: a failed ASSERT returns early, and then sets
// `stop` so the thread's waits end (through its guard) instead of blocking the join.
class JoiningThread {
 public:
  template <typename F>
  JoiningThread(std::atomic<bool>& stop, F&& body) : stop_(stop), thread_(std::forward<F>(body)) {}
  ~JoiningThread() {
    if (thread_.joinable()) {
      stop_.store(true);
      thread_.join();
    }
  }
  void join() { thread_.join(); }

 private:
  std::atomic<bool>& stop_;
  std::thread thread_;
};

// The byte at `position` of message `message`: distinct across messages and positions, so a
// byte taken from the wrong message or offset shows.
inline uint8_t PatternByte(uint64_t message, uint64_t position) {
  uint64_t x = (message + 1) * 0x9e3779b97f4a7c15ULL ^ (position * 0xbf58476d1ce4e5b9ULL);
  x ^= x >> 31;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 29;
  return static_cast<uint8_t>(x);
}

inline void FillPattern(uint8_t* p, size_t n, uint64_t message, uint64_t from = 0) {
  for (size_t i = 0; i < n; ++i) p[i] = PatternByte(message, from + i);
}

// The first position where p differs from the pattern, or n.
inline size_t FirstPatternMismatch(const uint8_t* p, size_t n, uint64_t message, uint64_t from = 0) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != PatternByte(message, from + i)) return i;
  }
  return n;
}

}  // namespace topocoll::test
