#include <algorithm>
#include <atomic>
#include <deque>
#include <unordered_map>

#include "atomr/common/context.hpp"
#include "atomr/common/log.hpp"
#include "atomr/local/device/device.hpp"
#include "atomr/local/device/wait_memo.hpp"
#include "atomr/local/tunables.hpp"

namespace atomr::local {
namespace {

using namespace std::chrono_literals;
using detail::device_msg;

std::atomic<std::uint64_t> g_next_buffer_id{1};
std::atomic<std::uint64_t> g_next_module_id{1};
std::atomic<std::uint64_t> g_next_kernel_id{1};

// The outcome of work on the device, settled once: by the completion waiter as soon as the
// device has finished it (one thread hand-off fewer than going through the actor), or by the
// actor's poll or failure handling, whichever comes first.
class completion {
 public:
  completion(reply_to<void> reply, std::function<void()> after) : reply_(std::move(reply)), after_(std::move(after)) {}
  void succeed() {
    if (settled_.exchange(true)) return;
    if (after_) after_();  // before the reply: it finishes what the reply promises
    reply_.send();
  }
  void fail(const error& e) {
    if (!settled_.exchange(true)) reply_.fail(e);
  }
  // Answered already (the completion waiter saw the work finish): retiring it needs no query of
  // the device.
  bool settled() const noexcept { return settled_.load(std::memory_order_acquire); }
  // Before the reply's future leaves the thread that enqueued the operation (see
  // device_backend::mark).
  void set_look(std::shared_ptr<progress_hook> look) { reply_.set_progress_hook(std::move(look)); }

 private:
  reply_to<void> reply_;
  std::function<void()> after_;
  std::atomic<bool> settled_{false};
};

// Work enqueued on the device; the actor retires it (and lets go of its buffers) in order.
struct pending_op {
  std::shared_ptr<void> done;  // the event after the operation
  std::shared_ptr<completion> outcome;
  std::vector<std::shared_ptr<buffer_block>> uses;
};

// Whether an operation may take the inline lane: what enqueues work on the stream. Allocation,
// modules and statistics stay with the device thread.
template <typename Op>
constexpr bool k_inline_kind = std::is_same_v<Op, detail::copy_op> || std::is_same_v<Op, detail::fill_op> ||
                               std::is_same_v<Op, detail::run_op> || std::is_same_v<Op, detail::peer_copy_op> ||
                               std::is_same_v<Op, detail::launch_op> || std::is_same_v<Op, detail::placement_op>;

// Counted by device::send (the lane's `sent`): all but the actor's own poll and the buffers' free.
bool counted(const device_msg& m) {
  return !std::holds_alternative<detail::poll_op>(m) && !std::holds_alternative<detail::free_op>(m);
}

class device_actor final : public actor<device_msg>, public detail::lane_runner {
 public:
  device_actor(std::shared_ptr<device_state> state, std::shared_ptr<detail::device_lane> lane, device_options options)
      : state_(std::move(state)), lane_(std::move(lane)), options_(options), scope_(state_->device()) {}

  // A device that cannot start, or that fails past its rebuild budget, stops (restarting would
  // not help) and says why to its watchers; requests already queued fail with "device-N stopped".
  void on_start() override {
    const detail::device_lane::hold lane(*lane_);
    auto backend = make_backend(state_->kind(), state_->device(), options_.host_arena_most.value_or(0));
    if (backend) {
      backend_ = std::move(backend).value();
      backend_->on_quiet([self = context().self()] { (void)self.tell(detail::poll_op{}); });
      if (auto r = backend_->init(); !r) return give_up(r.error_value().with_context("starting the device"));
      lane_->attach(this);
      return;
    }
    give_up(backend.error_value());
  }

