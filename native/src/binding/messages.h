// NativeMessages: a communicator's point-to-point messages (messages/message_streams.h) as
// JavaScript sees them — blocking forms on the calling thread, Promise forms settled through a
// thread-safe function, and the test/wait of requests. src/native.ts wraps it.
#pragma once

#include <napi.h>

#include "messages/message_streams.h"

namespace topocoll {

Napi::Function DefineNativeMessages(Napi::Env env);

// Gives the NativeMessages `messages` its communicator's node channels (before it starts).
void AttachMessagesNode(const Napi::Value& messages, MessageNode node);

}  // namespace topocoll
