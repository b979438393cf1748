#include "atomr/cluster/world.hpp"

#include <algorithm>
#include <atomic>
#include <random>

#include "atomr/cluster/coll/tunables.hpp"
#include "atomr/cluster/engine/backend_wrapper.hpp"
#include "atomr/cluster/engine/world_engine.hpp"
#include "atomr/cluster/host/host_backend.hpp"
#include "atomr/cluster/liveness.hpp"
#include "atomr/cluster/mpi/agree_settings.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/cluster/request_trace.hpp"
#include "atomr/common/context.hpp"
#include "atomr/common/lap_timer.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/pointer_set.hpp"
#if ATOMR_HAVE_NCCL
#include "atomr/cluster/nccl/nccl_backend.hpp"
#include "atomr/cluster/nccl/retire.hpp"
#endif

namespace atomr::cluster {

// Rank 0's pick is broadcast: an id every rank of a world shares, different for every world.
std::uint64_t detail::new_world_id() { return std::uint64_t{std::random_device{}()} << 32 | std::random_device{}(); }

namespace {
std::atomic<detail::backend_wrapper> wrapper{nullptr};
}  // namespace

void detail::set_backend_wrapper(backend_wrapper w) { wrapper.store(w, std::memory_order_release); }

namespace {
using detail::new_world_id;

using detail::clock;
using local::buffer_block;

// The options that shape how a world's ranks pack, batch, check and vote on their calls, as the
// variables that set them: a rank that differs would pack or vote apart from the others. (The
// timeouts may differ, and so may call_batch (the plan starts a batch wherever any rank's would)
// and group_cache (a kept call meets the same submit_group call).)
std::vector<detail::setting> agreed_settings(const world_options& o) {
  return {{"ATOMR_COLL_CHECK", o.check ? "1" : "0"},
          {"ATOMR_COLL_PACK_BYTES", std::to_string(o.pack_limit)},
          {"ATOMR_COLL_SEAL_BYTES", std::to_string(o.seal_bytes)},
          {"world_options::pack_capacity", std::to_string(o.pack_capacity)},
          {"ATOMR_COLL_PACK_GRAPHS", o.pack_graphs ? "1" : "0"},
          {"world_options::bulk", o.bulk ? "1" : "0"},
          {"ATOMR_COLL_VOTE_SHM", tunable_value(tunables::coll_vote_shm)}};
}

result<std::chrono::milliseconds> positive_ms(const tunable& t) {
  ATOMR_ASSIGN_OR_RETURN(const auto v, tunable_int(t));
  if (v <= 0) return error(errc::invalid_argument, std::string(t.env) + " must be a positive number of milliseconds");
  return std::chrono::milliseconds(v);
}

std::string where(const buffer_block& b) {
  const auto s = b.state.lock();
  return "buffer " + std::to_string(b.id) + " (device " + std::to_string(s ? s->device() : -1) + ")";
}

// A future that is done already, with `r` (a request refused before it was submitted, or a call
// with nothing in it).
future<void> finished(result<void> r) {
  promise<void> p;
  auto f = p.get_future();
  p.set_result(std::move(r));
  return f;
}

error too_small(const coll_spec& spec, const char* which, std::size_t have, std::size_t need) {
  return error(errc::invalid_argument, std::string(to_string(spec.kind)) + ": the " + which + " buffer holds " +
                                           std::to_string(have) + " elements, " + std::to_string(need) + " are needed");
}

}  // namespace

std::string_view to_string(world_backend b) { return b == world_backend::nccl ? "nccl" : "host"; }

void wait_for_retired_communicators() {
#if ATOMR_HAVE_NCCL
  detail::wait_retired_nccl_comms();
#endif
}

result<world_options> world_options::from_environment() {
  world_options o;
  ATOMR_ASSIGN_OR_RETURN(o.init_timeout, positive_ms(tunables::coll_init_timeout));
  ATOMR_ASSIGN_OR_RETURN(o.op_timeout, positive_ms(tunables::coll_timeout));
  ATOMR_ASSIGN_OR_RETURN(const auto check, tunable_int(tunables::coll_check));
  o.check = check != 0;
  ATOMR_ASSIGN_OR_RETURN(const auto pack, tunable_int(tunables::coll_pack_bytes));
  if (pack < 0) return error(errc::invalid_argument, "ATOMR_COLL_PACK_BYTES must not be negative");
  o.pack_limit = static_cast<std::size_t>(pack);
  ATOMR_ASSIGN_OR_RETURN(const auto seal, tunable_int(tunables::coll_seal_bytes));
  if (seal < 0) return error(errc::invalid_argument, "ATOMR_COLL_SEAL_BYTES must not be negative");
  o.seal_bytes = static_cast<std::size_t>(seal);
  ATOMR_ASSIGN_OR_RETURN(const auto call_batch, tunable_int(tunables::coll_call_batch));
  if (call_batch < 1) return error(errc::invalid_argument, "ATOMR_COLL_CALL_BATCH must be at least 1");
  o.call_batch = static_cast<std::size_t>(call_batch);
  ATOMR_ASSIGN_OR_RETURN(const auto pack_graphs, tunable_int(tunables::coll_pack_graphs));
  if (pack_graphs != 0 && pack_graphs != 1)
    return error(errc::invalid_argument, "ATOMR_COLL_PACK_GRAPHS must be 0 or 1");
  o.pack_graphs = pack_graphs == 1;
  ATOMR_ASSIGN_OR_RETURN(const auto group_cache, tunable_int(tunables::coll_group_cache));
  if (group_cache != 0 && group_cache != 1) {
    return error(errc::invalid_argument, "ATOMR_COLL_GROUP_CACHE must be 0 or 1");
  }
  o.group_cache = group_cache == 1;
  return o;
}

world::world(std::shared_ptr<world_engine> engine) : engine_(std::move(engine)) {}
world::~world() = default;

world_backend world::backend() const noexcept { return engine_->backend().kind(); }
int world::size() const noexcept { return engine_->backend().size(); }
int world::rank(std::size_t member) const { return engine_->backend().rank(member); }
std::size_t world::local_members() const noexcept { return engine_->members().size(); }
const world_options& world::options() const noexcept { return engine_->options(); }
std::optional<error> world::failure() const { return engine_->failure(); }

namespace {

// A rank's own side of a world: its members, and the backend its options and their kind pick.
result<world_backend> check_members(const std::vector<local::device>& members, const world_options& options) {
  if (members.empty()) return error(errc::invalid_argument, "a world needs at least one local device");
  const auto kind = members.front().kind();
  for (const auto& m : members) {
    if (m.kind() != kind) return error(errc::invalid_argument, "the local devices of a world must be of one kind");
  }
  const auto backend =
      options.backend.value_or(kind == local::device_kind::cuda ? world_backend::nccl : world_backend::host);
  if (backend == world_backend::nccl && kind != local::device_kind::cuda) {
    return error(errc::invalid_argument, "the nccl backend needs CUDA devices");
  }
  if (backend == world_backend::host && kind != local::device_kind::host) {
    return error(errc::invalid_argument, "the host backend works on host devices; start host-kind devices");
  }
  if (backend == world_backend::host && members.size() != 1) {
    return error(errc::invalid_argument, "the host backend takes one device per rank");
  }
#if !ATOMR_HAVE_NCCL
  if (backend == world_backend::nccl) {
    return error(errc::unavailable, "this build of atomr has no NCCL; use the host backend");
  }
#endif
  return backend;
}

// Every rank's check, its settings and its backend agree, or every rank gets the same error (one
// rank's mistake is an error everywhere rather than a hang in the next step). Returns the world's
// id: rank 0's pick, an id every rank shares, different for every world (see world_engine).
result<std::uint64_t> agree_on_world(MPI_Comm control, const result<world_backend>& checked,
                                     const world_options& options, clock::time_point deadline) {
  ATOMR_TRY(detail::agree(control, checked ? ok() : result<void>(checked.error_value()), deadline, "creating a world"));
  ATOMR_TRY(detail::agree_settings(control, agreed_settings(options), deadline, "creating a world"));
  // The same backend everywhere, and rank 0's id: one all_reduce (max) does both.
  const std::uint64_t mine = static_cast<std::uint64_t>(*checked);
  int me = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_rank(control, &me)));
  std::uint64_t agreed[3] = {mine, 1 - mine, me == 0 ? new_world_id() : 0};
  MPI_Request q = MPI_REQUEST_NULL;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, agreed, 3, MPI_UINT64_T, MPI_MAX, control, &q)));
  ATOMR_TRY(detail::wait_mpi(q, deadline, "comparing backends"));
  if (1 - agreed[1] != agreed[0]) {
    return error(errc::invalid_argument, "ranks chose different backends (nccl and host) for one world");
  }
  return agreed[2];
}

