#include <cstdio>
#include <memory>

#include "sim/eval/eval.h"
#include "cli/command.h"
#include "cli/output.h"

namespace collscope::cli {
namespace eval_cmd {

struct Options {
  std::string suite = "small";
  std::string suite_file;
  std::string floors;
  std::string work_dir;
  std::string only;
  bool keep = false;
  bool json = false;
  int threads = 0;
  int kernel_ranks = 0;
  bool inspector_proxy = false;
};

int Run(const Options& o) {
  using namespace collscope::diagnose;
  std::vector<Scenario> suite;
  if (!o.suite_file.empty()) {
    auto read = ReadSuiteFile(o.suite_file);
    if (!read.ok()) return Fail("eval", read.status());
    suite = std::move(*read);
  } else {
    suite = BuiltinSuite(o.suite);
  }
  if (suite.empty()) {
    std::fprintf(stderr, "collscope eval: unknown suite '%s' (small, heldout, explore or large)\n", o.suite.c_str());
    return 2;
  }
  EvalOptions eo;
  eo.work_dir = o.work_dir;
  eo.keep = o.keep;
  eo.threads = o.threads;
  eo.only = o.only;
  eo.kernel_max_ranks = o.kernel_ranks;
  eo.inspector_proxy = o.inspector_proxy;
  auto r = RunEval(suite, eo);
  if (!r.ok()) return Fail("eval", r.status());
  const std::string out = o.json ? r->ToJson() : r->ToText();
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (!o.floors.empty()) {
    auto bad = CheckFloors(*r, o.floors);
    if (!bad.ok()) return Fail("eval", bad.status());
    for (const auto& b : *bad) std::fprintf(stderr, "below floor: %s\n", b.c_str());
    if (!bad->empty()) return 1;
  }
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Simulate labelled faults, diagnose them per evidence tier and print strictly scored precision, recall and exact rate per kind.");
  cmd->add_option("--suite", o->suite, "small (CI, development seeds) | heldout (seeds detector work never looks at) | explore (more development seeds, each "
                  "shape twice) | large (bench, up to 10,240 GPUs)")->capture_default_str();
  cmd->add_option("--suite-file", o->suite_file,
                  "Score the scenarios of FILE instead: a line each, NAME key=value... fault=SPEC... [damage=missing:R|cut:R] "
                  "(bench/sweep.py writes them)")->excludes("--suite");
  cmd->add_option("--floors", o->floors, "Fail (exit 1) when a kind drops below its floor in FILE");
  cmd->add_option("--work-dir", o->work_dir, "Where simulated jobs are written");
  cmd->add_option("--only", o->only, "Only scenarios whose name contains this");
  cmd->add_option("--threads", o->threads, "Ingest threads (0: all cores)");
  cmd->add_flag("--keep", o->keep, "Keep the simulated jobs");
  cmd->add_option("--kernel-ranks,--kineto-ranks", o->kernel_ranks,
                  "Also simulate the CUPTI library's kernel summaries of jobs up to this many ranks and score tier D "
                  "(L3 kernel modes) on them");
  cmd->add_flag("--inspector-proxy", o->inspector_proxy,
                "Simulate the 2.30 jobs' Inspector with NCCL_INSPECTOR_ENABLE_PROXY=1 (dev-line v4.4 proxy_trace "
                "records) and score every tier on those logs");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace eval_cmd
}  // namespace collscope::cli
