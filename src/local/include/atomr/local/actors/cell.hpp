// The runtime side of an actor: its mailboxes, lifecycle, supervision and termination. Users see
// actor_ref and actor_context, not cells. cell_base holds everything that does not depend on the
// message type; cell<Msg> adds the typed mailbox and the actor instance.
//
// Threading: post_system(), schedule(), enqueue(), request_stop(), on_terminated() are safe from any
// thread. run() is called by one dispatcher thread at a time (the `scheduled` flag guarantees it),
// and everything it calls runs on that thread.
#pragma once

#include <concurrentqueue/concurrentqueue.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "atomr/local/actors/actor.hpp"
#include "atomr/local/actors/dispatcher.hpp"
#include "atomr/local/actors/frame_registry.hpp"
#include "atomr/local/actors/spawn_options.hpp"

namespace atomr::local {

class cell_base;

namespace detail {
class resume_point;

struct start_request {};
struct stop_request {
  std::optional<error> reason;
};
struct resume_request {};
struct restart_request {
  error cause;
  restart_budget budget;
};
struct child_failed {
  std::shared_ptr<cell_base> child;
  error cause;
};
struct child_stopped {
  std::uint64_t id;
};
// A coroutine of this actor whose awaited future is fulfilled: resume it here (see resume_point.hpp).
struct resume_frame {
  std::shared_ptr<resume_point> point;
};
using system_message = std::variant<start_request, stop_request, resume_request, restart_request, child_failed,
                                    child_stopped, resume_frame>;
}  // namespace detail

// Producer tokens by destination mailbox. moodycamel keeps FIFO order per producer only, and a
// thread without a token is a producer of its own: a sender whose sends run on varying threads
// (a pool actor; a router whose deliveries its progress thread or a waiting caller makes) keeps
// its messages in order by sending through one token per destination. Not thread-safe: its
// owner serializes the sends.
class producer_tokens {
 public:
  // The token for `destination`, created by `make` on first use.
  template <typename Make>
  moodycamel::ProducerToken& token_for(cell_base& destination, Make&& make);
  void clear() { tokens_.clear(); }

  // The table the code on this thread sends with when no actor's handler runs here (set by a
  // scope around the sends), or null.
  static producer_tokens* current() noexcept;
  class scope {
   public:
    explicit scope(producer_tokens* t) noexcept;
    ~scope();
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    producer_tokens* previous_;
  };

 private:
  struct entry {
    std::shared_ptr<cell_base> destination;  // the token must not outlive the queue it belongs to
    std::unique_ptr<moodycamel::ProducerToken> token;
  };
  static constexpr std::size_t k_prune_threshold = 64;
  void prune();  // drops the tokens of stopped destinations
  std::unordered_map<const cell_base*, entry> tokens_;
};

class cell_base : public std::enable_shared_from_this<cell_base> {
 public:
  enum class lifecycle : std::uint8_t { starting, running, suspended, stopped };

  cell_base(actor_system& system, std::uint64_t id, std::string name, std::weak_ptr<cell_base> parent,
            supervisor_strategy children_strategy, dispatcher& d);
  virtual ~cell_base();
  cell_base(const cell_base&) = delete;
  cell_base& operator=(const cell_base&) = delete;

  std::uint64_t id() const noexcept { return id_; }
  const std::string& name() const noexcept { return name_; }
  lifecycle state() const noexcept { return state_.load(std::memory_order_acquire); }
  bool stopped() const noexcept { return state() == lifecycle::stopped; }
  actor_system& system() const noexcept { return system_; }
  timer_service& system_timers() const;

  void post_system(detail::system_message m);
  void request_stop() { post_system(detail::stop_request{}); }
  void request_stop(error reason) { post_system(detail::stop_request{std::move(reason)}); }
  void schedule();
  void run(std::size_t batch);
  // Direct delivery (spawn_options::direct): claims the actor for the calling thread when it is
  // idle (running, not scheduled, nothing queued), as a dispatcher does before run(); false
  // otherwise. release() ends the claim as run() ends a batch (work that came meanwhile is
  // scheduled). Between the two the caller runs the handler under a current_scope.
  bool try_claim();
  void release();
  future<terminated> on_terminated();

  // Own thread only.
  void add_child(std::shared_ptr<cell_base> child) { children_.push_back(std::move(child)); }
  void keep_timer(timer_handle h) { timers_.push_back(std::move(h)); }
  // The suspended coroutine frames this actor owns (see frame_registry.hpp).
  detail::frame_registry& frames() noexcept { return frames_; }
  // A coroutine handler finished with an error after it suspended: fail as a throwing handler does.
  void handler_failed(error e) { fail(std::move(e)); }

  // The actor whose handler is running on this thread, if any.
  static cell_base* current() noexcept;
  // Makes `c` the current actor of this thread for the scope (restoring the previous one).
  class current_scope {
   public:
    explicit current_scope(cell_base* c) noexcept;
    ~current_scope();
    current_scope(const current_scope&) = delete;
    current_scope& operator=(const current_scope&) = delete;

   private:
    cell_base* previous_;
  };