result<std::unique_ptr<detail::comm_backend>> make_backend(MPI_Comm control, world_backend kind,
                                                           const std::vector<local::device>& members,
                                                           clock::time_point deadline) {
  if (kind == world_backend::host) return detail::make_host_backend(control, deadline);
#if ATOMR_HAVE_NCCL
  std::vector<int> devices;
  for (const auto& m : members) devices.push_back(m.index());
  return detail::make_nccl_backend(control, devices, deadline);
#else
  (void)members;
  return error(errc::internal, "no backend");
#endif
}

}  // namespace

result<std::unique_ptr<world>> world::create(MPI_Comm comm, std::vector<local::device> members, world_options options) {
  // A step that timed out means a rank did not take part: the job cannot go on as it was, and this
  // rank's leave must not wait for that rank without bound (note_fatal_failure).
  auto made = [&]() -> result<std::unique_ptr<world>> {
    const auto deadline = clock::now() + options.init_timeout;
    // ATOMR_TRACE turns the request timeline on with the first world.
    if (auto traced = request_trace::enable_from_environment(); !traced) return traced.error_value();
    const auto checked = check_members(members, options);
    // Where the creation's time goes (debug log).
    lap_timer laps;
    MPI_Comm control = MPI_COMM_NULL;
    {
      MPI_Request q = MPI_REQUEST_NULL;
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_idup(comm, &control, &q)));
      ATOMR_TRY(detail::wait_mpi(q, deadline, "duplicating the communicator for a world"));
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN)));
    }
    auto fail = [&](error e) -> error {
      MPI_Comm_free(&control);
      return e;
    };
    const auto id = agree_on_world(control, checked, options, deadline);
    if (!id) return fail(id.error_value());
    const double agree_ms = laps.lap();
    auto backend = make_backend(control, *checked, members, deadline);
    if (!backend) return fail(backend.error_value());
    const double backend_ms = laps.lap();
    if (auto wrap = wrapper.load(std::memory_order_acquire); wrap != nullptr) backend = wrap(std::move(*backend));
    auto votes = world_engine::open_vote_channel(control, control, (*backend)->graph_limit() > 0, deadline);
    if (!votes) {
      (*backend)->abort();
      return fail(votes.error_value());
    }
    const auto size = (*backend)->size();
    const auto first = (*backend)->rank(0);
    auto engine = std::make_shared<world_engine>(control, std::move(backend).value(), std::move(members), options, *id,
                                                 std::move(votes).value());
    log::get("cluster")->debug(
        "world of {} ({} backend) up; this rank's first member is {} (ms: communicator and agreements {:.1f}, backend "
        "{:.1f}, engine {:.1f})",
        size, to_string(*checked), first, agree_ms, backend_ms, laps.lap());
    return std::unique_ptr<world>(new world(std::move(engine)));
  }();
  if (!made && made.error_value().code() == errc::timeout) note_fatal_failure(made.error_value().describe());
  return made;
}

