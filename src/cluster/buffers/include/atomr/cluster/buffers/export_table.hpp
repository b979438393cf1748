// The export table: which of a rank's exports are alive, readable by the other processes of its
// node without asking. It lets a CUDA IPC fetch of a buffer the consumer has imported already skip
// the round trip to the owner (buffer_registry.cpp), while a fetch that starts after the export
// ended still fails with stale_ref.
//
// The owner keeps a table of 64-bit words in a memfd, which it hands to consumers of its node
// through its fd server; each consumer maps it read-only. A live export that CUDA IPC consumers
// read holds a slot whose word is its export id (ids are never reused, so a word cannot name
// another export by accident); when the export ends (released, expired, its device rebuilt) the
// owner writes 0 before it tells anyone. The owner writes with release stores and consumers read
// with acquire loads (64-bit atomics on shared memory, lock-free on every platform atomr builds
// for), so a consumer that sees the word still set started its fetch before the export ended.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "atomr/common/result.hpp"

namespace atomr::cluster::detail {

class export_table {
 public:
  static constexpr std::uint32_t k_no_slot = 0xffffffffu;

  // A table of `slots` words (the memfd's pages are allocated as slots are used).
  static result<export_table> create(std::size_t slots);
  export_table(export_table&& other) noexcept;
  export_table& operator=(export_table&& other) noexcept;
  export_table(const export_table&) = delete;
  export_table& operator=(const export_table&) = delete;
  ~export_table();

  // Owner side (callers serialize these). A slot holding `id` from now on; nullopt when full.
  std::optional<std::uint32_t> claim(std::uint64_t id);
  // The slot reads 0 from now on, and may hold another export later.
  void clear(std::uint32_t slot);
  std::size_t in_use() const noexcept { return next_ - free_.size(); }
  // The memfd, for the fd server to hand out (the table keeps it open).
  int fd() const noexcept { return fd_; }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  export_table(int fd, void* map, std::size_t capacity) : fd_(fd), map_(map), capacity_(capacity) {}
  int fd_ = -1;
  void* map_ = nullptr;
  std::size_t capacity_ = 0;
  std::uint32_t next_ = 0;           // slots [next_, capacity_) were never used
  std::vector<std::uint32_t> free_;  // cleared slots
};

// Consumer side: another process's table, mapped read-only.
class export_view {
 public:
  // Maps the table behind `fd` (the caller keeps ownership of fd and may close it after).
  // Errors: protocol for a file that is not a table (empty, or not whole words), others for a
  // failed system call.
  static result<export_view> map(int fd);
  export_view(export_view&& other) noexcept;
  export_view& operator=(export_view&& other) noexcept;
  export_view(const export_view&) = delete;
  export_view& operator=(const export_view&) = delete;
  ~export_view();

  // Whether `slot` still holds export `id` (false for a slot out of range: bytes from the wire).
  bool live(std::uint32_t slot, std::uint64_t id) const noexcept;
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  export_view(const void* map, std::size_t capacity) : map_(map), capacity_(capacity) {}
  const void* map_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace atomr::cluster::detail
