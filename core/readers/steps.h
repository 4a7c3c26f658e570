// Step (iteration) time series from step markers: collscope-sim's step_summary.csv (rank, step,
// phase, start_us, dur_us) and Megatron-style iteration logs ("iteration N/ M | ... | elapsed time
// per iteration (ms): X |").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace collscope::readers {

struct StepRow {
  int rank = -1;       // -1: job-level (e.g. a Megatron log line)
  int64_t step = 0;
  int64_t start_us = 0;  // 0 when unknown
  double dur_us = 0;
  std::map<std::string, double> phases;  // phase -> microseconds
};

struct StepSeries {
  std::string source;  // "step_summary", "megatron"
  std::vector<StepRow> rows;  // sorted by (rank, step)
  std::string host;    // megatron: host prefix of the iteration lines
};

Result<StepSeries> ReadStepSummary(const std::string& path);
Result<StepSeries> ReadMegatronLog(const std::string& path);

}  // namespace collscope::readers
