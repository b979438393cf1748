#include <algorithm>

#include "atomr/common/log.hpp"
#include "atomr/local/actors/actor_system.hpp"
#include "atomr/local/actors/resume_point.hpp"

namespace atomr::local {

namespace detail {
void log_actor_warning(const std::string& text) { log::get("actors")->warn("{}", text); }
}  // namespace detail

cell_base::cell_base(actor_system& system, std::uint64_t id, std::string name, std::weak_ptr<cell_base> parent,
                     supervisor_strategy children_strategy, dispatcher& d)
    : system_(system),
      id_(id),
      name_(std::move(name)),
      parent_(std::move(parent)),
      children_strategy_(std::move(children_strategy)),
      dispatcher_(d) {}

cell_base::~cell_base() = default;

timer_service& cell_base::system_timers() const { return system_.timers(); }

error cell_base::stopped_error() const { return error(errc::unavailable, "actor '" + name_ + "' stopped"); }

void cell_base::post_system(detail::system_message m) {
  system_queue_.enqueue(std::move(m));
  schedule();
}

void cell_base::schedule() {
  // One schedule per idle->busy transition; run() clears the flag and re-checks for work. The
  // fence pairs with the one in run(): either run() sees the message just enqueued, or we see the
  // flag cleared. Reading before the exchange keeps busy actors' senders off a contended RMW.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (scheduled_.load(std::memory_order_relaxed)) return;
  if (!scheduled_.exchange(true, std::memory_order_acq_rel)) dispatcher_.schedule(shared_from_this());
}

namespace {
thread_local cell_base* t_current = nullptr;
}  // namespace

cell_base* cell_base::current() noexcept { return t_current; }
cell_base::current_scope::current_scope(cell_base* c) noexcept : previous_(std::exchange(t_current, c)) {}
cell_base::current_scope::~current_scope() { t_current = previous_; }

namespace {
thread_local producer_tokens* t_tokens = nullptr;
}  // namespace

producer_tokens* producer_tokens::current() noexcept { return t_tokens; }
producer_tokens::scope::scope(producer_tokens* t) noexcept : previous_(std::exchange(t_tokens, t)) {}
producer_tokens::scope::~scope() { t_tokens = previous_; }

void producer_tokens::prune() {
  std::erase_if(tokens_, [](const auto& e) { return e.second.destination->stopped(); });
}

void cell_base::run(std::size_t batch) {
  {
    current_scope running(this);
    detail::system_message m;
    while (system_queue_.try_dequeue(m)) handle(m);
    if (state() == lifecycle::running) process_user(batch);
  }
  release();
}

bool cell_base::try_claim() {
  if (scheduled_.load(std::memory_order_relaxed) || scheduled_.exchange(true, std::memory_order_acq_rel)) return false;
  // Claimed (the acquire pairs with the last runner's release: its dequeues are visible). Idle
  // means nothing older than the caller's message waits: it may then be handled first.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (state() == lifecycle::running && !mailbox_held() && system_queue_.size_approx() == 0 && !has_user_work()) {
    return true;
  }
  release();
  return false;
}

void cell_base::release() {
  // Read while this thread still owns the actor: a held mailbox waits for the suspended handler's
  // resumption (a system message), so queued user messages alone do not reschedule it.
  const bool held = mailbox_held();
  scheduled_.store(false, std::memory_order_release);  // publishes this batch to the next runner
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const lifecycle s = state();
  if (s != lifecycle::stopped &&
      (system_queue_.size_approx() != 0 || (s == lifecycle::running && !held && has_user_work()))) {
    schedule();
  }
}

future<terminated> cell_base::on_terminated() {
  std::lock_guard lock(watchers_mutex_);
  promise<terminated> p;
  auto f = p.get_future();
  if (final_) {
    p.set_value(*final_);
  } else {
    watchers_.push_back(std::move(p));
  }
  return f;
}

