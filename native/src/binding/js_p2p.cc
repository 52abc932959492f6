#include "binding/js_p2p.h"

#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/abi_generated.h"
#include "topocoll_p2p.h"

namespace topocoll {

namespace {

// What operate() is asked to do (abi/abi.yaml; src/p2p/js-layer.ts reads it).
using abi::JsP2POperation;

// Codes the struct's functions return: one per failure, so describe() finds its text.
class Bridge {
 public:
  // A bridge whose operations go to `operate` on the JavaScript thread.
  static std::shared_ptr<Bridge> Create(Napi::Env env, Napi::Function operate, int32_t rank, int32_t size, int32_t tag_base) {
    auto bridge = std::make_shared<Bridge>(rank, size, tag_base);
    // The finalizer holds the bridge: a dispatch (which gets it as a plain pointer) never
    // outlives it. It runs once the function is released, or when the environment is torn down
    // (at exit): from then on nothing may call the function.
    bridge->tsfn_ = Napi::ThreadSafeFunction::New(
        env, operate, "topocoll point-to-point", 0, 1,
        [](Napi::Env, std::shared_ptr<Bridge>* held) {
          (*held)->FunctionGone();
          delete held;
        },
        new std::shared_ptr<Bridge>(bridge));
    // Nothing keeps Node alive for the operations queued here: a pending collective's Promise
    // does, and after a collective returned, the communicator's close() hands its sends to the
    // layer (Flush) and keeps Node alive until they settle (src/p2p/js-layer.ts).
    bridge->tsfn_.Unref(env);
    return bridge;
  }

  Bridge(int32_t rank, int32_t size, int32_t tag_base) : js_thread_(std::this_thread::get_id()) {
    p2p_.version = TOPOCOLL_P2P_VERSION;
    p2p_.struct_size = sizeof(topocoll_p2p_v1);
    p2p_.rank = rank;
    p2p_.size = size;
    p2p_.tag_base = tag_base;
    p2p_.isend = [](void* c, int32_t peer, int32_t tag, const void* data, size_t bytes, void** request) {
      return Of(c).Start(JsP2POperation::kSend, peer, tag, const_cast<void*>(data), bytes, request);
    };
    p2p_.irecv = [](void* c, int32_t peer, int32_t tag, void* buffer, size_t capacity, void** request) {
      return Of(c).Start(JsP2POperation::kReceive, peer, tag, buffer, capacity, request);
    };
    p2p_.test = [](void* c, void* request, int* done, size_t* bytes) { return Of(c).Test(request, done, bytes); };
    p2p_.abandon = [](void* c, void* request) { Of(c).Abandon(request); };
    p2p_.describe = [](void* c, int code) { return Of(c).Describe(code); };
    p2p_.release = [](void* c) {
      auto* holder = static_cast<std::shared_ptr<Bridge>*>(c);
      (*holder)->ReleaseFunction();
      delete holder;
    };
  }

  // The struct; its context holds a reference to this bridge until release().
  topocoll_p2p_v1* Struct(const std::shared_ptr<Bridge>& self) {
    if (p2p_.context == nullptr) p2p_.context = new std::shared_ptr<Bridge>(self);
    return &p2p_;
  }

