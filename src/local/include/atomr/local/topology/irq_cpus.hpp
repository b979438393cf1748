// Which CPUs take a PCI device's interrupts, from /proc/interrupts and /proc/irq/<n>/. A GPU
// raises one each time a CUDA graph launch completes (an eager NCCL call raises none), and on KVM
// guests handling it stalls whatever thread runs on that CPU for 35-45 us: a polling thread there
// sees its collective finish that much late. Spinning threads keep off these CPUs (avoid_cpus).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace atomr::local {

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; nothing for text that is not such a list.
std::vector<int> parse_cpu_list(std::string_view text);
// The other way: sorted CPUs -> "0-3,8,10-11" ("" for none).
std::string cpu_list_text(const std::vector<int>& cpus);

// The CPUs that took the interrupts whose /proc/interrupts line names `source` (any case): a
// device's PCI address ("0000:3b:00.0") or a driver ("nvidia"). The effective affinity of each
// such vector that has fired (the first one where none has yet). `proc` is the proc file system's
// root (tests pass a directory of their own). Empty where it cannot tell (nothing listed, no
// /proc, an affinity that is the whole machine).
std::vector<int> interrupt_cpus(std::string_view source, const std::string& proc = "/proc");

// The CPUs that take GPU interrupts on this machine: those of the devices at `pci_bus_ids` and
// those of every vector of the NVIDIA driver that has fired. Every rank avoids them all: a GPU's
// interrupt stalls whatever thread runs on its CPU, another rank's as much as its own.
std::vector<int> gpu_interrupt_cpus(const std::vector<std::string>& pci_bus_ids, const std::string& proc = "/proc");

// The CPUs a world's threads keep off here: gpu_interrupt_cpus of the CUDA devices this process
// sees, unless ATOMR_AVOID_IRQ_CPUS=0; none where it sees no GPU.
std::vector<int> cpus_to_avoid();

// Takes `cpus` out of the calling thread's CPU affinity where what is left is not empty; returns
// the CPUs it took out (none where it changed nothing).
std::vector<int> avoid_cpus(const std::vector<int>& cpus);

}  // namespace atomr::local
