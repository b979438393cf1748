#include "atomr/cluster/doctor/sysfs.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace atomr::cluster::doctor {
namespace {

namespace fs = std::filesystem;

std::string read_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  return line;
}

double read_double(const fs::path& p) {
  const std::string s = read_line(p);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return end == s.c_str() ? 0 : v;
}

int read_int(const fs::path& p, int otherwise) {
  const std::string s = read_line(p);
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  return end == s.c_str() ? otherwise : static_cast<int>(v);
}

fs::path pci_path(const std::string& sysfs, std::string bus_id) {
  std::transform(bus_id.begin(), bus_id.end(), bus_id.begin(), [](unsigned char c) { return std::tolower(c); });
  return fs::path(sysfs) / "bus/pci/devices" / bus_id;
}

}  // namespace

int pcie_link::generation() const {
  if (max_speed_gts <= 0) return 0;
  int gen = 1;
  for (double rate = 2.5; rate * 1.5 < max_speed_gts && gen < 6; rate *= 2) ++gen;
  return gen;
}

double pcie_link::expected_gbps() const {
  const int gen = generation();
  if (gen == 0 || width <= 0) return 0;
  const double encoding = gen <= 2 ? 0.8 : gen <= 5 ? 128.0 / 130.0 : 242.0 / 256.0;
  return max_speed_gts * width * encoding / 8.0;
}

pcie_link read_pcie_link(const std::string& sysfs, const std::string& bus_id) {
  const auto dir = pci_path(sysfs, bus_id);
  pcie_link link;
  link.speed_gts = read_double(dir / "current_link_speed");
  link.width = read_int(dir / "current_link_width", 0);
  link.max_speed_gts = read_double(dir / "max_link_speed");
  link.max_width = read_int(dir / "max_link_width", 0);
  return link;
}

int read_pci_numa(const std::string& sysfs, const std::string& bus_id) {
  return read_int(pci_path(sysfs, bus_id) / "numa_node", -1);
}

std::vector<nic> read_nics(const std::string& sysfs) {
  std::vector<nic> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(sysfs) / "class/net", ec)) {
    const auto dir = entry.path();
    const std::string name = dir.filename().string();
    if (name == "lo" || read_line(dir / "operstate") != "up") continue;
    nic n;
    n.name = name;
    n.speed_mbps = std::max(0, read_int(dir / "speed", 0));
    n.physical = fs::exists(dir / "device");
    n.numa = n.physical ? read_int(dir / "device/numa_node", -1) : -1;
    out.push_back(n);
  }
  std::sort(out.begin(), out.end(), [](const nic& a, const nic& b) {
    if (a.physical != b.physical) return a.physical;
    if (a.speed_mbps != b.speed_mbps) return a.speed_mbps > b.speed_mbps;
    return a.name < b.name;
  });
  return out;
}

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    char* end = nullptr;
    const long lo = std::strtol(part.c_str(), &end, 10);
    if (end == part.c_str() || lo < 0) continue;
    long hi = lo;
    if (*end == '-') {
      char* end2 = nullptr;
      hi = std::strtol(end + 1, &end2, 10);
      if (end2 == end + 1 || hi < lo) continue;
    }
    for (long c = lo; c <= hi; ++c) cpus.push_back(static_cast<int>(c));
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::vector<int> numa_nodes_of(const std::string& sysfs, const std::vector<int>& cpus) {
  std::vector<int> nodes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(sysfs) / "devices/system/node", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4 ||
        !std::all_of(name.begin() + 4, name.end(), [](unsigned char c) { return std::isdigit(c); })) {
      continue;
    }
    const auto held = parse_cpu_list(read_line(entry.path() / "cpulist"));
    const bool any =
        std::any_of(cpus.begin(), cpus.end(), [&](int c) { return std::binary_search(held.begin(), held.end(), c); });
    if (any) nodes.push_back(std::atoi(name.c_str() + 4));
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace atomr::cluster::doctor
