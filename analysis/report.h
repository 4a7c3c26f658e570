// The HTML report (docs/report.md): one self-contained file, no network fetch. Findings first: the
// report runs the diagnosis on the store itself (diagnose::DiagnoseStore) unless it is given a
// findings document (`collscope diagnose --json`, schema collscope.findings.v1), says at its top
// which run it read, which evidence tier was available and where the findings came from, and
// shows one card per finding in plain words (culprit, since when, victims, communicators, the
// evidence as a table with units) with the suppressed candidates behind a toggle. The host table
// puts the culprits first and the time charts shade the findings' windows. Then the job overview,
// hot kernels, busbw ECDFs, temporal plots, rank x communicator and host heatmaps, range bars and
// a baseline comparison when the store holds a baseline run.
// Every plot is fed by an analysis primitive (analysis/primitives.h): data are aggregated in SQL,
// so the file stays small and the page responsive at thousands of ranks. The charting library
// (Apache ECharts, pinned, fetched at build time) is inlined.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/store.h"

namespace collscope {

struct ReportOptions {
  std::string output;          // file to write
  std::string run;             // run to report; empty: the run with the most records
  std::string baseline;        // baseline run; empty: the first run holding nccl-tests results
  std::string findings_path;   // JSON findings document; empty: diagnose the store (DiagnoseStore)
  int top_kernels = 6;         // kernels plotted (ECDF, temporal)
  double bin_s = 5;            // temporal bin width (widened to keep <= max_bins bins)
  int max_bins = 240;
  uint64_t min_bytes = 1 << 20;
};

// True when the build embedded the charting library (false only when it could not be fetched).
bool ReportHasCharts();

// Builds the HTML text (InstallAnalysisViews must have run on the store).
Result<std::string> RenderReport(Store& store, const ReportOptions& options);
// RenderReport, then writes options.output.
Status WriteReport(Store& store, const ReportOptions& options);

}  // namespace collscope
