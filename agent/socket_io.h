// Deadline-bounded I/O on non-blocking sockets, shared by the agent's HTTP client and server.
//
// Contract: every wait ends by its deadline, so a peer that stops talking cannot hold a thread;
// and when a wake descriptor is given (fd >= 0), a wait also ends as soon as it becomes readable,
// so a server or sender can be stopped in the middle of a slow exchange. Sends never raise
// SIGPIPE. A failure is a Status whose message says which of these happened ("timed out",
// "interrupted") or carries the system error text.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace collscope::agent {

using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

Deadline DeadlineAfter(int timeout_ms);

// Owns one file descriptor and closes it when destroyed.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// An error reading "<what>: <the system's text for errno `err`>".
Status SystemError(std::string_view what, int err);

// Waits until `fd` has any of `events` (POLLIN, POLLOUT) pending.
Status WaitFor(int fd, short events, Deadline deadline, int wake_fd = -1);

// Writes all of `data`.
Status SendAll(int fd, std::string_view data, Deadline deadline, int wake_fd = -1);

// Appends to `*buffer` what has arrived, at most `max_bytes`, waiting for at least one byte.
// Returns the number appended; 0 means the peer closed its side.
Result<size_t> ReceiveSome(int fd, std::string* buffer, size_t max_bytes, Deadline deadline,
                           int wake_fd = -1);

}  // namespace collscope::agent
