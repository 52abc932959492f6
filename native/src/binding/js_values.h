// JavaScript values as the native code takes them, shared by the addon's Node-API files
// (addon.cc, probes.cc). JavaScript thread only, like every Napi value.
#pragma once

#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace topocoll {

// Raw bytes of a TypedArray / DataView / Buffer, or nullptr for null/undefined. Valid while the
// value's ArrayBuffer is neither collected nor detached.
inline void* BytesOf(const Napi::Value& value) {
  if (value.IsNull() || value.IsUndefined()) return nullptr;
  if (value.IsTypedArray()) {
    auto ta = value.As<Napi::TypedArray>();
    return static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
  }
  if (value.IsDataView()) {
    auto dv = value.As<Napi::DataView>();
    return static_cast<uint8_t*>(dv.ArrayBuffer().Data()) + dv.ByteOffset();
  }
  throw Napi::TypeError::New(value.Env(), "expected a TypedArray, DataView or null");
}

// The integers of an Int32Array or of an array of numbers.
inline std::vector<int> IntList(const Napi::Value& value) {
  std::vector<int> out;
  if (value.IsTypedArray()) {
    auto ta = value.As<Napi::Int32Array>();
    for (size_t i = 0; i < ta.ElementLength(); ++i) out.push_back(ta[i]);
    return out;
  }
  auto arr = value.As<Napi::Array>();
  for (uint32_t i = 0; i < arr.Length(); ++i) out.push_back(arr.Get(i).As<Napi::Number>().Int32Value());
  return out;
}

// A new Int32Array holding `values`.
inline Napi::Int32Array ToInt32Array(Napi::Env env, const std::vector<int32_t>& values) {
  auto out = Napi::Int32Array::New(env, values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return out;
}

}  // namespace topocoll
