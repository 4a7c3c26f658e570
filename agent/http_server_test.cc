#include "agent/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "agent/http.h"

namespace collscope::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string UrlOf(const HttpServer& server, const std::string& target) {
  return "http://127.0.0.1:" + std::to_string(server.port()) + target;
}

// A client that speaks raw bytes, for what HttpRequest would never send.
class RawClient {
 public:
  explicit RawClient(uint16_t port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  }
  ~RawClient() { close(fd_); }

  void Send(const std::string& bytes) {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  // Everything the server sends until it closes, or until `timeout` passes.
  std::string ReadToClose(milliseconds timeout = milliseconds(5000)) {
    std::string out;
    const auto until = steady_clock::now() + timeout;
    char buffer[4096];
    while (steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_;
};

HttpReply Hello(const HttpServerRequest& request) {
  return HttpReply{200, "text/plain; version=0.0.4", "hello " + request.query};
}

TEST(HttpServer, ServesARegisteredPathOnAnEphemeralPort) {
  HttpServer server;
  server.Handle("/metrics", Hello);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_NE(server.port(), 0);
  Result<HttpResponse> r = HttpRequest("GET", UrlOf(server, "/metrics?x=1"), {}, "", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello x=1");
  ASSERT_NE(r->header("Content-Type"), nullptr);
  EXPECT_EQ(*r->header("Content-Type"), "text/plain; version=0.0.4");
  ASSERT_NE(r->header("Connection"), nullptr);
  EXPECT_EQ(*r->header("Connection"), "close");
}

TEST(HttpServer, HandlersCanBeAddedWhileServing) {
  HttpServer server;
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(HttpRequest("GET", UrlOf(server, "/late"), {}, "", 5000)->status, 404);
  server.Handle("/late", Hello);
  EXPECT_EQ(HttpRequest("GET", UrlOf(server, "/late"), {}, "", 5000)->status, 200);
}

TEST(HttpServer, UnknownPathIs404AndOtherMethods405) {
  HttpServer server;
  server.Handle("/metrics", Hello);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(HttpRequest("GET", UrlOf(server, "/metrics/"), {}, "", 5000)->status, 404);
  EXPECT_EQ(HttpRequest("GET", UrlOf(server, "/"), {}, "", 5000)->status, 404);
  Result<HttpResponse> r = HttpRequest("POST", UrlOf(server, "/metrics"), {}, "data", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 405);
  ASSERT_NE(r->header("Allow"), nullptr);
  EXPECT_EQ(*r->header("Allow"), "GET, HEAD");
  EXPECT_EQ(HttpRequest("DELETE", UrlOf(server, "/metrics"), {}, "", 5000)->status, 405);
}

// PUT under a registered prefix reaches its handler with the whole body, however it arrives;
// without a Content-Length it is 411, above the bound 413, elsewhere 405.
TEST(HttpServer, PutUnderAPrefixGetsItsBodyWithinItsBounds) {
  HttpServerOptions o;
  o.max_body_bytes = 1 << 20;
  HttpServer server(o);
  // Written on the server's thread, read on the test's: the reply over a socket orders them, which
  // ThreadSanitizer cannot see, so a lock says it.
  std::mutex mu;
  std::string got_path, got_body;
  auto got = [&](std::string* path) {
    std::lock_guard lock(mu);
    if (path) *path = got_path;
    return got_body;
  };
  server.HandlePut("/up/", [&](const HttpServerRequest& r) {
    std::lock_guard lock(mu);
    got_path = r.path;
    got_body = r.body;
    return HttpReply{201, "text/plain", "stored " + std::to_string(r.body.size()) + "\n"};
  });
  server.Handle("/metrics", Hello);
  ASSERT_TRUE(server.Start().ok());
  const std::string big(300000, 'x');
  Result<HttpResponse> r = HttpRequest("PUT", UrlOf(server, "/up/a/b.parquet"), {}, big, 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 201);
  std::string path;
  EXPECT_EQ(got(&path), big);
  EXPECT_EQ(path, "/up/a/b.parquet");
  // The body in pieces, the first with the head.
  {
    RawClient c(server.port());
    c.Send("PUT /up/c HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123");
    std::this_thread::sleep_for(milliseconds(50));
    c.Send("456789");
    EXPECT_NE(c.ReadToClose().find("HTTP/1.1 201 Created"), std::string::npos);
    EXPECT_EQ(got(nullptr), "0123456789");
  }
  {
    RawClient c(server.port());
    c.Send("PUT /up/d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n");
    EXPECT_NE(c.ReadToClose().find("HTTP/1.1 411 Length Required"), std::string::npos);
  }
  {
    // Refused from its head: the body is never waited for.
    RawClient c(server.port());
    c.Send("PUT /up/e HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n");
    EXPECT_NE(c.ReadToClose().find("HTTP/1.1 413 Content Too Large"), std::string::npos);
  }
  EXPECT_EQ(HttpRequest("PUT", UrlOf(server, "/metrics"), {}, "data", 5000)->status, 405);
  EXPECT_EQ(HttpRequest("PUT", UrlOf(server, "/upx"), {}, "data", 5000)->status, 405);
  EXPECT_EQ(HttpRequest("GET", UrlOf(server, "/metrics"), {}, "", 5000)->status, 200) << "the server goes on";
}

TEST(HttpServer, HeadAnswersAsGetWithoutTheBody) {
  HttpServer server;
  server.Handle("/metrics", Hello);
  ASSERT_TRUE(server.Start().ok());
  RawClient client(server.port());
  client.Send("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string response = client.ReadToClose();
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << response;
  EXPECT_NE(response.find("\r\nContent-Length: 6\r\n"), std::string::npos) << response;
  EXPECT_EQ(response.substr(response.size() - 4), "\r\n\r\n") << response;
}

TEST(HttpServer, OversizedHeadIs431AndTheServerGoesOn) {
  HttpServerOptions options;
  options.max_head_bytes = 1024;
  HttpServer server(options);
  server.Handle("/metrics", Hello);
  ASSERT_TRUE(server.Start().ok());
  Result<HttpResponse> r =
      HttpRequest("GET", UrlOf(server, "/metrics"), {{"X-Big", std::string(2000, 'a')}}, "", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 431);
  // A head just under the bound is served.
  r = HttpRequest("GET", UrlOf(server, "/metrics"), {{"X-Big", std::string(800, 'a')}}, "", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServer, MalformedRequestsAre400AndOtherVersions505) {
  HttpServer server;
  server.Handle("/metrics", Hello);
  ASSERT_TRUE(server.Start().ok());
  const std::pair<std::string, std::string> cases[] = {
      {"GARBAGE\r\n\r\n", "HTTP/1.1 400 "},
      {"GET /metrics HTTP/1.1 extra\r\n\r\n", "HTTP/1.1 400 "},
      {"GET metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "},
      {"GET /metrics HTTP/1.1\r\nBad Name: v\r\n\r\n", "HTTP/1.1 400 "},
      {"GET /metrics HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", "HTTP/1.1 400 "},
      {"GET /metrics HTTP/2.0\r\n\r\n", "HTTP/1.1 505 "},
      {"GET /metrics HTTP/1.0\r\n\r\n", "HTTP/1.1 200 "},
  };
  for (const auto& [request, expected] : cases) {
    RawClient client(server.port());
    client.Send(request);
    const std::string response = client.ReadToClose();
    EXPECT_EQ(response.rfind(expected, 0), 0u) << request << " -> " << response;
  }
}

TEST(HttpServer, ASlowClientIsCutOffAndDelaysOthersOnlyThatLong) {
  HttpServerOptions options;
  options.read_timeout_ms = 300;
  HttpServer server(options);
  server.Handle("/metrics", Hello);
  ASSERT_TRUE(server.Start().ok());
  RawClient slow(server.port());
  slow.Send("GET /metrics HT");
  std::this_thread::sleep_for(milliseconds(50));  // the server is now waiting on it
  const auto start = steady_clock::now();
  Result<HttpResponse> r = HttpRequest("GET", UrlOf(server, "/metrics"), {}, "", 5000);
  const auto elapsed = steady_clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(elapsed, milliseconds(2000));
  const std::string cut = slow.ReadToClose();
  EXPECT_EQ(cut.rfind("HTTP/1.1 408 ", 0), 0u) << cut;
}

TEST(HttpServer, StopReturnsPromptlyWhileAClientIsMidRequest) {
  HttpServerOptions options;
  options.read_timeout_ms = 60'000;
  HttpServer server(options);
  server.Handle("/metrics", Hello);
  ASSERT_TRUE(server.Start().ok());
  RawClient slow(server.port());
  slow.Send("GET /metrics HT");
  std::this_thread::sleep_for(milliseconds(50));
  const auto start = steady_clock::now();
  server.Stop();
  EXPECT_LT(steady_clock::now() - start, milliseconds(1000));
  server.Stop();  // idempotent
}

TEST(HttpServer, AHandlerFailureIs500AndTheServerGoesOn) {
  HttpServer server;
  server.Handle("/throws",
                [](const HttpServerRequest&) -> HttpReply { throw std::runtime_error("boom"); });
  server.Handle("/bad-status", [](const HttpServerRequest&) { return HttpReply{42, "", ""}; });
  server.Handle("/bad-type", [](const HttpServerRequest&) {
    return HttpReply{200, "text/plain\r\nX-Injected: 1", ""};
  });
  server.Handle("/metrics", Hello);
  ASSERT_TRUE(server.Start().ok());
  Result<HttpResponse> r = HttpRequest("GET", UrlOf(server, "/throws"), {}, "", 5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("boom"), std::string::npos);
  EXPECT_EQ(HttpRequest("GET", UrlOf(server, "/bad-status"), {}, "", 5000)->status, 500);
  r = HttpRequest("GET", UrlOf(server, "/bad-type"), {}, "", 5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->header("X-Injected"), nullptr);
  EXPECT_EQ(HttpRequest("GET", UrlOf(server, "/metrics"), {}, "", 5000)->status, 200);
}

TEST(HttpServer, ATakenPortIsAnError) {
  HttpServer first;
  ASSERT_TRUE(first.Start().ok());
  HttpServerOptions options;
  options.port = first.port();
  HttpServer second(options);
  Status st = second.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bind 127.0.0.1:" + std::to_string(first.port())), std::string::npos)
      << st.message();
}

TEST(HttpServer, StartTwiceIsAnError) {
  HttpServer server;
  ASSERT_TRUE(server.Start().ok());
  EXPECT_FALSE(server.Start().ok());
}

}  // namespace
}  // namespace collscope::agent
