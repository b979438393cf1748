// `atomr bench coll` (see bench_coll.cpp).
#pragma once

#include <string>
#include <vector>

namespace atomr::apps {

int run_bench_coll(const std::string& program, const std::vector<std::string>& args);
// bench_route.cpp, bench_fetch.cpp: the router and buffer-registry benchmarks (2 ranks).
int run_bench_route(const std::string& program, const std::vector<std::string>& args);
int run_bench_fetch(const std::string& program, const std::vector<std::string>& args);

}  // namespace atomr::apps
