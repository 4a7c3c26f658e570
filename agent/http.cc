#include "agent/http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <memory>
#include <optional>
#include <string>

namespace collscope::agent {
namespace {

constexpr size_t kReceiveChunkBytes = size_t{64} << 10;
constexpr size_t kMaxChunkLineBytes = 4096;
constexpr std::string_view kDefaultUserAgent = "collscope-agent/0.1.0";

std::string Lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsValidHostText(std::string_view host) {
  return std::all_of(host.begin(), host.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u < 0x7f && c != '/' && c != '?' && c != '#' && c != '@' && c != '[' &&
           c != ']';
  });
}

Result<uint16_t> ParsePort(std::string_view text, std::string_view url) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || text.size() > 5 || ec != std::errc() || end != text.data() + text.size() ||
      value == 0 || value > 65535) {
    return Status::InvalidArgument("bad port \"" + std::string(text) + "\" in URL " + std::string(url));
  }
  return static_cast<uint16_t>(value);
}

Result<UniqueFd> Connect(const HttpUrl& url, Deadline deadline, int cancel_fd) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(url.port);
  if (int rc = getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status::IOError("cannot resolve " + url.host + ": " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  const std::string where = url.host + ":" + port;
  Status last = Status::IOError("no address for " + url.host);
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    UniqueFd fd(
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = SystemError("socket", errno);
      continue;
    }
    if (connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) return fd;
    if (errno != EINPROGRESS) {
      last = SystemError("connect to " + where, errno);
      continue;
    }
    if (Status st = WaitFor(fd.get(), POLLOUT, deadline, cancel_fd); !st.ok()) {
      return st.WithPrefix("connect to " + where + ": ");
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == 0) return fd;
    last = SystemError("connect to " + where, err);
  }
  return last;
}

// The bytes of one response as they arrive, consumed from the front.
class ResponseStream {
 public:
  ResponseStream(int fd, Deadline deadline, int cancel_fd)
      : fd_(fd), deadline_(deadline), cancel_fd_(cancel_fd) {}

  std::string& buffer() { return buffer_; }
  std::string_view unread() const { return std::string_view(buffer_).substr(pos_); }
  void Consume(size_t n) { pos_ += n; }

  // Reads more; false once the server has closed the connection.
  Result<bool> More() {
    if (closed_) return false;
    if (pos_ > kReceiveChunkBytes) {
      buffer_.erase(0, pos_);
      pos_ = 0;
    }
    Result<size_t> n = ReceiveSome(fd_, &buffer_, kReceiveChunkBytes, deadline_, cancel_fd_);
    if (!n.ok()) return n.status();
    closed_ = *n == 0;
    return !closed_;
  }

  // One line without its CR LF (or bare LF).
  Result<std::string> Line(std::string_view what) {
    for (;;) {
      const std::string_view u = unread();
      if (size_t nl = u.find('\n'); nl != std::string_view::npos) {
        std::string line(u.substr(0, nl));
        if (!line.empty() && line.back() == '\r') line.pop_back();
        Consume(nl + 1);
        return line;
      }
      if (u.size() > kMaxChunkLineBytes) return Status::Corruption(std::string(what) + " line too long");
      Result<bool> more = More();
      if (!more.ok()) return more.status();
      if (!*more) return Status::IOError("connection closed in the middle of " + std::string(what));
    }
  }

  // Waits until `n` unread bytes have arrived.
  Status Need(size_t n, std::string_view what) {
    while (unread().size() < n) {
      Result<bool> more = More();
      if (!more.ok()) return more.status();
      if (!*more) {
        return Status::IOError("connection closed after " + std::to_string(unread().size()) + " of " +
                             std::to_string(n) + " bytes of " + std::string(what));
      }
    }
    return Status::Ok();
  }

 private:
  int fd_;
  Deadline deadline_;
  int cancel_fd_;
  std::string buffer_;
  size_t pos_ = 0;
  bool closed_ = false;
};

Status BodyTooLarge() {
  return Status::Corruption("response body larger than " + std::to_string(kMaxResponseBodyBytes) +
                       " bytes");
}

