#include "atomr/cluster/buffers/export_table.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace atomr::cluster::detail {

namespace {

static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free,
              "the export table needs lock-free 64-bit atomics: other processes read it");

error system_error(const std::string& what) { return error(errc::unavailable, what + ": " + std::strerror(errno)); }

std::uint64_t* words(void* map) { return static_cast<std::uint64_t*>(map); }

}  // namespace

result<export_table> export_table::create(std::size_t slots) {
  if (slots == 0 || slots > k_no_slot)
    return error(errc::invalid_argument, "an export table of " + std::to_string(slots) + " slots");
  const int fd = ::memfd_create("atomr-exports", MFD_CLOEXEC);
  if (fd < 0) return system_error("memfd_create for the export table");
  const std::size_t bytes = slots * sizeof(std::uint64_t);
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    auto e = system_error("sizing the export table to " + std::to_string(bytes) + " bytes");
    ::close(fd);
    return e;
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    auto e = system_error("mapping the export table");
    ::close(fd);
    return e;
  }
  return export_table(fd, map, slots);
}

export_table::export_table(export_table&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      map_(std::exchange(other.map_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)),
      next_(std::exchange(other.next_, 0)),
      free_(std::move(other.free_)) {}

export_table& export_table::operator=(export_table&& other) noexcept {
  if (this != &other) {
    this->~export_table();
    new (this) export_table(std::move(other));
  }
  return *this;
}

export_table::~export_table() {
  if (map_ != nullptr) ::munmap(map_, capacity_ * sizeof(std::uint64_t));
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::uint32_t> export_table::claim(std::uint64_t id) {
  if (id == 0) return std::nullopt;  // 0 means "no export"
  std::uint32_t slot = 0;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else if (next_ < capacity_) {
    slot = next_++;
  } else {
    return std::nullopt;
  }
  std::atomic_ref<std::uint64_t>(words(map_)[slot]).store(id, std::memory_order_release);
  return slot;
}

void export_table::clear(std::uint32_t slot) {
  if (slot >= next_) return;
  auto word = std::atomic_ref<std::uint64_t>(words(map_)[slot]);
  if (word.load(std::memory_order_relaxed) == 0) return;  // cleared already
  word.store(0, std::memory_order_release);
  free_.push_back(slot);
}

result<export_view> export_view::map(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return system_error("reading the size of an export table");
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (bytes == 0 || bytes % sizeof(std::uint64_t) != 0) {
    return error(errc::protocol, "an export table of " + std::to_string(bytes) + " bytes (not whole 8-byte words)");
  }
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return system_error("mapping another rank's export table");
  return export_view(map, bytes / sizeof(std::uint64_t));
}

export_view::export_view(export_view&& other) noexcept
    : map_(std::exchange(other.map_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

export_view& export_view::operator=(export_view&& other) noexcept {
  if (this != &other) {
    this->~export_view();
    new (this) export_view(std::move(other));
  }
  return *this;
}

export_view::~export_view() {
  if (map_ != nullptr) ::munmap(const_cast<void*>(map_), capacity_ * sizeof(std::uint64_t));
}

bool export_view::live(std::uint32_t slot, std::uint64_t id) const noexcept {
  if (slot >= capacity_ || id == 0) return false;
  // A read-only mapping: atomic_ref needs a non-const object, and a load never writes.
  auto* word = const_cast<std::uint64_t*>(static_cast<const std::uint64_t*>(map_) + slot);
  return std::atomic_ref<std::uint64_t>(*word).load(std::memory_order_acquire) == id;
}

}  // namespace atomr::cluster::detail
