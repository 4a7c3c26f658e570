#include "agent/http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "agent/scripted_peer.h"
#include "tests/servers.h"

namespace collscope::agent {
namespace {

using testing::ScriptedPeer;
using testing::ScriptedReply;
using testing::StatusReply;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ParseHttpUrl, SplitsHostPortAndTarget) {
  Result<HttpUrl> u = ParseHttpUrl("http://127.0.0.1:9090/api/v1/write");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 9090);
  EXPECT_EQ(u->target, "/api/v1/write");

  u = ParseHttpUrl("HTTP://alertmanager.example");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->host, "alertmanager.example");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/");

  u = ParseHttpUrl("http://h?match[]=up#fragment");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->target, "/?match[]=up");

  u = ParseHttpUrl("http://[::1]:8428/health");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 8428);
  EXPECT_EQ(u->target, "/health");
}

TEST(ParseHttpUrl, RefusesWhatItCannotServeSayingWhy) {
  const std::pair<std::string, std::string> cases[] = {
      {"https://prometheus:9090/api/v1/write", "https is not supported"},
      {"ftp://host/x", "unsupported scheme \"ftp\""},
      {"127.0.0.1:9090/api/v1/write", "not an http:// URL"},
      {"http://:9090/", "no host"},
      {"http://h:0/", "bad port"},
      {"http://h:65536/", "bad port"},
      {"http://h:90x/", "bad port"},
      {"http://h:/", "bad port"},
      {"http://user:secret@h/", "credentials"},
      {"http://::1/", "needs brackets"},
      {"http://[::1/", "unclosed ["},
      {"http://h/a b", "space or control character"},
      {"http://h/a\r\nX-Injected: 1", "space or control character"},
  };
  for (const auto& [url, reason] : cases) {
    Result<HttpUrl> u = ParseHttpUrl(url);
    ASSERT_FALSE(u.ok()) << url;
    EXPECT_TRUE(Contains(u.status().message(), reason)) << url << ": " << u.status().message();
  }
}

TEST(HttpRequest, SendsAWellFormedRequestAndReadsAContentLengthBody) {
  ScriptedPeer peer({StatusReply(200, "hello")});
  Result<HttpResponse> r =
      HttpRequest("POST", peer.url("/p?q=1"), {{"X-Extra", "b c"}}, "payload", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->reason, "Scripted");
  EXPECT_EQ(r->body, "hello");
  ASSERT_NE(r->header("content-length"), nullptr);  // looked up whatever the case
  EXPECT_EQ(*r->header("content-length"), "5");

  ASSERT_EQ(peer.requests().size(), 1u);
  const std::string sent = peer.requests()[0];
  EXPECT_EQ(sent.rfind("POST /p?q=1 HTTP/1.1\r\n", 0), 0u) << sent;
  EXPECT_TRUE(Contains(sent, "\r\nHost: 127.0.0.1:" + std::to_string(peer.port()) + "\r\n"));
  EXPECT_TRUE(Contains(sent, "\r\nConnection: close\r\n"));
  EXPECT_TRUE(Contains(sent, "\r\nContent-Length: 7\r\n"));
  EXPECT_TRUE(Contains(sent, "\r\nX-Extra: b c\r\n"));
  EXPECT_TRUE(Contains(sent, "\r\nUser-Agent: collscope-agent/"));
  EXPECT_EQ(sent.substr(sent.size() - 11), "\r\n\r\npayload");
}

