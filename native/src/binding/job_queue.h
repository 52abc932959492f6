// Promise collectives and requests (runAsync): a queue of calls that one progress thread runs on
// the engine, one at a time in queue order, each settling its Promise back on the JavaScript
// thread. Jobs are numbered 1, 2, … in queue order, so "job n has run" is `completed_ >= n`.
//
// Threads: Push, WaitIdle, Stop and Join run on the JavaScript thread; the progress thread
// takes jobs under mutex_ and runs them. `in_flight_` counts jobs queued or running: the JS
// thread raises it before queuing, the progress thread lowers it under mutex_ after a job ran
// (so WaitIdle, which waits on idle_ under mutex_, cannot miss the last one) and only then hands
// the job to the thread-safe function, which settles the Promise on the JS thread. The
// thread-safe function is referenced while Promises are pending, so Node stays alive for them
// and not longer.
//
// Requests (Test, Await) learn a job's end on the JS thread before its Promise settles: the
// progress thread sets `completed_` to the job's number and records a failed job's error in
// `failures_`, both under mutex_, before handing the job on; the settlement removes the record
// (the Promise then carries the error, and the request holds the outcome).
#pragma once

#include <napi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "engine/engine.h"

namespace topocoll {

class JobQueue {
 public:
  // Starts the progress thread, which requests the scheduler slice `slice_us` (wait.h) and runs
  // the jobs on `engine` (which outlives this queue).
  JobQueue(Napi::Env env, Engine& engine, uint32_t slice_us);
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;
  ~JobQueue();

  // Queues one call; its Promise resolves when the call completed, or rejects with its error.
  Napi::Promise Push(Napi::Env env, CallArgs args);
  // Waits until no job is queued or running: blocking collectives run in call order, after the
  // Promise collectives before them. Costs one load when none is in flight — only this (JS)
  // thread queues jobs, so none can start meanwhile.
  void WaitIdle() {
    if (in_flight_.load(std::memory_order_acquire) != 0) WaitIdleSlow();
  }
  // The number of the job Push queued last (0: none yet).
  uint64_t last_job() const { return issued_; }
  // Whether job `id` (≤ last_job()) has run. A job that failed throws its CollError here (also
  // from Await) until its Promise has settled.
  bool Test(uint64_t id);
  // Blocks the calling (JS) thread until job `id` has run; throws as Test. Every job ends: the
  // engine's watchdog ends one whose peers never come.
  void Await(uint64_t id);
  // Tells the progress thread to stop once the queue is empty (a job still waiting on its peers
  // must be ended through Engine::RequestClose for Join to return).
  void Stop();
  // Joins the progress thread and releases the thread-safe function. Idempotent.
  void Join();

 private:
  struct Job;
  void Loop(uint32_t slice_us);
  void WaitIdleSlow();
  // A job number Push never gave (Await on it would never return) is EINVAL.
  void CheckIssued(uint64_t id) const;
  // Throws job `id`'s error if it failed and has not settled yet. Under mutex_.
  void ThrowIfFailedLocked(uint64_t id) const;

  Engine& engine_;
  Napi::ThreadSafeFunction tsfn_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Job*> queue_;
  std::atomic<uint32_t> in_flight_{0};
  bool stopping_ = false;
  bool joined_ = false;
  int pending_ = 0;         // Promises not settled yet; touched on the JS thread only
  uint64_t issued_ = 0;     // jobs queued so far; touched on the JS thread only
  uint64_t completed_ = 0;  // jobs run so far; under mutex_
  // Failed jobs not settled yet: their error (code, message); under mutex_.
  std::map<uint64_t, std::pair<std::string, std::string>> failures_;
};

}  // namespace topocoll
