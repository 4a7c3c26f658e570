// Order statistics of samples: the one definition of the median and of quantiles that the
// detectors use, so that "the median" means the same everywhere a finding's evidence quotes one.
// Quantiles interpolate linearly between ranks, as DuckDB's quantile_cont does, so a figure
// computed here matches the same figure computed in SQL over the store.
#pragma once

#include <vector>

namespace collscope {

// The middle value of `v`, or the mean of the two middle values for an even count; 0 for none.
// Linear time: it partially orders its copy instead of sorting it.
double Median(std::vector<double> v);

// The p-quantile (0 <= p <= 1) of `sorted`, which must be in ascending order: linearly
// interpolated between the two nearest ranks; 0 for none.
double SortedQuantile(const std::vector<double>& sorted, double p);

// The same of values in any order.
double Quantile(std::vector<double> v, double p);

}  // namespace collscope
