#include "core/statistics.h"

#include <algorithm>
#include <cstddef>

namespace collscope {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  const double upper = v[m];
  if (v.size() % 2) return upper;
  // The lower middle value is the largest of the half that nth_element put before it.
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
  return (lower + upper) / 2;
}

double SortedQuantile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double pos = std::clamp(p, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  if (i + 1 >= sorted.size()) return sorted.back();
  const double f = pos - static_cast<double>(i);
  return sorted[i] * (1 - f) + sorted[i + 1] * f;
}

double Quantile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return SortedQuantile(v, p);
}

}  // namespace collscope
