#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "cli/output.h"
#include "analysis/views.h"
#include "core/readers/ingest_inputs.h"

namespace collscope::cli {
namespace ingest_cmd {

struct Options {
  std::vector<std::string> paths;
  std::string db = "collscope.duckdb";
  std::string run;
  int threads = 0;
  bool json = false, quiet = false;
};

std::string DefaultRunName(const std::vector<std::string>& paths) {
  std::string p = paths.empty() ? "default" : paths.front();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.find_last_of('/');
  std::string base = slash == std::string::npos ? p : p.substr(slash + 1);
  return base.empty() || base == "." ? "default" : base;
}

// What one ingest stored, by input format.
struct Reports {
  const IngestReport& rep;
  const readers::KinetoIngestReport& kin;
  const readers::StepIngestReport& steps;
  const readers::HangIngestReport& hang;
  const readers::KernelSummaryIngestReport& kern;
  const readers::StackIngestReport& stk;
  const readers::PromIngestReport& prom;
  const readers::RecordSummaryIngestReport& sums;
};

void PrintJson(const std::string& run, const Reports& all) {
  const auto& [rep, kin, steps, hang, kern, stk, prom, sums] = all;
  std::printf(
      "{\"run\": %s, \"run_id\": %d, \"ingest_id\": %d, \"files_seen\": %lu, \"files_read\": "
      "%lu, \"files_unchanged\": %lu, \"files_rewritten\": %lu, \"bytes_read\": %lu, "
      "\"lines_read\": %lu, \"records_stored\": %lu, \"dump_stats_stored\": %lu, "
      "\"lines_rejected\": %lu, \"incomplete_tail_bytes\": %lu, \"records_missing\": %lu, "
      "\"proxy_ops_stored\": %lu, \"proxy_steps_stored\": %lu, "
      "\"records_without_timing_source\": %lu, \"seconds\": %.3f, "
      "\"kineto_traces_seen\": %lu, \"kineto_traces_read\": %lu, \"kineto_steps\": %lu, "
      "\"kineto_kernels\": %lu, \"step_files_seen\": %lu, \"step_files_read\": %lu, \"steps\": "
      "%lu, "
      "\"step_phases\": %lu, \"step_lines_rejected\": %lu, \"step_events_dropped\": %lu, "
      "\"flight_recorder_dumps_seen\": %lu, \"flight_recorder_dumps_read\": %lu, "
      "\"state_files_seen\": %lu, "
      "\"state_files_read\": %lu, \"ras_reports_seen\": %lu, \"ras_reports_read\": %lu, "
      "\"ras_lines_unused\": %lu, \"kernel_summary_files_seen\": %lu, "
      "\"kernel_summary_files_read\": %lu, "
      "\"kernel_summaries\": %lu, \"kernel_summary_lines_rejected\": %lu, "
      "\"kernel_summary_lines_unknown\": %lu, "
      "\"stack_files_seen\": %lu, \"stack_files_read\": %lu, \"stack_files_incomplete\": %lu, "
      "\"stacks\": %lu, "
      "\"stack_lines_rejected\": %lu, \"stack_lines_unknown\": %lu, "
      "\"prom_files_seen\": %lu, \"prom_files_read\": %lu, \"prom_samples\": %lu, "
      "\"prom_lines_unused\": %lu, "
      "\"prom_incomplete_tails\": %lu, \"summary_files_seen\": %lu, \"summary_files_read\": %lu, "
      "\"summary_files_failed\": %zu, \"summary_records_stored\": %lu, \"summary_batches\": %lu}\n",
      JsonQuoted(run).c_str(), rep.run_id, rep.ingest_id, rep.files_seen, rep.files_read,
      rep.files_unchanged, rep.files_rewritten, rep.bytes_read, rep.lines_read, rep.records_stored,
      rep.dump_stats_stored, rep.lines_rejected, rep.incomplete_tail_bytes, rep.records_missing,
      rep.proxy_ops_stored, rep.proxy_steps_stored, rep.records_without_timing_source, rep.seconds,
      kin.files_seen, kin.files_read, kin.steps, kin.kernels, steps.files_seen, steps.files_read,
      steps.steps, steps.phases, steps.lines_rejected, steps.dropped_events, hang.dumps_seen,
      hang.dumps_read, hang.states_seen, hang.states_read, hang.ras_seen, hang.ras_read,
      hang.ras_lines_unused, kern.files_seen, kern.files_read, kern.summaries, kern.lines_rejected,
      kern.lines_unknown, stk.files_seen, stk.files_read, stk.files_incomplete, stk.stacks,
      stk.lines_rejected, stk.lines_unknown, prom.files_seen, prom.files_read, prom.samples,
      prom.lines_unused, prom.incomplete_tails, sums.files_seen, sums.files_read,
      sums.failed.size(), sums.records_stored, sums.batches);
}

void PrintText(const std::string& db, const std::string& run, const Reports& all) {
  const auto& [rep, kin, steps, hang, kern, stk, prom, sums] = all;
  std::printf("run %s: %lu files (%lu read, %lu unchanged, %lu rewritten)\n", run.c_str(),
              rep.files_seen, rep.files_read, rep.files_unchanged, rep.files_rewritten);
  std::printf("%lu lines, %.1f MB in %.2f s (%.0f MB/s): %lu records, %lu dump_stats stored, "
              "%lu rejected\n",
              rep.lines_read, rep.bytes_read / 1e6, rep.seconds,
              rep.seconds > 0 ? rep.bytes_read / 1e6 / rep.seconds : 0.0, rep.records_stored,
              rep.dump_stats_stored, rep.lines_rejected);
  if (rep.incomplete_tail_bytes)
    std::printf("%lu bytes of unfinished last lines left for the next ingest\n",
                rep.incomplete_tail_bytes);
  if (rep.records_missing)
    std::printf("%lu records announced by v4.3/v4.4 markers are missing from the files (cut or "
                "split mid-batch; see ingest_log)\n", rep.records_missing);
  if (rep.proxy_ops_stored || rep.proxy_steps_stored)
    std::printf("proxy_trace: %lu ops, %lu steps stored\n", rep.proxy_ops_stored,
                rep.proxy_steps_stored);
  if (rep.records_without_timing_source)
    std::printf("%lu records had no coll_timing_source (stored as NULL: unknown)\n",
                rep.records_without_timing_source);
  if (kin.files_seen)
    std::printf("kineto: %lu traces (%lu read): %lu steps, %lu kernels (%lu NCCL)\n",
                kin.files_seen, kin.files_read, kin.steps, kin.kernels, kin.nccl_kernels);
  if (steps.files_seen)
    std::printf("step series (step/phase files, framework iteration logs): %lu files (%lu read): %lu steps, %lu phase rows, %lu lines rejected%s\n",
                steps.files_seen, steps.files_read, steps.steps, steps.phases, steps.lines_rejected,
                steps.dropped_events ? (", " + std::to_string(steps.dropped_events) +
                                        " annotation events dropped by the writer").c_str() : "");
  if (hang.dumps_seen || hang.states_seen)
    std::printf("hang evidence: %lu Flight Recorder dumps (%lu read), %lu in-flight state files (%lu read)\n",
                hang.dumps_seen, hang.dumps_read, hang.states_seen, hang.states_read);
  if (hang.ras_seen)
    std::printf("NCCL RAS status reports: %lu (%lu read), %lu lines or values not understood\n", hang.ras_seen,
                hang.ras_read, hang.ras_lines_unused);
  if (kern.files_seen)
    std::printf("kernel summaries (CUPTI): %lu files (%lu read): %lu summary rows, %lu lines rejected%s\n",
                kern.files_seen, kern.files_read, kern.summaries, kern.lines_rejected,
                kern.lines_unknown ? (", " + std::to_string(kern.lines_unknown) +
                                      " lines of unknown types skipped").c_str() : "");
  if (stk.files_seen) {
    std::string more;
    if (stk.lines_unknown) more += ", " + std::to_string(stk.lines_unknown) + " lines of unknown types skipped";
    if (stk.files_incomplete)
      more += ", " + std::to_string(stk.files_incomplete) + " without an end line (still being written, or cut)";
    std::printf("stack files (collscope stacks): %lu files (%lu read): %lu stack rows, %lu lines rejected%s\n",
                stk.files_seen, stk.files_read, stk.stacks, stk.lines_rejected, more.c_str());
  }
  if (prom.files_seen)
    std::printf(
        "NCCL Inspector metric files (Prometheus, OTLP): %lu (%lu samples), %lu lines or points "
        "not understood%s\n",
        prom.files_seen, prom.samples, prom.lines_unused,
        prom.incomplete_tails ? (", " + std::to_string(prom.incomplete_tails) +
                                 " unfinished last lines (caught mid-write; read when whole)")
                                    .c_str()
                              : "");
  if (sums.files_seen)
    std::printf(
        "record summaries (host agents'): %lu files (%lu read, %lu unchanged, %zu not stored) "
        "in %lu batches: %lu records, %lu dump_stats stored\n",
        sums.files_seen, sums.files_read, sums.files_unchanged, sums.failed.size(), sums.batches,
        sums.records_stored, sums.dump_stats_stored);
  for (const std::string& s : steps.first_rejections) std::printf("  rejected %s\n", s.c_str());
  for (const std::string& s : kern.first_rejections) std::printf("  rejected %s\n", s.c_str());
  for (const std::string& s : stk.first_rejections) std::printf("  rejected %s\n", s.c_str());
  for (const std::string& s : rep.first_rejections) std::printf("  rejected %s\n", s.c_str());
  if (rep.lines_rejected > rep.first_rejections.size() || kern.lines_rejected > kern.first_rejections.size() ||
      stk.lines_rejected > stk.first_rejections.size())
    std::printf("  ... see: collscope sql --db %s \"SELECT * FROM ingest_log\"\n", db.c_str());
}

int Run(const Options& o) {
  auto store = Store::Open(o.db);
  if (!store.ok()) return Fail("ingest", store.status());
  IngestOptions opts;
  opts.run = o.run.empty() ? DefaultRunName(o.paths) : o.run;
  opts.threads = o.threads;
  // Closing the store checkpoints it, after the aggregates below: one checkpoint, not two.
  opts.checkpoint = false;
  bool tty = isatty(STDOUT_FILENO) && !o.quiet && !o.json;
  auto last = std::chrono::steady_clock::now();
  auto started = last;
  if (tty) {
    opts.progress = [&](uint64_t done, uint64_t total) {
      auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::milliseconds(100) && done < total) return;
      last = now;
      double frac = total ? std::min(1.0, double(done) / double(total)) : 1.0;
      double secs = std::chrono::duration<double>(now - started).count();
      int filled = static_cast<int>(frac * 30);
      std::printf("\r[%-30s] %3.0f%%  %.1f / %.1f MB  %.0f MB/s ", std::string(filled, '#').c_str(),
                  frac * 100, done / 1e6, total / 1e6, secs > 0 ? done / 1e6 / secs : 0.0);
      std::fflush(stdout);
    };
  }
  Result<readers::InputsReport> r = readers::IngestInputs(**store, o.paths, opts);
  if (tty) std::printf("\r%70s\r", "");
  if (!r.ok()) return Fail("ingest", r.status());
  const readers::InputsReport& in = *r;
  // Persist the analysis views, so stock DuckDB clients see them too, and pre-aggregate the
  // runs whose records changed (docs/analysis.md, "Aggregates"): RefreshAggregates does both.
  Result<AggregateReport> agg = RefreshAggregates(**store);
  const bool failed = !agg.ok();
  if (failed) std::fprintf(stderr, "collscope ingest: %s\n", agg.status().message().c_str());
  // What could not be read is said whatever the output mode.
  for (const std::string& s : in.NotStored()) std::fprintf(stderr, "collscope ingest: %s\n", s.c_str());
  const Reports all{in.records, in.kineto, in.steps, in.hang,
                    in.kernels, in.stacks, in.prom,  in.summaries};
  if (o.json) PrintJson(opts.run, all);
  else if (!o.quiet) PrintText(o.db, opts.run, all);
  if (in.NoInputs()) {
    std::fprintf(stderr, "collscope ingest: no input files (*.log, *.jsonl, their .gz, "
                         "Kineto *.pt.trace.json[.gz], step/phase series, Megatron/NeMo iteration logs, Flight "
                         "Recorder dumps, *.inflight.json state files, NCCL RAS status reports, CUPTI kernel summaries, "
                         "collscope stack files or NCCL Inspector Prometheus *.prom files) found\n");
    return 2;
  }
  if (failed || in.NothingStored()) return 2;
  return in.AnythingLost() ? 1 : 0;
}

void Register(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "ingest", "Ingest NCCL Inspector / collscope logs, PyTorch-profiler (Kineto) traces, "
                "step/phase series, Megatron/NeMo iteration logs, PyTorch Flight Recorder dumps, "
                "collscope in-flight state files, NCCL RAS status reports, collscope CUPTI kernel summaries, "
                "collscope stack files (collscope stacks --out) and NCCL Inspector Prometheus textfiles (files or directories, "
                "recursively) into a store. Incremental: files that grew "
                "are read from where the last ingest stopped; unchanged ones are skipped. Exit "
                "status: 0 everything stored; 1 stored, but some lines were rejected or inputs "
                "skipped (each is named); 2 failed: nothing stored, or an error.");
  cmd->add_option("paths", o->paths, "Log files or directories")->required();
  cmd->add_option("--db", o->db, "Store file (created if missing)")->capture_default_str();
  cmd->add_option("--run", o->run, "Run name (default: the first path's base name)");
  cmd->add_option("--threads", o->threads, "Parser threads (default: all cores)");
  cmd->add_flag("--json", o->json, "Print the ingest report as JSON");
  cmd->add_flag("-q,--quiet", o->quiet, "Print nothing on success");
  cmd->callback([o] { SetExitCode(Run(*o)); });
}

RegisterCommand reg(&Register);

}  // namespace ingest_cmd
}  // namespace collscope::cli
