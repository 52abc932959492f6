// Node-API surface of topocoll/mpi (topocoll_mpi.node). Only src/mpi.ts loads it; every export
// is typed and documented there.
//
// PROTOCOL
//   - MPI: mpi_runtime.h (initialisation, the hold every call takes, finalisation at exit).
//   - Communicators are small integer handles into a process-wide table: 0 is a duplicate of
//     MPI_COMM_WORLD, made by init(), so that what JavaScript sends on it never meets the
//     messages of other libraries on MPI_COMM_WORLD; split and dup add entries, free empties
//     them (entries are never reused, so a stale handle fails instead of naming another
//     communicator). Every communicator the addon makes has MPI_ERRORS_RETURN: MPI failures
//     become JavaScript errors with MPI_Error_string's text instead of aborting the job.
//   - Messages from JavaScript are non-blocking requests by id (isend/irecv, then test until it
//     answers). isend copies the bytes, so JavaScript may reuse its array at once; a receive
//     lands in memory of the addon and test() hands a copy of exactly the received length.
//   - p2p(handle, tagBase) makes the native layer topocoll calls from its own threads
//     (p2p_layer.h) and hands it over as an External without a finalizer.
//   - The table and the requests are guarded by `js_mutex`, taken after the MpiCall (lock
//     order: mpi_runtime.h). Blocking collectives copy their MPI_Comm out and run without it.
#include <napi.h>

#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/abi_generated.h"
#include "mpi_runtime.h"
#include "p2p_layer.h"

namespace topocoll_mpi {

// The numbers and names topocoll's TypeScript and addon agree on (abi/abi.yaml).
namespace abi = topocoll::abi;

namespace {

// ---- errors ---------------------------------------------------------------------------------

Napi::Error JsError(Napi::Env env, const std::string& code, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  return error;
}

[[noreturn]] void ThrowInvalid(Napi::Env env, const std::string& message) { throw JsError(env, "EINVAL", message); }

// topocoll's error code for an MPI failure: arguments MPI refused are EINVAL, a message longer
// than its receive is EMISMATCH (the ranks disagree about a size), anything else is a failure
// of the communication (EPEERLOST); a call after finalisation is ECLOSED.
std::string CodeOf(int rc) {
  switch (rc) {
    case kErrFinalized: return "ECLOSED";
    case kErrArgument: return "EINVAL";
    case kErrNoMemory:
    case kErrInternal: return "EPEERLOST";
    default: break;
  }
  int cls = ErrorClass(rc);
  if (cls == MPI_ERR_TRUNCATE) return "EMISMATCH";
  if (cls == MPI_ERR_RANK || cls == MPI_ERR_TAG || cls == MPI_ERR_COUNT || cls == MPI_ERR_ARG || cls == MPI_ERR_TYPE || cls == MPI_ERR_OP ||
      cls == MPI_ERR_BUFFER || cls == MPI_ERR_ROOT || cls == MPI_ERR_COMM) {
    return "EINVAL";
  }
  return "EPEERLOST";
}

Napi::Error JsMpiError(Napi::Env env, int rc, const std::string& message) {
  Napi::Error error = JsError(env, CodeOf(rc), message);
  error.Set("mpiError", Napi::Number::New(env, rc));
  error.Set("mpiErrorClass", Napi::Number::New(env, ErrorClass(rc)));
  return error;
}

// Runs a function body, turning MpiError into a JavaScript error.
template <typename F>
Napi::Value Guarded(const Napi::CallbackInfo& info, F&& body) {
  try {
    return body();
  } catch (const MpiError& e) {
    throw JsMpiError(info.Env(), e.code(), e.what());
  }
}

void CheckJs(Napi::Env env, int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) throw JsMpiError(env, rc, what + ": " + ErrorText(rc));
}

// ---- arguments ------------------------------------------------------------------------------

int32_t IntArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  Napi::Value v = info[i];
  if (!v.IsNumber()) ThrowInvalid(info.Env(), std::string(name) + " must be an integer");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= INT32_MIN && d <= INT32_MAX) || d != static_cast<double>(static_cast<int32_t>(d))) {
    ThrowInvalid(info.Env(), std::string(name) + " must be a 32-bit integer, got " + v.ToString().Utf8Value());
  }
  return static_cast<int32_t>(d);
}

struct Bytes {
  void* data = nullptr;
  size_t length = 0;  // elements for typed views, bytes for Bytes()
  size_t byte_length = 0;
  napi_typedarray_type type = napi_uint8_array;
};

Bytes TypedArrayArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  Napi::Value v = info[i];
  if (!v.IsTypedArray()) ThrowInvalid(info.Env(), std::string(name) + " must be a TypedArray");
  auto ta = v.As<Napi::TypedArray>();
  Bytes b;
  b.data = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
  b.length = ta.ElementLength();
  b.byte_length = ta.ByteLength();
  b.type = ta.TypedArrayType();
  return b;
}

// ---- datatypes and operators ----------------------------------------------------------------

