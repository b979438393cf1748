#include "atomr/cluster/device_plan.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <set>

namespace atomr::cluster {

result<std::vector<int>> choose_devices(const device_request& request, int local_rank, int local_size,
                                        int visible_count, const std::vector<int>& numa_of_device) {
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    return error(errc::invalid_argument,
                 "local rank " + std::to_string(local_rank) + " of " + std::to_string(local_size) + " is not valid");
  }
  if (request.host) return std::vector<int>{};
  if (!request.explicit_devices.empty()) {
    std::set<int> seen;
    for (int d : request.explicit_devices) {
      if (d < 0 || d >= visible_count) {
        return error(errc::invalid_argument, "device " + std::to_string(d) + " was asked for, but " +
                                                 std::to_string(visible_count) + " CUDA devices are visible");
      }
      if (!seen.insert(d).second) {
        return error(errc::invalid_argument, "device " + std::to_string(d) + " is listed twice");
      }
    }
    return request.explicit_devices;
  }
  if (visible_count == 0) return std::vector<int>{};
  if (request.per_rank < 0) return error(errc::invalid_argument, "devices per rank must be positive");
  const int per_rank = request.per_rank > 0 ? request.per_rank : std::max(1, visible_count / local_size);
  if (per_rank * local_size > visible_count) {
    // NCCL refuses two ranks of one communicator on the same GPU, so sharing is not an option.
    return error(errc::invalid_argument,
                 std::to_string(local_size) + " ranks on this node want " + std::to_string(per_rank) +
                     " GPU(s) each, but " + std::to_string(visible_count) +
                     " are visible; start fewer ranks per node, pass --devices, or use the host backend (--host)");
  }
  std::vector<int> order(static_cast<std::size_t>(visible_count));
  std::iota(order.begin(), order.end(), 0);
  if (numa_of_device.size() == order.size()) {
    // Unknown NUMA (-1) sorts last; ties keep CUDA's order.
    auto key = [&](int d) {
      const int n = numa_of_device[static_cast<std::size_t>(d)];
      return n < 0 ? 1 << 30 : n;
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  }
  const auto first = order.begin() + static_cast<std::ptrdiff_t>(local_rank) * per_rank;
  return std::vector<int>(first, first + per_rank);
}

result<std::vector<int>> parse_device_list(const std::string& text) {
  std::vector<int> out;
  std::string_view rest(text);
  while (true) {
    const auto comma = rest.find(',');
    const auto item = rest.substr(0, comma);
    int value = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < 0) {
      return error(errc::invalid_argument,
                   "device list '" + text + "' must be comma-separated device indices, like 0,1");
    }
    out.push_back(value);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace atomr::cluster
