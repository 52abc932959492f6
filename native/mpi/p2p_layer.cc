// See p2p_layer.h for the protocol.
#include "p2p_layer.h"

#include <climits>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>

#include "mpi_runtime.h"

namespace topocoll_mpi {

namespace {

// How long release() lets sends still in flight finish before it gives up on them. A send that
// is still pending when topocoll releases the struct belongs to a collective that failed; its
// receiver will most likely never receive it, so this is short.
constexpr long kReleaseSendGraceNs = 200L * 1000 * 1000;

struct P2pRequest {
  MPI_Request mpi = MPI_REQUEST_NULL;
  bool is_recv = false;
  int32_t peer = 0;
  int32_t tag = 0;
  // A send's length; a receive's capacity.
  size_t bytes = 0;
  // Nonzero once test() failed; the request then waits for abandon() or release().
  int error = 0;
  std::string error_text;
};

struct P2pLayer {
  topocoll_p2p_v1 api{};  // api.context == this
  MPI_Comm comm = MPI_COMM_NULL;
  // Every request handed to topocoll and not yet completed by test(), abandoned or cleaned up
  // by release(). Touched only by topocoll's (serialised) calls and under Finalize's exclusive
  // hold, so it needs no lock.
  std::unordered_set<P2pRequest*> live;
  // describe()'s text: the last failure's, or the one describe() made.
  int last_code = 0;
  std::string last_text;
  std::string describe_text;
  // MPI was finalized under the layer (FinalizeP2pLayers): comm is gone, functions fail.
  bool dead = false;
  // Ownership (p2p_layer.h): `handed_out` from MarkP2pLayerHandedOut until release();
  // `js_owned` until DropP2pLayerOwner. The decision to free is made under `owner`.
  std::mutex owner;
  bool handed_out = false;
  bool js_owned = true;
};

// Every layer not yet freed. Lock order: MpiCall → registry → P2pLayer::owner.
std::mutex registry_mutex;
std::unordered_set<P2pLayer*> registry;

P2pLayer* LayerOf(void* context) { return static_cast<P2pLayer*>(context); }

int Fail(P2pLayer* layer, int code, std::string text) {
  layer->last_code = code;
  layer->last_text = std::move(text);
  return code;
}

std::string Describe(const P2pRequest* r, const std::string& what) {
  return std::string(r->is_recv ? "receive from rank " : "send to rank ") + std::to_string(r->peer) + " with tag " +
         std::to_string(r->tag) + ": " + what;
}

long ElapsedNs(const timespec& since) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - since.tv_sec) * 1000000000L + (now.tv_nsec - since.tv_nsec);
}

// Makes MPI let go of a receive's buffer: once this returns MPI writes nothing more into it.
void CancelReceive(P2pRequest* r) {
  if (r->mpi == MPI_REQUEST_NULL) return;
  MPI_Cancel(&r->mpi);
  MPI_Wait(&r->mpi, MPI_STATUS_IGNORE);  // errors ignored: the receive is being given up
  r->mpi = MPI_REQUEST_NULL;
}

