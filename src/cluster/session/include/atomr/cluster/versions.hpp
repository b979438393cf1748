// Versions of the cluster layer's libraries as found at run time.
#pragma once

#include <string>

namespace atomr::cluster {

// "Open MPI v4.1.4" (the first clause of MPI_Get_library_version). Callable before MPI_Init.
std::string mpi_library_version();
// "2.28.3" from ncclGetVersion (the loaded library, not the headers), or "not built".
std::string nccl_library_version();

}  // namespace atomr::cluster
