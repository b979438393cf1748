// `atomr bench route`: messages between rank 0 and rank 1 (run under mpirun with 2 ranks; more
// ranks idle). For each payload size, in the same run:
// - round trip: raw = MPI_Send + MPI_Recv ping-pong on a communicator of its own; atomr = an ask
//   to an actor on rank 1 that answers with the same bytes (p50 and p99 of single round trips),
//   once to a direct actor (spawn_options::direct) and once to the same actor on the pool;
// - message rate: raw = windows of MPI_Isend (rank 1 posts the matching MPI_Irecv windows), then
//   an acknowledgement; atomr = tells to an actor on rank 1 that counts them, then an ask that is
//   answered once all have arrived. Rates are messages per second, end to end.
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cereal/types/vector.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <variant>

#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "atomr/cluster/router.hpp"
#include "atomr/common/version.hpp"
#include "bench/bench_coll.hpp"
#include "bench/bench_meta.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "text_table.hpp"

namespace atomr::apps::route_bench {

struct echo {
  std::vector<std::uint8_t> bytes;
  local::reply_to<std::vector<std::uint8_t>> reply;
  template <class A>
  void serialize(A& ar) {
    ar(bytes, reply);
  }
};
struct note {
  std::vector<std::uint8_t> bytes;
  template <class A>
  void serialize(A& ar) {
    ar(bytes);
  }
};
struct drained {
  std::uint64_t count = 0;  // answered once this many notes have arrived in all
  local::reply_to<std::uint64_t> reply;
  template <class A>
  void serialize(A& ar) {
    ar(count, reply);
  }
};

// The steady clock (ranks of one node share it) at the remote handler, and when rank 1's router
// took the ask's packet from MPI: with rank 0's own router's time for the reply's packet they
// split a round trip into four hops.
struct stamps {
  std::int64_t packet_ns = 0;   // rank 1's progress thread took the ask from MPI
  std::int64_t handler_ns = 0;  // the actor's handler ran
  template <class A>
  void serialize(A& ar) {
    ar(packet_ns, handler_ns);
  }
};
struct stamp {
  local::reply_to<stamps> reply;
  template <class A>
  void serialize(A& ar) {
    ar(reply);
  }
};

}  // namespace atomr::apps::route_bench
ATOMR_WIRE_MESSAGE(atomr::apps::route_bench::stamp, 0x7f0004);
ATOMR_WIRE_MESSAGE(atomr::apps::route_bench::stamps, 0x7f0005);
ATOMR_WIRE_MESSAGE(atomr::apps::route_bench::echo, 0x7f0001);
ATOMR_WIRE_MESSAGE(atomr::apps::route_bench::note, 0x7f0002);
ATOMR_WIRE_MESSAGE(atomr::apps::route_bench::drained, 0x7f0003);

namespace po = boost::program_options;

namespace atomr::apps {
namespace {

using namespace route_bench;
using clock = std::chrono::steady_clock;
using bench_msg = std::variant<echo, note, drained, stamp>;

class peer_actor : public local::actor<bench_msg> {
 public:
  explicit peer_actor(const cluster::router* router) : router_(router) {}
  void receive(bench_msg& m) override {
    if (auto* e = std::get_if<echo>(&m)) {
      e->reply.send(std::move(e->bytes));
    } else if (std::holds_alternative<note>(m)) {
      ++notes_;
      if (waiting_ && notes_ >= waiting_->count) {
        waiting_->reply.send(notes_);
        waiting_.reset();
      }
    } else if (auto* st = std::get_if<stamp>(&m)) {
      const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
      st->reply.send(stamps{router_->stats().last_packet_ns, now});
    } else if (auto* d = std::get_if<drained>(&m)) {
      if (notes_ >= d->count) {
        d->reply.send(notes_);
      } else {
        waiting_ = std::move(*d);
      }
    }
  }

