// Node-API surface of the addon: the NativeEngine class, the host layers' entries, the ABI's
// tables and the module's init. The measurement probes and process helpers are probes.cc's.
// Only src/native.ts loads this; every export is typed and documented there.
#include <napi.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "base/errors.h"
#include "base/wait.h"
#include "binding/job_queue.h"
#include "binding/js_error.h"
#include "binding/js_p2p.h"
#include "binding/js_values.h"
#include "binding/layer_messages.h"
#include "binding/messages.h"
#include "binding/probes.h"
#include "engine/engine.h"
#include "shm/segment_layout.h"
#include "transport/p2p_links.h"

namespace topocoll {

namespace {

// The S0 engine's parameters from { queueBytes, minFragment, sets, tree, radix, fragmentForLog2 }.
ShmBcastParams BcastParamsOf(const Napi::Value& value) {
  ShmBcastParams p;
  if (!value.IsObject()) return p;
  auto o = value.As<Napi::Object>();
  p.queue_bytes = static_cast<uint64_t>(o.Get("queueBytes").As<Napi::Number>().Int64Value());
  p.min_fragment = o.Get("minFragment").As<Napi::Number>().Uint32Value();
  p.sets = o.Get("sets").As<Napi::Number>().Uint32Value();
  p.tree = static_cast<TreeKind>(o.Get("tree").As<Napi::Number>().Int32Value());
  p.radix = o.Get("radix").As<Napi::Number>().Uint32Value();
  for (int f : IntList(o.Get("fragmentForLog2"))) p.fragment_for_log2.push_back(static_cast<uint32_t>(f));
  return p;
}

// The struct behind an External a host layer made (topocoll/mpi, a C host, or the bridge).
const topocoll_p2p_v1* P2PStructOf(const Napi::Value& value) {
  if (!value.IsExternal()) throw CollError("EINVAL", "the point-to-point layer's `native` is not an External of a topocoll_p2p_v1");
  return value.As<Napi::External<topocoll_p2p_v1>>().Data();
}

using abi::CallField;

}  // namespace

class NativeEngine : public Napi::ObjectWrap<NativeEngine> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NativeEngine",
                       {
                           InstanceMethod("listenTcp", &NativeEngine::ListenTcp),
                           InstanceMethod("createSegment", &NativeEngine::CreateSegment),
                           InstanceMethod("openSegment", &NativeEngine::OpenSegment),
                           InstanceMethod("allMappedAndUnlink", &NativeEngine::AllMappedAndUnlink),
                           InstanceMethod("connectTcp", &NativeEngine::ConnectTcp),
                           InstanceMethod("useP2P", &NativeEngine::UseP2P),
                           InstanceMethod("addP2PPeers", &NativeEngine::AddP2PPeers),
                           InstanceMethod("attachMessages", &NativeEngine::AttachMessages),
                           InstanceMethod("start", &NativeEngine::Start),
                           InstanceMethod("setPlan", &NativeEngine::SetPlan),
                           InstanceMethod("setShmGroup", &NativeEngine::SetShmGroup),
                           InstanceMethod("resetShm", &NativeEngine::ResetShm),
                           InstanceMethod("runAsync", &NativeEngine::RunAsync),
                           InstanceMethod("testJob", &NativeEngine::TestJob),
                           InstanceMethod("waitJob", &NativeEngine::WaitJob),
                           InstanceAccessor("lastJob", &NativeEngine::LastJobGetter, nullptr),
                           InstanceMethod("close", &NativeEngine::Close),
                           InstanceMethod("ownRegionNodes", &NativeEngine::OwnRegionNodes),
                           InstanceMethod("fastPath", &NativeEngine::FastPath),
                           InstanceMethod("awaitAreaDeposits", &NativeEngine::AwaitAreaDeposits),
                           InstanceMethod("ringLocal", &NativeEngine::RingLocal),
                           InstanceAccessor("segmentBytes", &NativeEngine::SegmentBytesGetter, nullptr),
                           InstanceMethod("sharedMemory", &NativeEngine::SharedMemory),
                           InstanceMethod("createWindow", &NativeEngine::CreateWindow),
                           InstanceMethod("openWindow", &NativeEngine::OpenWindow),
                           InstanceMethod("freeWindow", &NativeEngine::FreeWindow),
                           InstanceMethod("unlinkWindow", &NativeEngine::UnlinkWindow),
                       });
  }

  explicit NativeEngine(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeEngine>(info) {
    Napi::Env env = info.Env();
    auto o = info[0].As<Napi::Object>();
    EngineOptions options;
    options.rank = o.Get("rank").As<Napi::Number>().Int32Value();
    options.size = o.Get("size").As<Napi::Number>().Int32Value();
    options.local_ranks = IntList(o.Get("localRanks"));
    options.channels.max_capacity = static_cast<uint64_t>(o.Get("channelBytes").As<Napi::Number>().Int64Value());
    options.channels.min_capacity = static_cast<uint64_t>(o.Get("channelMinBytes").As<Napi::Number>().Int64Value());
    options.channels.pool_bytes = static_cast<uint64_t>(o.Get("channelPoolBytes").As<Napi::Number>().Int64Value());
    options.oversubscribed = o.Get("oversubscribed").ToBoolean();
    const int32_t waits = o.Get("waits").As<Napi::Number>().Int32Value();
    if (waits < 0 || static_cast<size_t>(waits) >= abi::kWaitModeCount) {
      NAPI_THROW_VOID(Napi::RangeError::New(env, "waits: no WaitMode " + std::to_string(waits)));
    }
    options.waits = static_cast<abi::WaitMode>(waits);
    options.remote_spin_us = o.Get("remoteSpinUs").As<Napi::Number>().Uint32Value();
    options.machine_ranks = o.Get("machineRanks").As<Napi::Number>().Int32Value();
    options.window_bcast_min_bytes = static_cast<uint64_t>(o.Get("windowBcastMinBytes").As<Napi::Number>().Int64Value());
    options.co_runners = IntList(o.Get("coRunners"));
    options.bcast = BcastParamsOf(o.Get("bcast"));
    options.asymmetric_fences = o.Get("asymmetricFences").ToBoolean();
    options.collective_timeout_ms = o.Get("collectiveTimeoutMs").As<Napi::Number>().Int64Value();
    slice_us_ = o.Get("schedulerSliceUs").As<Napi::Number>().Uint32Value();
    // Blocking collectives run on this (the JavaScript) thread; Close gives its slice back.
    main_slice_ = std::make_unique<SchedulerSlice>(slice_us_);
    Guarded(env, [&] { engine_ = std::make_unique<Engine>(std::move(options)); });
    Napi::Object self = info.This().As<Napi::Object>();
    // The descriptor lives in an ArrayBuffer created here (never on V8's heap, so it never
    // moves); the reference keeps it alive as long as this object.
    auto area = Napi::Float64Array::New(env, abi::kCallFieldCount);
    call_area_ = area.Data();
    call_area_ref_ = Napi::Persistent(area);
    self.Set("callArea", area);
    napi_value raw_run = nullptr;
    NAPI_THROW_IF_FAILED_VOID(env, napi_create_function(env, "run", NAPI_AUTO_LENGTH, RunEntry, this, &raw_run));
    Napi::Function run(env, raw_run);
    // The function keeps this object alive: `this` must outlive any holder of `run`.
    run.Set("engine", self);
    self.Set("run", run);
    jobs_ = std::make_unique<JobQueue>(env, *engine_, slice_us_);
  }

  ~NativeEngine() override { Shutdown(); }

 private:
  template <typename F>
  void Guarded(Napi::Env env, F&& f) {
    try {
      f();
    } catch (const CollError& e) {
      ThrowJs(env, e.code(), e.what());
    }
  }

  // attachMessages(messages): the communicator's NativeMessages use this engine's node
  // channels (before they start; messages close before the engine does).
  Napi::Value AttachMessages(const Napi::CallbackInfo& info) {
    Guarded(info.Env(), [&] { AttachMessagesNode(info[0], engine_->MessagesView()); });
    return info.Env().Undefined();
  }

  Napi::Value ListenTcp(const Napi::CallbackInfo& info) {
    int port = 0;
    const std::string address = info[0].As<Napi::String>();
    Guarded(info.Env(), [&] { port = engine_->ListenTcp(address); });
    return Napi::Number::New(info.Env(), port);
  }

  void CreateSegment(const Napi::CallbackInfo& info) {
    Guarded(info.Env(), [&] { engine_->CreateSegment(info[0].As<Napi::String>()); });
  }

  void OpenSegment(const Napi::CallbackInfo& info) {
    Guarded(info.Env(), [&] { engine_->OpenSegment(info[0].As<Napi::String>()); });
  }

  Napi::Value AllMappedAndUnlink(const Napi::CallbackInfo& info) {
    bool all = false;
    Guarded(info.Env(), [&] { all = engine_->AllMappedAndUnlink(info[0].As<Napi::Number>().Int32Value()); });
    return Napi::Boolean::New(info.Env(), all);
  }

  // useP2P(handle of openP2PLayer, tag, layerRanks?): the links to other nodes go through that
  // layer; layerRanks[r] is the layer's rank of rank r (a sub-communicator's).
  void UseP2P(const Napi::CallbackInfo& info) {
    if (!info[0].IsExternal()) throw Napi::TypeError::New(info.Env(), "useP2P: expected a layer handle from openP2PLayer");
    std::shared_ptr<P2PLayer> layer = *info[0].As<Napi::External<std::shared_ptr<P2PLayer>>>().Data();
    Guarded(info.Env(), [&] {
      engine_->UseP2P(std::move(layer), info[1].As<Napi::Number>().Int32Value(),
                      info[2].IsUndefined() ? std::vector<int>{} : IntList(info[2]));
    });
  }

  void AddP2PPeers(const Napi::CallbackInfo& info) {
    Guarded(info.Env(), [&] { engine_->AddP2PPeers(IntList(info[0])); });
  }

  // Returns the ranks not linked yet (empty: done), and the last connect error in `lastError`.
  Napi::Value ConnectTcp(const Napi::CallbackInfo& info) {
    std::string token = info[0].As<Napi::String>();
    auto list = info[1].As<Napi::Array>();
    std::vector<TcpPeer> peers;
    for (uint32_t i = 0; i < list.Length(); ++i) {
      auto p = list.Get(i).As<Napi::Object>();
      peers.push_back(
          {p.Get("rank").As<Napi::Number>().Int32Value(), p.Get("host").As<Napi::String>(), p.Get("port").As<Napi::Number>().Int32Value()});
    }
    const int wait = info[2].As<Napi::Number>().Int32Value();
    std::vector<int> missing;
    Guarded(info.Env(), [&] { missing = engine_->ConnectTcp(token, peers, wait); });
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("missing", ToInt32Array(info.Env(), std::vector<int32_t>(missing.begin(), missing.end())));
    out.Set("lastError", Napi::String::New(info.Env(), engine_->last_connect_error()));
    return out;
  }

  void Start(const Napi::CallbackInfo&) { engine_->Start(); }

  // setPlan(id, words): words as encodeSchedule writes them (step.h).
  void SetPlan(const Napi::CallbackInfo& info) {
    const int id = info[0].As<Napi::Number>().Int32Value();
    auto data = info[1].As<Napi::Int32Array>();
    std::vector<Step> steps = DecodeSteps(data.Data(), data.ElementLength());
    Guarded(info.Env(), [&] { engine_->SetPlan(id, std::move(steps)); });
  }

  void ResetShm(const Napi::CallbackInfo&) { engine_->ResetShm(); }

  void SetShmGroup(const Napi::CallbackInfo& info) {
    const int id = info[0].As<Napi::Number>().Int32Value();
    const std::vector<int> ranks = IntList(info[1]);
    Guarded(info.Env(), [&] { engine_->SetShmGroup(id, ranks); });
  }

  // A buffer argument: a TypedArray's bytes, or none (null/undefined).
  struct BufferView {
    void* data = nullptr;
    size_t elements = 0;
    bool given = false;
    napi_typedarray_type type = napi_uint8_array;  // set by RawTyped only
  };

  // Raw Node-API: the wrapper classes' checks cost more than the call. Anything that is not a
  // TypedArray counts as absent; src/communicator.ts has checked the array's class with the
  // built-in tag getter, which no object can fake, so its length in elements is what ReadCall
  // checks (asking Node-API for the element type as well walks eleven type tests per buffer).
  static BufferView RawBytes(napi_env env, napi_value value) {
    BufferView v;
    size_t length = 0;
    if (napi_get_typedarray_info(env, value, nullptr, &length, &v.data, nullptr, nullptr) != napi_ok) return v;
    v.elements = length;
    v.given = true;
    return v;
  }

  // As RawBytes, with the element type: for the arguments no TypeScript check stands behind
  // (allgatherv's counts).
  static BufferView RawTyped(napi_env env, napi_value value) {
    BufferView v;
    size_t length = 0;
    if (napi_get_typedarray_info(env, value, &v.type, &length, &v.data, nullptr, nullptr) != napi_ok) return v;
    v.elements = length;
    v.given = true;
    return v;
  }

  // Reads the descriptor and checks it against the buffers, before anything is sent: an
  // unknown schedule id, a buffer smaller than the call, a missing one, or send and recv that
  // overlap without being the same bytes (IN_PLACE passes the same array twice) are CollErrors.
  CallArgs ReadCall(const BufferView& send, const BufferView& recv, const BufferView& counts) const {
    // The call descriptor: everything about a collective call but its buffers, written by
    // src/native.ts into `callArea` (a Float64Array over memory this object owns) before each
    // run, in abi::CallField's slots. Passing numbers this way instead of as ten arguments saves
    // most of the cost of crossing into C++, which is the bulk of a small collective's latency.
    const double* d = call_area_;
    const auto field = [d](CallField f) { return d[static_cast<size_t>(f)]; };
    CallArgs a;
    a.collective = static_cast<Collective>(static_cast<int>(field(CallField::kCollective)));
    const int reduce_id = static_cast<int>(field(CallField::kReducePlan));
    const int bcast_id = static_cast<int>(field(CallField::kBcastPlan));
    a.reduce = reduce_id >= 0 ? engine_->Plan(reduce_id) : nullptr;
    a.bcast = bcast_id >= 0 ? engine_->Plan(bcast_id) : nullptr;
    a.send = send.data;
    a.recv = recv.data;
    a.count = static_cast<uint64_t>(field(CallField::kCount));
    a.dtype = static_cast<Dtype>(static_cast<int>(field(CallField::kDtype)));
    a.op = static_cast<ReduceOp>(static_cast<int>(field(CallField::kOp)));
    a.root = static_cast<int>(field(CallField::kRoot));
    a.plan_hash = static_cast<uint32_t>(field(CallField::kPlanHash));
    a.segment = static_cast<uint64_t>(field(CallField::kSegment));
    a.bcast_segment = static_cast<uint64_t>(field(CallField::kBcastSegment));
    if (a.collective == Collective::kAllgather) {
      if (a.reduce == nullptr || a.bcast == nullptr) throw CollError("EINVAL", "unknown schedule id");
      CheckAllgatherBuffers(a, send, recv, counts);
      return a;
    }
    if (a.collective == Collective::kReduceScatter) {
      if (a.reduce == nullptr || a.bcast == nullptr) throw CollError("EINVAL", "unknown schedule id");
      CheckReduceScatterBuffers(a, send, recv, counts);
      return a;
    }
    if (a.collective == Collective::kAlltoall || a.collective == Collective::kAlltoallv) {
      if (a.reduce == nullptr) throw CollError("EINVAL", "unknown schedule id");
      CheckAlltoallBuffers(a, send, recv, counts);
      return a;
    }
    if (a.collective == Collective::kGather || a.collective == Collective::kScatter) {
      if (a.reduce == nullptr) throw CollError("EINVAL", "unknown schedule id");
      if (a.root < 0 || a.root >= engine_->size()) throw CollError("EINVAL", "root " + std::to_string(a.root) + " is not a rank");
      CheckRootedBlockBuffers(a, send, recv, counts);
      return a;
    }
    const bool needs_reduce = a.collective != Collective::kBcast;
    const bool needs_bcast =
        a.collective == Collective::kBcast || a.collective == Collective::kAllreduce || a.collective == Collective::kBarrier;
    if ((needs_reduce && a.reduce == nullptr) || (needs_bcast && a.bcast == nullptr)) {
      throw CollError("EINVAL", "unknown schedule id");
    }
    const size_t bytes = static_cast<size_t>(a.count) * DtypeSize(a.dtype);
    if (a.collective == Collective::kBarrier || bytes == 0) return a;
    // Every buffer given must hold the call; a needed one must be given. A reduce's recv is
    // needed at the root only, a bcast has no send.
    auto fits = [&](const BufferView& b, bool needed) { return b.given ? b.elements >= a.count : !needed; };
    const bool root_or_not_reduce = a.collective != Collective::kReduce || a.root == engine_->rank();
    if (!fits(send, a.collective != Collective::kBcast) || !fits(recv, root_or_not_reduce)) {
      throw CollError("EINVAL", "a buffer is missing or smaller than the call's " + std::to_string(a.count) + " elements");
    }
    if (send.given && recv.given && send.data != recv.data) {
      const auto* s = static_cast<const uint8_t*>(send.data);
      const auto* r = static_cast<const uint8_t*>(recv.data);
      if (s < r + bytes && r < s + bytes) {
        throw CollError("EINVAL", "send and recv overlap (pass IN_PLACE as send to reduce in place)");
      }
    }
    return a;
  }

  // Gather and scatter: block lengths as for allgather. The root's whole vector (gather: recv,
  // scatter: send) holds every block; this rank's block (gather: send, scatter: recv) holds its
  // own, unless at the root it is the vector itself (IN_PLACE); other buffers are not read.
  void CheckRootedBlockBuffers(CallArgs& a, const BufferView& send, const BufferView& recv, const BufferView& counts) const {
    ReadBlockCounts(a, counts);
    const int size = engine_->size();
    const bool gather = a.collective == Collective::kGather;
    const BufferView& whole = gather ? recv : send;
    const BufferView& mine = gather ? send : recv;
    const bool root = a.root == engine_->rank();
    const uint64_t own = a.block_counts.empty() ? a.count : a.block_counts[static_cast<size_t>(engine_->rank())];
    uint64_t total = 0;
    if (root) {
      if (!whole.given) throw CollError("EINVAL", std::string("the root's ") + (gather ? "recv" : "send") + " is missing");
      for (int r = 0; r < size; ++r) {
        const uint64_t n = a.block_counts.empty() ? a.count : a.block_counts[static_cast<size_t>(r)];
        if (n > whole.elements - total)
          throw CollError("EINVAL", std::string(gather ? "recv" : "send") + " has " + std::to_string(whole.elements) +
                                        " elements, fewer than the " + (gather ? "gather gathers" : "scatter scatters"));
        total += n;
      }
      if (whole.data == mine.data && whole.elements == mine.elements) return;  // IN_PLACE
    }
    if (own > 0 && (!mine.given || mine.elements < own)) {
      throw CollError("EINVAL", std::string(gather ? "send" : "recv") + " is missing or smaller than this rank's block of " +
                                    std::to_string(own) + " elements");
    }
    if (!root || own == 0) return;
    const size_t elem = DtypeSize(a.dtype);
    const auto* w = static_cast<const uint8_t*>(whole.data);
    const auto* m = static_cast<const uint8_t*>(mine.data);
    if (m < w + total * elem && w < m + own * elem) throw CollError("EINVAL", "send and recv overlap (pass IN_PLACE at the root instead)");
  }

  // Reduce-scatter: block lengths as for allgather; send (the input) holds every block, recv this
  // rank's — or send is recv itself (IN_PLACE: the input is recv, the block lands at its start).
  void CheckReduceScatterBuffers(CallArgs& a, const BufferView& send, const BufferView& recv, const BufferView& counts) const {
    ReadBlockCounts(a, counts);
    const int size = engine_->size();
    uint64_t total = 0;
    for (int r = 0; r < size; ++r) {
      const uint64_t n = a.block_counts.empty() ? a.count : a.block_counts[static_cast<size_t>(r)];
      if (!send.given || n > send.elements - total)
        throw CollError("EINVAL", "the reduce-scatter's input is missing or holds fewer elements than its blocks");
      total += n;
    }
    const uint64_t own = a.block_counts.empty() ? a.count : a.block_counts[static_cast<size_t>(engine_->rank())];
    if (own > 0 && (!recv.given || recv.elements < own))
      throw CollError("EINVAL", "recv is missing or smaller than this rank's block of " + std::to_string(own) + " elements");
    if (send.data == recv.data) return;  // IN_PLACE
    const size_t elem = DtypeSize(a.dtype);
    const auto* s = static_cast<const uint8_t*>(send.data);
    const auto* r = static_cast<const uint8_t*>(recv.data);
    if (own > 0 && s < r + own * elem && r < s + total * elem)
      throw CollError("EINVAL", "send and recv overlap (pass IN_PLACE as send instead)");
  }

  // Alltoall: `count` elements per block; alltoallv: `counts`, a Float64Array of 2·size — the
  // elements sent to each rank, then those received from each (into block_counts and
  // recv_counts). Send holds the blocks sent, recv those received, in rank order; send == recv
  // is IN_PLACE (the input is recv, which must hold both). Sums are checked against what the
  // buffers hold as they go, so none wraps around.
  void CheckAlltoallBuffers(CallArgs& a, const BufferView& send, const BufferView& recv, const BufferView& counts) const {
    const auto size = static_cast<size_t>(engine_->size());
    if (a.collective == Collective::kAlltoallv) {
      if (!counts.given || counts.type != napi_float64_array || counts.elements != 2 * size) {
        throw CollError("EINVAL", "alltoallv's counts must be a Float64Array of " + std::to_string(2 * size) +
                                      " (the counts sent to each rank, then those received from each)");
      }
      const auto* c = static_cast<const double*>(counts.data);
      a.block_counts.resize(size);
      a.recv_counts.resize(size);
      for (size_t i = 0; i < 2 * size; ++i) {
        if (!(c[i] >= 0 && c[i] <= 9007199254740992.0) || c[i] != static_cast<double>(static_cast<uint64_t>(c[i]))) {
          throw CollError("EINVAL", "alltoallv: count " + std::to_string(i) + " is not a non-negative integer");
        }
        (i < size ? a.block_counts[i] : a.recv_counts[i - size]) = static_cast<uint64_t>(c[i]);
      }
    } else if (counts.given) {
      throw CollError("EINVAL", "alltoall takes no counts");
    }
    const bool v = a.collective == Collective::kAlltoallv;
    // The elements `b` must hold for these counts (or count each), or throws.
    auto holds = [&](const BufferView& b, const std::vector<uint64_t>& per, const char* name) {
      uint64_t total = 0;
      for (size_t r = 0; r < size; ++r) {
        const uint64_t n = v ? per[r] : a.count;
        if (n > 0 && (!b.given || n > b.elements - total)) {
          throw CollError("EINVAL", std::string(name) + " is missing or holds fewer elements than the alltoall's blocks");
        }
        total += n;
      }
      return total;
    };
    const uint64_t received = holds(recv, a.recv_counts, "recv");
    const bool in_place = send.data == recv.data && send.elements == recv.elements;
    const uint64_t sent = holds(in_place ? recv : send, a.block_counts, in_place ? "recv (IN_PLACE)" : "send");
    if (in_place || sent == 0 || received == 0) return;
    const size_t elem = DtypeSize(a.dtype);
    const auto* s = static_cast<const uint8_t*>(send.data);
    const auto* r = static_cast<const uint8_t*>(recv.data);
    if (s < r + received * elem && r < s + sent * elem) throw CollError("EINVAL", "send and recv overlap (pass IN_PLACE as send instead)");
  }

  // allgatherv's, gatherv's and scatterv's block lengths from `counts` (a Float64Array, one per rank), when given.
  void ReadBlockCounts(CallArgs& a, const BufferView& counts) const {
    const int size = engine_->size();
    if (counts.given) {
      if (counts.type != napi_float64_array || counts.elements != static_cast<size_t>(size)) {
        throw CollError("EINVAL", "counts must be a Float64Array of " + std::to_string(size) + " (one per rank), got " +
                                      std::to_string(counts.elements) + " elements");
      }
      const auto* c = static_cast<const double*>(counts.data);
      a.block_counts.resize(static_cast<size_t>(size));
      for (int r = 0; r < size; ++r) {
        // Whole numbers in [0, 2^53] only: anything else has no exact uint64_t.
        if (!(c[r] >= 0 && c[r] <= 9007199254740992.0) || c[r] != static_cast<double>(static_cast<uint64_t>(c[r]))) {
          throw CollError("EINVAL", "counts[" + std::to_string(r) + "] is not a non-negative integer");
        }
        a.block_counts[static_cast<size_t>(r)] = static_cast<uint64_t>(c[r]);
      }
    }
  }

  // Allgather: block lengths from `counts` (a Float64Array, one per rank: allgatherv) or
  // a.count each; recv holds them all, send this rank's block unless it is recv (IN_PLACE).
  void CheckAllgatherBuffers(CallArgs& a, const BufferView& send, const BufferView& recv, const BufferView& counts) const {
    ReadBlockCounts(a, counts);
    const int size = engine_->size();
    if (!recv.given) throw CollError("EINVAL", "recv is missing");
    // Summed against what recv holds as it goes, so no sum wraps around.
    uint64_t total = 0;
    for (int r = 0; r < size; ++r) {
      const uint64_t n = counts.given ? a.block_counts[static_cast<size_t>(r)] : a.count;
      if (n > recv.elements - total)
        throw CollError("EINVAL", "recv has " + std::to_string(recv.elements) + " elements, fewer than the allgather gathers");
      total += n;
    }
    const uint64_t own = counts.given ? a.block_counts[static_cast<size_t>(engine_->rank())] : a.count;
    // IN_PLACE passes recv itself as send; a view of part of recv is not that.
    if (send.data == recv.data && send.elements == recv.elements) return;
    if (own > 0 && (!send.given || send.elements < own)) {
      throw CollError("EINVAL", "send is missing or smaller than this rank's block of " + std::to_string(own) + " elements");
    }
    const size_t elem = DtypeSize(a.dtype);
    const auto* s = static_cast<const uint8_t*>(send.data);
    const auto* r = static_cast<const uint8_t*>(recv.data);
    if (own > 0 && s < r + total * elem && r < s + own * elem) {
      throw CollError("EINVAL", "send and recv overlap (pass IN_PLACE as send when this rank's block is already in recv)");
    }
  }

  // run(recv[, send[, user[, counts]]]) with the descriptor in callArea: one collective on the calling
  // thread (a bcast passes its one buffer only). A plain function bound to this object (no
  // unwrap on every call), installed as an own property of the wrapper in the constructor.
  static napi_value RunEntry(napi_env env, napi_callback_info info) {
    size_t argc = 4;
    napi_value argv[4];
    void* data = nullptr;
    napi_get_cb_info(env, info, &argc, argv, nullptr, &data);
    auto* self = static_cast<NativeEngine*>(data);
    try {
      CallArgs args = self->ReadCall(argc > 1 ? RawBytes(env, argv[1]) : BufferView{}, argc > 0 ? RawBytes(env, argv[0]) : BufferView{},
                                     argc > 3 ? RawTyped(env, argv[3]) : BufferView{});
      napi_valuetype user_type = napi_undefined;
      if (argc > 2) napi_typeof(env, argv[2], &user_type);
      if (user_type == napi_object) self->AttachUserOp(Napi::Env(env), Napi::Object(env, argv[2]), args);
      self->RunNow(args);
    } catch (const CollError& e) {
      ToJsError(Napi::Env(env), e.code(), e.what()).ThrowAsJavaScriptException();
    } catch (const Napi::Error& e) {
      e.ThrowAsJavaScriptException();
    }
    return nullptr;
  }

  // { combine, dst, src }: a user-defined operator. Chunks are copied into the two scratch
  // arrays (JS-owned, so no second ArrayBuffer ever aliases user memory) and combine(k) folds
  // the first k elements of src into dst.
  static void AttachUserOp(Napi::Env env, Napi::Object user, CallArgs& args) {
    Napi::Function combine = user.Get("combine").As<Napi::Function>();
    auto* dst_scratch = static_cast<uint8_t*>(BytesOf(user.Get("dst")));
    auto* src_scratch = static_cast<uint8_t*>(BytesOf(user.Get("src")));
    const size_t capacity = user.Get("dst").As<Napi::TypedArray>().ElementLength();
    const size_t elem = DtypeSize(args.dtype);
    args.custom = [env, combine, dst_scratch, src_scratch, capacity, elem](void* dst, const void* src, size_t n) {
      for (size_t done = 0; done < n;) {
        const size_t k = std::min(capacity, n - done);
        std::memcpy(dst_scratch, static_cast<uint8_t*>(dst) + done * elem, k * elem);
        std::memcpy(src_scratch, static_cast<const uint8_t*>(src) + done * elem, k * elem);
        try {
          combine.Call({Napi::Number::New(env, static_cast<double>(k))});
        } catch (const Napi::Error& e) {
          throw CollError("EINVAL", "the user-defined operator threw: " + e.Message());
        }
        std::memcpy(static_cast<uint8_t*>(dst) + done * elem, dst_scratch, k * elem);
        done += k;
      }
    };
  }

  // Collectives run in call order: queued Promise collectives finish first.
  void RunNow(const CallArgs& args) {
    jobs_->WaitIdle();
    engine_->Run(args);
  }

  // runAsync(recv, send[, counts]) with the descriptor in callArea: the same on the progress thread.
  Napi::Value RunAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    CallArgs args;
    try {
      args = ReadCall(RawBytes(env, info[1]), RawBytes(env, info[0]), info.Length() > 2 ? RawTyped(env, info[2]) : BufferView{});
    } catch (const CollError& e) {
      ThrowJs(env, e.code(), e.what());
    }
    return jobs_->Push(env, std::move(args));
  }

  // Requests over queued jobs (job_queue.h): the number runAsync gave its last job, whether a job
  // has run (its error thrown if it failed), and a blocking wait for one.
  Napi::Value LastJobGetter(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(jobs_->last_job()));
  }

  Napi::Value TestJob(const Napi::CallbackInfo& info) {
    bool done = false;
    Guarded(info.Env(), [&] { done = jobs_->Test(JobId(info[0])); });
    return Napi::Boolean::New(info.Env(), done);
  }

  void WaitJob(const Napi::CallbackInfo& info) {
    Guarded(info.Env(), [&] { jobs_->Await(JobId(info[0])); });
  }

  static uint64_t JobId(const Napi::Value& v) { return static_cast<uint64_t>(v.As<Napi::Number>().Int64Value()); }

  void Close(const Napi::CallbackInfo&) {
    // The fast path's views end with the mapping: detached, they read as empty instead of
    // touching unmapped memory (util.inspect of a closed communicator would).
    for (auto* ref : {&fast_segment_, &fast_counters_}) {
      if (!ref->IsEmpty()) ref->Value().Detach();
      ref->Reset();
    }
    // Windows likewise; they are unmapped once the thread that may run a collective on them
    // has stopped.
    for (auto& [id, ref] : windows_) {
      if (!ref.IsEmpty()) ref.Value().Detach();
      ref.Reset();
    }
    windows_.clear();
    Shutdown();
    engine_->ClearWindows();
  }

  // Windows (shm_window.h). createWindow(id, name, partBytes) / openWindow(…) → an ArrayBuffer
  // over the whole window (header, then every local rank's part; its layout is computed in
  // TypeScript the same way); freeWindow(id) detaches it and unmaps. One ArrayBuffer per window
  // and process: the same memory under two ArrayBuffers is not allowed everywhere. Where the
  // runtime refuses ArrayBuffers over memory it does not own (a V8 sandbox) they throw ENOTSUP
  // after unmapping.
  Napi::Value CreateWindow(const Napi::CallbackInfo& info) { return MapWindow(info, true); }
  Napi::Value OpenWindow(const Napi::CallbackInfo& info) { return MapWindow(info, false); }

  Napi::Value MapWindow(const Napi::CallbackInfo& info, bool create) {
    Napi::Env env = info.Env();
    const uint32_t id = info[0].As<Napi::Number>().Uint32Value();
    const std::string name = info[1].As<Napi::String>().Utf8Value();
    std::vector<uint64_t> parts;
    const auto list = info[2].As<Napi::Array>();
    for (uint32_t i = 0; i < list.Length(); ++i) parts.push_back(static_cast<uint64_t>(list.Get(i).As<Napi::Number>().Int64Value()));
    uint8_t* base = nullptr;
    size_t bytes = 0;
    Guarded(env, [&] {
      base = create ? engine_->CreateWindow(id, name, parts) : engine_->OpenWindow(id, name, parts);
      engine_->windows().Base(id, &bytes);
    });
    if (base == nullptr) return env.Undefined();
    napi_value buffer = nullptr;
    if (napi_create_external_arraybuffer(env, base, bytes, nullptr, nullptr, &buffer) != napi_ok) {
      napi_value ignored = nullptr;
      napi_get_and_clear_last_exception(env, &ignored);
      engine_->FreeWindow(id);
      ThrowJs(env, "ENOTSUP", "this JavaScript runtime refuses ArrayBuffers over shared memory (a V8 sandbox): no windows here");
    }
    windows_[id] = Napi::Persistent(Napi::ArrayBuffer(env, buffer));
    return Napi::Value(env, buffer);
  }

  Napi::Value FreeWindow(const Napi::CallbackInfo& info) {
    const uint32_t id = info[0].As<Napi::Number>().Uint32Value();
    const auto it = windows_.find(id);
    if (it != windows_.end()) {
      if (!it->second.IsEmpty()) it->second.Value().Detach();
      windows_.erase(it);
    }
    return Napi::Boolean::New(info.Env(), engine_->FreeWindow(id));
  }

  void UnlinkWindow(const Napi::CallbackInfo& info) { ShmSegment::Unlink(info[0].As<Napi::String>().Utf8Value()); }

  Napi::Value OwnRegionNodes(const Napi::CallbackInfo& info) { return ToInt32Array(info.Env(), engine_->OwnRegionNodes()); }

  // What the JavaScript fast path (src/runtime/fast-path.ts) works on: { segment, counters,
  // layout, localIndex, asymmetric } — ArrayBuffers over the node's segment (from its base to
  // the end of the shared area's slots) and over the engine's CallCounters, valid until close()
  // detaches them. Undefined without a segment, on a second call, or where the runtime refuses
  // ArrayBuffers over memory it does not own (a V8 sandbox): then every call goes through the
  // executor.
  Napi::Value FastPath(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    uint8_t* base = engine_->segment_base();
    if (base == nullptr || shut_down_) return env.Undefined();
    // Once per engine: the same memory under two ArrayBuffers is not allowed everywhere.
    if (!fast_segment_.IsEmpty()) return env.Undefined();
    const FastPathLayout l = engine_->fast_path_layout();
    napi_value segment = nullptr;
    napi_value counters = nullptr;
    if (napi_create_external_arraybuffer(env, base, l.span, nullptr, nullptr, &segment) != napi_ok ||
        napi_create_external_arraybuffer(env, &engine_->call_counters(), sizeof(CallCounters), nullptr, nullptr, &counters) != napi_ok) {
      // The pending exception, if any, is the refusal itself.
      napi_value ignored = nullptr;
      napi_get_and_clear_last_exception(env, &ignored);
      return env.Undefined();
    }
    fast_segment_ = Napi::Persistent(Napi::ArrayBuffer(env, segment));
    fast_counters_ = Napi::Persistent(Napi::ArrayBuffer(env, counters));
    auto layout = Napi::Object::New(env);
    const auto put = [&](const char* name, size_t v) { layout.Set(name, Napi::Number::New(env, static_cast<double>(v))); };
    put("abortCode", l.abort_code);
    put("controls", l.controls);
    put("controlStride", l.control_stride);
    put("sleeping", l.sleeping);
    put("idle", l.idle);
    put("callVersion", l.call_version);
    put("call", l.call);
    put("slots", l.slots);
    put("slotStride", l.slot_stride);
    put("slotHeader", l.slot_header);
    put("slotData", l.slot_data);
    put("slotDataBytes", l.slot_data_bytes);
    put("slotDepth", l.slot_depth);
    auto out = Napi::Object::New(env);
    out.Set("segment", Napi::Value(env, segment));
    out.Set("counters", Napi::Value(env, counters));
    out.Set("layout", layout);
    out.Set("localIndex", Napi::Number::New(env, engine_->local_index()));
    out.Set("asymmetric", Napi::Boolean::New(env, engine_->asymmetric_fences()));
    return out;
  }

  // awaitAreaDeposits(call, from, to): Engine::AwaitAreaDeposits (throws the call's error).
  void AwaitAreaDeposits(const Napi::CallbackInfo& info) {
    const uint32_t call = info[0].As<Napi::Number>().Uint32Value();
    const auto from = static_cast<size_t>(info[1].As<Napi::Number>().Uint32Value());
    const auto to = static_cast<size_t>(info[2].As<Napi::Number>().Uint32Value());
    Guarded(info.Env(), [&] { engine_->AwaitAreaDeposits(call, from, to); });
  }

  void RingLocal(const Napi::CallbackInfo& info) { engine_->RingLocal(static_cast<size_t>(info[0].As<Napi::Number>().Uint32Value())); }

  void Shutdown() {
    if (shut_down_) return;
    shut_down_ = true;
    jobs_->Stop();
    // A Promise collective still waiting on its peers must end for the thread to be joined.
    engine_->RequestClose();
    jobs_->Join();
    engine_->Close();
    main_slice_.reset();
  }

  Napi::Value SegmentBytesGetter(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(engine_->segment_bytes()));
  }

  Napi::Value SharedMemory(const Napi::CallbackInfo& info) {
    const Engine::SharedMemoryUse use = engine_->shared_memory_use();
    Napi::Object o = Napi::Object::New(info.Env());
    const auto set = [&](const char* key, uint64_t v) { o.Set(key, Napi::Number::New(info.Env(), static_cast<double>(v))); };
    set("segmentBytes", use.segment);
    set("controlBytes", use.controls);
    set("outboxesBytes", use.outboxes);
    set("outboxBytes", use.outbox);
    set("bcastRegionsBytes", use.regions);
    set("nodeAreaBytes", use.node_area);
    set("channels", use.channels.channels);
    set("channelsBytes", use.channels.bytes);
    set("largestOutboxUse", use.channels.largest_rank_bytes);
    return o;
  }

  std::unique_ptr<Engine> engine_;
  // Promise collectives; kept until this object goes (settlements may still be on their way).
  std::unique_ptr<JobQueue> jobs_;
  // The scheduler slice requested for the threads that run collectives (wait.h), microseconds.
  uint32_t slice_us_ = 0;
  std::unique_ptr<SchedulerSlice> main_slice_;
  double* call_area_ = nullptr;
  Napi::Reference<Napi::Float64Array> call_area_ref_;
  // The fast path's ArrayBuffers (FastPath), detached by close().
  Napi::Reference<Napi::ArrayBuffer> fast_segment_;
  Napi::Reference<Napi::ArrayBuffer> fast_counters_;
  // Each window's ArrayBuffer by id, detached by freeWindow() and close().
  std::map<uint32_t, Napi::Reference<Napi::ArrayBuffer>> windows_;
  bool shut_down_ = false;
};

