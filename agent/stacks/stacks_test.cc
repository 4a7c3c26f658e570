// The sampler against real Python processes (Debian's python3.11, started here), each stopped in
// a known place (testdata/stack_target.py marks the lines): it must name the frame, the line and
// the native call below it, and a session over eight ranks must name the one stuck apart.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/stacks/sampler.h"
#include "agent/stacks/stack_session.h"
#include "agent/stacks/stack_target_test_util.h"

namespace collscope::stacks {
namespace {

namespace fs = std::filesystem;
using stack_target::kPython;
using stack_target::MarkedLine;
using Target = stack_target::Target;

const ThreadStack* MainThread(const Sample& s, pid_t pid) {
  for (const ThreadStack& t : s.threads)
    if (t.tid == pid) return &t;
  return nullptr;
}

std::unique_ptr<Sampler> AttachOrSkip(pid_t pid, SamplerOptions options = {}) {
  auto sampler = Sampler::Attach(pid, options);
  EXPECT_TRUE(sampler.ok()) << sampler.status().message();
  return sampler.ok() ? std::move(*sampler) : nullptr;
}

// The innermost Python frame of a thread, with the index of the frame in its stack.
const Frame* InnermostPython(const ThreadStack& t, size_t* index = nullptr) {
  for (size_t i = 0; i < t.frames.size(); ++i)
    if (t.frames[i].kind == Frame::Kind::kPython) {
      if (index) *index = i;
      return &t.frames[i];
    }
  return nullptr;
}

bool HasPythonFrame(const ThreadStack& t, const std::string& function, int line) {
  for (const Frame& f : t.frames)
    if (f.kind == Frame::Kind::kPython && f.function == function && f.line == line &&
        fs::path(f.file).filename() == "stack_target.py")
      return true;
  return false;
}

TEST(Sampler, NamesTheFunctionAndLineAPythonProcessIsStuckIn) {
  REQUIRE_PYTHON();
  Target target("stuck");
  ASSERT_GT(target.pid(), 0);
  auto sampler = AttachOrSkip(target.pid());
  ASSERT_TRUE(sampler);
  EXPECT_EQ(sampler->facts().python_version.substr(0, 5), "3.11.")
      << sampler->facts().python_unread;
  auto sample = sampler->Take();
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  const ThreadStack* main = MainThread(*sample, target.pid());
  ASSERT_NE(main, nullptr);
  EXPECT_TRUE(HasPythonFrame(*main, "stuck_here", MarkedLine("stuck")));
  // Callers are outer frames: <module> is further from the leaf than stuck_here.
  auto at = [&](const std::string& function) {
    for (size_t i = 0; i < main->frames.size(); ++i)
      if (main->frames[i].function == function) return i;
    return main->frames.size();
  };
  EXPECT_LT(at("stuck_here"), at("<module>"));
  EXPECT_LT(at("<module>"), main->frames.size());
  // Python frames sit where the evaluator ran them: inside Py_RunMain, not beyond _start.
  EXPECT_LT(at("<module>"), at("Py_RunMain"));
  EXPECT_LT(at("Py_RunMain"), main->frames.size());
  // Native frames around the Python ones: the process's entry below, the futex wait above.
  EXPECT_TRUE(std::any_of(main->frames.begin(), main->frames.end(), [](const Frame& f) {
    return f.kind == Frame::Kind::kNative && f.function == "Py_RunMain";
  }));
  size_t python_at = 0;
  ASSERT_NE(InnermostPython(*main, &python_at), nullptr);
  EXPECT_GT(python_at, 0u) << "the lock wait's native frames should be inside the Python ones";
  EXPECT_LT(sample->stopped_us, 1000000);
}

TEST(Sampler, ReadsTheLineOfASpinningLoop) {
  REQUIRE_PYTHON();
  Target target("spin");
  ASSERT_GT(target.pid(), 0);
  auto sampler = AttachOrSkip(target.pid());
  ASSERT_TRUE(sampler);
  int at_line = 0, samples = 5;
  for (int i = 0; i < samples; ++i) {
    auto sample = sampler->Take();
    ASSERT_TRUE(sample.ok()) << sample.status().message();
    const ThreadStack* main = MainThread(*sample, target.pid());
    ASSERT_NE(main, nullptr);
    const Frame* top = InnermostPython(*main);
    ASSERT_NE(top, nullptr);
    EXPECT_EQ(top->function, "spin");
    // The loop is two lines (the while and the increment); the increment is where it mostly is.
    if (top->line == MarkedLine("spin")) ++at_line;
    EXPECT_TRUE(top->line == MarkedLine("spin") || top->line == MarkedLine("spin") - 1)
        << top->line;
  }
  EXPECT_GE(at_line, 1);
}

TEST(Sampler, ShowsTheNativeCallAPythonFrameIsBlockedIn) {
  REQUIRE_PYTHON();
  Target target("native");
  ASSERT_GT(target.pid(), 0);
  auto sampler = AttachOrSkip(target.pid());
  ASSERT_TRUE(sampler);
  auto sample = sampler->Take();
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  const ThreadStack* main = MainThread(*sample, target.pid());
  ASSERT_NE(main, nullptr);
  size_t at = 0;
  const Frame* top = InnermostPython(*main, &at);
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(top->function, "blocked_in_native");
  EXPECT_EQ(top->line, MarkedLine("native"));
  ASSERT_GT(at, 0u);
  EXPECT_NE(main->frames[0].function.find("read"), std::string::npos) << main->frames[0].Label();
  EXPECT_EQ(main->state, 'S');
}

TEST(Sampler, SamplesEveryThread) {
  REQUIRE_PYTHON();
  Target target("worker");
  ASSERT_GT(target.pid(), 0);
  auto sampler = AttachOrSkip(target.pid());
  ASSERT_TRUE(sampler);
  auto sample = sampler->Take();
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  ASSERT_EQ(sample->threads.size(), 2u);
  const ThreadStack* main = MainThread(*sample, target.pid());
  ASSERT_NE(main, nullptr);
  EXPECT_TRUE(HasPythonFrame(*main, "stuck_here", MarkedLine("stuck")));
  const ThreadStack& other =
      sample->threads[0].tid == target.pid() ? sample->threads[1] : sample->threads[0];
  EXPECT_TRUE(HasPythonFrame(other, "worker", MarkedLine("worker")));
  EXPECT_FALSE(HasPythonFrame(other, "stuck_here", MarkedLine("stuck")));
}

TEST(Sampler, ReadsNativeStacksOfAProgramWithoutPython) {
  if (std::string why = stack_target::PtraceRefused(); !why.empty()) GTEST_SKIP() << why;
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", "sleep", "30", nullptr);
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    auto sampler = AttachOrSkip(pid);
    ASSERT_TRUE(sampler);
    EXPECT_TRUE(sampler->facts().python_version.empty());
    EXPECT_NE(sampler->facts().python_unread.find("not a CPython process"), std::string::npos);
    auto sample = sampler->Take();
    ASSERT_TRUE(sample.ok()) << sample.status().message();
    ASSERT_EQ(sample->threads.size(), 1u);
    const auto& frames = sample->threads[0].frames;
    EXPECT_TRUE(std::any_of(frames.begin(), frames.end(), [](const Frame& f) {
      return f.function.find("nanosleep") != std::string::npos;
    }));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(Sampler, RefusesAnotherUsersProcess) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to start a process as another user";
  pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(126);
    execl("/bin/sleep", "sleep", "30", nullptr);
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto sampler = Sampler::Attach(pid, {});
  EXPECT_FALSE(sampler.ok());
  EXPECT_NE(sampler.status().message().find("not to you"), std::string::npos)
      << sampler.status().message();
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(StackSession, StopsCleanlyWhenTheTargetExits) {
  REQUIRE_PYTHON();
  Target target("exit");
  ASSERT_GT(target.pid(), 0);
  StackSessionOptions options;
  options.pids = {target.pid()};
  options.duration_s = 5;
  options.rate_hz = 20;
  // The exited child stays a zombie (this test is its parent and reaps it at the end): a zombie
  // has exited.
  auto start = std::chrono::steady_clock::now();
  auto result = SampleProcesses(options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->processes.size(), 1u);
  EXPECT_TRUE(result->processes[0].exited);
  EXPECT_GT(result->processes[0].samples, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

// Eight ranks of a hung job: seven wait for their peers in a blocking read, rank 5 is busy in its
// own work.
TEST(StackSession, NamesTheRankStuckApartAmongEight) {
  REQUIRE_PYTHON();
  std::vector<std::unique_ptr<Target>> ranks;
  for (int r = 0; r < 8; ++r)
    ranks.push_back(std::make_unique<Target>(r == 5 ? "compile" : "wait", r));
  StackSessionOptions options;
  for (auto& t : ranks) {
    ASSERT_GT(t->pid(), 0);
    options.pids.push_back(t->pid());
  }
  options.duration_s = 1.5;
  auto result = SampleProcesses(options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  const StackComparison& c = result->comparison;
  ASSERT_EQ(c.outliers.size(), 1u) << c.summary;
  const ProcessStacks& odd = c.processes[c.outliers[0]];
  EXPECT_EQ(odd.rank, 5);
  EXPECT_TRUE(odd.stayed);
  EXPECT_EQ(odd.position, "compile_graph (stack_target.py)");
  EXPECT_EQ(c.majority, 7u);
  EXPECT_TRUE(c.majority_stayed);
  EXPECT_NE(c.majority_position_label.find(
                "wait_for_peers (stack_target.py:" + std::to_string(MarkedLine("wait")) + ")"),
            std::string::npos)
      << c.majority_position_label;
  EXPECT_NE(c.summary.find("rank 5"), std::string::npos) << c.summary;
  EXPECT_NE(c.summary.find("compile_graph"), std::string::npos) << c.summary;
}

// Seven ranks still train (their stacks move between forward, backward and the optimizer); rank 2
// has deadlocked.
TEST(StackSession, NamesTheRankStuckWhileItsPeersProgress) {
  REQUIRE_PYTHON();
  std::vector<std::unique_ptr<Target>> ranks;
  for (int r = 0; r < 8; ++r)
    ranks.push_back(std::make_unique<Target>(r == 2 ? "deadlock" : "train", r));
  StackSessionOptions options;
  for (auto& t : ranks) {
    ASSERT_GT(t->pid(), 0);
    options.pids.push_back(t->pid());
  }
  options.duration_s = 2;
  options.rate_hz = 20;
  auto result = SampleProcesses(options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  const StackComparison& c = result->comparison;
  ASSERT_EQ(c.outliers.size(), 1u) << c.summary;
  const ProcessStacks& odd = c.processes[c.outliers[0]];
  EXPECT_EQ(odd.rank, 2);
  EXPECT_TRUE(odd.stayed);
  EXPECT_EQ(odd.position, "deadlocked (stack_target.py)");
  EXPECT_FALSE(c.majority_stayed);
  EXPECT_NE(c.summary.find("still progressing"), std::string::npos) << c.summary;
}

TEST(StackSession, WritesOneStackFileAProcessWithEverySample) {
  REQUIRE_PYTHON();
  Target target("worker", 3);
  ASSERT_GT(target.pid(), 0);
  fs::path dir = fs::temp_directory_path() / ("collscope-stacks-" + std::to_string(getpid()));
  fs::remove_all(dir);
  StackSessionOptions options;
  options.pids = {target.pid()};
  options.duration_s = 1.2;
  options.window_us = 500'000;
  options.out_dir = dir.string();
  auto result = SampleProcesses(options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->processes.size(), 1u);
  const ProcessSession& p = result->processes[0];
  ASSERT_FALSE(p.file.empty());
  std::ifstream in(p.file);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_NE(line.find("\"collscope_stacks\":1,\"type\":\"process\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"rank\":3"), std::string::npos) << line;
  int64_t counted = 0;
  std::set<std::string> windows;
  bool ended = false;
  while (std::getline(in, line)) {
    if (line.find("\"type\":\"end\"") != std::string::npos) ended = true;
    size_t at = line.find("\"count\":");
    if (at == std::string::npos) continue;
    counted += std::stoll(line.substr(at + 8));
    size_t w = line.find("\"window_start_us\":");
    windows.insert(line.substr(w, line.find(',', w) - w));
  }
  EXPECT_TRUE(ended);
  EXPECT_EQ(counted, p.samples * 2);  // two threads a sample, every one in some window
  EXPECT_GE(windows.size(), 2u);
  fs::remove_all(dir);
}

// The annotation API's step file, written while the process is sampled: its stack windows end
// where its steps end and name them, in the result and in its stack file.
TEST(StackSession, WindowsEndAtTheStepsTheProcessWrites) {
  REQUIRE_PYTHON();
  Target target("worker", 3);
  ASSERT_GT(target.pid(), 0);
  fs::path dir = fs::temp_directory_path() / ("collscope-stepwin-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "steps");
  stack_target::StepFileWriter steps((dir / "steps").string(), target.pid(), 3, 250);
  StackSessionOptions options;
  options.pids = {target.pid()};
  options.duration_s = 1.6;
  options.rate_hz = 20;
  options.window_us = 1;  // a window a step
  options.out_dir = (dir / "out").string();
  options.steps_dir = (dir / "steps").string();
  auto result = SampleProcesses(options);
  steps.Stop();
  const std::set<int64_t> ends = steps.ends();
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->processes.size(), 1u);
  EXPECT_GE(result->processes[0].steps_read, 4);
  std::map<int64_t, std::pair<int64_t, int64_t>> windows;  // step -> window
  int64_t in_steps = 0, samples = 0;
  for (const FoldedStack& s : result->stacks) {
    samples += s.count;
    if (s.step_first < 0) continue;
    in_steps += s.count;
    EXPECT_EQ(s.step_first, s.step_last);
    EXPECT_TRUE(ends.count(s.window_end_us)) << s.window_end_us;
    EXPECT_LE(s.window_start_us, s.first_us);
    EXPECT_LT(s.last_us, s.window_end_us);
    windows[s.step_first] = {s.window_start_us, s.window_end_us};
  }
  EXPECT_GE(windows.size(), 3u);
  for (auto it = windows.begin(); std::next(it) != windows.end(); ++it)
    if (std::next(it)->first == it->first + 1) {
      EXPECT_EQ(std::next(it)->second.first, it->second.second);  // windows tile time
    }
  EXPECT_EQ(samples, result->processes[0].samples * 2);  // two threads a sample, none lost
  EXPECT_GT(in_steps, samples / 2);
  std::ifstream in(result->processes[0].file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(",\"step_first\":"), std::string::npos);
  fs::remove_all(dir);
}

TEST(StacksCli, PrintsTheMergedStacksOfALiveProcess) {
  REQUIRE_PYTHON();
  const char* bin = std::getenv("COLLSCOPE_BIN");
  if (!bin) GTEST_SKIP() << "COLLSCOPE_BIN not set (run through ctest)";
  Target target("stuck");
  ASSERT_GT(target.pid(), 0);
  std::string cmd = std::string(bin) + " stacks --pid " + std::to_string(target.pid()) +
                    " --duration 0.5 --steps-dir /nonexistent 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int status = pclose(p);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("Python frames: read (CPython 3.11"), std::string::npos) << out;
  EXPECT_NE(out.find("stuck_here (stack_target.py:" + std::to_string(MarkedLine("stuck")) + ")"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Py_RunMain"), std::string::npos) << out;
  EXPECT_NE(out.find("has been in `stuck_here (stack_target.py:"), std::string::npos) << out;
  // Without the process's step file, windows are by time, and it says which file it looked for.
  EXPECT_NE(out.find("windows by time: no step file /nonexistent/"), std::string::npos) << out;

  std::string none = std::string(bin) + " stacks --pid 999999999 --duration 0.2 >/dev/null 2>&1";
  EXPECT_EQ(WEXITSTATUS(std::system(none.c_str())), 2);
}

TEST(StacksCli, AJobsProcessesAreItsRankedOnesNotTheCommandOrItsShell) {
  REQUIRE_PYTHON();
  const char* bin = std::getenv("COLLSCOPE_BIN");
  if (!bin) GTEST_SKIP() << "COLLSCOPE_BIN not set (run through ctest)";
  const std::string job = "stacks-test-" + std::to_string(getpid());
  Target rank0("wait", 0, job), rank1("compile", 1, job), launcher("stuck", -1, job);
  ASSERT_GT(rank0.pid(), 0);
  ASSERT_GT(rank1.pid(), 0);
  ASSERT_GT(launcher.pid(), 0);
  EXPECT_EQ(ProcessesOfJob(job), (std::vector<pid_t>{rank0.pid(), rank1.pid()}));
  // Run inside the job (its variable set), the command samples neither itself nor its shell.
  std::string cmd =
      "COLLSCOPE_JOB=" + job + " " + bin + " stacks --job " + job + " --duration 0.3 --json 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  pclose(p);
  EXPECT_NE(out.find("\"not_sampled\":[]"), std::string::npos) << out;
  EXPECT_NE(out.find("\"pid\":" + std::to_string(rank0.pid()) + ","), std::string::npos) << out;
  EXPECT_EQ(out.find("\"pid\":" + std::to_string(launcher.pid()) + ","), std::string::npos) << out;
}

// The kernel's refusal is said with what to change: here a process of the same (unprivileged) user
// that made itself undumpable, which that user may not trace.
TEST(StacksCli, ARefusedProcessIsNamedWithWhatToChange) {
  REQUIRE_PYTHON();
  const char* bin = std::getenv("COLLSCOPE_BIN");
  if (!bin) GTEST_SKIP() << "COLLSCOPE_BIN not set (run through ctest)";
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to run both processes as another, unprivileged user";
  auto as_nobody = [](std::vector<std::string> args, int out_fd) {
    pid_t pid = fork();
    if (pid == 0) {
      if (out_fd >= 0) dup2(out_fd, 1), dup2(out_fd, 2);
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(126);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    return pid;
  };
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t target = as_nobody({kPython, stack_target::kScript, "nodump"}, ready[1]);
  close(ready[1]);
  char c[8] = {};
  ASSERT_GT(read(ready[0], c, 5), 0);  // "ready"
  close(ready[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t sampler =
      as_nobody({bin, "stacks", "--pid", std::to_string(target), "--duration", "0.2"}, out[1]);
  close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;)
    text.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(sampler, &status, 0);
  kill(target, SIGKILL);
  waitpid(target, nullptr, 0);
  EXPECT_EQ(WEXITSTATUS(status), 3) << text;  // the system refused (docs/cli.md, exit statuses)
  EXPECT_NE(text.find("pid " + std::to_string(target) + ": the kernel refused to read its memory"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("CAP_SYS_PTRACE"), std::string::npos) << text;
}

}  // namespace
}  // namespace collscope::stacks
