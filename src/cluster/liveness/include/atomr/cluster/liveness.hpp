// Liveness: ranks send each other heartbeats on a communicator of their own, so that a rank that
// goes silent (stopped, hung, a dead node) or exits without finishing is noticed by the others
// and named in their errors: "rank 1 (node vm, pid 1234) has not answered for 3.0 s", "rank 1
// (node vm, pid 1234) exited".
//
// The ranks form a ring: each sends a heartbeat to the next rank every period and watches the one
// before it. The watcher of a silent rank tells every rank, and by default every rank then logs
// the culprit and ends the job with MPI_Abort (ATOMR_ON_FAILURE=abort), so a job never hangs on a
// stopped rank until its time limit. ATOMR_ON_FAILURE=continue keeps the survivors running: they
// log the failure, skip the dead rank in the ring and report it in failed_ranks(); requests
// pending on a world, router or buffer registry that includes it fail at once, naming it; and
// world::shrink() builds a new world of the living ranks to go on with.
//
// A rank that finishes says goodbye first, so the others stop expecting it, and keeps watching
// until every other rank has said goodbye or failed (leave()): the session calls MPI_Finalize only
// then, so a rank that stops while the others are leaving is named and ends the job instead of
// holding them in MPI_Finalize. After a fatal failure of this rank's collectives (a timeout, an
// abort: note_fatal_failure()) that wait is bounded by the heartbeat timeout, so a rank that is
// stuck but still beating is named too ("did not finish within ..."). A rank that exits without
// finishing (exit(1) before the session ends) tells the others from an atexit handler.
// Started by mpi_session when it initializes MPI itself (ATOMR_HEARTBEAT_MS > 0); tunables:
// ATOMR_HEARTBEAT_MS (period), ATOMR_HEARTBEAT_TIMEOUT_MS, ATOMR_ON_FAILURE.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "atomr/cluster/node_identity.hpp"
#include "atomr/common/result.hpp"

namespace atomr::cluster {

enum class on_failure { abort, keep_going };

// Who else hears of a failed rank: f(rank, text) runs on the liveness thread when a rank is
// declared failed (before the job is ended, under ATOMR_ON_FAILURE=abort). The router and the
// buffer registry listen, so nothing waits on a dead rank until its deadline. f must not block.
std::uint64_t add_failure_listener(std::function<void(int, const std::string&)> f);
// The same for a communicator of the caller's: f(rank in comm, text), only for ranks of comm
// (liveness names ranks of MPI_COMM_WORLD; a router or registry on a sub-communicator must not
// fail the peer that merely has the same number).
result<std::uint64_t> add_failure_listener(MPI_Comm comm, std::function<void(int, const std::string&)> f);
void remove_failure_listener(std::uint64_t id);

// Something fatal happened to this rank's part of the job (a collective timed out, a world was
// aborted): remembered (the first text) so that leave() waits for the other ranks only a bounded
// time. Any thread; cheap.
void note_fatal_failure(const std::string& text);
// A new world was created after it (the program recovered: a rebuilt device, a retry): forgets it.
void clear_fatal_failure();

// The ranks of MPI_COMM_WORLD that this process's liveness has declared failed so far, in the
// order it heard of them (empty without liveness, or before any failure).
std::vector<int> failed_world_ranks();

struct liveness_options {
  std::chrono::milliseconds period{500};
  std::chrono::milliseconds timeout{10'000};
  on_failure policy = on_failure::abort;
  // From ATOMR_HEARTBEAT_MS, ATOMR_HEARTBEAT_TIMEOUT_MS and ATOMR_ON_FAILURE (a bad value is an
  // error naming the variable); a period of 0 turns liveness off (nullopt).
  static result<std::optional<liveness_options>> from_environment();
};

class liveness {
 public:
  // Collective over `world` (it duplicates the communicator; the ranks then introduce themselves to
  // their watchers point to point, so the cost does not grow with the rank count). Starts the
  // heartbeat thread.
  static result<std::unique_ptr<liveness>> start(MPI_Comm world, const node_identity& me, liveness_options options);
  // Says goodbye (the others stop watching this rank) and waits, still watching, until every
  // other rank has said goodbye or failed. The goodbyes go up a binomial tree (a rank reports to
  // its parent once it and its subtree have left; rank 0 then sends "all left" down the tree) and
  // to the rank that watches this one: O(log P) messages per rank, not a goodbye to every rank.
  // Once a rank has failed (or this rank's collectives failed, note_fatal_failure) the tree cannot
  // be relied on, and every rank also says goodbye to every rank. Under ATOMR_ON_FAILURE=abort a rank found failed
  // meanwhile ends the job; after note_fatal_failure() the wait is bounded by the heartbeat
  // timeout (twice that on ranks that do not watch a stuck rank: its watcher knows its pid), and
  // then this rank ends the job naming the ranks that did not finish. Called once,
  // by the session before MPI_Finalize.
  void leave();
  // Says goodbye if leave() did not, and stops the thread.
  ~liveness();
  liveness(const liveness&) = delete;
  liveness& operator=(const liveness&) = delete;

