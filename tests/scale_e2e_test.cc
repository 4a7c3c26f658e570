// Past one machine, end to end as a user runs it (docs/scale.md): a simulated job written live
// with a NIC slowed mid-run, one `collscope agent --host H --export-summaries ROOT --no-diagnose`
// per host shipping record summaries, and one `collscope agent --watch ROOT` aggregating them.
// The aggregator, which never reads a log, must name the culprit host on /findings and no other
// host, within 60 s of the fault's first record; every host agent must have shipped its host only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <thread>

#include "agent/http.h"
#include "tests/test_util.h"

extern char** environ;

namespace collscope {
namespace {

namespace fs = std::filesystem;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A spawned command with its output in a log file; SIGKILLed and reaped if still running at the
// end.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Process() {
    if (pid_ > 0 && Running()) kill(pid_, SIGKILL);
    if (pid_ > 0 && !reaped_) waitpid(pid_, nullptr, 0);
  }
  bool Running() {
    if (reaped_) return false;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) reaped_ = true;
    return !reaped_;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// The hosts the findings JSON names (every string in a "hosts" array).
std::set<std::string> NamedHosts(const std::string& json) {
  std::set<std::string> out;
  static const std::regex hosts("\"hosts\": *\\[([^\\]]*)\\]"), name("\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), hosts);
       it != std::sregex_iterator(); ++it) {
    const std::string list = (*it)[1];
    for (auto n = std::sregex_iterator(list.begin(), list.end(), name); n != std::sregex_iterator();
         ++n)
      out.insert((*n)[1]);
  }
  return out;
}

int64_t FaultFirstRecordUs(const std::string& timeline) {
  std::ifstream in(timeline);
  std::string line;
  static const std::regex wall("\"wall_us\": *([0-9]+)");
  std::smatch m;
  while (std::getline(in, line))
    if (line.find("\"fault_first_record\"") != std::string::npos &&
        std::regex_search(line, m, wall))
      return std::stoll(m[1]);
  return 0;
}

TEST(ScaleEndToEnd, HostAgentsShipSummariesAndTheAggregatorNamesTheCulprit) {
#ifdef COLLSCOPE_SANITIZED
  GTEST_SKIP() << "wall-clock targets at the job's own pace: a sanitizer build's agents are several times slower "
                  "(record_summary_test runs the same export and import under the sanitizers)";
#endif
  testing::TempDir dir;
  const std::string bin = testing::CollscopeBinary();
  // 4 hosts (TP 4, PP 2, DP 4), ~0.135 s steps: the NIC of node-001 at a quarter of its bandwidth
  // for steps 40-89 of 160.
  Process job({bin, "simulate", "--live", "-o", dir / "job", "--hosts", "4", "--steps", "160",
               "--kineto-max-ranks", "0", "--no-steps", "--fault",
               "kind=nic_degrade,host=1,factor=0.25,start_step=40,end_step=90"},
              dir / "simulate.log");
  ASSERT_GT(job.pid(), 0);
  std::vector<std::unique_ptr<Process>> hosts;
  for (int h = 0; h < 4; ++h) {
    const std::string host = "node-00" + std::to_string(h);
    hosts.push_back(std::make_unique<Process>(
        std::vector<std::string>{bin, "agent", "--watch", dir / "job", "--db",
                                 dir / (host + ".duckdb"), "--host", host, "--export-summaries",
                                 dir / "summaries", "--no-diagnose", "--listen", "", "--interval",
                                 "1s"},
        dir / (host + ".log")));
    ASSERT_GT(hosts.back()->pid(), 0);
  }
  const uint16_t port = 20000 + static_cast<uint16_t>(getpid() % 20000);
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  Process aggregator({bin, "agent", "--watch", dir / "summaries", "--db", dir / "agg.duckdb",
                      "--listen", listen, "--interval", "1s", "--window", "10s"},
                     dir / "aggregator.log");
  ASSERT_GT(aggregator.pid(), 0);

  std::set<std::string> named;
  std::string wrong;
  int64_t found_us = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && (job.Running() || !found_us)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    ASSERT_TRUE(aggregator.Running()) << testing::ReadFile(dir / "aggregator.log");
    auto r = agent::HttpRequest("GET", "http://" + listen + "/findings", {}, "", 5000);
    if (!r.ok() || r->status != 200) continue;
    for (const std::string& h : NamedHosts(r->body)) {
      // What named a healthy host, kept for the failure message.
      if (h != "node-001" && wrong.empty()) wrong = r->body;
      named.insert(h);
    }
    if (!found_us && named.contains("node-001")) found_us = NowUs();
  }
  const std::string log = testing::ReadFile(dir / "aggregator.log");
  ASSERT_GT(found_us, 0) << "the aggregator never named node-001\n" << log;
  EXPECT_EQ(named, std::set<std::string>{"node-001"}) << "a healthy host was named:\n"
                                                      << wrong << "\n"
                                                      << log;
  const int64_t fault_us = FaultFirstRecordUs(dir / "job/live_events.ndjson");
  ASSERT_GT(fault_us, 0);
  EXPECT_LE(found_us - fault_us, 60'000'000) << "target: within 60 s of the fault's first record";
  std::printf("fault's first record -> aggregator finding %.1f s\n", (found_us - fault_us) / 1e6);

  // One partition per host, each holding only its host's rows (the aggregator read them all).
  std::set<std::string> partitions;
  for (const auto& e : fs::directory_iterator(dir / "summaries"))
    partitions.insert(e.path().filename().string());
  EXPECT_EQ(partitions, (std::set<std::string>{"host=node-000", "host=node-001", "host=node-002",
                                               "host=node-003"}));
  auto rows = testing::RunShell(
      bin + " sql --db " + (dir / "agg.duckdb") +
      " \"SELECT count(*) FROM records r JOIN processes p USING (run_id, process_id) "
      "JOIN files f USING (run_id, file_id) WHERE f.path NOT LIKE '%host=' || p.hostname || "
      "'/%'\" --csv 2>&1");
  EXPECT_NE(rows.text.find("\n0"), std::string::npos) << rows.text;
}

}  // namespace
}  // namespace collscope
