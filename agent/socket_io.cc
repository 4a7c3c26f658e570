#include "agent/socket_io.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace collscope::agent {

Deadline DeadlineAfter(int timeout_ms) {
  return SteadyClock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) Reset(other.Release());
  return *this;
}

int UniqueFd::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

Status SystemError(std::string_view what, int err) {
  // std::system_category is thread-safe where strerror is not.
  return Status::IOError(std::string(what) + ": " + std::system_category().message(err));
}

Status WaitFor(int fd, short events, Deadline deadline, int wake_fd) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) return Status::IOError("timed out");
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int n = poll(fds, wake_fd >= 0 ? 2 : 1, static_cast<int>(left.count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      return SystemError("poll", errno);
    }
    if (n == 0) continue;  // the loop head decides whether the deadline has really passed
    if (wake_fd >= 0 && fds[1].revents != 0) return Status::IOError("interrupted");
    // POLLERR and POLLHUP count as ready: the read or write that follows reports what happened.
    if (fds[0].revents != 0) return Status::Ok();
  }
}

Status SendAll(int fd, std::string_view data, Deadline deadline, int wake_fd) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      COLLSCOPE_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, wake_fd));
      continue;
    }
    return SystemError("send", n < 0 ? errno : EPIPE);
  }
  return Status::Ok();
}

Result<size_t> ReceiveSome(int fd, std::string* buffer, size_t max_bytes, Deadline deadline,
                           int wake_fd) {
  const size_t old_size = buffer->size();
  buffer->resize(old_size + max_bytes);
  for (;;) {
    const ssize_t n = recv(fd, buffer->data() + old_size, max_bytes, 0);
    if (n >= 0) {
      buffer->resize(old_size + static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (Status st = WaitFor(fd, POLLIN, deadline, wake_fd); !st.ok()) {
        buffer->resize(old_size);
        return st;
      }
      continue;
    }
    const int err = errno;
    buffer->resize(old_size);
    return SystemError("recv", err);
  }
}

}  // namespace collscope::agent
