#include <cstdio>
#include <memory>

#include "analysis/diagnose/finding.h"
#include "analysis/summary.h"
#include "analysis/views.h"
#include "cli/command.h"
#include "cli/output.h"
#include "core/readers/prom_textfile.h"
#include "core/readers/text.h"

namespace collscope::cli {
namespace summary_cmd {

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

std::string Percent(double share) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * share);
  return buf;
}

std::string Ms(int64_t us) { return std::to_string((us + 500) / 1000) + " ms"; }

std::string CommText(const std::string& comm, const std::string& name) {
  return readers::Printable(name.empty() ? comm : comm + " (" + name + ")");
}

// What the run's records cover, and what was lost where (core/coverage.h).
void PrintCoverage(const RunCoverage& c) {
  std::printf("  coverage:\n");
  std::printf("    collective instances (between each communicator's first and last sequence numbers): %lu, ",
              c.coll_issued);
  if (c.coll_unrecorded == 0)
    std::printf("every one recorded by some member\n");
  else
    std::printf("%lu of them recorded by no member (under NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES, discarded as not "
                "kernel-timed, dropped by every member, or not sampled)\n",
                c.coll_unrecorded);
  if (c.has_dump_stats)
    std::printf("    Inspector dropped %lu collective and %lu point-to-point records (dump_stats; from %lu "
                "process-communicator pair%s)\n",
                c.coll_dropped, c.p2p_dropped, c.dropping_pairs, c.dropping_pairs == 1 ? "" : "s");
  else
    std::printf("    Inspector's drop counters: none in these logs (dump_stats comes with v4.1+), so drops are "
                "unknown\n");
  if (c.not_kernel_timed)
    std::printf("    %lu records timed on the CPU (kernel_cpu, collective_cpu), not by the GPU kernel\n",
                c.not_kernel_timed);
  for (const IncompleteCommunicator& m : c.incomplete)
    std::printf("    communicator %s: records from %d of its %d ranks\n", CommText(m.comm, m.comm_name).c_str(),
                m.ranks_seen, m.n_ranks);
  if (c.incomplete_total > c.incomplete.size())
    std::printf("    ... and %lu more communicators missing ranks\n", c.incomplete_total - c.incomplete.size());
  for (const MemberCoverage& m : c.low)
    std::printf("    %s pid %lu, rank %d of %s: %lu of %lu %s instances (%s; its peers %s)\n", readers::Printable(m.hostname).c_str(),
                m.pid, m.rank, CommText(m.comm, m.comm_name).c_str(), m.seen, m.known, m.op.c_str(),
                Percent(m.share()).c_str(), Percent(m.peer_share).c_str());
  if (c.low_total > c.low.size())
    std::printf("    ... and %lu more ranks that recorded under 90%% of what their peers did\n",
                c.low_total - c.low.size());
  for (const DumpGap& g : c.gaps) {
    if (g.at_end)
      std::printf("    %s pid %lu: no dump after %s while the job's go on to %s (usual interval %s)\n",
                  readers::Printable(g.hostname).c_str(), g.pid, diagnose::FormatTimeUs(g.from_us).c_str(),
                  diagnose::FormatTimeUs(g.to_us).c_str(), Ms(g.usual_us).c_str());
    else
      std::printf("    %s pid %lu: no dump from %s to %s (usual interval %s)\n", readers::Printable(g.hostname).c_str(), g.pid,
                  diagnose::FormatTimeUs(g.from_us).c_str(), diagnose::FormatTimeUs(g.to_us).c_str(),
                  Ms(g.usual_us).c_str());
  }
  if (c.gaps_total > c.gaps.size())
    std::printf("    ... and %lu more windows without dumps\n", c.gaps_total - c.gaps.size());
  if (c.incomplete_total == 0 && c.low_total == 0 && c.gaps_total == 0)
    std::printf("    every member of every communicator recorded what its peers did, with no pause in its dumps\n");
}

