#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "cli/output.h"
#include "core/taxonomy.h"

namespace collscope::cli {
namespace schema_cmd {

struct Options {
  bool json = false, sql = false;
  std::string table;
};

int Run(const Options& o) {
  if (o.sql) {
    std::printf("%s", SchemaDdl().c_str());
    return 0;
  }
  QueryResult r;
  r.columns = {"table", "column", "type", "role", "source", "description"};
  r.types.assign(6, DUCKDB_TYPE_VARCHAR);
  for (const FieldSpec& f : Fields()) {
    if (!o.table.empty() && f.table != o.table) continue;
    r.rows.push_back({std::string(f.table), std::string(f.name), std::string(f.sql_type),
                      std::string(RoleName(f.role)), std::string(f.source),
                      std::string(f.description)});
  }
  if (r.rows.empty()) {
    std::fprintf(stderr, "collscope schema: no table named \"%s\"\n", o.table.c_str());
    return 1;
  }
  if (o.json) std::printf("%s\n", ToJson(r).c_str());
  else PrintTable(r, stdout, SIZE_MAX);
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "schema", "Print the store's tables and columns with their taxonomy role (identifier, "
                "configuration, workload, measurement, counter, provenance).");
  cmd->add_option("--table", o->table, "Only this table");
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->add_flag("--sql", o->sql, "Print the DDL instead");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace schema_cmd
}  // namespace collscope::cli
