#include "atomr/local/topology/irq_cpus.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "atomr/local/devices.hpp"
#include "atomr/local/tunables.hpp"

namespace atomr::local {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view text) {
  std::set<int> out;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  std::size_t at = 0;
  while (at < text.size()) {
    const auto comma = std::min(text.find(',', at), text.size());
    const auto part = text.substr(at, comma - at);
    at = comma + 1;
    int lo = 0;
    int hi = 0;
    const auto dash = part.find('-');
    const auto first = dash == std::string_view::npos ? part : part.substr(0, dash);
    auto [p, e] = std::from_chars(first.data(), first.data() + first.size(), lo);
    if (e != std::errc() || p != first.data() + first.size() || lo < 0) return {};
    hi = lo;
    if (dash != std::string_view::npos) {
      const auto second = part.substr(dash + 1);
      auto [q, e2] = std::from_chars(second.data(), second.data() + second.size(), hi);
      if (e2 != std::errc() || q != second.data() + second.size() || hi < lo) return {};
    }
    // (A list longer than any machine's CPUs is not a CPU list.)
    if (hi >= CPU_SETSIZE) return {};
    for (int c = lo; c <= hi; ++c) out.insert(c);
  }
  return {out.begin(), out.end()};
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> interrupt_cpus(std::string_view source, const std::string& proc) {
  if (source.empty()) return {};
  const auto bus = lower(source);
  std::ifstream in(proc + "/interrupts");
  std::string header;
  if (!std::getline(in, header)) return {};
  std::size_t columns = 0;  // one count per CPU
  {
    std::istringstream h(header);
    std::string word;
    while (h >> word) columns += word.rfind("CPU", 0) == 0 ? 1 : 0;
  }
  std::vector<std::string> fired, all;
  std::string line;
  while (std::getline(in, line)) {
    if (lower(line).find(bus) == std::string::npos) continue;
    std::istringstream l(line);
    std::string irq;
    l >> irq;
    if (irq.empty() || irq.back() != ':') continue;
    irq.pop_back();
    unsigned long long total = 0;
    for (std::size_t c = 0; c < columns; ++c) {
      unsigned long long n = 0;
      if (!(l >> n)) break;
      total += n;
    }
    all.push_back(irq);
    if (total > 0) fired.push_back(irq);
  }
  if (fired.empty() && !all.empty()) fired.push_back(all.front());
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  std::set<int> out;
  for (const auto& irq : fired) {
    auto cpus = parse_cpu_list(first_line(proc + "/irq/" + irq + "/effective_affinity_list"));
    // Without an effective affinity, the allowed one says where it lands only if it is narrow.
    if (cpus.empty()) cpus = parse_cpu_list(first_line(proc + "/irq/" + irq + "/smp_affinity_list"));
    if (cpus.empty() || (online > 1 && static_cast<long>(cpus.size()) * 2 > online)) continue;
    out.insert(cpus.begin(), cpus.end());
  }
  return {out.begin(), out.end()};
}

std::vector<int> gpu_interrupt_cpus(const std::vector<std::string>& pci_bus_ids, const std::string& proc) {
  std::set<int> out;
  for (const auto& id : pci_bus_ids) {
    for (int c : interrupt_cpus(id, proc)) out.insert(c);
  }
  for (int c : interrupt_cpus("nvidia", proc)) out.insert(c);
  return {out.begin(), out.end()};
}

std::vector<int> cpus_to_avoid() {
  if (tunable_value(tunables::avoid_irq_cpus) == "0") return {};
  auto probe = probe_cuda_devices();
  if (!probe || probe->devices.empty()) return {};
  std::vector<std::string> ids;
  for (const auto& d : probe->devices) ids.push_back(d.pci_bus_id);
  return gpu_interrupt_cpus(ids);
}

std::vector<int> avoid_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return {};
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return {};
  std::vector<int> taken;
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE && CPU_ISSET(c, &set)) taken.push_back(c);
  }
  if (taken.empty() || static_cast<int>(taken.size()) >= CPU_COUNT(&set)) return {};
  for (int c : taken) CPU_CLR(c, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) return {};
  return taken;
}

}  // namespace atomr::local
