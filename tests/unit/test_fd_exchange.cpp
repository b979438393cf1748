// The fd exchange: a server hands fds by key to other processes of the machine over an abstract
// Unix socket. These tests run both ends in one process, which the kernel treats no differently:
// the requester still gets a new descriptor of the same open file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <future>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "atomr/cluster/buffers/fd_exchange.hpp"

namespace atomr::cluster::detail {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

// Abstract names are per network namespace, shared by every process in it: the pid keeps
// concurrent test runs apart.
std::string unique_name(const std::string& what) { return "atomr-test-fdx-" + std::to_string(::getpid()) + "-" + what; }

// A memfd holding `bytes`; -1 (with a test failure) if it could not be made.
int make_memfd(const std::string& bytes) {
  const int fd = ::memfd_create("atomr_fd_exchange_test", MFD_CLOEXEC);
  if (fd < 0) {
    ADD_FAILURE() << "memfd_create: " << std::strerror(errno);
    return -1;
  }
  if (::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    ADD_FAILURE() << "pwrite: " << std::strerror(errno);
  }
  return fd;
}

// The first `size` bytes of `fd`, read through that descriptor.
std::string read_back(int fd, std::size_t size) {
  std::string out(size, '\0');
  const ssize_t n = ::pread(fd, out.data(), size, 0);
  if (n < 0) return "pread failed: " + std::string(std::strerror(errno));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

bool same_file(int a, int b) {
  struct stat sa {};
  struct stat sb {};
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// A raw client of the server's socket, to play a broken requester. -1 on failure (reported).
int raw_connect(const std::string& name) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ADD_FAILURE() << "socket: " << std::strerror(errno);
    return -1;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), length) != 0) {
    ADD_FAILURE() << "connect: " << std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

// True once the server has closed the raw client's connection without answering: the socket
// reads as end-of-file (the server accepted and closed it) or reports ECONNRESET (the listening
// socket was closed with the connection still queued). Waits at most `limit`.
bool hung_up_without_answer(int fd, std::chrono::milliseconds limit) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(limit.count())) != 1) return false;
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

fd_server::provider serve_map(std::map<std::uint64_t, int> fds) {
  return [fds = std::move(fds)](std::uint64_t key) -> result<fd_server::provided> {
    const auto it = fds.find(key);
    if (it == fds.end()) return error(errc::invalid_argument, "no buffer under key " + std::to_string(key));
    return fd_server::provided{it->second, false};
  };
}

TEST(FdExchange, HandsOverAMemfdWithItsBytes) {
  const std::string bytes = "device pool handle \x01\x02\x03 and more";
  const int memfd = make_memfd(bytes);
  ASSERT_GE(memfd, 0);
  auto server = fd_server::start(unique_name("memfd"), serve_map({{42, memfd}}));
  ASSERT_TRUE(server.has_value()) << server.error_value();
  EXPECT_EQ((*server)->name(), unique_name("memfd"));

  auto fd = request_fd((*server)->name(), 42, 5s);
  ASSERT_TRUE(fd.has_value()) << fd.error_value();
  EXPECT_NE(*fd, memfd);
  EXPECT_TRUE(same_file(*fd, memfd));
  EXPECT_EQ(read_back(*fd, bytes.size()), bytes);
  const int flags = ::fcntl(*fd, F_GETFD);
  ASSERT_GE(flags, 0) << std::strerror(errno);
  EXPECT_NE(flags & FD_CLOEXEC, 0) << "a received fd must not leak into exec'ed children";

  // The requester's copy is its own: closing it leaves the server's usable, and a second request
  // gets the same file again.
  ::close(*fd);
  auto again = request_fd((*server)->name(), 42, 5s);
  ASSERT_TRUE(again.has_value()) << again.error_value();
  EXPECT_EQ(read_back(*again, bytes.size()), bytes);
  ::close(*again);

  server->reset();
  EXPECT_GE(::fcntl(memfd, F_GETFD), 0) << "close_after_send was false: the server must not close the fd";
  ::close(memfd);
}

