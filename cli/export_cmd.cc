#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/kernel_detect.h"
#include "analysis/diagnose/perfetto.h"
#include "cli/command.h"
#include "cli/output.h"
#include "core/readers/kineto.h"
#include "core/store.h"

namespace collscope::cli {
namespace export_cmd {

struct Options {
  std::string db = "collscope.duckdb";
  std::string parquet_dir;
  std::string perfetto;
  std::string findings;
  std::string run;
  size_t max_peers = 16;
  int max_steps = 6;
  int context_steps = 1;
};

// The findings to annotate: from --findings, else a diagnosis of the store.
Result<std::vector<diagnose::Finding>> Findings(Store& store, const Options& o) {
  using namespace collscope::diagnose;
  std::vector<Finding> f;
  if (!o.findings.empty()) {
    std::ifstream in(o.findings, std::ios::binary);
    if (!in) return Status::IOError(o.findings + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    COLLSCOPE_RETURN_IF_ERROR(FindingsFromJson(ss.str(), &f).WithPrefix(o.findings + ": "));
    return f;
  }
  DiagnoseOptions d;
  d.run = o.run;
  auto comm = DiagnoseStore(store, d);
  if (!comm.ok()) return comm.status();
  f = std::move(*comm);
  if (readers::HasKinetoTables(store)) {
    auto k = DiagnoseKineto(store, o.run, true);
    if (!k.ok()) return k.status();
    f.insert(f.end(), k->begin(), k->end());
  }
  Consolidate(&f);
  return f;
}

int Run(Options o) {
  Store::Options open = Store::Options::ReadOnly();
  open.writable_dir = o.parquet_dir;
  auto store = Store::Open(o.db, open);
  if (!store.ok()) return Fail("export", store.status());
  if (!o.perfetto.empty() && !PickRun(**store, "export", &o.run)) return 2;
  if (o.parquet_dir.empty() && o.perfetto.empty()) {
    std::fprintf(stderr, "collscope export: nothing to export; give --parquet DIR or --perfetto OUT.json\n");
    return 2;
  }
  if (!o.parquet_dir.empty()) {
    Status st = (*store)->ExportParquet(o.parquet_dir);
    if (!st.ok()) return Fail("export", st);
    std::printf("wrote every table and inspector_rows as Parquet to %s\n", o.parquet_dir.c_str());
  }
  if (!o.perfetto.empty()) {
    auto f = Findings(**store, o);
    if (!f.ok()) return Fail("export", f.status());
    diagnose::PerfettoOptions po;
    po.run = o.run;
    po.max_peers = o.max_peers;
    po.max_steps = o.max_steps;
    po.context_steps = o.context_steps;
    std::string json;
    auto rep = diagnose::ExportPerfetto(**store, *f, po, &json);
    if (!rep.ok()) return Fail("export", rep.status());
    FILE* out = std::fopen(o.perfetto.c_str(), "wb");
    if (!out || std::fwrite(json.data(), 1, json.size(), out) != json.size() || std::fclose(out) != 0) {
      std::fprintf(stderr, "collscope export: cannot write %s\n", o.perfetto.c_str());
      return 1;
    }
    std::printf("wrote %zu trace events to %s: %zu findings, %zu ranks, %zu windows, %zu steps, "
                "%zu kernels, %zu collectives, %zu stack slices%s; open it in https://ui.perfetto.dev\n",
                rep->events, o.perfetto.c_str(), rep->findings, rep->ranks, rep->windows, rep->steps,
                rep->kernels, rep->collectives, rep->stack_slices, rep->truncated ? " (truncated)" : "");
    if (!rep->note.empty()) std::fprintf(stderr, "collscope export: note: %s\n", rep->note.c_str());
  }
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Export a store: Parquet (every table, zstd) and/or a Perfetto / Chrome trace of "
                "the anomalous steps with the findings as annotations.");
  cmd->add_option("--db", o->db, "Store file")->capture_default_str();
  cmd->add_option("--parquet", o->parquet_dir, "Write DIR/<table>.parquet for every table");
  cmd->add_option("--perfetto", o->perfetto,
                  "Write a Chrome trace-event JSON (ui.perfetto.dev) of the anomalous steps of the "
                  "implicated ranks and their peers");
  cmd->add_option("--findings", o->findings,
                  "Findings to annotate (collscope.findings.v1 JSON from `diagnose --json`); "
                  "default: diagnose the store");
  cmd->add_option("--run", o->run, "Run in the store (default: the one with the most records)");
  cmd->add_option("--max-peers", o->max_peers, "Victims shown per finding")->capture_default_str();
  cmd->add_option("--max-steps", o->max_steps, "Anomalous steps shown per finding")->capture_default_str();
  cmd->add_option("--context-steps", o->context_steps, "Steps shown before them")->capture_default_str();
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace export_cmd
}  // namespace collscope::cli