  void on_stop() override {
    const detail::device_lane::hold lane(*lane_);
    lane_->attach(nullptr);
    state_->set_accepting(false);
    if (!backend_) return;  // gave up: the context is gone already
    backend_->drain();
    poll();  // everything has finished: answer the pending replies with their real outcome
    for (const auto& [p, a] : live_) release(p, a);
    live_.clear();
    for (const auto& [id, m] : modules_) backend_->unload_module(m);
    modules_.clear();
    kernels_.clear();
    backend_->drain();
  }

  void receive(device_msg& m) override {
    if (std::holds_alternative<detail::poll_op>(m)) {
      // A retire request never waits for the lane. A sender that holds it is running operations
      // inline and retires what finished itself; taking the lane after it put that sender's next
      // operation on the mail path, and with it every later one (their order must hold) for the
      // rest of a burst: bench p2p's copies back to back ran 0-20 % inline and at 0.3-0.5 of raw
      // at 4-256 KiB on two H200s. Asked again in a millisecond,
      // so that a scheduled poll (poll_scheduled_) still comes.
      const detail::device_lane::hold lane(*lane_, std::try_to_lock);
      if (!lane.owns()) {
        context().tell_after(1ms, detail::poll_op{});
        return;
      }
      if (backend_) {
        run(m);
        poll();
      }
      return;
    }
    const detail::device_lane::hold lane(*lane_);
    // Counted at once: no sender looks again before the lane is let go, and the reply may be out
    // (and its sender sending again) before this returns.
    if (counted(m)) lane_->handled_one();
    if (backend_) {  // (none: stopping after a failed start; queued replies fail with "stopped")
      if (!deferred_.empty() && !std::holds_alternative<detail::poll_op>(m)) {
        deferred_.push_back(std::move(m));  // keeps the order of everything behind a waiting op
      } else {
        run(m);
      }
      poll();
    }
  }

  // The inline lane (lane mutex held, on a sender's thread): only what would run at once, so that
  // nothing is deferred from here. Retiring it stays with the device thread (the completion's
  // poll_op).
  bool run_inline(device_msg& m) override {
    if (!backend_ || !deferred_.empty()) return false;
    const bool now = std::visit(
        [this](auto& op) {
          if constexpr (!k_inline_kind<std::decay_t<decltype(op)>>) {
            return false;
          } else if constexpr (requires { op.writes; }) {
            std::vector<std::shared_ptr<void>> waits;
            return marks_ready(op, waits);
          } else {
            return true;
          }
        },
        m);
    if (!now) return false;
    const context::scoped_device bound(state_->device());
    auto previous = backend_->enter_caller();
    if (!previous) return false;
    caller_looks_ = true;  // the sender will likely wait for it, on this thread
    run(m);
    caller_looks_ = false;
    // (A sticky failure in run() may have stopped the device and dropped the backend.)
    if (!backend_) return true;
    backend_->leave_caller(*previous);
    // Work that was done when its call returned (the host kind: no event) is answered here, as
    // the device thread would after it; the rest is answered by the completion waiter. What the
    // waiter answered already is retired here too.
    if (!pending_.empty() && !pending_.back().done) {
      poll();
    } else {
      while (pending_.size() > 1 && pending_.front().outcome->settled()) pending_.pop_front();
    }
    return true;
  }

 private:
  // Runs an operation, or defers it while a write to one of its buffers, requested before it by
  // another queue (a collective, another device), is not enqueued yet. Writes from other queues
  // are waited for on the device (an event wait), never on the host.
  void run(device_msg& m) {
    const bool ran = std::visit(
        [this](auto& op) {
          if constexpr (requires { op.writes; }) {
            std::vector<std::shared_ptr<void>> waits;
            if (!marks_ready(op, waits)) return false;
            for (const auto& e : waits) {
              if (waited_.seen(e)) continue;
              if (auto r = backend_->wait_event(e); !r) {
                op.reply.fail(r.error_value());
                finish_writes(op.writes);
                return true;
              }
              waited_.remember(e);
            }
          }
          recorded_event_.reset();
          handle(op);
          if constexpr (requires { op.writes; }) finish_writes(op.writes);
          return true;
        },
        m);
    if (!ran) deferred_.push_back(std::move(m));
  }

