// This machine as hwloc sees it: hostname, packages, NUMA nodes, cores, memory and CPU model.
#pragma once

#include <cstdint>
#include <string>

#include "atomr/common/result.hpp"

namespace atomr::local {

struct host_info {
  std::string hostname;
  std::string cpu_model;
  int packages = 0;
  int numa_nodes = 0;
  int cores = 0;
  int hardware_threads = 0;
  std::uint64_t memory_bytes = 0;

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(hostname, cpu_model, packages, numa_nodes, cores, hardware_threads, memory_bytes);
  }
};

// Loads the hwloc topology once per call; cheap enough for startup and `atomr info`.
result<host_info> probe_host();

}  // namespace atomr::local