// topocoll's datatypes (their names and kinds are abi/abi.yaml's, as src/mpi.ts passes them)
// and their arrays' and MPI's types. uint8clamped has no MPI counterpart (MPI's arithmetic wraps;
// a clamped array saturates), so it is not here.
struct Dtype {
  abi::Dtype code;
  napi_typedarray_type array;
  MPI_Datatype mpi;
  const char* name() const { return abi::kDtypeTable[static_cast<size_t>(code)].name; }
  bool integer() const { return abi::kDtypeTable[static_cast<size_t>(code)].integer; }
};

const Dtype* DtypeArg(const Napi::CallbackInfo& info, size_t i) {
  // MPI's predefined handles are not constant expressions in every MPI (Open MPI's are addresses
  // of globals), so the table is built on first use.
  static const Dtype kTypes[] = {
      {abi::Dtype::kInt8, napi_int8_array, MPI_INT8_T},       {abi::Dtype::kUint8, napi_uint8_array, MPI_UINT8_T},
      {abi::Dtype::kInt16, napi_int16_array, MPI_INT16_T},    {abi::Dtype::kUint16, napi_uint16_array, MPI_UINT16_T},
      {abi::Dtype::kInt32, napi_int32_array, MPI_INT32_T},    {abi::Dtype::kUint32, napi_uint32_array, MPI_UINT32_T},
      {abi::Dtype::kInt64, napi_bigint64_array, MPI_INT64_T}, {abi::Dtype::kUint64, napi_biguint64_array, MPI_UINT64_T},
      {abi::Dtype::kFloat32, napi_float32_array, MPI_FLOAT},  {abi::Dtype::kFloat64, napi_float64_array, MPI_DOUBLE},
  };
  Napi::Value v = info[i];
  std::string name = v.IsString() ? v.As<Napi::String>().Utf8Value() : std::string();
  for (const Dtype& t : kTypes) {
    if (name == t.name()) return &t;
  }
  ThrowInvalid(info.Env(),
               "unknown datatype \"" + name + "\" (int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64)");
}

MPI_Op OpArg(const Napi::CallbackInfo& info, size_t i, const Dtype* type) {
  // The operators (names and kinds: abi/abi.yaml) and MPI's.
  struct Op {
    abi::ReduceOp code;
    MPI_Op mpi;
  };
  static const Op kOps[] = {
      {abi::ReduceOp::kSum, MPI_SUM},   {abi::ReduceOp::kProd, MPI_PROD}, {abi::ReduceOp::kMin, MPI_MIN},
      {abi::ReduceOp::kMax, MPI_MAX},   {abi::ReduceOp::kBand, MPI_BAND}, {abi::ReduceOp::kBor, MPI_BOR},
      {abi::ReduceOp::kBxor, MPI_BXOR}, {abi::ReduceOp::kLand, MPI_LAND}, {abi::ReduceOp::kLor, MPI_LOR},
  };
  Napi::Value v = info[i];
  std::string name = v.IsString() ? v.As<Napi::String>().Utf8Value() : std::string();
  for (const Op& op : kOps) {
    const abi::ReduceOpInfo& about = abi::kReduceOpTable[static_cast<size_t>(op.code)];
    if (name != about.name) continue;
    if (about.integer_only && !type->integer()) {
      ThrowInvalid(info.Env(), "the operator " + name + " is for integer types, not " + type->name());
    }
    return op.mpi;
  }
  ThrowInvalid(info.Env(), "unknown reduction operator \"" + name + "\" (sum, prod, min, max, band, bor, bxor, land, lor)");
}

// A buffer of a collective: a TypedArray of `type`, with a count MPI's int can carry.
Bytes BufferArg(const Napi::CallbackInfo& info, size_t i, const char* name, const Dtype* type) {
  Bytes b = TypedArrayArg(info, i, name);
  if (b.type != type->array) ThrowInvalid(info.Env(), std::string(name) + " is not a " + type->name() + " array");
  if (b.length > static_cast<size_t>(INT_MAX)) ThrowInvalid(info.Env(), std::string(name) + ": more than 2^31 - 1 elements");
  return b;
}

bool Overlap(const Bytes& a, const Bytes& b) {
  auto* a0 = static_cast<uint8_t*>(a.data);
  auto* b0 = static_cast<uint8_t*>(b.data);
  return a.byte_length > 0 && b.byte_length > 0 && a0 < b0 + b.byte_length && b0 < a0 + a.byte_length;
}

// ---- communicators and requests ---------------------------------------------------------------

struct JsRequest {
  MPI_Request mpi = MPI_REQUEST_NULL;
  bool is_recv = false;
  int32_t peer = 0;
  int32_t tag = 0;
  // The copy of a send's bytes; a receive's landing area (maxBytes).
  std::vector<uint8_t> buffer;
};

std::mutex js_mutex;
std::vector<MPI_Comm> comms;  // by handle; MPI_COMM_NULL once freed
std::unordered_map<uint32_t, std::unique_ptr<JsRequest>> requests;
uint32_t next_request = 1;
bool cleanup_hook_added = false;
int world_tag_ub = 32767;

