#include "agent/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "agent/http_wire.h"

namespace collscope::agent {
namespace {

// How long a connection may linger after its response so that request bytes still in flight
// (a body nobody reads, the rest of an oversized head) are drained rather than answered with a
// reset that could destroy the response before the client reads it.
constexpr int kLingerMs = 200;
constexpr size_t kMaxLingerBytes = size_t{64} << 10;

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 201:
      return "Created";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

HttpReply TextReply(int status, std::string text) {
  HttpReply reply;
  reply.status = status;
  reply.body = std::move(text) + "\n";
  return reply;
}

void Linger(int fd, int wake_fd) {
  shutdown(fd, SHUT_WR);
  const Deadline deadline = DeadlineAfter(kLingerMs);
  std::string sink;
  size_t drained = 0;
  while (drained < kMaxLingerBytes) {
    sink.clear();
    Result<size_t> n = ReceiveSome(fd, &sink, 16 << 10, deadline, wake_fd);
    if (!n.ok() || *n == 0) return;
    drained += *n;
  }
}

void Wake(int fd) {
  const char byte = 1;
  while (write(fd, &byte, 1) < 0 && errno == EINTR) {
  }
}

}  // namespace

HttpServer::HttpServer(HttpServerOptions options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Handle(std::string path, HttpHandler handler) {
  std::lock_guard lock(handlers_mu_);
  handlers_[std::move(path)] = std::move(handler);
}

void HttpServer::HandlePut(std::string prefix, HttpHandler handler) {
  std::lock_guard lock(handlers_mu_);
  put_handlers_[std::move(prefix)] = std::move(handler);
}

Status HttpServer::Start() {
  std::lock_guard lock(stop_mu_);
  if (thread_.joinable()) return Status::IOError("HTTP server already started");
  const std::string where = options_.address + ":" + std::to_string(options_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options_.port);
  if (int rc = getaddrinfo(options_.address.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status::IOError("cannot resolve listen address " + where + ": " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  const addrinfo* a = addresses.get();
  UniqueFd listener(
      socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
  if (!listener.valid()) return SystemError("socket for " + where, errno);
  const int one = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listener.get(), a->ai_addr, a->ai_addrlen) != 0)
    return SystemError("bind " + where, errno);
  if (listen(listener.get(), 128) != 0) return SystemError("listen on " + where, errno);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return SystemError("getsockname for " + where, errno);
  }
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return SystemError("pipe", errno);
  wake_read_.Reset(pipe_fds[0]);
  wake_write_.Reset(pipe_fds[1]);
  listener_ = std::move(listener);
  try {
    thread_ = std::thread(&HttpServer::Serve, this);
  } catch (const std::system_error& e) {
    listener_.Reset();
    return Status::IOError(std::string("cannot start the HTTP server thread: ") + e.what());
  }
  return Status::Ok();
}

void HttpServer::Stop() {
  std::lock_guard lock(stop_mu_);
  if (!thread_.joinable()) return;
  Wake(wake_write_.get());
  thread_.join();
  listener_.Reset();
  wake_read_.Reset();
  wake_write_.Reset();
}

void HttpServer::Serve() {
  for (;;) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno != EINTR) poll(&fds[1], 1, 100);  // a transient failure (ENOMEM): don't spin
      continue;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory: the pending connection stays queued, so back off briefly
      // rather than spin on it.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        poll(&fds[1], 1, 100);
      }
      continue;
    }
    ServeConnection(UniqueFd(fd));
  }
}

