/*
 * topocoll_p2p.h — the native point-to-point interface a host messaging layer hands to topocoll
 * (createCommunicator(p2p) with p2p.native an External of a topocoll_p2p_v1), so that topocoll's
 * messages between nodes travel over the host's layer (MPI, a fabric library, …) instead of
 * topocoll's own TCP links. Ranks of one node still talk through topocoll's shared memory.
 *
 * C, no dependencies: a host written in C or C++ includes this header only.
 *
 * WHAT TOPOCOLL NEEDS
 *   Reliable messages between any two ranks 0 … size−1. Two messages from one sender to one
 *   receiver with the same tag are received in the order they were sent (MPI's non-overtaking
 *   rule). No wildcards (every receive names its source and tag), no probe, no cancellation of
 *   sends. A receive's capacity is an upper bound: the message may be shorter (then *bytes of
 *   test() says how long it was); a message longer than the capacity is an error of the receive.
 *
 * TAGS
 *   topocoll uses the tags tag_base … tag_base + TOPOCOLL_P2P_TAGS − 1 of the layer:
 *   communicator k created over this struct (k = 0 for the first, then one more per
 *   createCommunicator) uses tag_base + 2k for its collectives (one ordered stream per pair of
 *   ranks: every message carries the call's sequence number and arguments, so ranks in
 *   different calls get EMISMATCH rather than waiting on each other) and tag_base + 2k + 1
 *   while it is being set up; sub-communicator j of those (split, dup; set up over their parent)
 *   uses tag_base + 2·TOPOCOLL_P2P_MAX_COMMUNICATORS + j. A host that sends its own messages
 *   through the same layer must leave these tags to topocoll (or give topocoll a duplicate of its
 *   communicator, as the MPI addon does). Tags fit in 31 bits.
 *
 * REQUESTS AND OWNERSHIP
 *   isend/irecv start an operation and store an opaque handle in *request. The memory they were
 *   given belongs to the operation until test() reports it done (*done = 1): topocoll does not
 *   touch or free it before then. After test() reported done, or failed (returned non-zero: the
 *   operation is over, whatever *done says), the handle is never used again and the layer frees
 *   what it holds.
 *   abandon() is called only for receives topocoll will not wait for any more (after an abort,
 *   at close): once it returns, the layer must never write the receive's buffer (cancel it, or
 *   receive into memory of its own and drop the message) and frees the handle itself. It may
 *   wait for a message already in transit to land (MPI_Cancel + MPI_Wait), never for a peer.
 *   Sends are never abandoned: topocoll keeps a send's memory until test() reports it done. The
 *   copies of sends still not done when topocoll calls release() are never freed (a send to a
 *   rank that died may never complete, and a layer like MPI cannot cancel a send).
 *
 * THREADS
 *   topocoll calls the functions from its own threads (the thread of a blocking collective, the
 *   progress thread of Promise collectives, its watcher when it aborts), but never two at a time
 *   for one struct: it serialises the calls it makes. If the host uses the same layer from its own
 *   threads at the same time, the layer must be safe for that (MPI: MPI_THREAD_MULTIPLE).
 *   The functions must not block: test() reports progress, and topocoll calls it repeatedly
 *   while it waits (a layer like MPI that progresses only inside its calls progresses there).
 *
 * ERRORS
 *   A function returns 0 on success, anything else on failure; describe(context, code) gives a
 *   text for that code (static or owned by the context, valid until the next call). A failed
 *   operation fails the collective with EPEERLOST on this rank (an error naming the peer and the
 *   tag), and topocoll aborts the communicator.
 *
 * LIFETIME
 *   The struct and its context must stay valid until release (may be NULL) is called: topocoll
 *   calls it once it no longer uses the struct — the last communicator over it closed and the
 *   JavaScript object it came with was collected. Handing the same struct over again after that
 *   (a new createCommunicator) opens it anew, so a layer that allows it keeps the struct valid.
 *   describe() gets only a code: a layer that wants its texts to name the failed operation
 *   returns a distinct code per failure.
 */
#ifndef TOPOCOLL_P2P_H
#define TOPOCOLL_P2P_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TOPOCOLL_P2P_VERSION 1
#define TOPOCOLL_P2P_MAX_COMMUNICATORS 1024
/* Sub-communicators (split, dup) a layer carries at most. */
#define TOPOCOLL_P2P_MAX_SUB_COMMUNICATORS 1024
/* How many tags from tag_base on topocoll uses. */
#define TOPOCOLL_P2P_TAGS (2 * TOPOCOLL_P2P_MAX_COMMUNICATORS + TOPOCOLL_P2P_MAX_SUB_COMMUNICATORS)

typedef struct topocoll_p2p_v1 {
  /* TOPOCOLL_P2P_VERSION, and sizeof(topocoll_p2p_v1): topocoll refuses a struct it does not know. */
  uint32_t version;
  uint32_t struct_size;
  /* This process's rank and the number of ranks, as the layer numbers them. */
  int32_t rank;
  int32_t size;
  /* The first tag topocoll may use (see TAGS); 0 … 2^31 − TOPOCOLL_P2P_TAGS. */
  int32_t tag_base;
  int32_t reserved;
  /* Passed back to every function. */
  void* context;

  int (*isend)(void* context, int32_t peer, int32_t tag, const void* data, size_t bytes, void** request);
  int (*irecv)(void* context, int32_t peer, int32_t tag, void* buffer, size_t capacity, void** request);
  /* *done = 1 once the operation is complete (then *bytes: the length received; sends: sent). */
  int (*test)(void* context, void* request, int* done, size_t* bytes);
  void (*abandon)(void* context, void* request);
  const char* (*describe)(void* context, int code);
  void (*release)(void* context);
} topocoll_p2p_v1;

#ifdef __cplusplus
}
#endif

#endif /* TOPOCOLL_P2P_H */