result<std::unique_ptr<world>> world::split(int color, int key) {
  std::unique_ptr<detail::comm_backend> sub;
  MPI_Comm control = MPI_COMM_NULL;
  std::uint64_t id = 0;
  std::unique_ptr<detail::shm_reducer> votes;
  const auto done = engine_->when_idle([&]() -> result<void> {
    const auto deadline = clock::now() + engine_->options().init_timeout;
    ATOMR_ASSIGN_OR_RETURN(sub, engine_->backend().split(color, key, deadline));
    // Every rank has arrived (the backend's split agreed first), so this blocking split is bounded.
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_split(engine_->control(), color < 0 ? MPI_UNDEFINED : color, key, &control)));
    if (control != MPI_COMM_NULL) {
      id = new_world_id();
      ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Bcast(&id, 1, MPI_UINT64_T, 0, control)));
      ATOMR_ASSIGN_OR_RETURN(
          votes, world_engine::open_vote_channel(engine_->control(), control, sub && sub->graph_limit() > 0, deadline));
    }
    return ok();
  });
  if (!done) {
    if (sub) sub->abort();
    return done.error_value();
  }
  if (!sub) return std::unique_ptr<world>();
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN)));
  auto engine = std::make_shared<world_engine>(control, std::move(sub), engine_->members(), engine_->options(), id,
                                               std::move(votes));
  return std::unique_ptr<world>(new world(std::move(engine)));
}