  template <typename Op>
  bool marks_ready(const Op& op, std::vector<std::shared_ptr<void>>& waits) const {
    auto need = [&](const buffer_block& b, std::uint64_t seq) {
      if (seq == 0) return true;
      const auto mark = b.mark_after(seq);
      if (!mark) return false;
      if (mark->event && mark->origin != this) waits.push_back(mark->event);
      return true;
    };
    for (const auto& t : op.writes) {
      if (!need(*t.block, t.seq - 1)) return false;
    }
    if constexpr (requires { op.reads; }) {
      for (const auto& t : op.reads) {
        if (!need(*t.block, t.seq)) return false;
      }
    }
    return true;
  }

  void handle(detail::alloc_op& op) {
    auto p = op.managed ? backend_->allocate_managed(op.bytes, op.attach) : backend_->allocate(op.bytes);
    if (!p) return fail_op(op.reply, p.error_value());
    live_.emplace(*p, live_allocation{op.bytes, op.managed});
    auto block = std::make_shared<buffer_block>();
    block->id = g_next_buffer_id.fetch_add(1);
    block->bytes = op.bytes;
    block->type = op.type;
    block->ptr = *p;
    block->generation = state_->generation();
    block->state = state_;
    block->managed = op.managed;
    block->release = [self = context().self(), generation = block->generation](void* ptr) {
      (void)self.tell(detail::free_op{ptr, generation});
    };
    // The allocation is stream-ordered: later work on the stream may use it at once.
    op.reply.send(std::move(block));
  }

  void handle(detail::copy_op& op) {
    if (auto v = validate(op.uses); !v) return op.reply.fail(v.error_value());
    auto after = backend_->copy(op.dst, op.src, op.bytes, op.direction);
    if (!after) return fail_op(op.reply, after.error_value());
    enqueue_completion(std::move(op.reply), std::move(op.uses), std::move(after).value());
  }

  void handle(detail::peer_copy_op& op) {
    if (auto v = validate({op.dst}); !v) return op.reply.fail(v.error_value());
    if (!op.src) return op.reply.fail(error(errc::invalid_argument, "empty gpu_ref"));
    if (auto v = validate_block(*op.src); !v) return op.reply.fail(v.error_value());
    const auto owner = op.src->state.lock();
    if (owner->kind() != state_->kind()) {
      return op.reply.fail(
          error(errc::invalid_argument, "peer copy between a host and a CUDA device; use download/upload"));
    }
    // run() already made the stream wait for src's last write, recorded on its own device.
    if (auto r = backend_->copy_from_peer(op.dst->ptr, op.src->ptr, owner->device(), op.bytes); !r) {
      return fail_op(op.reply, r.error_value());
    }
    enqueue_completion(std::move(op.reply), {std::move(op.dst), std::move(op.src)});
  }

  void handle(detail::fill_op& op) {
    if (auto v = validate({op.dst}); !v) return op.reply.fail(v.error_value());
    if (auto r = backend_->fill_bytes(op.dst->ptr, op.value, op.dst->bytes); !r)
      return fail_op(op.reply, r.error_value());
    enqueue_completion(std::move(op.reply), {std::move(op.dst)});
  }

  void handle(detail::run_op& op) {
    if (auto v = validate(op.uses); !v) return op.reply.fail(v.error_value());
    result<void> r = ok();
    try {
      r = op.work(backend_->context());
    } catch (const std::exception& e) {
      r = error(errc::internal, std::string("device work threw: ") + e.what());
    }
    if (!r) return fail_op(op.reply, r.error_value());
    enqueue_completion(std::move(op.reply), std::move(op.uses));
  }

  void handle(detail::module_load_op& op) {
    auto m = backend_->load_module(op.image);
    if (!m) return fail_op(op.reply, m.error_value());
    const module_ref ref{g_next_module_id.fetch_add(1), state_->device(), state_->generation()};
    modules_.emplace(ref.id, *m);
    op.reply.send(ref);
  }

