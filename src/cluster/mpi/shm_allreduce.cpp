#include "atomr/cluster/mpi/shm_allreduce.hpp"

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

#include "atomr/cluster/mpi/wait.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/log.hpp"
#include "atomr/local/device/shared_arena.hpp"
#include "atomr/local/tunables.hpp"
#include "shm_segment.hpp"

namespace atomr::cluster::detail {

// Each rank's counters, each on a cache line of its own: the other ranks poll them while this
// rank writes the next. (Lock-free atomics work across processes that map the same memory.)
struct shm_reducer::counters {
  alignas(64) std::atomic<std::uint64_t> ready_through{0};    // inputs of reductions 1..n are in the ring
  alignas(64) std::atomic<std::uint64_t> reduced_through{0};  // slices of reductions 1..n are reduced
  alignas(64) std::atomic<std::uint64_t> done_bytes{0};       // the ring up to here is no longer read
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// Where each rank's shared arena is (local::shared_arena::region), for the others to map it.
struct shm_reducer::arena_info {
  std::uint64_t ok;  // 0: this rank has none
  std::uint64_t pid;
  std::uint64_t fd;
  std::uint64_t bytes;
  std::uint64_t dev;
  std::uint64_t ino;
};

namespace {

constexpr std::size_t k_page = 4096;
constexpr std::size_t k_line = 64;
constexpr std::size_t k_most_total = std::size_t{256} << 20;  // all ranks' rings together
constexpr std::size_t k_least_ring = 65536;
constexpr std::size_t align_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
// A direct reduction combines its slice in chunks of this size (in cache) before writing them.
constexpr std::size_t k_chunk = 16384;

template <typename T, typename U = T>
void add(const void* in, void* inout, std::size_t count) {
  const auto* a = static_cast<const T*>(in);
  auto* b = static_cast<T*>(inout);
  // (Integers add as unsigned: the wrap MPI's C loops give, without signed overflow.)
  for (std::size_t i = 0; i < count; ++i) b[i] = static_cast<T>(static_cast<U>(a[i]) + static_cast<U>(b[i]));
}

template <typename T>
void keep_most(const void* in, void* inout, std::size_t count) {
  const auto* a = static_cast<const T*>(in);
  auto* b = static_cast<T*>(inout);
  for (std::size_t i = 0; i < count; ++i) b[i] = std::max(a[i], b[i]);
}

// MPI's own sum, element by element, for the types the host backend sums most, and the maximum
// of 64-bit integers the world's CUDA graph votes take (without a call into MPI per piece);
// others go through MPI_Reduce_local.
void (*combine_for(MPI_Datatype type, MPI_Op op))(const void*, void*, std::size_t) {
  if (op == MPI_MAX && type == MPI_INT64_T) return keep_most<std::int64_t>;
  if (op != MPI_SUM) return nullptr;
  if (type == MPI_FLOAT) return add<float>;
  if (type == MPI_DOUBLE) return add<double>;
  if (type == MPI_INT32_T) return add<std::int32_t, std::uint32_t>;
  if (type == MPI_UINT32_T) return add<std::uint32_t>;
  if (type == MPI_INT64_T) return add<std::int64_t, std::uint64_t>;
  if (type == MPI_UINT64_T) return add<std::uint64_t>;
  return nullptr;
}

// Every rank of `comm`, by its rank in `parent`: the messages of open() go there. `comm` is new,
// and may still be under construction on other ranks (a blocking split returns on some ranks
// first): Open MPI's nonblocking collectives on it, right after, hung 1 in 5 runs at 4 ranks on a
// KVM guest with two H100s and 32 vCPUs.
result<std::vector<int>> ranks_in_parent(MPI_Comm parent, MPI_Comm comm, int size) {
  std::vector<int> in_parent(static_cast<std::size_t>(size));
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
  return in_parent;
}

// Rank 0 of a node's ranks and the others, point to point on the parent communicator, each step
// bounded by the deadline.
class node_talk {
 public:
  node_talk(MPI_Comm parent, std::vector<int> in_parent, int rank, std::chrono::steady_clock::time_point deadline)
      : parent_(parent), in_parent_(std::move(in_parent)), rank_(rank), deadline_(deadline) {}

  // Rank 0 sends `offer` to every other rank; they receive it.
  result<void> share(segment_offer& offer, const std::string& doing) const {
    if (rank_ == 0) {
      for (std::size_t r = 1; r < in_parent_.size(); ++r) ATOMR_TRY(exchange(&offer, sizeof(offer), r, true, doing));
      return ok();
    }
    ATOMR_TRY(exchange(&offer, sizeof(offer), 0, false, doing));
    offer.host[sizeof(offer.host) - 1] = '\0';
    return ok();
  }

