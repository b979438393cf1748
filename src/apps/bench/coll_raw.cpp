#include "bench/coll_raw.hpp"

#include <chrono>
#include <climits>
#include <vector>

#include "atomr/cluster/mpi_check.hpp"
#if ATOMR_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "atomr/cluster/nccl_check.hpp"
#include "atomr/local/cuda_check.hpp"
#endif

namespace atomr::apps::bench {
namespace {

using clock = std::chrono::steady_clock;
using cluster::coll_kind;
using cluster::reduce_op;

double since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

class host_raw final : public raw_collectives {
 public:
  explicit host_raw(const raw_setup& s) : s_(s), send_(s.max_bytes), recv_(s.max_bytes) {
    MPI_Comm_rank(s.comm, &rank_);
    MPI_Comm_size(s.comm, &size_);
  }
  result<double> run(coll_kind kind, std::size_t count, bool in_place, int iterations, bool) override {
    ATOMR_ASSIGN_OR_RETURN(const auto t, type());
    if (count > static_cast<std::size_t>(INT_MAX) / static_cast<std::size_t>(size_)) {
      return error(errc::invalid_argument, "count exceeds MPI's int");
    }
    const int n = static_cast<int>(count);
    const MPI_Op op = s_.op == reduce_op::prod  ? MPI_PROD
                      : s_.op == reduce_op::min ? MPI_MIN
                      : s_.op == reduce_op::max ? MPI_MAX
                                                : MPI_SUM;
    void* send = send_.data();
    void* recv = in_place ? send_.data() : recv_.data();
    const auto t0 = clock::now();
    for (int i = 0; i < iterations; ++i) {
      switch (kind) {
        case coll_kind::all_reduce:
          ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, n, t, op, s_.comm)));
          break;
        case coll_kind::broadcast: ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(recv, n, t, s_.root, s_.comm))); break;
        case coll_kind::reduce:
          ATOMR_TRY(ATOMR_MPI_CHECK(
              MPI_Reduce(in_place && rank_ == s_.root ? MPI_IN_PLACE : send, recv, n, t, op, s_.root, s_.comm)));
          break;
        case coll_kind::all_gather:
          if (in_place) {
            ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, s_.comm)));
          } else {
            ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Allgather(send, n, t, recv, n, t, s_.comm)));
          }
          break;
        case coll_kind::reduce_scatter:
          ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, n, t, op, s_.comm)));
          break;
        case coll_kind::all_to_all:
          ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Alltoall(send, n, t, recv_.data(), n, t, s_.comm)));
          break;
        default: return error(errc::invalid_argument, "no raw baseline for this collective");
      }
    }
    return since(t0);
  }
  result<double> run_sequential_small(std::size_t count, int requests) override {
    return run(coll_kind::all_reduce, count, false, requests, true);
  }

 private:
  result<MPI_Datatype> type() const {
    switch (s_.type) {
      case local::dtype::i8: return MPI_INT8_T;
      case local::dtype::u8: return MPI_UINT8_T;
      case local::dtype::i32: return MPI_INT32_T;
      case local::dtype::u32: return MPI_UINT32_T;
      case local::dtype::i64: return MPI_INT64_T;
      case local::dtype::u64: return MPI_UINT64_T;
      case local::dtype::f32: return MPI_FLOAT;
      case local::dtype::f64: return MPI_DOUBLE;
      default: return error(errc::invalid_argument, "MPI has no 16-bit float type for the raw host baseline");
    }
  }
  raw_setup s_;
  std::vector<std::byte> send_;
  std::vector<std::byte> recv_;
  int rank_ = 0;
  int size_ = 1;
};

#if ATOMR_HAVE_NCCL
ncclDataType_t nccl_type(local::dtype t) {
  constexpr ncclDataType_t k[] = {ncclInt8,   ncclUint8,   ncclInt32,    ncclUint32,  ncclInt64,
                                  ncclUint64, ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64};
  return k[static_cast<int>(t)];
}
ncclRedOp_t nccl_op(reduce_op op) {
  constexpr ncclRedOp_t k[] = {ncclSum, ncclProd, ncclMin, ncclMax, ncclAvg};
  return k[static_cast<int>(op)];
}