Status ReadChunkedBody(ResponseStream& in, std::string* body) {
  for (;;) {
    Result<std::string> line = in.Line("chunk size");
    if (!line.ok()) return line.status();
    std::string_view size_text(*line);
    size_text = size_text.substr(0, size_text.find_first_of("; \t"));  // chunk extensions
    uint64_t size = 0;
    const auto [end, ec] =
        std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
    if (size_text.empty() || ec != std::errc() || end != size_text.data() + size_text.size()) {
      return Status::Corruption("bad chunk size line \"" + line->substr(0, 64) + "\"");
    }
    if (size == 0) break;
    if (size > kMaxResponseBodyBytes - body->size()) return BodyTooLarge();
    COLLSCOPE_RETURN_IF_ERROR(in.Need(size + 1, "a chunk"));
    body->append(in.unread().substr(0, size));
    in.Consume(size);
    Result<std::string> rest = in.Line("chunk end");
    if (!rest.ok()) return rest.status();
    if (!rest->empty()) return Status::Corruption("chunk longer than its size line says");
  }
  // Trailer fields carry nothing the agent uses; they end with an empty line.
  size_t trailer_bytes = 0;
  for (;;) {
    Result<std::string> line = in.Line("trailer");
    if (!line.ok()) return line.status();
    if (line->empty()) return Status::Ok();
    trailer_bytes += line->size();
    if (trailer_bytes > kMaxResponseHeadBytes) return Status::Corruption("response trailer too large");
  }
}

Result<uint64_t> ParseContentLength(const HttpHeaders& headers) {
  std::string value;
  for (const auto& [name, v] : headers) {
    if (!EqualsIgnoringCase(name, "Content-Length")) continue;
    if (!value.empty() && v != value) return Status::Corruption("conflicting Content-Length fields");
    value = v;
  }
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
    return Status::Corruption("bad Content-Length \"" + value.substr(0, 64) + "\"");
  }
  return n;
}

Status ReadBody(ResponseStream& in, std::string_view method, HttpResponse* response) {
  if (method == "HEAD" || response->status == 204 || response->status == 304) return Status::Ok();
  if (const std::string* coding = response->header("Transfer-Encoding")) {
    std::string last = Lowercase(*coding);  // the coding applied last frames the message
    if (const size_t comma = last.rfind(','); comma != std::string::npos) last.erase(0, comma + 1);
    last.erase(0, last.find_first_not_of(" \t"));
    last.erase(last.find_last_not_of(" \t") + 1);
    if (last == "chunked") return ReadChunkedBody(in, &response->body);
    // Any other final coding is framed by the close of the connection (RFC 9112 6.3).
  } else if (response->header("Content-Length")) {
    Result<uint64_t> length = ParseContentLength(response->headers);
    if (!length.ok()) return length.status();
    if (*length > kMaxResponseBodyBytes) return BodyTooLarge();
    COLLSCOPE_RETURN_IF_ERROR(in.Need(*length, "the body"));
    response->body = std::string(in.unread().substr(0, *length));
    return Status::Ok();
  }
  for (;;) {
    if (in.unread().size() > kMaxResponseBodyBytes) return BodyTooLarge();
    Result<bool> more = in.More();
    if (!more.ok()) return more.status();
    if (!*more) break;
  }
  response->body = std::string(in.unread());
  return Status::Ok();
}

// "HTTP/1.1 200 OK": the version must be 1.x, the code three digits.
Status ParseStatusLine(std::string_view line, HttpResponse* response) {
  if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." ||
      !std::isdigit(static_cast<unsigned char>(line[7])) || line[8] != ' ' ||
      !std::all_of(line.begin() + 9, line.begin() + 12,
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) ||
      (line.size() > 12 && line[12] != ' ')) {
    return Status::Corruption("bad status line \"" + std::string(line.substr(0, 64)) + "\"");
  }
  response->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  response->reason = std::string(line.size() > 13 ? line.substr(13) : std::string_view());
  return Status::Ok();
}

Result<HttpResponse> ReadResponse(ResponseStream& in, int fd, Deadline deadline, int cancel_fd,
                                  std::string_view method) {
  for (;;) {
    std::string& buffer = in.buffer();
    Result<size_t> head_length = ReadHead(fd, &buffer, kMaxResponseHeadBytes, deadline, cancel_fd);
    if (!head_length.ok()) return head_length.status();
    Result<HttpHead> head = ParseHead(std::string_view(buffer).substr(0, *head_length));
    if (!head.ok()) return head.status().WithPrefix("bad response head: ");
    HttpResponse response;
    COLLSCOPE_RETURN_IF_ERROR(ParseStatusLine(head->start_line, &response));
    response.headers = std::move(head->headers);
    buffer.erase(0, *head_length);
    if (response.status < 200) continue;  // interim (100 Continue, 103 Early Hints)
    COLLSCOPE_RETURN_IF_ERROR(ReadBody(in, method, &response));
    return response;
  }
}

std::string HostField(const HttpUrl& url) {
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  if (url.port != 80) host += ":" + std::to_string(url.port);
  return host;
}