  // Every rank says yes (1) or no (0) to rank 0, which tells all the least.
  result<int> agree_min(int mine, const std::string& doing) const {
    if (rank_ != 0) {
      ATOMR_TRY(exchange(&mine, sizeof(mine), 0, true, doing));
      int least = 0;
      ATOMR_TRY(exchange(&least, sizeof(least), 0, false, doing));
      return least;
    }
    int least = mine;
    for (std::size_t r = 1; r < in_parent_.size(); ++r) {
      int theirs = 0;
      ATOMR_TRY(exchange(&theirs, sizeof(theirs), r, false, doing));
      least = std::min(least, theirs);
    }
    for (std::size_t r = 1; r < in_parent_.size(); ++r) ATOMR_TRY(exchange(&least, sizeof(least), r, true, doing));
    return least;
  }

 private:
  result<void> exchange(void* data, int bytes, std::size_t peer, bool send, const std::string& doing) const {
    MPI_Request q = MPI_REQUEST_NULL;
    const int to = in_parent_[peer];
    ATOMR_TRY(ATOMR_MPI_CHECK(send ? MPI_Isend(data, bytes, MPI_BYTE, to, shm_reducer::k_tag, parent_, &q)
                                   : MPI_Irecv(data, bytes, MPI_BYTE, to, shm_reducer::k_tag, parent_, &q)));
    return wait_mpi(q, deadline_, doing);
  }

