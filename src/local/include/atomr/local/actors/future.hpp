// promise<T> / future<T>: a one-shot value or error (result<T>) handed from one thread to another.
// The first of set_value / set_error wins; later ones are ignored (that is how an ask's deadline
// races its reply). A promise destroyed unfulfilled fails its future with errc::unavailable, so no
// future is left hanging. reply_to<T> is the promise an ask puts into a message.
//
// Threading: any thread may fulfil; any thread may wait. A continuation (then) runs on the thread
// that fulfils, or at once on the caller's thread if the future is already ready; it must not
// block. Do not call get() from an actor's handler while the answer needs that actor's thread.
// A coroutine awaits a future instead (co_await; see awaitable.hpp and task.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "atomr/common/recycled_storage.hpp"
#include "atomr/common/result.hpp"
#include "atomr/common/spin.hpp"

namespace atomr::local {

// Work a waiter can do while it waits, to get its own answer sooner: the caller of a request
// whose completion is polled (an MPI reduction, a CUDA event) polls it itself rather than wait
// for another thread to notice and hand the value over, which costs a cross-core hand-off and
// the other thread's turn (microseconds on a small collective). progress() must be safe to call
// from any thread at any time, return quickly, and do nothing once its owner is gone.
class progress_hook {
 public:
  virtual ~progress_hook() = default;
  virtual void progress() noexcept = 0;
  // Called each time a waiter stops looking (it has the value, or it is about to sleep), and
  // when a continuation is added: from then on the owner's own thread must see the completion.
  // A hook that took work over from that thread hands it back here, also where the value came
  // another way (a deadline, a failure) while it held the work.
  virtual void done_looking() noexcept {}
};

namespace detail {

// How long wait() looks before it sleeps: ATOMR_WAIT_LOOK_US (auto: 1000 us where the rank has
// CPUs to spare, else 200), read once. With 200 us a 1 GiB token fetch (730 us) slept and was
// woken by the completion waiter: 0.95-0.97 of raw on an H100 with 16 vCPUs, 0.986-0.993 with
// 1000 us on the same machine.
std::chrono::microseconds wait_look();

template <typename T>
class shared_state : public std::enable_shared_from_this<shared_state<T>> {
 public:
  // (User-provided, so that make_shared's value-initialization does not zero the whole state
  // before constructing it: that `rep stos` of about 250 bytes was over a quarter of
  // world::make_request's time in a profile of 1000 x 2 KiB all_reduces in one call.)
  shared_state() {}
  // True if this call fulfilled the state.
  bool fulfil(result<T> value) {
    // A waiter may drop the last other reference as soon as it sees the value; keep the state
    // alive until the notification and the continuations are done.
    const auto keep_alive = this->shared_from_this();
    std::vector<std::function<void(const result<T>&)>> continuations;
    {
      std::lock_guard lock(mutex_);
      if (value_) return false;
      value_.emplace(std::move(value));
      continuations.swap(continuations_);
      has_value_.store(true, std::memory_order_release);
    }
    ready_.notify_all();
    for (auto& c : continuations) c(*value_);
    return true;
  }

  bool ready() const {
    if (fulfilled()) return true;
    std::lock_guard lock(mutex_);
    return value_.has_value();
  }
  // The same without the lock (a fulfilled state stays fulfilled).
  bool fulfilled() const noexcept { return has_value_.load(std::memory_order_acquire) || marked(); }
  // Whether fulfil ran (a marked state may not have been fulfilled yet).
  bool has_value() const noexcept { return has_value_.load(std::memory_order_acquire); }