namespace {

Napi::Value SegmentBytes(const Napi::CallbackInfo& info) {
  const size_t local_size = info[0].As<Napi::Number>().Uint32Value();
  const uint64_t outbox = static_cast<uint64_t>(info[1].As<Napi::Number>().Int64Value());
  return Napi::Number::New(info.Env(), static_cast<double>(SegmentLayout(local_size, outbox, BcastParamsOf(info[2])).total_bytes()));
}

// { name: value } of one of abi_generated.h's tables.
template <typename Info, size_t N>
Napi::Object AbiTable(Napi::Env env, const Info (&table)[N]) {
  Napi::Object out = Napi::Object::New(env);
  for (const Info& e : table) out.Set(e.name, Napi::Number::New(env, static_cast<double>(e.value)));
  return out;
}

// The numbers src/ takes from abi/abi.yaml too (test/native-tables.test.ts compares them with
// this object), as this addon was compiled with them: from abi_generated.h, and from the
// functions and constants that use it. A TypeScript side generated from another version of the
// spec than the addon's fails there.
Napi::Object NativeTables(Napi::Env env) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("stepKinds", AbiTable(env, abi::kStepKindTable));
  out.Set("stepWords", Napi::Number::New(env, static_cast<double>(kStepWords)));
  out.Set("callFields", AbiTable(env, abi::kCallFieldTable));
  out.Set("collectives", AbiTable(env, abi::kCollectiveTable));

