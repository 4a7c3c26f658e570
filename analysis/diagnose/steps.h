// L1 (iteration level) and L2 (phase attribution) detectors over step time series.
#pragma once

#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/readers/steps.h"

namespace collscope::diagnose {

using readers::StepSeries;

struct StepOptions {
  int window = 8;              // sliding-window length (steps) for the jitter baseline
  double jitter_ratio = 1.5;   // a step this much above the window median is a spike
  double regression_ratio = 1.15;  // a lasting level shift of at least this much
  int min_segment = 5;         // steps on each side of a change point
};

// PELT (Killick et al. 2012) for changes in mean with a Gaussian cost; returns change indexes
// (the first index of each new segment). penalty <= 0: 2 * log(n) * robust variance.
std::vector<size_t> Pelt(const std::vector<double>& x, double penalty, size_t min_seg);

// Sliding-window, ratio-gated spikes: indexes i with x[i] > ratio * median(previous window).
std::vector<size_t> Spikes(const std::vector<double>& x, int window, double ratio);

// Job step time = slowest rank per step. step_regression and step_jitter findings, each with
// the phase that grew most (L2) in its evidence.
std::vector<Finding> DetectStepAnomalies(const StepSeries& s, const StepOptions& o);

}  // namespace collscope::diagnose