  // The producer token this actor uses for `destination`'s mailbox, created by `make` on first
  // use. moodycamel keeps FIFO order per producer; a pool actor runs on varying threads, so its
  // sends go through one token per destination to stay in order. Own thread only.
  template <typename Make>
  moodycamel::ProducerToken& token_for(cell_base& destination, Make&& make) {
    return tokens_.token_for(destination, std::forward<Make>(make));
  }

 protected:
  // Implemented by cell<Msg>; called on the cell's thread.
  virtual result<void> create_instance() = 0;
  virtual void destroy_instance() = 0;
  virtual void process_user(std::size_t batch) = 0;
  virtual bool has_user_work() const = 0;
  // Any thread: discards queued user messages (their reply_to handles fail with the drop reason).
  virtual void drop_user_messages() = 0;
  // A suspended coroutine handler holds the mailbox: no user message runs until it finishes.
  bool mailbox_held() const noexcept { return frames_.holding(); }

  // The current message failed (own thread): suspend and ask the supervisor.
  void fail(error e);
  error stopped_error() const;

 private:
  void handle(detail::system_message& m);
  void start_instance();
  void restart(const error& cause, const restart_budget& budget);
  void supervise_child(const std::shared_ptr<cell_base>& child, const error& cause);
  void do_stop(std::optional<error> reason);

  actor_system& system_;
  const std::uint64_t id_;
  const std::string name_;
  const std::weak_ptr<cell_base> parent_;
  const supervisor_strategy children_strategy_;
  dispatcher& dispatcher_;

  std::atomic<lifecycle> state_{lifecycle::starting};
  std::atomic<bool> scheduled_{false};
  moodycamel::ConcurrentQueue<detail::system_message> system_queue_;

  // Own thread only.
  std::vector<std::shared_ptr<cell_base>> children_;
  std::vector<timer_handle> timers_;
  producer_tokens tokens_;
  std::deque<std::chrono::steady_clock::time_point> restarts_;
  detail::frame_registry frames_;

  std::mutex watchers_mutex_;
  std::vector<promise<terminated>> watchers_;
  std::optional<terminated> final_;
};

template <typename Make>
moodycamel::ProducerToken& producer_tokens::token_for(cell_base& destination, Make&& make) {
  auto it = tokens_.find(&destination);
  if (it == tokens_.end()) {
    if (tokens_.size() >= k_prune_threshold) prune();
    it = tokens_.emplace(&destination, entry{destination.shared_from_this(), make()}).first;
  }
  return *it->second.token;
}

template <typename Msg>
class cell final : public cell_base {
 public:
  using factory = std::function<std::unique_ptr<actor<Msg>>()>;

  cell(actor_system& system, std::uint64_t id, std::string name, std::weak_ptr<cell_base> parent,
       const spawn_options& options, dispatcher& d, factory make)
      : cell_base(system, id, std::move(name), std::move(parent), options.supervision, d),
        make_(std::move(make)),
        capacity_(options.mailbox_capacity),
        overflow_(options.overflow),
        block_timeout_(options.block_timeout),
        direct_(options.direct),
        context_(*this) {}

  ~cell() override {
    frames().destroy_all();  // before the instance they refer to
    drop_user_messages();
  }

  std::shared_ptr<cell<Msg>> shared_self() { return std::static_pointer_cast<cell<Msg>>(shared_from_this()); }

  // `wake` false: the caller schedules the actor itself later (schedule()), after a batch.
  result<void> enqueue(Msg&& m, bool wake = true) {
    if (stopped()) return refuse(std::move(m), stopped_error());
    if (capacity_ != 0) {
      if (auto room = reserve_slot(); !room) return refuse(std::move(m), room.error_value());
    }
    auto make = [&] { return std::make_unique<moodycamel::ProducerToken>(mailbox_); };
    // A scope's table first: it is set around a run of sends (a router's deliveries) that may
    // happen inside some actor's handler (a caller that waits there), and must keep their order.
    if (producer_tokens* tokens = producer_tokens::current()) {
      mailbox_.enqueue(tokens->token_for(*this, make), slot{std::move(m)});
    } else if (cell_base* sender = cell_base::current()) {
      mailbox_.enqueue(sender->token_for(*this, make), slot{std::move(m)});
    } else {
      mailbox_.enqueue(slot{std::move(m)});  // per-thread FIFO through the thread's implicit producer
    }
    // The actor may have stopped and drained between the check above and the enqueue; then nobody
    // else will answer this message, so drain it here.
    if (stopped()) {
      drop_user_messages();
      return stopped_error();
    }
    if (wake) schedule();
    return ok();
  }

  // Direct delivery: runs the handler with `m` on this thread if the actor was spawned direct and
  // is idle (so every message queued before has been handled: the order per sender holds), and
  // returns true; otherwise returns false and leaves `m` for the caller to enqueue. The handler
  // runs under a no_wait_scope (see spawn_options::direct).
  bool try_receive_here(Msg& m) {
    if (!direct_ || !try_claim()) return false;
    {
      current_scope running(this);
      // The handler's own sends go through this actor's producer tokens, as on a pool worker, not
      // through the deliverer's table: one producer per destination keeps their order.
      producer_tokens::scope own_tokens(nullptr);
      detail::no_wait_scope no_wait;
      std::optional<Msg> held(std::move(m));
      (void)handle_one(held);
    }
    release();
    return true;
  }

