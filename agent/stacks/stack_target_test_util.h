// Test helper: Python processes (Debian's python3.11) running testdata/stack_target.py, each
// stopped in a known place, for the sampler's tests and the hang scenario's.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace collscope::stacks::stack_target {

inline const char* kPython = "/usr/bin/python3.11";
inline const std::string kScript =
    std::string(COLLSCOPE_SOURCE_DIR) + "/agent/stacks/testdata/stack_target.py";

// The line of stack_target.py marked `# AT:<name>`.
inline int MarkedLine(const std::string& name) {
  std::ifstream in(kScript);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find("# AT:" + name) != std::string::npos) return n;
  return -1;
}

// A child process running stack_target.py in one mode, killed when this goes out of scope.
class Target {
 public:
  // rank: the RANK it is launched with (-1: none); job: its COLLSCOPE_JOB ("" : none).
  explicit Target(const std::string& mode, int rank = -1, const std::string& job = "") {
    int out[2];
    if (pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("RANK=", 0) != 0) env_strings.emplace_back(*e);
    if (rank >= 0) env_strings.push_back("RANK=" + std::to_string(rank));
    if (!job.empty()) env_strings.push_back("COLLSCOPE_JOB=" + job);
    std::vector<char*> env;
    for (auto& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    std::string m = mode;
    std::array<char*, 4> argv{const_cast<char*>(kPython), const_cast<char*>(kScript.c_str()),
                              m.data(), nullptr};
    if (posix_spawn(&pid_, kPython, &actions, nullptr, argv.data(), env.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    // "ready\n", which Python may write in two pieces: the whole line, or the child would write
    // its newline into a closed pipe.
    std::string said;
    char c = 0;
    while (said.size() < 16 && read(out[0], &c, 1) == 1 && c != '\n') said.push_back(c);
    close(out[0]);
    if (said != "ready" && pid_ > 0) pid_ = -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into its marked line
  }
  ~Target() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// The annotation API's step file of process `pid`, <dir>/<host>-pid<pid>.steps.jsonl, written as
// it would be while the process trains: its process line, then a step line every `step_ms`, each
// step starting where the one before ended, until this goes out of scope.
class StepFileWriter {
 public:
  StepFileWriter(const std::string& dir, pid_t pid, int rank, int step_ms) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    path_ = dir + "/" + host + "-pid" + std::to_string(pid) + ".steps.jsonl";
    std::ofstream(path_) << "{\"collscope_steps_version\":1,\"type\":\"process\",\"hostname\":\""
                         << host << "\",\"pid\":" << pid << ",\"rank\":" << rank
                         << ",\"world_size\":8}\n";
    thread_ = std::thread([this, step_ms] {
      int64_t start = WallUs();
      for (int step = 0; !done_; ++step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
        const int64_t end = WallUs();
        std::ofstream(path_, std::ios::app)
            << "{\"type\":\"step\",\"rank\":-1,\"step\":" << step << ",\"start_us\":" << start
            << ",\"wall_us\":" << end - start << ",\"phases\":[]}\n";
        std::lock_guard<std::mutex> lock(mu_);
        ends_.insert(end);
        start = end;
      }
    });
  }
  ~StepFileWriter() { Stop(); }
  void Stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::set<int64_t> ends() {
    std::lock_guard<std::mutex> lock(mu_);
    return ends_;
  }

 private:
  static int64_t WallUs() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::string path_;
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::set<int64_t> ends_;
  std::thread thread_;
};

// Whether this process may trace its own child at all: "" if so, else why not (a sandbox whose
// seccomp filter refuses ptrace, say). Yama's ptrace_scope 1 still lets a parent trace its child.
inline std::string PtraceRefused() {
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  if (child < 0) return "fork failed";
  std::string why;
  if (ptrace(PTRACE_SEIZE, child, nullptr, nullptr) != 0)
    why = std::string("ptrace refused: ") + strerror(errno);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return why;
}

#define REQUIRE_PYTHON()                                                                           \
  do {                                                                                             \
    if (access(::collscope::stacks::stack_target::kPython, X_OK) != 0)                             \
      GTEST_SKIP() << ::collscope::stacks::stack_target::kPython << " not installed (python3.11)"; \
    if (std::string why = ::collscope::stacks::stack_target::PtraceRefused(); !why.empty())        \
      GTEST_SKIP() << why << ": stacks cannot be sampled here";                                    \
  } while (0)

}  // namespace collscope::stacks::stack_target
