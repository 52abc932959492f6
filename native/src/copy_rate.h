// The two copies of an S0 bcast when they cross cores: the root copying into queue lines that
// readers on another core hold (each line must be taken back from them), and a reader copying
// lines the root has just written. `topocoll tune shm` reports them beside the plain copy rate.
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

}  // namespace topocoll
