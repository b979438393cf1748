#include "text_table.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

namespace atomr::apps {

void text_table::print(std::ostream& os) const {
  std::vector<std::size_t> width(headers_.size());
  for (std::size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string& cell = c < cells.size() ? cells[c] : std::string();
      out += cell;
      if (c + 1 < width.size()) out.append(width[c] - cell.size() + 2, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    os << out << '\n';
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
}

std::string format_bytes(unsigned long long bytes) {
  static constexpr std::array<const char*, 5> units{"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t u = 0;
  while (value >= 1024.0 && u + 1 < units.size()) {
    value /= 1024.0;
    ++u;
  }
  std::array<char, 32> buf{};
  std::snprintf(buf.data(), buf.size(), u == 0 ? "%.0f %s" : "%.1f %s", value, units[u]);
  return buf.data();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace atomr::apps
