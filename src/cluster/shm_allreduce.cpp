#include "shm_allreduce.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <random>

#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/log.hpp"
#include "comm_backend.hpp"

namespace atomr::cluster::detail {

// Each rank's counters, each on a cache line of its own: the other ranks poll them while this
// rank writes the next. (Lock-free atomics work across processes that map the same memory.)
struct shm_reducer::counters {
  alignas(64) std::atomic<std::uint64_t> ready_through{0};    // inputs of reductions 1..n are in the ring
  alignas(64) std::atomic<std::uint64_t> reduced_through{0};  // slices of reductions 1..n are reduced
  alignas(64) std::atomic<std::uint64_t> done_bytes{0};       // the ring up to here is no longer read
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

namespace {

constexpr std::size_t k_page = 4096;
constexpr std::size_t k_line = 64;
constexpr std::size_t k_most_total = std::size_t{256} << 20;  // all ranks' rings together
constexpr std::size_t k_least_ring = 65536;
constexpr std::size_t align_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// What rank 0 tells the others: the segment's name, and a word it wrote at the segment's start,
// which a rank that opened a segment of that name elsewhere (another node's /dev/shm) would not see.
struct announcement {
  std::uint64_t cookie = 0;
  std::uint64_t bytes = 0;
  int ok = 0;
  char name[64] = {};
  char host[256] = {};  // rank 0's host name
};

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

// The segment's start: the cookie's line, then every rank's counters, to a page; the rings follow.
std::size_t shm_reducer::header_bytes(int size) {
  return align_up(k_line + static_cast<std::size_t>(size) * sizeof(counters), k_page);
}

shm_reducer::shm_reducer(void* map, std::size_t map_bytes, int rank, int size, std::size_t ring)
    : map_(map),
      map_bytes_(map_bytes),
      rings_(static_cast<std::byte*>(map) + header_bytes(size)),
      rank_(rank),
      size_(size),
      ring_(ring) {}

shm_reducer::~shm_reducer() { munmap(map_, map_bytes_); }

shm_reducer::counters& shm_reducer::of(int rank) const {
  auto* base = static_cast<std::byte*>(map_) + k_line;
  return *std::launder(reinterpret_cast<counters*>(base + static_cast<std::size_t>(rank) * sizeof(counters)));
}

std::byte* shm_reducer::ring_of(int rank) const { return rings_ + static_cast<std::size_t>(rank) * ring_; }

result<std::unique_ptr<shm_reducer>> shm_reducer::open(MPI_Comm parent, MPI_Comm comm, int rank, int size,
                                                       std::size_t ring_bytes,
                                                       std::chrono::steady_clock::time_point deadline) {
  // (Every rank decides alike: the arguments are the same everywhere.)
  const std::size_t ring = std::min(align_up(ring_bytes, k_page),
                                    k_most_total / static_cast<std::size_t>(std::max(size, 1)) / k_page * k_page);
  if (size < 2 || ring < k_least_ring) return std::unique_ptr<shm_reducer>();
  const std::size_t total = header_bytes(size) + static_cast<std::size_t>(size) * ring;
  // Every rank's rank in `parent`: the messages below go there. `comm` is new, and may still be
  // under construction on other ranks (a blocking split returns on some ranks first): Open MPI's
  // nonblocking collectives on it, right after, hung 1 in 5 runs at 4 ranks on the GPU machine
  // (docs/benchmarks.md, twenty-second session).
  std::vector<int> in_parent(static_cast<std::size_t>(size));
  {
    MPI_Group mine = MPI_GROUP_NULL;
    MPI_Group theirs = MPI_GROUP_NULL;
    std::vector<int> ranks(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
    auto got = ATOMR_MPI_CHECK(MPI_Comm_group(comm, &mine));
    if (got) got = ATOMR_MPI_CHECK(MPI_Comm_group(parent, &theirs));
    if (got) got = ATOMR_MPI_CHECK(MPI_Group_translate_ranks(mine, size, ranks.data(), theirs, in_parent.data()));
    if (mine != MPI_GROUP_NULL) MPI_Group_free(&mine);
    if (theirs != MPI_GROUP_NULL) MPI_Group_free(&theirs);
    ATOMR_TRY(got);
  }
  const int leader = in_parent[0];
  auto exchange = [&](void* data, int bytes, int peer, bool send, const char* what) -> result<void> {
    MPI_Request q = MPI_REQUEST_NULL;
    ATOMR_TRY(ATOMR_MPI_CHECK(send ? MPI_Isend(data, bytes, MPI_BYTE, peer, k_tag, parent, &q)
                                   : MPI_Irecv(data, bytes, MPI_BYTE, peer, k_tag, parent, &q)));
    return wait_mpi(q, deadline, what);
  };
  announcement a;
  std::string why;
  void* map = MAP_FAILED;
  auto drop = [&] {
    if (map != MAP_FAILED) munmap(map, total);
    map = MAP_FAILED;
  };
  auto map_fd = [&](int fd) {
    map = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) why = errno_text("mmap");
  };
  if (rank == 0) {
    static std::atomic<unsigned> made{0};
    std::random_device entropy;
    a.cookie = (static_cast<std::uint64_t>(entropy()) << 32 | entropy()) | 1U;
    std::snprintf(a.name, sizeof(a.name), "/atomr-%d-%u-%08x", static_cast<int>(getpid()), made.fetch_add(1),
                  static_cast<unsigned>(a.cookie >> 32));
    a.bytes = total;
    gethostname(a.host, sizeof(a.host) - 1);
    const int fd = shm_open(a.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      why = errno_text("shm_open");
    } else {
      // The whole segment is reserved now: tmpfs allocates pages on first touch, and a touch
      // that finds /dev/shm full is a SIGBUS, not an error.
      if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
        why = errno_text("ftruncate");
      } else if (const int e = posix_fallocate(fd, 0, static_cast<off_t>(total)); e != 0) {
        why = std::string("posix_fallocate of ") + std::to_string(total) + " bytes: " + std::strerror(e);
      } else {
        map_fd(fd);
      }
      close(fd);
      if (map != MAP_FAILED) {
        std::memcpy(map, &a.cookie, sizeof(a.cookie));
        auto* base = static_cast<std::byte*>(map) + k_line;
        for (int r = 0; r < size; ++r) new (base + static_cast<std::size_t>(r) * sizeof(counters)) counters();
      } else {
        shm_unlink(a.name);
      }
    }
    a.ok = map != MAP_FAILED ? 1 : 0;
  }
  // Rank 0 tells each rank the name; each says whether it mapped the segment; rank 0 tells all
  // whether every rank did. (A failure here leaves the segment's name to rank 0 to remove.)
  auto steps = [&]() -> result<int> {
    if (rank == 0) {
      for (int r = 1; r < size; ++r) {
        ATOMR_TRY(exchange(&a, sizeof(a), in_parent[static_cast<std::size_t>(r)], true,
                           "sharing the host backend's shared-memory segment"));
      }
      int all = a.ok;
      for (int r = 1; r < size; ++r) {
        int theirs = 0;
        ATOMR_TRY(exchange(&theirs, sizeof(theirs), in_parent[static_cast<std::size_t>(r)], false,
                           "hearing whether every rank mapped the shared-memory segment"));
        all = std::min(all, theirs);
      }
      for (int r = 1; r < size; ++r) {
        ATOMR_TRY(exchange(&all, sizeof(all), in_parent[static_cast<std::size_t>(r)], true,
                           "telling every rank whether the shared-memory segment is used"));
      }
      return all;
    }
    ATOMR_TRY(exchange(&a, sizeof(a), leader, false, "hearing of the host backend's shared-memory segment"));
    a.name[sizeof(a.name) - 1] = '\0';
    a.host[sizeof(a.host) - 1] = '\0';
    char host[sizeof(a.host)] = {};
    gethostname(host, sizeof(host) - 1);
    if (!a.ok) {
      why = "rank 0 could not make it";
    } else if (std::strcmp(host, a.host) != 0) {
      // Another node, by name (ranks in network namespaces of one machine, too, are taken at
      // their word: their /dev/shm may be shared, but they stand for separate hosts).
      why = std::string("rank 0 is on ") + a.host + ", this rank on " + host;
    } else if (const int fd = shm_open(a.name, O_RDWR, 0600); fd < 0) {
      why = errno_text("shm_open");
    } else {
      struct stat st {};
      if (fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != a.bytes || a.bytes != total) {
        why = "a segment of another size";
      } else {
        map_fd(fd);
      }
      close(fd);
      std::uint64_t seen = 0;
      if (map != MAP_FAILED) std::memcpy(&seen, map, sizeof(seen));
      if (map != MAP_FAILED && seen != a.cookie) {
        why = "another process's segment of the same name";
        drop();
      }
    }
    int mine = map != MAP_FAILED ? 1 : 0;
    ATOMR_TRY(exchange(&mine, sizeof(mine), leader, true, "saying whether this rank mapped the shared-memory segment"));
    int all = 0;
    ATOMR_TRY(exchange(&all, sizeof(all), leader, false, "hearing whether the shared-memory segment is used"));
    return all;
  };
  const auto all = steps();
  // Every rank that will map it has: the name can go (the segment lives while it is mapped).
  if (rank == 0 && a.ok) shm_unlink(a.name);
  if (!all || !*all) {
    drop();
    if (!all) return all.error_value();
    log::get("cluster")->debug("host backend: no shared-memory all_reduce ({}); MPI does them",
                               why.empty() ? "another rank could not map the segment" : why);
    return std::unique_ptr<shm_reducer>();
  }
  return std::unique_ptr<shm_reducer>(new shm_reducer(map, total, rank, size, ring));
}

result<std::shared_ptr<shm_reduction>> shm_reducer::start(std::vector<shm_piece> pieces, MPI_Datatype type, MPI_Op op,
                                                          std::size_t elem) {
  auto r = std::make_shared<shm_reduction>();
  for (const auto& p : pieces) r->bytes_ += p.bytes;
  if (r->bytes_ == 0 || r->bytes_ > most()) {
    return error(errc::internal, "shared-memory all_reduce of " + std::to_string(r->bytes_) + " bytes (at most " +
                                     std::to_string(most()) + ")");
  }
  r->pieces_ = std::move(pieces);
  r->type_ = type;
  r->op_ = op;
  r->elem_ = elem;
  r->seq_ = next_seq_++;
  // Its place in the ring: after the last one, or at the ring's start where it would not fit
  // before the end. The same on every rank: it follows from the sizes issued before.
  std::uint64_t at = next_start_;
  if (at % ring_ + r->bytes_ > ring_) at = align_up(at, ring_);
  r->start_ = at;
  r->end_ = at + r->bytes_;
  next_start_ = align_up(r->end_, k_line);
  flight_.push_back(r);
  ATOMR_TRY(progress());
  return r;
}

result<bool> shm_reducer::advance(shm_reduction& r, bool may_finish) {
  using phase = shm_reduction::phase;
  const auto at = static_cast<std::size_t>(r.start_ % ring_);
  if (r.phase_ == phase::copy_in) {
    // The ring's space is free once every rank is done with what was there before.
    for (int k = 0; k < size_; ++k) {
      if (of(k).done_bytes.load(std::memory_order_acquire) + ring_ < r.end_) return false;
    }
    auto* to = ring_of(rank_) + at;
    for (const auto& p : r.pieces_) {
      std::memcpy(to, p.send, p.bytes);
      to += p.bytes;
    }
    of(rank_).ready_through.store(r.seq_, std::memory_order_release);
    r.phase_ = phase::reduce;
  }
  if (!may_finish) return false;
  if (r.phase_ == phase::reduce) {
    for (int k = 0; k < size_; ++k) {
      if (of(k).ready_through.load(std::memory_order_acquire) < r.seq_) return false;
    }
    ATOMR_TRY(reduce(r, at));
  }
  if (r.phase_ == phase::copy_out) {
    for (int k = 0; k < size_; ++k) {
      if (of(k).reduced_through.load(std::memory_order_acquire) < r.seq_) return false;
    }
    copy_out(r, at);
  }
  return true;
}

result<void> shm_reducer::reduce(shm_reduction& r, std::size_t at) {
  using phase = shm_reduction::phase;
  auto local = [&](const std::byte* in, std::byte* inout, std::size_t bytes) -> result<void> {
    return ATOMR_MPI_CHECK(MPI_Reduce_local(in, inout, static_cast<int>(bytes / r.elem_), r.type_, r.op_));
  };
  if (r.bytes_ <= k_whole_bytes) {
    // Small: every rank reduces it all, rank 0's operand first, straight into the outputs.
    std::size_t off = at;
    for (const auto& p : r.pieces_) {
      auto* out = static_cast<std::byte*>(p.recv);
      std::memmove(out, ring_of(0) + off, p.bytes);
      for (int k = 1; k < size_; ++k) ATOMR_TRY(local(ring_of(k) + off, out, p.bytes));
      off += p.bytes;
    }
    of(rank_).reduced_through.store(r.seq_, std::memory_order_release);
    of(rank_).done_bytes.store(r.end_, std::memory_order_release);
    r.phase_ = phase::done;
    return ok();
  }
  // Large: this rank's slice, into its own ring, where the others copy it from.
  const auto [from, to] = slice(r, rank_);
  if (to > from) {
    for (int k = 0; k < size_; ++k) {
      if (k != rank_) ATOMR_TRY(local(ring_of(k) + at + from, ring_of(rank_) + at + from, to - from));
    }
  }
  of(rank_).reduced_through.store(r.seq_, std::memory_order_release);
  r.phase_ = phase::copy_out;
  return ok();
}

std::pair<std::size_t, std::size_t> shm_reducer::slice(const shm_reduction& r, int rank) const {
  // In whole elements, and in whole cache lines where the size allows.
  const std::size_t unit = k_line % r.elem_ == 0 ? k_line : r.elem_;
  const std::size_t units = (r.bytes_ + unit - 1) / unit;
  auto edge = [&](int k) {
    return std::min(r.bytes_, units * static_cast<std::size_t>(k) / static_cast<std::size_t>(size_) * unit);
  };
  return {edge(rank), edge(rank + 1)};
}

void shm_reducer::copy_out(shm_reduction& r, std::size_t at) {
  // Each piece from the owners of the slices it spans.
  std::size_t off = 0;  // in the reduction
  int owner = 0;
  auto bounds = slice(r, owner);
  for (const auto& p : r.pieces_) {
    auto* out = static_cast<std::byte*>(p.recv);
    std::size_t done = 0;
    while (done < p.bytes) {
      while (off + done >= bounds.second) bounds = slice(r, ++owner);
      const std::size_t n = std::min(p.bytes - done, bounds.second - (off + done));
      std::memcpy(out + done, ring_of(owner) + at + off + done, n);
      done += n;
    }
    off += p.bytes;
  }
  of(rank_).done_bytes.store(r.end_, std::memory_order_release);
  r.phase_ = shm_reduction::phase::done;
}

result<void> shm_reducer::progress() {
  // Inputs are copied in order, and may run ahead of the reductions before them; reductions
  // finish in order (the counters say "through n").
  bool may_finish = true;
  for (auto& r : flight_) {
    if (r->done()) continue;
    ATOMR_ASSIGN_OR_RETURN(const bool finished, advance(*r, may_finish));
    if (!finished) {
      may_finish = false;
      if (r->phase_ == shm_reduction::phase::copy_in) break;
    }
  }
  while (!flight_.empty() && flight_.front()->done()) flight_.pop_front();
  return ok();
}

}  // namespace atomr::cluster::detail
