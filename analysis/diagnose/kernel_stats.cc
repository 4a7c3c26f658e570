#include "analysis/diagnose/kernel_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "core/statistics.h"

namespace collscope::diagnose {
namespace {

struct Segment {
  size_t peak = 0;   // grid index of the density maximum
  size_t left = 0;   // grid index of the left boundary (inclusive)
  size_t right = 0;  // grid index of the right boundary (exclusive; last segment: grid size)
};

}  // namespace

std::vector<Mode> KdeModes(std::vector<double> x, const KdeOptions& o) {
  x.erase(std::remove_if(x.begin(), x.end(), [](double v) { return !std::isfinite(v); }), x.end());
  if (x.empty()) return {};
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  const bool logs = o.log_space && x.front() > 0;
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = logs ? std::log(x[i]) : x[i];

  auto single = [&]() {
    Mode m;
    m.center = SortedQuantile(x, 0.5);
    m.median = m.center;
    m.lo = x.front();
    m.hi = x.back();
    m.weight = 1;
    m.count = n;
    return std::vector<Mode>{m};
  };
  if (n < 3 || y.back() == y.front()) return single();

  // Bandwidth: Silverman's robust rule, floored so that sub-percent jitter stays one mode.
  const double mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double v : y) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / static_cast<double>(n - 1));
  const double iqr = SortedQuantile(y, 0.75) - SortedQuantile(y, 0.25);
  const double spread = iqr > 0 ? std::min(sd, iqr / 1.34) : sd;
  double h = 0.9 * spread * std::pow(static_cast<double>(n), -0.2) * o.bandwidth_scale;
  const double floor_h = logs ? o.min_rel_bandwidth
                              : o.min_rel_bandwidth * std::max(std::fabs(SortedQuantile(y, 0.5)),
                                                               (y.back() - y.front()) * 1e-3);
  h = std::max(h, floor_h);
  if (!(h > 0)) return single();

  // Density on a grid fine enough for the bandwidth: linear binning, then a truncated Gaussian.
  const double lo = y.front() - 3 * h, hi = y.back() + 3 * h;
  const size_t grid = std::clamp<size_t>(static_cast<size_t>(std::ceil((hi - lo) / (h / 4))) + 1,
                                         static_cast<size_t>(std::max(o.grid, 16)), 1u << 16);
  const double step = (hi - lo) / static_cast<double>(grid - 1);
  std::vector<double> counts(grid, 0.0), dens(grid, 0.0);
  for (double v : y) {
    const double pos = (v - lo) / step;
    const size_t i = std::min(static_cast<size_t>(pos), grid - 2);
    const double f = pos - static_cast<double>(i);
    counts[i] += 1 - f;
    counts[i + 1] += f;
  }
  const size_t J = static_cast<size_t>(std::ceil(4 * h / step));
  std::vector<double> w(J + 1);
  for (size_t j = 0; j <= J; ++j) {
    const double u = static_cast<double>(j) * step / h;
    w[j] = std::exp(-0.5 * u * u);
  }
  for (size_t i = 0; i < grid; ++i) {
    if (counts[i] == 0) continue;
    const size_t a = i >= J ? i - J : 0, b = std::min(grid - 1, i + J);
    for (size_t k = a; k <= b; ++k) dens[k] += counts[i] * w[k > i ? k - i : i - k];
  }

  // Peaks, and the density minimum between consecutive peaks as the boundary.
  std::vector<size_t> peaks;
  for (size_t i = 1; i + 1 < grid; ++i)
    if (dens[i] > dens[i - 1] && dens[i] >= dens[i + 1]) peaks.push_back(i);
  if (peaks.size() <= 1) return single();
  std::vector<Segment> seg;
  for (size_t k = 0; k < peaks.size(); ++k) {
    Segment s;
    s.peak = peaks[k];
    s.left = k == 0 ? 0 : seg.back().right;
    if (k + 1 < peaks.size()) {
      size_t m = peaks[k];
      for (size_t i = peaks[k]; i <= peaks[k + 1]; ++i)
        if (dens[i] < dens[m]) m = i;
      s.right = m;
    } else {
      s.right = grid;
    }
    seg.push_back(s);
  }
  auto boundary_y = [&](size_t gi) { return lo + static_cast<double>(gi) * step; };
  auto count_of = [&](const Segment& s) {
    const double a = s.left == 0 ? -std::numeric_limits<double>::infinity() : boundary_y(s.left);
    const double b = s.right >= grid ? std::numeric_limits<double>::infinity() : boundary_y(s.right);
    return static_cast<size_t>(std::lower_bound(y.begin(), y.end(), b) -
                               std::lower_bound(y.begin(), y.end(), a));
  };
  auto merge = [&](size_t k) {  // merges segment k + 1 into k
    Segment& a = seg[k];
    const Segment& b = seg[k + 1];
    if (dens[b.peak] > dens[a.peak]) a.peak = b.peak;
    a.right = b.right;
    seg.erase(seg.begin() + static_cast<std::ptrdiff_t>(k) + 1);
  };
  const double min_n = std::max(o.min_count, o.min_weight * static_cast<double>(n));
  for (bool changed = true; changed && seg.size() > 1;) {
    changed = false;
    // 1. The shallowest dip, when it is too shallow to separate two modes.
    double worst = 0;
    size_t wk = 0;
    for (size_t k = 0; k + 1 < seg.size(); ++k) {
      const double valley = dens[seg[k].right];
      const double r = valley / std::min(dens[seg[k].peak], dens[seg[k + 1].peak]);
      if (r > worst) { worst = r; wk = k; }
    }
    if (worst > o.max_valley) { merge(wk); changed = true; continue; }
    // 2. The smallest cluster, when too small: into the neighbour across the shallower dip.
    size_t sk = 0, sn = SIZE_MAX;
    for (size_t k = 0; k < seg.size(); ++k) {
      const size_t c = count_of(seg[k]);
      if (c < sn) { sn = c; sk = k; }
    }
    if (static_cast<double>(sn) < min_n) {
      if (sk == 0) merge(0);
      else if (sk + 1 == seg.size()) merge(sk - 1);
      else if (dens[seg[sk - 1].right] >= dens[seg[sk].right]) merge(sk - 1);
      else merge(sk);
      changed = true;
    }
  }
  if (seg.size() == 1) return single();

  std::vector<Mode> out;
  for (const Segment& s : seg) {
    const double a = s.left == 0 ? -std::numeric_limits<double>::infinity() : boundary_y(s.left);
    const double b = s.right >= grid ? std::numeric_limits<double>::infinity() : boundary_y(s.right);
    const size_t i0 = std::lower_bound(y.begin(), y.end(), a) - y.begin();
    const size_t i1 = std::lower_bound(y.begin(), y.end(), b) - y.begin();
    if (i1 <= i0) continue;
    Mode m;
    const double c = boundary_y(s.peak);
    m.center = logs ? std::exp(c) : c;
    m.lo = x[i0];
    m.hi = x[i1 - 1];
    const std::vector<double> part(x.begin() + static_cast<std::ptrdiff_t>(i0),
                                   x.begin() + static_cast<std::ptrdiff_t>(i1));
    m.median = SortedQuantile(part, 0.5);
    m.count = i1 - i0;
    m.weight = static_cast<double>(m.count) / static_cast<double>(n);
    out.push_back(m);
  }
  return out;
}

