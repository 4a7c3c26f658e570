#include <cstdio>
#include <memory>

#include "analysis/primitives.h"
#include "analysis/views.h"
#include "cli/command.h"
#include "cli/output.h"

namespace collscope::cli {
namespace analyze_cmd {

struct Options {
  std::string db = "collscope.duckdb";
  std::string primitive;
  AnalysisOptions a;
  bool json = false, csv = false, list = false, show_sql = false;
};

int Run(Options& o) {
  if (o.list || o.primitive.empty()) {
    for (const PrimitiveInfo& p : Primitives())
      std::printf("%-26s %-10s %s\n", p.name.c_str(), p.category.c_str(), p.description.c_str());
    return o.primitive.empty() && !o.list ? 2 : 0;
  }
  if (o.show_sql) {
    auto sql = PrimitiveSql(o.primitive, o.a);
    if (!sql.ok()) return Fail("analyze", sql.status());
    std::printf("%s\n", sql->c_str());
    return 0;
  }
  auto store = OpenForAnalysis(o.db);
  if (!store.ok()) return Fail("analyze", store.status());
  auto r = RunPrimitive(**store, o.primitive, o.a);
  if (!r.ok()) return Fail("analyze", r.status());
  if (o.json) std::printf("%s\n", ToJson(*r).c_str());
  else if (o.csv) PrintCsv(*r, stdout);
  else PrintTable(*r, stdout);
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "analyze", "Run one analysis primitive (summary, variation, temporal, spatial, resource, "
                 "other; `--list`); each is also a SQL view or macro (docs/analysis.md).");
  cmd->add_option("primitive", o->primitive, "Primitive name (see --list)");
  cmd->add_option("--db", o->db, "Store file")->capture_default_str();
  cmd->add_option("--run", o->a.run, "Only this run");
  cmd->add_option("--bin-s", o->a.bin_s, "Time bin, seconds")->capture_default_str();
  cmd->add_option("--min-bytes", o->a.min_bytes, "Smallest message (temporal, spatial)")
      ->capture_default_str();
  cmd->add_option("--points", o->a.ecdf_points, "ECDF points per kernel")->capture_default_str();
  cmd->add_option("--bins", o->a.histogram_bins, "Histogram bins")->capture_default_str();
  cmd->add_option("--block", o->a.block_ranks, "Ranks per block")->capture_default_str();
  cmd->add_option("--sn-bin", o->a.sn_bin, "Sequence numbers per bin")->capture_default_str();
  cmd->add_option("--column", o->a.column, "Metadata column (group_by_column, busbw_by_column)")
      ->capture_default_str();
  cmd->add_option("--prod", o->a.prod_run, "compare_runs: production run");
  cmd->add_option("--baseline", o->a.base_run, "compare_runs: baseline run");
  cmd->add_flag("--list", o->list, "List the primitives");
  cmd->add_flag("--sql", o->show_sql, "Print the SQL instead of running it");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->add_flag("--csv", o->csv, "CSV output");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace analyze_cmd
}  // namespace collscope::cli
