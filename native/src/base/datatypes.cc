#include "base/datatypes.h"

#include <algorithm>
#include <type_traits>

namespace topocoll {

namespace {

// Plain loops over restrict pointers: with -O3 the compiler vectorises each of them. Every
// operator is one functor, used by both forms: dst op= src, and dst = a op b.
template <typename T, typename Op>
void Apply(void* dst_v, const void* src_v, size_t n) {
  T* __restrict dst = static_cast<T*>(dst_v);
  const T* __restrict src = static_cast<const T*>(src_v);
  const Op f;
  for (size_t i = 0; i < n; ++i) dst[i] = f(dst[i], src[i]);
}
template <typename T, typename Op>
void Apply3(void* dst_v, const void* a_v, const void* b_v, size_t n) {
  T* __restrict dst = static_cast<T*>(dst_v);
  const T* __restrict a = static_cast<const T*>(a_v);
  const T* __restrict b = static_cast<const T*>(b_v);
  const Op f;
  for (size_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

// Integer arithmetic is done on the unsigned type so overflow wraps (as in a JS typed array)
// instead of being undefined behaviour; at least as wide as unsigned int, since narrower
// unsigned types would be promoted to (signed) int, and 65535 · 65535 overflows it.
template <typename T, bool = std::is_integral_v<T>>
struct Arith {
  using type = T;
};
template <typename T>
struct Arith<T, true> {
  using type = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
};

template <typename T>
struct Sum {
  using U = typename Arith<T>::type;
  T operator()(T a, T b) const { return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); }
};
template <typename T>
struct Prod {
  using U = typename Arith<T>::type;
  T operator()(T a, T b) const { return static_cast<T>(static_cast<U>(a) * static_cast<U>(b)); }
};
template <typename T>
struct Min {
  T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T>
struct Max {
  T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T>
struct Band {
  T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
template <typename T>
struct Bor {
  T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
template <typename T>
struct Bxor {
  T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
template <typename T>
struct Land {
  T operator()(T a, T b) const { return static_cast<T>(a != 0 && b != 0); }
};
template <typename T>
struct Lor {
  T operator()(T a, T b) const { return static_cast<T>(a != 0 || b != 0); }
};
// Uint8ClampedArray: arithmetic saturates at 0 and 255, as assigning to the array would.
template <typename T>
struct ClampedSum {
  T operator()(T a, T b) const { return static_cast<T>(std::min(255, a + b)); }
};
template <typename T>
struct ClampedProd {
  T operator()(T a, T b) const { return static_cast<T>(std::min(255, a * b)); }
};

template <typename T, template <typename> class Op>
ReduceKernels Make() {
  return {Apply<T, Op<T>>, Apply3<T, Op<T>>};
}

template <typename T>
ReduceKernels ForType(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return Make<T, Sum>();
    case ReduceOp::kProd: return Make<T, Prod>();
    case ReduceOp::kMin: return Make<T, Min>();
    case ReduceOp::kMax: return Make<T, Max>();
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::kBand: return Make<T, Band>();
      case ReduceOp::kBor: return Make<T, Bor>();
      case ReduceOp::kBxor: return Make<T, Bxor>();
      case ReduceOp::kLand: return Make<T, Land>();
      case ReduceOp::kLor: return Make<T, Lor>();
      default: break;
    }
  }
  return {};
}

}  // namespace

size_t DtypeSize(Dtype t) {
  const auto i = static_cast<size_t>(t);
  return i < abi::kDtypeCount ? abi::kDtypeTable[i].bytes : 0;
}

const char* DtypeName(Dtype t) {
  const auto i = static_cast<size_t>(t);
  return i < abi::kDtypeCount ? abi::kDtypeTable[i].name : "unknown";
}

const char* OpName(ReduceOp op) {
  const auto i = static_cast<size_t>(op);
  return i < abi::kReduceOpCount ? abi::kReduceOpTable[i].name : "a user-defined operator";
}

ReduceKernels FindReduce(Dtype t, ReduceOp op) {
  switch (t) {
    case Dtype::kInt8: return ForType<int8_t>(op);
    case Dtype::kUint8: return ForType<uint8_t>(op);
    case Dtype::kUint8Clamped:
      if (op == ReduceOp::kSum) return Make<uint8_t, ClampedSum>();
      if (op == ReduceOp::kProd) return Make<uint8_t, ClampedProd>();
      return ForType<uint8_t>(op);
    case Dtype::kInt16: return ForType<int16_t>(op);
    case Dtype::kUint16: return ForType<uint16_t>(op);
    case Dtype::kInt32: return ForType<int32_t>(op);
    case Dtype::kUint32: return ForType<uint32_t>(op);
    case Dtype::kFloat32: return ForType<float>(op);
    case Dtype::kFloat64: return ForType<double>(op);
    case Dtype::kInt64: return ForType<int64_t>(op);
    case Dtype::kUint64: return ForType<uint64_t>(op);
    default: return {};
  }
}

}  // namespace topocoll