future<void> world::barrier() const { return submit(coll_spec{coll_kind::barrier, local::dtype::u8, {}, {}, {}}); }

world::stats_snapshot world::stats() const { return engine_->stats(); }

future<void> world::submit(coll_spec&& spec) const {
  auto r = make_request(std::move(spec));
  if (!r) return finished(r.error_value());
  return engine_->submit(std::move(r).value());
}

std::vector<future<void>> world::submit_group(std::vector<coll_spec> specs, each_request_t) const {
  std::vector<std::optional<future<void>>> out(specs.size());
  submit_call(std::move(specs), {}, out);
  std::vector<future<void>> done;
  done.reserve(out.size());
  for (auto& f : out) done.push_back(std::move(*f));
  return done;
}

future<void> world::submit_group(std::vector<coll_spec> specs) const {
  if (specs.empty()) return finished({});
  // (A call that repeats a kept one is only compared here, then dropped on this thread.)
  if (auto f = submit_kept(specs)) return std::move(*f);
  auto counts = checked_group(specs);
  if (!counts) return finished(counts.error_value());
  if (auto f = keep_repeated(specs, *counts)) return std::move(*f);
  std::vector<std::optional<future<void>>> out(1);
  submit_call(std::move(specs), std::move(counts).value(), out);
  return std::move(*out.front());
}

std::optional<future<void>> world::submit_kept(const std::vector<coll_spec>& specs) const {
  auto* cache = kept_calls(specs.size());
  if (cache == nullptr) return std::nullopt;
  return hand_over_kept(*cache, cache->find(specs, clock::now()));
}

std::optional<future<void>> world::submit_kept_in_place(local::dtype type, reduce_op op,
                                                        std::span<const buffer_block* const> blocks) const {
  auto* cache = kept_calls(blocks.size());
  if (cache == nullptr) return std::nullopt;
  return hand_over_kept(*cache, cache->find_in_place(type, op, blocks, clock::now()), true);
}

detail::group_cache* world::kept_calls(std::size_t specs) const {
  auto* cache = engine_->group_cache();
  if (cache == nullptr || specs <= world_engine::k_submit_part) return nullptr;
  cache->expire(clock::now());  // (calls unsubmitted for long let go of their buffers first)
  return cache;
}

std::optional<future<void>> world::hand_over_kept(detail::group_cache& cache,
                                                  const std::shared_ptr<const group_call>& call,
                                                  bool by_buffers) const {
  if (!call) return std::nullopt;
  auto submitted = hand_over_prepared(*call);
  if (!submitted) {
    // (A buffer's device was rebuilt, say: the usual path's checks say so, naming the request.)
    cache.forget(call.get());
    return std::nullopt;
  }
  if (!*submitted) return std::nullopt;  // its last submission is under way: a call of its own
  cache.count_repeat(by_buffers);
  return std::move(**submitted);
}

std::optional<future<void>> world::keep_repeated(std::vector<coll_spec>& specs,
                                                 std::vector<std::size_t>& counts) const {
  auto* cache = engine_->group_cache();
  if (cache == nullptr || specs.size() <= world_engine::k_submit_part || !bulk_shape(specs, counts)) {
    return std::nullopt;
  }
  auto key = cache->repeated(specs);
  if (!key) return std::nullopt;
  auto call = std::make_shared<group_call>();
  call->engine_ = engine_;
  call->size_ = specs.size();
  make_bulks(*call, specs, counts);
  auto submitted = hand_over_prepared(*call);
  if (!submitted) return finished(submitted.error_value());
  if (!*submitted) {  // (never: nobody else has seen this call)
    return finished(error(errc::internal, "a submit_group call prepared a moment ago was busy"));
  }
  cache->keep(std::move(*key), std::move(call), clock::now());
  return std::move(**submitted);
}

result<group_call> world::prepare_group(std::vector<coll_spec> specs) const {
  group_call call;
  call.engine_ = engine_;
  call.size_ = specs.size();
  if (specs.empty()) return call;
  ATOMR_ASSIGN_OR_RETURN(auto counts, checked_group(specs));
  if (!bulk_shape(specs, counts)) {
    call.specs_ = std::move(specs);
    return call;
  }
  make_bulks(call, specs, counts);
  return call;
}

