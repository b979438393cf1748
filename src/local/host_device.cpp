#include "atomr/local/devices.hpp"
#include "atomr/local/host_info.hpp"

namespace atomr::local {

device_info host_device() {
  device_info info;
  info.index = 0;
  info.kind = device_kind::host;
  const auto host = probe_host();
  info.name = host && !host->cpu_model.empty() ? "host (" + host->cpu_model + ")" : std::string("host");
  info.total_memory = host ? host->memory_bytes : 0;
  return info;
}

}  // namespace atomr::local
