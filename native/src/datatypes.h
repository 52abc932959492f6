// Element types and reduction operators, numbered as in src/runtime/datatypes.ts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace topocoll {

enum class Dtype : uint8_t {
  kInt8 = 0,
  kUint8 = 1,
  kUint8Clamped = 2,
  kInt16 = 3,
  kUint16 = 4,
  kInt32 = 5,
  kUint32 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kInt64 = 9,
  kUint64 = 10,
  kCount = 11,
};

enum class ReduceOp : uint8_t {
  kSum = 0,
  kProd = 1,
  kMin = 2,
  kMax = 3,
  kBand = 4,
  kBor = 5,
  kBxor = 6,
  kLand = 7,
  kLor = 8,
  kCount = 9,
};

size_t DtypeSize(Dtype t);
const char* DtypeName(Dtype t);
const char* OpName(ReduceOp op);

// dst[i] = dst[i] op src[i] for n elements.
using ReduceFn = void (*)(void* dst, const void* src, size_t n);
// dst[i] = a[i] op b[i] (dst apart from a and b): the same bits as copying a to dst and then
// combining b into it, in one pass.
using Reduce3Fn = void (*)(void* dst, const void* a, const void* b, size_t n);
struct ReduceKernels {
  ReduceFn in_place = nullptr;
  Reduce3Fn apart = nullptr;
};
// Both null when the pair is not supported (bitwise and logical operators on floating-point types).
ReduceKernels FindReduce(Dtype t, ReduceOp op);

// A user-defined operator: combines n elements of src into dst (dst = dst op src).
using CustomReduce = std::function<void(void* dst, const void* src, size_t n)>;

// The reduction of one call, as the executor and every shared-memory engine take it: a
// built-in kernel or the caller's operator; reducer(dst, src, n) is dst = dst op src.
struct Reducer {
  ReduceFn kernel = nullptr;
  Reduce3Fn kernel3 = nullptr;  // dst = a op b; with kernel
  const CustomReduce* custom = nullptr;
  // a op b and b op a have the same bits (integer operators, floating-point sum and product):
  // the order of a step's operands can then be ignored.
  bool symmetric = false;
  explicit operator bool() const { return kernel != nullptr || custom != nullptr; }
  void operator()(void* dst, const void* src, size_t n) const {
    if (kernel != nullptr)
      kernel(dst, src, n);
    else
      (*custom)(dst, src, n);
  }
};

}  // namespace topocoll
