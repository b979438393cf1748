// How to spawn an actor: its name, which dispatcher runs it, its mailbox bound and overflow
// policy, and how it supervises its own children.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "atomr/local/actors/supervision.hpp"

namespace atomr::local {

enum class dispatch_kind {
  pool,       // shared worker threads (most actors)
  dedicated,  // an OS thread of its own (device actors, actors that must not share)
};

enum class overflow_policy {
  fail,   // tell on a full mailbox fails at once with errc::resource_exhausted
  block,  // tell waits for room up to block_timeout, then fails with errc::timeout
};

struct spawn_options {
  std::string name{};  // unique among live actors; empty: "actor-<id>"
  dispatch_kind dispatch = dispatch_kind::pool;
  std::size_t mailbox_capacity = 0;  // 0: unbounded
  overflow_policy overflow = overflow_policy::fail;
  std::chrono::steady_clock::duration block_timeout = std::chrono::seconds(1);
  supervisor_strategy supervision{};        // applied to this actor's children
  std::function<void()> on_thread_start{};  // dedicated dispatch only: runs first on the new thread
  // Direct delivery (pool dispatch only), like HPX's direct actions: a sender that may run
  // handlers (the router's progress thread, delivering a message from another rank) runs this
  // actor's handler on its own thread when the actor is idle, instead of queueing the message
  // for a pool worker. That saves the mailbox and a hand-off between threads, about a third of a
  // remote ask. The actor's handlers must then be short and never wait: a future's get() inside
  // one that is not ready fails at once with errc::invalid_argument (it would stall the router).
  // A coroutine handler (coroutine_actor) awaits instead: it runs here until it first suspends
  // and resumes on the pool.
  bool direct = false;
};

}  // namespace atomr::local