void world::make_bulks(group_call& call, std::vector<coll_spec>& specs, const std::vector<std::size_t>& counts) const {
  // (The same bulk calls, in the same runs, as submit_group would make of these specs.)
  pointer_set touched, written;
  const std::size_t run_most = bulk_run_most();
  for (std::size_t first = 0; first < specs.size(); first += run_most) {
    const std::size_t n = std::min(run_most, specs.size() - first);
    std::vector<std::shared_ptr<detail::bulk_call>> run;
    for (std::size_t at = 0; at < n; at += world_engine::k_bulk_most) {
      run.push_back(std::make_shared<detail::bulk_call>());
      run.back()->persistent = true;
    }
    mark_run(run, specs, counts, first, n, touched, written);
    for (std::size_t j = 0; j < run.size(); ++j) {
      const std::size_t at = j * world_engine::k_bulk_most;
      fill_entries(*run[j], specs, counts, first + at, std::min(world_engine::k_bulk_most, n - at), false);
      run[j]->own_cuts = run[j]->cuts;
      call.bulks_.push_back(std::move(run[j]));
    }
  }
}

future<void> world::submit_prepared(const group_call& call) const {
  if (call.engine_.lock() != engine_) {
    return finished(error(errc::invalid_argument, "submit_prepared: this call was prepared for another world"));
  }
  if (call.size_ == 0) return finished({});
  if (call.bulks_.empty()) return submit_group(std::vector<coll_spec>(call.specs_));
  auto submitted = hand_over_prepared(call);
  if (!submitted) return finished(submitted.error_value());
  if (*submitted) return std::move(**submitted);
  // Its last submission is still under way: a copy of its specs, as a new call.
  std::vector<coll_spec> specs;
  specs.reserve(call.size_);
  for (const auto& b : call.bulks_) {
    for (const auto& e : b->entries) specs.push_back(e.spec);
  }
  return submit_group(std::move(specs));
}

result<std::vector<std::size_t>> world::checked_group(std::vector<coll_spec>& specs) const {
  // Checked whole first: a call with a bad request submits nothing (with a future per request,
  // the others would go on; here nobody could tell which did).
  std::vector<std::size_t> counts(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    trim_unused(specs[i]);
    auto count = checked_count(specs[i]);
    if (!count) {
      return count.error_value().with_context("checking request " + std::to_string(i + 1) + " of " +
                                              std::to_string(specs.size()) +
                                              " of a submit_group call (nothing was submitted)");
    }
    counts[i] = *count;
  }
  return counts;
}

void world::submit_call(std::vector<coll_spec>&& specs, std::vector<std::size_t> checked,
                        std::vector<std::optional<future<void>>>& out) const {
  // A long call hands its requests over in parts of k_part while it makes the rest, as long as
  // all of them so far are small all_reduces the world packs: the progress thread agrees on,
  // packs and issues the first ones meanwhile. Made first and handed over in one go, 1000 x 2 KiB
  // all_reduces spend about a third of their time on two H100s (290-305 us of 910-980)
  // before the progress thread saw the first. (Packing plans are agreed across ranks, so the
  // parts need not be the same on every rank; collectives grouped by call, which are not, all go
  // in the last part. So do requests on a buffer an earlier one of the call uses: they cannot
  // pack with it, and a run of them is best agreed on in one plan for all.)
  constexpr std::size_t k_part = world_engine::k_submit_part;
  // A submit_group call (`checked` holds every request's count): one future, its last request's.
  const bool group = !checked.empty();
  // (A submit_group call of many small all_reduces: one request per bulk call. Only a group's:
  // ranks may split a per-request group's requests differently, but a group is made alike.)
  if (group && bulk_shape(specs, checked)) return submit_bulk(std::move(specs), checked, group, out);
  thread_pointer_sets<struct submit_call_sets> sets;
  pointer_set& used = sets[0];
  if (specs.size() > k_part) used.reset(specs.size());
  // Its first requests planned whole where they are small all_reduces that pack: the plan is
  // offered with the first part, and the later parts need no exchange (see plan_call).
  std::vector<std::size_t> counts = std::move(checked);
  auto plan = plan_call(specs, used, counts, group);
  const std::size_t planned = plan ? plan->length : 0;
  const std::uint64_t together = specs.size() > 1 ? engine_->together_id() : 0;
  std::vector<std::unique_ptr<detail::coll_request>> part;
  std::vector<std::size_t> at;  // where each request of the part goes in out
  bool in_parts = true;         // every request so far packs
  auto hand_over = [&](bool more_coming) {
    auto issued = engine_->submit_all(std::move(part), together, more_coming);
    for (std::size_t j = 0; j < issued.size(); ++j) out[at[j]] = std::move(issued[j]);
    part.clear();
    at.clear();
  };
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const bool last = i + 1 == specs.size();
    auto r = make_request(std::move(specs[i]), i < planned || group ? counts[i] : 0, !group || last);
    if (!r) {  // (never in a group: checked whole first)
      out[group ? 0 : i] = finished(r.error_value());
      continue;
    }
    if (i == 0 && plan) (*r)->plan = std::move(plan);
    if (in_parts && specs.size() > k_part && i >= planned) {  // (the plan's were checked by plan_call)
      in_parts = mark_buffers(used, (*r)->spec) && engine_->packs(**r);
    }
    part.push_back(std::move(r).value());
    at.push_back(group ? 0 : i);
    if (in_parts && part.size() == k_part && !last) hand_over(true);
  }
  if (!part.empty()) {
    part.back()->ends_call = together != 0;
    hand_over(false);
  }
}

