// Hands file descriptors between processes of one machine: a server answers requests for a 64-bit
// key with an fd passed by SCM_RIGHTS over an abstract-namespace Unix socket. This is how ranks of
// one node share a CUDA memory pool's POSIX-fd handle (cuMemPoolExportToShareableHandle) for CUDA
// IPC: such an fd means nothing in another process unless the kernel duplicates it there.
//
// Wire protocol (SOCK_SEQPACKET, so every message arrives whole or not at all):
//   request: the 8-byte key, native byte order (both ends are on this machine).
//   reply:   a reply header {u32 status, u32 message length}, then on error the message text; on
//            success the fd rides on the header as the one SCM_RIGHTS control message.
// A connection carries one request and one answer, then the server closes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "atomr/common/log_budget.hpp"
#include "atomr/common/result.hpp"

namespace atomr::cluster::detail {

// Serves file descriptors to other processes of this machine over an abstract-namespace Unix
// socket named by `name` (no file on disk; the name is per network namespace). Only processes of
// this server's effective uid are answered: an abstract socket has no file permissions to stop
// anyone else from connecting, so others are dropped as soon as they connect (unanswered).
class fd_server {
 public:
  // `provide(key)` returns the fd to send for a request with that 64-bit key (the requester gets
  // its own descriptor of the same open file; the server closes `fd` after sending, whether or not
  // the send worked, only if `close_after_send`), or an error, whose message goes back to the
  // requester as text. It runs on the server's thread, one request at a time.
  struct provided {
    int fd;
    bool close_after_send;
  };
  using provider = std::function<result<provided>(std::uint64_t key)>;

  // Binds the name and starts the server's thread. Errors: invalid_argument for an empty or too
  // long name or one another socket already serves; others for a failed system call.
  static result<std::unique_ptr<fd_server>> start(std::string name, provider provide);
  // Stops the thread (promptly, even while a client is connected) and closes the socket.
  ~fd_server();
  fd_server(const fd_server&) = delete;
  fd_server& operator=(const fd_server&) = delete;

  const std::string& name() const { return name_; }

  // How long the server waits for a connected client's key before dropping it: a silent client
  // delays the requests queued behind it by at most this much.
  static constexpr std::chrono::milliseconds k_request_read_limit{1000};

 private:
  fd_server(std::string name, provider provide, int listen_fd, int stop_fd);
  void run();
  void serve_one(int conn);

  std::string name_;
  provider provide_;
  int listen_fd_;
  int stop_fd_;  // an eventfd; readable once the destructor wants the thread to stop
  // Lines about clients that misbehave, which any local process can be: other users' connections
  // (one line per 10 s), silent or malformed requests (10 a second).
  log_budget refused_log_{1, std::chrono::seconds(10)};
  log_budget bad_request_log_{10, std::chrono::seconds(1)};
  std::thread thread_;
};

// Asks the server `name` for the fd under `key`; the caller owns the returned fd (close-on-exec).
// Errors: unavailable (no such server / connection refused / it hung up), timeout (no answer
// within `timeout`), invalid_argument (a bad name), protocol (a malformed answer), and the server's
// own error text (errc::unavailable, message prefixed with the server name).
result<int> request_fd(const std::string& name, std::uint64_t key, std::chrono::milliseconds timeout);

}  // namespace atomr::cluster::detail