  // The JavaScript thread: calls `operate` for every operation started and not handed to it yet,
  // in the order they were started (so one peer's messages on one tag stay in order). A call
  // into JavaScript that fails — the environment is being torn down, at exit — fails its
  // operation instead of throwing: this runs in the thread-safe function's callback, where a
  // C++ exception would end the process (std::terminate).
  void Dispatch(Napi::Env env, Napi::Function operate) {
    for (;;) {
      uint64_t id = 0;
      JsP2POperation kind{};
      int32_t peer = 0;
      int32_t tag = 0;
      Napi::Value payload;
      try {
        std::lock_guard<std::mutex> lock(mutex_);
        if (undispatched_.empty()) return;
        id = undispatched_.front();
        undispatched_.pop_front();
        auto it = requests_.find(id);
        if (it == requests_.end()) continue;  // abandoned before it started
        const Request& r = it->second;
        kind = r.kind;
        peer = r.peer;
        tag = r.tag;
        payload = kind == JsP2POperation::kSend
                      ? Napi::Value(Napi::Buffer<uint8_t>::Copy(env, static_cast<const uint8_t*>(r.buffer), r.capacity))
                      : Napi::Value(Napi::Number::New(env, static_cast<double>(r.capacity)));
      } catch (const std::exception& e) {
        FailLate(id, e.what());
        continue;
      }
      try {
        // The JavaScript side catches what the layer throws and reports it through complete().
        operate.Call({Napi::Number::New(env, static_cast<int32_t>(kind)), Napi::Number::New(env, static_cast<double>(id)),
                      Napi::Number::New(env, peer), Napi::Number::New(env, tag), payload});
      } catch (const std::exception& e) {
        FailLate(id, e.what());
      }
    }
  }

  // From JavaScript: the layer's send or recv of request `id` settled.
  void Complete(uint64_t id, const std::string* error, const uint8_t* data, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = requests_.find(id);
    if (it == requests_.end()) return;  // abandoned
    Request& r = it->second;
    if (r.state != State::kPending) return;
    if (error != nullptr) {
      Fail(r, *error);
    } else if (r.kind == JsP2POperation::kReceive && bytes > r.capacity) {
      Fail(r, "a message of " + std::to_string(bytes) + " bytes arrived from rank " + std::to_string(r.peer) + " where at most " +
                  std::to_string(r.capacity) + " were expected");
    } else {
      if (r.kind == JsP2POperation::kReceive && bytes > 0) std::memcpy(r.buffer, data, bytes);
      r.bytes = r.kind == JsP2POperation::kReceive ? bytes : r.capacity;
      r.state = State::kDone;
    }
  }

 private:
  enum class State { kPending, kDone, kFailed };
  struct Request {
    JsP2POperation kind;
    int32_t peer;
    int32_t tag;
    void* buffer;
    size_t capacity;
    State state = State::kPending;
    size_t bytes = 0;
    int code = 0;
  };

  static Bridge& Of(void* context) { return **static_cast<std::shared_ptr<Bridge>*>(context); }

  int Start(JsP2POperation kind, int32_t peer, int32_t tag, void* buffer, size_t capacity, void** request) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::this_thread::get_id() == js_thread_) {
      return Error(
          "a blocking (Sync) collective cannot send or receive through a JavaScript point-to-point layer: the layer runs on the "
          "JavaScript thread, which the call blocks; use the Promise form");
    }
    if (function_gone_ || released_) return Error("the JavaScript environment is shutting down");
    const uint64_t id = next_id_++;
    requests_.emplace(id, Request{kind, peer, tag, buffer, capacity});
    undispatched_.push_back(id);
    Bridge* self = this;
    if (tsfn_.NonBlockingCall(self, [](Napi::Env env, Napi::Function operate, Bridge* b) { b->Dispatch(env, operate); }) != napi_ok) {
      undispatched_.pop_back();
      requests_.erase(id);
      return Error("the JavaScript environment is shutting down");
    }
    *request = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
    return 0;
  }

