// Every pair of ranks, one pair per rank at a time: in each tournament round a rank fetches a
// buffer its partner exported (buffer_registry: the path the job's own fetches take) and, in turns
// with it, moves the same bytes raw over the same path, then the partner does the same the other
// way. Taking turns lets both see the same state of the link and of the machine.
#include <algorithm>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <cstring>
#include <map>
#include <span>

#include "atomr/cluster/buffer_registry.hpp"
#include "atomr/cluster/doctor/classify.hpp"
#include "atomr/cluster/doctor/schedule.hpp"
#include "atomr/cluster/gather.hpp"
#include "atomr/cluster/mpi/wait.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/router.hpp"
#include "doctor_parts.hpp"
#if ATOMR_HAVE_CUDA
#include "atomr/local/cuda_check.hpp"
#endif

namespace atomr::cluster::doctor::detail {
namespace {

constexpr int k_tag_offer = 7101;
constexpr int k_tag_ask = 7102;
constexpr int k_tag_data = 7103;
enum ask : int { k_done = 0, k_latency = 1, k_bandwidth = 2 };

// What an owner hands its fetcher: its two exports, or that it has none.
struct offer {
  int ok = 0;
  remote_buffer latency{};
  remote_buffer bandwidth{};
};

// The raw side's memory. Host devices: plain memory, which MPI reads and writes. GPUs: a device
// buffer of its own and pinned memory, copied through as the staged fetch path does.
class raw_buffers {
 public:
  raw_buffers() = default;
  raw_buffers(const raw_buffers&) = delete;
  raw_buffers& operator=(const raw_buffers&) = delete;
  ~raw_buffers() {
#if ATOMR_HAVE_CUDA
    if (device_ != nullptr) cudaFree(device_);
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
#endif
  }
  result<void> make(const local::device& dev, std::size_t bytes, int pattern_rank) {
    bytes_ = bytes;
    host_.resize(bytes / 4);
    for (std::size_t i = 0; i < host_.size(); ++i) host_[i] = pattern_word(pattern_rank, i);
#if ATOMR_HAVE_CUDA
    if (dev.kind() == local::device_kind::cuda) {
      index_ = dev.index();
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(index_)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMalloc(&device_, bytes)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMallocHost(&pinned_, bytes)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemcpy(device_, host_.data(), bytes, cudaMemcpyHostToDevice)));
    }
#else
    (void)dev;
#endif
    return ok();
  }
  // The bytes to send, read out of the device first where there is one.
  result<const void*> outgoing() {
#if ATOMR_HAVE_CUDA
    if (device_ != nullptr) {
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMemcpy(pinned_, device_, bytes_, cudaMemcpyDeviceToHost)));
      return static_cast<const void*>(pinned_);
    }
#endif
    return static_cast<const void*>(host_.data());
  }
  void* incoming() {
#if ATOMR_HAVE_CUDA
    if (pinned_ != nullptr) return pinned_;
#endif
    return host_.data();
  }
  // After the bytes arrived in incoming(): onto the device.
  result<void> landed() {
#if ATOMR_HAVE_CUDA
    if (device_ != nullptr) return ATOMR_CUDA_CHECK(cudaMemcpy(device_, pinned_, bytes_, cudaMemcpyHostToDevice));
#endif
    return ok();
  }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_ = 0;
  std::vector<std::uint32_t> host_;
#if ATOMR_HAVE_CUDA
  int index_ = 0;
  void* device_ = nullptr;
  void* pinned_ = nullptr;
#endif
};

struct pair_context {
  MPI_Comm raw;
  int me;
  const local::device& dev;
  buffer_registry& registry;
  const options& opts;
  const std::vector<int>& world_rank_of;
};

