// The one padding constant of the shared-memory structures.
#pragma once

#include <cstddef>

namespace topocoll {

// Data written by different processes (or threads) starts at least this far apart, aligned to
// it: alignas(kFalseSharingBytes) on every such field or struct. Two writers on one cache line
// make it bounce between their cores on every store (false sharing). 128, not the 64-byte line
// of x86 and most Arm cores, because x86's L2 adjacent-line prefetcher fetches lines in aligned
// 128-byte pairs, so writers on the two lines of one pair still contend; some cores (Apple M,
// POWER) have 128-byte lines outright. A field aligned to it also starts a 64-byte line, so
// "these fields share one line" layouts (a doorbell, a slot's mark with its header) hold.
inline constexpr size_t kFalseSharingBytes = 128;

}  // namespace topocoll