std::string CoverageJson(const RunCoverage& c) {
  std::string o = "{\"coll_issued\": " + std::to_string(c.coll_issued) +
                  ", \"coll_unrecorded\": " + std::to_string(c.coll_unrecorded) +
                  ", \"not_kernel_timed\": " + std::to_string(c.not_kernel_timed) + ", \"dump_stats\": " +
                  (c.has_dump_stats ? "true" : "false") + ", \"coll_dropped\": " + std::to_string(c.coll_dropped) +
                  ", \"p2p_dropped\": " + std::to_string(c.p2p_dropped) +
                  ", \"dropping_pairs\": " + std::to_string(c.dropping_pairs) +
                  ", \"incomplete_communicators_total\": " + std::to_string(c.incomplete_total) +
                  ", \"incomplete_communicators\": [";
  for (size_t i = 0; i < c.incomplete.size(); ++i) {
    const IncompleteCommunicator& m = c.incomplete[i];
    o += std::string(i ? ", " : "") + "{\"comm\": " + JsonQuoted(m.comm) + ", \"comm_name\": " +
         JsonQuoted(m.comm_name) + ", \"n_ranks\": " + std::to_string(m.n_ranks) +
         ", \"ranks_seen\": " + std::to_string(m.ranks_seen) + "}";
  }
  o += "], \"low_coverage_total\": " + std::to_string(c.low_total) + ", \"low_coverage\": [";
  for (size_t i = 0; i < c.low.size(); ++i) {
    const MemberCoverage& m = c.low[i];
    char buf[96];
    std::snprintf(buf, sizeof buf, ", \"share\": %.6f, \"peer_share\": %.6f}", m.share(), m.peer_share);
    o += std::string(i ? ", " : "") + "{\"hostname\": " + JsonQuoted(m.hostname) + ", \"pid\": " +
         std::to_string(m.pid) + ", \"comm\": " + JsonQuoted(m.comm) + ", \"rank\": " + std::to_string(m.rank) +
         ", \"op\": " + JsonQuoted(m.op) + ", \"seen\": " + std::to_string(m.seen) +
         ", \"known\": " + std::to_string(m.known) + buf;
  }
  o += "], \"dump_gaps_total\": " + std::to_string(c.gaps_total) + ", \"dump_gaps\": [";
  for (size_t i = 0; i < c.gaps.size(); ++i) {
    const DumpGap& g = c.gaps[i];
    o += std::string(i ? ", " : "") + "{\"hostname\": " + JsonQuoted(g.hostname) + ", \"pid\": " +
         std::to_string(g.pid) + ", \"from_us\": " + std::to_string(g.from_us) +
         ", \"to_us\": " + std::to_string(g.to_us) + ", \"usual_us\": " + std::to_string(g.usual_us) +
         ", \"at_end\": " + (g.at_end ? "true" : "false") + "}";
  }
  return o + "]}";
}

// The run's NCCL Inspector metric files (Prometheus textfiles, OTLP JSON), and why diagnose
// compares no rank from them.
void PrintProm(const PromSummary& p) {
  if (p.files == 0) return;
  std::printf(
      "  NCCL Inspector metric files: %lu (%lu samples, layout %s) from %lu nodes, %lu GPUs",
      p.files, p.samples, p.layouts.c_str(), p.nodes, p.gpus);
  if (p.t0_us > 0)
    std::printf(", %s .. %s", diagnose::FormatTimeUs(p.t0_us).c_str(), diagnose::FormatTimeUs(p.t1_us).c_str());
  std::printf("\n");
  if (p.lines_unused) std::printf("    %lu lines or values not understood (collscope ingest names them)\n", p.lines_unused);
  if (p.gpus_counting)
    std::printf("    Inspector dropped %lu of %lu operations (PROM_DUMP_STATS counters of %lu GPUs)\n", p.dropped, p.ops,
                p.gpus_counting);
  else
    std::printf("    Inspector's drop counters: none in these files (NCCL_INSPECTOR_PROM_DUMP_STATS=1 writes them)\n");
  if (!p.kinds.empty()) {
    std::printf("    exec time by communicator kind, each GPU's mean against the other GPUs' (largest spread first):\n");
    std::printf("    %-20s %-14s %5s %6s %-10s %5s %12s %12s  %s\n", "communicator", "op", "nodes", "ranks", "size",
                "GPUs", "median", "largest", "on");
    for (const PromKind& k : p.kinds) {
      char ratio[32] = "";
      if (k.median_us > 0) std::snprintf(ratio, sizeof ratio, " (%.2fx)", k.max_us / k.median_us);
      std::printf("    %-20s %-14s %5d %6d %-10s %5lu %9.0f us %9.0f us  %s %s%s\n", readers::Printable(k.comm).c_str(),
                  k.op.c_str(), k.n_nodes, k.nranks, readers::Printable(k.message_size).c_str(), k.gpus, k.median_us,
                  k.max_us, readers::Printable(k.max_node).c_str(), k.max_gpu.c_str(), ratio);
    }
    if (p.kinds_total > p.kinds.size()) std::printf("    ... and %lu more kinds\n", p.kinds_total - p.kinds.size());
  }
  std::printf("    collscope diagnose compares no rank from these: %s\n", readers::kPromNotComparable);
}

std::string PromJson(const PromSummary& p) {
  std::string o = "{\"files\": " + std::to_string(p.files) + ", \"samples\": " + std::to_string(p.samples) +
                  ", \"lines_unused\": " + std::to_string(p.lines_unused) + ", \"layouts\": " + JsonQuoted(p.layouts) +
                  ", \"nodes\": " + std::to_string(p.nodes) + ", \"gpus\": " + std::to_string(p.gpus) +
                  ", \"gpus_counting\": " + std::to_string(p.gpus_counting) + ", \"ops\": " + std::to_string(p.ops) +
                  ", \"dropped\": " + std::to_string(p.dropped) + ", \"t0_us\": " + std::to_string(p.t0_us) +
                  ", \"t1_us\": " + std::to_string(p.t1_us) + ", \"kinds_total\": " + std::to_string(p.kinds_total) +
                  ", \"kinds\": [";
  for (size_t i = 0; i < p.kinds.size(); ++i) {
    const PromKind& k = p.kinds[i];
    char buf[96];
    std::snprintf(buf, sizeof buf, ", \"median_us\": %.3f, \"max_us\": %.3f", k.median_us, k.max_us);
    o += std::string(i ? ", " : "") + "{\"comm\": " + JsonQuoted(k.comm) + ", \"op\": " + JsonQuoted(k.op) +
         ", \"n_nodes\": " + std::to_string(k.n_nodes) + ", \"nranks\": " + std::to_string(k.nranks) +
         ", \"message_size\": " + JsonQuoted(k.message_size) + ", \"gpus\": " + std::to_string(k.gpus) +
         ", \"samples\": " + std::to_string(k.samples) + buf + ", \"max_node\": " + JsonQuoted(k.max_node) +
         ", \"max_gpu\": " + JsonQuoted(k.max_gpu) + "}";
  }
  return o + "]}";
}

