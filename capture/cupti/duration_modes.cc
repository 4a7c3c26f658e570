#include "capture/cupti/duration_modes.h"

#include <algorithm>
#include <cmath>

namespace collscope::capture {
namespace {

constexpr double kMinWeight = 0.03;  // a smaller mode merges into its neighbour
constexpr double kMaxValley = 0.75;  // a dip above this share of the smaller peak is no boundary
constexpr double kFlankShare = 0.5;  // a small hill whose dip is above this share of its peak is a bump
constexpr size_t kMaxModes = 8;      // beyond this, the smallest modes merge (bounds a summary's size)

// Weighted quantile of bins (index, count) over bin indices.
double BinQuantile(const std::vector<uint32_t>& counts, uint64_t total, double q) {
  const double target = q * static_cast<double>(total);
  double seen = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    seen += counts[i];
    if (seen >= target) return static_cast<double>(i);
  }
  return static_cast<double>(counts.size() - 1);
}

}  // namespace

int LogHistogram::BinOf(uint64_t ns) {
  if (ns < 1) ns = 1;
  return static_cast<int>(std::floor(std::log2(static_cast<double>(ns)) * kBinsPerOctave));
}

double LogHistogram::LogCentreOf(int bin) {
  return (static_cast<double>(bin) + 0.5) / kBinsPerOctave * std::log(2.0);
}

void LogHistogram::Grow(int bin) {
  if (counts_.empty()) {
    first_bin_ = bin;
    counts_.assign(1, 0);
    return;
  }
  if (bin < first_bin_) {
    counts_.insert(counts_.begin(), static_cast<size_t>(first_bin_ - bin), 0);
    first_bin_ = bin;
  } else if (bin >= first_bin_ + static_cast<int>(counts_.size())) {
    counts_.resize(static_cast<size_t>(bin - first_bin_ + 1), 0);
  }
}

void LogHistogram::Add(uint64_t ns) {
  const int bin = BinOf(ns);
  if (counts_.empty() || bin < first_bin_ || bin >= first_bin_ + static_cast<int>(counts_.size()))
    Grow(bin);
  ++counts_[static_cast<size_t>(bin - first_bin_)];
  ++count_;
}

void LogHistogram::Merge(const LogHistogram& other) {
  if (other.counts_.empty()) return;
  Grow(other.first_bin_);
  Grow(other.first_bin_ + static_cast<int>(other.counts_.size()) - 1);
  for (size_t i = 0; i < other.counts_.size(); ++i)
    counts_[static_cast<size_t>(other.first_bin_ - first_bin_) + i] += other.counts_[i];
  count_ += other.count_;
}