// Cleans up every request of a layer (release(), or a drop that frees the layer): receives are
// cancelled; sends get a short grace to finish (MPI_Cancel of a send is a no-op in Open MPI),
// then are left to MPI with MPI_Request_free: topocoll never frees the memory of a send not
// reported done (topocoll_p2p.h), so MPI may still read it if its receiver ever matches it.
void CleanRequests(P2pLayer* layer, bool mpi_alive) {
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (P2pRequest* r : layer->live) {
    if (mpi_alive && r->mpi != MPI_REQUEST_NULL) {
      if (r->is_recv) {
        CancelReceive(r);
      } else {
        MPI_Cancel(&r->mpi);
        int done = 0;
        while (r->mpi != MPI_REQUEST_NULL && !done && ElapsedNs(start) < kReleaseSendGraceNs) {
          if (MPI_Test(&r->mpi, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        }
        if (r->mpi != MPI_REQUEST_NULL && !done) MPI_Request_free(&r->mpi);
      }
    }
    delete r;
  }
  layer->live.clear();
}

// Frees the layer's duplicate and the layer itself. The caller holds an MpiCall (mpi_alive:
// its ok()) and has taken the layer out of the registry, so no one else can reach it.
void FreeLayer(P2pLayer* layer, bool mpi_alive) {
  CleanRequests(layer, mpi_alive);
  if (mpi_alive && !layer->dead && layer->comm != MPI_COMM_NULL) MPI_Comm_free(&layer->comm);
  delete layer;
}

void Unregister(P2pLayer* layer) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry.erase(layer);
}

P2pRequest* NewRequest(bool is_recv, int32_t peer, int32_t tag, size_t bytes) {
  auto* r = new (std::nothrow) P2pRequest();
  if (r == nullptr) return nullptr;
  r->is_recv = is_recv;
  r->peer = peer;
  r->tag = tag;
  r->bytes = bytes;
  return r;
}

// The checks isend and irecv share: MPI alive, a peer inside the communicator, a count MPI's
// int can carry.
int CheckStart(P2pLayer* layer, const MpiCall& call, int32_t peer, size_t bytes) {
  if (!call.ok() || layer->dead) return Fail(layer, kErrFinalized, "MPI has been finalized");
  if (peer < 0 || peer >= layer->api.size)
    return Fail(layer, kErrArgument,
                "rank " + std::to_string(peer) + " is outside the MPI communicator of " + std::to_string(layer->api.size));
  if (bytes > static_cast<size_t>(INT_MAX))
    return Fail(layer, kErrArgument, std::to_string(bytes) + " bytes in one message: MPI counts are int (at most 2^31 - 1 bytes)");
  return 0;
}

// Registers a started request. The insert may throw; then the MPI request is already running,
// so it is undone the way release() would.
int Track(P2pLayer* layer, P2pRequest* r, void** request) {
  try {
    layer->live.insert(r);
  } catch (...) {
    if (r->is_recv) {
      CancelReceive(r);
    } else if (r->mpi != MPI_REQUEST_NULL) {
      MPI_Wait(&r->mpi, MPI_STATUS_IGNORE);  // a send's memory stays topocoll's until it is done
    }
    delete r;
    return Fail(layer, kErrNoMemory, "out of memory");
  }
  *request = r;
  return 0;
}

}  // namespace

}  // namespace topocoll_mpi

// The functions of the struct: C linkage, as the header's function pointer types have; no C++
// exception leaves them.
extern "C" {

static int TopocollMpiIsend(void* context, int32_t peer, int32_t tag, const void* data, size_t bytes, void** request) {
  using namespace topocoll_mpi;
  P2pLayer* layer = LayerOf(context);
  try {
    MpiCall call;
    if (int rc = CheckStart(layer, call, peer, bytes)) return rc;
    P2pRequest* r = NewRequest(false, peer, tag, bytes);
    if (r == nullptr) return Fail(layer, kErrNoMemory, "out of memory");
    int rc = MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, tag, layer->comm, &r->mpi);
    if (rc != MPI_SUCCESS) {
      std::string text = Describe(r, "MPI_Isend: " + ErrorText(rc));
      delete r;
      return Fail(layer, rc, std::move(text));
    }
    return Track(layer, r, request);
  } catch (...) {
    return Fail(layer, kErrInternal, "internal error of topocoll/mpi in isend");
  }
}

static int TopocollMpiIrecv(void* context, int32_t peer, int32_t tag, void* buffer, size_t capacity, void** request) {
  using namespace topocoll_mpi;
  P2pLayer* layer = LayerOf(context);
  try {
    MpiCall call;
    if (int rc = CheckStart(layer, call, peer, capacity)) return rc;
    P2pRequest* r = NewRequest(true, peer, tag, capacity);
    if (r == nullptr) return Fail(layer, kErrNoMemory, "out of memory");
    int rc = MPI_Irecv(buffer, static_cast<int>(capacity), MPI_BYTE, peer, tag, layer->comm, &r->mpi);
    if (rc != MPI_SUCCESS) {
      std::string text = Describe(r, "MPI_Irecv: " + ErrorText(rc));
      delete r;
      return Fail(layer, rc, std::move(text));
    }
    return Track(layer, r, request);
  } catch (...) {
    return Fail(layer, kErrInternal, "internal error of topocoll/mpi in irecv");
  }
}