 private:
  const cluster::router* router_;
  std::uint64_t notes_ = 0;
  std::optional<drained> waiting_;
};

// One actor's side of a row: rank 1 runs the same actor twice, direct (its handler runs on the
// router's thread when idle) and on the pool (or a thread of its own with --dedicated).
struct atomr_side {
  double p50 = 0, p99 = 0;  // round trip, us
  double rate = 0;          // messages per second
  double handed = 0;        // messages per second through the sending loop alone
};
struct route_row {
  std::size_t bytes = 0;
  double raw_p50 = 0, raw_p99 = 0;  // round trip, us
  double raw_rate = 0;              // messages per second
  atomr_side direct, queued;
  std::uint64_t messages = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}
double us_since(clock::time_point t0) { return std::chrono::duration<double, std::micro>(clock::now() - t0).count(); }

result<void> raw_ping_pong(MPI_Comm comm, int rank, std::size_t bytes, int iters, std::vector<double>& out) {
  std::vector<std::uint8_t> buf(std::max<std::size_t>(bytes, 1));
  const int n = static_cast<int>(bytes);
  for (int i = 0; i < iters + iters / 10 + 10; ++i) {
    const auto t0 = clock::now();
    if (rank == 0) {
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(buf.data(), n, MPI_BYTE, 1, 1, comm)));
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_BYTE, 1, 1, comm, MPI_STATUS_IGNORE)));
      if (i >= iters / 10 + 10) out.push_back(us_since(t0));
    } else if (rank == 1) {
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_BYTE, 0, 1, comm, MPI_STATUS_IGNORE)));
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(buf.data(), n, MPI_BYTE, 0, 1, comm)));
    }
  }
  return ok();
}

result<double> raw_rate(MPI_Comm comm, int rank, std::size_t bytes, std::uint64_t messages) {
  constexpr int k_window = 64;
  std::vector<std::vector<std::uint8_t>> bufs(k_window, std::vector<std::uint8_t>(std::max<std::size_t>(bytes, 1)));
  std::vector<MPI_Request> reqs(k_window);
  const int n = static_cast<int>(bytes);
  const auto t0 = clock::now();
  for (std::uint64_t done = 0; done < messages;) {
    const int w = static_cast<int>(std::min<std::uint64_t>(k_window, messages - done));
    for (int i = 0; i < w; ++i) {
      if (rank == 0) {
        ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Isend(bufs[i].data(), n, MPI_BYTE, 1, 2, comm, &reqs[i])));
      } else if (rank == 1) {
        ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Irecv(bufs[i].data(), n, MPI_BYTE, 0, 2, comm, &reqs[i])));
      }
    }
    if (rank <= 1) ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Waitall(w, reqs.data(), MPI_STATUSES_IGNORE)));
    done += static_cast<std::uint64_t>(w);
  }
  char ack = 0;
  if (rank == 1) ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Send(&ack, 1, MPI_CHAR, 0, 3, comm)));
  if (rank == 0) ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, comm, MPI_STATUS_IGNORE)));
  return static_cast<double>(messages) / (us_since(t0) * 1e-6);
}

result<void> atomr_round_trips(const cluster::cluster_ref<bench_msg>& peer, std::size_t bytes, int iters,
                               std::vector<double>& out) {
  const std::vector<std::uint8_t> payload(bytes, 7);
  for (int i = 0; i < iters + iters / 10 + 10; ++i) {
    const auto t0 = clock::now();
    auto r = peer.ask<std::vector<std::uint8_t>>(
                     [&](local::reply_to<std::vector<std::uint8_t>> reply) {
                       return echo{payload, std::move(reply)};
                     },
                     std::chrono::seconds(30))
                 .get();
    if (!r) return r.error_value();
    if (r->size() != bytes) return error(errc::internal, "echo returned " + std::to_string(r->size()) + " bytes");
    if (i >= iters / 10 + 10) out.push_back(us_since(t0));
  }
  return ok();
}

// The smallest ask split into its hops (medians, us): the way out to the remote handler and
// the way back, and each of those at the packet's arrival in the receiving router.
struct ask_hops {
  double out = 0, back = 0;
  double to_router = 0;   // caller's send, MPI, rank 1's progress thread taking the packet
  double to_handler = 0;  // decoding, the actor's mailbox, its worker running the handler
  double to_router0 = 0;  // the reply's send, MPI, rank 0's progress thread taking it
  double to_caller = 0;   // resolving the future, the caller seeing it
};
result<ask_hops> atomr_hops(const cluster::router& router, const cluster::cluster_ref<bench_msg>& peer, int iters) {
  std::vector<double> out, back, hop[4];
  auto us = [](std::int64_t a, std::int64_t b) { return static_cast<double>(b - a) / 1000.0; };
  for (int i = 0; i < iters + iters / 10 + 10; ++i) {
    const std::int64_t t0 = clock::now().time_since_epoch().count();
    auto r = peer.ask<stamps>([](local::reply_to<stamps> reply) { return stamp{std::move(reply)}; },
                              std::chrono::seconds(30))
                 .get();
    const std::int64_t t1 = clock::now().time_since_epoch().count();
    if (!r) return r.error_value();
    if (i < iters / 10 + 10) continue;
    const std::int64_t back_packet = router.stats().last_packet_ns;
    out.push_back(us(t0, r->handler_ns));
    back.push_back(us(r->handler_ns, t1));
    hop[0].push_back(us(t0, r->packet_ns));
    hop[1].push_back(us(r->packet_ns, r->handler_ns));
    hop[2].push_back(us(r->handler_ns, back_packet));
    hop[3].push_back(us(back_packet, t1));
  }
  return ask_hops{percentile(out, 0.5),    percentile(back, 0.5),   percentile(hop[0], 0.5),
                  percentile(hop[1], 0.5), percentile(hop[2], 0.5), percentile(hop[3], 0.5)};
}

