#include <csignal>
#include <cstdio>
#include <memory>

#include "agent/stacks/stack_session.h"
#include "cli/command.h"
#include "cli/output.h"

namespace collscope::cli {
namespace stacks_cmd {

std::atomic<bool> g_stop{false};

struct Options {
  std::vector<int> pids;
  std::string job;
  stacks::StackSessionOptions session;
  double window_s = 10;
  size_t top = 5;
  bool json = false, no_native = false;
};

int Run(Options& o) {
  stacks::StackSessionOptions s = o.session;
  s.pids.assign(o.pids.begin(), o.pids.end());
  if (!o.job.empty()) {
    std::vector<pid_t> job = stacks::ProcessesOfJob(o.job);
    if (job.empty()) {
      std::fprintf(stderr,
                   "collscope stacks: no process of yours has SLURM_JOB_ID, TORCHELASTIC_RUN_ID or "
                   "COLLSCOPE_JOB = %s\n",
                   o.job.c_str());
      return 2;
    }
    s.pids.insert(s.pids.end(), job.begin(), job.end());
  }
  if (s.pids.empty()) {
    std::fprintf(stderr, "collscope stacks: give --pid or --job\n");
    return 2;
  }
  s.window_us = static_cast<int64_t>(o.window_s * 1e6);
  s.sampler.native = !o.no_native;
  s.stop = &g_stop;
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  auto result = stacks::SampleProcesses(s);
  if (!result.ok()) return Fail("stacks", result.status());
  if (o.json)
    std::printf("%s\n", stacks::StackSessionJson(*result).c_str());
  else
    stacks::PrintStackSession(*result, o.top, stdout);
  return result->comparison.outliers.empty() ? 0 : 1;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "stacks",
      "Sample the native and Python (CPython 3.11) call stacks of running processes from outside "
      "them, without the GIL, and compare their main threads: which process stays in one frame "
      "while its peers wait or progress. Exit status: 0 sampled and no process stands apart, 1 a "
      "process stands apart, 2 usage error or nothing could be sampled.");
  cmd->add_option("--pid", o->pids, "A process to sample (repeat for several); yours only");
  cmd->add_option("--job", o->job,
                  "Every process of yours whose SLURM_JOB_ID, TORCHELASTIC_RUN_ID or COLLSCOPE_JOB "
                  "is this");
  cmd->add_option("--rate", o->session.rate_hz, "Samples per second per process")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1000.0));
  cmd->add_option("--duration", o->session.duration_s,
                  "Seconds to sample; 0 samples until the processes exit or SIGINT/SIGTERM")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--window", o->window_s,
                  "Seconds per folded window in the stack files (with --steps-dir, the least a "
                  "window spans)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option(
      "--steps-dir", o->session.steps_dir,
      "Where the annotation API writes the processes' step files "
      "(<host>-pid<pid>.steps.jsonl): windows then end at step ends and name their steps");
  cmd->add_option("--out", o->session.out_dir,
                  "Write one stack file per process here (<host>-pid<pid>.stacks.jsonl), for "
                  "collscope ingest");
  cmd->add_option("--top", o->top, "Stacks printed per thread")->capture_default_str();
  cmd->add_flag("--no-native", o->no_native,
                "Python frames only: read memory without stopping the threads (a stack may tear)");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace stacks_cmd
}  // namespace collscope::cli
