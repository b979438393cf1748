#include "atomr/cluster/liveness.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "atomr/cluster/liveness/tunables.hpp"
#include "atomr/cluster/mpi_check.hpp"
#include "atomr/common/log.hpp"

namespace atomr::cluster {
namespace {

using clock = std::chrono::steady_clock;

constexpr int k_heartbeat_tag = 0x4c01;
constexpr int k_goodbye_tag = 0x4c02;
constexpr int k_notice_tag = 0x4c03;
constexpr int k_name_tag = 0x4c04;          // "rank r (node h, pid p)", to the rank that watches the sender
constexpr int k_subtree_left_tag = 0x4c05;  // to the tree parent: this rank and its subtree have left
constexpr int k_all_left_tag = 0x4c06;      // down the tree: every rank has left
constexpr int k_notice_max = 4096;          // a notice is the culprit's rank and one line of text

// The running liveness, for the atexit handler (a rank that exits without finishing).
std::atomic<liveness*> g_live{nullptr};

// The first fatal failure of this process's collectives (note_fatal_failure).
struct fatal_note {
  std::mutex mutex;
  std::optional<std::string> text;
};
fatal_note& fatal() {
  // Never destroyed: the atexit handler reads it after static destructors registered later ran.
  static auto* f = new fatal_note;
  return *f;
}
std::optional<std::string> fatal_failure_text() {
  auto& f = fatal();
  std::lock_guard lock(f.mutex);
  return f.text;
}

result<std::chrono::milliseconds> non_negative_ms(const tunable& t) {
  ATOMR_ASSIGN_OR_RETURN(const auto v, tunable_int(t));
  if (v < 0) return error(errc::invalid_argument, std::string(t.env) + " must not be negative");
  return std::chrono::milliseconds(v);
}

}  // namespace

void liveness_at_exit() {
  liveness* l = g_live.exchange(nullptr);
  if (l == nullptr || l->stopping_) return;
  // Exiting without the session's end: tell the others, so they name this rank (the launcher
  // may kill them soon after, so this is best effort, bounded).
  const auto cause = fatal_failure_text();
  l->send_all(k_notice_tag, l->rank_, l->name_ + " exited" + (cause ? " after: " + *cause : std::string()));
  l->flush(std::chrono::milliseconds(300));
}

void note_fatal_failure(const std::string& text) {
  auto& f = fatal();
  std::lock_guard lock(f.mutex);
  if (!f.text) f.text = text;
}

void clear_fatal_failure() {
  auto& f = fatal();
  std::lock_guard lock(f.mutex);
  f.text.reset();
}

result<std::optional<liveness_options>> liveness_options::from_environment() {
  liveness_options o;
  ATOMR_ASSIGN_OR_RETURN(o.period, non_negative_ms(tunables::heartbeat));
  if (o.period.count() == 0) return std::optional<liveness_options>();
  ATOMR_ASSIGN_OR_RETURN(o.timeout, non_negative_ms(tunables::heartbeat_timeout));
  if (o.timeout <= o.period) {
    return error(errc::invalid_argument, "ATOMR_HEARTBEAT_TIMEOUT_MS must be longer than ATOMR_HEARTBEAT_MS");
  }
  const auto policy = tunable_value(tunables::on_failure);
  if (policy == "abort") {
    o.policy = on_failure::abort;
  } else if (policy == "continue") {
    o.policy = on_failure::keep_going;
  } else {
    return error(errc::invalid_argument, "ATOMR_ON_FAILURE must be abort or continue, not '" + policy + "'");
  }
  return std::optional<liveness_options>(o);
}

result<std::unique_ptr<liveness>> liveness::start(MPI_Comm world, const node_identity& me, liveness_options options) {
  ATOMR_ASSIGN_OR_RETURN(const own_comm own, duplicate_comm(world));
  const int rank = own.rank;
  const int size = own.size;
  const std::string name = "rank " + std::to_string(rank) + " (node " + me.hostname + ", pid " +
                           std::to_string(static_cast<int>(::getpid())) + ")";
  // Each rank names itself to the rank that watches it (its successor in the ring) before anyone
  // may fail: one message each way, whatever the rank count (a rank stopped right after start must
  // still be named by its watcher).
  std::string watched;
  if (size > 1) {
    std::vector<char> in(k_notice_max);
    MPI_Status status;
    ATOMR_TRY(ATOMR_MPI_CHECK(MPI_Sendrecv(name.data(), static_cast<int>(name.size()), MPI_BYTE, (rank + 1) % size,
                                           k_name_tag, in.data(), k_notice_max, MPI_BYTE, (rank + size - 1) % size,
                                           k_name_tag, own.comm, &status)));
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    watched.assign(in.data(), static_cast<std::size_t>(std::clamp(count, 0, k_notice_max)));
  }
  std::unique_ptr<liveness> l(new liveness(own.comm, rank, size, options, name));
  if (size > 1) {
    std::lock_guard lock(l->names_mutex_);  // (the heartbeat thread is running)
    l->names_[(rank + size - 1) % size] = std::move(watched);
  }
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(liveness_at_exit); });
  g_live.store(l.get());
  return l;
}

