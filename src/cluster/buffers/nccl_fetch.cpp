// Fetch channels over NCCL send/recv (nccl_fetch.hpp says how they work).
#include "nccl_fetch.hpp"

#if ATOMR_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "atomr/cluster/liveness/stall_watch.hpp"
#include "atomr/cluster/nccl/nccl_backend.hpp"
#include "atomr/cluster/nccl_check.hpp"
#include "atomr/common/context.hpp"
#include "atomr/common/log.hpp"
#include "atomr/common/spin.hpp"
#include "atomr/local/cuda_check.hpp"
#include "atomr/local/device/cuda_events.hpp"
#endif

namespace atomr::cluster::detail {

#if !ATOMR_HAVE_NCCL

bool nccl_fetch_built() noexcept { return false; }
struct nccl_mover::impl {};
namespace {
error not_built() { return error(errc::unavailable, "nccl: atomr was built without NCCL"); }
}  // namespace
result<std::unique_ptr<nccl_mover>> nccl_mover::start(std::chrono::milliseconds, std::chrono::milliseconds) {
  return not_built();
}
nccl_mover::~nccl_mover() = default;
void nccl_mover::stop() {}
result<nccl_mover::channel_ref> nccl_mover::receiving_channel(int, int, int) { return not_built(); }
result<std::uint64_t> nccl_mover::send(int, std::uint64_t, const nccl_id_bytes&, int,
                                       std::shared_ptr<local::buffer_block>, std::size_t, done_fn) {
  return not_built();
}
void nccl_mover::receive(int, std::uint64_t, std::uint64_t, std::shared_ptr<local::buffer_block>, std::size_t,
                         done_fn done) {
  done(not_built());
}
void nccl_mover::fail_peer(int, const error&) {}

#else

static_assert(sizeof(ncclUniqueId) == std::tuple_size_v<nccl_id_bytes>);

bool nccl_fetch_built() noexcept { return true; }

namespace {
using clock = std::chrono::steady_clock;
// As for the world's communicators: a blocking call still inside this long after its abort
// cannot be got out of, and the stall watch ends the job.
constexpr std::chrono::milliseconds k_stall_grace{10'000};
auto logger() { return log::get("buffers"); }

struct transfer {
  std::uint64_t seq = 0;
  std::shared_ptr<local::buffer_block> block;
  std::size_t bytes = 0;
  std::uint64_t ticket = 0;  // send: the block's writes to wait for; receive: this write's number
  nccl_mover::done_fn done;
  std::shared_ptr<void> event;  // recorded after the NCCL call, once issued
  clock::time_point deadline{};
};

struct channel {
  enum class state { closed, opening, ready, failed };
  int peer = 0;
  bool sender = false;
  std::uint64_t number = 0;
  int device = 0;
  nccl_id_bytes id{};
  state st = state::closed;
  std::string why;  // failed: the cause
  // Written by NCCL during a blocking init (read through atomic_ref by whoever aborts it then).
  ncclComm_t comm = nullptr;
  std::atomic<bool> aborted{false};  // whoever sets it first calls ncclCommAbort
  cudaStream_t stream = nullptr;
  void* scratch = nullptr;
  std::shared_ptr<local::cuda_event_pool> events = std::make_shared<local::cuda_event_pool>();
  std::uint64_t next_seq = 1;                 // sender: the next number to give; receiver: the next to issue
  std::map<std::uint64_t, transfer> waiting;  // not issued yet, by number
  std::deque<transfer> issued;                // in stream order

  // Aborts the communicator once (any thread); false where NCCL has not made it yet.
  bool abort_once() {
    const ncclComm_t c = std::atomic_ref<ncclComm_t>(comm).load();
    if (c == nullptr || aborted.exchange(true)) return false;
    ncclCommAbort(c);
    return true;
  }
  std::string name() const {
    return std::string(sender ? "to" : "from") + " rank " + std::to_string(peer) + " (channel " +
           std::to_string(number) + ", device " + std::to_string(device) + ")";
  }
};
using channel_key = std::tuple<int, bool, std::uint64_t>;  // (peer, this side sends, number)
using callbacks = std::vector<std::pair<nccl_mover::done_fn, result<void>>>;

void run_all(callbacks& calls) {
  for (auto& [fn, r] : calls) fn(std::move(r));
  calls.clear();
}
}  // namespace

struct nccl_mover::impl : std::enable_shared_from_this<impl> {
  std::chrono::milliseconds open_deadline{};
  std::chrono::milliseconds transfer_deadline{};
  std::mutex mutex;
  std::condition_variable wake;
  std::map<channel_key, std::shared_ptr<channel>> channels;
  std::map<std::tuple<int, int, int>, std::uint64_t> receiving;  // (owner, owner device, device) -> number
  // Owner side: channels that failed here, by (consumer, number), and why. A consumer that asks on
  // one again (its side did not fail) is refused rather than opened anew with a spent unique id.
  std::map<std::pair<int, std::uint64_t>, std::string> spent;
  std::uint64_t next_number = 1;
  std::vector<std::pair<int, std::string>> failed_peers;  // since the mover's last turn
  int openers = 0;
  bool stopping = false;
  std::thread mover;

