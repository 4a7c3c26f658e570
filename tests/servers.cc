#include "tests/servers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "agent/http.h"

namespace collscope::testing {
namespace {

struct ServerSpec {
  const char* name;
  const char* binary;
  const char* package;
  const char* ready_path;
};

ServerSpec SpecOf(ServerKind kind) {
  switch (kind) {
    case ServerKind::kPrometheus:
      return {"Prometheus", "/usr/bin/prometheus", "prometheus", "/-/ready"};
    case ServerKind::kVictoriaMetrics:
      return {"VictoriaMetrics", "/usr/bin/victoria-metrics", "victoria-metrics", "/health"};
    case ServerKind::kAlertmanager:
      return {"Alertmanager", "/usr/bin/prometheus-alertmanager", "prometheus-alertmanager",
              "/-/ready"};
  }
  return {"?", "/nonexistent", "?", "/"};
}

}  // namespace

namespace {

// Binds a socket to a port the kernel picks on 127.0.0.1; returns the socket, or -1.
int BindLoopbackPort(uint16_t* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof address;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

}  // namespace

uint16_t FreeLoopbackPort() {
  uint16_t port = 0;
  const int fd = BindLoopbackPort(&port);
  if (fd >= 0) close(fd);
  return port;
}

ReservedLoopbackPort::ReservedLoopbackPort() { fd_ = BindLoopbackPort(&port_); }

ReservedLoopbackPort::~ReservedLoopbackPort() { Release(); }

void ReservedLoopbackPort::Release() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

RealServer::RealServer(ServerKind kind, uint16_t port)
    : kind_(kind), fixed_port_(port != 0), port_(port != 0 ? port : FreeLoopbackPort()) {}

RealServer::~RealServer() { Kill(); }

bool RealServer::installed() const { return access(SpecOf(kind_).binary, X_OK) == 0; }

std::string RealServer::not_installed_reason() const {
  const ServerSpec spec = SpecOf(kind_);
  return std::string(spec.name) + " (" + spec.binary +
         ") is not installed; on Debian: apt-get install " + spec.package;
}

std::string RealServer::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::string RealServer::log() const { return ReadFile(dir_ / "server.log"); }

std::string RealServer::LogTail() const {
  const std::string text = log();
  return text.size() > 4000 ? "..." + text.substr(text.size() - 4000) : text;
}

Status RealServer::Start(int ready_timeout_ms) {
  const ServerSpec spec = SpecOf(kind_);
  if (pid_ > 0) return Status::IOError(std::string(spec.name) + " is already running");
  for (int attempt = 1;; ++attempt) {
    COLLSCOPE_RETURN_IF_ERROR(Launch());
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(ready_timeout_ms);
    bool exited = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        exited = true;
        break;
      }
      Result<agent::HttpResponse> ready =
          agent::HttpRequest("GET", url() + spec.ready_path, {}, "", 1000);
      if (ready.ok() && ready->status == 200) return Status::Ok();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!exited) {
      Kill();
      return Status::IOError(std::string(spec.name) + " not ready within " +
                           std::to_string(ready_timeout_ms) + " ms; its log:\n" + LogTail());
    }
    // Another process took the port between FreeLoopbackPort and the server's bind.
    const bool port_taken = log().find("address already in use") != std::string::npos;
    if (!port_taken || fixed_port_ || attempt == 3) {
      return Status::IOError(std::string(spec.name) + " exited while starting; its log:\n" +
                           LogTail());
    }
    port_ = FreeLoopbackPort();
  }
}

Status RealServer::Launch() {
  const ServerSpec spec = SpecOf(kind_);
  const std::string listen = "127.0.0.1:" + std::to_string(port_);
  std::vector<std::string> args = {spec.binary};
  switch (kind_) {
    case ServerKind::kPrometheus:
      WriteFile(dir_ / "prometheus.yml", "global:\n  scrape_interval: 15s\n");
      args.insert(
          args.end(),
          {"--config.file=" + (dir_ / "prometheus.yml"), "--storage.tsdb.path=" + (dir_ / "data"),
           "--web.listen-address=" + listen, "--web.enable-remote-write-receiver"});
      break;
    case ServerKind::kVictoriaMetrics:
      // Without the latency offset, the newest 30 s of samples are hidden from queries.
      args.insert(args.end(), {"-httpListenAddr=" + listen, "-storageDataPath=" + (dir_ / "data"),
                               "-search.latencyOffset=1s", "-search.disableCache"});
      break;
    case ServerKind::kAlertmanager:
      // A receiver with no integrations: alerts are stored and listed, and sent nowhere.
      WriteFile(dir_ / "alertmanager.yml",
                "route:\n  receiver: nowhere\nreceivers:\n  - name: nowhere\n");
      args.insert(args.end(), {"--config.file=" + (dir_ / "alertmanager.yml"),
                               "--storage.path=" + (dir_ / "data"),
                               "--web.listen-address=" + listen, "--cluster.listen-address="});
      break;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log_path = dir_ / "server.log";
  const std::string work_dir = dir_.str();
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (log_fd < 0 || null_fd < 0) {
    if (log_fd >= 0) close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return Status::IOError("cannot open " + log_path + " or /dev/null");
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls from here: the test process may have other threads.
    // The kernel kills the server when the thread that started it dies, even by a crash.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    if (chdir(work_dir.c_str()) != 0) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const int fork_error = errno;
  close(log_fd);
  close(null_fd);
  if (pid < 0)
    return Status::IOError("fork for " + std::string(spec.name) + ": errno " +
                         std::to_string(fork_error));
  pid_ = pid;
  return Status::Ok();
}

void RealServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace collscope::testing
