#include "binding/messages.h"

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "binding/js_error.h"
#include "binding/js_values.h"
#include "messages/message_streams.h"

namespace topocoll {

namespace {

// Ops posted for a Promise (isend, irecv, send, recv), by id: the op, what keeps its buffer alive
// and the Promise to settle. JavaScript thread only.
struct Posted {
  MessageOpPtr op;
  Napi::Reference<Napi::Value> buffer;
  Napi::Promise::Deferred deferred;
};

class NativeMessages : public Napi::ObjectWrap<NativeMessages> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NativeMessages",
                       {
                           InstanceMethod("bind", &NativeMessages::Bind),
                           InstanceMethod("listen", &NativeMessages::Listen),
                           InstanceMethod("start", &NativeMessages::Start),
                           InstanceMethod("sendSync", &NativeMessages::SendSync),
                           InstanceMethod("recvSync", &NativeMessages::RecvSync),
                           InstanceMethod("post", &NativeMessages::Post),
                           InstanceMethod("test", &NativeMessages::Test),
                           InstanceMethod("wait", &NativeMessages::Wait),
                           InstanceMethod("close", &NativeMessages::Close),
                       });
  }

  explicit NativeMessages(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeMessages>(info) {
    Napi::Env env = info.Env();
    auto o = info[0].As<Napi::Object>();
    MessageStreams::Options options;
    options.rank = o.Get("rank").As<Napi::Number>().Int32Value();
    options.size = o.Get("size").As<Napi::Number>().Int32Value();
    options.timeout_ms = o.Get("timeoutMs").As<Napi::Number>().Int64Value();
    options.drive_us = o.Get("driveUs").As<Napi::Number>().Int64Value();
    // The environment's teardown may finalize the function before this object goes: the flag
    // says so, and nothing calls or releases it after that.
    auto finalized = finalized_;
    tsfn_ = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}), "topocoll-messages", 0, 1,
                                          [finalized](Napi::Env) { finalized->store(true); });
    tsfn_.Unref(env);
    options.on_complete = [this](const MessageOpPtr& op) {
      if (released_ || finalized_->load()) return;
      auto* id = new uint64_t(op->id);
      if (tsfn_.NonBlockingCall(id, [this](Napi::Env env, Napi::Function, uint64_t* id) {
            const uint64_t n = *id;
            delete id;
            Settle(env, n);
          }) != napi_ok) {
        delete id;
      }
    };
    try {
      streams_ = std::make_unique<MessageStreams>(std::move(options));
    } catch (const CollError& e) {
      ThrowJs(env, e.code(), e.what());
    }
  }

  void AttachNode(MessageNode node) { streams_->AttachNode(std::move(node)); }

  ~NativeMessages() override {
    if (streams_) streams_->Close();
    Release();
  }

  // After the streams closed (nothing calls on_complete from another thread any more): the
  // settlements already queued are still delivered, then the function is finalized.
  void Release() {
    if (released_ || finalized_->load()) return;
    released_ = true;
    tsfn_.Release();
  }

 private:
  template <typename F>
  auto Guarded(Napi::Env env, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const CollError& e) {
      ThrowJs(env, e.code(), e.what());
    }
  }

  // [source, tag, bytes] (and the message's bytes for a receive into a buffer of its own).
  static Napi::Value StatusOf(Napi::Env env, const MessageOp& op) {
    auto out = Napi::Array::New(env, op.allocate ? 4 : 3);
    out.Set(0u, Napi::Number::New(env, op.source));
    out.Set(1u, Napi::Number::New(env, op.status_tag));
    out.Set(2u, Napi::Number::New(env, static_cast<double>(op.length)));
    if (op.allocate) {
      auto bytes = Napi::ArrayBuffer::New(env, op.length);
      if (op.length > 0) std::memcpy(bytes.Data(), op.owned.get(), op.length);
      out.Set(3u, bytes);
    }
    return out;
  }

  static Napi::Value Outcome(Napi::Env env, const MessageOp& op) {
    if (!op.code.empty()) ThrowJs(env, op.code, op.message);
    return StatusOf(env, op);
  }

  static uint8_t* DataOf(const Napi::Value& v) { return static_cast<uint8_t*>(BytesOf(v)); }
  static uint64_t LengthOf(const Napi::Value& v) {
    if (v.IsTypedArray()) return v.As<Napi::TypedArray>().ByteLength();
    return 0;
  }

  Napi::Value Bind(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), Guarded(info.Env(), [&] { return streams_->Bind(); }));
  }

  Napi::Value Listen(const Napi::CallbackInfo& info) {
    Guarded(info.Env(), [&] { streams_->Listen(); });
    return info.Env().Undefined();
  }

  // start(token, hosts: string[], ports: number[])
  Napi::Value Start(const Napi::CallbackInfo& info) {
    const std::string token = info[0].As<Napi::String>();
    auto hosts = info[1].As<Napi::Array>();
    const std::vector<int> ports = IntList(info[2]);
    std::vector<TcpPeer> peers;
    for (uint32_t r = 0; r < hosts.Length(); ++r) peers.push_back({static_cast<int>(r), hosts.Get(r).As<Napi::String>(), ports[r]});
    streams_->Start(token, std::move(peers));
    return info.Env().Undefined();
  }

  // sendSync(buf, dest, tag)
  Napi::Value SendSync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto op = streams_->Send(info[1].As<Napi::Number>().Int32Value(), info[2].As<Napi::Number>().Int32Value(), DataOf(info[0]),
                             LengthOf(info[0]), 0);
    streams_->Wait(op);
    if (!op->code.empty()) ThrowJs(env, op->code, op->message);
    return env.Undefined();
  }

  // recvSync(buf | null, source, tag): a status (null buf: into a buffer as long as the message).
  Napi::Value RecvSync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const bool allocate = info[0].IsNull();
    auto op = streams_->Recv(info[1].As<Napi::Number>().Int32Value(), info[2].As<Napi::Number>().Int32Value(),
                             allocate ? nullptr : DataOf(info[0]), allocate ? 0 : LengthOf(info[0]), allocate, 0);
    streams_->Wait(op);
    return Outcome(env, *op);
  }

  // post(kind, buf | null, peer, tag) → [id, Promise of the status]; kind 0: send, 1: receive.
  Napi::Value Post(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const bool send = info[0].As<Napi::Number>().Int32Value() == 0;
    const Napi::Value buf = info[1];
    const int peer = info[2].As<Napi::Number>().Int32Value();
    const int32_t tag = info[3].As<Napi::Number>().Int32Value();
    const uint64_t id = ++last_id_;
    auto deferred = Napi::Promise::Deferred::New(env);
    // The op may end before Send/Recv return: its settlement is queued to this thread, which
    // finds the entry below.
    MessageOpPtr op;
    if (send) {
      op = streams_->Send(peer, tag, DataOf(buf), LengthOf(buf), id);
    } else {
      const bool allocate = buf.IsNull();
      op = streams_->Recv(peer, tag, allocate ? nullptr : DataOf(buf), allocate ? 0 : LengthOf(buf), allocate, id);
    }
    posted_.emplace(id, Posted{op, buf.IsObject() ? Napi::Persistent(buf) : Napi::Reference<Napi::Value>(), deferred});
    if (++pending_ == 1 && !released_ && !finalized_->load()) tsfn_.Ref(env);
    auto out = Napi::Array::New(env, 2);
    out.Set(0u, Napi::Number::New(env, static_cast<double>(id)));
    out.Set(1u, deferred.Promise());
    return out;
  }

  // test(id): false while the op runs, else its status (throws its error). Before its Promise settled.
  Napi::Value Test(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto it = posted_.find(static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value()));
    if (it == posted_.end()) ThrowJs(env, "EINVAL", "no such message request (it has settled)");
    if (!streams_->Done(it->second.op)) return Napi::Boolean::New(env, false);
    return Outcome(env, *it->second.op);
  }

  Napi::Value Wait(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    auto it = posted_.find(static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value()));
    if (it == posted_.end()) ThrowJs(env, "EINVAL", "no such message request (it has settled)");
    MessageOpPtr op = it->second.op;
    streams_->Wait(op);
    return Outcome(env, *op);
  }

  // close() → [[source, count], …]: the messages that arrived and no receive took.
  Napi::Value Close(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const auto unreceived = streams_->Close();
    Release();
    auto out = Napi::Array::New(env, unreceived.size());
    for (size_t i = 0; i < unreceived.size(); ++i) {
      auto pair = Napi::Array::New(env, 2);
      pair.Set(0u, Napi::Number::New(env, unreceived[i].first));
      pair.Set(1u, Napi::Number::New(env, static_cast<double>(unreceived[i].second)));
      out.Set(static_cast<uint32_t>(i), pair);
    }
    return out;
  }

  void Settle(Napi::Env env, uint64_t id) {
    auto it = posted_.find(id);
    if (it == posted_.end()) return;
    Posted entry = std::move(it->second);
    posted_.erase(it);
    const MessageOp& op = *entry.op;
    if (op.code.empty()) {
      entry.deferred.Resolve(StatusOf(env, op));
    } else {
      entry.deferred.Reject(ToJsError(env, op.code, op.message).Value());
    }
    if (--pending_ == 0 && !released_ && !finalized_->load()) tsfn_.Unref(env);
  }

  std::unique_ptr<MessageStreams> streams_;
  Napi::ThreadSafeFunction tsfn_;
  bool released_ = false;
  std::shared_ptr<std::atomic<bool>> finalized_ = std::make_shared<std::atomic<bool>>(false);
  std::map<uint64_t, Posted> posted_;
  uint64_t last_id_ = 0;
  int pending_ = 0;
};

}  // namespace

Napi::Function DefineNativeMessages(Napi::Env env) { return NativeMessages::Define(env); }

void AttachMessagesNode(const Napi::Value& messages, MessageNode node) {
  NativeMessages::Unwrap(messages.As<Napi::Object>())->AttachNode(std::move(node));
}

}  // namespace topocoll
