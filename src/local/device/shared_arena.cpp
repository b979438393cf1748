#include "atomr/local/device/shared_arena.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/managed_external_buffer.hpp>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include "atomr/common/log.hpp"

namespace atomr::local {

// Boost.Interprocess's best-fit allocator keeps its bookkeeping inside the region it manages:
// it works on any mapping, at any address (offset pointers), which is what a memfd region is.
struct shared_arena::allocator {
  boost::interprocess::managed_external_buffer segment;
};

shared_arena::shared_arena(int fd, std::byte* base, std::size_t bytes, std::uint64_t dev, std::uint64_t ino)
    : pid_(static_cast<int>(getpid())), fd_(fd), base_(base), bytes_(bytes), dev_(dev), ino_(ino) {
  allocator_.reset(
      new allocator{boost::interprocess::managed_external_buffer(boost::interprocess::create_only, base_, bytes_)});
}

shared_arena::~shared_arena() {
  allocator_.reset();
  munmap(base_, bytes_);
  close(fd_);
}

shared_arena* shared_arena::instance() {
  // Made once and kept for the life of the process: buffers from it may outlive every device.
  static shared_arena* const arena = []() -> shared_arena* {
    auto refuse = [](const std::string& why) -> shared_arena* {
      log::get("devices")->debug("host buffers come from the heap, not shared memory: {}", why);
      return nullptr;
    };
    const int fd = memfd_create("atomr-host-arena", MFD_CLOEXEC);
    if (fd < 0) return refuse(std::string("memfd_create: ") + std::strerror(errno));
    // (A sparse file: pages are allocated as they are touched.)
    if (ftruncate(fd, static_cast<off_t>(k_arena_bytes)) != 0) {
      const int e = errno;
      close(fd);
      return refuse(std::string("ftruncate: ") + std::strerror(e));
    }
    void* map = mmap(nullptr, k_arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (map == MAP_FAILED) {
      const int e = errno;
      close(fd);
      return refuse(std::string("mmap: ") + std::strerror(e));
    }
    (void)madvise(map, k_arena_bytes, MADV_DONTFORK);  // (advice only: without it, fork still works)
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      const int e = errno;
      munmap(map, k_arena_bytes);
      close(fd);
      return refuse(std::string("fstat: ") + std::strerror(e));
    }
    try {
      return new shared_arena(fd, static_cast<std::byte*>(map), k_arena_bytes, static_cast<std::uint64_t>(st.st_dev),
                              static_cast<std::uint64_t>(st.st_ino));
    } catch (const std::exception& e) {
      munmap(map, k_arena_bytes);
      close(fd);
      return refuse(std::string("the arena's allocator: ") + e.what());
    }
  }();
  return arena;
}

void* shared_arena::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  std::lock_guard lock(mutex_);
  return allocator_->segment.allocate_aligned(bytes, k_alignment, std::nothrow);
}

void shared_arena::release(void* p) {
  std::lock_guard lock(mutex_);
  if (!quarantined_.empty() && quarantined_.count(p) != 0) return;
  allocator_->segment.deallocate(p);
}

void shared_arena::quarantine(const void* p) {
  std::lock_guard lock(mutex_);
  quarantined_.insert(p);
}

}  // namespace atomr::local