// The MPI_Comm of a handle argument. Caller holds js_mutex.
MPI_Comm CommLocked(const Napi::CallbackInfo& info, size_t i) {
  int32_t handle = IntArg(info, i, "communicator handle");
  if (handle < 0 || static_cast<size_t>(handle) >= comms.size() || comms[handle] == MPI_COMM_NULL) {
    ThrowInvalid(info.Env(), "no MPI communicator " + std::to_string(handle) + " (freed, or not made by topocoll/mpi)");
  }
  return comms[handle];
}

MPI_Comm CommArg(const Napi::CallbackInfo& info, size_t i) {
  std::lock_guard<std::mutex> lock(js_mutex);
  return CommLocked(info, i);
}

// Sets MPI_ERRORS_RETURN and enters a new communicator into the table; its handle.
int32_t Adopt(Napi::Env env, MPI_Comm comm) {
  int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&comm);
    CheckJs(env, rc, "MPI_Comm_set_errhandler");
  }
  std::lock_guard<std::mutex> lock(js_mutex);
  comms.push_back(comm);
  return static_cast<int32_t>(comms.size() - 1);
}

// The cleanup Finalize runs (mpi_runtime.h): every request and communicator of JavaScript's.
void FinalizeJsState() {
  std::lock_guard<std::mutex> lock(js_mutex);
  for (auto& [id, r] : requests) {
    if (r->mpi == MPI_REQUEST_NULL) continue;
    if (r->is_recv) {
      MPI_Cancel(&r->mpi);
      MPI_Wait(&r->mpi, MPI_STATUS_IGNORE);
    } else {
      MPI_Request_free(&r->mpi);  // the bytes are the addon's own copy, kept until exit
    }
  }
  for (MPI_Comm& c : comms) {
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }
}

void CleanupHook(void*) { Finalize(); }

// An MpiCall that throws ECLOSED to JavaScript when MPI is not up (not initialised, or finalized).
class LiveMpiCall : public MpiCall {
 public:
  explicit LiveMpiCall(Napi::Env env) {
    if (!ok()) throw JsError(env, "ECLOSED", "MPI is not initialised or has been finalized (call init() first)");
  }
};

void CheckPeer(const Napi::CallbackInfo& info, MPI_Comm comm, int32_t peer, int32_t tag) {
  int size = 0;
  CheckJs(info.Env(), MPI_Comm_size(comm, &size), "MPI_Comm_size");
  if (peer < 0 || peer >= size)
    ThrowInvalid(info.Env(), "peer " + std::to_string(peer) + " is not a rank of the communicator (size " + std::to_string(size) + ")");
  if (tag < 0 || tag > world_tag_ub)
    ThrowInvalid(info.Env(), "tag " + std::to_string(tag) + " is outside 0 … " + std::to_string(world_tag_ub) + " (MPI_TAG_UB)");
}

uint32_t Enter(std::unique_ptr<JsRequest> r) {
  std::lock_guard<std::mutex> lock(js_mutex);
  uint32_t id = next_request++;
  if (next_request == 0) next_request = 1;
  requests.emplace(id, std::move(r));
  return id;
}

// ---- exports ----------------------------------------------------------------------------------

// init(isMainThread) → { provided, rank, size, initializedHere, tagUb }
Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    InitResult result = EnsureInitialized();
    AddCleanup(FinalizeP2pLayers);
    AddCleanup(FinalizeJsState);
    LiveMpiCall call(env);
    bool need_world;
    {
      std::lock_guard<std::mutex> lock(js_mutex);
      need_world = comms.empty();
    }
    if (need_world) {
      // Only one thread of the process is expected to call init() first; should two race, the
      // second's duplicate is freed again (MPI_Comm_dup is collective either way: each rank's
      // JavaScript calls init() once per process before anything else).
      MPI_Comm world = MPI_COMM_NULL;
      CheckJs(env, MPI_Comm_dup(MPI_COMM_WORLD, &world), "MPI_Comm_dup(MPI_COMM_WORLD)");
      CheckJs(env, MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
      int* ub = nullptr;
      int flag = 0;
      if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS && flag && ub != nullptr) world_tag_ub = *ub;
      std::lock_guard<std::mutex> lock(js_mutex);
      if (comms.empty()) {
        comms.push_back(world);
      } else {
        MPI_Comm_free(&world);
      }
    }
    // Finalisation only from the main thread's environment, which ends with the process: a worker
    // that ends must not finalize MPI under the main thread. (An exit that skips the hook, like
    // process.exit(), finalizes from the atexit handler instead.)
    bool main_thread = info.Length() > 0 && info[0].ToBoolean().Value();
    if (main_thread && result.initialized_here) {
      std::lock_guard<std::mutex> lock(js_mutex);
      if (!cleanup_hook_added) {
        cleanup_hook_added = true;
        napi_add_env_cleanup_hook(env, CleanupHook, nullptr);
      }
    }
    int rank = 0, size = 0;
    MPI_Comm world;
    {
      std::lock_guard<std::mutex> lock(js_mutex);
      world = comms[0];
    }
    CheckJs(env, MPI_Comm_rank(world, &rank), "MPI_Comm_rank");
    CheckJs(env, MPI_Comm_size(world, &size), "MPI_Comm_size");
    Napi::Object out = Napi::Object::New(env);
    out.Set("provided", Napi::Number::New(env, result.level));
    out.Set("rank", Napi::Number::New(env, rank));
    out.Set("size", Napi::Number::New(env, size));
    out.Set("initializedHere", Napi::Boolean::New(env, result.initialized_here));
    out.Set("tagUb", Napi::Number::New(env, world_tag_ub));
    return out;
  });
}

