// Where the current code runs: the process's MPI rank (set once by the cluster bootstrap) and the
// device the current thread works on (set by whoever binds a device to a thread). Errors and log
// lines use these so every message says which rank and device it came from.
#pragma once

#include <string>

namespace atomr::context {

inline constexpr int k_unknown = -1;

// World rank of this process, k_unknown before bootstrap. Thread-safe.
int rank() noexcept;
void set_rank(int world_rank) noexcept;

// Device bound to the calling thread, k_unknown if none.
int device() noexcept;

// Binds `device_id` to the calling thread for the scope's lifetime.
class scoped_device {
 public:
  explicit scoped_device(int device_id) noexcept;
  ~scoped_device();
  scoped_device(const scoped_device&) = delete;
  scoped_device& operator=(const scoped_device&) = delete;

 private:
  int previous_;
};

// "rank 3, device 1", "rank 3", or "rank ?" before bootstrap.
std::string describe();

}  // namespace atomr::context