int Run(const Options& o) {
  auto store = OpenForAnalysis(o.db);
  if (!store.ok()) return Fail("summary", store.status());
  auto runs = Summarize(**store, o.run, o.top);
  if (!runs.ok()) return Fail("summary", runs.status());
  if (o.json) {
    std::string out = "{\"runs\": [";
    for (size_t i = 0; i < runs->size(); ++i) {
      const RunSummary& r = (*runs)[i];
      out += (i ? ", " : "") + std::string("{\"run\": ") + JsonQuoted(r.name) +
             ", \"records\": " + std::to_string(r.records) + ", \"hosts\": " +
             std::to_string(r.hosts) + ", \"processes\": " + std::to_string(r.processes) +
             ", \"communicators\": " + std::to_string(r.communicators) + ", \"files\": " +
             std::to_string(r.files) + ", \"rejected_lines\": " +
             std::to_string(r.rejected_lines) + ", \"first_dump\": " + JsonQuoted(r.first_dump) +
             ", \"last_dump\": " + JsonQuoted(r.last_dump) + ", \"hot_kernels\": [";
      for (size_t k = 0; k < r.hot_kernels.size(); ++k) {
        const HotKernel& h = r.hot_kernels[k];
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "%s{\"rank\": %d, \"kernel_key\": %s, \"records\": %lu, \"bytes\": %lu, "
                      "\"time_us\": %lu, \"bytes_share\": %.6f, \"time_share\": %.6f, "
                      "\"cumulative_time_share\": %.6f}",
                      k ? ", " : "", h.rank, JsonQuoted(h.kernel_key).c_str(), h.records, h.bytes,
                      h.time_us, h.bytes_share, h.time_share, h.cumulative_time_share);
        out += buf;
      }
      out += "], \"coverage\": " + CoverageJson(r.coverage) + ", \"prom\": " + PromJson(r.prom) + "}";
    }
    std::printf("%s]}\n", out.c_str());
    return 0;
  }
  for (const RunSummary& r : *runs) {
    std::printf("run %s: %lu records from %lu processes on %lu hosts, %lu communicators, "
                "%lu files, %lu rejected lines\n",
                readers::Printable(r.name).c_str(), r.records, r.processes, r.hosts, r.communicators, r.files,
                r.rejected_lines);
    if (!r.first_dump.empty())
      std::printf("  dumps from %s to %s\n", r.first_dump.c_str(), r.last_dump.c_str());
    if (!r.hot_kernels.empty()) {
      std::printf("  hot kernels (by share of time):\n");
      std::printf("  %4s  %-44s %10s %10s %7s %7s %7s\n", "#", "kernel (class/ranks,nodes/op/size)",
                  "records", "bytes", "time%", "cum%", "bytes%");
    }
    for (const HotKernel& h : r.hot_kernels)
      std::printf("  %4d  %-44s %10lu %10s %6.1f%% %6.1f%% %6.1f%%\n", h.rank,
                  readers::Printable(h.kernel_key).c_str(), h.records, Bytes(double(h.bytes)).c_str(),
                  100 * h.time_share, 100 * h.cumulative_time_share, 100 * h.bytes_share);
    // Without records there is nothing whose coverage could be measured: saying "every member
    // recorded" of none would be reassurance from silence.
    if (r.records > 0) PrintCoverage(r.coverage);
    else std::printf("  coverage: no NCCL Inspector records in this run, so none is measured\n");
    PrintProm(r.prom);
  }
  return 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "summary",
      "Summarise a store: records, runs, hosts, communicators, the hot kernels "
      "ranked by share of time (with shares of bytes), and what the records cover: what "
      "Inspector dropped, communicators missing ranks, ranks that recorded less than their "
      "peers, and windows without dumps; and its NCCL Inspector metric files (Prometheus, OTLP).");
  cmd->add_option("--db", o->db, "Store file")->capture_default_str();
  cmd->add_option("--run", o->run, "Only this run");
  cmd->add_option("--top", o->top, "Hot kernels (and coverage entries of each kind) to list per run")->capture_default_str();
  cmd->add_flag("--json", o->json, "JSON output");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace summary_cmd
}  // namespace collscope::cli
