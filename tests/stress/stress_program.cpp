// The stress program (launch/stress runs it under mpirun): the steps of one seed's program on
// the host backend, every result checked against the model (model.hpp), with an optional fault.
//
//   stress_program --seed S [--steps N] [--keep i,j,...] [--fault stop|kill|exit|withhold:RANK:STEP]
//                  [--list]
//
// --keep runs only those steps (a shrunk program); each runs as it did in the whole program.
// --fault makes RANK, at STEP (or, for withhold, at the first collective step from STEP on),
// stop itself (SIGSTOP), kill itself (SIGKILL), exit(1), or skip that collective while the others
// make it. Once a fault is injected, errors of atomr calls are expected; wrong values are not.
// Under ATOMR_ON_FAILURE=continue the survivors wait for liveness to name the culprit, shrink
// their world, check an all_reduce on it and leave.
//
// Prints one line per mismatch ("stress: seed S rank R step I (kind): ..."), rank 0 a last line
// ("stress: seed S, N steps on R ranks: ok" or "... K failure(s)"); exits 1 on any failure.
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi_session.hpp"
#include "context.hpp"

namespace atomr::stress {

void context::fail(const std::string& what) {
  ++failures;
  std::fprintf(stderr, "stress: seed %llu rank %d step %zu (%s): %s\n", static_cast<unsigned long long>(seed), rank,
               current ? current->index : 0, current ? std::string(to_string(current->kind)).c_str() : "start",
               what.c_str());
}

void context::failed_call(std::string_view call, const error& e) {
  if (faulted) return;
  fail(std::string(call) + ": " + e.describe());
}

void context::pause() {
  if (jitter() % 4 != 0) return;
  std::this_thread::sleep_for(std::chrono::microseconds(jitter() % 500));
}

void context::barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  STRESS_MPI(*this, MPI_Ibarrier(comm, &req));
  int done = 0;
  while (true) {
    STRESS_MPI(*this, MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void require(const context& ctx, const result<void>& r) {
  if (r) return;
  std::fprintf(stderr, "stress: seed %llu rank %d: %s\n", static_cast<unsigned long long>(ctx.seed), ctx.rank,
               r.error_value().describe().c_str());
  MPI_Abort(MPI_COMM_WORLD, 3);
}

namespace {

struct fault {
  std::string kind;  // stop, kill, exit, withhold
  int rank = -1;
  std::size_t step = 0;
};

struct arguments {
  std::uint64_t seed = 1;
  std::size_t steps = 40;
  std::optional<std::vector<std::size_t>> keep;
  std::optional<fault> injected;
  bool list = false;
};

bool parse_number(std::string_view text, auto& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size();
}

std::optional<arguments> parse(int argc, char** argv) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    const std::string_view value = has_value ? argv[i + 1] : "";
    if (arg == "--list") {
      a.list = true;
      continue;
    }
    if (!has_value) return std::nullopt;
    ++i;
    if (arg == "--seed") {
      if (!parse_number(value, a.seed)) return std::nullopt;
    } else if (arg == "--steps") {
      if (!parse_number(value, a.steps)) return std::nullopt;
    } else if (arg == "--keep") {
      std::vector<std::size_t> keep;
      std::string_view rest = value;
      while (!rest.empty()) {
        const auto comma = rest.find(',');
        std::size_t k = 0;
        if (!parse_number(rest.substr(0, comma), k)) return std::nullopt;
        keep.push_back(k);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      }
      a.keep = std::move(keep);
    } else if (arg == "--fault") {
      const auto c1 = value.find(':');
      const auto c2 = value.find(':', c1 == std::string_view::npos ? 0 : c1 + 1);
      if (c1 == std::string_view::npos || c2 == std::string_view::npos) return std::nullopt;
      fault f{std::string(value.substr(0, c1)), 0, 0};
      if (!parse_number(value.substr(c1 + 1, c2 - c1 - 1), f.rank) || !parse_number(value.substr(c2 + 1), f.step)) {
        return std::nullopt;
      }
      if (f.kind != "stop" && f.kind != "kill" && f.kind != "exit" && f.kind != "withhold") return std::nullopt;
      a.injected = f;
    } else {
      return std::nullopt;
    }
  }
  return a;
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Under ATOMR_ON_FAILURE=continue, after the fault: once liveness names the culprit, a world of
// the living ranks, and an all_reduce on it whose sum the model knows.
int go_on(context& ctx, int culprit) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (cluster::failed_world_ranks().empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto failed = cluster::failed_world_ranks();
  if (failed.size() != 1 || failed[0] != culprit) {
    ctx.faulted = false;
    ctx.fail("liveness named " + std::to_string(failed.size()) + " rank(s), first " +
             (failed.empty() ? std::string("none") : std::to_string(failed[0])) + "; the culprit is rank " +
             std::to_string(culprit));
    return 1;
  }
  auto smaller = ctx.world->shrink();
  if (!smaller) {
    ctx.faulted = false;
    ctx.failed_call("shrink", smaller.error_value());
    return 1;
  }
  auto b = ctx.dev->allocate<std::int64_t>(1000).get().value();
  const std::vector<std::int64_t> mine(1000, ctx.rank + 1);
  (void)ctx.dev->upload(b, std::span<const std::int64_t>(mine)).get();
  ctx.faulted = false;
  if (auto r = (*smaller)->all_reduce(b).get(); !r) {
    ctx.failed_call("all_reduce on the shrunk world", r.error_value());
    return 1;
  }
  std::vector<std::int64_t> sum(1000);
  (void)ctx.dev->download(b, std::span<std::int64_t>(sum)).get();
  const std::int64_t want = static_cast<std::int64_t>(ctx.size) * (ctx.size + 1) / 2 - (culprit + 1);
  for (const auto s : sum) {
    if (s != want) {
      ctx.fail("all_reduce on the shrunk world: " + std::to_string(s) + ", the model says " + std::to_string(want));
      return 1;
    }
  }
  std::printf("stress: rank %d went on with %d ranks: all_reduce right\n", ctx.rank, (*smaller)->size());
  std::fflush(stdout);
  return 0;
}

int run(int argc, char** argv) {
  const auto args = parse(argc, argv);
  if (!args) {
    std::fprintf(stderr,
                 "usage: stress_program --seed S [--steps N] [--keep i,j,...] "
                 "[--fault stop|kill|exit|withhold:RANK:STEP] [--list]\n");
    return 2;
  }
  const auto program = make_program(args->seed, args->steps);
  if (args->list) {
    for (const auto& s : program) std::printf("%zu %s\n", s.index, std::string(to_string(s.kind)).c_str());
    return 0;
  }
  auto session = cluster::mpi_session::start(&argc, &argv);
  if (!session) {
    std::fprintf(stderr, "stress: session: %s\n", session.error_value().describe().c_str());
    return 2;
  }
  context ctx;
  ctx.seed = args->seed;
  ctx.rank = (*session)->identity().world_rank;
  ctx.size = (*session)->identity().world_size;
  ctx.jitter.seed(mix(args->seed ^ (0x1234567ull * static_cast<std::uint64_t>(ctx.rank + 1))));
  STRESS_MPI(ctx, MPI_Comm_dup(MPI_COMM_WORLD, &ctx.comm));
  {
    // Every rank's pid, so the driver can check that nothing of the job is left behind.
    const int pid = static_cast<int>(::getpid());
    std::vector<int> pids(static_cast<std::size_t>(ctx.size));
    STRESS_MPI(ctx, MPI_Gather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, 0, ctx.comm));
    if (ctx.rank == 0) {
      std::string line = "stress: pids";
      for (const int p : pids) line += " " + std::to_string(p);
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
  }
  local::actor_system system;
  auto dev = local::device::start(system, 0, local::device_kind::host).value();
  ctx.system = &system;
  ctx.dev = &dev;
  auto options = cluster::world_options::from_environment();
  if (!options) {
    std::fprintf(stderr, "stress: rank %d: %s\n", ctx.rank, options.error_value().describe().c_str());
    return 2;
  }
  auto world = cluster::world::create((*session)->world(), {dev}, *options);
  if (!world) {
    std::fprintf(stderr, "stress: rank %d: world::create: %s\n", ctx.rank, world.error_value().describe().c_str());
    return 1;
  }
  ctx.world = std::move(*world);
  auto router = cluster::router::start((*session)->world(), system);
  if (!router) {
    std::fprintf(stderr, "stress: rank %d: router::start: %s\n", ctx.rank, router.error_value().describe().c_str());
    return 1;
  }
  ctx.router = router->get();
  auto registry = cluster::buffer_registry::start((*session)->world(), **router, {dev});
  if (!registry) {
    std::fprintf(stderr, "stress: rank %d: buffer_registry::start: %s\n", ctx.rank,
                 registry.error_value().describe().c_str());
    return 1;
  }
  ctx.registry = registry->get();
  start_message_actors(ctx);

  std::vector<step> steps;
  if (args->keep) {
    for (const std::size_t k : *args->keep) {
      if (k < program.size()) steps.push_back(program[k]);
    }
  } else {
    steps = program;
  }
  const bool go_on_after_fault = [] {
    const char* p = std::getenv("ATOMR_ON_FAILURE");
    return p != nullptr && std::string_view(p) == "continue";
  }();
  std::optional<fault> pending = args->injected;
  for (const auto& s : steps) {
    ctx.current = &s;
    if (pending && s.index >= pending->step && (pending->kind != "withhold" || is_collective(s.kind))) {
      const fault f = *pending;
      pending.reset();
      ctx.faulted = true;
      if (ctx.rank == f.rank) {
        std::printf("stress: rank %d pid %d: fault %s at step %zu, at %.3f\n", ctx.rank, static_cast<int>(::getpid()),
                    f.kind.c_str(), s.index, wall_seconds());
        std::fflush(stdout);
        if (f.kind == "stop") ::raise(SIGSTOP);
        if (f.kind == "kill") ::raise(SIGKILL);
        if (f.kind == "exit") std::exit(1);
        continue;  // withhold: this rank skips the collective the others make
      }
      if (go_on_after_fault && f.kind != "withhold") return go_on(ctx, f.rank);
    }
    ctx.pause();
    if (is_collective(s.kind)) {
      run_collective_step(ctx, s);
    } else {
      run_message_step(ctx, s);
    }
  }
  ctx.current = nullptr;
  ctx.barrier();
  if (auto r = ctx.router->stop(); !r) ctx.failed_call("router stop", r.error_value());
  unsigned long long mine = ctx.failures;
  unsigned long long all = 0;
  STRESS_MPI(ctx, MPI_Reduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, ctx.comm));
  if (ctx.rank == 0) {
    std::printf("stress: seed %llu, %zu steps on %d ranks: %s\n", static_cast<unsigned long long>(args->seed),
                steps.size(), ctx.size, all == 0 ? "ok" : (std::to_string(all) + " failure(s)").c_str());
    std::fflush(stdout);
  }
  STRESS_MPI(ctx, MPI_Comm_free(&ctx.comm));
  return mine == 0 ? 0 : 1;
}

}  // namespace
}  // namespace atomr::stress

int main(int argc, char** argv) { return atomr::stress::run(argc, argv); }
