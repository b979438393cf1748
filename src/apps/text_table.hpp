// A plain-text table with left-aligned columns sized to their widest cell, for CLI output.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace atomr::apps {

class text_table {
 public:
  explicit text_table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // Rows shorter than the header are padded with empty cells.
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void print(std::ostream& os) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// v with `digits` decimals: fixed(3.14159, 2) == "3.14".
std::string fixed(double v, int digits);

// 149795225600 -> "139.5 GiB"
std::string format_bytes(unsigned long long bytes);

}  // namespace atomr::apps