void world::trim_unused(coll_spec& spec) {
  const auto kind = spec.kind;
  if (kind == coll_kind::recv || kind == coll_kind::barrier) spec.send.clear();
  if (kind == coll_kind::send || kind == coll_kind::barrier) spec.recv.clear();
}

result<std::unique_ptr<detail::coll_request>> world::make_request(coll_spec&& moved, std::size_t checked,
                                                                  bool with_future) const {
  auto r = std::make_unique<detail::coll_request>(std::move(moved));
  auto& spec = r->spec;
  trim_unused(spec);  // (which buffers this kind uses)
  if (with_future) r->done = promise<void>();
  if (checked != 0) {
    r->count = checked;
  } else {
    ATOMR_ASSIGN_OR_RETURN(r->count, checked_count(spec));
  }
  // Hazards: the request waits for earlier writes to everything it touches, and is one write
  // to its recv buffers.
  // (A handful of buffers: a linear search beats a set here, on every request.)
  auto written = [&](const buffer_block* b) {
    return std::any_of(r->writes.begin(), r->writes.end(), [&](const auto& t) { return t.block == b; });
  };
  r->writes.reserve(spec.recv.size());
  for (const auto& b : spec.recv) {
    if (!written(b.get())) r->writes.push_back({b.get(), b->request_write()});
  }
  for (const auto& b : spec.send) {
    if (!written(b.get())) r->reads.push_back({b.get(), b->writes_requested()});
  }
  return r;
}

