// What crossing cores costs, and what combining costs. The two copies of an S0 bcast: the root copying into queue lines
// that readers on another core hold (each line must be taken back from them), and a reader
// copying lines the root has just written — `topocoll tune shm` reports them beside the plain
// copy rate. And the time one cache line takes from one core to the other, which `topocoll
// bench` reports around its runs: on a VM it changes as the host moves the virtual CPUs.
#pragma once

#include <cstddef>

namespace topocoll {

struct CrossCoreRates {
  double write_shared;  // bytes/µs copying into lines the other core has read
  double read_remote;   // bytes/µs copying lines the other core has just written
};

// Mean rates over `rounds` rounds of `bytes`: a thread on `writer_cpu` copies into a buffer, a
// thread on `reader_cpu` then copies it out, in turn (copy time only). Throws CollError when a
// thread cannot be placed on its CPU.
CrossCoreRates MeasureCrossCoreRates(size_t bytes, int rounds, int writer_cpu, int reader_cpu);

// Mean one-way time, in ns, of a cache line between a thread on `cpu_a` and one on `cpu_b`
// passing a counter back and forth `round_trips` times. Throws CollError when a thread cannot
// be placed on its CPU.
double MeasureCrossCoreLatencyNs(int cpu_a, int cpu_b, int round_trips);

// Bytes/µs the built-in sum over float64 combines on the calling thread: the mean over `rounds`
// rounds of adding a `bytes`-long buffer into another of the same length, the operator alone
// (no message around it). What combining costs a rank where nothing hides it.
double MeasureCombineRate(size_t bytes, int rounds);

}  // namespace topocoll