void HttpServer::ServeConnection(UniqueFd connection) {
  const int fd = connection.get();
  const int wake_fd = wake_read_.get();
  std::string buffer;
  HeadFailure failure = HeadFailure::kNone;
  Result<size_t> head_length = ReadHead(fd, &buffer, options_.max_head_bytes,
                                        DeadlineAfter(options_.read_timeout_ms), wake_fd, &failure);
  if (!head_length.ok()) {
    if (failure == HeadFailure::kTooLarge) {
      Reply(fd,
            TextReply(431, "request head larger than " + std::to_string(options_.max_head_bytes) +
                               " bytes"),
            false, "");
      Linger(fd, wake_fd);
    } else if (failure == HeadFailure::kTimedOut) {
      Reply(fd,
            TextReply(408, "request not received within " +
                               std::to_string(options_.read_timeout_ms) + " ms"),
            false, "");
    }
    return;
  }
  auto refuse = [&](int status, std::string text, std::string_view extra_headers = "") {
    Reply(fd, TextReply(status, std::move(text)), false, extra_headers);
    Linger(fd, wake_fd);
  };
  Result<HttpHead> head = ParseHead(std::string_view(buffer).substr(0, *head_length));
  if (!head.ok()) return refuse(400, head.status().message());
  const std::string& line = head->start_line;
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos) {
    return refuse(400, "malformed request line");
  }
  HttpServerRequest request;
  request.method = line.substr(0, sp1);
  const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string version = line.substr(sp2 + 1);
  if (!IsHttpToken(request.method)) return refuse(400, "malformed method");
  if (version.rfind("HTTP/", 0) != 0) return refuse(400, "malformed HTTP version");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return refuse(505, "only HTTP/1.x is served");
  if (target.empty() || target.front() != '/') return refuse(400, "the target must be a path");
  const size_t question = target.find('?');
  request.path = target.substr(0, question);
  if (question != std::string::npos) request.query = target.substr(question + 1);
  if (request.method == "PUT") {
    HttpHandler handler;
    {
      std::lock_guard lock(handlers_mu_);
      for (const auto& [prefix, h] : put_handlers_)
        if (request.path.rfind(prefix, 0) == 0) handler = h;
    }
    if (!handler) return refuse(405, "no PUT is served here", "Allow: GET, HEAD\r\n");
    const std::string* length = FindHeader(head->headers, "Content-Length");
    if (!length || FindHeader(head->headers, "Transfer-Encoding"))
      return refuse(411, "a PUT needs a Content-Length (chunked bodies are not read)");
    size_t bytes = 0;
    if (length->empty() || length->size() > 19 || length->find_first_not_of("0123456789") != std::string::npos)
      return refuse(400, "malformed Content-Length");
    bytes = static_cast<size_t>(std::stoull(*length));
    if (bytes > options_.max_body_bytes)
      return refuse(413, "body larger than " + std::to_string(options_.max_body_bytes) + " bytes");
    request.body = buffer.substr(*head_length);
    if (request.body.size() > bytes) return refuse(400, "more bytes than the Content-Length");
    const Deadline deadline = DeadlineAfter(options_.body_timeout_ms);
    while (request.body.size() < bytes) {
      Result<size_t> n = ReceiveSome(fd, &request.body, bytes - request.body.size(), deadline, wake_fd);
      if (!n.ok() || *n == 0) {
        return Reply(fd, TextReply(408, "body not received within " + std::to_string(options_.body_timeout_ms) + " ms"),
                     false, "");
      }
    }
    HttpReply reply;
    try {
      reply = handler(request);
    } catch (const std::exception& e) {
      reply = TextReply(500, std::string("handler failed: ") + e.what());
    } catch (...) {
      reply = TextReply(500, "handler failed");
    }
    if (reply.status < 200 || reply.status > 599 || !IsValidFieldValue(reply.content_type))
      reply = TextReply(500, "handler returned a bad status or content type");
    return Reply(fd, reply, false, "");
  }
  if (request.method != "GET" && request.method != "HEAD") {
    return refuse(405, "only GET and HEAD are served", "Allow: GET, HEAD\r\n");
  }
  Reply(fd, Dispatch(request), request.method == "HEAD", "");
  // A GET or HEAD normally has no body; if the client sent one anyway, drain it.
  if (buffer.size() > *head_length || FindHeader(head->headers, "Content-Length") ||
      FindHeader(head->headers, "Transfer-Encoding")) {
    Linger(fd, wake_fd);
  }
}

HttpReply HttpServer::Dispatch(const HttpServerRequest& request) {
  HttpHandler handler;
  {
    std::lock_guard lock(handlers_mu_);
    auto it = handlers_.find(request.path);
    if (it == handlers_.end()) return TextReply(404, "no such path");
    handler = it->second;
  }
  HttpReply reply;
  try {
    reply = handler(request);
  } catch (const std::exception& e) {
    return TextReply(500, std::string("handler failed: ") + e.what());
  } catch (...) {
    return TextReply(500, "handler failed");
  }
  if (reply.status < 200 || reply.status > 599) {
    return TextReply(500, "handler returned status " + std::to_string(reply.status));
  }
  if (!IsValidFieldValue(reply.content_type)) {
    return TextReply(500, "handler returned a content type with control characters");
  }
  return reply;
}

void HttpServer::Reply(int fd, const HttpReply& reply, bool head_only,
                       std::string_view extra_headers) {
  std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " " +
                    std::string(ReasonPhrase(reply.status)) + "\r\n";
  if (!reply.content_type.empty()) out += "Content-Type: " + reply.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\nConnection: close\r\n";
  out += extra_headers;
  out += "\r\n";
  if (!head_only) out += reply.body;
  // A client that does not read its response loses it when the write deadline passes.
  SendAll(fd, out, DeadlineAfter(options_.write_timeout_ms), wake_read_.get()).IgnoreError();
}

}  // namespace collscope::agent