  MPI_Comm parent_;
  std::vector<int> in_parent_;
  int rank_;
  std::chrono::steady_clock::time_point deadline_;
};

// Why a rank other than 0 does not open the segment rank 0 offers; empty when it does.
std::string why_not_to_open(const segment_offer& offer, bool wanted) {
  if (!wanted) return "not wanted on this rank";
  if (!offer.ok) return "rank 0 could not make it";
  char host[sizeof(offer.host)] = {};
  gethostname(host, sizeof(host) - 1);
  // Another node, by name (ranks in network namespaces of one machine, too, are taken at their
  // word: they stand for separate hosts).
  if (std::strcmp(host, offer.host) != 0) return std::string("rank 0 is on ") + offer.host + ", this rank on " + host;
  return {};
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

// The segment's start: the cookie's line, every rank's counters, every rank's arena, to a page;
// the rings follow.
std::size_t shm_reducer::header_bytes(int size) {
  return align_up(k_line + static_cast<std::size_t>(size) * (sizeof(counters) + sizeof(arena_info)), k_page);
}

shm_reducer::shm_reducer(void* map, std::size_t map_bytes, int rank, int size, std::size_t ring)
    : map_(map),
      map_bytes_(map_bytes),
      rings_(static_cast<std::byte*>(map) + header_bytes(size)),
      rank_(rank),
      size_(size),
      ring_(ring),
      arenas_(static_cast<std::size_t>(size)) {}

shm_reducer::~shm_reducer() {
  for (const auto& a : arenas_) {
    if (a.mapped) munmap(a.base, a.bytes);
  }
  munmap(map_, map_bytes_);
}

shm_reducer::arena_info& shm_reducer::arena_of(int rank) const {
  auto* base = static_cast<std::byte*>(map_) + k_line + static_cast<std::size_t>(size_) * sizeof(counters);
  return *std::launder(reinterpret_cast<arena_info*>(base + static_cast<std::size_t>(rank) * sizeof(arena_info)));
}

bool shm_reducer::map_arenas(std::string& why) {
  const auto* own = local::shared_arena::instance();
  if (own == nullptr || arena_of(rank_).ok == 0) {
    why = "this rank has no shared arena (or ATOMR_HOST_ARENA_MOST=0)";
    return false;
  }
  arenas_[static_cast<std::size_t>(rank_)] = {own->where().base, own->where().bytes, false};
  for (int k = 0; k < size_; ++k) {
    if (k == rank_) continue;
    const arena_info info = arena_of(k);
    const std::string name = "rank " + std::to_string(k) + "'s arena";
    if (info.ok == 0) {
      why = "rank " + std::to_string(k) + " has no shared arena";
      return false;
    }
    // The other process's memfd, by its descriptor: any process of the same user may open it.
    const std::string path = "/proc/" + std::to_string(info.pid) + "/fd/" + std::to_string(info.fd);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      why = errno_text(("open " + path + " (" + name + ")").c_str());
      return false;
    }
    // (Another pid namespace has other processes under the same numbers.)
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_dev) != info.dev ||
        static_cast<std::uint64_t>(st.st_ino) != info.ino || static_cast<std::uint64_t>(st.st_size) < info.bytes) {
      close(fd);
      why = path + " is not " + name;
      return false;
    }
    void* m = mmap(nullptr, info.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
      why = errno_text(("mmap of " + name).c_str());
      return false;
    }
    (void)madvise(m, info.bytes, MADV_DONTFORK);
    arenas_[static_cast<std::size_t>(k)] = {static_cast<std::byte*>(m), info.bytes, true};
  }
  return true;
}

shm_reducer::counters& shm_reducer::of(int rank) const {
  auto* base = static_cast<std::byte*>(map_) + k_line;
  return *std::launder(reinterpret_cast<counters*>(base + static_cast<std::size_t>(rank) * sizeof(counters)));
}

std::byte* shm_reducer::ring_of(int rank) const { return rings_ + static_cast<std::size_t>(rank) * ring_; }

result<std::unique_ptr<shm_reducer>> shm_reducer::open(MPI_Comm parent, MPI_Comm comm, int rank, int size,
                                                       std::size_t ring_bytes,
                                                       std::chrono::steady_clock::time_point deadline,
                                                       shm_purpose what) {
  // (Every rank decides alike: the arguments are the same everywhere.)
  const std::size_t ring = std::min(align_up(ring_bytes, k_page),
                                    k_most_total / static_cast<std::size_t>(std::max(size, 1)) / k_page * k_page);
  if (size < 2 || ring < k_least_ring) return std::unique_ptr<shm_reducer>();
  const std::size_t total = header_bytes(size) + static_cast<std::size_t>(size) * ring;
  ATOMR_ASSIGN_OR_RETURN(auto in_parent, ranks_in_parent(parent, comm, size));
  const node_talk talk(parent, std::move(in_parent), rank, deadline);
  // Rank 0 makes the segment and tells each rank where it is; each says whether it mapped it; rank
  // 0 tells all whether every rank did.
  segment_offer offer;
  shm_segment segment;
  std::string why;
  if (rank == 0 && !what.wanted) {
    why = "not wanted on rank 0";
  } else if (rank == 0) {
    std::random_device entropy;
    offer.cookie = (static_cast<std::uint64_t>(entropy()) << 32 | entropy()) | 1U;
    gethostname(offer.host, sizeof(offer.host) - 1);
    segment = shm_segment::make(total, offer);
    why = segment.why();
    if (segment.data() != nullptr) {
      auto* base = static_cast<std::byte*>(segment.data()) + k_line;
      for (int r = 0; r < size; ++r) new (base + static_cast<std::size_t>(r) * sizeof(counters)) counters();
    }
    offer.ok = segment.data() != nullptr ? 1 : 0;
  }
  ATOMR_TRY(talk.share(offer, std::string("sharing ") + what.user + "'s shared-memory segment"));
  if (rank != 0) {
    why = why_not_to_open(offer, what.wanted);
    if (why.empty()) {
      segment = shm_segment::open(offer, total);
      why = segment.why();
    }
  }
  const auto all =
      talk.agree_min(segment.data() != nullptr ? 1 : 0, "agreeing whether every rank mapped the shared-memory segment");
  segment.close_offer();  // every rank has opened it by now, or given up
  if (!all) return all.error_value();
  if (!*all) {
    log::get("cluster")->debug("{}: no shared-memory all_reduce ({}); MPI does them", what.user,
                               why.empty() ? "another rank could not map the segment" : why);
    return std::unique_ptr<shm_reducer>();
  }
  std::unique_ptr<shm_reducer> reducer(new shm_reducer(segment.release(), total, rank, size, ring));
  if (!what.direct) return reducer;
  // Direct reductions: every rank says where its arena is, then maps every other rank's; they go
  // direct only if every rank could.
  // (ATOMR_HOST_ARENA_MOST=0: this rank's host buffers are all on the heap; it offers no arena.)
  const auto arena_most = tunable_int(tunables::host_arena_most);
  const auto* own = arena_most && *arena_most > 0 ? local::shared_arena::instance() : nullptr;
  if (own != nullptr) {
    const auto at = own->where();
    reducer->arena_of(rank) = {
        1, static_cast<std::uint64_t>(at.pid), static_cast<std::uint64_t>(at.fd), at.bytes, at.dev, at.ino};
  }
  ATOMR_TRY(talk.agree_min(1, "sharing where each rank's host buffers are"));
  std::string no_direct;
  const int mapped = reducer->map_arenas(no_direct) ? 1 : 0;
  ATOMR_ASSIGN_OR_RETURN(const int direct, talk.agree_min(mapped, "agreeing whether all_reduces go direct"));
  reducer->direct_ok_ = direct == 1;
  if (!reducer->direct_ok_) {
    log::get("cluster")->debug("{}: shared-memory all_reduces copy through the ring ({})", what.user,
                               no_direct.empty() ? "another rank could not map every arena" : no_direct);
  }
  return reducer;
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
  r->combine_ = combine_for(type, op);
  r->seq_ = next_seq_++;
  // Direct where every rank can and it is not reduced whole; its slot then holds the piece table
  // and room after it for pieces outside the arena. (Decided from sizes and counts alone, which
  // are the same on every rank.)
  std::size_t reserve = r->bytes_;
  const std::size_t table = align_up(r->pieces_.size() * sizeof(piece_place), k_line);
  if (direct_ok_ && r->bytes_ > k_whole_bytes && table + r->bytes_ <= ring_) {
    r->direct_ = true;
    r->table_ = table;
    reserve = table + r->bytes_;
    direct_started_.fetch_add(1, std::memory_order_relaxed);
  }
  // Its place in the ring: after the last one, or at the ring's start where it would not fit
  // before the end. The same on every rank: it follows from the sizes issued before.
  std::uint64_t at = next_start_;
  if (at % ring_ + reserve > ring_) at = align_up(at, ring_);
  r->start_ = at;
  r->end_ = at + reserve;
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
    if (r.direct_) {
      copy_in_direct(r, at);
    } else {
      auto* to = ring_of(rank_) + at;
      for (const auto& p : r.pieces_) {
        std::memcpy(to, p.send, p.bytes);
        to += p.bytes;
      }
    }
    of(rank_).ready_through.store(r.seq_, std::memory_order_release);
    r.phase_ = phase::reduce;
  }
  if (!may_finish) return false;
  if (r.phase_ == phase::reduce) {
    for (int k = 0; k < size_; ++k) {
      if (of(k).ready_through.load(std::memory_order_acquire) < r.seq_) return false;
    }
    ATOMR_TRY(r.direct_ ? reduce_direct(r, at) : reduce(r, at));
  }
  if (r.phase_ == phase::copy_out) {
    for (int k = 0; k < size_; ++k) {
      if (of(k).reduced_through.load(std::memory_order_acquire) < r.seq_) return false;
    }
    if (r.direct_) {
      copy_out_direct(r, at);
    } else {
      copy_out(r, at);
    }
  }
  return true;
}

