// The world's collectives at a few sizes, each beside the raw MPI collective of the same bytes on
// host devices, in the same run. (On GPUs the world runs NCCL; its raw twin would be a second NCCL
// communicator, which the doctor does not make.)
#include <algorithm>
#include <span>

#include "atomr/cluster/collective.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/world.hpp"
#include "doctor_parts.hpp"

namespace atomr::cluster::doctor::detail {
namespace {

struct coll_case {
  coll_kind kind;
  const char* name;
};

result<coll_result> one_case(world& w, MPI_Comm raw, const local::device& dev, coll_case cc, std::size_t bytes,
                             clock::duration slice) {
  int me = 0, size = 1;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(raw, &me)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(raw, &size)));
  const bool gather = cc.kind == coll_kind::all_gather;
  // all_gather's bytes are what each rank ends up holding.
  const std::size_t count = std::max<std::size_t>(1, gather ? bytes / 4 / static_cast<std::size_t>(size) : bytes / 4);
  const std::size_t out_count = gather ? count * static_cast<std::size_t>(size) : count;
  coll_result row;
  row.op = cc.name;
  row.bytes = out_count * 4;
  ATOMR_ASSIGN_OR_RETURN(auto send, dev.allocate<float>(count).get());
  ATOMR_ASSIGN_OR_RETURN(auto recv, dev.allocate<float>(out_count).get());
  std::vector<float> host_send(count, static_cast<float>(me + 1)), host_recv(out_count);
  ATOMR_TRY(dev.upload(send, std::span<const float>(host_send)).get());
  auto atomr_once = [&]() -> result<void> {
    return gather ? w.all_gather(send, recv).get() : w.all_reduce(send, recv, reduce_op::sum).get();
  };
  const bool host = dev.kind() == local::device_kind::host;
  auto raw_once = [&]() -> result<void> {
    return gather ? ATOMR_MPI_CHECK(MPI_Allgather(host_send.data(), static_cast<int>(count), MPI_FLOAT,
                                                  host_recv.data(), static_cast<int>(count), MPI_FLOAT, raw))
                  : ATOMR_MPI_CHECK(MPI_Allreduce(host_send.data(), host_recv.data(), static_cast<int>(count),
                                                  MPI_FLOAT, MPI_SUM, raw));
  };
  // Warm both, then rank 0 times one and says how many fit the slice, so every rank makes the
  // same number of calls.
  ATOMR_TRY(atomr_once());
  if (host) ATOMR_TRY(raw_once());
  const auto t0 = clock::now();
  ATOMR_TRY(atomr_once());
  int reps =
      static_cast<int>(std::clamp(seconds_of(slice) / std::max(2 * seconds_of(clock::now() - t0), 1e-6), 3.0, 200.0));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(&reps, 1, MPI_INT, 0, raw)));
  double best_raw = 0, best = 0;
  for (int i = 0; i < reps; ++i) {
    if (host) {
      const auto r0 = clock::now();
      ATOMR_TRY(raw_once());
      const double s = seconds_of(clock::now() - r0);
      best_raw = i == 0 ? s : std::min(best_raw, s);
    }
    const auto a0 = clock::now();
    ATOMR_TRY(atomr_once());
    const double s = seconds_of(clock::now() - a0);
    best = i == 0 ? s : std::min(best, s);
  }
  std::vector<float> back(out_count);
  ATOMR_TRY(dev.download(recv, std::span<float>(back)).get());
  for (std::size_t i = 0; i < out_count; ++i) {
    const float want = gather ? static_cast<float>(i / count + 1) : static_cast<float>(size * (size + 1) / 2);
    if (back[i] != want) {
      return error(errc::protocol, std::string(cc.name) + " of " + std::to_string(row.bytes) + " bytes: element " +
                                       std::to_string(i) + " is " + std::to_string(back[i]) + ", expected " +
                                       std::to_string(want));
    }
  }
  row.repetitions = reps;
  row.us = best * 1e6;
  row.raw_us = best_raw * 1e6;
  row.bus_gbps = static_cast<double>(row.bytes) / best / 1e9 * bus_factor(cc.kind, size);
  return row;
}

}  // namespace

result<std::vector<coll_result>> check_collectives(MPI_Comm comm, const local::device& dev, const options& opts,
                                                   clock::duration slice) {
  int size = 1;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(comm, &size)));
  std::vector<coll_result> rows;
  if (size < 2) return rows;
  ATOMR_ASSIGN_OR_RETURN(auto wopts, world_options::from_environment());
  ATOMR_ASSIGN_OR_RETURN(auto w, world::create(comm, {dev}, wopts));
  MPI_Comm raw = MPI_COMM_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_dup(comm, &raw)));
  const coll_case cases[] = {{coll_kind::all_reduce, "all_reduce"}, {coll_kind::all_gather, "all_gather"}};
  const auto per = slice / static_cast<long>(std::size(cases) * std::max<std::size_t>(1, opts.coll_bytes.size()));
  result<void> outcome = ok();
  for (const std::size_t bytes : opts.coll_bytes) {
    for (const auto& cc : cases) {
      auto row = one_case(*w, raw, dev, cc, bytes, per);
      if (!row) {
        // A collective that failed on one rank leaves the others waiting in it: the world's
        // deadline ends them too, and the phase stops here.
        coll_result failed;
        failed.op = cc.name;
        failed.bytes = bytes;
        failed.failure = row.error_value().describe();
        rows.push_back(failed);
        outcome = row.error_value();
        break;
      }
      rows.push_back(*row);
    }
    if (!outcome) break;
  }
  MPI_Comm_free(&raw);
  return rows;
}

}  // namespace atomr::cluster::doctor::detail