  const result<T>& wait() {
    // Replies often come within microseconds (a collective across two GPUs: 10-30 us): look for
    // a while before sleeping, which saves the waker a system call and this thread a wake-up
    // that costs 5-10 us (see spin_relax for how it looks).
    // (The clock is read every 8th look: a read costs 25-35 ns, a look with the pause hint less.)
    if (marked()) return marked_value();
    if (has_value_.load(std::memory_order_acquire)) return *value_;
    const auto until = std::chrono::steady_clock::now() + wait_look();
    const spin_relax relax;
    bool by_mark = false;
    for (unsigned i = 1; !has_value_.load(std::memory_order_acquire); ++i) {
      if (marked()) {
        by_mark = true;
        break;
      }
      if (hook_) hook_->progress();
      relax();
      if ((i % 8) == 0 && std::chrono::steady_clock::now() >= until) break;
    }
    if (hook_) hook_->done_looking();
    if (by_mark) return marked_value();
    // Seen while looking: read it without the lock. The fulfiller sets has_value_ while it still
    // holds the lock, so taking the lock here would often find it held and sleep in the kernel
    // (a futex wait and wake: 10-20 us on a VM) for a value that is already there. value_ never
    // changes once set, and the acquire load above orders this read after its write.
    if (has_value_.load(std::memory_order_acquire)) return *value_;
    if (needs_fulfil()) return marked_value();
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return value_.has_value() || marked(); });
    return value_ ? *value_ : marked_value();
  }

  template <typename Rep, typename Period>
  bool wait_for(std::chrono::duration<Rep, Period> d) {
    if (marked() || needs_fulfil()) return true;
    std::unique_lock lock(mutex_);
    return ready_.wait_for(lock, d, [&] { return value_.has_value() || marked(); });
  }

  // Set before the future reaches another thread (see promise::set_progress_hook).
  void set_hook(std::shared_ptr<progress_hook> h) { hook_ = std::move(h); }
  // Set before the future reaches another thread (see promise::set_done_mark).
  void set_mark(const std::atomic<std::uint64_t>* mark, std::uint64_t at) noexcept requires std::is_void_v<T> {
    mark_ = mark;
    mark_at_ = at;
  }

  void add_continuation(std::function<void(const result<T>&)> f) {
    if (hook_) hook_->done_looking();  // nobody may look: the continuation needs the fulfiller
    {
      std::unique_lock lock(mutex_);
      if (!value_) {
        if (!needs_fulfil()) {
          continuations_.push_back(std::move(f));
          return;
        }
        lock.unlock();
        f(marked_value());  // marked: success, which fulfil would not change
        return;
      }
    }
    f(*value_);  // already fulfilled: value_ no longer changes
  }

  // For a marked state (promise::settle): fulfils it with success only where the mark does not
  // reach everyone, a sleeping waiter or a continuation (needs_); else leaves it as it is, which
  // costs the fulfiller one look at the state instead of its lock and its wake-up.
  void settle() {
    if constexpr (std::is_void_v<T>) {
      if (has_value_.load(std::memory_order_acquire)) return;
      if (!marked() || needs_.load(std::memory_order_seq_cst)) fulfil(result<void>());
    }
  }

 private:
  mutable std::mutex mutex_;
  std::atomic<bool> has_value_{false};  // value_ is set (read without the lock by wait())
  std::condition_variable ready_;
  std::optional<result<T>> value_;
  std::vector<std::function<void(const result<T>&)>> continuations_;
  std::shared_ptr<progress_hook> hook_;  // called by wait() while it looks (never changes once shared)
  // A success published for many states at once (see promise::set_done_mark): the state counts
  // as fulfilled with success once *mark_ reaches mark_at_. (Never changes once shared.)
  const std::atomic<std::uint64_t>* mark_ = nullptr;
  std::uint64_t mark_at_ = 0;
  // Set by whoever the mark alone would not reach (a waiter about to sleep, a continuation): the
  // fulfiller then fulfils the state after the mark (settle). Both sides store, then load the
  // other's word, sequentially consistent: either the fulfiller sees this flag, or this side
  // sees the mark.
  std::atomic<bool> needs_{false};
  bool marked() const noexcept {
    if constexpr (std::is_void_v<T>) {
      return mark_ != nullptr && mark_->load(std::memory_order_seq_cst) >= mark_at_;
    } else {
      return false;
    }
  }
  // Raises needs_ where a mark may come; true if the mark is there already.
  bool needs_fulfil() noexcept {
    if (mark_ == nullptr) return false;
    needs_.store(true, std::memory_order_seq_cst);
    return marked();
  }
  // (Only called where marked(), which only a void state can be.)
  static const result<T>& marked_value() {
    if constexpr (std::is_void_v<T>) {
      static const result<void> success;
      return success;
    } else {
      std::abort();
    }
  }
};

