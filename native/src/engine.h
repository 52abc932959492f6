// The per-process communication engine: the node's shared segment with its channels, the TCP
// links to other nodes, the schedules TypeScript compiled, and the executor that runs one
// collective per call. No Node-API here: the addon layer wraps it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "datatypes.h"
#include "message.h"
#include "shm_bcast.h"
#include "shm_channel.h"
#include "shm_segment.h"
#include "tcp_links.h"
#include "wait.h"

namespace topocoll {

// One step of a schedule (see src/algorithms/schedule.ts).
enum class StepKind : int32_t { kSend = 1, kRecv = 2, kRecvReduce = 3, kShmBcast = 4 };
struct Step {
  StepKind kind;
  int32_t peer;   // the other rank; for kShmBcast the group's source
  int32_t level;
  int32_t group;  // kShmBcast: the shared-memory group id registered with SetShmGroup
};

struct EngineOptions {
  int rank = 0;
  int size = 1;
  // Global ranks on this node, ascending; this rank is among them.
  std::vector<int> local_ranks;
  // Bytes of each one-way shared-memory channel (a power of two).
  uint64_t channel_bytes = 1 << 20;
  // More processes on the node than cores: spin less before yielding.
  bool oversubscribed = false;
  // The S0 shared-memory bcast engine's queues and trees.
  ShmBcastParams bcast;
  // Node leader: use membarrier-based asymmetric fences when the kernel offers them (wait.h).
  bool asymmetric_fences = true;
};

// A user-defined operator: combines n elements of src into dst (dst = dst op src).
using CustomReduce = std::function<void(void* dst, const void* src, size_t n)>;

// The reduction of one call: a built-in kernel or the caller's operator.
struct Reducer {
  ReduceFn kernel = nullptr;
  const CustomReduce* custom = nullptr;
  explicit operator bool() const { return kernel != nullptr || custom != nullptr; }
  void operator()(void* dst, const void* src, size_t n) const {
    if (kernel != nullptr) kernel(dst, src, n);
    else (*custom)(dst, src, n);
  }
};

// Header op code of user-defined operators (ranks cannot tell two such operators apart).
constexpr uint8_t kUserOpCode = 255;

// Everything one collective call needs.
struct CallArgs {
  Collective collective;
  const std::vector<Step>* reduce = nullptr;  // reduce phase (reduce, allreduce, barrier)
  const std::vector<Step>* bcast = nullptr;   // bcast phase (bcast, allreduce, barrier)
  const void* send = nullptr;                 // reduce input; equals recv when IN_PLACE
  void* recv = nullptr;                       // bcast buffer / reduce result
  uint64_t count = 0;
  Dtype dtype = Dtype::kUint8;
  ReduceOp op = ReduceOp::kSum;
  // Set for a user-defined operator (then `op` is ignored); runs on the calling thread.
  CustomReduce custom;
  int root = 0;
  uint32_t plan_hash = 0;
};

class Engine {
 public:
  explicit Engine(EngineOptions options);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  int rank() const { return options_.rank; }

  // --- setup, in this order ---
  int ListenTcp();
  // Size of the node's segment for these options.
  static size_t SegmentBytes(size_t local_size, uint64_t channel_bytes, const ShmBcastParams& bcast);
  // The node leader creates the segment; the others open it once the leader said so.
  void CreateSegment(const std::string& name);
  void OpenSegment(const std::string& name);
  // Leader: waits until every local rank mapped the segment, then unlinks its name.
  void WaitAllMappedAndUnlink(const std::string& name, int timeout_ms);
  void ConnectTcp(const std::string& token, const std::vector<TcpPeer>& peers, int timeout_ms);
  // Starts the watcher that notices dead local peers and aborts.
  void Start();

  // --- use ---
  void SetPlan(int id, std::vector<Step> steps);
  // A group of ranks of this node that broadcasts through the S0 engine (global ranks).
  void SetShmGroup(int id, const std::vector<int>& ranks);
  const std::vector<Step>* Plan(int id) const;
  void Run(const CallArgs& args);
  // Marks this rank as gone on purpose, stops the watcher, closes links. Idempotent.
  void Close();

  size_t segment_bytes() const { return segment_.size(); }
  // NUMA node of every page of this rank's own S0 region (empty without a segment).
  std::vector<int32_t> OwnRegionNodes() const;

 private:
  class Guard;
  struct LocalPeer {
    int rank;
    RankControl* control;
  };

  void InitViews();
  void Abort(const std::string& code, const std::string& message);
  [[noreturn]] void ThrowAborted() const;
  void Watch();

  void Transfer(const std::vector<Step>& steps, const MsgHeader& header, const void* send, void* recv, size_t bytes,
                bool reduce_phase, const Reducer& reducer, size_t elem, Guard& guard);
  void NormalizeAlone(const CallArgs& args, const Reducer& reducer, size_t bytes);
  void PublishCall(const MsgHeader& call);
  static uint32_t CallHash(const MsgHeader& h);
  bool ReadPublishedCall(int local_index, MsgHeader* out) const;
  void SendTo(int peer, const MsgHeader& header, const void* data, size_t bytes, Guard& guard);
  void RecvFrom(int peer, const MsgHeader& expected, void* dst, size_t bytes, const Reducer& reducer, size_t elem, Guard& guard);
  void CheckHeader(const MsgHeader& expected, const MsgHeader& got, int peer);
  int LocalIndex(int rank) const;
  uint8_t* Scratch(size_t bytes);

  EngineOptions options_;
  int local_index_ = 0;
  std::unordered_map<int, int> local_index_of_;
  WaitPolicy policy_;

  ShmSegment segment_;
  SegmentHeader* header_ = nullptr;
  std::vector<LocalPeer> locals_;
  // channels_[from * L + to]
  std::vector<ShmChannel> channels_;

  std::unique_ptr<ShmBcast> shm_bcast_;
  uint8_t* own_region_ = nullptr;
  size_t own_region_bytes_ = 0;
  TcpLinks tcp_;
  // By id (ids are small and dense). Each schedule is allocated on its own: queued Promise
  // collectives hold pointers to theirs while new ones are registered.
  std::vector<std::unique_ptr<std::vector<Step>>> plans_;
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> staging_;
  uint32_t seq_ = 0;
  bool closed_ = false;

  std::thread watcher_;
  std::mutex watcher_mutex_;
  std::condition_variable watcher_cv_;
  bool watcher_stop_ = false;
};

}  // namespace topocoll
