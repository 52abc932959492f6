#include "datatypes.h"

#include <algorithm>
#include <type_traits>

namespace topocoll {

namespace {

// Plain loops over restrict pointers: with -O3 the compiler vectorises each of them.
template <typename T, typename F>
void Apply(void* dst_v, const void* src_v, size_t n, F f) {
  T* __restrict dst = static_cast<T*>(dst_v);
  const T* __restrict src = static_cast<const T*>(src_v);
  for (size_t i = 0; i < n; ++i) dst[i] = f(dst[i], src[i]);
}

// Integer arithmetic is done on the unsigned type so overflow wraps (as in a JS typed array)
// instead of being undefined behaviour.
template <typename T, bool = std::is_integral_v<T>>
struct Arith {
  using type = T;
};
template <typename T>
struct Arith<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
void Sum(void* d, const void* s, size_t n) {
  using U = typename Arith<T>::type;
  Apply<T>(d, s, n, [](T a, T b) { return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); });
}
template <typename T>
void Prod(void* d, const void* s, size_t n) {
  // At least as wide as unsigned int: narrower unsigned types would be promoted to (signed) int,
  // and 65535 · 65535 overflows it.
  using U = std::common_type_t<typename Arith<T>::type, unsigned>;
  Apply<T>(d, s, n, [](T a, T b) { return static_cast<T>(static_cast<U>(a) * static_cast<U>(b)); });
}
template <typename T>
void Min(void* d, const void* s, size_t n) {
  Apply<T>(d, s, n, [](T a, T b) { return b < a ? b : a; });
}
template <typename T>
void Max(void* d, const void* s, size_t n) {
  Apply<T>(d, s, n, [](T a, T b) { return a < b ? b : a; });
}
template <typename T>
void Band(void* d, const void* s, size_t n) {
  Apply<T>(d, s, n, [](T a, T b) { return static_cast<T>(a & b); });
}
template <typename T>
void Bor(void* d, const void* s, size_t n) {
  Apply<T>(d, s, n, [](T a, T b) { return static_cast<T>(a | b); });
}
template <typename T>
void Bxor(void* d, const void* s, size_t n) {
  Apply<T>(d, s, n, [](T a, T b) { return static_cast<T>(a ^ b); });
}
template <typename T>
void Land(void* d, const void* s, size_t n) {
  Apply<T>(d, s, n, [](T a, T b) { return static_cast<T>(a != 0 && b != 0); });
}
template <typename T>
void Lor(void* d, const void* s, size_t n) {
  Apply<T>(d, s, n, [](T a, T b) { return static_cast<T>(a != 0 || b != 0); });
}

// Uint8ClampedArray: arithmetic saturates at 0 and 255, as assigning to the array would.
void ClampedSum(void* d, const void* s, size_t n) {
  Apply<uint8_t>(d, s, n, [](uint8_t a, uint8_t b) { return static_cast<uint8_t>(std::min(255, a + b)); });
}
void ClampedProd(void* d, const void* s, size_t n) {
  Apply<uint8_t>(d, s, n, [](uint8_t a, uint8_t b) { return static_cast<uint8_t>(std::min(255, a * b)); });
}

template <typename T>
ReduceFn ForType(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return Sum<T>;
    case ReduceOp::kProd: return Prod<T>;
    case ReduceOp::kMin: return Min<T>;
    case ReduceOp::kMax: return Max<T>;
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::kBand: return Band<T>;
      case ReduceOp::kBor: return Bor<T>;
      case ReduceOp::kBxor: return Bxor<T>;
      case ReduceOp::kLand: return Land<T>;
      case ReduceOp::kLor: return Lor<T>;
      default: break;
    }
  }
  return nullptr;
}

}  // namespace

size_t DtypeSize(Dtype t) {
  switch (t) {
    case Dtype::kInt8: case Dtype::kUint8: case Dtype::kUint8Clamped: return 1;
    case Dtype::kInt16: case Dtype::kUint16: return 2;
    case Dtype::kInt32: case Dtype::kUint32: case Dtype::kFloat32: return 4;
    case Dtype::kFloat64: case Dtype::kInt64: case Dtype::kUint64: return 8;
    default: return 0;
  }
}

const char* DtypeName(Dtype t) {
  static const char* const kNames[] = {"int8", "uint8", "uint8clamped", "int16", "uint16", "int32",
                                       "uint32", "float32", "float64", "int64", "uint64"};
  auto i = static_cast<size_t>(t);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "unknown";
}

const char* OpName(ReduceOp op) {
  static const char* const kNames[] = {"sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor"};
  auto i = static_cast<size_t>(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "a user-defined operator";
}

ReduceFn FindReduce(Dtype t, ReduceOp op) {
  switch (t) {
    case Dtype::kInt8: return ForType<int8_t>(op);
    case Dtype::kUint8: return ForType<uint8_t>(op);
    case Dtype::kUint8Clamped:
      if (op == ReduceOp::kSum) return ClampedSum;
      if (op == ReduceOp::kProd) return ClampedProd;
      return ForType<uint8_t>(op);
    case Dtype::kInt16: return ForType<int16_t>(op);
    case Dtype::kUint16: return ForType<uint16_t>(op);
    case Dtype::kInt32: return ForType<int32_t>(op);
    case Dtype::kUint32: return ForType<uint32_t>(op);
    case Dtype::kFloat32: return ForType<float>(op);
    case Dtype::kFloat64: return ForType<double>(op);
    case Dtype::kInt64: return ForType<int64_t>(op);
    case Dtype::kUint64: return ForType<uint64_t>(op);
    default: return nullptr;
  }
}

}  // namespace topocoll
