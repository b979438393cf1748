#include "atomr/local/host_info.hpp"

#include <hwloc.h>
#include <unistd.h>

#include <array>
#include <memory>

namespace atomr::local {
namespace {

struct topology_deleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using topology_ptr = std::unique_ptr<hwloc_topology, topology_deleter>;

int count_of(hwloc_topology_t topo, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_by_type(topo, type);
  return n < 0 ? 0 : n;
}

}  // namespace

result<host_info> probe_host() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return error(errc::internal, "hwloc_topology_init failed");
  topology_ptr topo(raw);
  if (hwloc_topology_load(topo.get()) != 0) return error(errc::internal, "hwloc_topology_load failed");

  host_info info;
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) == 0) info.hostname = name.data();
  info.packages = count_of(topo.get(), HWLOC_OBJ_PACKAGE);
  info.numa_nodes = count_of(topo.get(), HWLOC_OBJ_NUMANODE);
  info.cores = count_of(topo.get(), HWLOC_OBJ_CORE);
  info.hardware_threads = count_of(topo.get(), HWLOC_OBJ_PU);
  hwloc_obj_t root = hwloc_get_root_obj(topo.get());
  info.memory_bytes = root->total_memory;
  if (hwloc_obj_t pkg = hwloc_get_obj_by_type(topo.get(), HWLOC_OBJ_PACKAGE, 0)) {
    if (const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModel")) info.cpu_model = model;
  }
  return info;
}

}  // namespace atomr::local