  void handle(detail::kernel_get_op& op) {
    auto m = find_module(op.module);
    if (!m) return op.reply.fail(m.error_value());
    auto k = backend_->get_kernel(*m, op.name);
    if (!k) return fail_op(op.reply, k.error_value().with_context("looking up kernel '" + op.name + "'"));
    kernel_ref ref{g_next_kernel_id.fetch_add(1), op.module.id,       state_->device(),
                   state_->generation(),          std::move(op.name), k->param_sizes};
    kernels_.emplace(ref.id, kernel_entry{k->function, op.module.id});
    op.reply.send(std::move(ref));
  }

  void handle(detail::launch_op& op) {
    if (auto v = validate(op.uses); !v) return op.reply.fail(v.error_value());
    const auto k = kernels_.find(op.kernel.id);
    if (k == kernels_.end() || op.kernel.generation != state_->generation()) {
      return op.reply.fail(unknown("kernel", op.kernel.id, op.kernel.generation));
    }
    auto args = op.args.bind();
    if (auto r = backend_->launch(k->second.function, op.config, args.data()); !r) {
      return fail_op(op.reply, r.error_value().with_context("launching kernel '" + op.kernel.name + "'"));
    }
    enqueue_completion(std::move(op.reply), std::move(op.uses));
  }

  void handle(detail::module_unload_op& op) {
    auto m = find_module(op.module);
    if (!m) return op.reply.fail(m.error_value());
    modules_.erase(op.module.id);
    std::erase_if(kernels_, [&](const auto& k) { return k.second.module == op.module.id; });
    // Launches from the module may still run: unload once the stream has passed them.
    // (The completion waiter may run this: it holds the backend, not the actor.)
    enqueue_completion(std::move(op.reply), {},
                       [backend = backend_.get(), handle = *m] { backend->unload_module(handle); });
  }

  result<void*> find_module(const module_ref& ref) const {
    const auto it = modules_.find(ref.id);
    if (it == modules_.end() || ref.generation != state_->generation())
      return unknown("module", ref.id, ref.generation);
    return it->second;
  }

  error unknown(std::string_view what, std::uint64_t id, std::uint64_t generation) const {
    const std::string name = std::string(what) + " " + std::to_string(id);
    if (generation != state_->generation()) {
      return error(errc::stale_ref, name + " is from generation " + std::to_string(generation) + "; device " +
                                        std::to_string(state_->device()) + " rebuilt its context since");
    }
    return error(errc::invalid_argument, "unknown " + name + " on device " + std::to_string(state_->device()) +
                                             " (unloaded, or never loaded here)");
  }

  void handle(detail::free_op& op) {
    // Memory from an older generation went away with that context.
    if (op.generation != state_->generation()) return;
    const auto it = live_.find(op.ptr);
    if (it == live_.end()) return;
    release(it->first, it->second);
    live_.erase(it);
  }

  void handle(detail::placement_op& op) {
    if (auto v = validate({op.block}); !v) return op.reply.fail(v.error_value());
    if (!op.block->managed) {
      return op.reply.fail(error(errc::invalid_argument, "buffer " + std::to_string(op.block->id) +
                                                             " is device memory; only managed memory can be placed"));
    }
    if (op.advice) {
      // Advice takes effect when given; nothing is enqueued.
      if (auto r = backend_->advise(op.block->ptr, op.block->bytes, *op.advice, op.location); !r) {
        return fail_op(op.reply, r.error_value());
      }
      return op.reply.send();
    }
    if (auto r = backend_->prefetch(op.block->ptr, op.block->bytes, op.location); !r) {
      return fail_op(op.reply, r.error_value());
    }
    enqueue_completion(std::move(op.reply), {std::move(op.block)});
  }

