#include <cstdio>
#include <memory>

#include "analysis/report.h"
#include "analysis/views.h"
#include "cli/command.h"
#include "cli/output.h"

namespace collscope::cli {
namespace report_cmd {

struct Options {
  std::string db = "collscope.duckdb";
  std::string output = "report.html";
  ReportOptions report;
};

int Run(Options& o) {
  auto store = OpenForAnalysis(o.db);
  if (!store.ok()) return Fail("report", store.status());
  if (!PickRun(**store, "report", &o.report.run)) return 2;
  o.report.output = o.output;
  Status st = WriteReport(**store, o.report);
  if (!st.ok()) return Fail("report", st);
  std::printf("wrote %s\n", o.output.c_str());
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write one self-contained, offline HTML report of a run, findings first: it diagnoses the "
                "store itself (as `collscope diagnose --db` does) unless given --findings, and says which run, "
                "which evidence tier and which findings it used; then the overview, hot kernels, busbw ECDFs, "
                "bandwidth over time with the findings' windows, host and rank heatmaps, range bars and the "
                "baseline comparison (docs/report.md).");
  cmd->add_option("--db", o->db, "Store file")->capture_default_str();
  cmd->add_option("-o,--output", o->output, "HTML file to write")->capture_default_str();
  cmd->add_option("--run", o->report.run, "Run to report (default: the one with most records)");
  cmd->add_option("--baseline", o->report.baseline,
                  "Baseline run (default: the first run holding nccl-tests results)");
  cmd->add_option("--findings", o->report.findings_path,
                  "Show these findings (collscope.findings.v1, from `collscope diagnose --json`) instead of "
                  "diagnosing the store");
  cmd->add_option("--top", o->report.top_kernels, "Hot kernels plotted")->capture_default_str();
  cmd->add_option("--bin-s", o->report.bin_s, "Time bin, seconds (widened for long runs)")
      ->capture_default_str();
  cmd->add_option("--min-bytes", o->report.min_bytes,
                  "Smallest message for temporal and spatial plots")->capture_default_str();
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace report_cmd
}  // namespace collscope::cli