double Wasserstein1(std::vector<double> a, std::vector<double> b) {
  if (a.empty() || b.empty()) return 0;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  size_t i = 0, j = 0;
  double fa = 0, fb = 0, prev = std::min(a[0], b[0]), sum = 0;
  const double inf = std::numeric_limits<double>::infinity();
  while (i < a.size() || j < b.size()) {
    const double next = std::min(i < a.size() ? a[i] : inf, j < b.size() ? b[j] : inf);
    sum += std::fabs(fa - fb) * (next - prev);
    prev = next;
    while (i < a.size() && a[i] == next) fa = static_cast<double>(++i) / na;
    while (j < b.size() && b[j] == next) fb = static_cast<double>(++j) / nb;
  }
  return sum;
}

std::vector<double> QuantileSketch(const std::vector<double>& sorted, int q) {
  std::vector<double> out;
  if (sorted.empty() || q <= 0) return out;
  out.reserve(q);
  const double n = static_cast<double>(sorted.size());
  for (int k = 0; k < q; ++k) {
    const double u = (k + 0.5) / q;
    const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(u * n));
    out.push_back(sorted[i]);
  }
  return out;
}

double Wasserstein1Sketch(const std::vector<double>& qa, const std::vector<double>& qb) {
  if (qa.empty() || qa.size() != qb.size()) return 0;
  double s = 0;
  for (size_t i = 0; i < qa.size(); ++i) s += std::fabs(qa[i] - qb[i]);
  return s / static_cast<double>(qa.size());
}

