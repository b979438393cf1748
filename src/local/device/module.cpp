#include "atomr/local/device/module.hpp"

namespace atomr::local {

void kernel_args::add(const void* p, std::size_t size, int buffer) {
  const std::size_t offset = (storage_.size() + 15) / 16 * 16;
  storage_.resize(offset + size);
  std::memcpy(storage_.data() + offset, p, size);
  slots_.push_back({offset, size, buffer});
}

std::vector<void*> kernel_args::bind() {
  std::vector<void*> out;
  out.reserve(slots_.size());
  for (const auto& s : slots_) {
    if (s.buffer >= 0) {
      void* ptr = buffers_[static_cast<std::size_t>(s.buffer)].block->ptr;
      std::memcpy(storage_.data() + s.offset, &ptr, sizeof(ptr));
    }
    out.push_back(storage_.data() + s.offset);
  }
  return out;
}

result<void> check_launch_args(const kernel_ref& kernel, const kernel_args& args) {
  const auto& params = kernel.param_sizes;
  if (args.size() != params.size()) {
    return error(errc::invalid_argument, "kernel '" + kernel.name + "' takes " + std::to_string(params.size()) +
                                             " parameter(s); " + std::to_string(args.size()) + " given");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (args.arg_bytes(i) != params[i]) {
      return error(errc::invalid_argument, "parameter " + std::to_string(i) + " of kernel '" + kernel.name + "' is " +
                                               std::to_string(params[i]) + " bytes; the argument is " +
                                               std::to_string(args.arg_bytes(i)) + " bytes");
    }
  }
  for (const auto& b : args.buffers()) {
    if (!b.block) return error(errc::invalid_argument, "kernel '" + kernel.name + "': an argument is an empty gpu_ref");
  }
  return ok();
}

}  // namespace atomr::local
