#include "atomr/local/versions.hpp"

#include <hwloc.h>

#if ATOMR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace atomr::local {
namespace {

#if ATOMR_HAVE_CUDA
std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }
#endif

// hwloc has no run-time release number: report the release built against and the API of the
// library actually loaded (they differ when a binary travels to another machine).
std::string hwloc_version_text() {
  const unsigned v = hwloc_get_api_version();
  return std::string(HWLOC_VERSION) + " (runtime API " + std::to_string(v >> 16) + "." +
         std::to_string((v >> 8) & 0xff) + ")";
}

}  // namespace

local_versions probe_local_versions() {
  local_versions out;
#if ATOMR_HAVE_CUDA
  int v = 0;
  out.cuda_runtime = cudaRuntimeGetVersion(&v) == cudaSuccess ? cuda_version_text(v) : "unavailable";
  v = 0;
  // 0 means no driver is installed; the runtime reports that as success on some versions.
  out.cuda_driver = cudaDriverGetVersion(&v) == cudaSuccess && v > 0 ? cuda_version_text(v) : "no driver";
  cudaGetLastError();
#else
  out.cuda_runtime = "not built";
  out.cuda_driver = "not built";
#endif
  out.hwloc = hwloc_version_text();
  return out;
}

}  // namespace atomr::local
