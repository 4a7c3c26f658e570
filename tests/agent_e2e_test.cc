// The live agent end to end, as a user runs it, against the real servers: a simulated job
// written at wall-clock pace (`collscope simulate --live`) with a NIC slowed mid-run, and
// `collscope agent` watching its folder, remote-writing to Prometheus and VictoriaMetrics and
// alerting Alertmanager. The agent must
//  - show collscope_finding_active for the slow NIC's host on /metrics, and no finding on any other
//  host;
//  - land that series in Prometheus and in VictoriaMetrics through remote-write;
//  - raise an alert in Alertmanager, and resolve it after the fault ends;
//  - exit 0 on SIGTERM.
// It prints the time from the fault's first record on disk to the alert (docs/agent.md).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "agent/http.h"
#include "tests/servers.h"
#include "tests/test_util.h"

extern char** environ;

namespace collscope {
namespace {

using agent::HttpRequest;
using testing::RealServer;
using testing::ServerKind;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A child process with its output in a file; killed and reaped when destroyed.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Child() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool started() const { return pid_ > 0; }
  // The exit status once it has exited (-1 while running); 128+N when killed by signal N.
  int Poll() {
    if (exited_) return status_;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) != pid_) return -1;
    exited_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return status_;
  }
  void Signal(int sig) { kill(pid_, sig); }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = -1;
};

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string Get(const std::string& url) {
  auto r = HttpRequest("GET", url, {}, "", 5000);
  return r.ok() && r->status == 200 ? r->body : "";
}

// The wall time of the timeline's first `event` line ("" fields: 0 when absent).
int64_t EventWallUs(const std::string& timeline, const std::string& event) {
  std::ifstream in(timeline);
  std::string line;
  simdjson::dom::parser parser;
  while (std::getline(in, line)) {
    simdjson::dom::element e;
    std::string_view name;
    int64_t wall = 0;
    if (parser.parse(simdjson::padded_string(line)).get(e) != simdjson::SUCCESS) continue;
    if (e["event"].get(name) == simdjson::SUCCESS && name == event &&
        e["wall_us"].get(wall) == simdjson::SUCCESS)
      return wall;
  }
  return 0;
}

// Every (kind, host) of the agent's active findings.
std::set<std::pair<std::string, std::string>> FindingHosts(const std::string& json) {
  std::set<std::pair<std::string, std::string>> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array findings;
  if (parser.parse(simdjson::padded_string(json)).get(doc) != simdjson::SUCCESS ||
      doc["findings"].get(findings) != simdjson::SUCCESS)
    return out;
  for (simdjson::dom::element f : findings) {
    std::string_view kind;
    simdjson::dom::array hosts;
    if (f["kind"].get(kind) != simdjson::SUCCESS || f["hosts"].get(hosts) != simdjson::SUCCESS)
      continue;
    for (simdjson::dom::element h : hosts) {
      std::string_view host;
      if (h.get(host) == simdjson::SUCCESS) out.insert({std::string(kind), std::string(host)});
    }
  }
  return out;
}

// Whether Alertmanager lists an active CollscopeFinding alert of `kind` for `hosts`.
bool AlertActive(const std::string& am, const std::string& kind, const std::string& hosts) {
  const std::string body = Get(am + "/api/v2/alerts?active=true");
  simdjson::dom::parser parser;
  simdjson::dom::array alerts;
  if (parser.parse(simdjson::padded_string(body)).get(alerts) != simdjson::SUCCESS) return false;
  for (simdjson::dom::element a : alerts) {
    std::string_view name, k, h;
    if (a["labels"]["alertname"].get(name) == simdjson::SUCCESS && name == "CollscopeFinding" &&
        a["labels"]["kind"].get(k) == simdjson::SUCCESS && k == kind &&
        a["labels"]["hosts"].get(h) == simdjson::SUCCESS && h == hosts)
      return true;
  }
  return false;
}