static int TopocollMpiTest(void* context, void* request, int* done, size_t* bytes) {
  using namespace topocoll_mpi;
  P2pLayer* layer = LayerOf(context);
  auto* r = static_cast<P2pRequest*>(request);
  *done = 0;
  *bytes = 0;
  try {
    MpiCall call;
    if (r->error != 0) return Fail(layer, r->error, r->error_text);
    if (!call.ok() || layer->dead) return Fail(layer, kErrFinalized, Describe(r, "MPI has been finalized"));
    MPI_Status status;
    int flag = 0;
    int rc = MPI_Test(&r->mpi, &flag, &status);
    if (rc != MPI_SUCCESS) {
      // Open MPI frees a request that completed with an error and sets it to MPI_REQUEST_NULL;
      // one that did not complete stays for abandon() or release() (CancelReceive).
      r->error = rc;
      if (ErrorClass(rc) == MPI_ERR_TRUNCATE) {
        r->error_text = Describe(
            r, "the message is longer than the receive's capacity of " + std::to_string(r->bytes) + " bytes (" + ErrorText(rc) + ")");
      } else {
        r->error_text = Describe(r, "MPI_Test: " + ErrorText(rc));
      }
      return Fail(layer, rc, r->error_text);
    }
    if (!flag) return 0;
    size_t length = r->bytes;
    if (r->is_recv) {
      int count = 0;
      if (MPI_Get_count(&status, MPI_BYTE, &count) != MPI_SUCCESS || count == MPI_UNDEFINED || count < 0) {
        r->error = kErrInternal;
        r->error_text = Describe(r, "MPI_Get_count gave no byte count for a completed receive");
        return Fail(layer, r->error, r->error_text);
      }
      length = static_cast<size_t>(count);
    }
    layer->live.erase(r);
    delete r;
    *done = 1;
    *bytes = length;
    return 0;
  } catch (...) {
    return Fail(layer, kErrInternal, "internal error of topocoll/mpi in test");
  }
}

static void TopocollMpiAbandon(void* context, void* request) {
  using namespace topocoll_mpi;
  P2pLayer* layer = LayerOf(context);
  auto* r = static_cast<P2pRequest*>(request);
  try {
    MpiCall call;
    layer->live.erase(r);
    if (call.ok() && !layer->dead && r->mpi != MPI_REQUEST_NULL) {
      if (r->is_recv) {
        CancelReceive(r);
      } else {
        // The header says sends are never abandoned; should one be, MPI finishes it alone.
        MPI_Request_free(&r->mpi);
      }
    }
  } catch (...) {
    // Nothing to report through a void function; the request is freed below either way.
  }
  delete r;
}

static const char* TopocollMpiDescribe(void* context, int code) {
  using namespace topocoll_mpi;
  P2pLayer* layer = LayerOf(context);
  try {
    if (code == layer->last_code && !layer->last_text.empty()) return layer->last_text.c_str();
    MpiCall call;  // MPI_Error_string is an MPI call like any other (thread levels)
    layer->describe_text = ErrorText(code);
    return layer->describe_text.c_str();
  } catch (...) {
    return "topocoll/mpi: error (no description)";
  }
}

static void TopocollMpiRelease(void* context) {
  using namespace topocoll_mpi;
  P2pLayer* layer = LayerOf(context);
  try {
    MpiCall call;
    bool alive = call.ok() && !layer->dead;
    CleanRequests(layer, alive);
    bool free_now;
    {
      std::lock_guard<std::mutex> lock(layer->owner);
      layer->handed_out = false;
      free_now = !layer->js_owned;
    }
    // While the MpiCommunicator owns the layer it stays, for a later createCommunicator; after
    // the unlock above only DropP2pLayerOwner may touch it, and it frees it.
    if (free_now) {
      Unregister(layer);
      FreeLayer(layer, alive);
    }
  } catch (...) {
    // Only allocation in CleanRequests' message could throw; the layer leaks then.
  }
}

}  // extern "C"

