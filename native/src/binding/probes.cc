#include "binding/probes.h"

#include <sched.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "base/copy_rate.h"
#include "base/errors.h"
#include "base/placement.h"
#include "binding/js_error.h"
#include "binding/js_values.h"

namespace topocoll {
namespace {

// Binds the calling thread (the main thread, which forks child processes) to `cpus`; children
// spawned meanwhile inherit the mask. Returns the previous mask.
Napi::Value SetThreadAffinity(const Napi::CallbackInfo& info) {
  cpu_set_t previous, next;
  CPU_ZERO(&previous);
  CPU_ZERO(&next);
  sched_getaffinity(0, sizeof previous, &previous);
  for (int cpu : IntList(info[0])) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &next);
  }
  if (sched_setaffinity(0, sizeof next, &next) != 0) ThrowJs(info.Env(), "EINVAL", "sched_setaffinity: " + ErrnoText(errno));
  Napi::Array out = Napi::Array::New(info.Env());
  uint32_t n = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &previous)) out.Set(n++, Napi::Number::New(info.Env(), cpu));
  }
  return out;
}

// pageNodes(view): the NUMA node of every page of a buffer (move_pages in query mode).
Napi::Value PageNodesOf(const Napi::CallbackInfo& info) {
  auto view = info[0].As<Napi::TypedArray>();
  return ToInt32Array(info.Env(), PageNodes(BytesOf(view), view.ByteLength()));
}

// crossCoreRates(bytes, rounds, writerCpu, readerCpu): { writeShared, readRemote } in bytes/µs.
Napi::Value CrossCoreRatesOf(const Napi::CallbackInfo& info) {
  CrossCoreRates rates{};
  try {
    rates = MeasureCrossCoreRates(static_cast<size_t>(info[0].As<Napi::Number>().Int64Value()), info[1].As<Napi::Number>().Int32Value(),
                                  info[2].As<Napi::Number>().Int32Value(), info[3].As<Napi::Number>().Int32Value());
  } catch (const CollError& e) {
    ThrowJs(info.Env(), e.code(), e.what());
  }
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("writeShared", rates.write_shared);
  out.Set("readRemote", rates.read_remote);
  return out;
}

// combineRate(bytes, rounds): bytes/µs of the built-in float64 sum on this thread.
Napi::Value CombineRateOf(const Napi::CallbackInfo& info) {
  try {
    return Napi::Number::New(info.Env(), MeasureCombineRate(static_cast<size_t>(info[0].As<Napi::Number>().Int64Value()),
                                                            info[1].As<Napi::Number>().Int32Value()));
  } catch (const CollError& e) {
    ThrowJs(info.Env(), e.code(), e.what());
  }
}

// crossCoreLatencyNs(cpuA, cpuB, roundTrips): one-way ns of a cache line between the two CPUs.
Napi::Value CrossCoreLatencyOf(const Napi::CallbackInfo& info) {
  try {
    return Napi::Number::New(info.Env(),
                             MeasureCrossCoreLatencyNs(info[0].As<Napi::Number>().Int32Value(), info[1].As<Napi::Number>().Int32Value(),
                                                       info[2].As<Napi::Number>().Int32Value()));
  } catch (const CollError& e) {
    ThrowJs(info.Env(), e.code(), e.what());
  }
}

}  // namespace

void ExportProbes(Napi::Env env, Napi::Object exports) {
  exports.Set("setThreadAffinity", Napi::Function::New(env, SetThreadAffinity));
  exports.Set("pageNodes", Napi::Function::New(env, PageNodesOf));
  exports.Set("crossCoreRates", Napi::Function::New(env, CrossCoreRatesOf));
  exports.Set("combineRate", Napi::Function::New(env, CombineRateOf));
  exports.Set("crossCoreLatencyNs", Napi::Function::New(env, CrossCoreLatencyOf));
}

}  // namespace topocoll
