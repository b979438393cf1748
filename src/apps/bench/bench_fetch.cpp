// `atomr bench fetch`: rank 1 fetches a buffer that rank 0 exported (run under mpirun with 2
// ranks), each fetch waited for, against the raw transfer the fetch uses, in the same run:
// - host devices (CI, --host): raw = MPI_Send/MPI_Recv of the bytes between the two buffers;
// - GPUs, CUDA IPC (the ranks share a node; the path atomr takes there): raw = rank 1 copies out
//   of rank 0's cudaMalloc buffer through a legacy IPC handle opened once (cudaMemcpyAsync and a
//   stream synchronize), then tells rank 0 with a 1-byte MPI message, as a fetch says it is done;
// - GPUs, NCCL (across nodes; or ATOMR_FETCH_NCCL=1, or IPC off): raw = rank 1 sends a 1-byte
//   MPI request, rank 0 answers with ncclSend on a two-rank communicator made once, rank 1
//   ncclRecv, and each synchronizes its stream;
// - GPUs, staged (ATOMR_FETCH_NCCL=0 and no IPC): raw = cudaMemcpy to pinned host memory on
//   rank 0, MPI_Send/MPI_Recv, cudaMemcpy to the GPU on rank 1.
// Latency is the median of single fetches; bandwidth is bytes over that time. Raw and atomr take
// turns in up to k_blocks blocks per size, so that both see the same state of the machine: on an
// H100 with 16 vCPUs the raw IPC copy takes 10-11 us in a run's first size and 15-16 us in every
// later one, which a raw-then-atomr order per size charges to atomr.
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "atomr/cluster/buffer_registry.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/common/version.hpp"
#include "atomr/local/devices.hpp"
#include "bench/bench_coll.hpp"
#include "bench/bench_meta.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "text_table.hpp"
#if ATOMR_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "atomr/local/cuda_check.hpp"
#endif
#if ATOMR_HAVE_NCCL
#include <nccl.h>

#include "atomr/cluster/nccl_check.hpp"
#endif

namespace po = boost::program_options;

namespace atomr::apps {
namespace {

using clock = std::chrono::steady_clock;
namespace al = atomr::local;

constexpr int k_blocks = 4;

double us_since(clock::time_point t0) { return std::chrono::duration<double, std::micro>(clock::now() - t0).count(); }
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The raw transfer between rank 0's and rank 1's buffers (device memory when `gpu`).
class raw_transfer {
 public:
  raw_transfer(MPI_Comm comm, int rank, bool gpu, std::size_t max_bytes) : comm_(comm), rank_(rank), gpu_(gpu) {
#if ATOMR_HAVE_CUDA
    if (gpu_) {
      (void)ATOMR_CUDA_CHECK(cudaMalloc(&device_, std::max<std::size_t>(max_bytes, 1)));
      (void)ATOMR_CUDA_CHECK(cudaMallocHost(&host_, std::max<std::size_t>(max_bytes, 1)));
      return;
    }
#endif
    plain_.resize(std::max<std::size_t>(max_bytes, 1));
    host_ = plain_.data();
  }
  ~raw_transfer() {
#if ATOMR_HAVE_CUDA
    if (gpu_) {
      cudaFree(device_);
      cudaFreeHost(host_);
    }
#endif
  }
  raw_transfer(const raw_transfer&) = delete;
  raw_transfer& operator=(const raw_transfer&) = delete;

  // The IPC path: rank 1 opens rank 0's buffer once.
  result<void> use_ipc() {
#if ATOMR_HAVE_CUDA
    cudaIpcMemHandle_t h{};
    if (rank_ == 0) {
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaIpcGetMemHandle(&h, device_)));
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(&h, sizeof(h), MPI_BYTE, 1, 11, comm_)));
    } else if (rank_ == 1) {
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(&h, sizeof(h), MPI_BYTE, 0, 11, comm_, MPI_STATUS_IGNORE)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaIpcOpenMemHandle(&peer_, h, cudaIpcMemLazyEnablePeerAccess)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    }
    ipc_ = true;
    return ok();
