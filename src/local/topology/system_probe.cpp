// The real machine: hwloc for CPUs, NUMA nodes and the PCI locality of each GPU and NIC; the CUDA
// runtime (in CUDA builds) for the GPUs and what each pair supports.
#include <hwloc.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "atomr/local/devices.hpp"
#include "atomr/local/topology/topology_probe.hpp"

#if ATOMR_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "atomr/local/cuda_check.hpp"
#endif

namespace atomr::local {
namespace {

struct topology_deleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using topology_ptr = std::unique_ptr<hwloc_topology, topology_deleter>;

std::string cpu_list(hwloc_const_cpuset_t set) {
  char* text = nullptr;
  if (set == nullptr || hwloc_bitmap_list_asprintf(&text, set) < 0) return {};
  std::string out(text);
  std::free(text);
  return out;
}

// The logical index of the first object of `type` whose cpuset intersects `set`, or -1.
int first_intersecting(hwloc_topology_t topo, hwloc_obj_type_t type, hwloc_const_cpuset_t set) {
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo, type, nullptr); o != nullptr;
       o = hwloc_get_next_obj_by_type(topo, type, o)) {
    if (o->cpuset != nullptr && hwloc_bitmap_intersects(o->cpuset, set)) return static_cast<int>(o->logical_index);
  }
  return -1;
}

class system_probe final : public topology_probe {
 public:
  result<machine_summary> machine() override {
    ATOMR_TRY(load());
    machine_summary m;
    std::array<char, 256> name{};
    if (gethostname(name.data(), name.size() - 1) == 0) m.hostname = name.data();
    m.packages = std::max(0, hwloc_get_nbobjs_by_type(topo_.get(), HWLOC_OBJ_PACKAGE));
    m.numa_nodes = std::max(0, hwloc_get_nbobjs_by_type(topo_.get(), HWLOC_OBJ_NUMANODE));
    m.cores = std::max(0, hwloc_get_nbobjs_by_type(topo_.get(), HWLOC_OBJ_CORE));
    for (int i = 0; i < m.numa_nodes; ++i) {
      m.numa_cpus.push_back(
          cpu_list(hwloc_get_obj_by_type(topo_.get(), HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i))->cpuset));
    }
    return m;
  }

  result<std::vector<gpu_locality>> gpus() override {
    ATOMR_TRY(load());
    ATOMR_ASSIGN_OR_RETURN(device_probe devices, probe_cuda_devices());
    std::vector<gpu_locality> out;
    for (const auto& d : devices.devices) {
      gpu_locality g;
      g.device = d.index;
      g.name = d.name;
      g.pci_bus_id = d.pci_bus_id;
      locate(g);
      out.push_back(std::move(g));
    }
    return out;
  }

  result<pair_probe> pair(int a, int b) override {
    pair_probe p;
#if ATOMR_HAVE_CUDA
    int access = 0;
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceCanAccessPeer(&access, a, b)));
    p.access = access != 0;
    if (p.access) {
      int rank = 0;
      int atomics = 0;
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, a, b)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, a, b)));
      p.performance_rank = rank;
      p.native_atomics = atomics != 0;
    }
#else
    return error(errc::unavailable,
                 "no GPU pair " + std::to_string(a) + "," + std::to_string(b) + ": atomr was built without CUDA");
#endif
    return p;
  }

 private:
  result<void> load() {
    if (topo_) return ok();
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) return error(errc::internal, "hwloc_topology_init failed");
    topology_ptr t(raw);
    // Keep PCI devices and OS devices (GPUs, NICs), which hwloc drops by default.
    hwloc_topology_set_io_types_filter(t.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t.get()) != 0) return error(errc::internal, "hwloc_topology_load failed");
    topo_ = std::move(t);
    return ok();
  }

  // Fills the NUMA node, package, nearby CPUs and NICs of a GPU found by its PCI bus id. Leaves
  // them unknown where hwloc cannot see the device (some VMs and containers hide PCI details).
  void locate(gpu_locality& g) {
    unsigned domain = 0, bus = 0, dev = 0, func = 0;
    if (std::sscanf(g.pci_bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &func) != 4) return;
    hwloc_obj_t pci = hwloc_get_pcidev_by_busid(topo_.get(), domain, bus, dev, func);
    if (pci == nullptr) return;
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topo_.get(), pci);
    if (near == nullptr || near->cpuset == nullptr) return;
    g.cpus = cpu_list(near->cpuset);
    g.numa_node = first_intersecting(topo_.get(), HWLOC_OBJ_NUMANODE, near->cpuset);
    g.package = first_intersecting(topo_.get(), HWLOC_OBJ_PACKAGE, near->cpuset);
    for (hwloc_obj_t os = hwloc_get_next_osdev(topo_.get(), nullptr); os != nullptr;
         os = hwloc_get_next_osdev(topo_.get(), os)) {
      const auto type = os->attr->osdev.type;
      if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
      if (hwloc_get_non_io_ancestor_obj(topo_.get(), os) == near && os->name != nullptr) g.nics.emplace_back(os->name);
    }
  }

  topology_ptr topo_;
};

}  // namespace

std::unique_ptr<topology_probe> make_system_probe() { return std::make_unique<system_probe>(); }

}  // namespace atomr::local
