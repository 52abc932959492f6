// Element types and reduction operators: their codes, names and sizes are abi/abi.yaml's
// (abi_generated.h), shared with src/runtime/datatypes.ts; their kernels are here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "base/abi_generated.h"

namespace topocoll {

using abi::Dtype;
using abi::ReduceOp;

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
