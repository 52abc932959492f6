#include "shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "base/errors.h"

namespace topocoll {

namespace {

uint8_t* MapFd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    throw CollError("EINVAL", "cannot map shared segment " + name + ": " + ErrnoText(err));
  }
  close(fd);  // the mapping keeps the memory; the descriptor is no longer needed
  return static_cast<uint8_t*>(p);
}

}  // namespace

ShmSegment ShmSegment::Create(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    int err = errno;
    throw CollError("EINVAL", "cannot create shared segment " + name + ": " + ErrnoText(err));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    throw CollError("EINVAL", "cannot size shared segment " + name + " to " + std::to_string(bytes) + " bytes: " + ErrnoText(err));
  }
  try {
    return ShmSegment(MapFd(fd, bytes, name), bytes);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
}

ShmSegment ShmSegment::Open(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    int err = errno;
    throw CollError("EINVAL", "cannot open shared segment " + name + ": " + ErrnoText(err));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(kPage)) {
    close(fd);
    throw CollError("EINVAL", "shared segment " + name + " is not initialised");
  }
  return ShmSegment(MapFd(fd, static_cast<size_t>(st.st_size), name), static_cast<size_t>(st.st_size));
}

void ShmSegment::Unlink(const std::string& name) { shm_unlink(name.c_str()); }

ShmSegment::ShmSegment(ShmSegment&& other) noexcept : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, size_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  if (base_ != nullptr) munmap(base_, size_);
}

}  // namespace topocoll
