// The host device's memory, shareable with the other processes of this node.
//
// Host-kind buffers up to ATOMR_HOST_ARENA_MOST bytes (4 MiB) come from one arena per process: a
// memfd mapped MAP_SHARED, which another process of the same user on this node can map too
// (through /proc/<pid>/fd/<fd>). The host backend's shared-memory all_reduce (src/cluster) uses that to
// read the other ranks' inputs and write their outputs where they are, instead of copying every
// input into a shared ring and every output back out.
//
// The arena reserves k_arena_bytes of address space and backs only what is touched; memory freed
// goes back to the arena's allocator (Boost.Interprocess's best-fit allocator over the mapping),
// not to the system, as with malloc's heap. Larger buffers, and any that find the arena full,
// come from the ordinary heap. The mapping is not inherited by fork()ed children
// (MADV_DONTFORK): a child writing to it would write the parent's buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>

namespace atomr::local {

class shared_arena {
 public:
  // What another process needs to map this arena, and to check it mapped this one.
  struct region {
    int pid;
    int fd;
    std::byte* base;
    std::size_t bytes;
    std::uint64_t dev;  // the memfd's st_dev and st_ino
    std::uint64_t ino;
  };

  static constexpr std::size_t k_arena_bytes = std::size_t{16} << 30;  // address space, not memory
  static constexpr std::size_t k_alignment = 64;

  // The process's arena, made on first use; nullptr where it cannot be (no memfd_create, mmap
  // refused): host buffers then all come from the heap. The reason is logged once, at debug level.
  static shared_arena* instance();

  ~shared_arena();
  shared_arena(const shared_arena&) = delete;
  shared_arena& operator=(const shared_arena&) = delete;

  // `bytes`, 64-byte aligned; nullptr when the arena has no room.
  void* allocate(std::size_t bytes);
  // Gives back what allocate() returned, unless it was quarantined.
  void release(void* p);
  bool owns(const void* p) const { return p >= base_ && p < base_ + bytes_; }
  // Keeps the allocation at `p` out of reuse for the life of the process: another process may
  // still write to it (a failed world's reduction on a rank that is late, not dead). A later
  // release() of it does nothing.
  void quarantine(const void* p);
  region where() const { return {pid_, fd_, base_, bytes_, dev_, ino_}; }

 private:
  struct allocator;
  shared_arena(int fd, std::byte* base, std::size_t bytes, std::uint64_t dev, std::uint64_t ino);

  int pid_;
  int fd_;
  std::byte* base_;
  std::size_t bytes_;
  std::uint64_t dev_;
  std::uint64_t ino_;
  std::mutex mutex_;
  std::unique_ptr<allocator> allocator_;
  std::unordered_set<const void*> quarantined_;
};

}  // namespace atomr::local
