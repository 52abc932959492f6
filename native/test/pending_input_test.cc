// The lazy accumulator (pending_input.h), driven the way a reduction's steps drive it (see the
// engine's RunStep): sends read a range from the input while nothing was combined into it;
// received blocks are combined straight from the input (dst = input op incoming, one pass) or
// into the materialised accumulator, piece by piece as they arrive; overwriting receives (the
// bcast phase) skip the copy; shared-memory steps materialise first. Random step sequences over
// several element types, operators and sizes — ranges overlapping earlier ones in part, blocks
// arriving late and in pieces — are checked against a plain element-by-element reference.
#include "base/pending_input.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "base/datatypes.h"

namespace topocoll::test {
namespace {

// The operators of datatypes.h, written out element by element.
template <typename T>
T Reference(ReduceOp op, T a, T b, bool clamped) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
    switch (op) {
      case ReduceOp::kSum:
        if (clamped) return static_cast<T>(std::min<unsigned>(255, static_cast<unsigned>(a) + static_cast<unsigned>(b)));
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case ReduceOp::kProd:
        if (clamped) return static_cast<T>(std::min<unsigned>(255, static_cast<unsigned>(a) * static_cast<unsigned>(b)));
        return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ReduceOp::kMin: return std::min(a, b);
      case ReduceOp::kMax: return std::max(a, b);
      case ReduceOp::kBand: return static_cast<T>(a & b);
      case ReduceOp::kBor: return static_cast<T>(a | b);
      case ReduceOp::kBxor: return static_cast<T>(a ^ b);
      case ReduceOp::kLand: return static_cast<T>(a != 0 && b != 0);
      case ReduceOp::kLor: return static_cast<T>(a != 0 || b != 0);
      default: break;
    }
  } else {
    switch (op) {
      case ReduceOp::kSum: return a + b;
      case ReduceOp::kProd: return a * b;
      case ReduceOp::kMin: return b < a ? b : a;
      case ReduceOp::kMax: return a < b ? b : a;
      default: break;
    }
  }
  ADD_FAILURE() << "no reference for operator " << OpName(op);
  return a;
}

template <typename T>
T RandomValue(std::mt19937_64& rng) {
  if constexpr (std::is_floating_point_v<T>) {
    // Near 1: products of many stay finite, sums keep their low bits busy.
    return static_cast<T>(0.5 + static_cast<double>(rng() % 1000003) / 1000003.0);
  } else {
    return static_cast<T>(rng());
  }
}

struct Range {
  uint64_t begin, end;
};

template <typename T>
class LazyReduction {
 public:
  LazyReduction(Dtype dtype, ReduceOp op, uint64_t count, uint32_t seed)
      : op_(op),
        clamped_(dtype == Dtype::kUint8Clamped),
        count_(count),
        kernels_(FindReduce(dtype, op)),
        input_(count),
        acc_(count),
        model_(count),
        written_(count, false),
        rng_(seed) {
    for (auto& v : input_) v = RandomValue<T>(rng_);
    model_ = input_;
    // Bytes the accumulator never received must never be read as if they were the input's.
    std::memset(acc_.data(), 0xA5, acc_.size() * sizeof(T));
    pending_.Start(Bytes(input_.data()), Bytes(acc_.data()), sizeof(T));
  }

  bool supported() const { return kernels_.in_place != nullptr && kernels_.apart != nullptr; }

  // A random range: anywhere, one of `blocks` equal blocks (a schedule's step), or empty.
  Range RandomRange(uint32_t blocks) {
    switch (rng_() % 4) {
      case 0: {
        const uint64_t a = rng_() % (count_ + 1), b = rng_() % (count_ + 1);
        return {std::min(a, b), std::max(a, b)};
      }
      case 1: {
        const uint64_t a = rng_() % (count_ + 1);
        return {a, std::min(count_, a + 1 + rng_() % 8)};
      }
      case 2: return {count_ / 2, count_ / 2};
      default: {
        const uint64_t k = rng_() % blocks;
        return {count_ * k / blocks, count_ * (k + 1) / blocks};
      }
    }
  }

  // A send of [b, e): read from the input while untouched, else from the accumulator.
  void Send(Range r) {
    CheckUntouched(r);
    const T* src = reinterpret_cast<const T*>(Source(r));
    for (uint64_t i = r.begin; i < r.end; ++i) {
      ASSERT_EQ(std::memcmp(&src[i - r.begin], &model_[i], sizeof(T)), 0) << "send reads element " << i;
    }
  }