// End to end; `handed` gets the rate of the sending loop alone (the tells accepted by the router),
// which tells a sender-bound stream from a receiver-bound one.
result<double> atomr_rate(const cluster::cluster_ref<bench_msg>& peer, std::size_t bytes, std::uint64_t messages,
                          std::uint64_t& sent_so_far, double& handed) {
  const std::vector<std::uint8_t> payload(bytes, 3);
  const auto t0 = clock::now();
  for (std::uint64_t i = 0; i < messages; ++i) ATOMR_TRY(peer.tell(note{payload}));
  handed = static_cast<double>(messages) / (us_since(t0) * 1e-6);
  sent_so_far += messages;
  auto all = peer.ask<std::uint64_t>(
                     [&](local::reply_to<std::uint64_t> reply) {
                       return drained{sent_so_far, std::move(reply)};
                     },
                     std::chrono::seconds(120))
                 .get();
  if (!all) return all.error_value();
  return static_cast<double>(messages) / (us_since(t0) * 1e-6);
}

}  // namespace

int run_bench_route(const std::string& program, const std::vector<std::string>& args) {
  std::string min_b = "8", max_b = "64K", json_path;
  int factor = 8;
  int iters = 10000;
  long long messages = 1'000'000;
  po::options_description opts("atomr bench route options");
  opts.add_options()("help,h", "show this help")("minbytes,b", po::value(&min_b), "smallest payload (default 8)")(
      "maxbytes,e", po::value(&max_b), "largest payload (default 64K)")(
      "stepfactor,f", po::value(&factor), "size multiplier (default 8)")("iters,n", po::value(&iters),
                                                                         "round trips timed per size (default 10000)")(
      "messages,m", po::value(&messages), "messages per rate measurement (default 1000000; fewer for large sizes)")(
      "output_file,J", po::value(&json_path), "write the results as JSON to this file")(
      "dedicated", "run rank 1's actor on a thread of its own (default: the shared worker pool)");
  po::variables_map vm;
  const std::string usage = "usage: mpirun -n 2 atomr bench route [options]";
  const std::string me = program + " route";
  if (auto done = parse_command_line(me, args, opts, usage, vm)) return *done;
  auto bad = [&](const std::string& option, const std::string& what) {
    return usage_error(me, option + ": " + what, usage);
  };
  auto lo = parse_size(min_b);
  if (!lo) return bad("-b/--minbytes", lo.error_value().message());
  auto hi = parse_size(max_b);
  if (!hi) return bad("-e/--maxbytes", hi.error_value().message());
  if (*hi < *lo) return bad("-b/--minbytes", min_b + " is larger than -e/--maxbytes " + max_b);
  if (*hi > (std::size_t{16} << 20)) {
    return bad("-e/--maxbytes", "at most 16M (the router's payload limit is 64M), got " + max_b);
  }
  if (factor < 2) return bad("-f/--stepfactor", must_be_at_least(2, factor));
  if (iters < 10) return bad("-n/--iters", must_be_at_least(10, iters));
  if (messages < 100) return bad("-m/--messages", must_be_at_least(100, messages));
  if (vm.count("output_file")) {
    if (auto f = check_output_file(json_path); !f) return bad("-J/--output_file", f.error_value().message());
  }

  auto session = cluster::mpi_session::start(nullptr, nullptr);
  if (!session) return report_error(session.error_value().describe(), 1);
  const int rank = (*session)->identity().world_rank;
  const int size = (*session)->identity().world_size;
  if (size < 2)
    return report_error("atomr bench route needs 2 ranks (mpirun -n 2); it runs with " + std::to_string(size), 2);
  MPI_Comm raw_comm;
  if (auto d = ATOMR_MPI_CHECK(MPI_Comm_dup((*session)->world(), &raw_comm)); !d) {
    return report_error(d.error_value().describe(), 1);
  }
  local::actor_system system;
  auto r = cluster::router::start((*session)->world(), system);
  if (!r) return report_error(r.error_value().describe(), 1);
  const char* queued_kind = vm.count("dedicated") ? "dedicated" : "pool";
  if (rank == 1) {
    local::spawn_options where{.name = "peer"};
    if (vm.count("dedicated")) where.dispatch = local::dispatch_kind::dedicated;
    auto peer = system.spawn<peer_actor>(where, r->get());
    if (!peer) return report_error(peer.error_value().describe(), 1);
    if (auto p = (*r)->publish("peer", *peer); !p) return report_error(p.error_value().describe(), 1);
    auto direct = system.spawn<peer_actor>(local::spawn_options{.name = "peer-direct", .direct = true}, r->get());
    if (!direct) return report_error(direct.error_value().describe(), 1);
    if (auto p = (*r)->publish("peer-direct", *direct); !p) return report_error(p.error_value().describe(), 1);
  }
  MPI_Barrier((*session)->world());
  // Memory once every rank's router is up (the idle ranks' stays there).
  const double rss_up = max_rss_mib((*session)->world());
  const auto peer = (*r)->lookup<bench_msg>(1, "peer");
  const auto peer_direct = (*r)->lookup<bench_msg>(1, "peer-direct");

  // Where an ask's time goes: to the remote handler and back (rank 0 measures).
  ask_hops hops, hops_direct;
  if (rank == 0) {
    auto h = atomr_hops(**r, peer_direct, iters);
    if (!h) return report_error(h.error_value().describe(), 1);
    hops_direct = *h;
    h = atomr_hops(**r, peer, iters);
    if (!h) return report_error(h.error_value().describe(), 1);
    hops = *h;
  }
  quiet_barrier((*session)->world());

  std::vector<route_row> rows;
  std::uint64_t sent = 0, sent_direct = 0;
  for (std::size_t bytes = *lo; bytes <= *hi; bytes *= static_cast<std::size_t>(factor)) {
    route_row row;
    row.bytes = bytes;
    row.messages = std::min<std::uint64_t>(
        static_cast<std::uint64_t>(messages),
        std::max<std::uint64_t>(1000, (std::uint64_t{2} << 30) / std::max<std::size_t>(bytes, 1)));
    const int n = bytes >= (1 << 20) ? std::max(10, iters / 20) : iters;
    std::vector<double> raw_t, direct_t, queued_t;
    auto step = raw_ping_pong(raw_comm, rank, bytes, n, raw_t);
    if (step && rank == 0) step = atomr_round_trips(peer_direct, bytes, n, direct_t);
    if (step && rank == 0) step = atomr_round_trips(peer, bytes, n, queued_t);
    quiet_barrier((*session)->world());
    result<double> rr = step ? raw_rate(raw_comm, rank, bytes, row.messages) : result<double>(step.error_value());
    result<double> ar_direct = 0.0, ar = 0.0;
    double handed_direct = 0, handed = 0;
    if (rr && rank == 0) ar_direct = atomr_rate(peer_direct, bytes, row.messages, sent_direct, handed_direct);
    if (rr && ar_direct && rank == 0) ar = atomr_rate(peer, bytes, row.messages, sent, handed);
    quiet_barrier((*session)->world());
    if (!step || !rr || !ar_direct || !ar) {
      const error e = !step        ? step.error_value()
                      : !rr        ? rr.error_value()
                      : !ar_direct ? ar_direct.error_value()
                                   : ar.error_value();
      return report_error(e.describe(), 1);
    }
    row.raw_p50 = percentile(raw_t, 0.5);
    row.raw_p99 = percentile(raw_t, 0.99);
    row.raw_rate = *rr;
    row.direct = {percentile(direct_t, 0.5), percentile(direct_t, 0.99), *ar_direct, handed_direct};
    row.queued = {percentile(queued_t, 0.5), percentile(queued_t, 0.99), *ar, handed};
    rows.push_back(row);
    if (bytes == 0) break;
  }
  const double rss_end = max_rss_mib((*session)->world());
  if (auto s = (*r)->stop(); !s) return report_error(s.error_value().describe(), 1);
  MPI_Comm_free(&raw_comm);
  if (rank != 0) return 0;

  const std::string machine = (*session)->identity().hostname;
  std::cout << "atomr bench route: rank 0 -> rank 1 (" << size << " ranks, " << machine
            << "). Round trip: raw MPI_Send/MPI_Recv ping-pong vs an atomr ask to a remote actor (same payload "
               "back).\nRate: raw windows of 64 MPI_Isend vs atomr tells to a remote actor, end to end.\n"
               "Two actors on rank 1: 'direct' (spawn_options::direct: its handler runs on the router's thread "
               "when idle) and '"
            << queued_kind << "' (its messages go through its mailbox to a " << queued_kind << " thread).\n\n";
  text_table t({"bytes", "raw rtt p50 us", "direct p50 us", "+us", queued_kind + std::string(" p50 us"), "+us",
                "raw p99", "direct p99", queued_kind + std::string(" p99"), "raw Mmsg/s", "direct Mmsg/s", "direct/raw",
                queued_kind + std::string(" Mmsg/s"), queued_kind + std::string("/raw")});
  nlohmann::json out = nlohmann::json::array();
  for (const auto& row : rows) {
    t.add_row({std::to_string(row.bytes), fixed(row.raw_p50, 2), fixed(row.direct.p50, 2),
               fixed(row.direct.p50 - row.raw_p50, 2), fixed(row.queued.p50, 2), fixed(row.queued.p50 - row.raw_p50, 2),
               fixed(row.raw_p99, 2), fixed(row.direct.p99, 2), fixed(row.queued.p99, 2), fixed(row.raw_rate / 1e6, 3),
               fixed(row.direct.rate / 1e6, 3), fixed(row.direct.rate / row.raw_rate, 3),
               fixed(row.queued.rate / 1e6, 3), fixed(row.queued.rate / row.raw_rate, 3)});
    // atomr_us / atomr_msgs_per_s are the direct actor's (what atomr-report plots); queued_* the other's.
    out.push_back({{"bytes", row.bytes},
                   {"raw_us", row.raw_p50},
                   {"atomr_us", row.direct.p50},
                   {"raw_p99_us", row.raw_p99},
                   {"atomr_p99_us", row.direct.p99},
                   {"queued_us", row.queued.p50},
                   {"queued_p99_us", row.queued.p99},
                   {"messages", row.messages},
                   {"raw_msgs_per_s", row.raw_rate},
                   {"atomr_msgs_per_s", row.direct.rate},
                   {"rate_ratio", row.direct.rate / row.raw_rate},
                   {"atomr_handed_msgs_per_s", row.direct.handed},
                   {"queued_msgs_per_s", row.queued.rate},
                   {"queued_handed_msgs_per_s", row.queued.handed},
                   {"queued_rate_ratio", row.queued.rate / row.raw_rate}});
  }
  t.print(std::cout);
  auto print_hops = [&](const char* who, const ask_hops& h) {
    std::cout << "ask with an empty payload to the " << who << " actor, split at the remote handler (p50): out "
              << fixed(h.out, 2) << " us, back " << fixed(h.back, 2) << " us; hops: caller to rank 1's router "
              << fixed(h.to_router, 2) << ", to the handler " << fixed(h.to_handler, 2) << ", reply to rank 0's router "
              << fixed(h.to_router0, 2) << ", to the caller " << fixed(h.to_caller, 2) << "\n";
  };
  std::cout << "\nsending loops alone (tells accepted by the router, M msg/s):";
  for (const auto& row : rows) {
    std::cout << " " << row.bytes << " B: direct " << fixed(row.direct.handed / 1e6, 3) << ", " << queued_kind << " "
              << fixed(row.queued.handed / 1e6, 3) << ";";
  }
  std::cout << "\n";
  print_hops("direct", hops_direct);
  print_hops(queued_kind, hops);
  auto hops_json = [](const ask_hops& h) {
    return nlohmann::json{{"to_router", h.to_router},
                          {"to_handler", h.to_handler},
                          {"to_router0", h.to_router0},
                          {"to_caller", h.to_caller},
                          {"out", h.out},
                          {"back", h.back}};
  };
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << nlohmann::json{{"benchmark", "route"},
                        {"ranks", size},
                        {"machine", machine},
                        {"commit", k_git_revision},
                        {"date", utc_now()},
                        {"actor", "direct"},
                        {"queued_actor", queued_kind},
                        {"rows", out},
                        {"ask_hops_us", hops_json(hops_direct)},
                        {"queued_ask_hops_us", hops_json(hops)},
                        {"max_rss_mib", {{"router_up", rss_up}, {"end", rss_end}}}}
             .dump(2)
      << '\n';
    if (!f) return report_error("cannot write " + json_path, 1);
  }
  return 0;
}

}  // namespace atomr::apps