  // Datatypes and operators by the names the engine reports in its errors; which pairs have
  // a kernel (the rest are refused by TypeScript before they reach the engine).
  Napi::Object dtypes = Napi::Object::New(env);
  Napi::Object dtype_bytes = Napi::Object::New(env);
  Napi::Object ops = Napi::Object::New(env);
  Napi::Object supported = Napi::Object::New(env);
  for (size_t o = 0; o < abi::kReduceOpCount; ++o) {
    ops.Set(OpName(static_cast<ReduceOp>(o)), Napi::Number::New(env, static_cast<double>(o)));
  }
  for (size_t t = 0; t < abi::kDtypeCount; ++t) {
    const auto dtype = static_cast<Dtype>(t);
    dtypes.Set(DtypeName(dtype), Napi::Number::New(env, static_cast<double>(t)));
    dtype_bytes.Set(DtypeName(dtype), Napi::Number::New(env, static_cast<double>(DtypeSize(dtype))));
    Napi::Array with = Napi::Array::New(env);
    uint32_t n = 0;
    for (size_t o = 0; o < abi::kReduceOpCount; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      if (FindReduce(dtype, op).in_place != nullptr) with.Set(n++, Napi::String::New(env, OpName(op)));
    }
    supported.Set(DtypeName(dtype), with);
  }
  out.Set("datatypes", dtypes);
  out.Set("datatypeBytes", dtype_bytes);
  out.Set("reduceOps", ops);
  out.Set("reduceOpsByDatatype", supported);