  bool has_work() const {
    if (stopping || !failed_peers.empty()) return true;
    for (const auto& [key, ch] : channels) {
      if (ch->st == channel::state::ready && (!ch->waiting.empty() || !ch->issued.empty())) return true;
    }
    return false;
  }

  // Opens `ch` on a thread of its own (under mutex).
  void open(const std::shared_ptr<channel>& ch) {
    ch->st = channel::state::opening;
    ++openers;
    std::thread([self = shared_from_this(), ch] { self->run_open(ch); }).detach();
  }

  void run_open(const std::shared_ptr<channel>& ch) {
    cudaStream_t stream = nullptr;
    void* scratch = nullptr;
    const int device = ch->device;
    context::scoped_device scope(device);
    auto opened = [&]() -> result<void> {
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaSetDevice(device)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)));
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaMalloc(&scratch, 1)));
      ncclUniqueId uid;
      std::memcpy(&uid, ch->id.data(), sizeof uid);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 1;
      stall_watch watch([ch] { ch->abort_once(); }, k_stall_grace);
      auto joined = [&]() -> result<void> {
        stall_watch::scope guard(watch, clock::now() + open_deadline, "opening a fetch channel");
        ATOMR_TRY(ATOMR_NCCL_CHECK(ncclCommInitRankConfig(&ch->comm, 2, uid, ch->sender ? 0 : 1, &config)));
        // The pair's first transfer connects it: later enqueues never wait for the peer.
        ATOMR_TRY(ATOMR_NCCL_CHECK(ch->sender ? ncclSend(scratch, 1, ncclUint8, 1, ch->comm, stream)
                                              : ncclRecv(scratch, 1, ncclUint8, 0, ch->comm, stream)));
        return ATOMR_CUDA_CHECK(cudaStreamSynchronize(stream));
      }();
      watch.stop();
      if (ch->aborted.load()) {
        return error(watch.fired() ? errc::timeout : errc::aborted,
                     watch.fired() ? "it did not open within " + std::to_string(open_deadline.count()) + " ms (rank " +
                                         std::to_string(ch->peer) + " did not join)"
                                   : "it was closed while opening");
      }
      return joined;
    }();
    callbacks calls;
    {
      std::lock_guard lock(mutex);
      if (opened && !stopping && ch->st == channel::state::opening) {
        ch->stream = stream;
        ch->scratch = scratch;
        ch->st = channel::state::ready;
        logger()->debug("fetch channel {} open", ch->name());
      } else {
        ch->abort_once();
        ch->comm = nullptr;
        if (stream != nullptr) cudaStreamDestroy(stream);
        if (scratch != nullptr) cudaFree(scratch);
        cudaGetLastError();
        if (ch->st == channel::state::opening) {
          // "nccl:" marks a failure of the path (the consumer falls back to host staging).
          fail(*ch,
               opened ? error(errc::aborted, "the buffer registry stopped")
                      : error(errc::unavailable, "nccl: the fetch channel " + ch->name() +
                                                     " did not open: " + opened.error_value().describe()),
               calls);
        }
      }
      --openers;
    }
    wake.notify_all();
    run_all(calls);
  }

  // Ends `ch`: aborts its communicator, fails its transfers with `why` (under mutex).
  void fail(channel& ch, const error& why, callbacks& calls) {
    if (ch.st == channel::state::failed) return;
    const error e = why.message().starts_with("nccl: ") ? why : why.with_context("the NCCL fetch channel " + ch.name());
    if (ch.st == channel::state::ready) {
      context::scoped_device scope(ch.device);
      cudaSetDevice(ch.device);
      ch.abort_once();
      ch.comm = nullptr;
      // The aborted kernels end; after this nothing on the stream touches the transfers' buffers.
      cudaStreamSynchronize(ch.stream);
      cudaStreamDestroy(ch.stream);
      cudaFree(ch.scratch);
      cudaGetLastError();
      ch.stream = nullptr;
      ch.scratch = nullptr;
    } else if (ch.st == channel::state::opening) {
      ch.abort_once();  // its opener returns and cleans up
    }
    ch.st = channel::state::failed;
    ch.why = e.describe();
    if (ch.sender) spent.emplace(std::make_pair(ch.peer, ch.number), ch.why);
    for (auto& t : ch.issued) calls.emplace_back(std::move(t.done), e);
    for (auto& [seq, t] : ch.waiting) {
      if (!ch.sender) t.block->write_enqueued(t.ticket, nullptr);  // later writers need not wait for it
      calls.emplace_back(std::move(t.done), e);
    }
    ch.issued.clear();
    ch.waiting.clear();
    for (auto it = receiving.begin(); it != receiving.end();) {
      it = (!ch.sender && std::get<0>(it->first) == ch.peer && it->second == ch.number) ? receiving.erase(it) : ++it;
    }
  }

  // Issues what can go, completes what has finished (under mutex).
  void turn(channel& ch, callbacks& calls) {
    context::scoped_device scope(ch.device);
    if (!ch.waiting.empty() || !ch.issued.empty()) {
      if (auto set = ATOMR_CUDA_CHECK(cudaSetDevice(ch.device)); !set) return fail(ch, set.error_value(), calls);
    }
    while (!ch.waiting.empty()) {
      auto it = ch.waiting.begin();
      if (!ch.sender && it->first != ch.next_seq) break;  // the receives go strictly in the owner's order
      transfer& t = it->second;
      const auto mark = ch.sender ? t.block->mark_after(t.ticket) : t.block->mark_after(t.ticket - 1);
      if (!mark) break;  // an earlier write is not enqueued yet
      if (auto issued = issue(ch, t, *mark); !issued) return fail(ch, issued.error_value(), calls);
      if (!ch.sender) ++ch.next_seq;
      ch.issued.push_back(std::move(t));
      ch.waiting.erase(it);
    }
    const auto now = clock::now();
    while (!ch.issued.empty()) {
      transfer& t = ch.issued.front();
      const cudaError_t q = cudaEventQuery(static_cast<cudaEvent_t>(t.event.get()));
      if (q == cudaErrorNotReady) {
        if (now > t.deadline) {
          return fail(
              ch,
              error(errc::timeout, "a transfer of " + std::to_string(t.bytes) + " bytes did not finish within " +
                                       std::to_string(transfer_deadline.count()) + " ms"),
              calls);
        }
        break;
      }
      calls.emplace_back(std::move(t.done), ATOMR_CUDA_CHECK(q));
      ch.issued.pop_front();
    }
    if (!ch.issued.empty()) {
      ncclResult_t state = ncclSuccess;
      const auto asked = ATOMR_NCCL_CHECK(ncclCommGetAsyncError(ch.comm, &state));
      if (!asked) return fail(ch, asked.error_value(), calls);
      if (state != ncclSuccess && state != ncclInProgress) {
        return fail(ch,
                    error(errc::nccl,
                          std::string("NCCL reported ") + ncclGetErrorString(state) + ": " + ncclGetLastError(ch.comm)),
                    calls);
      }
    }
  }

  result<void> issue(channel& ch, transfer& t, const local::buffer_block::write_mark& mark) {
    if (mark.event && mark.origin != ch.stream) {
      ATOMR_TRY(ATOMR_CUDA_CHECK(cudaStreamWaitEvent(ch.stream, static_cast<cudaEvent_t>(mark.event.get()), 0)));
    }
    ATOMR_TRY(ATOMR_NCCL_CHECK(ch.sender ? ncclSend(t.block->ptr, t.bytes, ncclUint8, 1, ch.comm, ch.stream)
                                         : ncclRecv(t.block->ptr, t.bytes, ncclUint8, 0, ch.comm, ch.stream)));
    ATOMR_ASSIGN_OR_RETURN(t.event, ch.events->take());
    ATOMR_TRY(ATOMR_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(t.event.get()), ch.stream)));
    if (!ch.sender) t.block->write_enqueued(t.ticket, t.event, ch.stream);
    t.deadline = clock::now() + transfer_deadline;
    return ok();
  }

  void run() {
    const spin_relax relax;
    callbacks calls;
    for (;;) {
      bool busy = false;
      bool done = false;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return has_work(); });
        for (const auto& [peer, why] : failed_peers) {
          for (auto& [key, ch] : channels) {
            if (ch->peer == peer) fail(*ch, error(errc::unavailable, why), calls);
          }
        }
        failed_peers.clear();
        if (stopping) {
          for (auto& [key, ch] : channels) fail(*ch, error(errc::aborted, "the buffer registry stopped"), calls);
          done = true;
        } else {
          for (auto& [key, ch] : channels) {
            if (ch->st != channel::state::ready) continue;
            turn(*ch, calls);
            busy = busy || !ch->waiting.empty() || !ch->issued.empty();
          }
        }
        std::erase_if(channels, [](const auto& kv) { return kv.second->st == channel::state::failed; });
      }
      run_all(calls);
      if (done) return;
      if (busy) relax();
    }
  }
};

