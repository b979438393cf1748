#include "atomr/cluster/mpi_check.hpp"

#include <array>
#include <string>

namespace atomr::detail {

error mpi_failure(int status, const char* call, const char* file, int line) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int len = 0;
  std::string what;
  if (MPI_Error_string(status, text.data(), &len) == MPI_SUCCESS) {
    what.assign(text.data(), static_cast<std::size_t>(len));
  } else {
    what = "unknown MPI error";
  }
  int error_class = 0;
  if (MPI_Error_class(status, &error_class) == MPI_SUCCESS) {
    what += " (MPI error class " + std::to_string(error_class) + ")";
  }
  return failed_call(errc::mpi, call, what, file, line);
}

}  // namespace atomr::detail

namespace atomr::cluster {

result<own_comm> duplicate_comm(MPI_Comm comm) {
  own_comm out;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_dup(comm, &out.comm)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_set_errhandler(out.comm, MPI_ERRORS_RETURN)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(out.comm, &out.rank)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(out.comm, &out.size)));
  return out;
}

result<std::vector<int>> world_ranks_of(MPI_Comm comm) {
  MPI_Group mine = MPI_GROUP_NULL;
  MPI_Group world = MPI_GROUP_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_group(comm, &mine)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world)));
  int size = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Group_size(mine, &size)));
  std::vector<int> ranks(static_cast<std::size_t>(size));
  std::vector<int> out(ranks.size());
  for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  const auto translated = ATOMR_MPI_CHECK(MPI_Group_translate_ranks(mine, size, ranks.data(), world, out.data()));
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  ATOMR_TRY(translated);
  return out;
}

}  // namespace atomr::cluster
