// What device calls share on the caller's side: run and stats as messages, and the write tickets
// that order an operation after the last write to each buffer it reads or writes.
#include <algorithm>

#include "atomr/local/device/device.hpp"

namespace atomr::local {

future<void> device::run(std::function<result<void>(const stream_context&)> work,
                         std::vector<std::shared_ptr<buffer_block>> uses) const {
  for (const auto& b : uses) {
    if (!b) return failed(error(errc::invalid_argument, "empty gpu_ref"));
  }
  return send<void>([&](auto r) {
    auto writes = detail::tickets_for(uses);
    return detail::run_op{std::move(work), std::move(uses), std::move(writes), std::move(r)};
  });
}

error detail::too_many_elements(std::string_view op, std::size_t count, std::string_view direction,
                                std::uint64_t buffer, std::size_t size) {
  return error(errc::invalid_argument, std::string(op) + " of " + std::to_string(count) + " elements " +
                                           std::string(direction) + " buffer " + std::to_string(buffer) + " of " +
                                           std::to_string(size));
}

namespace {
bool listed(const std::vector<detail::write_ticket>& tickets, const buffer_block* b) {
  return std::any_of(tickets.begin(), tickets.end(), [&](const auto& t) { return t.block.get() == b; });
}
}  // namespace

// A buffer named twice gets one ticket: a second ticket would wait for the first, which is
// reported only when this same operation is enqueued.
std::vector<detail::write_ticket> detail::reads_of(const std::vector<std::shared_ptr<buffer_block>>& read) {
  std::vector<write_ticket> out;
  out.reserve(read.size());
  for (const auto& b : read) {
    if (!listed(out, b.get())) out.push_back({b, b->writes_requested()});
  }
  return out;
}

std::vector<detail::write_ticket> detail::tickets_for(const std::vector<std::shared_ptr<buffer_block>>& written) {
  std::vector<write_ticket> out;
  out.reserve(written.size());
  for (const auto& b : written) {
    if (!listed(out, b.get())) out.push_back({b, b->request_write()});
  }
  return out;
}

future<device_stats> device::stats() const {
  return send<device_stats>([](auto r) { return detail::stats_op{std::move(r)}; });
}

}  // namespace atomr::local