  int Test(void* request, int* done, size_t* bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = requests_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(request)));
    if (it == requests_.end()) return Error("an unknown request");
    const Request r = it->second;
    *done = r.state == State::kPending ? 0 : 1;
    *bytes = r.bytes;
    if (r.state != State::kPending) requests_.erase(it);
    return r.state == State::kFailed ? r.code : 0;
  }

  void Abandon(void* request) {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.erase(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(request)));
  }

  const char* Describe(int code) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = errors_.find(code);
    return it == errors_.end() ? "an error the bridge no longer remembers" : it->second.c_str();
  }

  // The struct's release(): topocoll is done with the bridge. The function is released unless
  // the environment's teardown finalized it already (then it is gone: calling it would touch
  // freed memory).
  void ReleaseFunction() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (released_) return;
    released_ = true;
    if (!function_gone_) tsfn_.Release();
  }

  // The function's finalizer (the JavaScript thread).
  void FunctionGone() {
    std::lock_guard<std::mutex> lock(mutex_);
    function_gone_ = true;
  }

  // An operation JavaScript could not be handed (see Dispatch).
  void FailLate(uint64_t id, const char* what) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.state != State::kPending) return;
    Fail(it->second, std::string("the JavaScript layer could not be called (is the process exiting?): ") + what);
  }

  // Under mutex_.
  void Fail(Request& r, const std::string& text) {
    r.state = State::kFailed;
    r.code = Error(text);
  }
  int Error(const std::string& text) {
    const int code = next_code_++;
    errors_[code] = text;
    // Texts are read right after the failure; the last few are enough.
    while (errors_.size() > 64) errors_.erase(errors_.begin());
    return code;
  }

  std::thread::id js_thread_;
  Napi::ThreadSafeFunction tsfn_;
  topocoll_p2p_v1 p2p_{};
  std::mutex mutex_;
  std::unordered_map<uint64_t, Request> requests_;
  // Operations started and not handed to JavaScript yet, in order.
  std::deque<uint64_t> undispatched_;
  // The struct was released; the environment's teardown finalized the function.
  bool released_ = false;
  bool function_gone_ = false;
  uint64_t next_id_ = 1;
  std::map<int, std::string> errors_;
  int next_code_ = 1;
};

// new JsPointToPoint(rank, size, tagBase, operate) — native() gives the struct as an External;
// complete(id, error?: string, bytes?: Uint8Array) settles an operation; flush(operate) hands
// the operations still queued to `operate` at once (the communicator's close()).
class JsPointToPoint : public Napi::ObjectWrap<JsPointToPoint> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "JsPointToPoint",
                       {InstanceMethod("native", &JsPointToPoint::Native), InstanceMethod("complete", &JsPointToPoint::Complete),
                        InstanceMethod("flush", &JsPointToPoint::Flush)});
  }

  explicit JsPointToPoint(const Napi::CallbackInfo& info) : Napi::ObjectWrap<JsPointToPoint>(info) {
    bridge_ = Bridge::Create(info.Env(), info[3].As<Napi::Function>(), info[0].As<Napi::Number>().Int32Value(),
                             info[1].As<Napi::Number>().Int32Value(), info[2].As<Napi::Number>().Int32Value());
  }

 private:
  Napi::Value Native(const Napi::CallbackInfo& info) {
    // The struct lives as long as the bridge; topocoll ends its use with release().
    return Napi::External<topocoll_p2p_v1>::New(info.Env(), bridge_->Struct(bridge_));
  }

  // flush(operate): hands every operation not handed to JavaScript yet to `operate` now.
  void Flush(const Napi::CallbackInfo& info) { bridge_->Dispatch(info.Env(), info[0].As<Napi::Function>()); }

  void Complete(const Napi::CallbackInfo& info) {
    const auto id = static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value());
    if (info.Length() > 1 && info[1].IsString()) {
      const std::string error = info[1].As<Napi::String>();
      bridge_->Complete(id, &error, nullptr, 0);
      return;
    }
    if (info.Length() > 2 && info[2].IsTypedArray()) {
      auto bytes = info[2].As<Napi::Uint8Array>();
      bridge_->Complete(id, nullptr, bytes.Data(), bytes.ByteLength());
      return;
    }
    bridge_->Complete(id, nullptr, nullptr, 0);
  }

  std::shared_ptr<Bridge> bridge_;
};

}  // namespace

Napi::Function DefineJsPointToPoint(Napi::Env env) { return JsPointToPoint::Define(env); }

}  // namespace topocoll
