#include "atomr/cluster/buffers/fd_exchange.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <exception>
#include <system_error>
#include <utility>
#include <vector>

#include "atomr/common/log.hpp"

namespace atomr::cluster::detail {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::uint32_t k_status_ok = 0;
constexpr std::uint32_t k_status_error = 1;
// Longer error texts are cut: the requester reads the answer with one fixed-size buffer.
constexpr std::size_t k_max_message = 1024;

struct reply_header {
  std::uint32_t status;
  std::uint32_t message_length;
};

std::string errno_text(int e) { return std::strerror(e); }

// Running out of descriptors or kernel memory may pass; anything else is unexpected here.
errc code_for_errno(int e) {
  return (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) ? errc::resource_exhausted : errc::internal;
}

std::shared_ptr<spdlog::logger> logger() { return log::get("buffers"); }

class unique_fd {
 public:
  explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
  ~unique_fd() { reset(); }
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset() noexcept {
    // close() is not retried on EINTR: on Linux the descriptor is gone either way.
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

struct address {
  sockaddr_un addr;
  socklen_t length;
};

// An abstract-namespace address: sun_path[0] is '\0' and the name is the bytes after it, with no
// terminator, so the length must count exactly those bytes (a trailing '\0' would be part of the
// name and the two ends would not meet).
result<address> abstract_address(const std::string& name) {
  address a{};
  constexpr std::size_t k_max_name = sizeof(a.addr.sun_path) - 1;
  if (name.empty()) return error(errc::invalid_argument, "fd exchange: the socket name is empty");
  if (name.size() > k_max_name) {
    return error(errc::invalid_argument, "fd exchange: socket name '" + name + "' is " + std::to_string(name.size()) +
                                             " bytes; an abstract Unix socket name holds at most " +
                                             std::to_string(k_max_name));
  }
  a.addr.sun_family = AF_UNIX;
  a.addr.sun_path[0] = '\0';
  std::memcpy(a.addr.sun_path + 1, name.data(), name.size());
  a.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

// Milliseconds left until `deadline` for poll(), rounded up so that poll never wakes just before
// the deadline and reports a timeout early; 0 once it has passed.
int poll_ms(clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()).count();
  return static_cast<int>(std::clamp<decltype(left)>(left, 0, INT_MAX));
}

// Sends one answer: the header, the text on error, and `fd` (if >= 0) as SCM_RIGHTS. False (and
// logged) if the requester could not be told.
bool send_reply(const std::string& server, int conn, std::uint32_t status, std::string message, int fd) {
  if (message.size() > k_max_message) message.resize(k_max_message);
  reply_header header{status, static_cast<std::uint32_t>(message.size())};
  iovec iov[2] = {{&header, sizeof header}, {message.data(), message.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = message.empty() ? 1 : 2;
  union {
    cmsghdr align;  // CMSG_* expect a buffer aligned for cmsghdr
    char bytes[CMSG_SPACE(sizeof(int))];
  } control{};
  if (fd >= 0) {
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  // MSG_NOSIGNAL: a requester that hung up must not kill this process with SIGPIPE. MSG_DONTWAIT:
  // one small message on a fresh connection fits its buffer; if not, the requester is broken and
  // must not stall the server.
  ssize_t n;
  do {
    n = ::sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    logger()->warn("fd server '{}': sendmsg of the answer failed: {}", server, errno_text(errno));
    return false;
  }
  return true;
}

}  // namespace

fd_server::fd_server(std::string name, provider provide, int listen_fd, int stop_fd)
    : name_(std::move(name)), provide_(std::move(provide)), listen_fd_(listen_fd), stop_fd_(stop_fd) {}

result<std::unique_ptr<fd_server>> fd_server::start(std::string name, provider provide) {
  if (!provide) return error(errc::invalid_argument, "fd server '" + name + "': no provider given");
  ATOMR_ASSIGN_OR_RETURN(const address a, abstract_address(name));
  // Non-blocking: poll() may report a connection that is gone by the time accept4() runs, and the
  // thread must then go back to poll() rather than block in accept4().
  unique_fd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (listener.get() < 0) {
    const int e = errno;
    return error(code_for_errno(e),
                 "fd server '" + name + "': socket(AF_UNIX, SOCK_SEQPACKET) failed: " + errno_text(e));
  }
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&a.addr), a.length) != 0) {
    const int e = errno;
    if (e == EADDRINUSE) {
      return error(errc::invalid_argument,
                   "fd server '" + name + "': the name is already served by another socket in this network namespace");
    }
    return error(code_for_errno(e), "fd server '" + name + "': bind failed: " + errno_text(e));
  }
  if (::listen(listener.get(), SOMAXCONN) != 0) {
    const int e = errno;
    return error(code_for_errno(e), "fd server '" + name + "': listen failed: " + errno_text(e));
  }
  unique_fd stop(::eventfd(0, EFD_CLOEXEC));
  if (stop.get() < 0) {
    const int e = errno;
    return error(code_for_errno(e), "fd server '" + name + "': eventfd failed: " + errno_text(e));
  }
  // The constructor is private, hence no make_unique.
  std::unique_ptr<fd_server> server(
      new fd_server(std::move(name), std::move(provide), listener.release(), stop.release()));
  try {
    server->thread_ = std::thread([s = server.get()] { s->run(); });
  } catch (const std::system_error& e) {
    // ~fd_server copes with a thread that never started: it closes the socket and the eventfd.
    return error(errc::resource_exhausted, "fd server '" + server->name_ + "': cannot start its thread: " + e.what());
  }
  logger()->debug("fd server '{}' started", server->name_);
  return server;
}

fd_server::~fd_server() {
  const std::uint64_t one = 1;
  if (::write(stop_fd_, &one, sizeof one) != static_cast<ssize_t>(sizeof one)) {
    // Cannot happen for an eventfd at 0 (only overflow fails); joining now would hang, so say why.
    logger()->critical("fd server '{}': write to its stop eventfd failed: {}; waiting for its thread", name_,
                       errno_text(errno));
  }
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(stop_fd_);
  logger()->debug("fd server '{}' stopped", name_);
}

void fd_server::run() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    fds[0].revents = fds[1].revents = 0;
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      logger()->error("fd server '{}': poll failed: {}; it answers no more requests", name_, errno_text(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & (POLLERR | POLLNVAL)) != 0) {
      logger()->error("fd server '{}': its listening socket reported an error; it answers no more requests", name_);
      return;
    }
    if ((fds[0].revents & POLLIN) == 0) continue;
    unique_fd conn(::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.get() < 0) {
      const int e = errno;
      if (e == EINTR || e == EAGAIN || e == EWOULDBLOCK || e == ECONNABORTED) continue;
      logger()->warn("fd server '{}': accept4 failed: {}", name_, errno_text(e));
      // Out of descriptors, say: the connection stays queued and the listener readable, so back
      // off (still waking at once for a stop) rather than spin on it.
      pollfd stop{stop_fd_, POLLIN, 0};
      if (::poll(&stop, 1, 100) > 0) return;
      continue;
    }
    serve_one(conn.get());
  }
}

