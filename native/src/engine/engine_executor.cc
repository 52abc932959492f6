// The executor: one collective call (Engine::Run) as the phases of its schedules, each phase's
// segments through every step, each step on a channel, a TCP link or a shared-memory engine.
#include <algorithm>
#include <cstring>

#include "base/errors.h"
#include "engine/engine.h"

namespace topocoll {

namespace {

// A phase that is one whole-call step of `kind` which reads the call's input itself (the window
// collectives: their setup hands the step the input, PhaseData::input, and starts no
// accumulator; kShmAreaCall: the call runs in RunAreaCall instead of phases).
bool TakesInput(const std::vector<Step>& steps, StepKind kind) { return steps.size() == 1 && steps[0].kind == kind; }

}  // namespace

uint8_t* Engine::Scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void Engine::Run(const CallArgs& args) {
  if (closed_) throw CollError("ECLOSED", "the communicator is closed");
  if (liveness_.aborted()) liveness_.ThrowAborted();
  ++counters_.seq;
  const size_t elem = DtypeSize(args.dtype);
  const size_t bytes = static_cast<size_t>(args.count) * elem;
  const bool scan = args.collective == Collective::kScan || args.collective == Collective::kExscan;
  const bool reduces = args.collective == Collective::kReduce || args.collective == Collective::kAllreduce ||
                       args.collective == Collective::kReduceScatter || scan;
  MsgHeader h{};
  h.magic = kMsgMagic;
  h.seq = counters_.seq;
  h.collective = static_cast<uint8_t>(args.collective);
  h.dtype = static_cast<uint8_t>(args.dtype);
  const bool custom = static_cast<bool>(args.custom);
  h.op = !reduces ? 0 : custom ? kUserOpCode : static_cast<uint8_t>(args.op);
  h.phase = 0;
  h.root = args.root;
  h.count = args.count;
  h.plan_hash = args.plan_hash;
  h.sender = options_.rank;
  Reducer fn;
  if (reduces && custom) {
    fn.custom = &args.custom;
  } else if (reduces) {
    const ReduceKernels kernels = FindReduce(args.dtype, args.op);
    fn.kernel = kernels.in_place;
    fn.kernel3 = kernels.apart;
    const bool floating = args.dtype == Dtype::kFloat32 || args.dtype == Dtype::kFloat64;
    // Floating-point min and max pick an operand, and which one differs for NaN and ±0.
    fn.symmetric = !floating || args.op == ReduceOp::kSum || args.op == ReduceOp::kProd;
  }
  if (reduces && !fn) throw CollError("EINVAL", "unsupported reduction");
  if (args.collective == Collective::kAllreduce || args.collective == Collective::kBarrier || scan) h.root = 0;
  const bool alltoall = args.collective == Collective::kAlltoall || args.collective == Collective::kAlltoallv;
  if (alltoall) {
    // The call's header: root 0, and count the block length of an alltoall (every rank passes
    // the same), 0 for alltoallv. Each message then carries its own block's length (RunPairStep).
    h.root = 0;
    if (args.collective == Collective::kAlltoallv) h.count = 0;
  }
  BlockTable& table = block_table_;
  const bool rank_blocks = args.collective == Collective::kAllgather || args.collective == Collective::kGather ||
                           args.collective == Collective::kScatter || args.collective == Collective::kReduceScatter;
  if (rank_blocks) {
    if (args.collective == Collective::kAllgather || args.collective == Collective::kReduceScatter) h.root = 0;
    FillAllgatherBlocks(args, table);
    // Ranks that disagree on the block lengths disagree on the call: fold them into what the
    // header compares (the total, and a hash of the lengths for allgatherv).
    h.count = table.displs.back() + table.counts.back();
    if (!args.block_counts.empty()) h.plan_hash ^= BlockCountsHash(args.block_counts);
  }
  // Every message of this call also carries the identity of this rank's previous call: ranks
  // that disagreed on it without noticing (a bcast whose two "roots" only sent) disagree here.
  const uint32_t this_call = CallHash(h);
  h.plan_hash ^= counters_.previous_call;
  counters_.previous_call = this_call;
  const uint64_t segment = args.segment == 0 || args.segment > args.count ? args.count : args.segment;
  liveness_.PublishCall(h);
  Guard guard(liveness_, h);
  try {
    if (args.reduce != nullptr && TakesInput(*args.reduce, StepKind::kShmAreaCall)) {
      RunAreaCall(args, h, table, fn, guard);
      return;
    }
    auto* recv = static_cast<uint8_t*>(args.recv);
    const auto* send = static_cast<const uint8_t*>(args.send);
    switch (args.collective) {
      case Collective::kBcast: {
        PhaseData data{recv, args.count, segment, elem};
        RunPhase(*args.bcast, h, data, Reducer{}, guard);
        break;
      }
      case Collective::kReduce: {
        // The accumulator: the result buffer at the root, scratch elsewhere — needed only by a
        // rank that receives; one that only sends reads its input.
        const bool root = options_.rank == args.root;
        uint8_t* acc = root ? recv : ReceivesIn(*args.reduce) ? Scratch(bytes) : nullptr;
        // A rank that only sends never writes B: its input serves as B.
        PhaseData data{acc != nullptr ? acc : const_cast<uint8_t*>(send), args.count, segment, elem};
        if (acc != nullptr && acc != send && bytes > 0) StartAccumulator(data, send, fn);
        RunPhase(*args.reduce, h, data, fn, guard);
        // The root's result must be whole; scratch elsewhere is dropped.
        if (root && data.pending != nullptr) data.pending->Materialize(0, args.count);
        if (root) NormalizeAlone(args, fn, bytes);
        break;
      }
      case Collective::kAllreduce:
      case Collective::kBarrier: {
        // The result buffer is every rank's accumulator; the bcast phase then spreads it. A
        // lazy accumulator stays lazy through it: what the bcast phase overwrites (at two
        // ranks, the half the other rank reduced) is never copied from the input first. The
        // window allreduce combines straight out of every rank's send: no accumulator.
        PhaseData data{recv, args.count, segment, elem};
        if (TakesInput(*args.reduce, StepKind::kShmWindowAllreduce))
          data.input = send;
        else if (recv != send && bytes > 0)
          StartAccumulator(data, send, fn);
        RunPhase(*args.reduce, h, data, fn, guard);
        h.phase = 1;
        guard.SetPhase(1);
        RunPhase(*args.bcast, h, data, Reducer{}, guard);
        if (data.pending != nullptr) data.pending->Materialize(0, args.count);
        NormalizeAlone(args, fn, bytes);
        break;
      }
      case Collective::kAllgather: {
        // This rank's block to its place, then the gather phase in column segments (every step
        // moves one rank's block, at most `segment` elements of it), then the whole result down
        // in the bcast phase's segments.
        const uint64_t own = table.counts[static_cast<size_t>(options_.rank)];
        uint8_t* place = recv + table.displs[static_cast<size_t>(options_.rank)] * elem;
        // send == recv is IN_PLACE: the block is at its place already.
        if (send != recv && send != place && own > 0) std::memcpy(place, send, static_cast<size_t>(own * elem));
        const uint64_t longest = *std::max_element(table.counts.begin(), table.counts.end());
        const uint64_t column = args.segment == 0 || args.segment > longest ? longest : args.segment;
        PhaseData gather{recv, longest, column, elem};
        gather.blocks = &table;
        // The window allgather reads the others' blocks where they lie: this rank's own block
        // is its send (in its window part), or its place in recv for IN_PLACE.
        if (TakesInput(*args.reduce, StepKind::kShmWindowAllgather)) gather.input = send != recv ? send : place;
        RunPhase(*args.reduce, h, gather, Reducer{}, guard);
        h.phase = 1;
        guard.SetPhase(1);
        const uint64_t total = h.count;
        PhaseData down{recv, total, args.bcast_segment == 0 || args.bcast_segment > total ? total : args.bcast_segment, elem};
        RunPhase(*args.bcast, h, down, Reducer{}, guard);
        break;
      }
      case Collective::kScan:
      case Collective::kExscan: {
        // One phase on B = `of` slots of the call's elements (src/algorithms/scan.ts), in column
        // segments of `segment` elements: B is laid out segment by segment, segment k's slots
        // side by side (slots·n_k elements from slots·start_k), so RunPhase's segments of
        // slots·segment elements, each split into `of` equal blocks, are segment k's slots. Slot
        // 0 starts as the input, the last ends as this rank's exclusive prefix E (rank 0 has
        // none). exscan: E; scan: E op input (rank 0: the input).
        const size_t slots = args.reduce->empty() ? 1 : std::max<size_t>(1, (*args.reduce)[0].of);
        uint8_t* b = Scratch(slots * bytes);
        const uint64_t column = segment;
        for (uint64_t start = 0; start < args.count; start += column) {
          const uint64_t n = std::min(column, args.count - start);
          std::memcpy(b + slots * start * elem, send + start * elem, static_cast<size_t>(n * elem));
        }
        PhaseData data{b, args.count * slots, column * slots, elem};
        RunPhase(*args.reduce, h, data, fn, guard);
        if (bytes == 0 || (options_.rank == 0 && args.collective == Collective::kExscan)) break;
        if (options_.rank == 0) {
          if (send != recv) std::memcpy(recv, send, bytes);
          break;
        }
        for (uint64_t start = 0; start < args.count; start += column) {
          const uint64_t n = std::min(column, args.count - start);
          uint8_t* e = b + (slots * start + (slots - 1) * n) * elem;
          if (args.collective == Collective::kScan) fn(e, send + start * elem, n);
          std::memcpy(recv + start * elem, e, static_cast<size_t>(n * elem));
        }
        break;
      }
      case Collective::kReduceScatter: {
        // The whole vector in scratch, starting as the input (lazily for large ones): the reduce
        // phase combines it toward the leaders in segments of the whole vector, the phase of rank
        // blocks reduce-scatters and scatters it in column segments; then this rank's block to
        // recv. IN_PLACE: send is recv, whose first elements get the block once B holds it.
        const uint64_t total = h.count;
        const auto me = static_cast<size_t>(options_.rank);
        uint8_t* acc = Scratch(static_cast<size_t>(total) * elem);
        PhaseData data{acc, total, args.segment == 0 || args.segment > total ? total : args.segment, elem};
        if (total > 0) StartAccumulator(data, send, fn);
        RunPhase(*args.reduce, h, data, fn, guard);
        h.phase = 1;
        guard.SetPhase(1);
        const uint64_t longest = *std::max_element(table.counts.begin(), table.counts.end());
        PhaseData blocks{acc, longest, args.bcast_segment == 0 || args.bcast_segment > longest ? longest : args.bcast_segment, elem};
        blocks.blocks = &table;
        blocks.pending = data.pending;
        RunPhase(*args.bcast, h, blocks, fn, guard);
        const uint64_t at = table.displs[me];
        const uint64_t own = table.counts[me];
        if (data.pending != nullptr) data.pending->Materialize(at, at + own);
        if (own > 0) std::memmove(recv, acc + at * elem, static_cast<size_t>(own * elem));
        break;
      }
      case Collective::kAlltoall:
      case Collective::kAlltoallv: {
        // One phase of pair blocks, never segmented (PairTable). IN_PLACE (send == recv) sends
        // from a copy of the input: recv fills while blocks still leave from it. This rank's own
        // block goes straight to its place; a rank that sends itself another length than it
        // receives from itself disagrees with itself (EMISMATCH, as any pair that disagrees).
        PairTable& t = pair_table_;
        const uint8_t* input = send;
        if (send == recv) {
          uint64_t total = args.block_counts.empty() ? args.count * static_cast<uint64_t>(options_.size) : 0;
          for (uint64_t c : args.block_counts) total += c;
          alltoall_input_.resize(static_cast<size_t>(total) * elem);
          if (total > 0) std::memcpy(alltoall_input_.data(), send, static_cast<size_t>(total) * elem);
          input = alltoall_input_.data();
        }
        FillPairTable(args, input, t);
        const auto me = static_cast<size_t>(options_.rank);
        if (t.send_counts[me] != t.recv_counts[me]) {
          throw CollError("EMISMATCH", "rank " + std::to_string(options_.rank) + " sends itself " + std::to_string(t.send_counts[me]) +
                                           " elements but receives " + std::to_string(t.recv_counts[me]) + " from itself");
        }
        if (t.send_counts[me] > 0)
          std::memcpy(recv + t.recv_displs[me] * elem, input + t.send_displs[me] * elem, static_cast<size_t>(t.send_counts[me]) * elem);
        PhaseData data{recv, 0, 0, elem};
        data.pairs = &t;
        RunPhase(*args.reduce, h, data, Reducer{}, guard);
        break;
      }
      case Collective::kGather:
      case Collective::kScatter: {
        // One phase of rank blocks, in column segments, on B: the whole vector of blocks — at the
        // root its recv (gather) or send (scatter), at a rank whose steps move other ranks'
        // blocks too scratch of the whole vector. A rank whose steps move only its own block
        // works on its own buffer: its entry of the block table is moved to B's start.
        const bool gather = args.collective == Collective::kGather;
        const auto me = static_cast<size_t>(options_.rank);
        const bool root = options_.rank == args.root;
        const uint64_t own = table.counts[me];
        const size_t own_bytes = static_cast<size_t>(own * elem);
        uint8_t* place = nullptr;  // this rank's block in B
        uint8_t* b = nullptr;
        if (root) {
          b = gather ? recv : const_cast<uint8_t*>(send);
          place = b + table.displs[me] * elem;
          // send == recv is IN_PLACE: the root's block is at its place (gather) or stays there (scatter).
          if (gather && send != recv && own_bytes > 0) std::memcpy(place, send, own_bytes);
        } else if (MovesOnlyOwnBlock(*args.reduce)) {
          table.displs[me] = 0;
          b = gather ? const_cast<uint8_t*>(send) : recv;
          place = b;
        } else {
          b = Scratch(static_cast<size_t>(h.count) * elem);
          place = b + table.displs[me] * elem;
          if (gather && own_bytes > 0) std::memcpy(place, send, own_bytes);
        }
        const uint64_t longest = *std::max_element(table.counts.begin(), table.counts.end());
        const uint64_t column = args.segment == 0 || args.segment > longest ? longest : args.segment;
        PhaseData data{b, longest, column, elem};
        data.blocks = &table;
        RunPhase(*args.reduce, h, data, Reducer{}, guard);
        // A scatter's block to recv, unless it arrived there (or stays in send: IN_PLACE at the root).
        if (!gather && place != recv && send != recv && own_bytes > 0) std::memcpy(recv, place, own_bytes);
        break;
      }
    }
  } catch (const CollError& e) {
    // Whatever went wrong mid-collective leaves peers waiting: tell them.
    liveness_.Abort(e.code(), e.what());
    throw;
  }
}

// Between nodes a put is a message that the receiving rank's progress thread takes straight into
// B, and a done count an empty message; inside the node the steps work through the windows.
void Engine::RunOneSided(const Step& s, const MsgHeader& header, uint8_t* b, size_t bytes, Guard& guard) {
  switch (s.kind) {
    case StepKind::kPut:
      if (s.local_peer >= 0) break;
      SendTo(s.peer, -1, header, b, bytes, guard);
      return;
    case StepKind::kAwaitPut: {
      if (s.local_peer >= 0) break;
      Delivery into(b, Reducer{}, false, 1, nullptr, combine_scratch_);
      RecvFrom(s.peer, -1, header, bytes, into, guard);
      return;
    }
    case StepKind::kCountDone:
      if (s.local_peer >= 0) break;
      SendTo(s.peer, -1, header, nullptr, 0, guard);
      return;
    case StepKind::kAwaitDone: {
      // The other nodes' counts first, then this node's (in the window).
      uint8_t nowhere = 0;
      Delivery discard(&nowhere, Reducer{}, false, 1, nullptr, combine_scratch_);
      for (int r = 0; r < options_.size; ++r) {
        if (LocalIndex(r) < 0) RecvFrom(r, -1, header, 0, discard, guard);
      }
      break;
    }
    default: throw CollError("EINVAL", "not a one-sided bcast step");
  }
  const WaitPolicy& policy = s.kind == StepKind::kAwaitDone ? node_policy_ : PolicyFor(s.local_peer);
  windows_.OneSided(s, header, CallHash(header), b, bytes, policy, guard);
}

bool Engine::MovesOnlyOwnBlock(const std::vector<Step>& steps) const {
  for (const Step& s : steps) {
    if (s.of != 0 || s.first != static_cast<uint32_t>(options_.rank)) return false;
  }
  return true;
}

void Engine::RunAreaCall(const CallArgs& args, const MsgHeader& header, const BlockTable& table, const Reducer& reducer, Guard& guard) {
  guard.WaitingOnNode();
  const size_t elem = DtypeSize(args.dtype);
  auto* recv = static_cast<uint8_t*>(args.recv);
  const auto* send = static_cast<const uint8_t*>(args.send);
  const auto root = static_cast<size_t>(args.root);
  switch (args.collective) {
    case Collective::kGather:
      // IN_PLACE at the root: send is recv, and the root's block is at its place.
      shm_allreduce_->Gather(send == recv ? recv + table.displs[root] * elem : send, recv, table.counts, table.displs, elem, header, root,
                             node_policy_, guard);
      return;
    case Collective::kScatter:
      // IN_PLACE at the root: its block stays in send.
      shm_allreduce_->Scatter(send, send == recv ? nullptr : recv, table.counts, table.displs, elem, header, root, node_policy_, guard);
      return;
    case Collective::kReduceScatter:
      shm_allreduce_->ReduceScatter(send, recv, table.counts, table.displs, elem, header, reducer, node_policy_, guard);
      return;
    case Collective::kAlltoall: shm_allreduce_->Alltoall(send, recv, args.count, elem, header, node_policy_, guard); return;
    case Collective::kScan:
    case Collective::kExscan:
      shm_allreduce_->Scan(send, recv, args.count, elem, args.collective == Collective::kExscan, header, reducer, node_policy_, guard);
      return;
    default: throw CollError("EINVAL", "a shared-area call step in a collective that has none");
  }
}

bool Engine::ReceivesIn(const std::vector<Step>& steps) const {
  for (const Step& s : steps) {
    // The shared area's reduce writes B at its destination only.
    const bool sends = s.kind == StepKind::kSend || (s.kind == StepKind::kShmAreaReduce && s.peer != options_.rank);
    if (!sends) return true;
  }
  return false;
}

void Engine::StartAccumulator(PhaseData& data, const uint8_t* input, const Reducer& reducer) {
  const size_t bytes = static_cast<size_t>(data.count) * data.elem;
  // Small messages copy at once: the copy costs less than keeping track. User operators have
  // no one-pass form.
  if (bytes < kLazyInputBytes || reducer.kernel3 == nullptr) {
    std::memcpy(data.buffer, input, bytes);
    return;
  }
  pending_.Start(input, data.buffer, data.elem);
  data.pending = &pending_;
}

void Engine::RunPhase(const std::vector<Step>& steps, MsgHeader& header, PhaseData& data, const Reducer& reducer, Guard& guard) {
  if (data.pairs != nullptr) {
    // An alltoall's phase: never segmented; a run of joined steps is one packed message each
    // way (SetPlan has checked that every joined step is followed by the rest of its run).
    for (size_t i = 0; i < steps.size();) {
      size_t last = i;
      while (steps[last].joined) ++last;
      if (last == i)
        RunStep(steps[i], header, data, 0, 0, 0, reducer, guard);
      else
        RunPackedRun(steps, i, last + 1, header, *data.pairs, data.elem, guard);
      i = last + 1;
    }
    return;
  }
  const uint64_t segments = data.count == 0 ? 1 : (data.count + data.segment - 1) / data.segment;
  for (uint64_t k = 0; k < segments; ++k) {
    const uint64_t start = k * data.segment;
    const uint64_t n = data.count == 0 ? 0 : std::min(data.segment, data.count - start);
    for (const Step& s : steps) RunStep(s, header, data, start, n, k, reducer, guard);
  }
}

namespace {

// Elements [begin, end) of blocks [first, first + count) of `of` blocks over n elements.
struct ElementRange {
  uint64_t begin, end;
};
ElementRange Blocks(uint64_t n, uint32_t first, uint32_t count, uint32_t of) {
  return {n * first / of, n * (static_cast<uint64_t>(first) + count) / of};
}

}  // namespace

template <class Receive>
void Engine::ExchangeRemote(int peer, const MsgHeader& header, const void* data, size_t bytes, Receive&& receive, Guard& guard) {
  guard.WaitingOn(peer);
  const ByteSlice slices[2] = {{&header, sizeof header}, {data, bytes}};
  try {
    remote_->SendWhileReceiving(peer, slices, 2, Borrowed(receive), guard);
  } catch (const PeerClosed& e) {
    // The send's link ended (a read's ends are reported by the receive: ThrowPeersNotice
    // rethrows those unchanged unless `peer` sent the notice).
    ThrowPeersNotice(e, peer);
  }
}

void Engine::RunStep(const Step& s, const MsgHeader& header, PhaseData& data, uint64_t seg_start, uint64_t seg_n, uint64_t seg_index,
                     const Reducer& reducer, Guard& guard) {
  const size_t elem = data.elem;
  if (data.pairs != nullptr || s.of == kPairBlocks) {
    if (data.pairs == nullptr || s.of != kPairBlocks)
      throw CollError("EINVAL", "a pair-block step outside an alltoall, or another step in one");
    RunPairStep(s, header, *data.pairs, elem, guard);
    return;
  }
  // Elements of B a range names in this segment: blocks of the segment, or the segment's column
  // of one rank's block.
  auto elements = [&](uint32_t first, uint32_t count) -> ElementRange {
    if (s.of != 0) {
      const ElementRange r = Blocks(seg_n, first, count, s.of);
      return {seg_start + r.begin, seg_start + r.end};
    }
    if (data.blocks == nullptr) throw CollError("EINVAL", "a rank-block step outside an allgather");
    const uint64_t len = data.blocks->counts[first];
    const uint64_t at = data.blocks->displs[first];
    return {at + std::min(seg_start, len), at + std::min(seg_start + seg_n, len)};
  };
  const ElementRange range = elements(s.first, s.count);
  const uint64_t begin = range.begin;
  const uint64_t end = range.end;
  const size_t bytes = static_cast<size_t>((end - begin) * elem);
  PendingInput* pending = data.pending;
  // Where a step reads elements [b, e) of B from: the input while nothing was combined into
  // them, else B (after copying whatever of them is still only in the input).
  auto source = [&](uint64_t b, uint64_t e) -> const uint8_t* {
    if (pending != nullptr) {
      if (pending->Untouched(b, e)) return pending->Input(b);
      pending->Materialize(b, e);
    }
    return data.buffer + b * elem;
  };
  // Where elements [b, e) of B arrive: into B, copied or combined with the reducer — with the
  // input standing in for B's own operand while they are untouched (a lazy accumulator).
  auto arriving = [&](uint64_t b, uint64_t e, bool reduce) {
    const void* own = nullptr;
    if (pending != nullptr) {
      if (reduce && pending->Untouched(b, e))
        own = pending->Input(b);
      else if (reduce)
        pending->Materialize(b, e);
      pending->MarkWritten(b, e);
    }
    return Delivery(data.buffer + b * elem, reduce ? reducer : Reducer{}, s.order == 1, elem, own, combine_scratch_);
  };
  switch (s.kind) {
    case StepKind::kSend: SendTo(s.peer, s.local_peer, header, source(begin, end), bytes, guard); return;
    case StepKind::kRecv:
    case StepKind::kRecvReduce: {
      Delivery into = arriving(begin, end, s.kind == StepKind::kRecvReduce);
      RecvFrom(s.peer, s.local_peer, header, bytes, into, guard);
      return;
    }
    case StepKind::kShmBcast: {
      if (pending != nullptr) pending->Materialize(begin, end);
      guard.WaitingOn(s.peer);
      // Tags: the call, the phase and the level, then a fragment number that runs on across the
      // call's segments (every member runs the same segments, so it agrees on the numbers).
      // A rank-block step (the shared-memory allgather) numbers its fragments per block as well:
      // one source may publish several blocks in one segment.
      const uint64_t per_segment = shm_bcast_->MaxFragments(static_cast<size_t>(data.segment * elem));
      const uint64_t publication = s.of == 0 ? seg_index * static_cast<uint64_t>(options_.size) + s.first : seg_index;
      const uint64_t tag_base = (static_cast<uint64_t>(header.seq) << 32) | (static_cast<uint64_t>(header.phase) << 31) |
                                (static_cast<uint64_t>(s.level & 0x7f) << 24) | ((publication * per_segment) & 0xffffff);
      shm_bcast_->Run(s.group, s.local_peer, data.buffer + begin * elem, bytes, tag_base, CallHash(header), GroupPolicy(s.group), guard);
      return;
    }
    case StepKind::kShmReduce: {
      if (pending != nullptr) pending->Materialize(begin, end);
      guard.WaitingOn(s.peer);
      shm_reduce_->Run(s.group, s.local_peer, data.buffer + begin * elem, end - begin, elem, reducer, GroupPolicy(s.group), guard);
      return;
    }
    case StepKind::kShmAllreduce: {
      if (pending != nullptr) pending->Materialize(begin, end);
      guard.WaitingOnNode();
      shm_allreduce_->Run(data.buffer + begin * elem, end - begin, elem, header, s.every_rank_combines, reducer, node_policy_, guard);
      return;
    }
    case StepKind::kShmAreaBcast:
    case StepKind::kShmAreaReduce: {
      if (pending != nullptr) pending->Materialize(begin, end);
      guard.WaitingOnNode();
      const auto root = static_cast<size_t>(s.local_peer);
      if (s.kind == StepKind::kShmAreaBcast)
        shm_allreduce_->Bcast(data.buffer + begin * elem, bytes, header, root, node_policy_, guard);
      else
        shm_allreduce_->Reduce(data.buffer + begin * elem, end - begin, elem, header, root, reducer, node_policy_, guard);
      return;
    }
    case StepKind::kShmAllgather: {
      // The whole call in one step: every block at once, so one column segment of the longest.
      if (data.blocks == nullptr || seg_index != 0 || seg_n != data.count) {
        throw CollError("EINVAL", "a node-wide shared-memory allgather step outside a whole allgather's gather phase");
      }
      guard.WaitingOnNode();
      shm_allreduce_->Allgather(data.buffer, data.blocks->counts, data.blocks->displs, elem, header, s.every_rank_combines, node_policy_,
                                guard);
      return;
    }
    case StepKind::kShmAreaCall:
      // Engine::Run takes such a call whole (RunAreaCall) before any phase runs.
      throw CollError("EINVAL", "a shared-area call step outside the first phase of its call");
    case StepKind::kShmWindowAllreduce:
    case StepKind::kShmWindowAllgather: {
      // The whole call in one step, out of the call's input (PhaseData::input, which only the
      // setup of such a phase hands over): never in a segment, nor outside its phase.
      const bool allgather = s.kind == StepKind::kShmWindowAllgather;
      if (data.input == nullptr || seg_index != 0 || seg_n != data.count || allgather != (data.blocks != nullptr)) {
        throw CollError("EINVAL", allgather ? "a window allgather step outside a window allgather's schedule"
                                            : "a window allreduce step outside a window allreduce's schedule");
      }
      if (allgather)
        windows_.Allgather(data.input, data.buffer, data.blocks->counts, data.blocks->displs, elem, header, s.every_rank_combines,
                           *shm_allreduce_, node_policy_, guard);
      else
        windows_.Allreduce(data.input, data.buffer, data.count, elem, header, reducer, s.every_rank_combines, *shm_allreduce_, node_policy_,
                           guard);
      return;
    }
    case StepKind::kPut:
    case StepKind::kAwaitPut:
    case StepKind::kCountDone:
    case StepKind::kAwaitDone:
      if (pending != nullptr) pending->Materialize(begin, end);
      RunOneSided(s, header, data.buffer + begin * elem, bytes, guard);
      return;
    case StepKind::kSendRecv:
    case StepKind::kSendRecvReduce: {
      const ElementRange into_range = elements(s.first2, s.count2);
      const uint64_t b2 = into_range.begin;
      const uint64_t e2 = into_range.end;
      const size_t in_bytes = static_cast<size_t>((e2 - b2) * elem);
      const uint8_t* out = source(begin, end);
      if (s.local_peer >= 0 && s.local_peer2 >= 0) {
        // Both inside the node: sends and receives interleave, so no transport has to hold the
        // whole segment.
        Delivery into = arriving(b2, e2, s.kind == StepKind::kSendRecvReduce);
        ExchangeLocal(s, header, header, out, bytes, into, in_bytes, guard);
        return;
      }
      const uint64_t limit = ExchangeLimit(s.local_peer, s.local_peer2);
      if (bytes > limit) {
        throw CollError("EINVAL", "an exchange step of " + std::to_string(bytes) +
                                      " bytes between nodes; schedules with such exchanges must run with segments of at most " +
                                      std::to_string(limit) + " bytes here");
      }
      if (DuplexBetween(s.local_peer, s.local_peer2)) {
        Delivery into = arriving(b2, e2, s.kind == StepKind::kSendRecvReduce);
        out = Unaliased(out, bytes, into.next(), in_bytes);
        ExchangeRemote(
            s.peer, header, out, bytes, [&] { RecvFrom(s.peer2, s.local_peer2, header, in_bytes, into, guard); }, guard);
        return;
      }
      // Otherwise both sides send before they receive: the transports hold the whole segment.
      SendTo(s.peer, s.local_peer, header, out, bytes, guard);
      Delivery into = arriving(b2, e2, s.kind == StepKind::kSendRecvReduce);
      RecvFrom(s.peer2, s.local_peer2, header, in_bytes, into, guard);
      return;
    }
  }
  throw CollError("EINVAL", "unknown schedule step kind " + std::to_string(static_cast<int>(s.kind)));
}

// Pair blocks, protocol. Every message of an alltoall carries one block (s, d): its header is the
// call's with `count` set to the block's length, which the sender takes from its send counts
// (s = sender) or from the message that brought the block (staged). The receiver reads the
// header first; if the block is its own (d = receiver) the count must be its recv count for s,
// else EMISMATCH — so two ranks that disagree on a block's length fail at its destination
// before a byte of the body lands anywhere; a block that only passes through is staged at the
// length its message declares. Both sides list a link's messages in the same order (alltoall.ts),
// so the block a receive names is the block that comes.
void Engine::RunPairStep(const Step& s, const MsgHeader& call, PairTable& t, size_t elem, Guard& guard) {
  const auto p = static_cast<uint64_t>(options_.size);
  const auto me = static_cast<uint64_t>(options_.rank);
  const uint8_t* data = nullptr;
  uint64_t count = 0;
  if (s.kind == StepKind::kSend || s.kind == StepKind::kSendRecv) {
    const uint64_t block = s.first;
    if (block / p == me) {
      data = t.send + t.send_displs[block % p] * elem;
      count = t.send_counts[block % p];
    } else {
      const auto found = t.staged.find(block);
      if (found == t.staged.end()) {
        throw CollError("EINVAL", "the alltoall's schedule sends block (" + std::to_string(block / p) + ", " + std::to_string(block % p) +
                                      ") before it came to rank " + std::to_string(me));
      }
      data = t.arena.data() + found->second.at;
      count = found->second.count;
    }
  }
  MsgHeader h = call;
  h.count = count;
  const size_t bytes = static_cast<size_t>(count) * elem;
  switch (s.kind) {
    case StepKind::kSend: SendTo(s.peer, s.local_peer, h, data, bytes, guard); return;
    case StepKind::kRecv: ReceivePairBlock(s.peer, s.local_peer, call, t, s.first, elem, guard); return;
    case StepKind::kSendRecv: {
      const uint64_t in = s.first2;
      if (s.local_peer >= 0 && s.local_peer2 >= 0 && in % p == me && in / p != me) {
        // Both on this node and the incoming block is this rank's (its length known): the two
        // interleave piece by piece, so no ring must hold a block.
        const uint64_t from = in / p;
        MsgHeader want = call;
        want.count = t.recv_counts[from];
        Delivery into(t.recv + t.recv_displs[from] * elem, Reducer{}, false, elem, nullptr, combine_scratch_);
        ExchangeLocal(s, h, want, data, bytes, into, static_cast<size_t>(want.count) * elem, guard);
        return;
      }
      const uint64_t limit = ExchangeLimit(s.local_peer, s.local_peer2);
      if (bytes > limit) {
        throw CollError("EINVAL", "an alltoall exchange of " + std::to_string(bytes) + " bytes with another node (at most " +
                                      std::to_string(limit) + " here)");
      }
      if (DuplexBetween(s.local_peer, s.local_peer2)) {
        // The block received lands in recv or the staging arena, never in what is sent; but a
        // staged block that is sent on moves when that receive grows the arena: send a copy.
        data = Unaliased(data, bytes, t.arena.data(), t.arena.size());
        ExchangeRemote(
            s.peer, h, data, bytes, [&] { ReceivePairBlock(s.peer2, s.local_peer2, call, t, in, elem, guard); }, guard);
        return;
      }
      // Otherwise both sides send first: the transports hold the block.
      SendTo(s.peer, s.local_peer, h, data, bytes, guard);
      ReceivePairBlock(s.peer2, s.local_peer2, call, t, in, elem, guard);
      return;
    }
    default: throw CollError("EINVAL", "a pair-block step that is not a send, a receive or an exchange");
  }
}

// Packed messages, protocol: a run's blocks, in step order, are one message whose count is their
// elements (the run's length × n) — a run of Sends one message to s.peer, of Recvs one from
// s.peer, of SendRecvs one each way. Both sides list the same blocks in the same order
// (alltoall.ts: Bruck's rounds, the hierarchical form's bundles), so the counts agree unless the
// ranks' n do (EMISMATCH). Only an alltoall's (not v): there every block's length is n on every
// rank, so none travels with the message.
void Engine::RunPackedRun(const std::vector<Step>& steps, size_t begin, size_t end, const MsgHeader& call, PairTable& t, size_t elem,
                          Guard& guard) {
  if (!t.uniform) throw CollError("EINVAL", "packed blocks in an alltoallv (only an alltoall's blocks all have one known length)");
  const auto p = static_cast<uint64_t>(options_.size);
  const auto me = static_cast<uint64_t>(options_.rank);
  const size_t block_bytes = static_cast<size_t>(t.n) * elem;
  const size_t bytes = (end - begin) * block_bytes;
  const Step& s = steps[begin];
  const bool sends = s.kind == StepKind::kSend || s.kind == StepKind::kSendRecv;
  const bool receives = s.kind == StepKind::kRecv || s.kind == StepKind::kSendRecv;
  if (sends) {
    pack_out_.resize(bytes);
    for (size_t k = begin; k < end; ++k) {
      const uint64_t block = steps[k].first;
      const uint8_t* data = nullptr;
      if (block / p == me) {
        data = t.send + t.send_displs[block % p] * elem;
      } else {
        const auto found = t.staged.find(block);
        if (found == t.staged.end()) throw CollError("EINVAL", "the alltoall's schedule packs a block before it came here");
        data = t.arena.data() + found->second.at;
      }
      if (block_bytes > 0) std::memcpy(pack_out_.data() + (k - begin) * block_bytes, data, block_bytes);
    }
  }
  MsgHeader h = call;
  h.count = (end - begin) * t.n;
  if (receives) pack_in_.resize(bytes);
  Delivery into(pack_in_.data(), Reducer{}, false, elem, nullptr, combine_scratch_);
  // A peer's probes carry its call's header (count n), the run's message its own count: probes
  // are checked against the call, the message against the run.
  auto receive = [&](int peer, int local_peer) {
    MsgHeader got{};
    ReceiveHeader(peer, local_peer, call, got, guard);
    CheckHeader(h, got, peer);
    ReceiveBody(peer, local_peer, bytes, into, guard);
  };
  if (s.kind == StepKind::kSend) {
    SendTo(s.peer, s.local_peer, h, pack_out_.data(), bytes, guard);
    return;
  }
  if (s.kind == StepKind::kRecv) {
    receive(s.peer, s.local_peer);
  } else if (s.local_peer >= 0 && s.local_peer2 >= 0) {
    ExchangeLocal(s, h, h, pack_out_.data(), bytes, into, bytes, guard);
  } else {
    const uint64_t limit = ExchangeLimit(s.local_peer, s.local_peer2);
    if (bytes > limit) {
      throw CollError("EINVAL", "a packed alltoall exchange of " + std::to_string(bytes) + " bytes with another node (at most " +
                                    std::to_string(limit) + " here)");
    }
    if (DuplexBetween(s.local_peer, s.local_peer2)) {
      ExchangeRemote(
          s.peer, h, pack_out_.data(), bytes, [&] { receive(s.peer2, s.local_peer2); }, guard);
    } else {
      SendTo(s.peer, s.local_peer, h, pack_out_.data(), bytes, guard);
      receive(s.peer2, s.local_peer2);
    }
  }
  for (size_t k = begin; k < end; ++k) {
    const uint64_t block = s.kind == StepKind::kRecv ? steps[k].first : steps[k].first2;
    const uint8_t* in = pack_in_.data() + (k - begin) * block_bytes;
    if (block / p == me) throw CollError("EINVAL", "the alltoall's schedule receives a block of this rank's own");
    uint8_t* at = nullptr;
    if (block % p == me) {
      at = t.recv + t.recv_displs[block / p] * elem;
    } else {
      if (t.staged.count(block) != 0) throw CollError("EINVAL", "the alltoall's schedule receives a block twice");
      if (t.used + block_bytes > t.arena.size()) t.arena.resize(std::max(t.arena.size() * 2, t.used + block_bytes));
      t.staged.emplace(block, PairTable::Staged{t.used, t.n});
      at = t.arena.data() + t.used;
      t.used += block_bytes;
    }
    if (block_bytes > 0) std::memcpy(at, in, block_bytes);
  }
}

void Engine::ReceivePairBlock(int peer, int local_peer, const MsgHeader& call, PairTable& t, uint64_t block, size_t elem, Guard& guard) {
  const auto p = static_cast<uint64_t>(options_.size);
  const auto me = static_cast<uint64_t>(options_.rank);
  const uint64_t from = block / p;
  const uint64_t to = block % p;
  if (from == me) throw CollError("EINVAL", "the alltoall's schedule receives a block of this rank's own");
  MsgHeader got{};
  ReceiveHeader(peer, local_peer, call, got, guard);
  MsgHeader want = call;
  want.count = to == me ? t.recv_counts[from] : got.count;
  CheckHeader(want, got, peer);
  uint8_t* at = nullptr;
  if (to == me) {
    at = t.recv + t.recv_displs[from] * elem;
  } else {
    // A block passing through: staged at the length its message declares (bounded, so that a
    // stray count cannot ask for the impossible).
    if (got.count > (uint64_t{1} << 40) / elem) {
      throw CollError("EMISMATCH", "rank " + std::to_string(peer) + " sent a block of " + std::to_string(got.count) + " elements");
    }
    if (t.staged.count(block) != 0) throw CollError("EINVAL", "the alltoall's schedule receives a block twice");
    const size_t bytes = static_cast<size_t>(got.count) * elem;
    if (t.used + bytes > t.arena.size()) t.arena.resize(std::max(t.arena.size() * 2, t.used + bytes));
    t.staged.emplace(block, PairTable::Staged{t.used, got.count});
    at = t.arena.data() + t.used;
    t.used += bytes;
  }
  Delivery into(at, Reducer{}, false, elem, nullptr, combine_scratch_);
  ReceiveBody(peer, local_peer, static_cast<size_t>(want.count) * elem, into, guard);
}

void Engine::FillPairTable(const CallArgs& args, const uint8_t* send, PairTable& t) const {
  const auto size = static_cast<size_t>(options_.size);
  if (args.block_counts.empty()) {
    t.send_counts.assign(size, args.count);
    t.recv_counts.assign(size, args.count);
  } else if (args.block_counts.size() == size && args.recv_counts.size() == size) {
    t.send_counts = args.block_counts;
    t.recv_counts = args.recv_counts;
  } else {
    throw CollError("EINVAL", "alltoallv: counts for " + std::to_string(args.block_counts.size()) + " ranks, not " + std::to_string(size));
  }
  t.send_displs.resize(size);
  t.recv_displs.resize(size);
  uint64_t s = 0;
  uint64_t r = 0;
  for (size_t i = 0; i < size; ++i) {
    t.send_displs[i] = s;
    t.recv_displs[i] = r;
    s += t.send_counts[i];
    r += t.recv_counts[i];
  }
  t.uniform = args.block_counts.empty();
  t.n = args.count;
  t.send = send;
  t.recv = static_cast<uint8_t*>(args.recv);
  t.staged.clear();
  t.used = 0;
}

void Engine::FillAllgatherBlocks(const CallArgs& args, BlockTable& t) const {
  const auto size = static_cast<size_t>(options_.size);
  if (args.block_counts.empty())
    t.counts.assign(size, args.count);
  else if (args.block_counts.size() == size)
    t.counts = args.block_counts;
  else
    throw CollError("EINVAL",
                    "allgatherv: " + std::to_string(args.block_counts.size()) + " block lengths for " + std::to_string(size) + " ranks");
  t.displs.resize(size);
  uint64_t at = 0;
  for (size_t r = 0; r < size; ++r) {
    t.displs[r] = at;
    at += t.counts[r];
  }
}

uint32_t Engine::BlockCountsHash(const std::vector<uint64_t>& counts) {
  // FNV-1a over the lengths: equal vectors give equal hashes on every rank.
  uint64_t x = 0xcbf29ce484222325ULL;
  for (uint64_t c : counts) {
    x ^= c;
    x *= 0x100000001b3ULL;
  }
  return static_cast<uint32_t>(x ^ (x >> 32));
}

uint32_t Engine::CallHash(const MsgHeader& h) {
  // 32-bit mixes (murmur3's finaliser) of the fields every rank of a call must agree on, one
  // word at a time and the call number last: JavaScript computes the same with Math.imul and
  // keeps everything before the call number from one call to the next (src/runtime/fast-path.ts).
  auto mix = [](uint32_t x) {
    x ^= x >> 16;
    x *= 0x85ebca6bU;
    x ^= x >> 13;
    x *= 0xc2b2ae35U;
    return x ^ (x >> 16);
  };
  uint32_t x = mix(h.plan_hash);
  x = mix(x ^ (static_cast<uint32_t>(h.collective) | (static_cast<uint32_t>(h.dtype) << 8) | (static_cast<uint32_t>(h.op) << 16) |
               (static_cast<uint32_t>(h.phase) << 24)));
  x = mix(x ^ static_cast<uint32_t>(h.root));
  x = mix(x ^ static_cast<uint32_t>(h.count));
  x = mix(x ^ static_cast<uint32_t>(h.count >> 32));
  return mix(x ^ h.seq);
}

void Engine::NormalizeAlone(const CallArgs& args, const Reducer& fn, size_t bytes) {
  // Alone in the job, no operator was applied: logical operators still owe a 0/1 result, which
  // combining the value with itself gives.
  if (options_.size != 1 || bytes == 0 || args.custom) return;
  if (args.op != ReduceOp::kLand && args.op != ReduceOp::kLor) return;
  uint8_t* copy = Scratch(bytes);
  std::memcpy(copy, args.recv, bytes);
  fn(args.recv, copy, args.count);
}

void Engine::SendTo(int peer, int local_peer, const MsgHeader& header, const void* data, size_t bytes, Guard& guard) {
  guard.WaitingOn(peer);
  const ByteSlice slices[2] = {{&header, sizeof header}, {data, bytes}};
  if (local_peer >= 0) {
    channels_->Outgoing(local_peer).Send(slices, 2, PolicyFor(local_peer), guard);
  } else {
    try {
      remote_->Send(peer, slices, 2, guard);
    } catch (const PeerClosed& e) {
      ThrowPeersNotice(e, peer);
    }
  }
}

ShmChannel& Engine::IncomingChannel(int local_peer, const WaitPolicy& policy, Guard& guard) {
  ShmChannel* channel = channels_->Incoming(local_peer);
  if (channel == nullptr) {
    WaitUntil([&] { return (channel = channels_->Incoming(local_peer)) != nullptr; }, node_.own().doorbell, policy, guard);
  }
  return *channel;
}

void Engine::ThrowPeersNotice(const PeerClosed& e, int peer) {
  // The link ended: the peer's abort notice, if it sent one, is what came last — report its
  // reason rather than only the closed link.
  MsgHeader notice{};
  if (e.tail().size() == sizeof notice) {
    std::memcpy(&notice, e.tail().data(), sizeof notice);
    if (notice.magic == kAbortMagic && notice.sender == peer && notice.op > 0 && notice.op < sizeof(kAbortCodes) / sizeof(kAbortCodes[0])) {
      const char* code = kAbortCodes[notice.op];
      throw CollError(code, "rank " + std::to_string(peer) + " stopped the collective (" + code + " there)");
    }
  }
  throw e;
}

void Engine::CheckHeader(const MsgHeader& expected, const MsgHeader& got, int peer) {
  MsgHeader want = expected;
  want.sender = peer;
  const std::string mismatch = DescribeMismatch(want, got, peer);
  if (!mismatch.empty()) throw CollError("EMISMATCH", mismatch);
}

void Engine::RecvFrom(int peer, int local_peer, const MsgHeader& expected, size_t bytes, Delivery& into, Guard& guard) {
  MsgHeader got{};
  ReceiveHeader(peer, local_peer, expected, got, guard);
  CheckHeader(expected, got, peer);
  ReceiveBody(peer, local_peer, bytes, into, guard);
}

void Engine::ReceiveHeader(int peer, int local_peer, const MsgHeader& expected, MsgHeader& got, Guard& guard) {
  guard.WaitingOn(peer);
  if (local_peer >= 0) {
    const WaitPolicy& policy = PolicyFor(local_peer);
    ShmChannel& channel = IncomingChannel(local_peer, policy, guard);
    channel.ReadExact(&got, sizeof got, policy, guard);
    return;
  }
  // Probes a waiting peer sent us come before its next message: a mismatched one is an error,
  // the others (the peer was merely slower) are skipped.
  for (;;) {
    remote_->ReadHeader(peer, &got, guard);
    if (got.magic == kAbortMagic) {
      const char* code = got.op < sizeof(kAbortCodes) / sizeof(kAbortCodes[0]) && got.op > 0 ? kAbortCodes[got.op] : "EPEERLOST";
      throw CollError(code, "rank " + std::to_string(got.sender) + " stopped the collective (" + code + " there)");
    }
    if (got.magic != kProbeMagic) return;
    MsgHeader mine = expected;
    const std::string mismatch = DescribeCallMismatch(mine, got, peer);
    if (!mismatch.empty()) throw CollError("EMISMATCH", mismatch);
  }
}

void Engine::ReceiveBody(int peer, int local_peer, size_t bytes, Delivery& into, Guard& guard) {
  if (local_peer >= 0) {
    const WaitPolicy& policy = PolicyFor(local_peer);
    IncomingChannel(local_peer, policy, guard).Consume(bytes, into, policy, guard);
    return;
  }
  try {
    if (!into.combines()) {
      remote_->ReadBody(peer, into.next(), bytes, guard);
      return;
    }
    // Pieces of kStreamPieceBytes (a multiple of every element size) from the body's start, the
    // shape RemoteLinks promises to frame.
    if (staging_.size() < kStreamPieceBytes) staging_.resize(kStreamPieceBytes);
    for (size_t done = 0; done < bytes;) {
      const size_t piece = std::min(kStreamPieceBytes, bytes - done);
      remote_->ReadBody(peer, staging_.data(), piece, guard);
      into(staging_.data(), piece);
      done += piece;
    }
  } catch (const PeerClosed& e) {
    // The peer stopped in the middle of this body.
    ThrowPeersNotice(e, peer);
  }
}

void Delivery::operator()(const uint8_t* in, size_t len) {
  if (!reducer_) {
    std::memcpy(out_, in, len);
  } else if (own_ != nullptr) {
    // Left operand first, as below: the same bits as copying `own` into out and combining.
    if (!incoming_first_ || reducer_.symmetric)
      reducer_.kernel3(out_, own_, in, len / elem_);
    else
      reducer_.kernel3(out_, in, own_, len / elem_);
    own_ += len;
  } else if (!incoming_first_ || reducer_.symmetric) {
    reducer_(out_, in, len / elem_);
  } else {
    // out = in op out: the operator writes its left operand, so work on a copy of `in`.
    if (scratch_.size() < len) scratch_.resize(len);
    std::memcpy(scratch_.data(), in, len);
    reducer_(scratch_.data(), out_, len / elem_);
    std::memcpy(out_, scratch_.data(), len);
  }
  out_ += len;
}

uint64_t Engine::ExchangeLimit(int local_peer, int local_peer2) const {
  if (local_peer >= 0) return options_.channels.min_capacity - 2 * sizeof(MsgHeader);
  return DuplexBetween(local_peer, local_peer2) ? UINT64_MAX : remote_->BufferedBytes();
}

const uint8_t* Engine::Unaliased(const uint8_t* data, size_t bytes, const uint8_t* into, size_t in_bytes) {
  if (bytes == 0 || in_bytes == 0 || data >= into + in_bytes || into >= data + bytes) return data;
  if (exchange_copy_.size() < bytes) exchange_copy_.resize(bytes);
  std::memcpy(exchange_copy_.data(), data, bytes);
  return exchange_copy_.data();
}

void Engine::ExchangeLocal(const Step& s, const MsgHeader& header, const MsgHeader& expected, const uint8_t* data, size_t bytes,
                           Delivery& into, size_t in_bytes, Guard& guard) {
  ShmChannel& tx = channels_->Outgoing(s.local_peer);
  if (tx.AtOnce(sizeof header + bytes)) {
    // Small: one write the ring holds, then the receive (the fastest path for both).
    SendTo(s.peer, s.local_peer, header, data, bytes, guard);
    RecvFrom(s.peer2, s.local_peer2, expected, in_bytes, into, guard);
    return;
  }
  // Large: a piece out, then whatever has come in, and so on. The peers run in step, each
  // piece is read soon after it was written, and no ring has to hold a whole message. What is
  // sent must not change while it is being sent: a step that receives into the range it sends
  // (recursive doubling) sends a copy.
  data = Unaliased(data, bytes, into.next(), in_bytes);
  const ByteSlice slices[2] = {{&header, sizeof header}, {data, bytes}};
  ShmChannel::Outgoing out{slices, 2};
  MsgHeader got{};
  uint8_t* got_at = reinterpret_cast<uint8_t*>(&got);
  size_t header_left = sizeof got;
  size_t body_left = in_bytes;
  auto read_header = [&](const uint8_t* p, size_t n) {
    std::memcpy(got_at, p, n);
    got_at += n;
  };
  Doorbell& mine = node_.own().doorbell;
  // A quarter of the ring: the sender streams on while the receiver frees the half it waits for.
  const uint64_t piece = std::min<uint64_t>(kExchangePiece, tx.capacity() / 4);
  // Either peer may be the one that must run for this rank to go on.
  const WaitPolicy& policy = PolicyFor(co_runner_[static_cast<size_t>(s.local_peer)] ? s.local_peer : s.local_peer2);
  // The peer we receive from may not have made its channel yet (it does at its first send);
  // ours is made, so no exchange waits on another's channel before its own send.
  ShmChannel* rx = channels_->Incoming(s.local_peer2);
  while (!out.done || header_left > 0 || body_left > 0) {
    bool moved = !out.done && tx.SendSome(out, piece, policy);
    if (rx == nullptr) rx = channels_->Incoming(s.local_peer2);
    if (rx != nullptr && header_left > 0) {
      const size_t n = rx->ConsumeArrived(header_left, read_header, policy);
      header_left -= n;
      moved = moved || n > 0;
      if (n > 0 && header_left == 0) CheckHeader(expected, got, s.peer2);
    }
    if (rx != nullptr && header_left == 0 && body_left > 0) {
      const size_t n = rx->ConsumeArrived(std::min<size_t>(body_left, piece), into, policy);
      body_left -= n;
      moved = moved || n > 0;
    }
    if (moved) continue;
    const bool receiving = header_left > 0 || body_left > 0;
    if (!out.done) tx.AnnounceWaitForRoom(policy);
    guard.WaitingOn(receiving ? s.peer2 : s.peer);
    WaitUntil(
        [&] {
          return (!out.done && tx.HalfFree()) ||
                 (receiving && (rx != nullptr || (rx = channels_->Incoming(s.local_peer2)) != nullptr) && rx->Arrived());
        },
        mine, policy, guard);
  }
}

}  // namespace topocoll