liveness::liveness(MPI_Comm comm, int rank, int size, liveness_options options, std::string name)
    : comm_(comm),
      rank_(rank),
      size_(size),
      options_(options),
      name_(std::move(name)),
      successor_(size > 1 ? (rank + 1) % size : rank),
      last_heard_(static_cast<std::size_t>(size), clock::now()),
      gone_(static_cast<std::size_t>(size), 0),
      left_(static_cast<std::size_t>(size), 0) {
  // Binomial tree: the parent clears the lowest set bit; the children add the powers of two below it.
  if (rank_ > 0) parent_ = rank_ & (rank_ - 1);
  const int below = rank_ == 0 ? size_ : (rank_ & -rank_);
  for (int step = 1; step < below && rank_ + step < size_; step <<= 1) children_.push_back(rank_ + step);
  child_left_.assign(children_.size(), 0);
  if (size_ > 1) thread_ = std::thread([this] { run(); });
}

void liveness::leave() {
  if (leaving_.load() || !thread_.joinable()) return;
  if (options_.policy == on_failure::abort) {
    if (auto text = fatal_failure_text()) {
      std::lock_guard lock(left_mutex_);
      leave_by_ = clock::now() + options_.timeout;
      leave_cause_ = std::move(*text);
    }
  }
  // Goodbye to the rank that watches this one (it stops watching); the tree reports follow from
  // the thread. After a failure (or a fatal one of this rank's collectives, which a failed rank
  // may be behind) goodbyes go to every rank as well. handle_failure() does the same: whichever
  // of the two sees the other's flag, at least one says goodbye to all.
  {
    std::lock_guard lock(left_mutex_);
    if (leave_by_) flat_ = true;
  }
  send_byte(neighbour(+1), k_goodbye_tag);
  leaving_ = true;
  if (flat_) say_goodbye_to_all();
  std::unique_lock lock(left_mutex_);
  left_cv_.wait(lock, [this] { return everyone_left_; });
}

void liveness::send_byte(int to, int tag) {
  static const char byte = 0;
  if (to == rank_) return;
  std::lock_guard lock(send_mutex_);
  MPI_Request q = MPI_REQUEST_NULL;
  // Best effort, like every liveness message: a rank that misses it is covered by the watch.
  if (MPI_Isend(&byte, 1, MPI_BYTE, to, tag, comm_, &q) == MPI_SUCCESS) sends_.push_back(q);
  leave_messages_.fetch_add(1);
}

void liveness::say_goodbye_to_all() {
  send_all(k_goodbye_tag, rank_, "");
  leave_messages_.fetch_add(static_cast<std::uint64_t>(size_ - 1));
}

liveness::~liveness() {
  liveness* self = this;
  g_live.compare_exchange_strong(self, nullptr);
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (!leaving_) send_all(k_goodbye_tag, rank_, "");
  // (Unsent messages keep the communicator: MPI must not free it under them.)
  if (flush(std::chrono::seconds(1))) MPI_Comm_free(&comm_);
}

std::vector<std::pair<int, std::string>> liveness::failed_ranks() const {
  std::lock_guard lock(failed_mutex_);
  return failed_;
}

std::string liveness::describe(int rank) const {
  if (rank == rank_) return name_;
  std::lock_guard lock(names_mutex_);
  const auto it = names_.find(rank);
  return it != names_.end() ? it->second : "rank " + std::to_string(rank);
}

void liveness::introduce() {
  successor_ = neighbour(+1);
  if (successor_ == rank_) return;
  std::lock_guard lock(send_mutex_);
  MPI_Request q = MPI_REQUEST_NULL;
  if (MPI_Isend(name_.data(), static_cast<int>(name_.size()), MPI_BYTE, successor_, k_name_tag, comm_, &q) ==
      MPI_SUCCESS) {
    sends_.push_back(q);
  }
}

int liveness::neighbour(int step) const {
  int r = rank_;
  for (int i = 1; i < size_; ++i) {
    r = (r + step + size_) % size_;
    if (!gone_[static_cast<std::size_t>(r)]) return r;
  }
  return rank_;
}

void liveness::send_all(int tag, int culprit, const std::string& text) {
  std::lock_guard lock(send_mutex_);
  auto bytes = std::make_unique<std::string>(sizeof(int) + text.size(), '\0');
  std::memcpy(bytes->data(), &culprit, sizeof(int));
  std::memcpy(bytes->data() + sizeof(int), text.data(), text.size());
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request q = MPI_REQUEST_NULL;
    // Best effort: a rank that cannot be told finds out by its own watch.
    if (MPI_Isend(bytes->data(), static_cast<int>(bytes->size()), MPI_BYTE, r, tag, comm_, &q) == MPI_SUCCESS) {
      sends_.push_back(q);
    }
  }
  outgoing_.push_back(std::move(bytes));
}

