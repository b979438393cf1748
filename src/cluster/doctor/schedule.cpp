#include "atomr/cluster/doctor/schedule.hpp"

#include <algorithm>

namespace atomr::cluster::doctor {

std::vector<round_pairs> tournament(int ranks) {
  if (ranks < 2) return {};
  // An odd count gets a ghost rank; whoever meets it sits the round out.
  const int n = ranks + ranks % 2;
  const int ghost = ranks % 2 ? n - 1 : -1;
  std::vector<round_pairs> rounds(static_cast<std::size_t>(n - 1));
  for (int r = 0; r < n - 1; ++r) {
    auto& pairs = rounds[static_cast<std::size_t>(r)];
    // Rank n-1 stays put; the others turn one place a round around it.
    for (int i = 0; i < n / 2; ++i) {
      const int a = (r + i) % (n - 1);
      const int b = i == 0 ? n - 1 : (r - i + (n - 1)) % (n - 1);
      if (a == ghost || b == ghost) continue;
      pairs.emplace_back(std::min(a, b), std::max(a, b));
    }
    std::sort(pairs.begin(), pairs.end());
  }
  return rounds;
}

int partner_in(const std::vector<round_pairs>& rounds, int round, int rank) {
  if (round < 0 || round >= static_cast<int>(rounds.size())) return -1;
  for (const auto& [a, b] : rounds[static_cast<std::size_t>(round)]) {
    if (a == rank) return b;
    if (b == rank) return a;
  }
  return -1;
}

}  // namespace atomr::cluster::doctor