  // Messages this rank sent to leave (goodbyes, tree reports, "all left"), for tests.
  std::uint64_t leave_messages() const { return leave_messages_.load(); }
  // Ranks found dead so far (with ATOMR_ON_FAILURE=continue), and why.
  std::vector<std::pair<int, std::string>> failed_ranks() const;
  // "rank 3 (node n1, pid 1234)" for this rank and the ranks it has watched; "rank 3" for others.
  std::string describe(int rank) const;

 private:
  liveness(MPI_Comm comm, int rank, int size, liveness_options options, std::string name);
  void introduce();  // sends this rank's name to its successor (the rank that watches it)
  void run();
  // To every rank but this one: `culprit` and `text`.
  void send_all(int tag, int culprit, const std::string& text);
  // Waits (bounded) until MPI has sent what was sent; false if it has not by then.
  bool flush(std::chrono::milliseconds limit);
  // Takes in every message that has arrived: heartbeats, goodbyes, names and failure notices.
  void read_messages(std::vector<char>& buffer);
  // Names the watched rank (the predecessor) if it has been silent for longer than the timeout.
  void judge_predecessor();
  void handle_failure(int culprit, const std::string& text);
  // After this rank's watcher did not run for `gap` (stopped, or starved): every peer's clock restarts.
  void forgive_own_pause(std::chrono::steady_clock::duration gap, std::chrono::steady_clock::time_point now);
  // While leaving: tells leave() once every other rank has left or failed, or ends the job when
  // the bound set after a fatal failure has passed.
  void watch_the_leaving();
  int neighbour(int step) const;  // the next (+1) or previous (-1) rank not failed
  // To `to`, a message of one byte under `tag` (a leaving message: counted).
  void send_byte(int to, int tag);
  // Goodbyes to every rank: once the tree cannot be relied on (a failure).
  void say_goodbye_to_all();
  friend void liveness_at_exit();

  MPI_Comm comm_;
  int rank_;
  int size_;
  liveness_options options_;
  std::string name_;  // this rank's "rank r (node h, pid p)"
  mutable std::mutex names_mutex_;
  std::unordered_map<int, std::string> names_;  // of the ranks that introduced themselves
  int successor_ = -1;                          // the rank last introduced to
  std::vector<std::chrono::steady_clock::time_point> last_heard_;
  std::vector<char> gone_;  // failed: out of the ring (not watched, not sent to)
  bool expelled_ = false;   // the others named this rank failed (watcher thread only)
  // Said goodbye: still in the ring (it beats and watches until every rank has left, so the
  // ranks behind it stay watched), but its own silence is no failure.
  std::vector<char> left_;
  mutable std::mutex failed_mutex_;
  std::vector<std::pair<int, std::string>> failed_;
  std::vector<std::unique_ptr<std::string>> outgoing_;  // kept until MPI is done with them
  std::vector<MPI_Request> sends_;
  std::mutex send_mutex_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> leaving_{false};  // goodbye sent
  std::mutex left_mutex_;
  std::condition_variable left_cv_;
  bool everyone_left_ = false;  // every other rank said goodbye or failed (under left_mutex_)
  // The leaving tree (binomial, rooted at rank 0): parent (-1 at the root), children, and which
  // children have reported that their subtree left; "all left" seen or made (at the root).
  int parent_ = -1;
  std::vector<int> children_;
  std::vector<char> child_left_;
  bool reported_up_ = false;
  bool tree_all_left_ = false;
  bool sent_down_ = false;
  std::atomic<bool> flat_{false};  // a failure: goodbyes go to every rank too
  std::atomic<std::uint64_t> leave_messages_{0};
  std::optional<std::chrono::steady_clock::time_point> leave_by_;  // after a fatal failure
  std::string leave_cause_;                                        // that failure
  std::thread thread_;
};

}  // namespace atomr::cluster
