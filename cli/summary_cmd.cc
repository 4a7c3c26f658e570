#include <cstdio>
#include <memory>

#include "analysis/summary.h"
#include "analysis/views.h"
#include "cli/command.h"
#include "cli/output.h"

namespace collscope::cli {
namespace {

struct Options {
  std::string db = "collscope.duckdb";
  std::string run;
  int top = 10;
  bool json = false;
};

std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

int Run(const Options& o) {
  auto store = OpenForAnalysis(o.db);
  if (!store.ok()) {
    std::fprintf(stderr, "collscope summary: %s\n", store.status().message().c_str());
    return 2;
  }
  auto runs = Summarize(**store, o.run, o.top);
  if (!runs.ok()) {
    std::fprintf(stderr, "collscope summary: %s\n", runs.status().message().c_str());
    return 1;
  }
  if (o.json) {
    std::string out = "{\"runs\": [";
    for (size_t i = 0; i < runs->size(); ++i) {
      const RunSummary& r = (*runs)[i];
      out += (i ? ", " : "") + std::string("{\"run\": ") + JsonString(r.name) +
             ", \"records\": " + std::to_string(r.records) + ", \"hosts\": " +
             std::to_string(r.hosts) + ", \"processes\": " + std::to_string(r.processes) +
             ", \"communicators\": " + std::to_string(r.communicators) + ", \"files\": " +
             std::to_string(r.files) + ", \"rejected_lines\": " +
             std::to_string(r.rejected_lines) + ", \"first_dump\": " + JsonString(r.first_dump) +
             ", \"last_dump\": " + JsonString(r.last_dump) + ", \"hot_kernels\": [";
      for (size_t k = 0; k < r.hot_kernels.size(); ++k) {
        const HotKernel& h = r.hot_kernels[k];
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "%s{\"rank\": %d, \"kernel_key\": %s, \"records\": %lu, \"bytes\": %lu, "
                      "\"time_us\": %lu, \"bytes_share\": %.6f, \"time_share\": %.6f, "
                      "\"cumulative_time_share\": %.6f}",
                      k ? ", " : "", h.rank, JsonString(h.kernel_key).c_str(), h.records, h.bytes,
                      h.time_us, h.bytes_share, h.time_share, h.cumulative_time_share);
        out += buf;
      }
      out += "]}";
    }
    std::printf("%s]}\n", out.c_str());
    return 0;
  }
  for (const RunSummary& r : *runs) {
    std::printf("run %s: %lu records from %lu processes on %lu hosts, %lu communicators, "
                "%lu files, %lu rejected lines\n",
                r.name.c_str(), r.records, r.processes, r.hosts, r.communicators, r.files,
                r.rejected_lines);
    if (!r.first_dump.empty())
      std::printf("  dumps from %s to %s\n", r.first_dump.c_str(), r.last_dump.c_str());
    std::printf("  hot kernels (by share of time):\n");
    std::printf("  %4s  %-44s %10s %10s %7s %7s %7s\n", "#", "kernel (class/ranks,nodes/op/size)",
                "records", "bytes", "time%", "cum%", "bytes%");
    for (const HotKernel& h : r.hot_kernels)
      std::printf("  %4d  %-44s %10lu %10s %6.1f%% %6.1f%% %6.1f%%\n", h.rank,
                  h.kernel_key.c_str(), h.records, Bytes(double(h.bytes)).c_str(),
                  100 * h.time_share, 100 * h.cumulative_time_share, 100 * h.bytes_share);
  }
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "summary", "Summarise a store: records, runs, hosts, communicators, and the hot kernels "
                 "ranked by share of time (with shares of bytes).");
  cmd->add_option("--db", o->db, "Store file")->capture_default_str();
  cmd->add_option("--run", o->run, "Only this run");
  cmd->add_option("--top", o->top, "Hot kernels to list per run")->capture_default_str();
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace
}  // namespace collscope::cli
