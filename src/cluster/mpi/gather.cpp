#include "atomr/cluster/gather.hpp"

#include <limits>

#include "atomr/cluster/mpi_check.hpp"

namespace atomr::cluster {

result<std::vector<std::vector<std::byte>>> gather_bytes(MPI_Comm comm, std::span<const std::byte> mine, int root) {
  int rank = 0;
  int size = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(comm, &rank)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(comm, &size)));
  // Every rank learns the total first, so an oversized gather fails on all ranks alike instead of
  // leaving some of them waiting in MPI_Gatherv.
  const long long my_len_ll = static_cast<long long>(mine.size());
  long long total_ll = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Allreduce(&my_len_ll, &total_ll, 1, MPI_LONG_LONG, MPI_SUM, comm)));
  if (total_ll > std::numeric_limits<int>::max()) {
    return error(errc::invalid_argument,
                 "gather_bytes: " + std::to_string(total_ll) + " bytes in all exceed MPI's int count");
  }
  const int my_len = static_cast<int>(mine.size());
  std::vector<int> lengths(rank == root ? static_cast<std::size_t>(size) : 0);
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Gather(&my_len, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, comm)));

  std::vector<int> offsets(lengths.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = static_cast<int>(total);
    total += static_cast<std::size_t>(lengths[i]);
  }
  std::vector<std::byte> all(total);
  ATOMR_TRY(ATOMR_MPI_CHECK(
      MPI_Gatherv(mine.data(), my_len, MPI_BYTE, all.data(), lengths.data(), offsets.data(), MPI_BYTE, root, comm)));
  std::vector<std::vector<std::byte>> out;
  out.reserve(lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const auto begin = all.begin() + offsets[i];
    out.emplace_back(begin, begin + lengths[i]);
  }
  return out;
}

}  // namespace atomr::cluster
