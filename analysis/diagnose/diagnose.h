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
  int threads = 0;      // ingest threads for PATHS input; 0 = hardware concurrency
};

struct DiagnoseTiming {
  double load_s = 0, detect_s = 0, ingest_s = 0;
};

// Every detector over a store's communication records.
Result<std::vector<Finding>> DiagnoseStore(Store& store, const DiagnoseOptions& o,
                                           DiagnoseTiming* timing = nullptr);

// Inputs given as paths: NCCL Inspector / collscope logs (ingested into a temporary store),
// Flight Recorder dumps, collscope in-flight state files, step summaries (step_summary.csv),
// PyTorch profiler (Kineto) traces.
// `records`: a store whose run `o.run` holds the records instead (`--db`); the step series are
// then checked against its findings and mapped to its hosts. Logs among the paths with a store
// are an error (ingest them into it first).
Result<std::vector<Finding>> DiagnosePaths(const std::vector<std::string>& paths,
                                           const DiagnoseOptions& o,
                                           DiagnoseTiming* timing = nullptr,
                                           Store* records = nullptr);

// Orders findings (hangs first, then by confidence) and merges duplicates of one kind that
// overlap in location and time.
void Consolidate(std::vector<Finding>* findings);

}  // namespace collscope::diagnose
