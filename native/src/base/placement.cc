#include "base/placement.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace topocoll {

std::vector<int32_t> PageNodes(const void* data, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(data) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
  std::vector<void*> pages;
  for (uintptr_t p = first; p < end; p += page) pages.push_back(reinterpret_cast<void*>(p));
  std::vector<int32_t> status(pages.size(), 0);
  if (pages.empty()) return status;
#ifdef SYS_move_pages
  // nodes == nullptr: query only.
  if (syscall(SYS_move_pages, 0, pages.size(), pages.data(), nullptr, status.data(), 0) != 0) return {};
  return status;
#else
  return {};
#endif
}

}  // namespace topocoll