  // A received block combined into [b, e), arriving in pieces.
  void ReceiveReduce(Range r) {
    CheckUntouched(r);
    std::vector<T> incoming(r.end - r.begin);
    for (auto& v : incoming) v = RandomValue<T>(rng_);
    // As the engine's `arriving`: the input stands in for the accumulator while untouched.
    const T* own = nullptr;
    if (pending_.Untouched(r.begin, r.end))
      own = reinterpret_cast<const T*>(pending_.Input(r.begin));
    else
      pending_.Materialize(r.begin, r.end);
    pending_.MarkWritten(r.begin, r.end);
    Mark(r);
    uint64_t at = 0;
    while (at < incoming.size()) {
      const uint64_t piece = std::min<uint64_t>(incoming.size() - at, 1 + rng_() % 97);
      T* dst = acc_.data() + r.begin + at;
      if (own != nullptr)
        kernels_.apart(dst, own + at, incoming.data() + at, piece);
      else
        kernels_.in_place(dst, incoming.data() + at, piece);
      at += piece;
    }
    for (uint64_t i = r.begin; i < r.end; ++i) model_[i] = Reference<T>(op_, model_[i], incoming[i - r.begin], clamped_);
  }

  // A received block that overwrites [b, e) (the bcast phase of an allreduce).
  void ReceiveCopy(Range r) {
    CheckUntouched(r);
    pending_.MarkWritten(r.begin, r.end);
    Mark(r);
    for (uint64_t i = r.begin; i < r.end; ++i) {
      const T v = RandomValue<T>(rng_);
      acc_[i] = v;
      model_[i] = v;
    }
  }

  // A shared-memory step: materialise, then combine in place in the accumulator.
  void SharedStep(Range r) {
    CheckUntouched(r);
    pending_.Materialize(r.begin, r.end);
    Mark(r);
    for (uint64_t i = r.begin; i < r.end; ++i) {
      ASSERT_EQ(std::memcmp(&acc_[i], &model_[i], sizeof(T)), 0) << "materialised element " << i;
      const T v = RandomValue<T>(rng_);
      T out = acc_[i];
      kernels_.in_place(&out, &v, 1);
      acc_[i] = out;
      model_[i] = Reference<T>(op_, model_[i], v, clamped_);
    }
  }

