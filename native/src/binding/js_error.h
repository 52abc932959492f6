// Errors reach JavaScript as Error objects with a `code` property (errors.h's codes);
// src/native.ts turns them into TopocollError.
#pragma once

#include <napi.h>

#include <string>

namespace topocoll {

inline Napi::Error ToJsError(Napi::Env env, const std::string& code, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  return error;
}

[[noreturn]] inline void ThrowJs(Napi::Env env, const std::string& code, const std::string& message) {
  throw ToJsError(env, code, message);
}

}  // namespace topocoll
