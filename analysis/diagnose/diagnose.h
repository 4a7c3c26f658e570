// `collscope diagnose`: runs every detector that has input and returns the findings.
#pragma once

#include <string>
#include <vector>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/finding.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::diagnose {

struct DiagnoseOptions {
  std::string run;      // store run; empty = the first
  CommOptions comm;
  TimeWindow window;    // the records' span to diagnose (a live agent's sliding window)
  int threads = 0;      // ingest threads for PATHS input; 0 = hardware concurrency
  // Where candidates dropped by cross-checks and findings folded by merges go, with why; null:
  // not kept.
  std::vector<Suppressed>* suppressed = nullptr;
};

struct DiagnoseTiming {
  double load_s = 0, detect_s = 0, ingest_s = 0;
};

// What a diagnosis read and what it could not use: every run says so, since silence is never
// reassurance. The evidence tier follows from what was read (docs/diagnosis.md): A Inspector
// records, B plus collscope in-flight state files, C plus per-rank step series, D plus kernels
// (Kineto traces or CUPTI kernel summaries).
struct InputSummary {
  std::string run;              // the store run diagnosed ("" when no records)
  int64_t records = 0;          // collective and point-to-point records
  int ranks = 0, hosts = 0;
  int64_t t0 = 0, t1 = 0;       // time span of the records, wall-clock us
  std::string rank_source;      // how global ranks were known (comm_data.h)
  int tp = 0, pp = 0;           // the parallel layout inferred from the communicators (0: unknown)
  int64_t proxy_sends = 0;      // network sends with proxy wire times (Inspector v4.4 proxy_trace)
  int state_files = 0, flight_recorder_dumps = 0, kineto_traces = 0;
  int ras_reports = 0;     // saved NCCL RAS status reports (ncclras) and MONITOR logs
  int ras_monitor_logs = 0;  // of which MONITOR event logs (ncclras -m)
  // Records Inspector counted as dropped from its rings (dump_stats, v4.1+: the newest running
  // total of each process, communicator and rank), collective and point-to-point.
  uint64_t records_dropped = 0;
  int step_series = 0;     // per-rank step/phase series files (the annotation API's format)
  int iteration_logs = 0;  // frameworks' job-level iteration logs (Megatron, NeMo)
  bool stored_kernels = false;  // the store holds Kineto kernels (collscope ingest)
  int kernel_summaries = 0;     // kernel-summary files of the CUPTI library (core/readers/kernel_summary.h)
  int stack_processes = 0;      // processes with sampled call stacks (collscope stacks); no tier of their own
  int64_t stack_samples = 0;    // their thread samples
  uint64_t lines_rejected = 0;
  std::vector<std::string> unusable;  // "path: why", for inputs that were not used
  std::string Tier() const;     // "A".."D", or "" when nothing usable was read
  bool usable() const {
    return records > 0 || state_files > 0 || flight_recorder_dumps > 0 || ras_reports > 0 || step_series > 0 || iteration_logs > 0 ||
           kineto_traces > 0 || stored_kernels || kernel_summaries > 0;
  }
  std::string ToText() const;   // "read: ..." and "could not use: ..." lines
};

// Every detector over a store's communication records.
Result<std::vector<Finding>> DiagnoseStore(Store& store, const DiagnoseOptions& o,
                                           DiagnoseTiming* timing = nullptr, InputSummary* read = nullptr);

// Inputs given as paths: NCCL Inspector / collscope logs (ingested into a temporary store),
// Flight Recorder dumps, collscope in-flight state files, NCCL RAS status reports (found by
// content), step/phase series and CUPTI kernel
// summaries (both found by content), PyTorch profiler (Kineto) traces.
// `records`: a store whose run `o.run` holds the records instead (`--db`); the step series are
// then checked against its findings and mapped to its hosts. Logs among the paths with a store
// are an error (ingest them into it first).
Result<std::vector<Finding>> DiagnosePaths(const std::vector<std::string>& paths,
                                           const DiagnoseOptions& o,
                                           DiagnoseTiming* timing = nullptr,
                                           Store* records = nullptr, InputSummary* read = nullptr);

// Orders findings (hangs first, step-level symptoms last, each by confidence) and merges duplicates of one kind that
// overlap in location and time; each folded finding goes to *suppressed (when given) with the
// rule that merged it.
void Consolidate(std::vector<Finding>* findings, std::vector<Suppressed>* suppressed = nullptr);

}  // namespace collscope::diagnose
