// NativeMessages: a communicator's point-to-point messages (transport/message_streams.h) as
// JavaScript sees them — blocking forms on the calling thread, Promise forms settled through a
// thread-safe function, and the test/wait of requests. src/native.ts wraps it.
#pragma once

#include <napi.h>

namespace topocoll {

Napi::Function DefineNativeMessages(Napi::Env env);

}  // namespace topocoll
