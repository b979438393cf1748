// The host backend: collectives over host-kind buffers with nonblocking MPI collectives, polled
// by the progress thread; small all_reduces (and packs of them) by point-to-point recursive
// doubling instead (host_allreduce.hpp, up to ATOMR_HOST_RD_BYTES). MPI has no f16/bf16 and no
// average: 16-bit floats reduce through user ops that compute in float, and avg is a sum divided
// by the rank count when the data lands.
#include "atomr/cluster/host/host_backend.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "atomr/cluster/host/tunables.hpp"
#include "atomr/cluster/mpi/agree_settings.hpp"
#include "atomr/cluster/mpi/host_allreduce.hpp"
#include "atomr/cluster/mpi/shm_allreduce.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/local/device/half.hpp"

namespace atomr::cluster::detail {
namespace {

using local::bf16_to_float;
using local::dtype;
using local::f16_to_float;
using local::float_to_bf16;
using local::float_to_f16;

template <float (*To)(std::uint16_t), std::uint16_t (*From)(float), typename F>
void reduce16(void* in, void* inout, const int* len, F f) {
  auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = From(f(To(a[i]), To(b[i])));
}

#define ATOMR_HALF_OPS(name, to, from)                                             \
  void name##_sum(void* in, void* io, int* n, MPI_Datatype*) {                     \
    reduce16<to, from>(in, io, n, [](float x, float y) { return x + y; });         \
  }                                                                                \
  void name##_prod(void* in, void* io, int* n, MPI_Datatype*) {                    \
    reduce16<to, from>(in, io, n, [](float x, float y) { return x * y; });         \
  }                                                                                \
  void name##_min(void* in, void* io, int* n, MPI_Datatype*) {                     \
    reduce16<to, from>(in, io, n, [](float x, float y) { return x < y ? x : y; }); \
  }                                                                                \
  void name##_max(void* in, void* io, int* n, MPI_Datatype*) {                     \
    reduce16<to, from>(in, io, n, [](float x, float y) { return x > y ? x : y; }); \
  }
ATOMR_HALF_OPS(f16, f16_to_float, float_to_f16)
ATOMR_HALF_OPS(bf16, bf16_to_float, float_to_bf16)
#undef ATOMR_HALF_OPS

// MPI ops for the 16-bit float types, created once per process (MPI frees them at finalize).
struct half_ops {
  MPI_Op op[2][4] = {};  // [f16, bf16][sum, prod, min, max]
};
result<const half_ops*> get_half_ops() {
  static half_ops ops;
  static std::once_flag once;
  static result<void> made = ok();
  std::call_once(once, [] {
    MPI_User_function* fns[2][4] = {{f16_sum, f16_prod, f16_min, f16_max}, {bf16_sum, bf16_prod, bf16_min, bf16_max}};
    for (int t = 0; t < 2 && made; ++t) {
      for (int o = 0; o < 4 && made; ++o) made = ATOMR_MPI_CHECK(MPI_Op_create(fns[t][o], 1, &ops.op[t][o]));
    }
  });
  if (!made) return made.error_value();
  return &ops;
}

