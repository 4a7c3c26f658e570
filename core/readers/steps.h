// Step (iteration) time series, the input of the step-level detectors: from step/phase series
// files and frameworks' iteration logs (core/readers/step_file.h and iteration_log.h, through the
// store), and Kineto ProfilerStep ranges.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace collscope::readers {

// The annotation API's phases that are communication (capture/annotate): waiting on others, never
// a rank's own work. The step detectors and the report's step views (SQL) read this one list.
inline constexpr std::string_view kCommunicationPhases[] = {"tp_comm", "cp_comm", "ep_comm",
                                                            "pp_p2p",  "dp_comm", "world_comm"};

struct StepRow {
  int rank = -1;       // -1: job-level (e.g. a Megatron log line)
  int64_t step = 0;
  int64_t start_us = 0;  // 0 when unknown
  double dur_us = 0;
  std::map<std::string, double> phases;  // phase -> microseconds (host wall time)
  std::map<std::string, double> gpu_phases;  // phase -> GPU microseconds, where measured
};

struct StepSeries {
  std::string source;  // "annotation" (the store's step series, whatever wrote them), "kineto"
  std::vector<StepRow> rows;  // sorted by (rank, step)
  // rank -> the pipeline stage its process declared (parallel.pp), where the pipeline has 2+.
  std::map<int, int> declared_stage;
};

}  // namespace collscope::readers
