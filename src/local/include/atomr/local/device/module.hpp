// Modules: device code loaded at run time (cubin, fatbin or PTX), the kernels in it, and typed
// launch arguments. Handles are plain values minted by one device actor; they name the device and
// the generation they were made in, so a handle from before a context rebuild, from another
// device, or from an unloaded module is refused with a clear error and never reaches CUDA.
//
// Only the CUDA device kind runs modules; the host kind answers every module request with
// errc::unavailable.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "atomr/local/device/gpu_ref.hpp"

namespace atomr::local {

// A loaded module. Unload it with device::unload_module; the device also drops every module when
// it stops or rebuilds its context.
struct module_ref {
  std::uint64_t id = 0;  // unique per process
  int device = -1;
  std::uint64_t generation = 0;
};

// One kernel of a loaded module, with its parameter layout as the device code declares it
// (sizes in bytes, in order), against which launch arguments are checked.
struct kernel_ref {
  std::uint64_t id = 0;  // unique per process
  std::uint64_t module = 0;
  int device = -1;
  std::uint64_t generation = 0;
  std::string name;
  std::vector<std::size_t> param_sizes;
};

struct launch_config {
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  unsigned shared_bytes = 0;  // dynamic shared memory per block
  // Cooperative launch: every block is resident at once, so the kernel may synchronize the whole
  // grid (cooperative_groups::this_grid().sync()). The grid must fit on the device.
  bool cooperative = false;
};

// Whether a kernel writes a buffer argument: later readers wait for a written buffer's launch.
enum class buffer_access { read, read_write };

// The arguments of one launch, in parameter order: plain values (copied now) and buffers (checked
// and turned into device pointers by the device actor when it launches).
class kernel_args {
 public:
  template <typename T>
  requires std::is_trivially_copyable_v<T> kernel_args& value(const T& v) {
    add(&v, sizeof(T), -1);
    return *this;
  }
  template <device_element T>
  kernel_args& buffer(const gpu_ref<T>& b, buffer_access access = buffer_access::read_write) {
    buffers_.push_back({b.block(), access});
    void* none = nullptr;
    add(&none, sizeof(void*), static_cast<int>(buffers_.size()) - 1);
    return *this;
  }

  std::size_t size() const noexcept { return slots_.size(); }
  std::size_t arg_bytes(std::size_t i) const { return slots_.at(i).size; }

  struct buffer_arg {
    std::shared_ptr<buffer_block> block;
    buffer_access access;
  };
  const std::vector<buffer_arg>& buffers() const noexcept { return buffers_; }

  // For the device actor: writes each buffer's device pointer into its slot and returns the
  // array of argument addresses CUDA's launch takes. Valid while this object lives unchanged.
  std::vector<void*> bind();

 private:
  struct slot {
    std::size_t offset;
    std::size_t size;
    int buffer;  // index into buffers_, or -1 for a value
  };
  void add(const void* p, std::size_t size, int buffer);

  // Every slot starts on a 16-byte boundary (operator new aligns the vector's data to 16).
  std::vector<std::byte> storage_;
  std::vector<slot> slots_;
  std::vector<buffer_arg> buffers_;
};

// Checks `args` against `kernel`'s parameter list: the count and each argument's size.
result<void> check_launch_args(const kernel_ref& kernel, const kernel_args& args);

}  // namespace atomr::local