  void handle(detail::stats_op& op) {
    device_stats s;
    for (const auto& [ptr, a] : live_) {
      ++(a.managed ? s.managed_buffers : s.buffers);
      (a.managed ? s.managed_bytes : s.bytes) += a.bytes;
    }
    s.completions_seen_by_callers = backend_->completions_seen_by_callers();
    s.operations_inline = lane_->ran_inline();
    s.messages_by_mail = lane_->sent_by_mail();
    op.reply.send(s);
  }

  struct live_allocation {
    std::size_t bytes;
    bool managed;
  };

  void release(void* p, const live_allocation& a) {
    if (a.managed) {
      backend_->release_managed(p);
    } else {
      backend_->release(p);
    }
  }

  void handle(detail::poll_op&) { poll_scheduled_ = false; }

  result<void> validate(const std::vector<std::shared_ptr<buffer_block>>& uses) const {
    for (const auto& b : uses) {
      if (!b) return error(errc::invalid_argument, "empty gpu_ref");
      if (usable_on(*b, state_)) continue;  // (the usual answer, without locking)
      ATOMR_TRY(validate_block(*b));
      const auto owner = b->state.lock();
      if (owner != state_) {
        return error(errc::invalid_argument, "buffer " + std::to_string(b->id) + " lives on device " +
                                                 std::to_string(owner ? owner->device() : -1) + ", not device " +
                                                 std::to_string(state_->device()));
      }
    }
    return ok();
  }

  // Tells the written buffers their writes are enqueued (or refused), with the event if any.
  void finish_writes(const std::vector<detail::write_ticket>& writes) {
    for (const auto& t : writes) t.block->write_enqueued(t.seq, recorded_event_, this);
  }

  void enqueue_completion(reply_to<void> reply, std::vector<std::shared_ptr<buffer_block>> uses,
                          std::function<void()> after = {}) {
    auto outcome = std::make_shared<completion>(std::move(reply), std::move(after));
    auto marked = backend_->mark(
        [self = context().self(), outcome](bool ok) {
          // The actor retires it when the backend goes quiet (on_quiet); a failure is the actor's
          // to handle at once.
          if (ok) {
            outcome->succeed();
          } else {
            (void)self.tell(detail::poll_op{});
          }
        },
        caller_looks_);
    if (!marked) {
      outcome->fail(marked.error_value());
      if (backend_->is_sticky(marked.error_value())) rebuild(marked.error_value());
      return;
    }
    if (marked->look) outcome->set_look(std::move(marked->look));
    recorded_event_ = marked->event;  // what readers on other devices of the buffers written here wait on
    pending_.push_back({std::move(marked->event), std::move(outcome), std::move(uses)});
  }

  // An operation failed when it was enqueued; a sticky error also poisons everything behind it.
  template <typename T>
  void fail_op(reply_to<T>& reply, const error& e) {
    reply.fail(e);
    if (backend_->is_sticky(e)) rebuild(e);
  }

  // Answers every operation the device has finished, in order; on a failure, rebuilds.
  void poll() {
    if (!deferred_.empty()) {
      auto waiting = std::move(deferred_);
      deferred_.clear();
      for (auto& m : waiting) {
        if (deferred_.empty()) {
          run(m);
        } else {
          deferred_.push_back(std::move(m));
        }
      }
    }
    while (!pending_.empty()) {
      // Answered by the completion waiter: done, without asking the driver (the lane stays held
      // for less time, and senders find it free).
      if (pending_.front().outcome->settled()) {
        pending_.pop_front();
        continue;
      }
      auto done = backend_->finished(pending_.front().done);
      if (!done) {
        pending_.front().outcome->fail(done.error_value());
        pending_.pop_front();
        if (backend_->is_sticky(done.error_value())) rebuild(done.error_value());
        continue;
      }
      if (!*done) break;
      pending_.front().outcome->succeed();
      pending_.pop_front();
    }
    // After a device fault the wake-up host function may never run; poll until the queue drains.
    if ((!pending_.empty() || !deferred_.empty()) && !poll_scheduled_) {
      poll_scheduled_ = true;
      context().tell_after(1ms, detail::poll_op{});
    }
  }