result<std::unique_ptr<nccl_mover>> nccl_mover::start(std::chrono::milliseconds open_deadline,
                                                      std::chrono::milliseconds transfer_deadline) {
  connect_nccl_at_init();  // (the world's communicators, if this process makes one later)
  auto s = std::make_shared<impl>();
  s->open_deadline = open_deadline;
  s->transfer_deadline = transfer_deadline;
  s->mover = std::thread([raw = s.get()] { raw->run(); });
  return std::unique_ptr<nccl_mover>(new nccl_mover(std::move(s)));
}

nccl_mover::~nccl_mover() { stop(); }

void nccl_mover::stop() {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) return;
    impl_->stopping = true;
    for (auto& [key, ch] : impl_->channels) {
      if (ch->st == channel::state::opening) ch->abort_once();
    }
  }
  impl_->wake.notify_all();
  impl_->mover.join();
  // Openers still inside NCCL's init return at their deadline at the latest (their stall watch
  // aborts the communicator); they hold the state, but must be out before the process moves on.
  std::unique_lock lock(impl_->mutex);
  impl_->wake.wait(lock, [&] { return impl_->openers == 0; });
}

result<nccl_mover::channel_ref> nccl_mover::receiving_channel(int owner, int owner_device, int device) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->stopping) return error(errc::aborted, "nccl: the buffer registry stopped");
  const auto key = std::make_tuple(owner, owner_device, device);
  if (const auto it = impl_->receiving.find(key); it != impl_->receiving.end()) {
    const auto ch = impl_->channels.find({owner, false, it->second});
    if (ch != impl_->channels.end() && ch->second->st != channel::state::failed) {
      return channel_ref{ch->second->number, ch->second->id};
    }
  }
  ncclUniqueId uid;
  {
    context::scoped_device scope(device);
    if (auto made = ATOMR_NCCL_CHECK(ncclGetUniqueId(&uid)); !made) {
      return made.error_value().with_context("making a fetch channel's id");
    }
  }
  auto ch = std::make_shared<channel>();
  ch->peer = owner;
  ch->sender = false;
  ch->number = impl_->next_number++;
  ch->device = device;
  std::memcpy(ch->id.data(), &uid, sizeof uid);
  impl_->channels[{owner, false, ch->number}] = ch;
  impl_->receiving[key] = ch->number;
  return channel_ref{ch->number, ch->id};
}