result<local::gpu_ref<std::uint32_t>> patterned(const local::device& dev, std::size_t words, int world_rank) {
  ATOMR_ASSIGN_OR_RETURN(auto buf, dev.allocate<std::uint32_t>(words).get());
  std::vector<std::uint32_t> host(words);
  for (std::size_t i = 0; i < words; ++i) host[i] = pattern_word(world_rank, i);
  ATOMR_TRY(dev.upload(buf, std::span<const std::uint32_t>(host)).get());
  return buf;
}

result<void> recv_politely(void* data, int count, MPI_Datatype type, int from, int tag, MPI_Comm comm,
                           const char* what) {
  MPI_Request req = MPI_REQUEST_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Irecv(data, count, type, from, tag, comm, &req)));
  return wait_politely(req, what);
}

// The owner's half of one direction: export, answer raw asks until the fetcher is done.
result<void> serve(const pair_context& c, int fetcher) {
  const int me_world = c.world_rank_of[static_cast<std::size_t>(c.me)];
  offer o;
  std::vector<local::gpu_ref<std::uint32_t>> exported;
  raw_buffers raw_latency, raw_bandwidth;
  auto prepare = [&]() -> result<void> {
    ATOMR_ASSIGN_OR_RETURN(auto lat, patterned(c.dev, std::max<std::size_t>(c.opts.latency_bytes / 4, 1), me_world));
    ATOMR_ASSIGN_OR_RETURN(auto bw, patterned(c.dev, c.opts.pair_bytes / 4, me_world));
    ATOMR_ASSIGN_OR_RETURN(o.latency, c.registry.export_buffer(lat).get());
    ATOMR_ASSIGN_OR_RETURN(o.bandwidth, c.registry.export_buffer(bw).get());
    exported = {lat, bw};
    ATOMR_TRY(raw_latency.make(c.dev, lat.size() * 4, me_world));
    return raw_bandwidth.make(c.dev, bw.size() * 4, me_world);
  };
  const auto prepared = prepare();
  o.ok = prepared ? 1 : 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(&o, sizeof(o), MPI_BYTE, fetcher, k_tag_offer, c.raw)));
  result<void> outcome = prepared;
  for (;;) {
    int what = k_done;
    ATOMR_TRY(recv_politely(&what, 1, MPI_INT, fetcher, k_tag_ask, c.raw, "a pair's next transfer"));
    if (what == k_done) break;
    auto& raw = what == k_latency ? raw_latency : raw_bandwidth;
    ATOMR_ASSIGN_OR_RETURN(const void* src, raw.outgoing());
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(src, static_cast<int>(raw.bytes()), MPI_BYTE, fetcher, k_tag_data, c.raw)));
  }
  if (o.ok) {
    ATOMR_TRY(c.registry.release(o.latency));
    ATOMR_TRY(c.registry.release(o.bandwidth));
  }
  return outcome;
}