#else
    return error(errc::unavailable, "no CUDA in this build");
#endif
  }
  // The NCCL path: a two-rank communicator (rank 0 sends, rank 1 receives).
  result<void> use_nccl() {
#if ATOMR_HAVE_NCCL
    ncclUniqueId uid{};
    if (rank_ == 0) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclGetUniqueId(&uid)));
    if (rank_ <= 1) {
      if (rank_ == 0) ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(&uid, sizeof(uid), MPI_BYTE, 1, 13, comm_)));
      if (rank_ == 1)
        ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(&uid, sizeof(uid), MPI_BYTE, 0, 13, comm_, MPI_STATUS_IGNORE)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
      ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommInitRank(&nccl_, 2, uid, rank_)));
    }
    return ok();
#else
    return error(errc::unavailable, "no NCCL in this build");
#endif
  }
  // Before rank 0 frees its buffer: rank 1 closes the handle first.
  result<void> finish() {
#if ATOMR_HAVE_NCCL
    if (nccl_ != nullptr) ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommDestroy(nccl_)));
    nccl_ = nullptr;
#endif
#if ATOMR_HAVE_CUDA
    if (peer_ != nullptr) ATOMR_TRY(ATOMR_CUDA_CHECK(cudaIpcCloseMemHandle(peer_)));
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    peer_ = nullptr;
    stream_ = nullptr;
#endif
    return ATOMR_MPI_CHECK(MPI_Barrier(comm_));
  }

  result<void> once(std::size_t bytes) {
    const int n = static_cast<int>(bytes);
#if ATOMR_HAVE_NCCL
    if (nccl_ != nullptr) {
      char ask = 0;
      if (rank_ == 0) {
        ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(&ask, 1, MPI_CHAR, 1, 14, comm_, MPI_STATUS_IGNORE)));
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclSend(device_, bytes, ncclUint8, 1, nccl_, stream_)));
      } else {
        ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(&ask, 1, MPI_CHAR, 0, 14, comm_)));
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclRecv(device_, bytes, ncclUint8, 0, nccl_, stream_)));
      }
      return ATOMR_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
#endif
#if ATOMR_HAVE_CUDA
    if (ipc_) {
      char done = 0;
      if (rank_ == 1) {
        ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemcpyAsync(device_, peer_, bytes, cudaMemcpyDeviceToDevice, stream_)));
        ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamSynchronize(stream_)));
        ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(&done, 1, MPI_CHAR, 0, 12, comm_)));
      } else if (rank_ == 0) {
        ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(&done, 1, MPI_CHAR, 1, 12, comm_, MPI_STATUS_IGNORE)));
      }
      return ok();
    }
#endif
    if (rank_ == 0) {
#if ATOMR_HAVE_CUDA
      if (gpu_) ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemcpy(host_, device_, bytes, cudaMemcpyDeviceToHost)));
#endif
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(host_, n, MPI_BYTE, 1, 9, comm_)));
      char ack = 0;
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(&ack, 1, MPI_CHAR, 1, 10, comm_, MPI_STATUS_IGNORE)));
    } else if (rank_ == 1) {
      // The request a fetch makes first, then the bytes.
      char ask = 0;
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(host_, n, MPI_BYTE, 0, 9, comm_, MPI_STATUS_IGNORE)));
#if ATOMR_HAVE_CUDA
      if (gpu_) ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemcpy(device_, host_, bytes, cudaMemcpyHostToDevice)));
#endif
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(&ask, 1, MPI_CHAR, 0, 10, comm_)));
    }
    return ok();
  }

 private:
  MPI_Comm comm_;
  int rank_;
  [[maybe_unused]] bool gpu_;  // (unused without CUDA)
  [[maybe_unused]] void* device_ = nullptr;
  [[maybe_unused]] bool ipc_ = false;  // (unused without CUDA)
