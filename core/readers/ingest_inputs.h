// Every input format `collscope ingest` takes, in one call: NCCL Inspector / collscope logs,
// PyTorch-profiler (Kineto) traces, step/phase series and iteration logs, hang evidence (Flight
// Recorder dumps, in-flight state files, NCCL RAS status reports), CUPTI kernel summaries, stack
// files of `collscope stacks` (stacks.h), NCCL Inspector Prometheus textfiles (prom_textfile.h)
// and the record summaries of
// per-host agents (core/readers/record_summary.h), each through its own importer into the same
// run. A path that is a summary root (only host=... folders) goes to the record-summary importer
// alone: the other importers would only sniff its Parquet files and pass them by, every tick. `collscope ingest` and the live agent both call it, so they store the same
// rows the same way.
//
// Contract: the importers run in a fixed order and stop at the first error (a store failure);
// files an importer could not read are not errors, they are named in the report. Aggregates are
// not refreshed here (analysis/views.h RefreshAggregates): that is the caller's choice.
#pragma once

#include <string>
#include <vector>

#include "core/ingest.h"
#include "core/readers/hang_evidence.h"
#include "core/readers/kernel_summary.h"
#include "core/readers/kineto.h"
#include "core/readers/prom_textfile.h"
#include "core/readers/record_summary.h"
#include "core/readers/stacks.h"
#include "core/readers/step_file.h"

namespace collscope::readers {

struct InputsReport {
  IngestReport records;
  KinetoIngestReport kineto;
  StepIngestReport steps;
  HangIngestReport hang;
  KernelSummaryIngestReport kernels;
  StackIngestReport stacks;  // stack files of `collscope stacks --out` (stacks.h)
  RecordSummaryIngestReport summaries;
  PromIngestReport prom;  // NCCL Inspector Prometheus textfiles (prom_textfile.h)

  // No input file of any format was found.
  bool NoInputs() const;
  // Inputs were found but nothing was stored or already stored.
  bool NothingStored() const;
  // Some line was rejected or some input skipped or not stored (each is named below).
  bool AnythingLost() const;
  // "path: why" for every input that was skipped or not stored, in importer order.
  std::vector<std::string> NotStored() const;
};

Result<InputsReport> IngestInputs(Store& store, const std::vector<std::string>& paths,
                                  const IngestOptions& options);

}  // namespace collscope::readers
