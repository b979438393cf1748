// Which buffers a batch of requests issued together writes and reads: requests that go in one
// group or pack must not touch each other's buffers (those must run one after the other).
// Scratch of one look over the queue, on the issuing thread.
#pragma once

#include "atomr/cluster/coll_spec.hpp"
#include "atomr/common/pointer_set.hpp"

namespace atomr::cluster::detail {

class buffer_use {
 public:
  // `expected`: about how many buffers the batch will hold.
  explicit buffer_use(std::size_t expected) {
    written_.reset(expected);
    read_.reset(expected);
  }
  // Adds a request's buffers; false (nothing added) where it touches the batch's.
  bool try_add(const coll_spec& s) {
    // In place (one buffer, read and written): a write covers every later check of it.
    if (s.recv.size() == 1 && s.send.size() == 1 && s.recv[0] == s.send[0]) {
      const auto* b = s.recv[0].get();
      if (written_.contains(b) || read_.contains(b)) return false;
      written_.insert(b);
      return true;
    }
    for (const auto& b : s.recv) {
      if (written_.contains(b.get()) || read_.contains(b.get())) return false;
    }
    for (const auto& b : s.send) {
      if (written_.contains(b.get())) return false;
    }
    for (const auto& b : s.recv) written_.insert(b.get());
    for (const auto& b : s.send) read_.insert(b.get());
    return true;
  }
  void clear() {
    written_.clear();
    read_.clear();
  }

 private:
  pointer_set written_;
  pointer_set read_;
};

// Whether `later` writes a buffer `earlier` uses, or uses one `earlier` writes.
inline bool conflicts(const coll_spec& earlier, const coll_spec& later) {
  auto in = [](const auto& blocks, const local::buffer_block* b) {
    for (const auto& x : blocks) {
      if (x.get() == b) return true;
    }
    return false;
  };
  for (const auto& b : later.recv) {
    if (in(earlier.recv, b.get()) || in(earlier.send, b.get())) return true;
  }
  for (const auto& b : later.send) {
    if (in(earlier.recv, b.get())) return true;
  }
  return false;
}

}  // namespace atomr::cluster::detail