bool liveness::flush(std::chrono::milliseconds limit) {
  const auto until = clock::now() + limit;
  std::lock_guard lock(send_mutex_);
  int done = 0;
  while (!done && clock::now() < until) {
    if (MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) break;
  }
  return done != 0;
}

namespace {
struct failure_listeners {
  std::mutex mutex;
  std::uint64_t next = 1;
  std::map<std::uint64_t, std::function<void(int, const std::string&)>> by_id;
};
failure_listeners& listeners() {
  static failure_listeners l;
  return l;
}
}  // namespace

std::uint64_t add_failure_listener(std::function<void(int, const std::string&)> f) {
  auto& l = listeners();
  std::lock_guard lock(l.mutex);
  l.by_id.emplace(l.next, std::move(f));
  return l.next++;
}

result<std::uint64_t> add_failure_listener(MPI_Comm comm, std::function<void(int, const std::string&)> f) {
  ATOMR_ASSIGN_OR_RETURN(auto ranks, world_ranks_of(comm));
  return add_failure_listener([ranks = std::move(ranks), f = std::move(f)](int world_rank, const std::string& text) {
    const auto it = std::find(ranks.begin(), ranks.end(), world_rank);
    if (it != ranks.end()) f(static_cast<int>(it - ranks.begin()), text);
  });
}

void remove_failure_listener(std::uint64_t id) {
  auto& l = listeners();
  std::lock_guard lock(l.mutex);
  l.by_id.erase(id);
}

std::vector<int> failed_world_ranks() {
  std::vector<int> out;
  if (const liveness* l = g_live.load()) {
    for (const auto& [rank, text] : l->failed_ranks()) out.push_back(rank);
  }
  return out;
}

void liveness::handle_failure(int culprit, const std::string& text) {
  auto& gone = gone_[static_cast<std::size_t>(culprit)];
  if (gone) return;
  gone = 1;
  log::get("cluster")->error("{}", text);
  {
    auto& l = listeners();
    std::lock_guard lock(l.mutex);
    for (auto& [id, f] : l.by_id) f(culprit, text);
  }
  if (options_.policy == on_failure::abort) {
    log::get("cluster")->critical("ending the job (ATOMR_ON_FAILURE=abort): {}", text);
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 71);
    return;
  }
  {
    std::lock_guard lock(failed_mutex_);
    failed_.emplace_back(culprit, text);
  }
  // The failed rank's part of the leaving tree will never report: goodbyes go to every rank.
  if (!flat_.exchange(true) && leaving_) say_goodbye_to_all();
  // Watching a new predecessor starts now.
  last_heard_[static_cast<std::size_t>(neighbour(-1))] = clock::now();
}

void liveness::watch_the_leaving() {
  auto staying = [this](int r) {
    const auto i = static_cast<std::size_t>(r);
    return r != rank_ && !gone_[i] && !left_[i];
  };
  // The tree: report up once this rank and its subtree have left; the root's report is "all left",
  // which every rank passes on to its children.
  if (!reported_up_ && std::all_of(child_left_.begin(), child_left_.end(), [](char c) { return c != 0; })) {
    reported_up_ = true;
    if (parent_ >= 0) {
      send_byte(parent_, k_subtree_left_tag);
    } else {
      tree_all_left_ = true;
    }
  }
  if (tree_all_left_ && !sent_down_) {
    sent_down_ = true;
    for (const int child : children_) send_byte(child, k_all_left_tag);
  }
  int remaining = 0;
  for (int r = 0; r < size_; ++r) remaining += staying(r) ? 1 : 0;
  const bool watcher = staying(neighbour(-1));  // of a rank that has not left: it knows its name and pid
  std::unique_lock lock(left_mutex_);
  if (everyone_left_) return;
  if (remaining == 0 || tree_all_left_) {
    everyone_left_ = true;
    left_cv_.notify_all();
    return;
  }
  // The watcher of a stuck rank ends the job at the bound, naming it; the others a timeout later,
  // in case no watcher is leaving.
  if (!leave_by_ || clock::now() < *leave_by_ + (watcher ? clock::duration{} : clock::duration{options_.timeout})) {
    return;
  }
  const std::string cause = leave_cause_;
  lock.unlock();
  std::string stuck;
  for (int r = 0; r < size_; ++r) {
    if (staying(r)) stuck += (stuck.empty() ? "" : ", ") + describe(r);
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", std::chrono::duration<double>(options_.timeout).count());
  const std::string text = stuck + " did not finish within " + secs + " s of " + name_ + " ending after: " + cause;
  log::get("cluster")->critical("ending the job (ATOMR_ON_FAILURE=abort): {}", text);
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, 71);
}

