// Step (iteration) time series, the input of the step-level detectors: from step/phase series
// files (core/readers/step_file.h, through the store), Kineto ProfilerStep ranges, and
// Megatron-style iteration logs ("iteration N/ M | ... | elapsed time
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
  std::map<std::string, double> phases;  // phase -> microseconds (host wall time)
  std::map<std::string, double> gpu_phases;  // phase -> GPU microseconds, where measured
};

struct StepSeries {
  std::string source;  // "annotation", "megatron", "kineto"
  std::vector<StepRow> rows;  // sorted by (rank, step)
  std::string host;    // megatron: host prefix of the iteration lines
};

Result<StepSeries> ReadMegatronLog(const std::string& path);

}  // namespace collscope::readers