// Why a request was dropped unanswered on this thread (set while an actor drains its mailbox or
// refuses a message), so the asker's error says "actor 'x' stopped" or "mailbox full" rather than
// something generic. Empty outside such a scope.
std::optional<error>& drop_reason();

class drop_reason_scope {
 public:
  explicit drop_reason_scope(error reason) : previous_(std::exchange(drop_reason(), std::move(reason))) {}
  ~drop_reason_scope() { drop_reason() = std::move(previous_); }
  drop_reason_scope(const drop_reason_scope&) = delete;
  drop_reason_scope& operator=(const drop_reason_scope&) = delete;

 private:
  std::optional<error> previous_;
};

// The error a promise gets when destroyed unfulfilled: the drop reason in scope, or a generic one.
error dropped_error();

// Set on a thread while it runs a direct actor's handler for a sender (spawn_options::direct):
// that thread is the router's, and waiting there would stall every delivery, the awaited answer's
// among them. future::get() on a future that is not ready fails at once inside the scope.
bool waiting_forbidden() noexcept;
class no_wait_scope {
 public:
  no_wait_scope() noexcept;
  ~no_wait_scope();
  no_wait_scope(const no_wait_scope&) = delete;
  no_wait_scope& operator=(const no_wait_scope&) = delete;

 private:
  bool previous_;
};
error waiting_forbidden_error();

}  // namespace detail

template <typename T>
class future {
 public:
  using value_type = T;

  future() = default;
  explicit future(std::shared_ptr<detail::shared_state<T>> state) : state_(std::move(state)) {}

  bool valid() const noexcept { return state_ != nullptr; }
  bool ready() const { return state_->ready(); }
  // Blocks until the value or error is there (in a direct actor's handler: errc::invalid_argument
  // at once unless it is there; see spawn_options::direct).
  result<T> get() const {
    if (!state_->fulfilled() && detail::waiting_forbidden()) return detail::waiting_forbidden_error();
    return state_->wait();
  }
  // True if ready within `d`.
  template <typename Rep, typename Period>
  bool wait_for(std::chrono::duration<Rep, Period> d) const {
    return state_->wait_for(d);
  }
  // Runs f(const result<T>&) once, when the future is fulfilled (see the threading note above).
  // Several continuations may be added; they run in the order added.
  template <typename F>
  void then(F&& f) const {
    state_->add_continuation(std::function<void(const result<T>&)>(std::forward<F>(f)));
  }

 private:
  std::shared_ptr<detail::shared_state<T>> state_;
};

