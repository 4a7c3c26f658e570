// L3 (kernel level) statistics: duration modes by kernel density estimation (no preset cluster
// count), Wasserstein-1 distances between duration distributions, compressed per-(rank, kernel)
// profiles, and per-(DP, TP/PP) max-duration grids with hot-cell search.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace collscope::diagnose {

// One mode (cluster) of a duration distribution.
struct Mode {
  double center = 0;   // where the density peaks (original units)
  double lo = 0, hi = 0;  // the cluster's range of samples
  double median = 0;   // median of its samples
  double weight = 0;   // share of the samples
  size_t count = 0;
};

struct KdeOptions {
  int grid = 512;              // density evaluation points
  double bandwidth_scale = 1;  // times Silverman's robust rule (0.9 min(sd, IQR/1.34) n^-1/5)
  double min_rel_bandwidth = 0.004;  // floor of the bandwidth, relative (in log space: 0.4%)
  double min_weight = 0.03;    // a cluster holding fewer samples merges into its neighbour
  double min_count = 2;        // ... and so does one of fewer samples than this
  double max_valley = 0.75;    // a dip above this share of the smaller peak is not a boundary
  bool log_space = true;       // estimate on log(duration): slowdowns are multiplicative
};

// The modes of `x`, sorted by center. Gaussian KDE on a grid (linear binning, truncated kernel);
// local maxima are modes, the density minima between them the cluster boundaries; clusters that
// are too small or separated by too shallow a dip merge into a neighbour. Empty for empty input.
std::vector<Mode> KdeModes(std::vector<double> x, const KdeOptions& o = {});

// Exact Wasserstein-1 (earth mover's) distance between two empirical distributions:
// the integral of |F_a - F_b|. 0 when either is empty.
double Wasserstein1(std::vector<double> a, std::vector<double> b);

// `q` evenly spaced quantiles at (i + 0.5) / q of a sorted sample (a compressed distribution).
std::vector<double> QuantileSketch(const std::vector<double>& sorted, int q);
// W1 between two distributions given by sketches of equal length: mean |qa_i - qb_i|.
double Wasserstein1Sketch(const std::vector<double>& qa, const std::vector<double>& qb);

// A compressed per-(rank, kernel name) duration distribution.
struct KernelProfile {
  int rank = -1;
  int name = -1;         // kernel name index of the caller's table
  size_t n = 0;
  double total_us = 0, median_us = 0;
  std::vector<Mode> modes;
  std::vector<double> sketch;  // QuantileSketch(durations, kSketch)
};
inline constexpr int kSketch = 64;
KernelProfile MakeProfile(int rank, int name, std::vector<double> durations, const KdeOptions& o = {});

// Symmetric matrix of relative W1 distances between profiles (each W1 divided by the median of
// the profiles' medians, so 0.1 = a 10% shift).
std::vector<std::vector<double>> DistanceMatrix(const std::vector<const KernelProfile*>& p);

// A grid of values per (DP index, model-parallel index): cell (d, m) is the rank at position d
// of the m-th data-parallel group. Ranks of one column do identical work (DP replicas).
struct Grid {
  int rows = 0, cols = 0;             // rows: DP index; cols: TP/PP (model-parallel) index
  std::vector<double> value;          // rows * cols, NaN where no rank
  std::vector<int> rank;              // rows * cols, -1 where no rank
  double at(int r, int c) const { return value[static_cast<size_t>(r) * cols + c]; }
};

// Builds a grid from per-rank values and the data-parallel groups (each a list of global ranks,
// in DP order). Ranks in no group get a column of their own. Cell = max over the rank's values.
Grid MaxGrid(const std::vector<std::vector<int>>& dp_groups,
             const std::vector<std::pair<int, double>>& rank_values);

struct HotCell {
  int row = 0, col = 0, rank = -1;
  double value = 0, peer = 0;  // the cell and the median of its peers
  double ratio = 0;            // value / peer
};
// Cells above `ratio` x the median of their peers: the other cells of the column (DP replicas),
// or, for a column of one cell, the other columns' cells in the same row.
std::vector<HotCell> HotCells(const Grid& g, double ratio);

}  // namespace collscope::diagnose