Napi::Value CommRank(const Napi::CallbackInfo& info) {
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(info.Env());
    int rank = 0;
    CheckJs(info.Env(), MPI_Comm_rank(CommArg(info, 0), &rank), "MPI_Comm_rank");
    return Napi::Number::New(info.Env(), rank);
  });
}

Napi::Value CommSize(const Napi::CallbackInfo& info) {
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(info.Env());
    int size = 0;
    CheckJs(info.Env(), MPI_Comm_size(CommArg(info, 0), &size), "MPI_Comm_size");
    return Napi::Number::New(info.Env(), size);
  });
}

// commSplit(handle, color | undefined, key) → handle, or -1 for a rank with no color
// (MPI_UNDEFINED: it gets MPI_COMM_NULL). Collective over the communicator.
Napi::Value CommSplit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    int color = MPI_UNDEFINED;
    if (!info[1].IsUndefined()) {
      color = IntArg(info, 1, "color");
      if (color < 0) ThrowInvalid(env, "color must be a non-negative integer or undefined");
    }
    int key = IntArg(info, 2, "key");
    MPI_Comm out = MPI_COMM_NULL;
    CheckJs(env, MPI_Comm_split(comm, color, key, &out), "MPI_Comm_split");
    if (out == MPI_COMM_NULL) return Napi::Number::New(env, -1);
    return Napi::Number::New(env, Adopt(env, out));
  });
}

// commDup(handle) → handle. Collective over the communicator.
Napi::Value CommDup(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    MPI_Comm out = MPI_COMM_NULL;
    CheckJs(env, MPI_Comm_dup(CommArg(info, 0), &out), "MPI_Comm_dup");
    return Napi::Number::New(env, Adopt(env, out));
  });
}

// commFree(handle). Requests still pending on it complete normally (MPI_Comm_free's rule).
Napi::Value CommFree(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    std::lock_guard<std::mutex> lock(js_mutex);
    MPI_Comm comm = CommLocked(info, 0);
    if (IntArg(info, 0, "communicator handle") == 0) ThrowInvalid(env, "the world communicator (handle 0) cannot be freed");
    CheckJs(env, MPI_Comm_free(&comm), "MPI_Comm_free");
    comms[IntArg(info, 0, "communicator handle")] = MPI_COMM_NULL;
    return env.Undefined();
  });
}

// isend(handle, peer, tag, bytes: TypedArray) → request id. The bytes are copied.
Napi::Value Isend(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    int32_t peer = IntArg(info, 1, "peer");
    int32_t tag = IntArg(info, 2, "tag");
    CheckPeer(info, comm, peer, tag);
    Bytes data = TypedArrayArg(info, 3, "data");
    if (data.byte_length > static_cast<size_t>(INT_MAX)) ThrowInvalid(env, "a message of more than 2^31 - 1 bytes");
    auto r = std::make_unique<JsRequest>();
    r->peer = peer;
    r->tag = tag;
    r->buffer.assign(static_cast<uint8_t*>(data.data), static_cast<uint8_t*>(data.data) + data.byte_length);
    CheckJs(env, MPI_Isend(r->buffer.data(), static_cast<int>(r->buffer.size()), MPI_BYTE, peer, tag, comm, &r->mpi), "MPI_Isend");
    return Napi::Number::New(env, Enter(std::move(r)));
  });
}

// irecv(handle, peer, tag, maxBytes) → request id.
Napi::Value Irecv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    int32_t peer = IntArg(info, 1, "peer");
    int32_t tag = IntArg(info, 2, "tag");
    CheckPeer(info, comm, peer, tag);
    int32_t max_bytes = IntArg(info, 3, "maxBytes");
    if (max_bytes < 0) ThrowInvalid(env, "maxBytes must be a non-negative integer below 2^31");
    auto r = std::make_unique<JsRequest>();
    r->is_recv = true;
    r->peer = peer;
    r->tag = tag;
    r->buffer.resize(static_cast<size_t>(max_bytes));
    CheckJs(env, MPI_Irecv(r->buffer.data(), max_bytes, MPI_BYTE, peer, tag, comm, &r->mpi), "MPI_Irecv");
    return Napi::Number::New(env, Enter(std::move(r)));
  });
}

// The request of an id argument, taken out of the table. Caller holds js_mutex.
std::unique_ptr<JsRequest>* FindLocked(const Napi::CallbackInfo& info) {
  Napi::Value v = info[0];
  double id = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
  auto it = id >= 0 && id <= UINT32_MAX ? requests.find(static_cast<uint32_t>(id)) : requests.end();
  if (it == requests.end()) ThrowInvalid(info.Env(), "no pending MPI request " + v.ToString().Utf8Value());
  return &it->second;
}

