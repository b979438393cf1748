// What every benchmark's JSON records about its run: when (UTC), which commit, where.
#pragma once

#include <chrono>
#include <ctime>
#include <string>

namespace atomr::apps {

inline std::string utc_now() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace atomr::apps
