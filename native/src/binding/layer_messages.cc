#include "binding/layer_messages.h"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "binding/js_error.h"
#include "transport/p2p_links.h"

namespace topocoll {
namespace {

struct Message {
  std::shared_ptr<P2PLayer> layer;
  void* request = nullptr;
  // A send's copy, or a receive's buffer: the layer may use it until test() says done.
  std::vector<uint8_t> buffer;
  bool send = false;
  int peer = 0;
  int32_t tag = 0;
};

// Requests by id; the JavaScript thread is the only one that touches them.
std::unordered_map<uint32_t, Message>& Messages() {
  static std::unordered_map<uint32_t, Message> messages;
  return messages;
}
uint32_t next_id = 1;

std::shared_ptr<P2PLayer> LayerOf(const Napi::Value& value) {
  if (!value.IsExternal()) throw Napi::TypeError::New(value.Env(), "expected a layer handle from openP2PLayer");
  return *value.As<Napi::External<std::shared_ptr<P2PLayer>>>().Data();
}

[[noreturn]] void Failed(Napi::Env env, const Message& m, int code) {
  ThrowJs(env, "EPEERLOST",
          std::string("the point-to-point layer failed ") + (m.send ? "sending to" : "receiving from") + " rank " + std::to_string(m.peer) +
              " (tag " + std::to_string(m.tag) + "): " + m.layer->Describe(code));
}

Napi::Value Start(const Napi::CallbackInfo& info, bool send) {
  Napi::Env env = info.Env();
  Message m;
  m.layer = LayerOf(info[0]);
  m.send = send;
  m.peer = info[1].As<Napi::Number>().Int32Value();
  m.tag = info[2].As<Napi::Number>().Int32Value();
  int rc;
  if (send) {
    Napi::Uint8Array data = info[3].As<Napi::Uint8Array>();
    m.buffer.assign(data.Data(), data.Data() + data.ByteLength());
    rc = m.layer->Isend(m.peer, m.tag, m.buffer.data(), m.buffer.size(), &m.request);
  } else {
    m.buffer.resize(static_cast<size_t>(info[3].As<Napi::Number>().Int64Value()));
    rc = m.layer->Irecv(m.peer, m.tag, m.buffer.data(), m.buffer.size(), &m.request);
  }
  if (rc != 0) Failed(env, m, rc);
  const uint32_t id = next_id++;
  Messages().emplace(id, std::move(m));
  return Napi::Number::New(env, id);
}

Napi::Value LayerIsend(const Napi::CallbackInfo& info) { return Start(info, true); }
Napi::Value LayerIrecv(const Napi::CallbackInfo& info) { return Start(info, false); }

Napi::Value LayerTest(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto it = Messages().find(info[0].As<Napi::Number>().Uint32Value());
  if (it == Messages().end()) ThrowJs(env, "EINVAL", "no such layer message");
  bool done = false;
  size_t bytes = 0;
  const int rc = it->second.layer->Test(it->second.request, &done, &bytes);
  if (rc == 0 && !done) return env.Undefined();
  Message m = std::move(it->second);
  Messages().erase(it);
  if (rc != 0) Failed(env, m, rc);
  if (m.send) return Napi::Boolean::New(env, true);
  return Napi::Buffer<uint8_t>::Copy(env, m.buffer.data(), bytes);
}

void LayerAbandon(const Napi::CallbackInfo& info) {
  auto it = Messages().find(info[0].As<Napi::Number>().Uint32Value());
  if (it == Messages().end() || it->second.send) return;
  it->second.layer->Abandon(it->second.request);
  Messages().erase(it);
}

}  // namespace

void ExportLayerMessages(Napi::Env env, Napi::Object exports) {
  exports.Set("layerIsend", Napi::Function::New(env, LayerIsend));
  exports.Set("layerIrecv", Napi::Function::New(env, LayerIrecv));
  exports.Set("layerTest", Napi::Function::New(env, LayerTest));
  exports.Set("layerAbandon", Napi::Function::New(env, LayerAbandon));
}

}  // namespace topocoll
