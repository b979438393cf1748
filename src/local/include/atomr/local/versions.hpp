// Versions of the libraries the local layer runs on, as found at run time (not compile time), so
// `atomr info` shows what a job really uses.
#pragma once

#include <string>

namespace atomr::local {

struct local_versions {
  std::string cuda_runtime;  // "13.0", or "not built" / the failure text
  std::string cuda_driver;   // highest CUDA version the driver supports, or "no driver"
  std::string hwloc;         // "2.9.0"

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(cuda_runtime, cuda_driver, hwloc);
  }
};

local_versions probe_local_versions();

}  // namespace atomr::local
