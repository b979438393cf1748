#include "atomr/cluster/versions.hpp"

#include <mpi.h>

#include <array>

#if ATOMR_HAVE_NCCL
#include <nccl.h>
#endif

namespace atomr::cluster {

std::string mpi_library_version() {
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> text{};
  int len = 0;
  if (MPI_Get_library_version(text.data(), &len) != MPI_SUCCESS) return "unknown";
  std::string v(text.data(), static_cast<std::size_t>(len));
  // Open MPI appends ", package: ..., ident: ..., repo rev: ..., date"; MPICH uses several lines.
  return v.substr(0, v.find_first_of(",\n"));
}

std::string nccl_library_version() {
#if ATOMR_HAVE_NCCL
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unavailable";
  // Since NCCL 2.9 the code is major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
#else
  return "not built";
#endif
}

}  // namespace atomr::cluster
