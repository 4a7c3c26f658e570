#include <cstdio>
#include <memory>

#include "analysis/views.h"
#include "cli/command.h"
#include "cli/output.h"
#include "core/store.h"

namespace collscope::cli {
namespace sql_cmd {

struct Options {
  std::string db = "collscope.duckdb";
  std::string query;
  bool json = false, csv = false;
  size_t max_rows = 1000;
};

int Run(const Options& o) {
  auto store = OpenForAnalysis(o.db);
  if (!store.ok()) return Fail("sql", store.status());
  Result<QueryResult> r = (*store)->QueryReadOnly(o.query);
  if (!r.ok()) return Fail("sql", r.status());
  if (o.json) std::printf("%s\n", ToJson(*r).c_str());
  else if (o.csv) PrintCsv(*r, stdout);
  else PrintTable(*r, stdout, o.max_rows);
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "sql", "Run read-only SQL against a store (statements that write are refused). Tables: "
             "see `collscope schema`; views: records_v, inspector_rows, hosts, kernel_stats, hot_kernels, run_overview (docs/sql.md).");
  cmd->add_option("query", o->query, "SQL (one or more statements; the last one is printed)")
      ->required();
  cmd->add_option("--db", o->db, "Store file")->capture_default_str();
  cmd->add_flag("--json", o->json, "JSON output (array of objects)");
  cmd->add_flag("--csv", o->csv, "CSV output");
  cmd->add_option("--max-rows", o->max_rows, "Rows shown in the table output")
      ->capture_default_str();
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace sql_cmd
}  // namespace collscope::cli
