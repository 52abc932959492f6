// JavaScript's own messages over a native layer (a topocoll_p2p_v1 opened with openP2PLayer):
// what createCommunicator's setup sends and receives when the host gives only `native`.
//
// Protocol, per message (the JavaScript thread only):
//   1. layerIsend / layerIrecv: the layer's isend / irecv through its P2PLayer (so serialised
//      with the executors' calls into the same struct); a send's bytes are copied first (the
//      caller may reuse its array). The request is kept under a new id, returned.
//   2. layerTest(id), polled: undefined while pending; true (a send) or the received bytes (a
//      receive) once done, and the id is forgotten; a failed operation throws EPEERLOST with the
//      layer's describe() text (the id is forgotten too).
//   3. layerAbandon(id): a receive nobody waits for any more (the setup timed out) is abandoned
//      and forgotten. Sends are never abandoned (the header's rule): one still pending stays
//      here, with its copy, for the life of the process.
#pragma once

#include <napi.h>

namespace topocoll {

// Sets layerIsend, layerIrecv, layerTest and layerAbandon on `exports`.
void ExportLayerMessages(Napi::Env env, Napi::Object exports);

}  // namespace topocoll
