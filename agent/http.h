// A minimal HTTP/1.1 client over POSIX sockets, for what the agent pushes (Prometheus remote
// write, Alertmanager alerts, webhooks) and what its tests query.
//
// Contract:
// * Plain `http://host[:port][/path][?query]` only. `https://`, other schemes, credentials in the
//   URL and malformed ports are refused with a Status that says so; nothing is sent for them.
// * One request per connection (`Connection: close`). The whole exchange, connecting included,
//   ends by the deadline; name resolution (getaddrinfo) is the one step it cannot bound, and a
//   numeric address needs none.
// * The client sets Host, Connection, Content-Length and, unless the caller gives one, User-Agent;
//   a caller's header that would override the first three, or whose name or value could split
//   the request (CR, LF, NUL), is refused.
// * A response is returned whatever its status code (a 500 is a response, not an error). Its body
//   is framed by chunked transfer coding, Content-Length, or the connection's close, and is
//   refused past kMaxResponseBodyBytes; interim 1xx responses are skipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/http_wire.h"
#include "agent/socket_io.h"
#include "core/status.h"

namespace collscope::agent {

inline constexpr size_t kMaxResponseHeadBytes = size_t{64} << 10;
inline constexpr size_t kMaxResponseBodyBytes = size_t{64} << 20;

struct HttpUrl {
  std::string host;  // without the brackets of an IPv6 literal
  uint16_t port = 80;
  std::string target;  // path and query, at least "/"
};

Result<HttpUrl> ParseHttpUrl(std::string_view url);

struct HttpResponse {
  int status = 0;
  std::string reason;
  HttpHeaders headers;
  std::string body;  // decoded from the chunked coding when the server used it

  const std::string* header(std::string_view name) const { return FindHeader(headers, name); }
};

Result<HttpResponse> HttpRequest(std::string_view method, std::string_view url,
                                 const HttpHeaders& headers, std::string_view body, int timeout_ms);

// As HttpRequest, with an absolute deadline, and ending early with an error once `cancel_fd`
// (when >= 0) becomes readable: a sender that must stop promptly passes its wake pipe.
Result<HttpResponse> HttpRequestUntil(std::string_view method, std::string_view url,
                                      const HttpHeaders& headers, std::string_view body,
                                      Deadline deadline, int cancel_fd);

}  // namespace collscope::agent
