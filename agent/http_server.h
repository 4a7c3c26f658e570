// A minimal HTTP/1.1 server for what the agent exposes (/metrics, health, findings): GET and HEAD
// on exact paths, PUT under registered prefixes (an aggregator's record-summary uploads), one
// thread, one request per connection.
//
// Contract:
// * It binds only the address it is given (127.0.0.1 unless told otherwise); port 0 picks a free
//   one, which port() returns once Start has succeeded.
// * A path with no handler is 404; a method other than GET or HEAD is 405 (with Allow), and so is
//   a PUT to a path under no PUT prefix; a head larger than max_head_bytes is 431; a malformed
//   request is 400; a request whose head has not arrived within read_timeout_ms of the connection
//   is 408. HEAD answers as GET without the body.
// * A PUT body is framed by Content-Length only (411 without one, chunked included), at most
//   max_body_bytes (413 above), and must arrive within body_timeout_ms of its head (408).
// * Connections are served one at a time on the server's own thread, and each is bounded in time
//   (read_timeout_ms to send its request, write_timeout_ms to take the response), so a slow or
//   hostile client delays others by at most that and can never wedge the server.
// * Handlers run on the server's thread, one at a time; they must not call Stop. A handler that
//   throws, or returns a status outside 200-599 or a content type with control characters,
//   yields a 500 and the server goes on.
// * Stop() wakes the thread even in the middle of a slow exchange and joins it; it is idempotent
//   and called by the destructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "agent/socket_io.h"
#include "core/status.h"

namespace collscope::agent {

struct HttpServerRequest {
  std::string method;  // GET, HEAD or PUT
  std::string path;    // without the query
  std::string query;   // after '?', undecoded; empty when absent
  std::string body;    // a PUT's
};

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpReply(const HttpServerRequest&)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;
  size_t max_head_bytes = size_t{64} << 10;
  int read_timeout_ms = 5000;
  int write_timeout_ms = 5000;
  size_t max_body_bytes = size_t{256} << 20;
  int body_timeout_ms = 60000;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves `path` (exact match, e.g. "/metrics") with `handler`, replacing any earlier one. May
  // be called before or after Start.
  void Handle(std::string path, HttpHandler handler);
  // Serves PUT to every path that starts with `prefix` (e.g. "/summaries/") with `handler`.
  void HandlePut(std::string prefix, HttpHandler handler);

  Status Start();
  uint16_t port() const { return port_; }
  void Stop();

 private:
  void Serve();
  void ServeConnection(UniqueFd connection);
  HttpReply Dispatch(const HttpServerRequest& request);
  void Reply(int fd, const HttpReply& reply, bool head_only, std::string_view extra_headers);

  const HttpServerOptions options_;
  uint16_t port_ = 0;
  UniqueFd listener_;
  UniqueFd wake_read_, wake_write_;
  std::thread thread_;
  std::mutex stop_mu_;
  std::mutex handlers_mu_;
  std::map<std::string, HttpHandler, std::less<>> handlers_;
  std::map<std::string, HttpHandler, std::less<>> put_handlers_;  // by path prefix
};

}  // namespace collscope::agent