void fd_server::serve_one(int conn) {
  ucred peer{};
  socklen_t peer_length = sizeof peer;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) != 0) {
    logger()->warn("fd server '{}': getsockopt(SO_PEERCRED) failed: {}; dropping the connection", name_,
                   errno_text(errno));
    return;
  }
  // An abstract socket has no file mode: anyone in the network namespace can connect, and the fds
  // served (device memory) must not reach another user's processes. They are dropped before their
  // request is read, so they cannot hold the server (it serves one connection at a time).
  if (peer.uid != ::geteuid()) {
    if (const auto left_out = refused_log_.admit()) {
      logger()->warn(
          "fd server '{}': dropped a connection from pid {} of uid {} (it serves uid {} only; {} more "
          "dropped since the last such line)",
          name_, peer.pid, peer.uid, ::geteuid(), *left_out);
    }
    return;
  }

  // Wait for the key on the connection and on the stop eventfd, with a limit: a client that
  // connects and sends nothing delays the others only that long, and never the destructor.
  const auto deadline = clock::now() + k_request_read_limit;
  pollfd fds[2] = {{conn, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    fds[0].revents = fds[1].revents = 0;
    const int ready = ::poll(fds, 2, poll_ms(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      logger()->warn("fd server '{}': poll on a connection failed: {}; dropping it", name_, errno_text(errno));
      return;
    }
    if (fds[1].revents != 0) return;  // stopping; run() sees the eventfd too
    if (ready == 0) {
      if (bad_request_log_.admit()) {
        logger()->warn("fd server '{}': pid {} sent no request within {} ms; dropping the connection", name_, peer.pid,
                       k_request_read_limit.count());
      }
      return;
    }
    break;
  }

  std::uint64_t key = 0;
  // MSG_TRUNC makes recv() return the message's real length, so a longer request is told apart
  // from a good one rather than silently cut to 8 bytes.
  ssize_t n;
  do {
    n = ::recv(conn, &key, sizeof key, MSG_DONTWAIT | MSG_TRUNC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    logger()->warn("fd server '{}': recv of a request from pid {} failed: {}", name_, peer.pid, errno_text(errno));
    return;
  }
  if (n == 0) {
    logger()->debug("fd server '{}': pid {} hung up without a request", name_, peer.pid);
    return;
  }
  if (n != static_cast<ssize_t>(sizeof key)) {
    if (bad_request_log_.admit()) {
      logger()->warn("fd server '{}': malformed request from pid {}: {} bytes, expected {}; dropping it", name_,
                     peer.pid, n, sizeof key);
    }
    return;
  }

  // The provider is the caller's code on this thread: an exception escaping it would end the
  // process, so it becomes the requester's error instead.
  result<provided> p = [&]() -> result<provided> {
    try {
      return provide_(key);
    } catch (const std::exception& e) {
      return error(errc::internal, std::string("the provider threw: ") + e.what());
    } catch (...) {
      return error(errc::internal, "the provider threw a non-standard exception");
    }
  }();
  if (!p.has_value()) {
    logger()->debug("fd server '{}': no fd for key {} (pid {}): {}", name_, key, peer.pid, p.error_value().describe());
    send_reply(name_, conn, k_status_error, p.error_value().message(), -1);
    return;
  }
  if (p->fd < 0) {
    logger()->error("fd server '{}': the provider returned fd {} for key {}", name_, p->fd, key);
    send_reply(name_, conn, k_status_error, "the provider returned no valid fd for key " + std::to_string(key), -1);
    return;
  }
  // The kernel installs a new descriptor of the same open file in the requester while sending, so
  // the server's own copy can be closed right after, whether the send worked or not.
  if (send_reply(name_, conn, k_status_ok, "", p->fd)) {
    logger()->debug("fd server '{}': sent fd {} for key {} to pid {}", name_, p->fd, key, peer.pid);
  }
  if (p->close_after_send && ::close(p->fd) != 0) {
    logger()->warn("fd server '{}': close of fd {} after sending it failed: {}", name_, p->fd, errno_text(errno));
  }
}

result<int> request_fd(const std::string& name, std::uint64_t key, std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  const std::string who = "fd server '" + name + "'";
  ATOMR_ASSIGN_OR_RETURN(const address a, abstract_address(name));

  unique_fd sock(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) {
    const int e = errno;
    return error(code_for_errno(e), "request to " + who + ": socket(AF_UNIX, SOCK_SEQPACKET) failed: " + errno_text(e));
  }
  // A Unix-socket connect() blocks while the server's backlog is full, for at most SO_SNDTIMEO
  // (then EAGAIN); it also bounds the send of the key. A zero timeval would mean "forever", hence
  // at least 1 us.
  {
    const auto left = std::max<clock::duration>(deadline - clock::now(), std::chrono::microseconds(1));
    const auto us = std::chrono::ceil<std::chrono::microseconds>(left).count();
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(us / 1'000'000);
    tv.tv_usec = static_cast<suseconds_t>(us % 1'000'000);
    if (::setsockopt(sock.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
      const int e = errno;
      return error(code_for_errno(e), "request to " + who + ": setsockopt(SO_SNDTIMEO) failed: " + errno_text(e));
    }
  }
  int rc;
  do {
    rc = ::connect(sock.get(), reinterpret_cast<const sockaddr*>(&a.addr), a.length);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int e = errno;
    if (e == ECONNREFUSED || e == ENOENT) {
      return error(errc::unavailable, "no " + who + " on this machine (connect: " + errno_text(e) + ")");
    }
    if (e == EAGAIN || e == EWOULDBLOCK) {
      return error(errc::timeout, who + " did not take the connection within " + std::to_string(timeout.count()) +
                                      " ms (its backlog is full)");
    }
    return error(code_for_errno(e), "request to " + who + ": connect failed: " + errno_text(e));
  }

  ssize_t n;
  do {
    n = ::send(sock.get(), &key, sizeof key, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    const int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK) {
      return error(errc::timeout, "request to " + who + ": sending the key did not finish within " +
                                      std::to_string(timeout.count()) + " ms");
    }
    if (e == EPIPE || e == ECONNRESET) {
      return error(errc::unavailable, "request to " + who + ": the server hung up before the key was sent");
    }
    return error(code_for_errno(e), "request to " + who + ": send of the key failed: " + errno_text(e));
  }

  pollfd pfd{sock.get(), POLLIN, 0};
  for (;;) {
    pfd.revents = 0;
    const int ready = ::poll(&pfd, 1, poll_ms(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return error(code_for_errno(e), "request to " + who + ": poll failed: " + errno_text(e));
    }
    if (ready == 0) {
      return error(errc::timeout, who + " gave no answer for key " + std::to_string(key) + " within " +
                                      std::to_string(timeout.count()) + " ms");
    }
    break;  // readable or hung up: recvmsg tells which
  }

  char buffer[sizeof(reply_header) + k_max_message];
  iovec iov{buffer, sizeof buffer};
  union {
    cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control{};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof control.bytes;
  // MSG_CMSG_CLOEXEC: the received fd must not leak into a child this process execs.
  do {
    n = ::recvmsg(sock.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    const int e = errno;
    if (e == ECONNRESET) return error(errc::unavailable, who + " hung up without answering");
    return error(code_for_errno(e), "request to " + who + ": recvmsg failed: " + errno_text(e));
  }

  // Every fd that arrived is owned here until it is handed to the caller, so that no error path
  // below leaks one (a confused server could send several, or send one with an error).
  std::vector<unique_fd> received;
  int control_messages = 0;
  bool one_fd_message = false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    ++control_messages;
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t bytes = c->cmsg_len - CMSG_LEN(0);
    for (std::size_t off = 0; off + sizeof(int) <= bytes; off += sizeof(int)) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + off, sizeof fd);
      received.emplace_back(fd);
    }
    one_fd_message = c->cmsg_len == CMSG_LEN(sizeof(int));
  }

  if (n == 0) {
    return error(errc::unavailable,
                 who + " closed the connection without answering key " + std::to_string(key) + " (it may be stopping)");
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    // The kernel closed the fds that did not fit; those that did are closed by `received`.
    return error(errc::protocol, "request to " + who + ": the answer carried more control data than one fd");
  }
  if ((msg.msg_flags & MSG_TRUNC) != 0) {
    return error(errc::protocol,
                 "request to " + who + ": the answer is longer than " + std::to_string(sizeof buffer) + " bytes");
  }
  if (static_cast<std::size_t>(n) < sizeof(reply_header)) {
    return error(errc::protocol,
                 "request to " + who + ": a " + std::to_string(n) + "-byte answer, shorter than its header");
  }
  reply_header header;
  std::memcpy(&header, buffer, sizeof header);
  if (header.message_length != static_cast<std::size_t>(n) - sizeof header) {
    return error(errc::protocol, "request to " + who + ": the answer's header announces " +
                                     std::to_string(header.message_length) + " message bytes but " +
                                     std::to_string(static_cast<std::size_t>(n) - sizeof header) + " came");
  }
  if (header.status == k_status_error) {
    return error(errc::unavailable, who + ": " + std::string(buffer + sizeof header, header.message_length));
  }
  if (header.status != k_status_ok) {
    return error(errc::protocol, "request to " + who + ": unknown answer status " + std::to_string(header.status));
  }
  if (control_messages != 1 || !one_fd_message || received.size() != 1) {
    return error(errc::protocol, "request to " + who +
                                     ": a success answer must carry exactly one fd (SOL_SOCKET, "
                                     "SCM_RIGHTS), got " +
                                     std::to_string(received.size()) + " fds in " + std::to_string(control_messages) +
                                     " control messages");
  }
  return received.front().release();
}

}  // namespace atomr::cluster::detail
