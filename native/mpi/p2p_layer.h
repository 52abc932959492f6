// topocoll_p2p_v1 (native/include/topocoll_p2p.h) over MPI: topocoll's messages between nodes
// travel as MPI messages on a private duplicate of an MPI communicator.
//
// PROTOCOL
//   - One layer = one MPI_Comm_dup of the communicator it was made for, with MPI_ERRORS_RETURN.
//     The duplicate is why topocoll's tags (tag_base … tag_base + 3071) cannot meet the
//     application's messages on the original communicator, nor any other library's.
//     MPI_Comm_dup is collective: every rank of the communicator creates its layer in the same
//     order (src/mpi.ts does it in initMpi, split and dup, which are collective anyway).
//   - isend/irecv start MPI_Isend/MPI_Irecv of MPI_BYTE on the duplicate and hand topocoll a
//     heap P2pRequest holding the MPI_Request. Sends are not copied: topocoll keeps their memory
//     until test() says done (the header's rule). test() is MPI_Test (it never blocks; MPI
//     progresses inside it); a completed request is freed by test() itself. A receive whose
//     message was longer than its capacity fails with MPI_ERR_TRUNCATE's text.
//   - A failed request is not freed by test(): it stays until abandon() or release(), because the
//     header does not say whether topocoll abandons a receive whose test failed; either way it is
//     freed exactly once.
//   - abandon() = MPI_Cancel + MPI_Wait of a receive: once it returns MPI writes nothing more
//     into topocoll's buffer. (A receive already matched to a message in transit cannot be
//     cancelled: the wait then lasts until that one message has arrived.)
//   - Ownership: a layer has two owners, topocoll and the JavaScript MpiCommunicator it belongs
//     to. topocoll may hold the struct from the moment JavaScript handed it out (the `native`
//     getter calls MarkP2pLayerHandedOut) until release(), whether or not it ever calls a
//     function (src/p2p/create-communicator.ts opens it at once; native/src/transport/p2p_links.h
//     calls release() only when its handle is collected and its engines closed). The JavaScript
//     owner lets go with DropP2pLayerOwner (MpiCommunicator.free(), or its collection). So:
//       release(): cleans up every request and clears `handed_out`; frees the layer (duplicate
//         and struct) if the JavaScript owner is gone, else keeps it for another
//         createCommunicator;
//       DropP2pLayerOwner: frees the layer at once if it was not handed out since the last
//         release() (topocoll cannot hold it then), else leaves that to release().
//     Each layer is thus freed exactly once, and never while topocoll may still call it. The
//     cost of being conservative: a layer handed out to code that never gives it to topocoll
//     lives until exit (MPI's finalisation frees its duplicate).
//   - The External that carries the struct to JavaScript has no finalizer: collecting it must not
//     free a struct topocoll may hold by its raw pointer.
//   - All functions hold an MpiCall; after MPI is finalized they fail with kErrFinalized and
//     make no MPI call. FinalizeP2pLayers (a Finalize cleanup) cancels every request and frees
//     every duplicate first, leaving the structs for topocoll's release().
//   - topocoll serialises its calls on one struct (the header's THREADS), so a layer's request
//     set needs no lock of its own; different layers are independent.
#pragma once

#include <mpi.h>

#include "topocoll_p2p.h"

namespace topocoll_mpi {

// A new layer over MPI_Comm_dup(comm) (collective over comm). tag_base + 2·1023 + 1 must not
// exceed the communicator's MPI_TAG_UB. Throws MpiError.
topocoll_p2p_v1* CreateP2pLayer(MPI_Comm comm, int32_t tag_base);

// The `native` getter hands the layer out: topocoll may hold it from now until release(). False
// if `pointer` is not a layer of this addon that the MpiCommunicator still owns.
bool MarkP2pLayerHandedOut(void* pointer);

// The MpiCommunicator lets go of its layer (see Ownership). False if `pointer` is not a layer of
// this addon that the MpiCommunicator still owns (an External from elsewhere, a second drop).
bool DropP2pLayerOwner(void* pointer);

// Finalize's cleanup (mpi_runtime.h): cancels every request of every layer and frees every
// duplicate; the structs stay for topocoll's release().
void FinalizeP2pLayers();

}  // namespace topocoll_mpi