 protected:
  result<void> create_instance() override {
    try {
      instance_ = make_();
      instance_->context_ = &context_;
      instance_->on_start();
    } catch (const actor_failure& f) {
      return f.failure();
    } catch (const std::exception& e) {
      return error(errc::internal, "actor '" + name() + "' failed to start: " + e.what());
    }
    return ok();
  }

  void destroy_instance() override {
    if (!instance_) return;
    try {
      instance_->on_stop();
    } catch (const std::exception& e) {
      log_stop_failure(e.what());
    }
    instance_.reset();
  }

  void process_user(std::size_t batch) override {
    slot s;
    for (std::size_t i = 0; i < batch && state() == lifecycle::running && !mailbox_held(); ++i) {
      if (!mailbox_.try_dequeue(consumer_, s)) return;
      release_slot();
      if (!handle_one(s.message)) return;
    }
  }

  bool has_user_work() const override { return mailbox_.size_approx() != 0; }

  void drop_user_messages() override {
    detail::drop_reason_scope reason(stopped_error());
    slot s;
    while (mailbox_.try_dequeue(s)) {
      release_slot();
      s.message.reset();
    }
  }

 private:
  struct slot {
    std::optional<Msg> message;
  };

  // Destroys a refused message with `why` as the drop reason (so its reply_to fails with it).
  // (On the heap: refusals are rare, and GCC 12 misreads a moved-from variant on the stack as
  // maybe-uninitialized.)
  error refuse(Msg&& m, error why) {
    detail::drop_reason_scope reason(why);
    std::make_unique<Msg>(std::move(m)).reset();
    return why;
  }

  result<void> reserve_slot() {
    if (size_.fetch_add(1, std::memory_order_acq_rel) < capacity_) return ok();
    size_.fetch_sub(1, std::memory_order_acq_rel);
    const std::string full = "mailbox of actor '" + name() + "' is full (" + std::to_string(capacity_) + " messages)";
    if (overflow_ == overflow_policy::fail) return error(errc::resource_exhausted, full);
    std::unique_lock lock(room_mutex_);
    const auto deadline = std::chrono::steady_clock::now() + block_timeout_;
    blocked_.fetch_add(1);
    const bool got = room_.wait_until(lock, deadline, [&] {
      if (stopped()) return true;
      if (size_.fetch_add(1, std::memory_order_acq_rel) < capacity_) return true;
      size_.fetch_sub(1, std::memory_order_acq_rel);
      return false;
    });
    blocked_.fetch_sub(1);
    if (stopped()) {
      if (got) size_.fetch_sub(1, std::memory_order_acq_rel);
      return stopped_error();
    }
    if (!got) {
      return error(errc::timeout,
                   full + "; no room within " +
                       std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(block_timeout_).count()) +
                       " ms");
    }
    return ok();
  }

  void release_slot() {
    if (capacity_ == 0) return;
    size_.fetch_sub(1, std::memory_order_acq_rel);
    // A producer counts itself in blocked_ before it checks for room under the lock, so either it
    // sees this slot or we see it and notify (after it has started waiting: we take the lock).
    if (blocked_.load() != 0) {
      std::lock_guard lock(room_mutex_);
      room_.notify_all();
    }
  }

  void log_stop_failure(const char* what) const;

  // Runs the handler on `message` (own thread, or a direct claim) and destroys it; false if the
  // handler failed (the actor is then suspended and its supervisor asked).
  bool handle_one(std::optional<Msg>& message) {
    std::optional<error> failure;
    try {
      instance_->receive(*message);
    } catch (const actor_failure& f) {
      failure = f.failure();
    } catch (const std::exception& e) {
      failure = error(errc::internal, "actor '" + name() + "' failed: " + e.what());
    }
    if (failure) {
      {
        detail::drop_reason_scope reason(failure->with_context("actor '" + name() + "' failed handling this request"));
        message.reset();
      }
      fail(std::move(*failure));
      return false;
    }
    message.reset();
    return true;
  }

  factory make_;
  std::unique_ptr<actor<Msg>> instance_;
  moodycamel::ConcurrentQueue<slot> mailbox_;
  moodycamel::ConsumerToken consumer_{mailbox_};

  const std::size_t capacity_;
  const overflow_policy overflow_;
  const std::chrono::steady_clock::duration block_timeout_;
  std::atomic<std::size_t> size_{0};
  std::mutex room_mutex_;
  std::condition_variable room_;
  std::atomic<std::size_t> blocked_{0};
  const bool direct_;

  actor_context<Msg> context_;
};

namespace detail {
void log_actor_warning(const std::string& text);
}

template <typename Msg>
void cell<Msg>::log_stop_failure(const char* what) const {
  detail::log_actor_warning("actor '" + name() + "' threw from on_stop: " + what);
}

}  // namespace atomr::local