  out.Set("trees", AbiTable(env, abi::kTreeKindTable));
  out.Set("waitModes", AbiTable(env, abi::kWaitModeTable));

  out.Set("shmAllreduceMaxBytes", Napi::Number::New(env, static_cast<double>(ShmAllreduce::kMaxBytes)));
  out.Set("shmAllgatherColumnBytes", Napi::Number::New(env, static_cast<double>(ShmAllreduce::kColumnBytes)));

  // By index, as they travel (index 0, no abort, left out).
  Napi::Array aborts = Napi::Array::New(env);
  for (size_t i = 1; i < sizeof(kAbortCodes) / sizeof(kAbortCodes[0]); ++i)
    aborts.Set(static_cast<uint32_t>(i - 1), Napi::String::New(env, kAbortCodes[i]));
  out.Set("abortCodes", aborts);
  // An outbox's own header and each channel block's, which its channels' rings come after.
  out.Set("outboxHeaderBytes", Napi::Number::New(env, static_cast<double>(kOutboxHeaderBytes)));
  out.Set("channelBlockHeaderBytes", Napi::Number::New(env, static_cast<double>(kChannelBlockHeaderBytes)));

  out.Set("eagerBytes", Napi::Number::New(env, static_cast<double>(kEagerBytes)));
  out.Set("layerExchangeBytes", Napi::Number::New(env, static_cast<double>(P2PLinks::kExchangeBytes)));
  out.Set("messageHeaderBytes", Napi::Number::New(env, static_cast<double>(sizeof(MsgHeader))));
  return out;
}