MPI_Datatype mpi_type(dtype t) {
  switch (t) {
    case dtype::i8: return MPI_INT8_T;
    case dtype::u8: return MPI_UINT8_T;
    case dtype::i32: return MPI_INT32_T;
    case dtype::u32: return MPI_UINT32_T;
    case dtype::i64: return MPI_INT64_T;
    case dtype::u64: return MPI_UINT64_T;
    case dtype::f16:
    case dtype::bf16: return MPI_UINT16_T;
    case dtype::f32: return MPI_FLOAT;
    case dtype::f64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

result<MPI_Op> mpi_op(dtype t, reduce_op op) {
  const int index = op == reduce_op::prod ? 1 : op == reduce_op::min ? 2 : op == reduce_op::max ? 3 : 0;  // sum and avg
  if (t == dtype::f16 || t == dtype::bf16) {
    ATOMR_ASSIGN_OR_RETURN(const half_ops* ops, get_half_ops());
    return ops->op[t == dtype::f16 ? 0 : 1][index];
  }
  // Open MPI's handles are addresses of globals, not constant expressions, so this cannot be constexpr.
  const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  return ops[index];
}

template <typename T>
void divide(void* p, std::size_t n, int by) {
  auto* v = static_cast<T*>(p);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(v[i] / static_cast<T>(by));
}
template <float (*To)(std::uint16_t), std::uint16_t (*From)(float)>
void divide16(void* p, std::size_t n, int by) {
  auto* v = static_cast<std::uint16_t*>(p);
  for (std::size_t i = 0; i < n; ++i) v[i] = From(To(v[i]) / static_cast<float>(by));
}

// avg = sum / ranks, element by element, as NCCL computes it (integer types truncate).
void divide_elements(dtype t, void* p, std::size_t n, int by) {
  switch (t) {
    case dtype::i8: return divide<std::int8_t>(p, n, by);
    case dtype::u8: return divide<std::uint8_t>(p, n, by);
    case dtype::i32: return divide<std::int32_t>(p, n, by);
    case dtype::u32: return divide<std::uint32_t>(p, n, by);
    case dtype::i64: return divide<std::int64_t>(p, n, by);
    case dtype::u64: return divide<std::uint64_t>(p, n, by);
    case dtype::f16: return divide16<f16_to_float, float_to_f16>(p, n, by);
    case dtype::bf16: return divide16<bf16_to_float, float_to_bf16>(p, n, by);
    case dtype::f32: return divide<float>(p, n, by);
    case dtype::f64: return divide<double>(p, n, by);
  }
}

struct host_state {
  std::vector<MPI_Request> requests;
  std::shared_ptr<host_allreduce> reduction;  // instead of requests, for a small all_reduce
  std::shared_ptr<shm_reduction> shm;         // instead of requests, through shared memory
  std::function<void()> finish;               // runs once, when the requests are done
  bool finished = false;
  std::shared_ptr<std::byte[]> sent;  // a pack MPI reads until the requests are done (back to the pool after)
};

constexpr int k_p2p_tag = 0x41544d;  // "ATM": atomr's send/recv on its own communicator

// Pack buffers of packed all_reduces, kept for reuse: a fresh buffer of this size comes from mmap,
// and first-touching its pages (then unmapping them, which interrupts every core that ran the
// process) cost more than the reduction (a 940 KiB pack: about 1 ms per issue on a 2-core VM).
class pack_pool : public std::enable_shared_from_this<pack_pool> {
 public:
  std::shared_ptr<std::byte[]> take(std::size_t bytes) {
    std::unique_ptr<std::byte[]> mem;
    {
      std::lock_guard lock(mutex_);
      // The smallest spare that holds it, however much larger: a fresh one costs a page fault
      // per 4 KiB on first touch (packs of 0.2-2 MB drift in size from batch to batch).
      auto best = spare_.end();
      for (auto it = spare_.begin(); it != spare_.end(); ++it) {
        if (it->first >= bytes && (best == spare_.end() || it->first < best->first)) best = it;
      }
      if (best != spare_.end()) {
        bytes = best->first;
        mem = std::move(best->second);
        spare_.erase(best);
      }
    }
    if (!mem) mem.reset(new std::byte[bytes]);  // not zeroed: every byte is copied in
    return std::shared_ptr<std::byte[]>(mem.release(), [pool = shared_from_this(), bytes](std::byte* p) {
      std::lock_guard lock(pool->mutex_);
      pool->spare_.emplace_back(bytes, std::unique_ptr<std::byte[]>(p));
      // The newest are kept: a job's pack sizes drift.
      if (pool->spare_.size() > k_kept) pool->spare_.erase(pool->spare_.begin());
    });
  }

 private:
  static constexpr std::size_t k_kept = 8;
  std::mutex mutex_;
  std::vector<std::pair<std::size_t, std::unique_ptr<std::byte[]>>> spare_;
};

class mpi_backend final : public comm_backend {
 public:
  // Tag spans of the point-to-point reductions (rd_tag); the communicator's MPI_TAG_UB must hold them.
  static constexpr int k_tag_spans = 32768;

  // rd_bytes: all_reduces up to this size go by host_allreduce (0: never).
  // shm: all_reduces up to shm->most() go through shared memory (nullptr: none do).
  mpi_backend(MPI_Comm comm, int rank, int size, std::size_t rd_bytes, std::size_t shm_bytes,
              std::unique_ptr<shm_reducer> shm)
      : comm_(comm), rank_(rank), size_(size), rd_bytes_(rd_bytes), shm_bytes_(shm_bytes), shm_(std::move(shm)) {}
  ~mpi_backend() override {
    if (!aborted_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  world_backend kind() const override { return world_backend::host; }
  int size() const override { return size_; }
  int rank(std::size_t) const override { return rank_; }
  std::size_t members() const override { return 1; }
  const void* origin(std::size_t) const override { return this; }

  result<void> issue(coll_request& r, const member_waits&) override {
    if (r.count > static_cast<std::size_t>(INT_MAX) / static_cast<std::size_t>(std::max(size_, 1))) {
      return error(errc::invalid_argument,
                   r.describe() + ": the host backend counts elements in MPI's int; " + "split the request");
    }
    auto st = std::make_shared<host_state>();
    r.state = st;
    const int n = static_cast<int>(r.count);
    const MPI_Datatype t = mpi_type(r.spec.type);
    const auto& p = r.spec.params;
    void* send = r.spec.send.empty() || !r.spec.send[0] ? nullptr : r.spec.send[0]->ptr;
    void* recv = r.spec.recv.empty() || !r.spec.recv[0] ? nullptr : r.spec.recv[0]->ptr;
    const bool in_place = send != nullptr && send == recv;
    MPI_Request q = MPI_REQUEST_NULL;
    const auto bytes = r.bytes();
    const auto type = r.spec.type;
    const auto count = r.count;
    switch (r.spec.kind) {
      case coll_kind::all_reduce: {
        ATOMR_ASSIGN_OR_RETURN(MPI_Op op, mpi_op(r.spec.type, p.op));
        if (p.op == reduce_op::avg) st->finish = [=, this] { divide_elements(type, recv, count, size_); };
        if (use_shm(bytes)) {
          ATOMR_ASSIGN_OR_RETURN(st->shm, start_shm({{send, recv, bytes}}, type, op));
          return ok();
        }
        if (use_reduction(bytes)) {
          if (!in_place) std::memcpy(recv, send, bytes);
          ATOMR_ASSIGN_OR_RETURN(st->reduction, start_reduction(recv, n, t, op, r.deadline, bytes));
          return ok();
        }
        ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallreduce(in_place ? MPI_IN_PLACE : send, recv, n, t, op, comm_, &q)));
        break;
      }
      case coll_kind::broadcast:
        if (rank_ == p.root && !in_place) std::memcpy(recv, send, bytes);
        ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Ibcast(recv, n, t, p.root, comm_, &q)));
        break;
      case coll_kind::reduce: {
        ATOMR_ASSIGN_OR_RETURN(MPI_Op op, mpi_op(r.spec.type, p.op));
        const bool root = rank_ == p.root;
        ATOMR_TRY(
            ATOMR_MPI_CHECK(MPI_Ireduce(root && in_place ? MPI_IN_PLACE : send, recv, n, t, op, p.root, comm_, &q)));
        if (root && p.op == reduce_op::avg) {
          st->finish = [=, this] { divide_elements(type, recv, count, size_); };
        }
        break;
      }
      case coll_kind::all_gather:
        if (in_place) {
          ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, comm_, &q)));
        } else {
          ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallgather(send, n, t, recv, n, t, comm_, &q)));
        }
        break;
      case coll_kind::reduce_scatter: {
        ATOMR_ASSIGN_OR_RETURN(MPI_Op op, mpi_op(r.spec.type, p.op));
        ATOMR_TRY(
            ATOMR_MPI_CHECK(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, n, t, op, comm_, &q)));
        // In place, NCCL leaves rank r's block where it was (at r * count); MPI puts it first.
        auto* out = static_cast<std::byte*>(recv) + (in_place ? bytes * static_cast<std::size_t>(rank_) : 0);
        st->finish = [=, this, rop = p.op] {
          if (in_place && rank_ != 0) std::memmove(out, recv, bytes);
          if (rop == reduce_op::avg) divide_elements(type, out, count, size_);
        };
        break;
      }
      case coll_kind::all_to_all: ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Ialltoall(send, n, t, recv, n, t, comm_, &q))); break;
      case coll_kind::send: ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Isend(send, n, t, p.root, k_p2p_tag, comm_, &q))); break;
      case coll_kind::recv: ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Irecv(recv, n, t, p.root, k_p2p_tag, comm_, &q))); break;
      case coll_kind::barrier: ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Ibarrier(comm_, &q))); break;
    }
    st->requests.push_back(q);
    return ok();
  }

  // MPI's operations are nonblocking already: a group's requests are issued each on its own.
  result<void> issue_group(std::span<coll_request* const> batch, const member_waits& waits) override {
    for (auto* r : batch) ATOMR_TRY(issue(*r, waits));
    return ok();
  }

  result<void> issue_packed(std::span<coll_request* const> batch, const member_waits&) override {
    const auto type = batch.front()->spec.type;
    const auto op = batch.front()->spec.params.op;
    const std::size_t elem = local::size_of(type);
    std::size_t total = 0;
    for (const auto* r : batch) total += r->count;
    if (total > static_cast<std::size_t>(INT_MAX)) {
      return error(errc::internal, "packed all_reduce larger than MPI's int count");
    }
    if (use_shm(total * elem)) {
      // Straight from the requests' buffers into the shared ring and back: no pack.
      std::vector<shm_piece> pieces;
      pieces.reserve(batch.size());
      for (const auto* r : batch) pieces.push_back({r->spec.send[0]->ptr, r->spec.recv[0]->ptr, r->bytes()});
      auto st = std::make_shared<host_state>();
      ATOMR_ASSIGN_OR_RETURN(MPI_Op mop, mpi_op(type, op));
      if (op == reduce_op::avg) {
        st->finish = [=, this] {
          for (const auto& p : pieces) divide_elements(type, p.recv, p.bytes / elem, size_);
        };
      }
      ATOMR_ASSIGN_OR_RETURN(st->shm, start_shm(pieces, type, mop));
      give_state(batch, st);
      return ok();
    }
    std::shared_ptr<std::byte[]> pack = packs_->take(total * elem);
    std::size_t offset = 0;
    std::vector<std::pair<void*, std::size_t>> outs;  // recv pointer, offset in the pack
    outs.reserve(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      // (Another thread made the requests: ask for their buffers' lines, then their data, ahead.)
      if (i + 8 < batch.size()) batch[i + 8]->prefetch_buffers();
      if (i + 4 < batch.size()) __builtin_prefetch(batch[i + 4]->spec.send[0]->ptr);
      const auto* r = batch[i];
      std::memcpy(pack.get() + offset, r->spec.send[0]->ptr, r->bytes());
      outs.emplace_back(r->spec.recv[0]->ptr, offset);
      offset += r->bytes();
    }
    auto st = std::make_shared<host_state>();
    ATOMR_ASSIGN_OR_RETURN(MPI_Op mop, mpi_op(type, op));
    std::shared_ptr<std::byte[]> sum = pack;  // where the result lands
    if (use_reduction(total * elem)) {
      ATOMR_ASSIGN_OR_RETURN(st->reduction, start_reduction(pack.get(), static_cast<int>(total), mpi_type(type), mop,
                                                            batch.front()->deadline, total * elem));
    } else {
      // Into a second pooled buffer, not in place: Open MPI's in-place MPI_Iallreduce copies
      // through a temporary buffer of its own, allocated per call (a 1.25 MB pack polled back to
      // back: 0.55-0.74 ms in place, 0.38-0.45 not, on the 32 vCPUs of a KVM guest with two H100s;
      // iar_probe.cpp).
      sum = packs_->take(total * elem);
      st->sent = pack;
      MPI_Request q = MPI_REQUEST_NULL;
      ATOMR_TRY(ATOMR_MPI_CHECK(
          MPI_Iallreduce(pack.get(), sum.get(), static_cast<int>(total), mpi_type(type), mop, comm_, &q)));
      st->requests.push_back(q);
    }
    std::vector<std::size_t> sizes;
    for (const auto* r : batch) sizes.push_back(r->bytes());
    st->finish = [=, this] {
      if (op == reduce_op::avg) divide_elements(type, sum.get(), total, size_);
      for (std::size_t i = 0; i < outs.size(); ++i) std::memcpy(outs[i].first, sum.get() + outs[i].second, sizes[i]);
    };
    give_state(batch, st);
    return ok();
  }

  const std::vector<std::shared_ptr<void>>& events(const coll_request&) const override {
    static const std::vector<std::shared_ptr<void>> none;
    return none;
  }

  result<bool> test(coll_request& r) override {
    auto* st = static_cast<host_state*>(r.state.get());
    if (st->finished) return true;
    int done = 0;
    if (st->shm) {
      ATOMR_TRY(shm_->progress());
      done = st->shm->done() ? 1 : 0;
    } else if (st->reduction) {
      ATOMR_TRY(progress_reductions());
      done = st->reduction->done() ? 1 : 0;
    } else {
      ATOMR_TRY(ATOMR_MPI_CHECK(
          MPI_Testall(static_cast<int>(st->requests.size()), st->requests.data(), &done, MPI_STATUSES_IGNORE)));
    }
    if (!done) return false;
    if (st->finish) st->finish();
    // The packs go back to the pool now, not when the requests are freed (a chunk a turn, some
    // turns later): a call of 1000 x 2 KiB at one rank would find none spare and first-touch 4 MB
    // of fresh pages per batch, 4.1 ms a call against 0.05 ms raw.
    st->finish = nullptr;
    st->sent.reset();
    st->finished = true;
    return true;
  }

  std::optional<error> async_error() override { return std::nullopt; }

  // MPI cannot cancel a collective: the requests stay open and the communicator is left alone.
  void abort() override {
    aborted_ = true;
    reductions_.clear();
    if (shm_) shm_->abandon();
  }

  std::uint64_t shared_memory_reductions() const override { return shm_started_.load(std::memory_order_relaxed); }
  std::uint64_t shared_memory_direct() const override { return shm_ ? shm_->direct() : 0; }

  result<std::unique_ptr<comm_backend>> split(int color, int key, clock::time_point deadline) override {
    // Every rank arrives first (bounded), so the blocking split below cannot hang.
    ATOMR_TRY(agree(comm_, ok(), deadline, "splitting the world"));
    MPI_Comm sub = MPI_COMM_NULL;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub)));
    if (sub == MPI_COMM_NULL) return std::unique_ptr<comm_backend>();
    int rank = 0;
    int size = 0;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(sub, &rank)));
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(sub, &size)));
    ATOMR_ASSIGN_OR_RETURN(auto shm, shm_reducer::open(comm_, sub, rank, size, shm_bytes_, deadline));
    return std::unique_ptr<comm_backend>(new mpi_backend(sub, rank, size, rd_bytes_, shm_bytes_, std::move(shm)));
  }

 private:
  // (The choice must be the same on every rank: it depends on the size only.)
  bool use_reduction(std::size_t bytes) const { return bytes <= rd_bytes_; }
  bool use_shm(std::size_t bytes) const { return shm_ && bytes > 0 && bytes <= shm_->most(); }

  result<std::shared_ptr<shm_reduction>> start_shm(std::vector<shm_piece> pieces, dtype type, MPI_Op op) {
    shm_started_.fetch_add(1, std::memory_order_relaxed);
    return shm_->start(std::move(pieces), mpi_type(type), op, local::size_of(type));
  }

  // Reductions in flight are capped (k_most_in_flight): their tags must not wrap onto one still
  // in flight, and each turn tests all of them. Waiting here is a local choice (it changes no
  // algorithm), bounded by the request's deadline.
  result<std::shared_ptr<host_allreduce>> start_reduction(void* data, int count, MPI_Datatype type, MPI_Op op,
                                                          clock::time_point deadline, std::size_t bytes) {
    while (reductions_.size() >= k_most_in_flight) {
      ATOMR_TRY(progress_reductions());
      if (clock::now() > deadline) {
        return error(errc::timeout, "host all_reduce: " + std::to_string(reductions_.size()) +
                                        " reductions in flight did not finish by the deadline");
      }
    }
    auto reduction =
        std::make_shared<host_allreduce>(comm_, rank_, size_, data, count, type, op, rd_tag(next_reduction_++), bytes);
    ATOMR_ASSIGN_OR_RETURN(const bool done, reduction->progress());
    if (!done) reductions_.push_back(reduction);
    return reduction;
  }

  // Every reduction in flight advances, in the order issued: the engine tests the oldest request
  // only, and the later ones' rounds must not wait for it.
  // One MPI_Testsome over all of their messages: a test per reduction would run MPI's progress
  // engine once for each, every turn, which in bursts cost more than the reductions saved.
  result<void> progress_reductions() {
    pending_.clear();
    for (auto& r : reductions_) {
      const auto q = r->requests();
      pending_.insert(pending_.end(), q.begin(), q.end());
    }
    if (!pending_.empty()) {
      int completed = 0;
      indices_.resize(pending_.size());
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Testsome(static_cast<int>(pending_.size()), pending_.data(), &completed,
                                             indices_.data(), MPI_STATUSES_IGNORE)));
      if (completed == 0 || completed == MPI_UNDEFINED) return ok();
      std::size_t at = 0;
      for (auto& r : reductions_) {
        auto q = r->requests();
        std::copy_n(pending_.begin() + static_cast<std::ptrdiff_t>(at), q.size(), q.begin());
        at += q.size();
      }
    }
    for (auto& r : reductions_) ATOMR_TRY(r->advance());
    std::erase_if(reductions_, [](const std::shared_ptr<host_allreduce>& r) { return r->done(); });
    return ok();
  }

  // A reduction's tags come from its number among this backend's reductions, the same on every
  // rank (all ranks issue the same collectives in the same order, and pick this path by size
  // alone); the span of them wraps far beyond the cap on those in flight. Below k_p2p_tag.
  static constexpr std::size_t k_most_in_flight = 1024;
  static int rd_tag(std::uint64_t n) { return host_allreduce::k_tag_span * static_cast<int>(1 + n % k_tag_spans); }

  MPI_Comm comm_;
  int rank_;
  int size_;
  std::size_t rd_bytes_;
  std::size_t shm_bytes_;
  std::unique_ptr<shm_reducer> shm_;
  std::atomic<std::uint64_t> shm_started_{0};  // (read by stats() on callers' threads)
  std::uint64_t next_reduction_ = 0;
  std::vector<std::shared_ptr<host_allreduce>> reductions_;  // in flight, oldest first
  std::vector<MPI_Request> pending_;                         // their messages, for one MPI_Testsome
  std::vector<int> indices_;
  bool aborted_ = false;
  std::shared_ptr<pack_pool> packs_ = std::make_shared<pack_pool>();
};

}  // namespace