std::uint64_t shm_reducer::place_of(const void* p, std::size_t in_ring) const {
  const auto& own = arenas_[static_cast<std::size_t>(rank_)];
  const auto* b = static_cast<const std::byte*>(p);
  if (b >= own.base && b < own.base + own.bytes) return static_cast<std::uint64_t>(b - own.base);
  return k_in_ring | in_ring;
}

void shm_reducer::copy_in_direct(shm_reduction& r, std::size_t at) {
  std::byte* slot = ring_of(rank_) + at;
  auto* table = reinterpret_cast<piece_place*>(slot);  // (slots start on a cache line)
  std::size_t room = r.table_;                         // each piece's room after the table, used or not
  for (std::size_t i = 0; i < r.pieces_.size(); ++i) {
    const auto& p = r.pieces_[i];
    // (A piece's end is in the arena if its start is: buffers do not straddle it.)
    const piece_place place{place_of(p.send, room), place_of(p.recv, room)};
    if ((place.send & k_in_ring) != 0) std::memcpy(slot + room, p.send, p.bytes);
    table[i] = place;
    room += p.bytes;
  }
}

std::byte* shm_reducer::resolve(int k, std::size_t at, std::uint64_t where) const {
  if ((where & k_in_ring) != 0) return ring_of(k) + at + (where & ~k_in_ring);
  return arenas_[static_cast<std::size_t>(k)].base + where;
}

