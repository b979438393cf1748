#include <condition_variable>
#include <exception>
#include <list>
#include <mutex>
#include <thread>

#include "atomr/cluster/nccl/retire.hpp"
#include "atomr/cluster/nccl_check.hpp"
#include "atomr/common/log.hpp"

namespace atomr::cluster::detail {
namespace {

class retirer {
 public:
  // Joined at exit: a function-local static made after CUDA and NCCL were first used, so it goes
  // before their own exit-time teardown.
  ~retirer() {
    wait();
    // Joined without the lock: a thread that has counted its last communicator down still takes
    // it once more to say it is done. (A list's swap keeps its elements where the threads see them.)
    std::list<retiring> left;
    {
      std::lock_guard lock(mutex_);
      left.swap(threads_);
    }
    for (auto& t : left) t.thread.join();
  }

  void retire(const std::vector<retired_comm>& comms) {
    {
      std::lock_guard lock(mutex_);
      join_finished();
      try {
        auto& t = threads_.emplace_back();
        t.thread = std::thread([this, &t, comms] {
          for (const auto& c : comms) {
            destroy(c);
            std::lock_guard held(mutex_);
            --pending_;
          }
          {
            std::lock_guard held(mutex_);
            t.done = true;
          }
          drained_.notify_all();
        });
        pending_ += comms.size();  // (the thread waits for this lock before it counts down)
        return;
      } catch (const std::exception& e) {
        if (!threads_.empty() && !threads_.back().thread.joinable()) threads_.pop_back();
        log::get("cluster")->warn("no thread to destroy {} NCCL communicators on ({}): destroying them here",
                                  comms.size(), e.what());
      }
    }
    for (const auto& c : comms) destroy(c);
  }

  void wait() {
    std::unique_lock lock(mutex_);
    drained_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  static void destroy(const retired_comm& c) {
    // (ncclCommDestroy sets the communicator's device itself.)
    if (auto r = ATOMR_NCCL_CHECK(ncclCommDestroy(c.comm)); !r) {
      log::get("cluster")->error("rank {}, GPU {}: letting go of a finalized communicator: {}", c.rank, c.device,
                                 r.error_value().describe());
    }
  }
  struct retiring {
    std::thread thread;
    bool done = false;
  };
  // Joins threads that have finished (quick: they have returned). Under mutex_.
  void join_finished() {
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (it->done) {
        it->thread.join();
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable drained_;
  std::list<retiring> threads_;  // (a list: each thread refers to its own element)
  std::size_t pending_ = 0;
};

retirer& the_retirer() {
  static retirer r;
  return r;
}

}  // namespace

void retire_nccl_comms(const std::vector<retired_comm>& comms) {
  if (!comms.empty()) the_retirer().retire(comms);
}
void wait_retired_nccl_comms() { the_retirer().wait(); }

}  // namespace atomr::cluster::detail
