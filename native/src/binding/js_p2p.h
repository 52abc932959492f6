// A topocoll_p2p_v1 whose operations run on the JavaScript thread: the bridge that lets the
// executor's threads send and receive through a JavaScript point-to-point layer
// (src/p2p/js-layer.ts wraps a user's PointToPoint in it).
//
// Protocol, per operation:
//   1. isend/irecv (an executor thread): registers a request under a new id (the handle is the
//      id), queues it, and asks the JavaScript thread (a thread-safe function) to hand the queue
//      to JavaScript: operate(kind, id, peer, tag, payload) — kind abi::JsP2POperation::kSend
//      with a copy of the bytes, kReceive with the capacity —, in the order they were started.
//   2. the JavaScript thread runs it: the layer's send/recv, and when that settles,
//      complete(id, error?, bytes?) copies a received message into the request's buffer (under
//      the lock, so never after abandon) and marks the request done or failed.
//   3. test (the executor thread) reports done/failed once and forgets the request.
// A collective may return before step 2 ran for its last sends (its completion reaches the
// JavaScript thread by another way): flush(operate), which the communicator's close() calls,
// hands the queue to JavaScript at once, and src/p2p/js-layer.ts keeps Node alive until those
// sends settle. Nothing else of the bridge keeps Node alive. A call into JavaScript that fails
// (the environment is being torn down at exit) fails its operation — never an exception out
// of the thread-safe function's callback, which would be std::terminate — and once the
// teardown finalized the function, nothing calls it any more (release() included).
// The JavaScript thread must be free for step 2: a blocking (Sync) collective would wait for it
// forever, so operations started on the JavaScript thread fail at once (TypeScript refuses such
// calls earlier, with EINVAL).
#pragma once

#include <napi.h>

namespace topocoll {

Napi::Function DefineJsPointToPoint(Napi::Env env);

}  // namespace topocoll