class nccl_raw final : public raw_collectives {
 public:
  struct gpu {
    int device = -1;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
  };
  static result<std::unique_ptr<raw_collectives>> make(const raw_setup& s) {
    auto r = std::unique_ptr<nccl_raw>(new nccl_raw(s));
    int rank = 0;
    int ranks = 0;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(s.comm, &rank)));
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(s.comm, &ranks)));
    const int mine = static_cast<int>(s.devices.size());
    std::vector<int> counts(static_cast<std::size_t>(ranks));
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, s.comm)));
    int first = 0;
    for (int i = 0; i < rank; ++i) first += counts[static_cast<std::size_t>(i)];
    for (int c : counts) r->size_ += c;
    ncclUniqueId id{};
    if (rank == 0) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGetUniqueId(&id)));
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, s.comm)));
    r->gpus_.resize(s.devices.size());
    ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupStart()));
    for (std::size_t i = 0; i < s.devices.size(); ++i) {
      auto& g = r->gpus_[i];
      g.device = s.devices[i];
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(g.device)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMalloc(&g.send, s.max_bytes)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMalloc(&g.recv, s.max_bytes)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemset(g.send, 0, s.max_bytes)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemset(g.recv, 0, s.max_bytes)));
      ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommInitRank(&g.comm, r->size_, id, first + static_cast<int>(i))));
    }
    ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupEnd()));
    for (auto& g : r->gpus_) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommUserRank(g.comm, &r->ranks_.emplace_back())));
    return std::unique_ptr<raw_collectives>(std::move(r));
  }
  ~nccl_raw() override {
    for (auto& g : gpus_) {
      cudaSetDevice(g.device);
      if (g.comm) ncclCommDestroy(g.comm);
      cudaFree(g.send);
      cudaFree(g.recv);
      if (g.stream) cudaStreamDestroy(g.stream);
    }
  }

  result<double> run(coll_kind kind, std::size_t count, bool in_place, int iterations, bool each_waited) override {
    const auto t0 = clock::now();
    for (int it = 0; it < iterations; ++it) {
      ATOMR_TRY(issue(kind, count, in_place));
      if (each_waited) ATOMR_TRY(sync());
    }
    ATOMR_TRY(sync());
    return since(t0);
  }
  result<double> run_sequential_small(std::size_t count, int requests) override {
    const auto t0 = clock::now();
    for (int it = 0; it < requests; ++it) {
      ATOMR_TRY(issue(coll_kind::all_reduce, count, false));
      ATOMR_TRY(sync());
    }
    return since(t0);
  }

 private:
  explicit nccl_raw(const raw_setup& s) : s_(s) {}
  result<void> sync() {
    for (auto& g : gpus_) {
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(g.device)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamSynchronize(g.stream)));
    }
    return ok();
  }
  result<void> issue(coll_kind kind, std::size_t n, bool in_place) {
    const auto t = nccl_type(s_.type);
    const auto op = nccl_op(s_.op);
    const std::size_t bytes = n * local::size_of(s_.type);
    const bool grouped = gpus_.size() > 1 || kind == coll_kind::all_to_all;
    if (grouped) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupStart()));
    for (std::size_t i = 0; i < gpus_.size(); ++i) {
      auto& g = gpus_[i];
      auto* send = static_cast<std::byte*>(g.send);
      auto* recv = in_place ? send : static_cast<std::byte*>(g.recv);
      const auto me = static_cast<std::size_t>(ranks_[i]);
      switch (kind) {
        case coll_kind::all_reduce:
          ATOMR_TRY(ATOMR_NCCL_CHECK(ncclAllReduce(send, recv, n, t, op, g.comm, g.stream)));
          break;
        case coll_kind::broadcast:
          ATOMR_TRY(ATOMR_NCCL_CHECK(ncclBroadcast(send, recv, n, t, s_.root, g.comm, g.stream)));
          break;
        case coll_kind::reduce:
          ATOMR_TRY(ATOMR_NCCL_CHECK(ncclReduce(send, recv, n, t, op, s_.root, g.comm, g.stream)));
          break;
        case coll_kind::all_gather:
          ATOMR_TRY(ATOMR_NCCL_CHECK(ncclAllGather(in_place ? recv + me * bytes : send, recv, n, t, g.comm, g.stream)));
          break;
        case coll_kind::reduce_scatter:
          ATOMR_TRY(ATOMR_NCCL_CHECK(
              ncclReduceScatter(send, in_place ? send + me * bytes : recv, n, t, op, g.comm, g.stream)));
          break;
        case coll_kind::all_to_all:
          for (int p = 0; p < size_; ++p) {
            const auto off = bytes * static_cast<std::size_t>(p);
            ATOMR_TRY(ATOMR_NCCL_CHECK(ncclSend(send + off, n, t, p, g.comm, g.stream)));
            ATOMR_TRY(ATOMR_NCCL_CHECK(ncclRecv(static_cast<std::byte*>(g.recv) + off, n, t, p, g.comm, g.stream)));
          }
          break;
        default: return error(errc::invalid_argument, "no raw baseline for this collective");
      }
    }
    if (grouped) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGroupEnd()));
    return ok();
  }

  raw_setup s_;
  std::vector<gpu> gpus_;
  std::vector<int> ranks_;
  int size_ = 0;
};
#endif

}  // namespace

result<std::unique_ptr<raw_collectives>> make_raw_collectives(const raw_setup& setup) {
  if (setup.devices.empty()) return std::unique_ptr<raw_collectives>(new host_raw(setup));
#if ATOMR_HAVE_NCCL
  return nccl_raw::make(setup);
#else
  return error(errc::unavailable, "this build has no NCCL");
#endif
}

}  // namespace atomr::apps::bench
