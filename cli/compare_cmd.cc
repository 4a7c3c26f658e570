#include <cstdio>
#include <memory>
#include <vector>

#include "analysis/primitives.h"
#include "analysis/views.h"
#include "cli/command.h"
#include "cli/output.h"
#include "core/nccl_tests_reader.h"

namespace collscope::cli {
namespace compare_cmd {

struct Options {
  std::string db = "collscope.duckdb";
  std::string run, baseline, op;
  std::vector<std::string> logs;
  bool json = false, csv = false;
};

int Run(const Options& o) {
  if (!o.logs.empty()) {
    // Store the nccl-tests logs as (part of) the baseline run first.
    auto store = Store::Open(o.db);
    if (!store.ok()) return Fail("compare", store.status());
    for (const std::string& path : o.logs) {
      auto log = ReadNcclTestsFile(path, o.op);
      if (!log.ok()) return Fail("compare", log.status());
      auto n = StoreNcclTestsLog(**store, o.baseline, path, *log);
      if (!n.ok()) return Fail("compare", n.status());
      std::fprintf(stderr, "stored %s: %s, %d ranks, %lld rows into baseline run %s\n",
                   path.c_str(), log->op.c_str(), log->n_ranks, static_cast<long long>(*n),
                   o.baseline.c_str());
    }
    Status views = InstallAnalysisViews(**store, false);
    if (!views.ok()) return Fail("compare", views);
    if (o.run.empty()) return 0;
  }
  if (o.run.empty()) {
    std::fprintf(stderr, "collscope compare: --run is required (or --baseline-log to store)\n");
    return 2;
  }
  auto store = OpenForAnalysis(o.db);
  if (!store.ok()) return Fail("compare", store.status());
  for (const std::string& name : {o.run, o.baseline}) {
    auto id = (*store)->RunId(name, false);
    if (!id.ok()) return Fail("compare", id.status());
  }
  AnalysisOptions a;
  a.prod_run = o.run;
  a.base_run = o.baseline;
  auto r = CompareRuns(**store, a);
  if (!r.ok()) return Fail("compare", r.status());
  if (o.json) std::printf("%s\n", ToJson(*r).c_str());
  else if (o.csv) PrintCsv(*r, stdout);
  else {
    std::printf("run %s vs baseline %s: %zu matching (op, size, n_ranks)\n", o.run.c_str(),
                o.baseline.c_str(), r->rows.size());
    PrintTable(*r, stdout);
  }
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Production run vs a baseline run (nccl-tests output or another Inspector run): "
                 "mean and CV of busbw per matching (op, message size, n_ranks). With "
                 "--baseline-log, first stores nccl-tests text logs as the baseline run.");
  cmd->add_option("--db", o->db, "Store file")->capture_default_str();
  cmd->add_option("--run", o->run, "Production run");
  cmd->add_option("--baseline", o->baseline, "Baseline run")->required();
  cmd->add_option("--baseline-log", o->logs, "nccl-tests text log(s) to store as the baseline");
  cmd->add_option("--op", o->op, "Collective of the logs when neither preamble nor file name says");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->add_flag("--csv", o->csv, "CSV output");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace compare_cmd
}  // namespace collscope::cli