// test(id) → undefined (not done) | true (a send done) | Uint8Array (the received bytes).
// A failed request is gone afterwards; its error is thrown.
Napi::Value Test(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    std::lock_guard<std::mutex> lock(js_mutex);
    std::unique_ptr<JsRequest>* slot = FindLocked(info);
    JsRequest& r = **slot;
    uint32_t id = static_cast<uint32_t>(info[0].As<Napi::Number>().DoubleValue());
    MPI_Status status;
    int flag = 0;
    int rc = MPI_Test(&r.mpi, &flag, &status);
    if (rc != MPI_SUCCESS) {
      // Open MPI frees a request that completed with an error; one that did not is given up.
      if (r.mpi != MPI_REQUEST_NULL) {
        if (r.is_recv) {
          MPI_Cancel(&r.mpi);
          MPI_Wait(&r.mpi, MPI_STATUS_IGNORE);
        } else {
          // MPI may still read the bytes of a send it has not finished: they are leaked on purpose.
          MPI_Request_free(&r.mpi);
          new std::vector<uint8_t>(std::move(r.buffer));
        }
      }
      std::string what =
          std::string(r.is_recv ? "receive from rank " : "send to rank ") + std::to_string(r.peer) + " with tag " + std::to_string(r.tag);
      size_t capacity = r.buffer.size();
      requests.erase(id);
      if (ErrorClass(rc) == MPI_ERR_TRUNCATE) {
        throw JsMpiError(env, rc,
                         what + ": the message is longer than maxBytes (" + std::to_string(capacity) + " bytes) (" + ErrorText(rc) + ")");
      }
      throw JsMpiError(env, rc, what + ": " + ErrorText(rc));
    }
    if (!flag) return env.Undefined();
    if (!r.is_recv) {
      requests.erase(id);
      return Napi::Boolean::New(env, true);
    }
    int count = 0;
    CheckJs(env, MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
    auto out = Napi::Uint8Array::New(env, static_cast<size_t>(count));
    if (count > 0) std::memcpy(out.Data(), r.buffer.data(), static_cast<size_t>(count));
    requests.erase(id);
    return out;
  });
}

// cancelRecv(id) → true if the receive was cancelled, false if a message had already arrived
// for it (that message is dropped).
Napi::Value CancelRecv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    std::lock_guard<std::mutex> lock(js_mutex);
    std::unique_ptr<JsRequest>* slot = FindLocked(info);
    JsRequest& r = **slot;
    if (!r.is_recv) ThrowInvalid(env, "cancelRecv: request " + info[0].ToString().Utf8Value() + " is a send (sends cannot be cancelled)");
    uint32_t id = static_cast<uint32_t>(info[0].As<Napi::Number>().DoubleValue());
    int cancelled = 0;
    if (r.mpi != MPI_REQUEST_NULL) {
      MPI_Cancel(&r.mpi);
      MPI_Status status;
      if (MPI_Wait(&r.mpi, &status) == MPI_SUCCESS) MPI_Test_cancelled(&status, &cancelled);
    }
    requests.erase(id);
    return Napi::Boolean::New(env, cancelled != 0);
  });
}

// p2p(handle, tagBase) → External of a topocoll_p2p_v1 over a new duplicate of the communicator
// (collective). No finalizer: topocoll calls release() (p2p_layer.h, Ownership).
Napi::Value P2p(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    MPI_Comm comm = CommArg(info, 0);
    int32_t tag_base = IntArg(info, 1, "tagBase");
    topocoll_p2p_v1* api = CreateP2pLayer(comm, tag_base);
    return Napi::External<topocoll_p2p_v1>::New(env, api);
  });
}

// p2pHandOut(external) → false if it is not a layer the MpiCommunicator still owns. Marks it as
// possibly held by topocoll until its release() (p2p_layer.h, Ownership).
Napi::Value P2pHandOut(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsExternal()) ThrowInvalid(env, "p2pHandOut: not an External");
  return Napi::Boolean::New(env, MarkP2pLayerHandedOut(info[0].As<Napi::External<void>>().Data()));
}

// p2pDrop(external) → whether it was a layer the MpiCommunicator still owned.
Napi::Value P2pDrop(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsExternal()) ThrowInvalid(env, "p2pDrop: not an External");
  return Napi::Boolean::New(env, DropP2pLayerOwner(info[0].As<Napi::External<void>>().Data()));
}

// ---- reference collectives (blocking, on the calling thread) ------------------------------------

// allreduce(handle, send, recv, dtype, op); send and recv the same array: in place.
Napi::Value Allreduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    const Dtype* type = DtypeArg(info, 3);
    MPI_Op op = OpArg(info, 4, type);
    Bytes send = BufferArg(info, 1, "send", type);
    Bytes recv = BufferArg(info, 2, "recv", type);
    if (send.length != recv.length) ThrowInvalid(env, "allreduce: send and recv must have the same length");
    bool in_place = send.data == recv.data;
    if (!in_place && Overlap(send, recv)) ThrowInvalid(env, "allreduce: send and recv overlap");
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    CheckJs(env, MPI_Allreduce(in_place ? MPI_IN_PLACE : send.data, recv.data, static_cast<int>(recv.length), type->mpi, op, comm),
            "MPI_Allreduce");
    return env.Undefined();
  });
}

