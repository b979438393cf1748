#include "atomr/cluster/mpi/agree_settings.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "atomr/cluster/mpi/wait.hpp"
#include "atomr/cluster/mpi_check.hpp"

namespace atomr::cluster::detail {

namespace {

using clock = std::chrono::steady_clock;
constexpr std::size_t k_value_max = 64;  // bytes per value on the wire, the last one 0

std::uint64_t fnv1a(const std::vector<char>& bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

// "0, 2-3, 7": ranks in order, runs joined.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

result<void> agree_settings(MPI_Comm comm, std::span<const tunable* const> tunables, clock::time_point deadline,
                            const std::string& step) {
  std::vector<setting> settings;
  for (const tunable* t : tunables) settings.push_back({std::string(t->env), tunable_value(*t)});
  return agree_settings(comm, settings, deadline, step);
}

result<void> agree_settings(MPI_Comm comm, std::span<const setting> settings, clock::time_point deadline,
                            const std::string& step) {
  std::vector<char> mine(settings.size() * k_value_max, '\0');
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const std::string& v = settings[i].value;
    std::memcpy(&mine[i * k_value_max], v.data(), std::min(v.size(), k_value_max - 1));
  }
  // Whether all agree: the highest and the lowest fingerprint in one all_reduce (log P rounds).
  // Only when they differ do the ranks gather every value, to name who differs.
  const std::uint64_t h = fnv1a(mine);
  std::uint64_t range[2] = {h, ~h};
  {
    MPI_Request q = MPI_REQUEST_NULL;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, range, 2, MPI_UINT64_T, MPI_MAX, comm, &q)));
    ATOMR_TRY(wait_mpi(q, deadline, step + " (comparing settings)"));
  }
  if (range[0] == ~range[1]) return ok();
  int size = 0;
  ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Comm_size(comm, &size)));
  std::vector<char> all(mine.size() * static_cast<std::size_t>(size));
  {
    MPI_Request q = MPI_REQUEST_NULL;
    const int n = static_cast<int>(mine.size());
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Iallgather(mine.data(), n, MPI_CHAR, all.data(), n, MPI_CHAR, comm, &q)));
    ATOMR_TRY(wait_mpi(q, deadline, step + " (naming the settings that differ)"));
  }
  std::string why;
  for (std::size_t i = 0; i < settings.size(); ++i) {
    std::map<std::string, std::vector<int>> ranks_by_value;
    for (int r = 0; r < size; ++r) {
      const char* v = &all[static_cast<std::size_t>(r) * mine.size() + i * k_value_max];
      ranks_by_value[std::string(v, strnlen(v, k_value_max))].push_back(r);
    }
    if (ranks_by_value.size() < 2) continue;
    // The fewest ranks first: most often the one rank set apart from the rest.
    std::vector<std::pair<std::string, std::vector<int>>> groups(ranks_by_value.begin(), ranks_by_value.end());
    std::stable_sort(groups.begin(), groups.end(),
                     [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    std::string line = settings[i].name + " must be the same on every rank:";
    for (const auto& [value, ranks] : groups) {
      line += (&value == &groups.front().first ? " '" : ", '") + value + "' on rank" + (ranks.size() > 1 ? "s " : " ") +
              rank_list(ranks);
    }
    why += (why.empty() ? "" : "; ") + line;
  }
  return error(errc::invalid_argument, step + ": " + why);
}

}  // namespace atomr::cluster::detail