TEST(FdExchange, ClosesTheServedFdAfterSendingWhenAsked) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK), 0) << std::strerror(errno);
  const int read_end = pipe_fds[0];
  const int write_end = pipe_fds[1];
  auto server = fd_server::start(unique_name("close"), [&](std::uint64_t) -> result<fd_server::provided> {
    return fd_server::provided{write_end, true};
  });
  ASSERT_TRUE(server.has_value()) << server.error_value();

  auto fd = request_fd((*server)->name(), 1, 5s);
  ASSERT_TRUE(fd.has_value()) << fd.error_value();
  ASSERT_EQ(::write(*fd, "x", 1), 1) << "the received fd is the pipe's write end";
  ::close(*fd);
  server->reset();  // joins the server's thread, which closed its copy before it went back to poll
  // End-of-file only once every write end is closed (EAGAIN while one is open).
  char buffer[4];
  EXPECT_EQ(::read(read_end, buffer, sizeof buffer), 1);
  EXPECT_EQ(::read(read_end, buffer, sizeof buffer), 0) << "the server kept its copy of the write end";
  ::close(read_end);
}

TEST(FdExchange, AnUnknownKeyGetsTheProvidersErrorText) {
  const int memfd = make_memfd("x");
  ASSERT_GE(memfd, 0);
  auto server = fd_server::start(unique_name("unknown"), serve_map({{1, memfd}}));
  ASSERT_TRUE(server.has_value()) << server.error_value();

  auto fd = request_fd((*server)->name(), 7, 5s);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error_value().code(), errc::unavailable);
  EXPECT_EQ(fd.error_value().message(), "fd server '" + (*server)->name() + "': no buffer under key 7");

  // The server goes on answering after an error.
  auto good = request_fd((*server)->name(), 1, 5s);
  ASSERT_TRUE(good.has_value()) << good.error_value();
  ::close(*good);
  server->reset();
  ::close(memfd);
}

TEST(FdExchange, AProviderThatThrowsOrGivesNoFdIsTheRequestersError) {
  auto server = fd_server::start(unique_name("throws"), [](std::uint64_t key) -> result<fd_server::provided> {
    if (key == 1) throw std::runtime_error("boom");
    return fd_server::provided{-1, false};
  });
  ASSERT_TRUE(server.has_value()) << server.error_value();
  auto thrown = request_fd((*server)->name(), 1, 5s);
  ASSERT_FALSE(thrown.has_value());
  EXPECT_EQ(thrown.error_value().code(), errc::unavailable);
  EXPECT_NE(thrown.error_value().message().find("boom"), std::string::npos) << thrown.error_value();
  auto no_fd = request_fd((*server)->name(), 2, 5s);
  ASSERT_FALSE(no_fd.has_value());
  EXPECT_EQ(no_fd.error_value().code(), errc::unavailable);
  EXPECT_NE(no_fd.error_value().message().find("no valid fd for key 2"), std::string::npos) << no_fd.error_value();
}

TEST(FdExchange, NobodyServingTheNameIsUnavailableAtOnce) {
  const auto start = clock::now();
  auto fd = request_fd(unique_name("nobody"), 1, 10s);
  const auto took = clock::now() - start;
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error_value().code(), errc::unavailable) << fd.error_value();
  EXPECT_NE(fd.error_value().message().find(unique_name("nobody")), std::string::npos) << fd.error_value();
  EXPECT_LT(took, 1s) << "a refused connection must not wait for the timeout";
}

TEST(FdExchange, AStoppedServerIsUnavailable) {
  auto server = fd_server::start(unique_name("stopped"), serve_map({}));
  ASSERT_TRUE(server.has_value()) << server.error_value();
  const std::string name = (*server)->name();
  server->reset();
  auto fd = request_fd(name, 1, 5s);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error_value().code(), errc::unavailable) << fd.error_value();
}

TEST(FdExchange, NoAnswerInTimeIsATimeout) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto server = fd_server::start(unique_name("slow"), [released](std::uint64_t) -> result<fd_server::provided> {
    released.wait();  // until the requester has given up
    return error(errc::unavailable, "too late");
  });
  ASSERT_TRUE(server.has_value()) << server.error_value();

  const auto start = clock::now();
  auto fd = request_fd((*server)->name(), 1, 100ms);
  const auto took = clock::now() - start;
  release.set_value();
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error_value().code(), errc::timeout) << fd.error_value();
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 5s);
}

