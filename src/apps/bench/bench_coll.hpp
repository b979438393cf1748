// `atomr bench coll` (see bench_coll.cpp).
#pragma once

#include <string>
#include <vector>

namespace atomr::apps {

int run_bench_coll(const std::string& program, const std::vector<std::string>& args);

}  // namespace atomr::apps