  // The end of the call: the whole result materialised and equal to the reference.
  void Finish() {
    pending_.Materialize(0, count_);
    for (uint64_t i = 0; i < count_; ++i) {
      ASSERT_EQ(std::memcmp(&acc_[i], &model_[i], sizeof(T)), 0)
          << "element " << i << " of " << count_ << ": " << +acc_[i] << " where the reference has " << +model_[i];
    }
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  static const uint8_t* Bytes(const T* p) { return reinterpret_cast<const uint8_t*>(p); }
  static uint8_t* Bytes(T* p) { return reinterpret_cast<uint8_t*>(p); }

  const uint8_t* Source(Range r) {
    if (pending_.Untouched(r.begin, r.end)) return pending_.Input(r.begin);
    pending_.Materialize(r.begin, r.end);
    Mark(r);
    return Bytes(acc_.data() + r.begin);
  }
  void Mark(Range r) {
    for (uint64_t i = r.begin; i < r.end; ++i) written_[i] = true;
  }
  void CheckUntouched(Range r) {
    // An empty range inside a written one may be reported either way: it names no element.
    if (r.begin == r.end) return;
    bool untouched = true;
    for (uint64_t i = r.begin; i < r.end; ++i) untouched = untouched && !written_[i];
    ASSERT_EQ(pending_.Untouched(r.begin, r.end), untouched) << "Untouched(" << r.begin << ", " << r.end << ")";
  }

  ReduceOp op_;
  bool clamped_;
  uint64_t count_;
  ReduceKernels kernels_;
  std::vector<T> input_, acc_, model_;
  std::vector<bool> written_;
  std::mt19937_64 rng_;
  PendingInput pending_;
};

template <typename T>
void RunRandomSteps(Dtype dtype, ReduceOp op, uint64_t count, uint32_t seed) {
  SCOPED_TRACE(std::string(DtypeName(dtype)) + " " + OpName(op) + " count " + std::to_string(count) + " seed " + std::to_string(seed));
  LazyReduction<T> r(dtype, op, count, seed);
  ASSERT_TRUE(r.supported());
  const uint32_t blocks = 1 + static_cast<uint32_t>(r.rng()() % 8);
  const int steps = 1 + static_cast<int>(r.rng()() % 40);
  for (int s = 0; s < steps && !::testing::Test::HasFatalFailure(); ++s) {
    const Range range = r.RandomRange(blocks);
    switch (r.rng()() % 6) {
      case 0:
      case 1: r.Send(range); break;
      case 2:
      case 3: r.ReceiveReduce(range); break;
      case 4: r.ReceiveCopy(range); break;
      default: r.SharedStep(range); break;
    }
  }
  if (!::testing::Test::HasFatalFailure()) r.Finish();
}

const uint64_t kCounts[] = {1, 2, 7, 64, 1000, 65537};

template <typename T>
void AllOps(Dtype dtype, std::initializer_list<ReduceOp> ops) {
  for (ReduceOp op : ops) {
    for (uint64_t count : kCounts) {
      for (uint32_t seed = 1; seed <= 12; ++seed) {
        RunRandomSteps<T>(dtype, op, count, seed);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

constexpr auto kSum = ReduceOp::kSum, kProd = ReduceOp::kProd, kMin = ReduceOp::kMin, kMax = ReduceOp::kMax, kBand = ReduceOp::kBand,
               kBor = ReduceOp::kBor, kBxor = ReduceOp::kBxor, kLand = ReduceOp::kLand, kLor = ReduceOp::kLor;

TEST(PendingInput, Int8) { AllOps<int8_t>(Dtype::kInt8, {kSum, kProd, kMin, kMax, kBxor, kLand}); }
TEST(PendingInput, Uint8Clamped) { AllOps<uint8_t>(Dtype::kUint8Clamped, {kSum, kProd, kMax}); }
TEST(PendingInput, Int16) { AllOps<int16_t>(Dtype::kInt16, {kSum, kMin, kBor}); }
TEST(PendingInput, Int32) { AllOps<int32_t>(Dtype::kInt32, {kSum, kProd, kMin, kMax, kBand, kBor, kBxor, kLand, kLor}); }
TEST(PendingInput, Uint64) { AllOps<uint64_t>(Dtype::kUint64, {kSum, kProd, kMax, kBxor}); }
TEST(PendingInput, Float32) { AllOps<float>(Dtype::kFloat32, {kSum, kProd, kMin, kMax}); }
TEST(PendingInput, Float64) { AllOps<double>(Dtype::kFloat64, {kSum, kProd, kMin, kMax}); }

// The written-range list directly: ranges merged when they overlap or touch, kept apart
// otherwise; Materialize copies exactly what was not yet written.
TEST(PendingInput, WrittenRangesMergeAndMaterializeCopiesOnlyTheGaps) {
  std::vector<uint32_t> input(100), acc(100, 0xFFFFFFFFu);
  for (uint32_t i = 0; i < 100; ++i) input[i] = i;
  PendingInput p;
  p.Start(reinterpret_cast<const uint8_t*>(input.data()), reinterpret_cast<uint8_t*>(acc.data()), sizeof(uint32_t));
  EXPECT_TRUE(p.Untouched(0, 100));
  p.MarkWritten(10, 20);
  p.MarkWritten(30, 40);
  p.MarkWritten(20, 25);  // touches [10, 20): one range [10, 25)
  p.MarkWritten(5, 5);    // empty: nothing
  EXPECT_TRUE(p.Untouched(0, 10));
  EXPECT_TRUE(p.Untouched(25, 30));
  EXPECT_FALSE(p.Untouched(24, 26));
  EXPECT_FALSE(p.Untouched(0, 11));
  EXPECT_TRUE(p.Untouched(40, 100));
  // Written elements keep the accumulator's bytes (0xFFFFFFFF here); the gaps get the input's.
  p.Materialize(0, 50);
  for (uint32_t i = 0; i < 50; ++i) {
    const bool was_written = (i >= 10 && i < 25) || (i >= 30 && i < 40);
    EXPECT_EQ(acc[i], was_written ? 0xFFFFFFFFu : i) << "element " << i;
  }
  EXPECT_FALSE(p.Untouched(0, 50));
  EXPECT_TRUE(p.Untouched(50, 100));
  for (uint32_t i = 50; i < 100; ++i) EXPECT_EQ(acc[i], 0xFFFFFFFFu) << "element " << i << " copied too early";
  // A new call starts over: everything pending again.
  p.Start(reinterpret_cast<const uint8_t*>(input.data()), reinterpret_cast<uint8_t*>(acc.data()), sizeof(uint32_t));
  EXPECT_TRUE(p.Untouched(0, 100));
}

}  // namespace
}  // namespace topocoll::test
