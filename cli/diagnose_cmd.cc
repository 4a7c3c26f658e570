#include <cstdio>
#include <memory>

#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/registry.h"
#include "cli/command.h"
#include "cli/output.h"

namespace collscope::cli {
namespace diagnose_cmd {

struct Options {
  std::vector<std::string> paths;
  std::string db;
  std::string run;
  bool json = false;
  bool explain = false;
  bool list_detectors = false;
  int64_t since_us = 0, until_us = INT64_MAX;
};

int Run(const Options& o) {
  using namespace collscope::diagnose;
  if (o.list_detectors) {
    const std::string t = RegistryToText();
    std::fwrite(t.data(), 1, t.size(), stdout);
    return 0;
  }
  DiagnoseOptions d;
  d.run = o.run;
  d.window.since_us = o.since_us;
  d.window.until_us = o.until_us;
  InputSummary read;
  std::vector<Suppressed> suppressed;
  d.suppressed = &suppressed;
  Result<std::vector<Finding>> f = Status::InvalidArgument("give PATHS... or --db FILE");
  if (!o.db.empty()) {
    auto store = Store::Open(o.db, Store::Options::ReadOnly());
    if (!store.ok()) return Fail("diagnose", store.status());
    if (!PickRun(**store, "diagnose", &d.run)) return 2;
    // Everything the store's run holds, with the paths' step series, dumps and state files
    // checked against its records (a step series maps its ranks to the store's hosts and refutes
    // propagated lateness).
    f = o.paths.empty() ? DiagnoseStore(**store, d, nullptr, &read)
                        : DiagnosePaths(o.paths, d, nullptr, store->get(), &read);
  } else if (!o.paths.empty()) {
    f = DiagnosePaths(o.paths, d, nullptr, nullptr, &read);
  }
  if (!f.ok()) return Fail("diagnose", f.status());
  // What was read goes to stderr, so that --json output stays one document.
  const std::string said = read.ToText();
  std::fwrite(said.data(), 1, said.size(), stderr);
  if (!read.usable()) {
    std::fprintf(
        stderr,
        "collscope diagnose: nothing usable was read, so nothing can be said about this job\n");
    return 2;
  }
  std::string out = o.json ? FindingsToJson(*f, suppressed) : FindingsToText(*f);
  if (o.explain && !o.json)
    out += SuppressedToText(suppressed);
  else if (!o.json && !suppressed.empty()) {
    // Silence is no reassurance: what the cross-checks dropped is at least counted.
    const std::string dropped =
        std::to_string(suppressed.size()) +
        " candidate finding(s) suppressed or merged, each with its reason: see --explain\n";
    out = f->empty() ? "no findings: " + dropped : out + dropped;
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return f->empty() ? 0 : 1;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "diagnose",
      "Find faulty ranks, hosts, links and hangs (NCCL Inspector logs, Flight Recorder dumps, "
      "collscope in-flight state, step/phase series, Megatron/NeMo iteration logs, PyTorch "
      "profiler (Kineto) traces, collscope stacks files, or a "
      "store).\n"
      "Says on stderr what it read, the evidence tier, and what it could not use.\n"
      "Exit status (as diff's): 0 inputs read and no finding, 1 findings, 2 a usage error or "
      "nothing usable read.");
  cmd->add_option("paths", o->paths, "Input files or directories");
  cmd->add_option("--db", o->db, "Diagnose this store");
  cmd->add_option("--run", o->run, "Run in the store (default: the one with the most records)");
  cmd->add_flag(
      "--json", o->json,
      "Print {\"schema\": \"collscope.findings.v1\", \"findings\": [...], \"suppressed\": [...]}");
  cmd->add_option(
      "--since-us", o->since_us,
      "Diagnose only records from this time on (wall clock, microseconds since the epoch)");
  cmd->add_option("--until-us", o->until_us, "Diagnose only records that completed by this time");
  cmd->add_flag(
      "--list-detectors", o->list_detectors,
      "Print every detector (kinds, inputs, evidence tier) and the merge rules, and exit");
  cmd->add_flag("--explain", o->explain,
                "Also list the candidates that cross-checks dropped and the findings merges "
                "folded, with why");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace diagnose_cmd
}  // namespace collscope::cli