result<std::uint64_t> nccl_mover::send(int consumer, std::uint64_t number, const nccl_id_bytes& id, int device,
                                       std::shared_ptr<local::buffer_block> block, std::size_t bytes, done_fn done) {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) return error(errc::aborted, "nccl: the buffer registry stopped");
    if (const auto it = impl_->spent.find({consumer, number}); it != impl_->spent.end()) {
      return error(errc::unavailable, "nccl: channel " + std::to_string(number) + " of rank " +
                                          std::to_string(consumer) + " failed here earlier: " + it->second);
    }
    auto& ch = impl_->channels[{consumer, true, number}];
    if (!ch) {
      ch = std::make_shared<channel>();
      ch->peer = consumer;
      ch->sender = true;
      ch->number = number;
      ch->device = device;
      ch->id = id;
      impl_->open(ch);
    } else if (ch->device != device || ch->id != id) {
      return error(errc::invalid_argument, "nccl: channel " + std::to_string(number) + " of rank " +
                                               std::to_string(consumer) + " is open on device " +
                                               std::to_string(ch->device) + " with another id");
    }
    const std::uint64_t seq = ch->next_seq++;
    const std::uint64_t ticket = block->writes_requested();
    ch->waiting.emplace(seq, transfer{seq, std::move(block), bytes, ticket, std::move(done), nullptr, {}});
    impl_->wake.notify_all();
    return seq;
  }
}

void nccl_mover::receive(int owner, std::uint64_t number, std::uint64_t seq, std::shared_ptr<local::buffer_block> into,
                         std::size_t bytes, done_fn done) {
  std::unique_lock lock(impl_->mutex);
  const auto it = impl_->channels.find({owner, false, number});
  if (impl_->stopping || it == impl_->channels.end() || it->second->st == channel::state::failed) {
    lock.unlock();
    done(error(errc::unavailable, "nccl: the fetch channel from rank " + std::to_string(owner) + " is closed"));
    return;
  }
  auto& ch = it->second;
  if (ch->st == channel::state::closed) impl_->open(ch);
  const std::uint64_t ticket = into->request_write();
  ch->waiting.emplace(seq, transfer{seq, std::move(into), bytes, ticket, std::move(done), nullptr, {}});
  impl_->wake.notify_all();
}

void nccl_mover::fail_peer(int peer, const error& why) {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->failed_peers.emplace_back(peer, why.message());
    for (auto& [key, ch] : impl_->channels) {
      if (ch->peer == peer && ch->st == channel::state::opening) ch->abort_once();
    }
  }
  impl_->wake.notify_all();
}

#endif

}  // namespace atomr::cluster::detail
