// L3 from the CUPTI library's kernel summaries (core/readers/kernel_summary.h, the
// kernel_summaries table): the same KernelData the Kineto loader builds (kernel_detect.h), so
// that the kernel-mode detector compares ranks the same way whichever source timed their kernels.
//
// A summary row holds a window's exact count, total, min and max, and its durations' log-normal
// modes. Its duration samples are rebuilt deterministically: min(count, kSamplesPerSummary) of
// them, shared among the modes in proportion to their counts (largest remainders), each mode's
// the evenly spaced quantiles (i + 0.5) / n of its log-normal (so their geometric mean is the
// mode's centre), clamped to the row's exact [min, max]. The samples are spread evenly over the
// window in time and carry its step. Each series also carries its exact total time, which the
// detector's time shares use: the capped samples would weigh a kernel launched 800 times a step
// like one launched 64 times.
//
// A kernel is its name and launch configuration, as the library keys its summaries: series are
// per (rank, "name<<<grid, block>>>"), so that only like compares with like. Only compute kernels
// form series. NCCL kernels give the synchronisation-trap evidence (their
// mean duration per step window); memcpy and memset are left out. The per-(rank, step) compute
// time is the summed exact totals of the step windows. Hosts come from the files; process groups
// are unknown (every rank running a kernel is compared with every other by the W1 matrix), so a
// finding's victims are all other ranks. A file that names no rank is not compared, and said.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "analysis/diagnose/kernel_detect.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::diagnose {

inline constexpr int kSamplesPerSummary = 64;

struct LogNormalMode {
  int64_t count = 0;
  double centre_us = 0, spread = 0;
};

// The rebuilt duration samples of one summary row (microseconds), mode by mode.
std::vector<double> SummarySamples(int64_t count, double min_us, double max_us, const std::vector<LogNormalMode>& modes,
                                   int cap = kSamplesPerSummary);

// What a diagnosis read of a run's kernel summaries.
struct SummarySource {
  int files = 0, ranks = 0;            // kernel-summary files stored for the run, ranks they name
  std::vector<std::string> unusable;   // "path: why" for files whose kernels are not compared
};

// The run's kernel summaries as detector input. Empty data when the store has no such tables (a
// read-only store made before them) or the run none.
Result<KernelData> LoadKernelSummaryData(Store& store, const std::string& run, SummarySource* source = nullptr);

// DetectKernelAnomalies over summary data: its findings come from detector `kernel.summaries`.
std::vector<Finding> DetectSummaryAnomalies(const KernelData& d, const KernelOptions& o = {});

}  // namespace collscope::diagnose
