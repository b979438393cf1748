#include "atomr/local/actors/actor_system.hpp"

#include <thread>

#include "atomr/common/log.hpp"

namespace atomr::local {

actor_system::actor_system(system_config config)
    : config_(std::move(config)),
      timers_(std::make_unique<timer_service>()),
      pool_(std::make_unique<pool_dispatcher>(
          config_.pool_threads != 0 ? config_.pool_threads : std::max(1u, std::thread::hardware_concurrency()),
          config_.batch)) {}

actor_system::~actor_system() { shutdown(); }

std::size_t actor_system::live_actors() const {
  std::lock_guard lock(mutex_);
  return live_.size();
}

result<std::string> actor_system::reserve(const std::string& requested, std::uint64_t id, std::type_index type) {
  std::lock_guard lock(mutex_);
  if (shutting_down_) return error(errc::unavailable, "the actor system is shutting down; cannot spawn");
  std::string name = requested.empty() ? "actor-" + std::to_string(id) : requested;
  const auto [it, inserted] = by_name_.try_emplace(name, registration{id, type});
  if (!inserted) return error(errc::invalid_argument, "actor name '" + name + "' is already taken by a live actor");
  return name;
}

void actor_system::registered(const std::shared_ptr<cell_base>& c, bool top_level) {
  std::lock_guard lock(mutex_);
  live_.emplace(c->id(), c);
  if (top_level) top_level_.push_back(c->id());
}

void actor_system::cell_terminated(const cell_base& c) {
  std::lock_guard lock(mutex_);
  if (const auto it = by_name_.find(c.name()); it != by_name_.end() && it->second.id == c.id()) by_name_.erase(it);
  std::erase(top_level_, c.id());
  // The dispatcher thread running this cell still holds a reference; the cell is freed after.
  live_.erase(c.id());
  if (live_.empty()) all_stopped_.notify_all();
}

void actor_system::supervise_top_level(const std::shared_ptr<cell_base>& c, const error& cause) {
  switch (config_.top_level(cause)) {
    case directive::resume: c->post_system(detail::resume_request{}); break;
    case directive::restart: c->post_system(detail::restart_request{cause, config_.top_level.budget}); break;
    case directive::stop:
    case directive::escalate:  // nobody above the system: stop
      c->post_system(detail::stop_request{cause});
      break;
  }
}

void actor_system::shutdown() {
  std::vector<std::shared_ptr<cell_base>> tops;
  {
    std::lock_guard lock(mutex_);
    if (shutting_down_ && !pool_) return;
    shutting_down_ = true;
    for (const auto id : top_level_) tops.push_back(live_.at(id));
  }
  for (auto& t : tops) t->request_stop();
  tops.clear();
  {
    std::unique_lock lock(mutex_);
    while (!all_stopped_.wait_for(lock, std::chrono::seconds(5), [&] { return live_.empty(); })) {
      log::get("actors")->warn("shutdown: still waiting for {} actor(s) to stop (a handler that never returns?)",
                               live_.size());
    }
  }
  std::vector<std::unique_ptr<dedicated_dispatcher>> dedicated;
  {
    std::lock_guard lock(mutex_);
    dedicated.swap(dedicated_);
  }
  // Timers first: a callback running now (a periodic tell) still schedules on the dispatchers.
  timers_->stop();
  dedicated.clear();  // joins
  pool_.reset();      // joins
}

}  // namespace atomr::local
