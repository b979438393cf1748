// The latency window: when the plan exchanges of small all_reduces keep covering one request
// each, the ranks stop exchanging for a while and issue each request alone. Every input is what
// every rank sees alike (lone exchanges, finished in the same order everywhere), so all ranks
// decide alike without asking each other. Owned by the issuing side of a world_engine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>

namespace atomr::cluster::detail {

// A latency-bound caller (one small all_reduce at a time, each waited for) offers one request
// per exchange, and an exchange per request costs it microseconds. When every rank offered just
// one, k_lone_run times in a row, the ranks skip the exchange for the k_length requests that
// start two after the last of them: each rank decides request T from the exchanges headed at
// T-2 or earlier, which every rank has finished before deciding (it waits for them), so all
// decide alike. A burst that arrives in such a window issues up to k_length requests unpacked
// before packing resumes.
class latency_window {
 public:
  // Requests after a lone exchange that skip the exchange. Each window costs two exchanges (an
  // MPI_Iallreduce with a user operation each, 2-4 us of MPI progress) and one wait for the
  // first: with 16, that is 0.2-0.4 us on every 8 B all_reduce of a latency-bound caller on an
  // H100 with 16 vCPUs. A burst that starts inside a window issues up to this many requests
  // unpacked before packing resumes (1-3 us each).
  static constexpr std::uint64_t k_length = 64;
  // Lone exchanges on consecutive requests before a window opens (then one right where the last
  // window ended keeps them open). A burst of requests, each by a call of its own, that begins at
  // an idle engine has its first one or two requests alone, then a queue: with a window after
  // the first lone exchange, the next 64 went out one by one (the host backend's many-small row
  // on 2 cores, 4-5 us each, about a third of the burst's time). A caller that waits for each
  // request offers one every time and pays two exchanges more, once.
  static constexpr std::uint32_t k_lone_run = 3;
  // How far behind an exchange's head the first request it decides is.
  static constexpr std::uint64_t k_lag = 2;

  // An exchange headed at request `seq`, in which every rank offered one request, finished.
  // (Called in the order the exchanges finish, which is the same on every rank.)
  void note_lone(std::uint64_t seq) {
    const bool after_window = window_end_ != 0 && seq == window_end_;
    lone_run_ = (lone_run_ > 0 && last_lone_ + 1 == seq) || after_window ? lone_run_ + 1 : 1;
    last_lone_ = seq;
    if (lone_run_ >= k_lone_run || after_window) {
      lone_heads_.push_back(seq);
      window_end_ = seq + k_lag + k_length;
    }
  }
  // Forgets the windows that end at or before request `seq` (requests come in order).
  void forget_before(std::uint64_t seq) {
    while (!lone_heads_.empty() && lone_heads_.front() + k_lag + k_length <= seq) lone_heads_.pop_front();
  }
  // Whether request `seq` skips its exchange. (The caller makes sure every exchange headed at
  // seq - k_lag or earlier is finished.)
  bool covers(std::uint64_t seq) const {
    for (const auto head : lone_heads_) {
      if (head < closed_before_) continue;
      if (head + k_lag <= seq && seq < head + k_lag + k_length) return true;
    }
    return false;
  }
  // Exchanges headed before request `seq` open no window any more: a per-request group met the
  // window on some rank (see world_engine's graph votes), and its requests pack instead.
  void close_before(std::uint64_t seq) { closed_before_ = std::max(closed_before_, seq); }
  // After a failure: no window is open, and no run of lone exchanges counts.
  void reset() {
    lone_heads_.clear();
    lone_run_ = 0;
    window_end_ = 0;
  }

 private:
  std::deque<std::uint64_t> lone_heads_;  // lone exchanges that open a window, oldest first
  // The run of lone exchanges on consecutive requests that opens a window, and where the last
  // window opened ends.
  std::uint64_t last_lone_ = 0;
  std::uint32_t lone_run_ = 0;
  std::uint64_t window_end_ = 0;
  std::uint64_t closed_before_ = 0;
};

}  // namespace atomr::cluster::detail