// stepRoundTrip(words) → { steps, words }: the steps DecodeSteps reads from encodeSchedule's
// words, each field by abi/abi.yaml's name, and EncodeSteps' words for them. For tests only
// (test/step-codec.test.ts): both sides' step codecs on one list.
Napi::Value StepRoundTrip(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto data = info[0].As<Napi::Int32Array>();
  const std::vector<Step> steps = DecodeSteps(data.Data(), data.ElementLength());
  Napi::Array decoded = Napi::Array::New(env, steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    Napi::Object o = Napi::Object::New(env);
    const auto set = [&](const char* name, int64_t v) { o.Set(name, Napi::Number::New(env, static_cast<double>(v))); };
    set("kind", static_cast<int32_t>(s.kind));
    set("peer", s.peer);
    set("level", s.level);
    set("group", s.group);
    set("pollMicros", s.poll_us);
    set("first", s.first);
    set("count", s.count);
    set("of", s.of);
    set("peer2", s.peer2);
    set("first2", s.first2);
    set("count2", s.count2);
    set("order", s.order);
    o.Set("joined", Napi::Boolean::New(env, s.joined));
    o.Set("everyRankCombines", Napi::Boolean::New(env, s.every_rank_combines));
    decoded.Set(static_cast<uint32_t>(i), o);
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("steps", decoded);
  out.Set("words", ToInt32Array(env, EncodeSteps(steps)));
  return out;
}

}  // namespace