// The fetcher's half: latency and bandwidth, raw and by fetch in turns, until its slice is spent.
edge_result fetch_from(const pair_context& c, int owner, clock::duration slice) {
  edge_result e;
  e.owner = c.world_rank_of[static_cast<std::size_t>(owner)];
  e.fetcher = c.world_rank_of[static_cast<std::size_t>(c.me)];
  e.route = std::string(to_string(c.registry.route_from(owner)));
  e.bytes = c.opts.pair_bytes;
  offer o;
  auto measure = [&]() -> result<void> {
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(&o, sizeof(o), MPI_BYTE, owner, k_tag_offer, c.raw, MPI_STATUS_IGNORE)));
    if (!o.ok) return error(errc::unavailable, "rank " + std::to_string(e.owner) + " could not export its buffers");
    ATOMR_ASSIGN_OR_RETURN(auto lat, c.dev.allocate<std::uint32_t>(o.latency.bytes / 4).get());
    ATOMR_ASSIGN_OR_RETURN(auto bw, c.dev.allocate<std::uint32_t>(o.bandwidth.bytes / 4).get());
    raw_buffers raw_latency, raw_bandwidth;
    ATOMR_TRY(raw_latency.make(c.dev, o.latency.bytes, e.fetcher));
    ATOMR_TRY(raw_bandwidth.make(c.dev, o.bandwidth.bytes, e.fetcher));
    double best[4] = {0, 0, 0, 0};  // raw latency, fetch latency, raw bandwidth, fetch bandwidth (seconds)
    auto keep = [&](int i, clock::time_point t0) {
      const double s = seconds_of(clock::now() - t0);
      if (best[i] == 0 || s < best[i]) best[i] = s;
    };
    auto raw_once = [&](int what, raw_buffers& raw) -> result<void> {
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(&what, 1, MPI_INT, owner, k_tag_ask, c.raw)));
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(raw.incoming(), static_cast<int>(raw.bytes()), MPI_BYTE, owner, k_tag_data,
                                         c.raw, MPI_STATUS_IGNORE)));
      return raw.landed();
    };
    const bool quick = c.opts.quick;
    const int min_blocks = quick ? 1 : 2, max_blocks = quick ? 6 : 20;
    const int lat_reps = quick ? 5 : 10, bw_reps = 2;
    const auto start = clock::now();
    for (int block = 0; block < max_blocks && (block < min_blocks || clock::now() - start < slice); ++block) {
      for (int i = 0; i < lat_reps; ++i) {
        const auto t0 = clock::now();
        ATOMR_TRY(raw_once(k_latency, raw_latency));
        keep(0, t0);
      }
      for (int i = 0; i < lat_reps; ++i) {
        const auto t0 = clock::now();
        ATOMR_TRY(c.registry.fetch(o.latency, lat).get());
        keep(1, t0);
      }
      for (int i = 0; i < bw_reps; ++i) {
        const auto t0 = clock::now();
        ATOMR_TRY(raw_once(k_bandwidth, raw_bandwidth));
        keep(2, t0);
      }
      for (int i = 0; i < bw_reps; ++i) {
        const auto t0 = clock::now();
        ATOMR_TRY(c.registry.fetch(o.bandwidth, bw).get());
        keep(3, t0);
      }
      e.repetitions += bw_reps;
    }
    std::vector<std::uint32_t> back(bw.size());
    ATOMR_TRY(c.dev.download(bw, std::span<std::uint32_t>(back)).get());
    for (std::size_t i = 0; i < back.size(); ++i) {
      if (back[i] != pattern_word(e.owner, i)) {
        return error(errc::protocol, "fetched word " + std::to_string(i) + " of " + std::to_string(back.size()) +
                                         " differs from what rank " + std::to_string(e.owner) + " exported");
      }
    }
    const double gb = static_cast<double>(o.bandwidth.bytes) / 1e9;
    e.raw_latency_us = best[0] * 1e6;
    e.latency_us = best[1] * 1e6;
    e.raw_gbps = gb / best[2];
    e.gbps = gb / best[3];
    return ok();
  };
  if (auto m = measure(); !m) {
    e.failure = "rank " + std::to_string(e.fetcher) + " fetching from rank " + std::to_string(e.owner) + ": " +
                m.error_value().describe();
  }
  const int done = k_done;
  if (auto s = ATOMR_MPI_CHECK(MPI_Send(&done, 1, MPI_INT, owner, k_tag_ask, c.raw)); !s && e.failure.empty()) {
    e.failure = s.error_value().describe();
  }
  return e;
}

}  // namespace

result<void> wait_politely(MPI_Request& request, const char* what) {
  // A partner that is gone is liveness's to name; this deadline only keeps a lost message from
  // hanging the job for ever.
  return cluster::detail::wait_mpi(request, clock::now() + std::chrono::minutes(10), what);
}

