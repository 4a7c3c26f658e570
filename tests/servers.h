// The real Prometheus-ecosystem servers, for end-to-end tests: the Debian binaries (prometheus,
// victoria-metrics, prometheus-alertmanager) started as child processes.
//
// Contract:
// * Each listens on 127.0.0.1 only, on a port that was free when picked (another is picked and
//   the start retried when it was taken meanwhile, unless the test fixed the port), with its own
//   temporary directory for configuration, data and log; Alertmanager's cluster gossip, which
//   would bind 0.0.0.0, is off. None is configured to send anything anywhere.
// * Start returns once the server answers its readiness endpoint (/-/ready for Prometheus and
//   Alertmanager, /health for VictoriaMetrics), or fails with the end of the server's log.
// * The destructor kills the process (SIGKILL) and reaps it, then removes the directory, so a
//   failing assertion leaves nothing running; and the kernel kills each child if the test thread
//   that started it dies (a crash included), so Start must be called from the test's own thread.
//
// Usage:
//   RealServer prometheus(ServerKind::kPrometheus);
//   COLLSCOPE_START_SERVER_OR_SKIP(prometheus);  // GTEST_SKIP naming the Debian package if absent
//   ... prometheus.url() + "/api/v1/write" ...
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/status.h"
#include "tests/test_util.h"

namespace collscope::testing {

enum class ServerKind { kPrometheus, kVictoriaMetrics, kAlertmanager };

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
uint16_t FreeLoopbackPort();

// A TCP port on 127.0.0.1 where nothing listens, held until Release or destruction: the socket
// stays bound (not listening), so a connection to it is refused, and no other socket (a test
// running beside this one that binds port 0 included) can take it meanwhile. A port that was
// merely free a moment ago can be handed to a peer of another test, whose server then answers.
class ReservedLoopbackPort {
 public:
  ReservedLoopbackPort();
  ~ReservedLoopbackPort();
  ReservedLoopbackPort(const ReservedLoopbackPort&) = delete;
  ReservedLoopbackPort& operator=(const ReservedLoopbackPort&) = delete;

  uint16_t port() const { return port_; }
  // Frees the port for a server this test starts on it next.
  void Release();

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

class RealServer {
 public:
  // Starts nothing. With `port` 0 a free one is picked; a fixed port lets a test hand out the
  // address before the server exists.
  explicit RealServer(ServerKind kind, uint16_t port = 0);
  ~RealServer();
  RealServer(const RealServer&) = delete;
  RealServer& operator=(const RealServer&) = delete;

  bool installed() const;
  // Names the binary and the Debian package that provides it.
  std::string not_installed_reason() const;

  Status Start(int ready_timeout_ms = 60'000);
  // Kills and reaps the process now; a later Start starts it again on the same port, with the
  // same data.
  void Kill();

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }  // -1 when not running
  std::string url() const;            // http://127.0.0.1:PORT
  std::string log() const;            // what the server has written to stdout and stderr

 private:
  Status Launch();
  std::string LogTail() const;

  const ServerKind kind_;
  const bool fixed_port_;
  uint16_t port_;
  TempDir dir_;
  pid_t pid_ = -1;
};

}  // namespace collscope::testing

#define COLLSCOPE_START_SERVER_OR_SKIP(server)                                    \
  do {                                                                            \
    if (!(server).installed()) GTEST_SKIP() << (server).not_installed_reason();   \
    const ::collscope::Status collscope_start_status = (server).Start();          \
    ASSERT_TRUE(collscope_start_status.ok()) << collscope_start_status.message(); \
  } while (0)
