// A loopback TCP peer for the agent's client-side tests: it accepts connections one after
// another, records each request (its head and a Content-Length body), and answers it with the
// next scripted reply, sent byte for byte (the last reply is repeated once the script runs out).
// Scripting raw bytes lets a test play a server that chunks, closes early, stalls or lies,
// which no real server does on demand. Test-only; binds 127.0.0.1.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace collscope::agent::testing {

struct ScriptedReply {
  std::string bytes;  // sent as they are, then the connection is closed
  int delay_ms = 0;   // waited after reading the request, before answering
};

inline ScriptedReply StatusReply(int status, std::string body = "") {
  return {"HTTP/1.1 " + std::to_string(status) + " Scripted\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body,
          0};
}

class ScriptedPeer {
 public:
  explicit ScriptedPeer(std::vector<ScriptedReply> script) : script_(std::move(script)) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(listen(listener_, 16), 0);
    EXPECT_EQ(getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &len), 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }

  ~ScriptedPeer() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }

  uint16_t port() const { return port_; }
  std::string url(const std::string& target) const {
    return "http://127.0.0.1:" + std::to_string(port_) + target;
  }
  std::vector<std::string> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  size_t connections() const { return connections_; }

 private:
  // Waits for `fd` to be readable in short slices, so that the destructor is never kept waiting.
  bool Readable(int fd, std::chrono::steady_clock::time_point until) {
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) > 0) return true;
    }
    return false;
  }

  std::string ReadRequest(int fd) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::string request;
    size_t wanted = std::string::npos;
    char buffer[16384];
    while (request.size() < wanted && Readable(fd, until)) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      request.append(buffer, static_cast<size_t>(n));
      const size_t head_end = request.find("\r\n\r\n");
      if (wanted == std::string::npos && head_end != std::string::npos) {
        wanted = head_end + 4;
        std::string head = request.substr(0, head_end);
        for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (size_t at = head.find("\r\ncontent-length:"); at != std::string::npos) {
          wanted += std::stoul(head.substr(at + 17));
        }
      }
    }
    return request;
  }

  void Serve() {
    size_t next = 0;
    while (!stop_) {
      if (!Readable(listener_, std::chrono::steady_clock::time_point::max())) continue;
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++connections_;
      std::string request = ReadRequest(fd);
      {
        std::lock_guard lock(mu_);
        requests_.push_back(std::move(request));
      }
      const ScriptedReply& reply = script_[std::min(next++, script_.size() - 1)];
      const auto answer_at =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(reply.delay_ms);
      while (!stop_ && std::chrono::steady_clock::now() < answer_at) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      for (size_t sent = 0; sent < reply.bytes.size();) {
        const ssize_t n =
            send(fd, reply.bytes.data() + sent, reply.bytes.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      close(fd);
    }
  }

  const std::vector<ScriptedReply> script_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> connections_{0};
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
};

}  // namespace collscope::agent::testing