std::vector<DurationMode> LogHistogram::Modes() const {
  std::vector<DurationMode> out;
  if (count_ == 0) return out;
  const int n = static_cast<int>(counts_.size());
  // Silverman's robust bandwidth on the log durations, in bins (at least one bin).
  double mean = 0, var = 0;
  for (int i = 0; i < n; ++i) mean += counts_[i] * static_cast<double>(i);
  mean /= static_cast<double>(count_);
  for (int i = 0; i < n; ++i) var += counts_[i] * (i - mean) * (i - mean);
  const double sd = std::sqrt(var / static_cast<double>(count_));
  const double iqr = BinQuantile(counts_, count_, 0.75) - BinQuantile(counts_, count_, 0.25);
  double scale = std::min(sd, iqr / 1.34);
  if (scale <= 0) scale = std::max(sd, 1.0);
  const double h = std::max(1.0, 0.9 * scale * std::pow(static_cast<double>(count_), -0.2));
  // The smoothed density over the bins, with a margin of 3 bandwidths on each side.
  const int margin = static_cast<int>(std::ceil(3 * h));
  const int m = n + 2 * margin;
  std::vector<double> density(static_cast<size_t>(m), 0.0);
  for (int i = 0; i < n; ++i) {
    if (counts_[i] == 0) continue;
    for (int d = -margin; d <= margin; ++d)
      density[static_cast<size_t>(i + margin + d)] += counts_[i] * std::exp(-0.5 * (d / h) * (d / h));
  }
  // Hills: a maximum, and the span of bins that climb to it.
  struct Hill {
    int lo, hi, peak;
  };
  std::vector<Hill> hills;
  int start = 0;
  for (int j = 1; j < m; ++j) {
    // A boundary where the density stops falling and starts rising again.
    if (density[j] > density[j - 1] && j >= 2 && density[j - 1] <= density[j - 2]) {
      hills.push_back({start, j - 2, 0});
      start = j - 1;
    }
  }
  hills.push_back({start, m - 1, 0});
  for (Hill& hl : hills)
    hl.peak = static_cast<int>(std::max_element(density.begin() + hl.lo, density.begin() + hl.hi + 1) -
                               density.begin());
  auto weight = [&](const Hill& hl) {
    uint64_t c = 0;
    for (int j = std::max(hl.lo, margin); j <= std::min(hl.hi, margin + n - 1); ++j) c += counts_[j - margin];
    return static_cast<double>(c) / static_cast<double>(count_);
  };
  // Merge until no hill is too small and no dip too shallow: a small hill joins the neighbour it
  // shares the higher boundary with (the one it is a bump on the flank of), then the shallowest
  // dip goes first.
  auto join = [&](size_t k) {  // hills k and k + 1 become one
    Hill& a = hills[k];
    const Hill& b = hills[k + 1];
    a.hi = b.hi;
    a.peak = density[a.peak] >= density[b.peak] ? a.peak : b.peak;
    hills.erase(hills.begin() + static_cast<long>(k) + 1);
  };
  // The boundary of a hill with a neighbour it is a bump on the flank of (the higher one), and
  // whether it is that: a small hill standing apart (outliers: a deep dip on both sides) stays a
  // mode of its own, since folding it into a neighbour would move its mass far.
  auto flank = [&](size_t k) {
    const bool has_left = k > 0, has_right = k + 1 < hills.size();
    const double left = has_left ? density[hills[k].lo] : -1, right = has_right ? density[hills[k + 1].lo] : -1;
    return std::make_pair(left >= right ? k - 1 : k, std::max(left, right));
  };
  while (hills.size() > 1) {
    size_t smallest = hills.size();
    for (size_t k = 0; k < hills.size(); ++k) {
      if (weight(hills[k]) >= kMinWeight && hills.size() <= kMaxModes) continue;
      const bool on_flank = flank(k).second >= kFlankShare * density[hills[k].peak];
      if ((on_flank || hills.size() > kMaxModes) && (smallest == hills.size() || weight(hills[k]) < weight(hills[smallest])))
        smallest = k;
    }
    if (smallest < hills.size()) {
      join(flank(smallest).first);
      continue;
    }
    size_t shallowest = 0;
    double worst = 0;
    for (size_t k = 0; k + 1 < hills.size(); ++k) {
      const double ratio = density[hills[k + 1].lo] /
                           std::min(density[hills[k].peak], density[hills[k + 1].peak]);
      if (ratio > worst) worst = ratio, shallowest = k;
    }
    if (worst <= kMaxValley) break;
    join(shallowest);
  }
  for (const Hill& hl : hills) {
    DurationMode mode;
    double sum = 0, sum2 = 0;
    for (int j = std::max(hl.lo, margin); j <= std::min(hl.hi, margin + n - 1); ++j) {
      const uint32_t c = counts_[j - margin];
      if (c == 0) continue;
      const double x = LogCentreOf(first_bin_ + j - margin);
      mode.count += c;
      sum += c * x;
      sum2 += c * x * x;
    }
    if (mode.count == 0) continue;
    const double mu = sum / static_cast<double>(mode.count);
    // Within-bin spread: a bin's samples are spread over its width (variance w^2/12).
    const double w = std::log(2.0) / kBinsPerOctave;
    const double v = std::max(0.0, sum2 / static_cast<double>(mode.count) - mu * mu) + w * w / 12;
    mode.centre_ns = std::exp(mu);
    mode.spread = std::sqrt(v);
    out.push_back(mode);
  }
  return out;
}

}  // namespace collscope::capture
