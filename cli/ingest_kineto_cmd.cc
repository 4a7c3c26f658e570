// `collscope ingest-kineto`: stores PyTorch profiler (Kineto) traces (steps, GPU kernels, NCCL
// metadata) in a store, next to the run's Inspector records. `collscope ingest` does the same
// for the Kineto traces among its inputs once it calls readers::IngestKineto.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/readers/kineto.h"
#include "core/store.h"

namespace collscope::cli {
namespace {

struct Options {
  std::vector<std::string> paths;
  std::string db = "collscope.duckdb";
  std::string run;
  int threads = 0;
};

int Run(const Options& o) {
  auto store = Store::Open(o.db);
  if (!store.ok()) {
    std::fprintf(stderr, "collscope ingest-kineto: %s\n", store.status().message().c_str());
    return 2;
  }
  std::string run = o.run;
  if (run.empty()) {
    std::string p = o.paths.front();
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const size_t slash = p.find_last_of('/');
    run = slash == std::string::npos ? p : p.substr(slash + 1);
    if (run.empty() || run == ".") run = "default";
  }
  auto r = readers::IngestKineto(**store, o.paths, run, o.threads);
  if (!r.ok()) {
    std::fprintf(stderr, "collscope ingest-kineto: %s\n", r.status().message().c_str());
    return 2;
  }
  std::printf("run %s: %lu Kineto traces (%lu read, %lu already stored): %lu steps, %lu GPU "
              "activities (%lu NCCL kernels), %.1f MB in %.2f s\n",
              run.c_str(), r->files_seen, r->files_read, r->files_unchanged, r->steps, r->kernels,
              r->nccl_kernels, r->bytes / 1e6, r->seconds);
  if (r->files_seen == 0) {
    std::fprintf(stderr, "collscope ingest-kineto: no Kineto traces (*.pt.trace.json[.gz]) found\n");
    return 1;
  }
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "ingest-kineto",
      "Store PyTorch profiler (Kineto) traces (*.pt.trace.json[.gz], files or directories): "
      "ProfilerStep ranges, GPU kernels and NCCL metadata, in the tables steps, kernels and "
      "kineto_traces.");
  cmd->add_option("paths", o->paths, "Trace files or directories")->required();
  cmd->add_option("--db", o->db, "Store file (created if missing)")->capture_default_str();
  cmd->add_option("--run", o->run, "Run name (default: the first path's base name)");
  cmd->add_option("--threads", o->threads, "Parser threads (default: up to 4)");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace
}  // namespace collscope::cli