result<std::size_t> world::checked_count(const coll_spec& spec) const {
  auto refuse = [](error e) { return e; };
  const auto n = static_cast<std::size_t>(size());
  const auto members = engine_->members().size();
  const auto& p = spec.params;
  const auto kind = spec.kind;
  const bool uses_send = kind != coll_kind::recv && kind != coll_kind::barrier;
  const bool uses_recv = kind != coll_kind::send && kind != coll_kind::barrier;
  if ((uses_send && spec.send.size() != members) || (uses_recv && spec.recv.size() != members)) {
    return refuse(error(errc::invalid_argument, std::string(to_string(kind)) + ": this world has " +
                                                    std::to_string(members) +
                                                    " local device(s); pass one buffer each"));
  }
  if ((kind == coll_kind::broadcast || kind == coll_kind::reduce || kind == coll_kind::send ||
       kind == coll_kind::recv) &&
      (p.root < 0 || static_cast<std::size_t>(p.root) >= n)) {
    return refuse(error(errc::invalid_argument, std::string(to_string(kind)) + ": rank " + std::to_string(p.root) +
                                                    " is not in this world of " + std::to_string(n)));
  }
  std::size_t counted = 0;
  for (std::size_t m = 0; m < members; ++m) {
    const auto& device_state = engine_->members()[m].state();
    for (const auto* list : {&spec.send, &spec.recv}) {
      if (list->empty()) continue;
      const auto& b = (*list)[m];
      if (!b) return refuse(error(errc::invalid_argument, std::string(to_string(kind)) + ": empty gpu_ref"));
      if (list == &spec.recv && !spec.send.empty() && spec.send[m] == b) continue;  // in place: checked as send
      if (!local::usable_on(*b, device_state)) {  // (the usual answer, without locking)
        if (auto v = local::validate_block(*b); !v) return refuse(v.error_value());
        if (b->state.owner_before(device_state) || device_state.owner_before(b->state)) {
          return refuse(error(errc::invalid_argument, std::string(to_string(kind)) + ": " + where(*b) +
                                                          " is not on local device " +
                                                          std::to_string(engine_->members()[m].index()) + " (member " +
                                                          std::to_string(m) + ")"));
        }
      }
      if (b->type != spec.type) {
        return refuse(error(errc::invalid_argument, std::string(to_string(kind)) + ": " + where(*b) + " holds " +
                                                        std::string(local::to_string(b->type)) + ", not " +
                                                        std::string(local::to_string(spec.type))));
      }
    }
    // Sizes: `count` is per rank, as NCCL counts it.
    const std::size_t elem = local::size_of(spec.type);
    const std::size_t send_n = spec.send.empty() ? 0 : spec.send[m]->bytes / elem;
    const std::size_t recv_n = spec.recv.empty() ? 0 : spec.recv[m]->bytes / elem;
    std::size_t count = p.count;
    const bool in_place = !spec.send.empty() && !spec.recv.empty() && spec.send[m] == spec.recv[m];
    const bool is_root =
        kind != coll_kind::send && kind != coll_kind::recv && static_cast<int>(engine_->backend().rank(m)) == p.root;
    switch (kind) {
      case coll_kind::all_reduce:
        if (count == 0) count = send_n;
        if (send_n < count) return refuse(too_small(spec, "send", send_n, count));
        if (recv_n < count) return refuse(too_small(spec, "recv", recv_n, count));
        break;
      case coll_kind::broadcast:
        if (count == 0) count = recv_n;
        if (recv_n < count) return refuse(too_small(spec, "recv", recv_n, count));
        if (is_root && send_n < count) return refuse(too_small(spec, "send", send_n, count));
        break;
      case coll_kind::reduce:
        if (count == 0) count = send_n;
        if (send_n < count) return refuse(too_small(spec, "send", send_n, count));
        if (is_root && recv_n < count) return refuse(too_small(spec, "recv", recv_n, count));
        break;
      case coll_kind::all_gather:
        if (count == 0) count = in_place ? recv_n / n : send_n;
        if (!in_place && send_n < count) return refuse(too_small(spec, "send", send_n, count));
        if (recv_n < count * n) return refuse(too_small(spec, "recv", recv_n, count * n));
        break;
      case coll_kind::reduce_scatter:
        if (count == 0) count = in_place ? send_n / n : recv_n;
        if (send_n < count * n) return refuse(too_small(spec, "send", send_n, count * n));
        if (!in_place && recv_n < count) return refuse(too_small(spec, "recv", recv_n, count));
        break;
      case coll_kind::all_to_all:
        if (in_place) {
          return refuse(error(errc::invalid_argument, "all_to_all cannot run in place; pass two buffers"));
        }
        if (count == 0) count = send_n / n;
        if (send_n < count * n) return refuse(too_small(spec, "send", send_n, count * n));
        if (recv_n < count * n) return refuse(too_small(spec, "recv", recv_n, count * n));
        break;
      case coll_kind::send:
        if (count == 0) count = send_n;
        if (send_n < count) return refuse(too_small(spec, "send", send_n, count));
        break;
      case coll_kind::recv:
        if (count == 0) count = recv_n;
        if (recv_n < count) return refuse(too_small(spec, "recv", recv_n, count));
        break;
      case coll_kind::barrier: count = 1; break;
    }
    if (count == 0) {
      return refuse(error(errc::invalid_argument, std::string(to_string(kind)) + " of 0 elements"));
    }
    if (m > 0 && count != counted) {
      return refuse(error(errc::invalid_argument,
                          std::string(to_string(kind)) + ": the local devices' buffers give different counts"));
    }
    counted = count;
  }
  return counted;
}

}  // namespace atomr::cluster
