#include "shm/shm_window.h"

#include <new>
#include <utility>

#include "base/errors.h"

namespace topocoll {

namespace {

// Parts start on page boundaries (abi/abi.yaml's window.pageBytes, as in src/runtime/windows.ts).
constexpr uint64_t kPartAlign = abi::kWindowPageBytes;
uint64_t PageUp(uint64_t bytes) { return (bytes + kPartAlign - 1) / kPartAlign * kPartAlign; }

}  // namespace

WindowLayout::WindowLayout(const std::vector<uint64_t>& part_bytes) : lengths(part_bytes) {
  uint64_t at = PageUp(ShmWindow::CountersBytes(part_bytes.size()));
  for (uint64_t bytes : part_bytes) {
    offsets.push_back(at);
    at += PageUp(bytes);
  }
  total_bytes = at;
}

ShmWindow ShmWindow::Create(const std::string& name, const WindowLayout& layout) {
  ShmSegment segment = ShmSegment::Create(name, layout.total_bytes);
  auto* h = new (segment.base()) WindowHeader();
  h->magic = kWindowMagic;
  h->local_size = static_cast<uint32_t>(layout.lengths.size());
  h->total_bytes = layout.total_bytes;
  for (size_t i = 0; i < layout.lengths.size(); ++i) {
    new (&reinterpret_cast<WindowCounter*>(segment.base() + abi::kWindowHeaderBytes)[i]) WindowCounter{};
  }
  return ShmWindow(std::move(segment), layout);
}

ShmWindow ShmWindow::Open(const std::string& name, const WindowLayout& layout) {
  ShmSegment segment = ShmSegment::Open(name);
  const auto* h = reinterpret_cast<const WindowHeader*>(segment.base());
  if (segment.size() != layout.total_bytes || h->magic != kWindowMagic || h->local_size != layout.lengths.size() ||
      h->total_bytes != layout.total_bytes) {
    throw CollError("EINVAL", "shared window " + name + " does not have the layout this rank computed");
  }
  return ShmWindow(std::move(segment), layout);
}

void WindowTable::Add(uint32_t id, ShmWindow window) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!windows_.emplace(id, std::move(window)).second) throw CollError("EINVAL", "window " + std::to_string(id) + " exists already");
}

bool WindowTable::Remove(uint32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return windows_.erase(id) > 0;
}

void WindowTable::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.clear();
}

bool WindowTable::Locate(const void* p, size_t bytes, size_t local, WindowPlace* place) const {
  const auto* q = static_cast<const uint8_t*>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, w] : windows_) {
    const WindowLayout& l = w.layout();
    if (local >= l.offsets.size()) continue;
    const uint8_t* begin = w.base() + l.offsets[local];
    if (q >= begin && bytes <= l.lengths[local] && q + bytes <= begin + l.lengths[local]) {
      *place = WindowPlace{id, static_cast<uint64_t>(q - w.base())};
      return true;
    }
  }
  return false;
}

uint8_t* WindowTable::Base(uint32_t id, size_t* bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = windows_.find(id);
  if (it == windows_.end()) return nullptr;
  *bytes = it->second.bytes();
  return it->second.base();
}

WindowCounter* WindowTable::Counter(uint32_t id, size_t local) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = windows_.find(id);
  if (it == windows_.end() || local >= it->second.layout().lengths.size()) return nullptr;
  return &it->second.counter(local);
}

uint8_t* WindowTable::PeerPlace(const WindowPlace& mine, size_t me, size_t peer, size_t bytes, uint64_t* offset) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = windows_.find(mine.id);
  if (it == windows_.end()) return nullptr;
  const WindowLayout& l = it->second.layout();
  if (me >= l.offsets.size() || peer >= l.offsets.size() || mine.offset < l.offsets[me]) return nullptr;
  const uint64_t at = mine.offset - l.offsets[me];
  if (at > l.lengths[peer] || bytes > l.lengths[peer] - at) return nullptr;
  *offset = at;
  return it->second.base() + l.offsets[peer] + at;
}

}  // namespace topocoll