void liveness::forgive_own_pause(clock::duration gap, clock::time_point now) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", std::chrono::duration<double>(gap).count());
  log::get("cluster")->warn(
      "rank {} did not run for {} s (stopped, or starved of CPU); its peers get a fresh "
      "heartbeat timeout before it judges them",
      rank_, secs);
  std::fill(last_heard_.begin(), last_heard_.end(), now);
}

void liveness::read_messages(std::vector<char>& buffer) {
  while (true) {
    int found = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &found, &status) != MPI_SUCCESS || !found) break;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count < 0 || count > k_notice_max) count = k_notice_max;
    if (MPI_Recv(buffer.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm_, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS) {
      break;
    }
    const auto from = static_cast<std::size_t>(status.MPI_SOURCE);
    last_heard_[from] = clock::now();
    if (status.MPI_TAG == k_goodbye_tag) {
      left_[from] = 1;
    } else if (status.MPI_TAG == k_subtree_left_tag) {
      const auto child = std::find(children_.begin(), children_.end(), status.MPI_SOURCE);
      if (child != children_.end()) child_left_[static_cast<std::size_t>(child - children_.begin())] = 1;
    } else if (status.MPI_TAG == k_all_left_tag) {
      tree_all_left_ = true;
    } else if (status.MPI_TAG == k_name_tag) {
      std::lock_guard lock(names_mutex_);
      names_[status.MPI_SOURCE] = std::string(buffer.data(), static_cast<std::size_t>(count));
    } else if (status.MPI_TAG == k_notice_tag && count >= static_cast<int>(sizeof(int))) {
      int culprit = 0;
      std::memcpy(&culprit, buffer.data(), sizeof(int));
      // Named itself: it was silent for longer than the timeout (stopped, say), and the others have
      // gone on without it. It judges nobody from now on: nobody beats to it any more.
      if (culprit == rank_) expelled_ = true;
      if (culprit >= 0 && culprit < size_) {
        handle_failure(culprit,
                       std::string(buffer.data() + sizeof(int), static_cast<std::size_t>(count) - sizeof(int)));
      }
    }
  }
}

void liveness::judge_predecessor() {
  if (expelled_) return;
  const int watched = neighbour(-1);
  if (watched != rank_ && !left_[static_cast<std::size_t>(watched)]) {
    const auto silent = clock::now() - last_heard_[static_cast<std::size_t>(watched)];
    if (silent > options_.timeout) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", std::chrono::duration<double>(silent).count());
      const std::string text =
          describe(watched) + " has not answered for " + secs + " s (seen by rank " + std::to_string(rank_) + ")";
      // The culprit is told too: a rank that was only paused learns that the others went on without it.
      send_all(k_notice_tag, watched, text);
      flush(std::chrono::milliseconds(500));  // the others name the culprit before the job ends
      handle_failure(watched, text);
    }
  }
}

void liveness::run() {
  const auto look = std::min<clock::duration>(options_.period / 5, std::chrono::milliseconds(20));
  auto next_beat = clock::now();
  std::vector<char> buffer(k_notice_max);
  char beat = 0;
  auto last_look = clock::now();
  // A rank named itself to its successor in start(); it does again to a new successor when the
  // old one leaves, so a watcher knows the name of the rank it watches.
  while (!stopping_) {
    if (neighbour(+1) != successor_) introduce();
    const auto now = clock::now();
    // A watcher that did not run itself (its process stopped, or starved of CPU) finds every peer
    // silent when it wakes, before their queued heartbeats are read: it must not blame them. A gap
    // of half the timeout or more restarts every peer's clock; a peer that is really gone is then
    // named one timeout later.
    if (now - last_look >= options_.timeout / 2) forgive_own_pause(now - last_look, now);
    last_look = now;
    if (now >= next_beat) {
      next_beat = now + options_.period;
      const int to = neighbour(+1);
      MPI_Request q = MPI_REQUEST_NULL;
      std::lock_guard lock(send_mutex_);
      if (to != rank_ && MPI_Isend(&beat, 1, MPI_BYTE, to, k_heartbeat_tag, comm_, &q) == MPI_SUCCESS) {
        sends_.push_back(q);
      }
    }
    read_messages(buffer);
    if (leaving_) watch_the_leaving();
    judge_predecessor();
    {
      std::lock_guard lock(send_mutex_);
      std::erase_if(sends_, [](MPI_Request& q) {
        int done = 0;
        return MPI_Test(&q, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done;
      });
      if (sends_.empty()) outgoing_.clear();
    }
    std::this_thread::sleep_for(look);  // a watch, not a synchronization: it looks again later
  }
}

}  // namespace atomr::cluster
