#include "shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace atomr::cluster::detail {

namespace {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

shm_segment shm_segment::make(std::size_t bytes, segment_offer& offer) {
  shm_segment s;
  s.fd_ = ::memfd_create("atomr-shm-allreduce", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (s.fd_ < 0) {
    s.why_ = errno_text("memfd_create");
    return s;
  }
  struct stat st {};
  if (::ftruncate(s.fd_, static_cast<off_t>(bytes)) != 0) {
    s.why_ = errno_text("ftruncate");
  } else if (const int e = ::posix_fallocate(s.fd_, 0, static_cast<off_t>(bytes)); e != 0) {
    s.why_ = "posix_fallocate of " + std::to_string(bytes) + " bytes: " + std::strerror(e);
  } else if (::fcntl(s.fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    s.why_ = errno_text("sealing the segment's size");
  } else if (::fstat(s.fd_, &st) != 0) {
    s.why_ = errno_text("fstat");
  } else if (void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd_, 0); m == MAP_FAILED) {
    s.why_ = errno_text("mmap");
  } else {
    s.map_ = m;
    s.bytes_ = bytes;
    std::memcpy(m, &offer.cookie, sizeof(offer.cookie));
    offer.bytes = bytes;
    offer.pid = static_cast<std::uint64_t>(::getpid());
    offer.fd = static_cast<std::uint64_t>(s.fd_);
    offer.dev = static_cast<std::uint64_t>(st.st_dev);
    offer.ino = static_cast<std::uint64_t>(st.st_ino);
    return s;
  }
  s.close_offer();
  return s;
}

shm_segment shm_segment::open(const segment_offer& offer, std::size_t bytes) {
  shm_segment s;
  const std::string path = "/proc/" + std::to_string(offer.pid) + "/fd/" + std::to_string(offer.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    s.why_ = errno_text("open " + path);
    return s;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_dev) != offer.dev ||
      static_cast<std::uint64_t>(st.st_ino) != offer.ino || static_cast<std::uint64_t>(st.st_size) != offer.bytes ||
      offer.bytes != bytes) {
    s.why_ = path + " is not rank 0's segment of " + std::to_string(bytes) + " bytes";
  } else if (void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0); m == MAP_FAILED) {
    s.why_ = errno_text("mmap");
  } else {
    std::uint64_t seen = 0;
    std::memcpy(&seen, m, sizeof(seen));
    if (seen != offer.cookie) {
      ::munmap(m, bytes);
      s.why_ = path + " is another process's segment";
    } else {
      s.map_ = m;
      s.bytes_ = bytes;
    }
  }
  ::close(fd);
  return s;
}

shm_segment& shm_segment::operator=(shm_segment&& other) noexcept {
  if (this != &other) {
    reset();
    map_ = std::exchange(other.map_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    fd_ = std::exchange(other.fd_, -1);
    why_ = std::move(other.why_);
  }
  return *this;
}

shm_segment::~shm_segment() { reset(); }

void shm_segment::reset() {
  close_offer();
  if (map_ != nullptr) ::munmap(map_, bytes_);
  map_ = nullptr;
}

void shm_segment::close_offer() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void* shm_segment::release() {
  close_offer();
  return std::exchange(map_, nullptr);
}

}  // namespace atomr::cluster::detail