result<void> shm_reducer::reduce_direct(shm_reduction& r, std::size_t at) {
  const auto [from, to] = slice(r, rank_);
  const std::size_t slot_bytes = r.end_ - r.start_;
  // Another rank's table is checked before it is used: a place outside that rank's arena or slot
  // is an error of the world, not a write to a stray address.
  auto place = [&](int k, std::size_t i, bool send) -> result<std::byte*> {
    const auto* table = reinterpret_cast<const piece_place*>(ring_of(k) + at);
    const std::uint64_t where = send ? table[i].send : table[i].recv;
    const std::size_t bytes = r.pieces_[i].bytes;
    const std::size_t limit = (where & k_in_ring) != 0 ? slot_bytes : arenas_[static_cast<std::size_t>(k)].bytes;
    const std::uint64_t off = where & ~k_in_ring;
    if (off > limit || bytes > limit - off) {
      return error(errc::internal, "shared-memory all_reduce " + std::to_string(r.seq_) + ": rank " +
                                       std::to_string(k) + " placed piece " + std::to_string(i) + " (" +
                                       std::to_string(bytes) + " bytes) outside its " +
                                       ((where & k_in_ring) != 0 ? "ring" : "arena"));
    }
    return resolve(k, at, where);
  };
  if (scratch_.size() < k_chunk) scratch_.resize(k_chunk);
  std::vector<const std::byte*> in(static_cast<std::size_t>(size_));
  std::vector<std::byte*> out(static_cast<std::size_t>(size_));
  std::size_t off = 0;  // piece i's start in the reduction
  for (std::size_t i = 0; i < r.pieces_.size() && off < to; off += r.pieces_[i].bytes, ++i) {
    const std::size_t lo = std::max(from, off);
    const std::size_t hi = std::min(to, off + r.pieces_[i].bytes);
    if (lo >= hi) continue;
    for (int k = 0; k < size_; ++k) {
      ATOMR_ASSIGN_OR_RETURN(in[static_cast<std::size_t>(k)], place(k, i, true));
      ATOMR_ASSIGN_OR_RETURN(out[static_cast<std::size_t>(k)], place(k, i, false));
    }
    // In chunks combined in cache, then written to every rank: an output may be an input of the
    // same piece (in place), which this rank alone reads, before it writes.
    for (std::size_t c = lo; c < hi; c += k_chunk) {
      const std::size_t n = std::min(k_chunk, hi - c);
      const std::size_t skip = c - off;
      std::byte* acc = scratch_.data();
      std::memcpy(acc, in[0] + skip, n);
      for (int k = 1; k < size_; ++k) {
        ATOMR_TRY(combine(r, in[static_cast<std::size_t>(k)] + skip, acc, n));
      }
      for (int k = 0; k < size_; ++k) std::memcpy(out[static_cast<std::size_t>(k)] + skip, acc, n);
    }
  }
  of(rank_).reduced_through.store(r.seq_, std::memory_order_release);
  r.phase_ = shm_reduction::phase::copy_out;
  return ok();
}

void shm_reducer::copy_out_direct(shm_reduction& r, std::size_t at) {
  // Only this rank's pieces outside its arena: the others' results are where they belong.
  const std::byte* slot = ring_of(rank_) + at;
  const auto* table = reinterpret_cast<const piece_place*>(slot);
  for (std::size_t i = 0; i < r.pieces_.size(); ++i) {
    if ((table[i].recv & k_in_ring) != 0) {
      std::memcpy(r.pieces_[i].recv, slot + (table[i].recv & ~k_in_ring), r.pieces_[i].bytes);
    }
  }
  of(rank_).done_bytes.store(r.end_, std::memory_order_release);
  r.phase_ = shm_reduction::phase::done;
}

void shm_reducer::abandon() {
  if (auto* own = local::shared_arena::instance()) {
    for (const auto& r : flight_) {
      if (!r->direct_ || r->done()) continue;
      for (const auto& p : r->pieces_) {
        if (own->owns(p.send)) own->quarantine(p.send);
        if (own->owns(p.recv)) own->quarantine(p.recv);
      }
    }
  }
  flight_.clear();
}

// inout = in (op) inout, `bytes` of elements, as MPI_Reduce_local computes it.
result<void> shm_reducer::combine(const shm_reduction& r, const std::byte* in, std::byte* inout, std::size_t bytes) {
  if (r.combine_ != nullptr) {
    r.combine_(in, inout, bytes / r.elem_);
    return ok();
  }
  return ATOMR_MPI_CHECK(MPI_Reduce_local(in, inout, static_cast<int>(bytes / r.elem_), r.type_, r.op_));
}

result<void> shm_reducer::reduce(shm_reduction& r, std::size_t at) {
  using phase = shm_reduction::phase;
  auto local = [&](const std::byte* in, std::byte* inout, std::size_t bytes) { return combine(r, in, inout, bytes); };
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
