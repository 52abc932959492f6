// Where pages live: the NUMA node of each page of a range, from move_pages(2) in query mode
// (no page is moved). Used to check that first touch put a rank's shared region on its node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace topocoll {

// One entry per page of [data, data + bytes): the node number, or a negative errno
// (-ENOENT: not yet touched; -EFAULT: not mapped). Empty when the kernel has no move_pages.
std::vector<int32_t> PageNodes(const void* data, size_t bytes);

}  // namespace topocoll
