#include "atomr/common/log.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <map>
#include <mutex>
#include <string>

#include "atomr/common/context.hpp"
#include "atomr/common/tunables.hpp"

namespace atomr::log {
namespace {

// %R: "rank N" or "rank N, device D", read when the line is formatted so that a logger created
// before bootstrap still prints the right rank afterwards.
class rank_flag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string text = context::describe();
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<rank_flag>(); }
};

struct levels {
  spdlog::level::level_enum fallback = spdlog::level::info;
  std::map<std::string, spdlog::level::level_enum, std::less<>> per_subsystem;

  spdlog::level::level_enum for_subsystem(std::string_view name) const {
    const auto it = per_subsystem.find(name);
    return it == per_subsystem.end() ? fallback : it->second;
  }
};

result<spdlog::level::level_enum> parse_level(std::string_view text) {
  using spdlog::level::level_enum;
  static constexpr std::pair<std::string_view, level_enum> k_names[] = {
      {"trace", level_enum::trace}, {"debug", level_enum::debug},       {"info", level_enum::info},
      {"warn", level_enum::warn},   {"warning", level_enum::warn},      {"err", level_enum::err},
      {"error", level_enum::err},   {"critical", level_enum::critical}, {"off", level_enum::off}};
  for (const auto& [name, level] : k_names) {
    if (text == name) return level;
  }
  return error(errc::invalid_argument,
               "unknown log level '" + std::string(text) + "' (use trace, debug, info, warn, error, critical, off)");
}

result<levels> parse_spec(std::string_view spec) {
  levels out;
  while (!spec.empty()) {
    const auto comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) {
      ATOMR_ASSIGN_OR_RETURN(out.fallback, parse_level(item));
    } else {
      if (eq == 0) return error(errc::invalid_argument, "log spec entry '" + std::string(item) + "' has no subsystem");
      ATOMR_ASSIGN_OR_RETURN(auto level, parse_level(item.substr(eq + 1)));
      out.per_subsystem.emplace(std::string(item.substr(0, eq)), level);
    }
  }
  return out;
}

struct state {
  std::mutex mutex;
  levels current;
  std::shared_ptr<spdlog::sinks::stderr_sink_mt> sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();

  state() {
    // A bad ATOMR_LOG must not stop the program; it is reported once through the logger itself.
    auto parsed = parse_spec(tunable_value(tunables::log));
    if (parsed) {
      current = std::move(parsed).value();
    } else {
      startup_problem = parsed.error_value().message();
    }
  }
  std::string startup_problem;
};

state& global() {
  static state s;
  return s;
}

std::unique_ptr<spdlog::formatter> make_formatter() {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<rank_flag>('R').set_pattern("[%H:%M:%S.%e] [%R] [%n] [%l] %v");
  return f;
}

}  // namespace

std::shared_ptr<spdlog::logger> get(std::string_view subsystem) {
  auto& s = global();
  std::lock_guard lock(s.mutex);
  const std::string name(subsystem);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, s.sink);
  logger->set_formatter(make_formatter());
  logger->set_level(s.current.for_subsystem(name));
  spdlog::register_logger(logger);
  if (!s.startup_problem.empty()) {
    logger->warn("ignoring ATOMR_LOG: {}", s.startup_problem);
    s.startup_problem.clear();
  }
  return logger;
}

result<void> configure(std::string_view spec) {
  ATOMR_ASSIGN_OR_RETURN(levels parsed, parse_spec(spec));
  auto& s = global();
  std::lock_guard lock(s.mutex);
  s.current = std::move(parsed);
  spdlog::apply_all(
      [&](const std::shared_ptr<spdlog::logger>& l) { l->set_level(s.current.for_subsystem(l->name())); });
  return ok();
}

}  // namespace atomr::log
