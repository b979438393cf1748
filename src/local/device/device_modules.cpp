// device's module calls: the handle and argument checks made before anything is sent.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "atomr/local/device/device.hpp"

namespace atomr::local {

result<void> device::check_handle(std::string_view what, std::uint64_t id, int owner, std::uint64_t generation) const {
  const std::string name = std::string(what) + " " + std::to_string(id);
  if (id == 0) return error(errc::invalid_argument, "an empty " + std::string(what) + " handle");
  if (owner != index()) {
    return error(errc::invalid_argument,
                 name + " belongs to device " + std::to_string(owner) + ", not device " + std::to_string(index()));
  }
  if (!state_->accepting()) {
    return error(errc::stale_ref, name + ": device " + std::to_string(index()) + " is shutting down");
  }
  if (generation != state_->generation()) {
    return error(errc::stale_ref, name + " was made in generation " + std::to_string(generation) + "; device " +
                                      std::to_string(index()) + " has rebuilt its context since (generation " +
                                      std::to_string(state_->generation()) + ")");
  }
  return ok();
}

future<module_ref> device::load_module(std::vector<std::byte> image) const {
  if (image.empty()) return failed<module_ref>(error(errc::invalid_argument, "an empty module image"));
  return send<module_ref>([&](auto r) { return detail::module_load_op{std::move(image), std::move(r)}; });
}

future<module_ref> device::load_module_file(const std::string& path) const {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return failed<module_ref>(
        error(errc::invalid_argument, "cannot read module file '" + path + "': " + std::strerror(errno)));
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return failed<module_ref>(error(errc::invalid_argument, "cannot read module file '" + path + "'"));
  std::vector<std::byte> image(bytes.size());
  std::memcpy(image.data(), bytes.data(), bytes.size());
  return load_module(std::move(image));
}

future<kernel_ref> device::get_function(const module_ref& module, std::string name) const {
  if (auto v = check_handle("module", module.id, module.device, module.generation); !v) {
    return failed<kernel_ref>(v.error_value());
  }
  if (name.empty()) return failed<kernel_ref>(error(errc::invalid_argument, "an empty kernel name"));
  return send<kernel_ref>([&](auto r) { return detail::kernel_get_op{module, std::move(name), std::move(r)}; });
}

future<void> device::launch(const kernel_ref& kernel, const launch_config& config, kernel_args args) const {
  if (auto v = check_handle("kernel", kernel.id, kernel.device, kernel.generation); !v) return failed(v.error_value());
  if (auto v = check_launch_args(kernel, args); !v) return failed(v.error_value());
  for (unsigned d :
       {config.grid[0], config.grid[1], config.grid[2], config.block[0], config.block[1], config.block[2]}) {
    if (d == 0)
      return failed(error(errc::invalid_argument, "kernel '" + kernel.name + "': a grid or block dimension is 0"));
  }
  std::vector<std::shared_ptr<buffer_block>> uses, written, read;
  for (const auto& b : args.buffers()) {
    if (auto v = validate_block(*b.block); !v) return failed(v.error_value());
    uses.push_back(b.block);
    if (b.access == buffer_access::read_write) written.push_back(b.block);
  }
  // A buffer passed both ways is a write: it waits for earlier writes either way.
  for (const auto& b : args.buffers()) {
    if (b.access == buffer_access::read && std::find(written.begin(), written.end(), b.block) == written.end()) {
      read.push_back(b.block);
    }
  }
  return send<void>([&](auto r) {
    return detail::launch_op{
        kernel,      config, std::move(args), std::move(uses), detail::tickets_for(written), detail::reads_of(read),
        std::move(r)};
  });
}

future<void> device::unload_module(const module_ref& module) const {
  if (auto v = check_handle("module", module.id, module.device, module.generation); !v) return failed(v.error_value());
  return send<void>([&](auto r) { return detail::module_unload_op{module, std::move(r)}; });
}

}  // namespace atomr::local
