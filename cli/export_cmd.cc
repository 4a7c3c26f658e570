#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/store.h"

namespace collscope::cli {
namespace {

struct Options {
  std::string db = "collscope.duckdb";
  std::string parquet_dir;
};

int Run(const Options& o) {
  auto store = Store::Open(o.db, {.read_only = true});
  if (!store.ok()) {
    std::fprintf(stderr, "collscope export: %s\n", store.status().message().c_str());
    return 2;
  }
  if (o.parquet_dir.empty()) {
    std::fprintf(stderr, "collscope export: nothing to export; give --parquet DIR\n");
    return 2;
  }
  Status st = (*store)->ExportParquet(o.parquet_dir);
  if (!st.ok()) {
    std::fprintf(stderr, "collscope export: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("wrote every table and inspector_rows as Parquet to %s\n", o.parquet_dir.c_str());
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("export", "Export a store (Parquet: every table, zstd).");
  cmd->add_option("--db", o->db, "Store file")->capture_default_str();
  cmd->add_option("--parquet", o->parquet_dir, "Write DIR/<table>.parquet for every table");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace
}  // namespace collscope::cli