// openP2PLayer(native: External of a topocoll_p2p_v1) → a handle that keeps the layer (P2PLayer)
// while JavaScript holds it, with { rank, size, tagBase } read from the struct. Engines that use
// the layer hold it too: release() runs once the handle was collected and they all closed.
Napi::Value OpenP2PLayer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<P2PLayer> layer;
  try {
    layer = P2PLayer::For(P2PStructOf(info[0]));
  } catch (const CollError& e) {
    ThrowJs(env, e.code(), e.what());
  }
  auto handle = Napi::External<std::shared_ptr<P2PLayer>>::New(env, new std::shared_ptr<P2PLayer>(layer),
                                                               [](Napi::Env, std::shared_ptr<P2PLayer>* held) { delete held; });
  Napi::Object out = Napi::Object::New(env);
  out.Set("handle", handle);
  out.Set("rank", Napi::Number::New(env, layer->rank()));
  out.Set("size", Napi::Number::New(env, layer->size()));
  out.Set("tagBase", Napi::Number::New(env, layer->tag_base()));
  return out;
}

Napi::Object InitAddon(Napi::Env env, Napi::Object exports) {
  exports.Set("NativeEngine", NativeEngine::Define(env));
  exports.Set("JsPointToPoint", DefineJsPointToPoint(env));
  exports.Set("NativeMessages", DefineNativeMessages(env));
  exports.Set("openP2PLayer", Napi::Function::New(env, OpenP2PLayer));
  ExportLayerMessages(env, exports);
  ExportProbes(env, exports);
  exports.Set("segmentBytes", Napi::Function::New(env, SegmentBytes));
  // Limits TypeScript plans with (segments of schedules with exchanges).
  exports.Set("eagerBytes", Napi::Number::New(env, static_cast<double>(kEagerBytes)));
  exports.Set("layerExchangeBytes", Napi::Number::New(env, static_cast<double>(P2PLinks::kExchangeBytes)));
  exports.Set("messageHeaderBytes", Napi::Number::New(env, static_cast<double>(sizeof(MsgHeader))));
  exports.Set("nativeTables", NativeTables(env));
  exports.Set("stepRoundTrip", Napi::Function::New(env, StepRoundTrip));
  return exports;
}

}  // namespace topocoll

static Napi::Object Init(Napi::Env env, Napi::Object exports) { return topocoll::InitAddon(env, exports); }

NODE_API_MODULE(topocoll_addon, Init)