namespace topocoll_mpi {

topocoll_p2p_v1* CreateP2pLayer(MPI_Comm comm, int32_t tag_base) {
  MpiCall call;
  if (!call.ok()) throw MpiError(kErrFinalized, "MPI has been finalized");
  // topocoll calls the struct from its own threads, one call at a time (the header's THREADS):
  // MPI must allow calls from any thread, at least serialised (MpiCall then serialises them).
  if (Level() < kThreadSerialized) {
    throw MpiError(kErrArgument,
                   "MPI was initialised with less than MPI_THREAD_SERIALIZED; topocoll's native layer calls MPI from its own threads");
  }
  MPI_Comm dup = MPI_COMM_NULL;
  Check(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup");
  // From here on `dup` exists on every rank; a failure below frees it again (locally).
  auto fail = [&](int rc, const std::string& text) {
    MPI_Comm_free(&dup);
    throw MpiError(rc, text);
  };
  int rc = MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) fail(rc, "MPI_Comm_set_errhandler: " + ErrorText(rc));
  int rank = 0, size = 0, flag = 0;
  int* tag_ub = nullptr;
  if ((rc = MPI_Comm_rank(dup, &rank)) != MPI_SUCCESS || (rc = MPI_Comm_size(dup, &size)) != MPI_SUCCESS ||
      (rc = MPI_Comm_get_attr(dup, MPI_TAG_UB, &tag_ub, &flag)) != MPI_SUCCESS) {
    fail(rc, "MPI communicator query: " + ErrorText(rc));
  }
  // The highest tag topocoll uses is tag_base + TOPOCOLL_P2P_TAGS − 1.
  const long long highest = static_cast<long long>(tag_base) + TOPOCOLL_P2P_TAGS - 1;
  const long long upper = flag && tag_ub != nullptr ? *tag_ub : 32767;  // 32767: the least MPI_TAG_UB MPI allows
  if (tag_base < 0 || highest > upper) {
    fail(kErrArgument, "tagBase " + std::to_string(tag_base) + ": topocoll needs the tags tagBase … tagBase + " +
                           std::to_string(TOPOCOLL_P2P_TAGS - 1) + ", and this MPI's MPI_TAG_UB is " + std::to_string(upper));
  }
  auto* layer = new (std::nothrow) P2pLayer();
  if (layer == nullptr) fail(kErrNoMemory, "out of memory");
  layer->comm = dup;
  topocoll_p2p_v1& api = layer->api;
  api.version = TOPOCOLL_P2P_VERSION;
  api.struct_size = sizeof(topocoll_p2p_v1);
  api.rank = rank;
  api.size = size;
  api.tag_base = tag_base;
  api.reserved = 0;
  api.context = layer;
  api.isend = TopocollMpiIsend;
  api.irecv = TopocollMpiIrecv;
  api.test = TopocollMpiTest;
  api.abandon = TopocollMpiAbandon;
  api.describe = TopocollMpiDescribe;
  api.release = TopocollMpiRelease;
  try {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry.insert(layer);
  } catch (...) {
    delete layer;
    fail(kErrNoMemory, "out of memory");
  }
  return &layer->api;
}

namespace {

// The registered layer whose struct is at `pointer`, or nullptr. Under registry_mutex; the
// registry is searched rather than `pointer` dereferenced, since it comes from JavaScript.
P2pLayer* FindLocked(void* pointer) {
  for (P2pLayer* l : registry) {
    if (&l->api == pointer) return l;
  }
  return nullptr;
}

}  // namespace

bool MarkP2pLayerHandedOut(void* pointer) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  P2pLayer* layer = FindLocked(pointer);
  if (layer == nullptr) return false;
  std::lock_guard<std::mutex> owner(layer->owner);
  if (!layer->js_owned) return false;
  layer->handed_out = true;
  return true;
}

bool DropP2pLayerOwner(void* pointer) {
  MpiCall call;
  P2pLayer* layer = nullptr;
  bool free_now = false;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    layer = FindLocked(pointer);
    if (layer == nullptr) return false;
    std::lock_guard<std::mutex> owner(layer->owner);
    if (!layer->js_owned) return false;
    layer->js_owned = false;
    free_now = !layer->handed_out;
    if (free_now) registry.erase(layer);
  }
  if (free_now) FreeLayer(layer, call.ok() && !layer->dead);
  return true;
}

void FinalizeP2pLayers() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (P2pLayer* layer : registry) {
    for (P2pRequest* r : layer->live) {
      if (r->mpi != MPI_REQUEST_NULL) {
        if (r->is_recv) {
          CancelReceive(r);
        } else {
          MPI_Request_free(&r->mpi);
        }
      }
      // Requests stay (topocoll holds them) but fail from now on.
      if (r->error == 0) {
        r->error = kErrFinalized;
        r->error_text = Describe(r, "MPI has been finalized");
      }
    }
    if (layer->comm != MPI_COMM_NULL) MPI_Comm_free(&layer->comm);
    layer->dead = true;
  }
}

}  // namespace topocoll_mpi