namespace {

// Both directions of one pair, each rank taking the side its direction gives it.
void measure_pair(const pair_context& c, int peer, clock::duration per_direction, std::vector<edge_result>& edges) {
  const auto& world_rank_of = c.world_rank_of;
  // The lower rank fetches first.
  for (const bool fetching : {c.me<peer, c.me> peer}) {
    if (fetching) {
      edges.push_back(fetch_from(c, peer, per_direction));
    } else if (auto s = serve(c, peer); !s) {
      edge_result e;
      e.owner = world_rank_of[static_cast<std::size_t>(c.me)];
      e.fetcher = world_rank_of[static_cast<std::size_t>(peer)];
      e.failure = "rank " + std::to_string(e.owner) + " serving rank " + std::to_string(e.fetcher) + ": " +
                  s.error_value().describe();
      edges.push_back(e);
    }
  }
}

// The pairs (comm ranks, a < b) whose slower direction is far below its class, on rank 0 (empty
// elsewhere). A busy machine slows a transfer now and then; a second look tells a slow link, which
// is slow again, from a transfer that lost its CPU.
result<std::vector<std::pair<int, int>>> suspects(MPI_Comm comm, int me, const std::vector<edge_result>& edges,
                                                  const std::vector<int>& world_rank_of,
                                                  const std::vector<int>& node_of, double fraction) {
  ATOMR_ASSIGN_OR_RETURN(auto all, gather_values(comm, edges, "doctor edges"));
  std::vector<std::pair<int, int>> out;
  if (me != 0) return out;
  std::map<int, int> comm_rank;
  for (std::size_t i = 0; i < world_rank_of.size(); ++i) comm_rank[world_rank_of[i]] = static_cast<int>(i);
  std::map<std::pair<int, int>, sample> pairs;
  std::map<std::pair<int, int>, sample> latency;
  std::map<std::pair<int, int>, bool> failed;
  for (const auto& list : all) {
    for (const auto& e : list) {
      const int o = comm_rank[e.owner], f = comm_rank[e.fetcher];
      const auto key = std::make_pair(std::min(o, f), std::max(o, f));
      const double link = e.failure.empty() ? std::max(e.gbps, e.raw_gbps) : 0;
      const double wait = e.failure.empty() ? std::min(e.latency_us, e.raw_latency_us) : 0;
      auto [it, fresh] = pairs.try_emplace(
          key, sample{e.route + (node_of[static_cast<std::size_t>(o)] == node_of[static_cast<std::size_t>(f)]
                                     ? " same node"
                                     : " across nodes"),
                      link, 0});
      if (!fresh) it->second.value = std::min(it->second.value, link);
      auto& l = latency[key];
      l = {it->second.cls, std::max(l.value, wait), 0};
      failed[key] = failed[key] || !e.failure.empty();
    }
  }
  std::vector<sample> samples, waits;
  std::vector<std::pair<int, int>> keys;
  for (const auto& [key, s] : pairs) {
    keys.push_back(key);
    samples.push_back(s);
    waits.push_back(latency[key]);
  }
  const auto judged = judge(samples, better::higher, {fraction, 3});
  const auto judged_wait = judge(waits, better::lower, {k_latency_fraction, 3});
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const bool slow_wait = judged_wait[i].outlier && waits[i].value - judged_wait[i].reference > k_latency_floor_us;
    if ((judged[i].outlier || slow_wait) && !failed[keys[i]]) out.push_back(keys[i]);
  }
  return out;
}

// Keeps the better of two looks at one direction.
void merge(edge_result& kept, const edge_result& again) {
  if (!again.failure.empty()) {
    kept.failure = again.failure;
    return;
  }
  kept.gbps = std::max(kept.gbps, again.gbps);
  kept.raw_gbps = std::max(kept.raw_gbps, again.raw_gbps);
  kept.latency_us = std::min(kept.latency_us, again.latency_us);
  kept.raw_latency_us = std::min(kept.raw_latency_us, again.raw_latency_us);
  kept.repetitions += again.repetitions;
}

}  // namespace

