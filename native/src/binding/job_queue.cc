#include "binding/job_queue.h"

#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "base/errors.h"
#include "base/wait.h"
#include "binding/js_error.h"

namespace topocoll {

// One queued Promise collective.
struct JobQueue::Job {
  uint64_t id = 0;
  CallArgs args;
  Napi::Promise::Deferred deferred;
  std::string error_code;
  std::string error_message;
  explicit Job(Napi::Env env) : deferred(Napi::Promise::Deferred::New(env)) {}
};

JobQueue::JobQueue(Napi::Env env, Engine& engine, uint32_t slice_us) : engine_(engine) {
  // Completions come back to the JS thread through this function.
  tsfn_ = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}), "topocoll-progress", 0, 1);
  tsfn_.Unref(env);
  thread_ = std::thread([this, slice_us] { Loop(slice_us); });
}

JobQueue::~JobQueue() {
  Stop();
  Join();
}

Napi::Promise JobQueue::Push(Napi::Env env, CallArgs args) {
  auto job = std::make_unique<Job>(env);
  job->args = std::move(args);
  job->id = ++issued_;
  Napi::Promise promise = job->deferred.Promise();
  if (pending_++ == 0) tsfn_.Ref(env);
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(job.release());
  }
  wake_.notify_one();
  return promise;
}

void JobQueue::WaitIdleSlow() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return in_flight_.load(std::memory_order_acquire) == 0; });
}

void JobQueue::CheckIssued(uint64_t id) const {
  if (id == 0 || id > issued_)
    throw CollError("EINVAL", "no job " + std::to_string(id) + " was queued (the last is " + std::to_string(issued_) + ")");
}

bool JobQueue::Test(uint64_t id) {
  CheckIssued(id);
  std::lock_guard<std::mutex> lock(mutex_);
  if (completed_ < id) return false;
  ThrowIfFailedLocked(id);
  return true;
}

void JobQueue::Await(uint64_t id) {
  CheckIssued(id);
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return completed_ >= id; });
  ThrowIfFailedLocked(id);
}

void JobQueue::ThrowIfFailedLocked(uint64_t id) const {
  const auto failed = failures_.find(id);
  if (failed != failures_.end()) throw CollError(failed->second.first, failed->second.second);
}

void JobQueue::Loop(uint32_t slice_us) {
  const SchedulerSlice slice(slice_us);
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
    }
    try {
      engine_.Run(job->args);
    } catch (const CollError& e) {
      job->error_code = e.code();
      job->error_message = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!job->error_code.empty()) failures_.emplace(job->id, std::make_pair(job->error_code, job->error_message));
      completed_ = job->id;
      in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    }
    idle_.notify_all();
    tsfn_.BlockingCall(job, [this](Napi::Env env, Napi::Function, Job* done) {
      std::unique_ptr<Job> owned(done);
      if (!owned->error_code.empty()) {
        std::lock_guard<std::mutex> lock(mutex_);
        failures_.erase(owned->id);
      }
      if (--pending_ == 0) tsfn_.Unref(env);
      // Settling fails only once the environment is being torn down (a job that ended at exit):
      // nobody waits for the Promise then, and an exception escaping this callback would end the
      // process (std::terminate).
      try {
        if (owned->error_code.empty())
          owned->deferred.Resolve(env.Undefined());
        else
          owned->deferred.Reject(ToJsError(env, owned->error_code, owned->error_message).Value());
      } catch (const std::exception&) {
      }
    });
  }
}

void JobQueue::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
}

void JobQueue::Join() {
  if (joined_) return;
  joined_ = true;
  if (thread_.joinable()) thread_.join();
  tsfn_.Release();
}

}  // namespace topocoll
