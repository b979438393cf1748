// device_state: what buffer handles need to know about their device, shared between the device
// actor (which changes it) and every gpu_ref (which checks it on each use): the device id and
// kind, the current generation (bumped whenever the device's context is rebuilt), and whether it
// still accepts work. Watchers (the NCCL world, the P2P graph) are told of each new generation.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

#include "atomr/local/devices.hpp"

namespace atomr::local {

class device_state {
 public:
  device_state(int device, device_kind kind) : device_(device), kind_(kind) {}

  int device() const noexcept { return device_; }
  device_kind kind() const noexcept { return kind_; }
  std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }
  bool accepting() const noexcept { return accepting_.load(std::memory_order_acquire); }

  // Device actor only.
  void set_accepting(bool on) noexcept { accepting_.store(on, std::memory_order_release); }
  // Moves to the next generation and tells every watcher (on the calling thread).
  std::uint64_t bump_generation();

  // f(new_generation) after each rebuild, until unwatch(id). Callbacks must not block.
  std::uint64_t watch(std::function<void(std::uint64_t)> f);
  void unwatch(std::uint64_t id);

 private:
  const int device_;
  const device_kind kind_;
  std::atomic<std::uint64_t> generation_{1};
  std::atomic<bool> accepting_{true};
  std::mutex mutex_;
  std::uint64_t next_watch_ = 1;
  std::map<std::uint64_t, std::function<void(std::uint64_t)>> watchers_;
};

}  // namespace atomr::local