// reduce(handle, send, recv | null, dtype, op, root); recv only at the root (in place there if
// it is send).
Napi::Value Reduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    const Dtype* type = DtypeArg(info, 3);
    MPI_Op op = OpArg(info, 4, type);
    int32_t root = IntArg(info, 5, "root");
    Bytes send = BufferArg(info, 1, "send", type);
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    int rank = 0, size = 0;
    CheckJs(env, MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    CheckJs(env, MPI_Comm_size(comm, &size), "MPI_Comm_size");
    if (root < 0 || root >= size) ThrowInvalid(env, "reduce: root " + std::to_string(root) + " is not a rank of the communicator");
    void* send_data = send.data;
    void* recv_data = nullptr;
    if (rank == root) {
      Bytes recv = BufferArg(info, 2, "recv", type);
      if (recv.length != send.length) ThrowInvalid(env, "reduce: send and recv must have the same length at the root");
      if (send.data == recv.data) {
        send_data = MPI_IN_PLACE;
      } else if (Overlap(send, recv)) {
        ThrowInvalid(env, "reduce: send and recv overlap");
      }
      recv_data = recv.data;
    }
    CheckJs(env, MPI_Reduce(send_data, recv_data, static_cast<int>(send.length), type->mpi, op, root, comm), "MPI_Reduce");
    return env.Undefined();
  });
}

// bcast(handle, buf, dtype, root)
Napi::Value Bcast(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    const Dtype* type = DtypeArg(info, 2);
    Bytes buf = BufferArg(info, 1, "buf", type);
    int32_t root = IntArg(info, 3, "root");
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    CheckJs(env, MPI_Bcast(buf.data, static_cast<int>(buf.length), type->mpi, root, comm), "MPI_Bcast");
    return env.Undefined();
  });
}

// allgather(handle, send, recv, dtype): recv holds size × send.length elements. send may be this
// rank's own block of recv (in place).
Napi::Value Allgather(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    const Dtype* type = DtypeArg(info, 3);
    Bytes send = BufferArg(info, 1, "send", type);
    Bytes recv = BufferArg(info, 2, "recv", type);
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    int rank = 0, size = 0;
    CheckJs(env, MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    CheckJs(env, MPI_Comm_size(comm, &size), "MPI_Comm_size");
    if (recv.length != send.length * static_cast<size_t>(size)) {
      ThrowInvalid(env, "allgather: recv must have size × send.length = " + std::to_string(send.length * size) + " elements");
    }
    bool in_place = static_cast<uint8_t*>(send.data) == static_cast<uint8_t*>(recv.data) + send.byte_length * static_cast<size_t>(rank);
    if (!in_place && Overlap(send, recv)) ThrowInvalid(env, "allgather: send overlaps recv other than as this rank's block");
    CheckJs(env,
            MPI_Allgather(in_place ? MPI_IN_PLACE : send.data, static_cast<int>(send.length), type->mpi, recv.data,
                          static_cast<int>(send.length), type->mpi, comm),
            "MPI_Allgather");
    return env.Undefined();
  });
}

// The block lengths of a gather or scatter (counts given: a Float64Array, one per rank; else n
// each) and their displacements, as MPI's int arrays.
void BlockLayout(const Napi::CallbackInfo& info, size_t i, int size, size_t n, std::vector<int>* counts, std::vector<int>* displs) {
  counts->assign(static_cast<size_t>(size), static_cast<int>(n));
  if (!info[i].IsNull() && !info[i].IsUndefined()) {
    auto c = info[i].As<Napi::Float64Array>();
    if (c.ElementLength() != static_cast<size_t>(size)) ThrowInvalid(info.Env(), "counts must have one entry per rank");
    for (int r = 0; r < size; ++r) (*counts)[static_cast<size_t>(r)] = static_cast<int>(c[static_cast<size_t>(r)]);
  }
  displs->assign(static_cast<size_t>(size), 0);
  for (int r = 1; r < size; ++r)
    (*displs)[static_cast<size_t>(r)] = (*displs)[static_cast<size_t>(r - 1)] + (*counts)[static_cast<size_t>(r - 1)];
}

// What gather and scatter read of their arguments (handle, send, recv, dtype, root, counts):
// this rank's block (`own`: gather's send, scatter's recv; null at the root: in place) and the
// root's whole vector (`whole`), the blocks' lengths and places. Call inside a LiveMpiCall.
struct RootedArgs {
  const Dtype* type;
  int32_t root;
  int rank = 0, size = 0;
  MPI_Comm comm;
  bool in_place;
  Bytes own, whole;
  std::vector<int> counts, displs;
};

RootedArgs ReadRooted(const Napi::CallbackInfo& info, const std::string& name, size_t own_index, size_t whole_index) {
  Napi::Env env = info.Env();
  RootedArgs a{DtypeArg(info, 3), IntArg(info, 4, "root"), 0, 0, CommArg(info, 0), false, {}, {}, {}, {}};
  CheckJs(env, MPI_Comm_rank(a.comm, &a.rank), "MPI_Comm_rank");
  CheckJs(env, MPI_Comm_size(a.comm, &a.size), "MPI_Comm_size");
  if (a.root < 0 || a.root >= a.size) ThrowInvalid(env, name + ": root " + std::to_string(a.root) + " is not a rank of the communicator");
  a.in_place = info[own_index].IsNull();
  if (a.in_place && a.rank != a.root) ThrowInvalid(env, name + ": this rank's block may be null (in place) at the root only");
  if (!a.in_place) a.own = BufferArg(info, own_index, own_index == 1 ? "send" : "recv", a.type);
  if (a.rank == a.root) a.whole = BufferArg(info, whole_index, whole_index == 1 ? "send" : "recv", a.type);
  BlockLayout(info, 5, a.size, a.in_place ? a.whole.length / static_cast<size_t>(a.size) : a.own.length, &a.counts, &a.displs);
  return a;
}