TEST(HttpRequest, DecodesAChunkedBodyWithExtensionsAndTrailers) {
  ScriptedPeer peer(
      {{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5;name=value\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"}});
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body, "hello, world");
}

TEST(HttpRequest, RefusesAChunkLongerThanItsSizeLine) {
  ScriptedPeer peer(
      {{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n"}});
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "chunk longer")) << r.status().message();
}

TEST(HttpRequest, RefusesABadChunkSize) {
  ScriptedPeer peer(
      {{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"}});
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "bad chunk size")) << r.status().message();
}

TEST(HttpRequest, ReadsABodyFramedByTheClose) {
  ScriptedPeer peer({{"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close"}});
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->body, "until the close");
}

TEST(HttpRequest, SkipsInterimResponses) {
  ScriptedPeer peer({{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"}});
  Result<HttpResponse> r = HttpRequest("POST", peer.url("/"), {}, "x", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->body, "");
}

TEST(HttpRequest, HeadResponseHasNoBodyWhateverContentLengthSays) {
  ScriptedPeer peer({{"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"}});
  Result<HttpResponse> r = HttpRequest("HEAD", peer.url("/"), {}, "", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "");
}

TEST(HttpRequest, AServerErrorIsAResponseNotAFailure) {
  ScriptedPeer peer({StatusReply(503, "busy")});
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "busy");
}

TEST(HttpRequest, ABodyCutShortIsAnError) {
  ScriptedPeer peer({{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"}});
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "connection closed after 9 of 100 bytes"))
      << r.status().message();
}

TEST(HttpRequest, ConflictingContentLengthsAreRefused) {
  ScriptedPeer peer({{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc"}});
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "conflicting Content-Length"));
}

TEST(HttpRequest, ABadStatusLineIsAnError) {
  ScriptedPeer peer({{"SMTP ready\r\n\r\n"}});
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "bad status line")) << r.status().message();
}

TEST(HttpRequest, AnOversizedResponseHeadIsRefused) {
  ScriptedPeer peer(
      {{"HTTP/1.1 200 OK\r\nX-Big: " + std::string(kMaxResponseHeadBytes, 'a') + "\r\n\r\n"}});
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "message head larger than")) << r.status().message();
}

TEST(HttpRequest, GivesUpAtItsDeadlineOnASilentServer) {
  ScriptedPeer peer({{StatusReply(200).bytes, 10'000}});
  const auto start = std::chrono::steady_clock::now();
  Result<HttpResponse> r = HttpRequest("GET", peer.url("/"), {}, "", 300);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "timed out")) << r.status().message();
  EXPECT_GE(elapsed, std::chrono::milliseconds(290));
  EXPECT_LT(elapsed, std::chrono::seconds(3));
}

TEST(HttpRequest, RefusesHeadersThatWouldSplitTheRequestAndSendsNothing) {
  ScriptedPeer peer({StatusReply(200)});
  Result<HttpResponse> r =
      HttpRequest("GET", peer.url("/"), {{"X-A", "ok\r\nX-Injected: 1"}}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "bad name or value")) << r.status().message();
  r = HttpRequest("GET", peer.url("/"), {{"Bad Name", "v"}}, "", 5000);
  ASSERT_FALSE(r.ok());
  r = HttpRequest("GET", peer.url("/"), {{"content-length", "0"}}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "set by the client")) << r.status().message();
  r = HttpRequest("GE T", peer.url("/"), {}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(peer.connections(), 0u);
}

// The harness's port where nothing listens: no other socket can bind it while it is held (so a
// test running beside cannot serve there), and it is free once released.
TEST(ReservedLoopbackPort, NoOtherSocketTakesItUntilReleased) {
  collscope::testing::ReservedLoopbackPort reserved;
  ASSERT_NE(reserved.port(), 0);
  auto bind_to = [](uint16_t port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    const int rc = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    const int err = errno;
    close(fd);
    return rc == 0 ? 0 : err;
  };
  EXPECT_EQ(bind_to(reserved.port()), EADDRINUSE);
  reserved.Release();
  EXPECT_EQ(bind_to(reserved.port()), 0);
}

TEST(HttpRequest, ARefusedConnectionNamesTheAddress) {
  const collscope::testing::ReservedLoopbackPort nobody_listens;
  const uint16_t port = nobody_listens.port();
  ASSERT_NE(port, 0);
  Result<HttpResponse> r =
      HttpRequest("GET", "http://127.0.0.1:" + std::to_string(port) + "/", {}, "", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "connect to 127.0.0.1:" + std::to_string(port)))
      << r.status().message();
}

}  // namespace
}  // namespace collscope::agent