Result<std::string> BuildRequestHead(std::string_view method, const HttpUrl& url,
                                     const HttpHeaders& headers, std::string_view body) {
  if (!IsHttpToken(method)) return Status::InvalidArgument("bad method \"" + std::string(method) + "\"");
  std::string head = std::string(method) + " " + url.target +
                     " HTTP/1.1\r\nHost: " + HostField(url) + "\r\nConnection: close\r\n";
  if (!body.empty() || (method != "GET" && method != "HEAD")) {
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  bool has_user_agent = false;
  for (const auto& [name, value] : headers) {
    if (!IsHttpToken(name) || !IsValidFieldValue(value)) {
      return Status::InvalidArgument("header \"" + name.substr(0, 64) + "\" has a bad name or value");
    }
    for (std::string_view owned : {"Host", "Connection", "Content-Length", "Transfer-Encoding"}) {
      if (EqualsIgnoringCase(name, owned)) {
        return Status::InvalidArgument("header \"" + name + "\" is set by the client itself");
      }
    }
    has_user_agent = has_user_agent || EqualsIgnoringCase(name, "User-Agent");
    head += name + ": " + value + "\r\n";
  }
  if (!has_user_agent) head += "User-Agent: " + std::string(kDefaultUserAgent) + "\r\n";
  head += "\r\n";
  return head;
}

}  // namespace

Result<HttpUrl> ParseHttpUrl(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return Status::InvalidArgument("not an http:// URL: \"" + std::string(url) + "\"");
  }
  const std::string scheme = Lowercase(url.substr(0, sep));
  if (scheme == "https") {
    return Status::Unsupported("https is not supported (plain http only; put a TLS proxy in front): " +
                         std::string(url));
  }
  if (scheme != "http") {
    return Status::Unsupported("unsupported scheme \"" + scheme +
                         "\" (only http://): " + std::string(url));
  }
  std::string_view rest = url.substr(sep + 3);
  rest = rest.substr(0, rest.find('#'));
  const size_t authority_end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, authority_end);
  HttpUrl out;
  out.target =
      authority_end == std::string_view::npos ? "/" : std::string(rest.substr(authority_end));
  if (out.target.front() == '?') out.target.insert(0, "/");
  if (!IsValidFieldValue(out.target) || out.target.find(' ') != std::string::npos) {
    return Status::InvalidArgument("space or control character in the path of URL " + std::string(url));
  }
  if (authority.find('@') != std::string_view::npos) {
    return Status::Unsupported("credentials in the URL are not supported: " + std::string(url));
  }
  std::optional<std::string_view> port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return Status::InvalidArgument("unclosed [ in URL " + std::string(url));
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') {
      return Status::InvalidArgument("junk after ] in URL " + std::string(url));
    }
    if (!after.empty()) port_text = after.substr(1);
  } else {
    const size_t colon = authority.find(':');
    if (colon != std::string_view::npos &&
        authority.find(':', colon + 1) != std::string_view::npos) {
      return Status::InvalidArgument("an IPv6 address in a URL needs brackets: " + std::string(url));
    }
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return Status::InvalidArgument("no host in URL " + std::string(url));
  if (!IsValidHostText(out.host)) return Status::InvalidArgument("bad host in URL " + std::string(url));
  if (port_text) {
    Result<uint16_t> port = ParsePort(*port_text, url);
    if (!port.ok()) return port.status();
    out.port = *port;
  }
  return out;
}

Result<HttpResponse> HttpRequest(std::string_view method, std::string_view url,
                                 const HttpHeaders& headers, std::string_view body,
                                 int timeout_ms) {
  return HttpRequestUntil(method, url, headers, body, DeadlineAfter(timeout_ms), -1);
}

Result<HttpResponse> HttpRequestUntil(std::string_view method, std::string_view url,
                                      const HttpHeaders& headers, std::string_view body,
                                      Deadline deadline, int cancel_fd) {
  const std::string what = std::string(method) + " " + std::string(url) + ": ";
  auto fail = [&](const Status& st) -> Result<HttpResponse> {
    return st.WithPrefix(what);
  };
  Result<HttpUrl> parsed = ParseHttpUrl(url);
  if (!parsed.ok()) return parsed.status();
  Result<std::string> head = BuildRequestHead(method, *parsed, headers, body);
  if (!head.ok()) return fail(head.status());
  Result<UniqueFd> fd = Connect(*parsed, deadline, cancel_fd);
  if (!fd.ok()) return fail(fd.status());
  std::string request = std::move(*head);
  request.append(body);
  if (Status st = SendAll(fd->get(), request, deadline, cancel_fd); !st.ok()) return fail(st);
  ResponseStream in(fd->get(), deadline, cancel_fd);
  Result<HttpResponse> response = ReadResponse(in, fd->get(), deadline, cancel_fd, method);
  if (!response.ok()) return fail(response.status());
  return response;
}

}  // namespace collscope::agent