// gather(handle, send | null, recv | null, dtype, root, counts | null): MPI_Gatherv of every
// rank's send into the root's recv (send null at the root: MPI_IN_PLACE, its block already in
// recv). A reference for topocoll's gather and gatherv.
Napi::Value Gather(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    RootedArgs a = ReadRooted(info, "gather", 1, 2);
    CheckJs(env,
            MPI_Gatherv(a.in_place ? MPI_IN_PLACE : a.own.data, a.counts[static_cast<size_t>(a.rank)], a.type->mpi, a.whole.data,
                        a.counts.data(), a.displs.data(), a.type->mpi, a.root, a.comm),
            "MPI_Gatherv");
    return env.Undefined();
  });
}

// scatter(handle, send | null, recv | null, dtype, root, counts | null): MPI_Scatterv of the root's
// send; rank r's block into its recv (recv null at the root: MPI_IN_PLACE, its block stays in
// send). A reference for topocoll's scatter and scatterv.
Napi::Value Scatter(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    RootedArgs a = ReadRooted(info, "scatter", 2, 1);
    CheckJs(env,
            MPI_Scatterv(a.whole.data, a.counts.data(), a.displs.data(), a.type->mpi, a.in_place ? MPI_IN_PLACE : a.own.data,
                         a.counts[static_cast<size_t>(a.rank)], a.type->mpi, a.root, a.comm),
            "MPI_Scatterv");
    return env.Undefined();
  });
}

// reduceScatter(handle, send | null, recv, dtype, op, counts | null): MPI_Reduce_scatter (with
// counts) or MPI_Reduce_scatter_block (recv.length each) of send; send null: MPI_IN_PLACE, the
// input in recv. A reference for topocoll's reduce-scatters.
Napi::Value ReduceScatter(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    const Dtype* type = DtypeArg(info, 3);
    MPI_Op op = OpArg(info, 4, type);
    const bool in_place = info[1].IsNull();
    Bytes recv = BufferArg(info, 2, "recv", type);
    Bytes send = in_place ? Bytes{} : BufferArg(info, 1, "send", type);
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    int rank = 0, size = 0;
    CheckJs(env, MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    CheckJs(env, MPI_Comm_size(comm, &size), "MPI_Comm_size");
    void* from = in_place ? MPI_IN_PLACE : send.data;
    if (info[5].IsNull() || info[5].IsUndefined()) {
      const size_t n = in_place ? recv.length / static_cast<size_t>(size) : recv.length;
      CheckJs(env, MPI_Reduce_scatter_block(from, recv.data, static_cast<int>(n), type->mpi, op, comm), "MPI_Reduce_scatter_block");
    } else {
      std::vector<int> counts, displs;
      BlockLayout(info, 5, size, 0, &counts, &displs);
      CheckJs(env, MPI_Reduce_scatter(from, recv.data, counts.data(), type->mpi, op, comm), "MPI_Reduce_scatter");
    }
    return env.Undefined();
  });
}

// scan(handle, send | null, recv, dtype, op, exclusive): MPI_Scan, or MPI_Exscan when exclusive,
// of send into recv (send.length elements); send null: MPI_IN_PLACE, the input in recv. A
// reference for topocoll's scan and exscan (MPI_Exscan leaves rank 0's recv undefined).
Napi::Value Scan(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    const Dtype* type = DtypeArg(info, 3);
    MPI_Op op = OpArg(info, 4, type);
    const bool exclusive = info[5].ToBoolean().Value();
    const bool in_place = info[1].IsNull();
    Bytes recv = BufferArg(info, 2, "recv", type);
    Bytes send = in_place ? Bytes{} : BufferArg(info, 1, "send", type);
    const char* name = exclusive ? "exscan" : "scan";
    if (!in_place && send.length != recv.length) ThrowInvalid(env, std::string(name) + ": send and recv must have the same length");
    if (!in_place && Overlap(send, recv)) ThrowInvalid(env, std::string(name) + ": send and recv overlap");
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    void* from = in_place ? MPI_IN_PLACE : send.data;
    const int n = static_cast<int>(recv.length);
    if (exclusive)
      CheckJs(env, MPI_Exscan(from, recv.data, n, type->mpi, op, comm), "MPI_Exscan");
    else
      CheckJs(env, MPI_Scan(from, recv.data, n, type->mpi, op, comm), "MPI_Scan");
    return env.Undefined();
  });
}