  // A sticky error poisoned the context: every request in flight fails, every existing gpu_ref
  // becomes stale (new generation, watchers told), and the context is rebuilt. CUDA documents
  // that some sticky errors (illegal address, for one) leave the whole process unable to make a
  // new context; then the device stops and says so, and only restarting the rank recovers.
  void rebuild(const error& cause) {
    const auto now = std::chrono::steady_clock::now();
    while (!rebuilds_.empty() && now - rebuilds_.front() > 60s) rebuilds_.pop_front();
    const error poisoned = cause.with_context("device " + std::to_string(state_->device()) + " context poisoned");
    for (auto& op : pending_) op.outcome->fail(poisoned);
    pending_.clear();
    live_.clear();  // the context and all its memory and modules go
    waited_.clear();
    modules_.clear();
    kernels_.clear();
    state_->bump_generation();
    if (static_cast<int>(rebuilds_.size()) >= options_.max_rebuilds) {
      return give_up(error(errc::aborted, "device " + std::to_string(state_->device()) + " exceeded " +
                                              std::to_string(options_.max_rebuilds) +
                                              " context rebuilds within 60 s; last: " + cause.describe()));
    }
    rebuilds_.push_back(now);
    log::get("devices")->warn("device {}: rebuilding the context after: {}", state_->device(), cause.describe());
    if (auto r = backend_->rebuild(); !r) {
      return give_up(error(r.error_value().code(), "device " + std::to_string(state_->device()) +
                                                       ": CUDA cannot recover this process from " + cause.describe() +
                                                       "; a new context was refused (" + r.error_value().message() +
                                                       "). Restart this rank to use the device again."));
    }
  }

  void give_up(error reason) {  // (lane mutex held)
    lane_->attach(nullptr);
    state_->set_accepting(false);
    backend_.reset();
    context().stop(std::move(reason));
  }

  std::shared_ptr<device_state> state_;
  std::shared_ptr<detail::device_lane> lane_;
  device_options options_;
  bool caller_looks_ = false;     // running an operation of the inline lane (see run_inline)
  context::scoped_device scope_;  // error messages from this actor name the device
  std::unique_ptr<device_backend> backend_;
  std::unordered_map<void*, live_allocation> live_;
  struct kernel_entry {
    void* function;
    std::uint64_t module;
  };
  std::unordered_map<std::uint64_t, void*> modules_;  // module id -> backend handle
  std::unordered_map<std::uint64_t, kernel_entry> kernels_;
  std::deque<pending_op> pending_;
  std::vector<device_msg> deferred_;
  std::shared_ptr<void> recorded_event_;
  wait_memo waited_;  // events the stream already waited on
  std::deque<std::chrono::steady_clock::time_point> rebuilds_;
  bool poll_scheduled_ = false;
};

}  // namespace

result<device> device::start(actor_system& system, int index, device_kind kind, device_options options) {
  if (kind == device_kind::host && !options.host_arena_most) {
    // (Read here, on the caller's thread: the backend is made on the device's.)
    const auto most = tunable_int(tunables::host_arena_most);
    if (!most || *most < 0) {
      return error(errc::invalid_argument, "ATOMR_HOST_ARENA_MOST must be a byte count, 0 or more (got \"" +
                                               tunable_value(tunables::host_arena_most) + "\")");
    }
    options.host_arena_most = static_cast<std::size_t>(*most);
  }
  auto state = std::make_shared<device_state>(index, kind);
  auto lane = std::make_shared<detail::device_lane>();
  spawn_options spawn{.name = "device-" + std::to_string(index),
                      .dispatch = dispatch_kind::dedicated,
                      // A failure past the rebuild budget, or a failed start, ends the device.
                      .supervision = {}};
  ATOMR_ASSIGN_OR_RETURN(auto ref, system.spawn<device_actor>(spawn, state, lane, options));
  return device(std::move(ref), std::move(state), std::move(lane), options);
}

}  // namespace atomr::local