#if ATOMR_HAVE_CUDA
  void* peer_ = nullptr;  // rank 0's buffer, opened through IPC (rank 1)
  cudaStream_t stream_ = nullptr;
#endif
#if ATOMR_HAVE_NCCL
  ncclComm_t nccl_ = nullptr;
#endif
  void* host_ = nullptr;
  std::vector<std::uint8_t> plain_;
};

struct fetch_row {
  std::size_t bytes = 0;
  int iterations = 0;
  double raw_us = 0, atomr_us = 0;
};

}  // namespace

int run_bench_fetch(const std::string& program, const std::vector<std::string>& args) {
  std::string min_b = "4", max_b = "64M", json_path;
  int factor = 16;
  int iters = 200;
  po::options_description opts("atomr bench fetch options");
  opts.add_options()("help,h", "show this help")("minbytes,b", po::value(&min_b), "smallest buffer (default 4)")(
      "maxbytes,e", po::value(&max_b), "largest buffer (default 64M)")("stepfactor,f", po::value(&factor),
                                                                       "size multiplier (default 16)")(
      "iters,n", po::value(&iters), "fetches timed per size (default 200; fewer above 1 MiB)")(
      "host", "use host devices even where GPUs are visible")("output_file,J", po::value(&json_path),
                                                              "write the results as JSON to this file");
  po::variables_map vm;
  const std::string usage = "usage: mpirun -n 2 atomr bench fetch [options]";
  const std::string me = program + " fetch";
  if (auto done = parse_command_line(me, args, opts, usage, vm)) return *done;
  auto bad = [&](const std::string& option, const std::string& what) {
    return usage_error(me, option + ": " + what, usage);
  };
  auto lo = parse_size(min_b);
  if (!lo) return bad("-b/--minbytes", lo.error_value().message());
  auto hi = parse_size(max_b);
  if (!hi) return bad("-e/--maxbytes", hi.error_value().message());
  if (*lo < 4 || *lo % 4 != 0) return bad("-b/--minbytes", "a positive multiple of 4, got " + min_b);
  if (*hi < *lo) return bad("-b/--minbytes", min_b + " is larger than -e/--maxbytes " + max_b);
  if (*hi > (std::size_t{1} << 30)) return bad("-e/--maxbytes", "at most 1G, got " + max_b);
  if (factor < 2) return bad("-f/--stepfactor", must_be_at_least(2, factor));
  if (iters < 3) return bad("-n/--iters", must_be_at_least(3, iters));
  if (vm.count("output_file")) {
    if (auto f = check_output_file(json_path); !f) return bad("-J/--output_file", f.error_value().message());
  }

  auto session = cluster::mpi_session::start(nullptr, nullptr);
  if (!session) return report_error(session.error_value().describe(), 1);
  const auto& id = (*session)->identity();
  if (id.world_size < 2) {
    return report_error("atomr bench fetch needs 2 ranks (mpirun -n 2); it runs with " + std::to_string(id.world_size),
                        2);
  }
  const auto probe = al::probe_cuda_devices();
  const int visible = probe ? static_cast<int>(probe->devices.size()) : 0;
  // One GPU per rank, shared when the node has fewer GPUs than ranks (a one-GPU machine still
  // measures the cross-process path).
  auto gpus = std::optional<std::vector<int>>(std::vector<int>{});
  if (vm.count("host") == 0 && visible > 0) gpus->push_back(id.local_rank % visible);
  const bool gpu = !gpus->empty();
  al::actor_system system;
  auto dev = al::device::start(system, gpu ? gpus->front() : 0, gpu ? al::device_kind::cuda : al::device_kind::host);
  if (!dev) return report_error(dev.error_value().describe(), 1);
#if ATOMR_HAVE_CUDA
  if (gpu) (void)ATOMR_CUDA_CHECK(cudaSetDevice(gpus->front()));
#endif
  const MPI_Comm world = (*session)->world();
  auto r = cluster::router::start(world, system);
  if (!r) return report_error(r.error_value().describe(), 1);
  auto registry = cluster::buffer_registry::start(world, **r, {*dev});
  if (!registry) return report_error(registry.error_value().describe(), 1);
  MPI_Comm raw_comm;
  if (auto d = ATOMR_MPI_CHECK(MPI_Comm_dup(world, &raw_comm)); !d) return report_error(d.error_value().describe(), 1);
  raw_transfer raw(raw_comm, id.world_rank, gpu, *hi);
  // Rank 1 fetches from rank 0: the path it takes decides the raw transfer.
  int path = 0;  // 0 staged (or host), 1 CUDA IPC, 2 NCCL
  if (id.world_rank == 1 && gpu) {
    const auto route = (*registry)->route_from(0);
    path = route == cluster::fetch_route::cuda_ipc ? 1 : route == cluster::fetch_route::nccl ? 2 : 0;
  }
  MPI_Bcast(&path, 1, MPI_INT, 1, world);
  const bool ipc = path == 1;
  if (ipc) {
    if (auto u = raw.use_ipc(); !u) return report_error(u.error_value().describe(), 1);
  }
  if (path == 2) {
    if (auto u = raw.use_nccl(); !u) return report_error(u.error_value().describe(), 1);
  }

  std::vector<fetch_row> rows;
  std::string failure;
  for (std::size_t bytes = *lo; bytes <= *hi && failure.empty(); bytes *= static_cast<std::size_t>(factor)) {
    fetch_row row;
    row.bytes = bytes;
    row.iterations = bytes > (1 << 20) ? std::max(3, iters / 10) : iters;
    const std::size_t words = bytes / 4;
    // Rank 0's buffer holds a known pattern; rank 1 checks it after the timed fetches.
    auto buf = dev->allocate<std::uint32_t>(words).get();
    if (!buf) return report_error(buf.error_value().describe(), 1);
    cluster::remote_buffer handle{};
    if (id.world_rank == 0) {
      std::vector<std::uint32_t> pattern(words);
      for (std::size_t i = 0; i < words; ++i) pattern[i] = static_cast<std::uint32_t>(i * 2654435761u);
      if (auto u = dev->upload(*buf, std::span<const std::uint32_t>(pattern)).get(); !u) {
        return report_error(u.error_value().describe(), 1);
      }
      auto h = (*registry)->export_buffer(*buf).get();
      if (!h) return report_error(h.error_value().describe(), 1);
      handle = *h;
    }
    MPI_Bcast(&handle, sizeof(handle), MPI_BYTE, 0, world);
    std::vector<double> raw_t, atomr_t;
    // Raw and atomr take turns in blocks (see the top of this file).
    const int blocks = std::clamp(row.iterations / 50, 1, k_blocks);
    for (int b = 0; b < blocks; ++b) {
      const int n = row.iterations / blocks + (b < row.iterations % blocks ? 1 : 0);
      const int warm = b == 0 ? 2 : 1;
      for (int i = 0; i < n + warm; ++i) {
        const auto t0 = clock::now();
        if (auto once = raw.once(bytes); !once) return report_error(once.error_value().describe(), 1);
        if (i >= warm) raw_t.push_back(us_since(t0));
      }
      if (id.world_rank == 1) {
        for (int i = 0; i < n + warm && failure.empty(); ++i) {
          const auto t0 = clock::now();
          if (auto f = (*registry)->fetch(handle, *buf).get(); !f) failure = f.error_value().describe();
          if (i >= warm) atomr_t.push_back(us_since(t0));
        }
      }
      if (b + 1 < blocks) quiet_barrier(world);  // (rank 0 waits here while rank 1 fetches)
    }
    if (id.world_rank == 1) {
      std::vector<std::uint32_t> back(words);
      if (failure.empty() && dev->download(*buf, std::span<std::uint32_t>(back)).get()) {
        for (std::size_t i = 0; i < words; ++i) {
          if (back[i] != static_cast<std::uint32_t>(i * 2654435761u)) {
            failure = "fetched bytes differ at word " + std::to_string(i) + " of " + std::to_string(words);
            break;
          }
        }
      }
    }
    quiet_barrier(world);  // (rank 0 waits here while rank 1 fetches)
    if (id.world_rank == 0) (void)(*registry)->release(handle);
    // Rank 1 measured both; rank 0 prints, so it gets them.
    double times[2] = {median(raw_t), median(atomr_t)};
    MPI_Bcast(times, 2, MPI_DOUBLE, 1, world);
    row.raw_us = times[0];
    row.atomr_us = times[1];
    rows.push_back(row);
  }
  int failed = failure.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, world);
  registry->reset();
  if (auto s = (*r)->stop(); !s) return report_error(s.error_value().describe(), 1);
  if (auto f = raw.finish(); !f) return report_error(f.error_value().describe(), 1);
  MPI_Comm_free(&raw_comm);
  if (!failure.empty()) return report_error("bench fetch: " + failure, 1);
  if (failed) return 1;
  if (id.world_rank != 0) return 0;

  const auto route = gpu ? (ipc         ? "GPU, CUDA IPC"
                            : path == 2 ? "GPU, NCCL send/recv"
                                        : "GPU, staged through host memory")
                         : "host device";
  const std::string machine =
      (gpu && probe ? probe->devices[static_cast<std::size_t>(gpus->front())].name : std::string("host CPU")) + " (" +
      id.hostname + ")";
  std::cout << "atomr bench fetch: rank 1 fetches rank 0's buffer by token (" << route
            << "), each fetch waited for.\n"
               "raw = the same bytes moved by hand"
            << (ipc ? " (cudaMemcpyAsync out of a cudaIpcOpenMemHandle buffer, stream synchronize)"
                : path == 2
                    ? " (a 1-byte MPI request, ncclSend/ncclRecv on a two-rank communicator, stream synchronize)"
                : gpu ? " (cudaMemcpy to pinned memory, MPI_Send/Recv, cudaMemcpy)"
                      : " (MPI_Send/MPI_Recv)")
            << (path == 2 ? ".\n\n" : " with a one-byte answer.\n\n");
  text_table t({"bytes", "iters", "raw us", "atomr us", "+us", "raw GB/s", "atomr GB/s", "raw/atomr"});
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : rows) {
    const double raw_gbps = static_cast<double>(row.bytes) / (row.raw_us * 1e3);
    const double atomr_gbps = static_cast<double>(row.bytes) / (row.atomr_us * 1e3);
    t.add_row({std::to_string(row.bytes), std::to_string(row.iterations), fixed(row.raw_us, 2), fixed(row.atomr_us, 2),
               fixed(row.atomr_us - row.raw_us, 2), fixed(raw_gbps, 3), fixed(atomr_gbps, 3),
               fixed(row.raw_us / row.atomr_us, 3)});
    out.push_back({{"bytes", row.bytes},
                   {"iterations", row.iterations},
                   {"raw_us", row.raw_us},
                   {"atomr_us", row.atomr_us},
                   {"raw_gbps", raw_gbps},
                   {"atomr_gbps", atomr_gbps},
                   {"ratio", row.raw_us / row.atomr_us}});
  }
  t.print(std::cout);
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << nlohmann::json{{"benchmark", "fetch"},
                        {"ranks", id.world_size},
                        {"machine", machine},
                        {"commit", k_git_revision},
                        {"date", utc_now()},
                        {"path", ipc         ? "cuda_ipc"
                                 : path == 2 ? "nccl"
                                             : "mpi_staged"},
                        {"device", gpu ? "cuda" : "host"},
                        {"rows", out}}
             .dump(2)
      << '\n';
    if (!f) return report_error("cannot write " + json_path, 1);
  }
  return 0;
}

}  // namespace atomr::apps
