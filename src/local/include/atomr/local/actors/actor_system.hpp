// actor_system: one per process. It owns the dispatchers, the timer thread and the registry of
// live actors, spawns top-level actors, supervises them with its top-level strategy, and on
// shutdown stops every actor, answers every pending ask and joins every thread it started.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <typeindex>
#include <vector>

#include "atomr/common/result.hpp"
#include "atomr/local/actors/cell.hpp"
#include "atomr/local/actors/timer_service.hpp"

namespace atomr::local {

struct system_config {
  std::size_t pool_threads = 0;  // 0: the number of hardware threads
  int spin_iterations = 20000;   // 0: an idle dedicated thread sleeps at once (else it looks ATOMR_DEDICATED_LOOK_US)
  std::size_t batch = 256;       // messages an actor handles per scheduling
  supervisor_strategy top_level{};  // for actors spawned by the system itself
};

class actor_system {
 public:
  explicit actor_system(system_config config = {});
  ~actor_system();  // shutdown()
  actor_system(const actor_system&) = delete;
  actor_system& operator=(const actor_system&) = delete;

  // Spawns a top-level actor of type A constructed from `args` (copied, so a restart can build a
  // fresh instance). Errors: invalid_argument (name taken), unavailable (shutting down).
  template <typename A, typename... Args>
  result<actor_ref<typename A::message_type>> spawn(const spawn_options& options, Args... args) {
    return spawn_in<A>(nullptr, options, std::move(args)...);
  }

  // The live actor registered under `name`, if its message type is Msg.
  template <typename Msg>
  result<actor_ref<Msg>> lookup(const std::string& name) {
    std::lock_guard lock(mutex_);
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) return error(errc::unavailable, "no live actor named '" + name + "'");
    if (it->second.type != std::type_index(typeid(Msg))) {
      return error(errc::invalid_argument, "actor '" + name + "' does not accept this message type");
    }
    const auto live = live_.find(it->second.id);
    if (live == live_.end()) return error(errc::unavailable, "actor '" + name + "' stopped");
    return actor_ref<Msg>(std::static_pointer_cast<cell<Msg>>(live->second));
  }

  timer_service& timers() { return *timers_; }
  std::size_t live_actors() const;
  std::size_t pool_threads() const { return pool_->threads(); }

  // Stops every actor (children first is not guaranteed; each actor stops its own children),
  // waits until all have terminated, then joins the pool and the dedicated threads. Idempotent.
  void shutdown();

  // Internal: used by cells and actor_context.
  template <typename A, typename... Args>
  result<actor_ref<typename A::message_type>> spawn_in(cell_base* parent, const spawn_options& options, Args... args);
  void supervise_top_level(const std::shared_ptr<cell_base>& cell, const error& cause);
  void cell_terminated(const cell_base& cell);

 private:
  struct registration {
    std::uint64_t id;
    std::type_index type;
  };
  result<std::string> reserve(const std::string& requested, std::uint64_t id, std::type_index type);
  void registered(const std::shared_ptr<cell_base>& c, bool top_level);
  dispatcher& dispatcher_for(const spawn_options& options);

  const system_config config_;
  std::unique_ptr<timer_service> timers_;
  std::unique_ptr<pool_dispatcher> pool_;

  mutable std::mutex mutex_;
  std::condition_variable all_stopped_;
  std::map<std::string, registration, std::less<>> by_name_;
  // The system owns every live actor: an actor runs until it stops, whether or not refs remain.
  std::map<std::uint64_t, std::shared_ptr<cell_base>> live_;
  std::vector<std::uint64_t> top_level_;
  std::vector<std::unique_ptr<dedicated_dispatcher>> dedicated_;
  bool shutting_down_ = false;
  std::atomic<std::uint64_t> next_id_{1};
};

template <typename A, typename... Args>
result<actor_ref<typename A::message_type>> actor_system::spawn_in(cell_base* parent, const spawn_options& options,
                                                                   Args... args) {
  using Msg = typename A::message_type;
  static_assert(std::is_base_of_v<actor<Msg>, A>, "spawn<A>: A must derive from actor<A::message_type>");
  if (options.direct && options.dispatch != dispatch_kind::pool) {
    return error(errc::invalid_argument, "spawn \"" + options.name +
                                             "\": direct delivery needs pool dispatch (a dedicated actor's handlers "
                                             "run on its own thread)");
  }
  const std::uint64_t id = next_id_.fetch_add(1);
  ATOMR_ASSIGN_OR_RETURN(std::string name, reserve(options.name, id, std::type_index(typeid(Msg))));

  typename cell<Msg>::factory make = [args...]() -> std::unique_ptr<actor<Msg>> {
    return std::make_unique<A>(args...);
  };
  std::unique_ptr<dedicated_dispatcher> own;
  if (options.dispatch == dispatch_kind::dedicated) {
    own = std::make_unique<dedicated_dispatcher>(config_.spin_iterations, config_.batch, options.on_thread_start);
  }
  dispatcher& d = own ? static_cast<dispatcher&>(*own) : static_cast<dispatcher&>(*pool_);
  std::weak_ptr<cell_base> parent_ref = parent ? parent->weak_from_this() : std::weak_ptr<cell_base>();
  auto c = std::make_shared<cell<Msg>>(*this, id, name, parent_ref, options, d, std::move(make));
  if (parent) parent->add_child(c);
  registered(c, parent == nullptr);
  if (own) {
    own->start(c);
    std::lock_guard lock(mutex_);
    // Threads of stopped dedicated actors have exited; join them now rather than at shutdown.
    std::erase_if(dedicated_, [](const auto& old) { return old->finished(); });
    dedicated_.push_back(std::move(own));
  }
  c->post_system(detail::start_request{});
  return actor_ref<Msg>(std::move(c));
}

template <typename Msg>
template <typename Child, typename... Args>
auto actor_context<Msg>::spawn(const spawn_options& options, Args&&... args) const {
  return cell_.system().template spawn_in<Child>(&cell_, options, std::forward<Args>(args)...);
}

}  // namespace atomr::local