TEST(AgentEndToEnd, ASlowNicMidRunIsSeenEverywhereAlertedAndResolved) {
#ifdef COLLSCOPE_SANITIZED
  GTEST_SKIP() << "wall-clock targets at the job's own pace: a sanitizer build's agent is several times slower "
                  "(agent_test runs its ticks under the sanitizers)";
#endif
  RealServer prometheus(ServerKind::kPrometheus), victoria(ServerKind::kVictoriaMetrics),
      alertmanager(ServerKind::kAlertmanager);
  COLLSCOPE_START_SERVER_OR_SKIP(prometheus);
  COLLSCOPE_START_SERVER_OR_SKIP(victoria);
  COLLSCOPE_START_SERVER_OR_SKIP(alertmanager);
  testing::TempDir dir;
  const std::string bin = testing::CollscopeBinary();
  // 240 steps of about 0.135 s on 4 hosts (TP 4, PP 2, DP 4): ~32 s at wall-clock pace, the NIC of
  // node-001 at a quarter of its bandwidth for steps 40-89, then 20 s healthy (the 10 s window
  // slides past).
  Child job({bin, "simulate", "--live", "-o", dir / "job", "--hosts", "4", "--steps", "240",
             "--kineto-max-ranks", "0", "--no-steps", "--fault",
             "kind=nic_degrade,host=1,factor=0.25,start_step=40,end_step=90"},
            dir / "simulate.log");
  ASSERT_TRUE(job.started());
  const uint16_t port = testing::FreeLoopbackPort();
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  Child agent({bin,
               "agent",
               "--watch",
               dir / "job",
               "--db",
               dir / "agent.duckdb",
               "--listen",
               listen,
               "--interval",
               "1s",
               "--window",
               "10s",
               "--job",
               "e2e",
               "--remote-write",
               prometheus.url() + "/api/v1/write",
               "--remote-write",
               victoria.url() + "/api/v1/write",
               "--alertmanager",
               alertmanager.url()},
              dir / "agent.log");
  ASSERT_TRUE(agent.started());

  const std::string self = "http://" + listen;
  std::set<std::pair<std::string, std::string>> seen;
  int64_t on_metrics_us = 0, alerted_us = 0, resolved_us = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  while (std::chrono::steady_clock::now() < deadline && !resolved_us) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    ASSERT_EQ(agent.Poll(), -1) << "the agent exited early:\n"
                                << testing::ReadFile(dir / "agent.log");
    for (const auto& kh : FindingHosts(Get(self + "/findings"))) seen.insert(kh);
    if (!on_metrics_us &&
        Get(self + "/metrics")
                .find("collscope_finding_active{kind=\"slow_link\",host=\"node-001\"}") !=
            std::string::npos)
      on_metrics_us = NowUs();
    const bool active = AlertActive(alertmanager.url(), "slow_link", "node-001");
    if (active && !alerted_us) alerted_us = NowUs();
    // Resolved: the alert gone after the fault's last record was written.
    if (alerted_us && !active &&
        EventWallUs(dir / "job/live_events.ndjson", "fault_last_record") > 0)
      resolved_us = NowUs();
  }
  const std::string agent_log = testing::ReadFile(dir / "agent.log");
  ASSERT_GT(on_metrics_us, 0) << "no slow_link finding for node-001 on /metrics\n" << agent_log;
  ASSERT_GT(alerted_us, 0) << "no alert in Alertmanager\n" << agent_log;
  EXPECT_GT(resolved_us, 0) << "the alert was not resolved after the fault ended\n" << agent_log;
  // The culprit and nobody else: a finding on another host would send someone to drain a healthy
  // one.
  for (const auto& [kind, host] : seen) EXPECT_EQ(host, "node-001") << kind << " on " << host;

  const int64_t fault_us = EventWallUs(dir / "job/live_events.ndjson", "fault_first_record");
  const int64_t fault_end_us = EventWallUs(dir / "job/live_events.ndjson", "fault_last_record");
  ASSERT_GT(fault_us, 0);
  EXPECT_LE(alerted_us - fault_us, 60'000'000)
      << "target: an alert within 60 s of the fault's first record";
  std::printf(
      "fault's first record -> /metrics %.1f s, -> Alertmanager %.1f s; fault's last record -> "
      "resolved %.1f s\n",
      (on_metrics_us - fault_us) / 1e6, (alerted_us - fault_us) / 1e6,
      resolved_us > 0 ? (resolved_us - fault_end_us) / 1e6 : -1.0);

  // The same series through remote-write, in both receivers.
  const std::string query =
      "collscope_finding_active{kind=\"slow_link\",host=\"node-001\",job=\"e2e\"}";
  const int64_t now_s = NowUs() / 1'000'000;
  auto prom = HttpRequest("GET",
                          prometheus.url() + "/api/v1/query_range?query=" + UrlEncode(query) +
                              "&start=" + std::to_string(now_s - 300) +
                              "&end=" + std::to_string(now_s) + "&step=1",
                          {}, "", 5000);
  ASSERT_TRUE(prom.ok()) << prom.status().message();
  EXPECT_NE(prom->body.find("\"host\":\"node-001\""), std::string::npos) << prom->body;
  ASSERT_EQ(HttpRequest("GET", victoria.url() + "/internal/force_flush", {}, "", 5000)->status,
            200);
  auto vm = HttpRequest("GET", victoria.url() + "/api/v1/export?match[]=" + UrlEncode(query), {},
                        "", 5000);
  ASSERT_TRUE(vm.ok()) << vm.status().message();
  EXPECT_NE(vm->body.find("\"host\":\"node-001\""), std::string::npos) << vm->body;

  // SIGTERM: a clean exit, after the tick in flight, the store's checkpoint and the remote-write
  // flush (seconds; longer under the sanitizers).
  agent.Signal(SIGTERM);
  int status = -1;
  for (int i = 0; i < 600 && status < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    status = agent.Poll();
  }
  EXPECT_EQ(status, 0) << testing::ReadFile(dir / "agent.log");
}

}  // namespace
}  // namespace collscope