result<std::unique_ptr<comm_backend>> make_host_backend(MPI_Comm comm, clock::time_point deadline) {
  MPI_Comm data = MPI_COMM_NULL;
  MPI_Request q = MPI_REQUEST_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_idup(comm, &data, &q)));
  ATOMR_TRY(wait_mpi(q, deadline, "duplicating the communicator for the host backend"));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN)));
  int rank = 0;
  int size = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(data, &rank)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(data, &size)));
  ATOMR_TRY(agree_settings(data, tunables::k_host, deadline, "starting the host backend"));
  ATOMR_ASSIGN_OR_RETURN(const auto rd, tunable_int(tunables::host_rd_bytes));
  if (rd < 0) return error(errc::invalid_argument, "ATOMR_HOST_RD_BYTES must not be negative");
  // The reductions' tags need MPI_TAG_UB of at least ~2.1 M (Open MPI and MPICH give 2^31 - 1 or
  // more; the standard only promises 32767): below that, MPI_Iallreduce does them all.
  int* tag_ub = nullptr;
  int found = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_get_attr(data, MPI_TAG_UB, &tag_ub, &found)));
  const bool tags_fit =
      found && tag_ub != nullptr && *tag_ub >= host_allreduce::k_tag_span * (mpi_backend::k_tag_spans + 2);
  ATOMR_ASSIGN_OR_RETURN(const auto shm_bytes, tunable_int(tunables::host_shm_bytes));
  if (shm_bytes < 0) return error(errc::invalid_argument, "ATOMR_HOST_SHM_BYTES must not be negative");
  ATOMR_ASSIGN_OR_RETURN(auto shm,
                         shm_reducer::open(comm, data, rank, size, static_cast<std::size_t>(shm_bytes), deadline));
  return std::unique_ptr<comm_backend>(new mpi_backend(data, rank, size, tags_fit ? static_cast<std::size_t>(rd) : 0,
                                                       static_cast<std::size_t>(shm_bytes), std::move(shm)));
}

}  // namespace atomr::cluster::detail
