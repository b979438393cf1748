// request_reaper: a thread of the world's own that frees finished requests, so that the progress
// thread does not. Freeing a request releases its buffers' references and its future's state, on
// lines the callers last wrote: on two H200s a call of 1000 x 2 KiB all_reduces spent 100-160 us
// of the progress thread's time freeing the call before's requests, while its own parts waited
// to be issued (docs/benchmarks.md, twenty-eighth session). Only where a rank has CPUs to spare
// (ATOMR_COLL_FREE_THREAD); elsewhere the progress thread frees them between its turns, as before.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm_backend.hpp"

namespace atomr::cluster::detail {

class request_reaper {
 public:
  // `avoid`: CPUs its thread keeps off where it may (the GPUs' interrupts).
  explicit request_reaper(std::vector<int> avoid);
  // Frees what it was given and has not freed yet, then stops.
  ~request_reaper();
  request_reaper(const request_reaper&) = delete;
  request_reaper& operator=(const request_reaper&) = delete;

  // Takes the first `n` requests of `from`. Their backend state must be released already (the
  // backends' pools are the issuing side's alone).
  void take(std::deque<std::unique_ptr<coll_request>>& from, std::size_t n);

  // Whether a world should have one: ATOMR_COLL_FREE_THREAD (auto: where the rank has 8 or more CPUs).
  static bool wanted();

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<coll_request>> pending_;
  bool sleeping_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace atomr::cluster::detail