result<std::vector<edge_result>> check_pairs(MPI_Comm comm, const local::device& dev, local::actor_system& system,
                                             const options& opts, const std::vector<int>& world_rank_of, int node_id,
                                             clock::duration slice) {
  int me = 0, size = 1;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(comm, &me)));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(comm, &size)));
  std::vector<edge_result> edges;
  if (size < 2) return edges;
  std::vector<int> node_of(static_cast<std::size_t>(size));
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Allgather(&node_id, 1, MPI_INT, node_of.data(), 1, MPI_INT, comm)));
  ATOMR_ASSIGN_OR_RETURN(auto r, router::start(comm, system));
  ATOMR_ASSIGN_OR_RETURN(auto registry, buffer_registry::start(comm, *r, {dev}));
  MPI_Comm raw = MPI_COMM_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_dup(comm, &raw)));
  const pair_context c{raw, me, dev, *registry, opts, world_rank_of};
  const auto rounds = tournament(size);
  // The tournament takes 70 % of the slice, each direction of a pair half of its round's share;
  // the second look at the suspects takes the rest.
  const auto per_direction = slice * 7 / 10 / std::max<std::size_t>(1, 2 * rounds.size());
  auto end_round = [&]() -> result<void> {
    MPI_Request barrier = MPI_REQUEST_NULL;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Ibarrier(raw, &barrier)));
    return wait_politely(barrier, "the end of a round of pairs");
  };
  result<void> outcome = ok();
  for (int round = 0; round < static_cast<int>(rounds.size()) && outcome; ++round) {
    if (const int peer = partner_in(rounds, round, me); peer >= 0) measure_pair(c, peer, per_direction, edges);
    outcome = end_round();
  }
  if (outcome) {
    auto again = suspects(comm, me, edges, world_rank_of, node_of, opts.fraction);
    std::vector<int> flat;
    if (again) {
      for (const auto& [a, b] : *again) flat.insert(flat.end(), {a, b});
    } else {
      outcome = again.error_value();
    }
    int n = outcome ? static_cast<int>(flat.size()) : -1;
    if (auto b = ATOMR_MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT, 0, raw)); !b) outcome = b;
    if (outcome && n > 0) {
      flat.resize(static_cast<std::size_t>(n));
      outcome = ATOMR_MPI_CHECK(MPI_Bcast(flat.data(), n, MPI_INT, 0, raw));
    }
    // The suspects in rounds again, one pair per rank at a time (first fit, the same on every rank).
    std::vector<round_pairs> second;
    for (std::size_t i = 0; outcome && i + 1 < flat.size(); i += 2) {
      const auto pair = std::make_pair(flat[i], flat[i + 1]);
      auto fits = [&](const round_pairs& rp) {
        return std::none_of(rp.begin(), rp.end(), [&](const auto& q) {
          return q.first == pair.first || q.second == pair.first || q.first == pair.second || q.second == pair.second;
        });
      };
      auto it = std::find_if(second.begin(), second.end(), fits);
      if (it == second.end()) it = second.insert(second.end(), round_pairs{});
      it->push_back(pair);
    }
    const auto per_look = slice * 3 / 10 / std::max<std::size_t>(1, 2 * second.size());
    for (int round = 0; round < static_cast<int>(second.size()) && outcome; ++round) {
      if (const int peer = partner_in(second, round, me); peer >= 0) {
        std::vector<edge_result> looks;
        measure_pair(c, peer, per_look, looks);
        for (const auto& look : looks) {
          for (auto& kept : edges) {
            if (kept.owner == look.owner && kept.fetcher == look.fetcher) merge(kept, look);
          }
        }
      }
      outcome = end_round();
    }
  }
  registry.reset();
  auto stopped = r->stop();
  MPI_Comm_free(&raw);
  ATOMR_TRY(outcome);
  ATOMR_TRY(stopped);
  return edges;
}

}  // namespace atomr::cluster::doctor::detail