void cell_base::handle(detail::system_message& m) {
  if (stopped()) return;  // a stopped cell only drains its queue
  std::visit(
      [this](auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, detail::start_request>) {
          start_instance();
        } else if constexpr (std::is_same_v<T, detail::stop_request>) {
          do_stop(std::move(msg.reason));
        } else if constexpr (std::is_same_v<T, detail::resume_request>) {
          if (state() == lifecycle::suspended) state_.store(lifecycle::running, std::memory_order_release);
        } else if constexpr (std::is_same_v<T, detail::restart_request>) {
          restart(msg.cause, msg.budget);
        } else if constexpr (std::is_same_v<T, detail::child_failed>) {
          supervise_child(msg.child, msg.cause);
        } else if constexpr (std::is_same_v<T, detail::child_stopped>) {
          std::erase_if(children_, [&](const auto& c) { return c->id() == msg.id; });
        } else if constexpr (std::is_same_v<T, detail::resume_frame>) {
          msg.point->resume_here();
        }
      },
      m);
}

void cell_base::start_instance() {
  if (auto started = create_instance(); !started) {
    fail(started.error_value());
    return;
  }
  state_.store(lifecycle::running, std::memory_order_release);
}

void cell_base::fail(error e) {
  state_.store(lifecycle::suspended, std::memory_order_release);
  log::get("actors")->warn("actor '{}' failed: {}", name_, e.describe());
  if (auto parent = parent_.lock(); parent && !parent->stopped()) {
    parent->post_system(detail::child_failed{shared_from_this(), std::move(e)});
  } else {
    system_.supervise_top_level(shared_from_this(), e);
  }
}

void cell_base::supervise_child(const std::shared_ptr<cell_base>& child, const error& cause) {
  switch (children_strategy_(cause)) {
    case directive::resume: child->post_system(detail::resume_request{}); break;
    case directive::restart: child->post_system(detail::restart_request{cause, children_strategy_.budget}); break;
    case directive::stop: child->post_system(detail::stop_request{cause}); break;
    case directive::escalate:
      child->post_system(detail::stop_request{cause});
      fail(cause.with_context("child '" + child->name() + "' of '" + name_ + "' failed"));
      break;
  }
}

void cell_base::restart(const error& cause, const restart_budget& budget) {
  const auto now = std::chrono::steady_clock::now();
  while (!restarts_.empty() && now - restarts_.front() > budget.window) restarts_.pop_front();
  if (static_cast<int>(restarts_.size()) >= budget.max_restarts) {
    const auto window_s = std::chrono::duration_cast<std::chrono::duration<double>>(budget.window).count();
    do_stop(error(errc::aborted, "actor '" + name_ + "' exceeded its restart budget (" +
                                     std::to_string(budget.max_restarts) + " restart(s) within " +
                                     std::to_string(window_s) + " s); last failure: " + cause.describe()));
    return;
  }
  restarts_.push_back(now);
  for (auto& child : children_) child->request_stop();
  children_.clear();
  {
    detail::drop_reason_scope why(error(errc::aborted, "actor '" + name_ + "' restarted after: " + cause.describe()));
    frames_.destroy_all();  // they refer to the old instance
    destroy_instance();
  }
  start_instance();
}

void cell_base::do_stop(std::optional<error> reason) {
  state_.store(lifecycle::stopped, std::memory_order_seq_cst);
  for (auto& t : timers_) t.cancel();
  timers_.clear();
  for (auto& child : children_) child->request_stop();
  children_.clear();
  {
    // Replies the actor kept in its state fail with this too, not only queued requests.
    detail::drop_reason_scope why(stopped_error());
    frames_.destroy_all();  // suspended handlers and tasks: their replies and futures fail with this
    destroy_instance();
  }
  drop_user_messages();
  tokens_.clear();
  if (reason) log::get("actors")->warn("actor '{}' stopped: {}", name_, reason->describe());

  if (auto parent = parent_.lock()) parent->post_system(detail::child_stopped{id_});
  // Deregister before telling watchers, so a watcher sees the system without this actor.
  system_.cell_terminated(*this);
  std::vector<promise<terminated>> watchers;
  terminated notice{id_, name_, std::move(reason)};
  {
    std::lock_guard lock(watchers_mutex_);
    final_ = notice;
    watchers.swap(watchers_);
  }
  for (auto& w : watchers) w.set_value(notice);
}

}  // namespace atomr::local