template <typename T>
class promise {
 public:
  // (The state's storage is recycled: a promise is often made on one thread and its state freed on
  // another, hundreds at a time; see recycled_storage.hpp.)
  promise() : state_(std::allocate_shared<detail::shared_state<T>>(recycling_allocator<detail::shared_state<T>>{})) {}
  // An empty promise: no future, and its setters do nothing (a reply_to nobody waits for).
  explicit promise(std::nullptr_t) noexcept {}
  // A promise over an existing state (the ask machinery keeps the state to fail it on timeout).
  explicit promise(std::shared_ptr<detail::shared_state<T>> state) : state_(std::move(state)) {}
  // An unfulfilled promise fails its future. (The check comes first: building the error costs
  // an allocation, and almost every promise is fulfilled by then.)
  ~promise() {
    if (state_ && !state_->has_value()) drop();
  }
  promise(promise&&) noexcept = default;
  promise& operator=(promise&& other) noexcept {
    if (this != &other) {
      if (state_ && !state_->has_value()) drop();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  promise(const promise&) = delete;
  promise& operator=(const promise&) = delete;

  future<T> get_future() const { return future<T>(state_); }
  // True for an empty promise (promise(nullptr), or one moved from or settled): no future.
  bool empty() const noexcept { return state_ == nullptr; }
  // What a waiter on the future does while it looks for the value (see progress_hook). Set it
  // before the future goes to another thread: it is read there without a lock.
  void set_progress_hook(std::shared_ptr<progress_hook> h) {
    if (state_) state_->set_hook(std::move(h));
  }
  // A fulfiller that completes many promises in order can publish their success with one store
  // (sequentially consistent): the future counts as fulfilled with success (get, ready, wait_for,
  // then) once `*mark` >= `at`. After that store the fulfiller calls settle() (or set_value) on
  // each, which wakes a waiter that slept before the mark and runs continuations added before
  // it; it never calls set_error once the mark passed `at`, and keeps `mark` alive as long as any
  // future of this promise. Set it before the future goes to another thread.
  void set_done_mark(const std::atomic<std::uint64_t>* mark, std::uint64_t at) noexcept requires std::is_void_v<T> {
    if (state_) state_->set_mark(mark, at);
  }
  // Each returns true if it fulfilled the future (false if it was already fulfilled).
  template <typename U = T>
  bool set_value(U&& value) {
    return state_ && state_->fulfil(result<T>(std::forward<U>(value)));
  }
  bool set_value() requires std::is_void_v<T> { return state_ && state_->fulfil(result<void>()); }
  bool set_error(error e) { return state_ && state_->fulfil(result<T>(std::move(e))); }
  // After the done mark passed this promise's number: what set_value would do for those the mark
  // does not reach (a waiter asleep, a continuation), and nothing for the rest. A future settled
  // so reads as fulfilled with success; its state is never fulfilled otherwise. The promise lets
  // go of the state: it has nothing more to say (and its destructor need not look again).
  void settle() requires std::is_void_v<T> {
    if (state_) std::exchange(state_, nullptr)->settle();
  }
  bool set_result(result<T> r) { return state_ && state_->fulfil(std::move(r)); }

 private:
  // Unfulfilled: a marked state is settled (success), any other fails with the drop reason.
  void drop() {
    if (state_->fulfilled()) {
      state_->settle();
    } else {
      state_->fulfil(detail::dropped_error());
    }
  }
  std::shared_ptr<detail::shared_state<T>> state_;
};

// Where a reply_to's answer goes when no future waits for it on this rank (the router's reply to
// an asker on another rank): answer() is called once, with the value or why there is none. It
// costs one small object instead of a future's shared state, lock and continuation.
template <typename T>
class reply_sink {
 public:
  virtual ~reply_sink() = default;
  virtual void answer(result<T> value) noexcept = 0;
};

// The reply handle inside an asked message. Exactly one reply reaches the asker: the first of
// send/fail, the ask's deadline, or, if the handle is destroyed unanswered (the actor stopped or
// dropped the message), an errc::unavailable error saying so. Movable, not copyable.
template <typename T>
class reply_to {
 public:
  explicit reply_to(promise<T> p) : promise_(std::move(p)) {}
  explicit reply_to(std::unique_ptr<reply_sink<T>> sink) : sink_(std::move(sink)) {}
  // A reply_to nobody waits for (what a decoder builds before it is bound; see cluster/router.hpp).
  reply_to() = default;
  ~reply_to() { drop(); }
  reply_to(reply_to&&) noexcept = default;
  reply_to& operator=(reply_to&& other) noexcept {
    if (this != &other) {
      drop();
      promise_ = std::move(other.promise_);
      sink_ = std::move(other.sink_);
    }
    return *this;
  }
  reply_to(const reply_to&) = delete;
  reply_to& operator=(const reply_to&) = delete;

  template <typename U = T>
  void send(U&& value) {
    if (sink_) {
      std::exchange(sink_, nullptr)->answer(result<T>(std::forward<U>(value)));
    } else {
      promise_.set_value(std::forward<U>(value));
    }
  }
  void send() requires std::is_void_v<T> {
    if (sink_) {
      std::exchange(sink_, nullptr)->answer(result<void>());
    } else {
      promise_.set_value();
    }
  }
  void fail(error e) {
    if (sink_) {
      std::exchange(sink_, nullptr)->answer(result<T>(std::move(e)));
    } else {
      promise_.set_error(std::move(e));
    }
  }
  // See promise::set_progress_hook (nothing where the reply goes to a sink: nobody here waits).
  void set_progress_hook(std::shared_ptr<progress_hook> h) {
    if (!sink_) promise_.set_progress_hook(std::move(h));
  }

 private:
  void drop() noexcept {
    if (sink_) std::exchange(sink_, nullptr)->answer(result<T>(detail::dropped_error()));
  }
  promise<T> promise_{nullptr};
  std::unique_ptr<reply_sink<T>> sink_;
};

}  // namespace atomr::local
