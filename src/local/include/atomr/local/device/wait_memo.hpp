// The last few events a queue (a device's stream, a communicator's stream) waited on. Many
// operations in a row read a buffer written once elsewhere; after the first wait the queue's own
// order covers the rest, so later waits on the same event are skipped. Holding the events keeps
// their pool from recycling them, so equal pointers mean the same recorded work.
// One thread only (the queue's owner).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>

namespace atomr::local {

class wait_memo {
 public:
  bool seen(const std::shared_ptr<void>& event) const {
    return event && std::find(events_.begin(), events_.end(), event) != events_.end();
  }
  void remember(std::shared_ptr<void> event) { events_[next_++ % events_.size()] = std::move(event); }
  void clear() { events_ = {}; }

 private:
  std::array<std::shared_ptr<void>, 4> events_{};
  std::size_t next_ = 0;
};

}  // namespace atomr::local
