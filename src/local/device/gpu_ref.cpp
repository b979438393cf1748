#include "atomr/local/device/gpu_ref.hpp"

namespace atomr::local {

result<void> validate_block(const buffer_block& block) {
  // Runs for every operation: the messages are built only on failure.
  const auto state = block.state.lock();
  auto what = [&] { return "buffer " + std::to_string(block.id); };
  if (!state) return error(errc::stale_ref, what() + ": its device was shut down");
  auto where = [&] { return " on device " + std::to_string(state->device()); };
  if (!state->accepting()) return error(errc::stale_ref, what() + where() + ": the device is shutting down");
  if (const auto g = state->generation(); g != block.generation) {
    return error(errc::stale_ref, what() + where() + " is from generation " + std::to_string(block.generation) +
                                      "; the device context was rebuilt and is at generation " + std::to_string(g));
  }
  return ok();
}

}  // namespace atomr::local