TEST(FdExchange, BadNamesAreRefused) {
  const std::string too_long(200, 'n');
  auto server = fd_server::start(too_long, serve_map({}));
  ASSERT_FALSE(server.has_value());
  EXPECT_EQ(server.error_value().code(), errc::invalid_argument);
  EXPECT_NE(server.error_value().message().find("at most 107"), std::string::npos) << server.error_value();
  auto empty = fd_server::start("", serve_map({}));
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error_value().code(), errc::invalid_argument);
  auto fd = request_fd(too_long, 1, 1s);
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error_value().code(), errc::invalid_argument);

  // 107 bytes is the longest name, and it works end to end.
  const std::string longest = unique_name("") + std::string(107 - unique_name("").size(), 'l');
  const int memfd = make_memfd("longest");
  ASSERT_GE(memfd, 0);
  auto served = fd_server::start(longest, serve_map({{3, memfd}}));
  ASSERT_TRUE(served.has_value()) << served.error_value();
  auto got = request_fd(longest, 3, 5s);
  ASSERT_TRUE(got.has_value()) << got.error_value();
  EXPECT_EQ(read_back(*got, 7), "longest");
  ::close(*got);
  served->reset();
  ::close(memfd);
}

TEST(FdExchange, ANameServedTwiceIsRefused) {
  auto first = fd_server::start(unique_name("twice"), serve_map({}));
  ASSERT_TRUE(first.has_value()) << first.error_value();
  auto second = fd_server::start(unique_name("twice"), serve_map({}));
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error_value().code(), errc::invalid_argument) << second.error_value();
  EXPECT_NE(second.error_value().message().find("already served"), std::string::npos) << second.error_value();
}

TEST(FdExchange, BrokenClientsDoNotStopTheServer) {
  const int memfd = make_memfd("still here");
  ASSERT_GE(memfd, 0);
  auto server = fd_server::start(unique_name("broken"), serve_map({{5, memfd}}));
  ASSERT_TRUE(server.has_value()) << server.error_value();
  const std::string& name = (*server)->name();

  // Queued first: one that sends nothing and stays connected, one that sends 3 bytes, one that
  // sends 16, and one that hangs up at once.
  const int silent = raw_connect(name);
  const int short_request = raw_connect(name);
  const int long_request = raw_connect(name);
  const int gone = raw_connect(name);
  ASSERT_GE(silent, 0);
  ASSERT_GE(short_request, 0);
  ASSERT_GE(long_request, 0);
  ASSERT_GE(gone, 0);
  ASSERT_EQ(::send(short_request, "abc", 3, MSG_NOSIGNAL), 3);
  const std::array<char, 16> sixteen{};
  ASSERT_EQ(::send(long_request, sixteen.data(), sixteen.size(), MSG_NOSIGNAL), 16);
  ::close(gone);

  // The silent one costs the server its read limit, then the good request behind all of them is
  // answered.
  auto fd = request_fd(name, 5, fd_server::k_request_read_limit + 10s);
  ASSERT_TRUE(fd.has_value()) << fd.error_value();
  EXPECT_EQ(read_back(*fd, 10), "still here");
  ::close(*fd);

  // Each broken client was dropped without an answer (they were served before the good one).
  EXPECT_TRUE(hung_up_without_answer(silent, 5s));
  EXPECT_TRUE(hung_up_without_answer(short_request, 5s));
  EXPECT_TRUE(hung_up_without_answer(long_request, 5s));
  ::close(silent);
  ::close(short_request);
  ::close(long_request);
  server->reset();
  ::close(memfd);
}

