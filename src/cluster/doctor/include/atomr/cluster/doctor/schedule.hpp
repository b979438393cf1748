// The order in which the doctor measures every pair of ranks: a round-robin tournament (the circle
// method). Each round pairs every rank with at most one other, so a pair's numbers are never
// shared with a second transfer of either rank; P ranks take P-1 rounds (P rounds when P is odd,
// each rank sitting out one of them), and every pair meets exactly once.
#pragma once

#include <utility>
#include <vector>

namespace atomr::cluster::doctor {

// rounds[r] holds round r's pairs (a, b) with a < b.
using round_pairs = std::vector<std::pair<int, int>>;
std::vector<round_pairs> tournament(int ranks);

// `rank`'s partner in `round` of a `ranks`-rank tournament; -1 for its bye (or a round it is not in).
int partner_in(const std::vector<round_pairs>& rounds, int round, int rank);

}  // namespace atomr::cluster::doctor