// alltoall(handle, send | null, recv, dtype, sendCounts | null, recvCounts | null): MPI_Alltoall
// (no counts: size blocks of recv.length / size each) or MPI_Alltoallv with the displacements
// the counts give (blocks packed in rank order); send null: MPI_IN_PLACE, the input in recv. A
// reference for topocoll's alltoall and alltoallv.
Napi::Value Alltoall(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    const Dtype* type = DtypeArg(info, 3);
    const bool in_place = info[1].IsNull();
    Bytes recv = BufferArg(info, 2, "recv", type);
    Bytes send = in_place ? Bytes{} : BufferArg(info, 1, "send", type);
    LiveMpiCall call(env);
    MPI_Comm comm = CommArg(info, 0);
    int rank = 0, size = 0;
    CheckJs(env, MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    CheckJs(env, MPI_Comm_size(comm, &size), "MPI_Comm_size");
    if (!in_place && Overlap(send, recv)) ThrowInvalid(env, "alltoall: send and recv overlap");
    void* from = in_place ? MPI_IN_PLACE : send.data;
    if (info[5].IsNull() || info[5].IsUndefined()) {
      const auto n = static_cast<int>(recv.length / static_cast<size_t>(size));
      CheckJs(env, MPI_Alltoall(from, n, type->mpi, recv.data, n, type->mpi, comm), "MPI_Alltoall");
    } else {
      std::vector<int> recv_counts, recv_displs;
      BlockLayout(info, 5, size, 0, &recv_counts, &recv_displs);
      std::vector<int> send_counts = recv_counts, send_displs = recv_displs;
      if (!in_place) BlockLayout(info, 4, size, 0, &send_counts, &send_displs);
      CheckJs(env,
              MPI_Alltoallv(from, send_counts.data(), send_displs.data(), type->mpi, recv.data, recv_counts.data(), recv_displs.data(),
                            type->mpi, comm),
              "MPI_Alltoallv");
    }
    return env.Undefined();
  });
}

Napi::Value Barrier(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return Guarded(info, [&]() -> Napi::Value {
    LiveMpiCall call(env);
    CheckJs(env, MPI_Barrier(CommArg(info, 0)), "MPI_Barrier");
    return env.Undefined();
  });
}

// abort(code): MPI_Abort(MPI_COMM_WORLD, code) — ends every process of the job.
Napi::Value Abort(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int32_t code = IntArg(info, 0, "code");
  {
    LiveMpiCall call(env);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  return env.Undefined();  // not reached: MPI_Abort does not return
}

Napi::Object Module(Napi::Env env, Napi::Object exports) {
  exports.Set("init", Napi::Function::New(env, Init, "init"));
  exports.Set("commRank", Napi::Function::New(env, CommRank, "commRank"));
  exports.Set("commSize", Napi::Function::New(env, CommSize, "commSize"));
  exports.Set("commSplit", Napi::Function::New(env, CommSplit, "commSplit"));
  exports.Set("commDup", Napi::Function::New(env, CommDup, "commDup"));
  exports.Set("commFree", Napi::Function::New(env, CommFree, "commFree"));
  exports.Set("isend", Napi::Function::New(env, Isend, "isend"));
  exports.Set("irecv", Napi::Function::New(env, Irecv, "irecv"));
  exports.Set("test", Napi::Function::New(env, Test, "test"));
  exports.Set("cancelRecv", Napi::Function::New(env, CancelRecv, "cancelRecv"));
  exports.Set("p2p", Napi::Function::New(env, P2p, "p2p"));
  exports.Set("p2pHandOut", Napi::Function::New(env, P2pHandOut, "p2pHandOut"));
  exports.Set("p2pDrop", Napi::Function::New(env, P2pDrop, "p2pDrop"));
  exports.Set("allreduce", Napi::Function::New(env, Allreduce, "allreduce"));
  exports.Set("reduce", Napi::Function::New(env, Reduce, "reduce"));
  exports.Set("bcast", Napi::Function::New(env, Bcast, "bcast"));
  exports.Set("allgather", Napi::Function::New(env, Allgather, "allgather"));
  exports.Set("gather", Napi::Function::New(env, Gather, "gather"));
  exports.Set("scatter", Napi::Function::New(env, Scatter, "scatter"));
  exports.Set("reduceScatter", Napi::Function::New(env, ReduceScatter, "reduceScatter"));
  exports.Set("scan", Napi::Function::New(env, Scan, "scan"));
  exports.Set("alltoall", Napi::Function::New(env, Alltoall, "alltoall"));
  exports.Set("barrier", Napi::Function::New(env, Barrier, "barrier"));
  exports.Set("abort", Napi::Function::New(env, Abort, "abort"));
  exports.Set("setExitStatus",
              Napi::Function::New(
                  env, [](const Napi::CallbackInfo& info) { SetExitStatus(info[0].As<Napi::Number>().Int32Value()); }, "setExitStatus"));
  exports.Set("p2pVersion", Napi::Number::New(env, TOPOCOLL_P2P_VERSION));
  return exports;
}

}  // namespace
}  // namespace topocoll_mpi

static Napi::Object InitTopocollMpi(Napi::Env env, Napi::Object exports) { return topocoll_mpi::Module(env, exports); }

NODE_API_MODULE(topocoll_mpi, InitTopocollMpi)
