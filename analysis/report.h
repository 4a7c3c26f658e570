// The HTML report (docs/report.md): one self-contained file, no network fetch, with the job
// overview, hot kernels, busbw ECDFs, temporal plots, rank x communicator and host heatmaps, range
// bars, a baseline comparison when the store holds a baseline run, and the findings of
// `collscope diagnose --json` (schema collscope.findings.v1) or an explicit "no findings" state.
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
  std::string findings_path;   // JSON findings document; empty: none
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