// Another user's processes (a child that became uid 65534): their request is refused, and 30 silent
// connections of theirs do not hold the server from answering its own user at once.
TEST(FdExchange, AnotherUsersConnectionsAreDroppedAtOnce) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to start a process of another uid";
  const std::string name = unique_name("users");
  int go[2];
  int ready[2];
  int done[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  // The child is forked before the server's thread exists, and waits for it.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes: 0 refused as it must be, 1 not refused, 2 could not become another user.
    char byte = 0;
    if (::read(go[0], &byte, 1) != 1) ::_exit(3);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    const auto asked = request_fd(name, 5, 2s);
    std::vector<int> silent;
    for (int i = 0; i < 30; ++i) silent.push_back(raw_connect(name));
    (void)!::write(ready[1], &byte, 1);
    (void)!::read(done[0], &byte, 1);  // until the parent is done
    ::_exit(asked.has_value() ? 1 : 0);
  }
  const int memfd = make_memfd("mine only");
  ASSERT_GE(memfd, 0);
  auto server = fd_server::start(name, serve_map({{5, memfd}}));
  ASSERT_TRUE(server.has_value()) << server.error_value();
  char byte = 0;
  ASSERT_EQ(::write(go[1], &byte, 1), 1);
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  // Were the silent connections served in turn, each would hold the server for its read limit.
  auto fd = request_fd(name, 5, 3s);
  ASSERT_EQ(::write(done[1], &byte, 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(fd.has_value()) << fd.error_value();
  EXPECT_EQ(read_back(*fd, 9), "mine only");
  ::close(*fd);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the other user's request was answered (1) or it could not switch users (2)";
  for (int p : {go[0], go[1], ready[0], ready[1], done[0], done[1]}) ::close(p);
  server->reset();
  ::close(memfd);
}

TEST(FdExchange, StopsPromptlyWhenIdleOrWhileAClientIsSilent) {
  auto idle = fd_server::start(unique_name("idle"), serve_map({}));
  ASSERT_TRUE(idle.has_value()) << idle.error_value();
  auto start = clock::now();
  idle->reset();
  EXPECT_LT(clock::now() - start, 500ms);

  auto busy = fd_server::start(unique_name("busy"), serve_map({}));
  ASSERT_TRUE(busy.has_value()) << busy.error_value();
  const int silent = raw_connect((*busy)->name());
  ASSERT_GE(silent, 0);
  start = clock::now();
  busy->reset();
  EXPECT_LT(clock::now() - start, fd_server::k_request_read_limit / 2)
      << "the destructor must not wait out a silent client's read limit";
  EXPECT_TRUE(hung_up_without_answer(silent, 5s));
  ::close(silent);
}

TEST(FdExchange, ConcurrentRequestersEachGetTheirOwnFile) {
  constexpr int k_threads = 8;
  constexpr int k_requests = 25;
  std::map<std::uint64_t, int> fds;
  for (int t = 0; t < k_threads; ++t) {
    const int fd = make_memfd("payload of key " + std::to_string(t));
    ASSERT_GE(fd, 0);
    fds[static_cast<std::uint64_t>(t)] = fd;
  }
  auto server = fd_server::start(unique_name("concurrent"), serve_map(fds));
  ASSERT_TRUE(server.has_value()) << server.error_value();

  // Failures are collected per thread and asserted here, on the test's thread.
  std::vector<std::vector<std::string>> failures(k_threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      const std::string expected = "payload of key " + std::to_string(t);
      for (int i = 0; i < k_requests; ++i) {
        auto fd = request_fd((*server)->name(), static_cast<std::uint64_t>(t), 10s);
        if (!fd.has_value()) {
          failures[t].push_back(fd.error_value().describe());
          continue;
        }
        if (const auto got = read_back(*fd, expected.size() + 8); got != expected) {
          failures[t].push_back("read '" + got + "'");
        }
        if (!same_file(*fd, fds.at(static_cast<std::uint64_t>(t)))) failures[t].push_back("a different file");
        ::close(*fd);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < k_threads; ++t) {
    EXPECT_TRUE(failures[t].empty()) << "thread " << t << ": " << failures[t].size() << " failures, first "
                                     << (failures[t].empty() ? "" : failures[t].front());
  }
  server->reset();
  for (const auto& [key, fd] : fds) ::close(fd);
}

}  // namespace
}  // namespace atomr::cluster::detail