KernelProfile MakeProfile(int rank, int name, std::vector<double> d, const KdeOptions& o) {
  KernelProfile p;
  p.rank = rank;
  p.name = name;
  std::sort(d.begin(), d.end());
  p.n = d.size();
  p.total_us = std::accumulate(d.begin(), d.end(), 0.0);
  p.median_us = SortedQuantile(d, 0.5);
  p.sketch = QuantileSketch(d, kSketch);
  p.modes = KdeModes(std::move(d), o);
  return p;
}

std::vector<std::vector<double>> DistanceMatrix(const std::vector<const KernelProfile*>& p) {
  std::vector<double> med;
  for (const KernelProfile* x : p) med.push_back(x->median_us);
  const double ref = Median(med);
  std::vector<std::vector<double>> d(p.size(), std::vector<double>(p.size(), 0.0));
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = i + 1; j < p.size(); ++j) {
      const double w = Wasserstein1Sketch(p[i]->sketch, p[j]->sketch);
      d[i][j] = d[j][i] = ref > 0 ? w / ref : 0;
    }
  return d;
}

Grid MaxGrid(const std::vector<std::vector<int>>& dp_groups,
             const std::vector<std::pair<int, double>>& rank_values) {
  std::map<int, double> best;
  for (const auto& [r, v] : rank_values) {
    if (!std::isfinite(v)) continue;
    auto it = best.find(r);
    if (it == best.end()) best[r] = v;
    else it->second = std::max(it->second, v);
  }
  std::map<int, std::pair<int, int>> cell;  // rank -> (row, col)
  int cols = 0, rows = 0;
  for (const std::vector<int>& g : dp_groups) {
    bool used = false;
    for (size_t d = 0; d < g.size(); ++d) {
      if (cell.count(g[d])) continue;
      cell[g[d]] = {static_cast<int>(d), cols};
      rows = std::max(rows, static_cast<int>(d) + 1);
      used = true;
    }
    if (used) ++cols;
  }
  for (const auto& [r, v] : best) {
    (void)v;
    if (cell.count(r)) continue;
    cell[r] = {0, cols++};
    rows = std::max(rows, 1);
  }
  Grid g;
  g.rows = rows;
  g.cols = cols;
  g.value.assign(static_cast<size_t>(rows) * cols, std::numeric_limits<double>::quiet_NaN());
  g.rank.assign(static_cast<size_t>(rows) * cols, -1);
  for (const auto& [r, rc] : cell) {
    const size_t i = static_cast<size_t>(rc.first) * cols + rc.second;
    g.rank[i] = r;
    auto it = best.find(r);
    if (it != best.end()) g.value[i] = it->second;
  }
  return g;
}

std::vector<HotCell> HotCells(const Grid& g, double ratio) {
  std::vector<HotCell> out;
  for (int r = 0; r < g.rows; ++r)
    for (int c = 0; c < g.cols; ++c) {
      const double v = g.at(r, c);
      if (!std::isfinite(v)) continue;
      std::vector<double> peers;
      for (int r2 = 0; r2 < g.rows; ++r2)
        if (r2 != r && std::isfinite(g.at(r2, c))) peers.push_back(g.at(r2, c));
      if (peers.empty())
        for (int c2 = 0; c2 < g.cols; ++c2)
          if (c2 != c && std::isfinite(g.at(r, c2))) peers.push_back(g.at(r, c2));
      if (peers.empty()) continue;
      const double p = Median(peers);
      if (p > 0 && v > ratio * p) {
        HotCell h;
        h.row = r;
        h.col = c;
        h.rank = g.rank[static_cast<size_t>(r) * g.cols + c];
        h.value = v;
        h.peer = p;
        h.ratio = v / p;
        out.push_back(h);
      }
    }
  std::sort(out.begin(), out.end(), [](const HotCell& a, const HotCell& b) { return a.ratio > b.ratio; });
  return out;
}

}  // namespace collscope::diagnose
