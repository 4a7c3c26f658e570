// L1 (iteration level) and L2 (phase attribution) detectors over step time series.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/readers/steps.h"

namespace collscope::diagnose {

using readers::StepSeries;

struct StepOptions {
  int window = 8;                  // sliding-window length (steps) for the jitter baseline
  double jitter_ratio = 1.5;       // a step this much above the window median is a spike
  double regression_ratio = 1.15;  // a lasting level shift of at least this much
  int min_segment = 5;             // steps on each side of a change point
};

// PELT (Killick et al. 2012) for changes in mean with a Gaussian cost; returns change indexes
// (the first index of each new segment). penalty <= 0: 6 * log(n) * the noise variance, estimated
// from the median absolute difference of successive values (which the shifts themselves barely
// move): three times the BIC penalty, so that noise bursts are no change points.
std::vector<size_t> Pelt(const std::vector<double>& x, double penalty, size_t min_seg);

// Sliding-window, ratio-gated spikes: indexes i with x[i] > ratio * median(previous window), or
// of the next window for the first `window` steps. None when x has no full window besides i.
std::vector<size_t> Spikes(const std::vector<double>& x, int window, double ratio);

// Job step time = the longest rank's step. step_regression and step_jitter findings, each with
// the phase that grew most (L2) in its evidence. A spike in which a minority of ranks' own time
// (the step less its communication phases) grew by at least half of it is their stall: a
// host_stall finding (detector steps.stall) naming them, one per host (`host_of`: global rank ->
// host; empty: per rank set), the other ranks of those steps its victims; the remaining spikes
// are one step_jitter finding naming no rank.
std::vector<Finding> DetectStepAnomalies(const StepSeries& s, const StepOptions& o,
                                         const std::map<int, std::string>& host_of = {});

}  // namespace collscope::diagnose
