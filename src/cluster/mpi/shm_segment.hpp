// The memory a node's ranks share for host all_reduces: a memfd that rank 0 makes and the others
// open through /proc/<pid>/fd/<fd>. It has no name in /dev/shm, so a rank that dies at any moment
// (even before the others have opened it) leaves nothing behind: the memory goes with the last
// mapping or descriptor. The kernel lets only processes that may inspect rank 0 (its user) open
// it; its size is sealed, so no process can shrink it under the ranks (a SIGBUS in every one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace atomr::cluster::detail {

// What rank 0 tells the others. The cookie is the first word of the segment: a descriptor of
// that number in a process of that pid in another pid namespace is another file, and fails the
// device and inode check, or at the latest this one.
struct segment_offer {
  std::uint64_t cookie = 0;
  std::uint64_t bytes = 0;
  std::uint64_t pid = 0;
  std::uint64_t fd = 0;
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  int ok = 0;
  char host[256] = {};  // rank 0's host name
};

// A mapping of the segment, unmapped with it; empty (data() null) where it could not be made,
// and why() says why.
class shm_segment {
 public:
  // Rank 0: makes a segment of `bytes`, reserved now (a page touched first when tmpfs is full is a
  // SIGBUS, not an error), with the offer's cookie at its start. Keeps the descriptor open until
  // close_offer(): the others open the segment through it.
  static shm_segment make(std::size_t bytes, segment_offer& offer);
  // The other ranks: maps the segment `offer` names, if it is `bytes` long and holds the cookie.
  static shm_segment open(const segment_offer& offer, std::size_t bytes);

  shm_segment() = default;
  shm_segment(shm_segment&& other) noexcept { *this = std::move(other); }
  shm_segment& operator=(shm_segment&& other) noexcept;
  ~shm_segment();

  void* data() const { return map_; }
  std::size_t size() const { return bytes_; }
  const std::string& why() const { return why_; }
  // Rank 0, once every rank has opened it (or given up): the descriptor is not needed any more.
  void close_offer();
  // Hands the mapping over to the caller (who unmaps it).
  void* release();

 private:
  void reset();

  void* map_ = nullptr;
  std::size_t bytes_ = 0;
  int fd_ = -1;
  std::string why_;
};

}  // namespace atomr::cluster::detail
