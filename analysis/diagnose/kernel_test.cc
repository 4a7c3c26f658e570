// L3 kernel-level statistics and detector on hand-built inputs with known answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "analysis/diagnose/kernel_detect.h"
#include "analysis/diagnose/kernel_stats.h"

namespace collscope::diagnose {
namespace {

// Deterministic normal samples (Box-Muller over mt19937_64, which is specified exactly).
std::vector<double> Normal(uint64_t seed, size_t n, double mean, double sd) {
  std::mt19937_64 g(seed);
  std::vector<double> out;
  while (out.size() < n) {
    const double u1 = (static_cast<double>(g() >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = (static_cast<double>(g() >> 11) + 0.5) / 9007199254740992.0;
    out.push_back(mean + sd * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2));
  }
  return out;
}

TEST(Wasserstein, KnownDistances) {
  EXPECT_DOUBLE_EQ(Wasserstein1({0}, {5}), 5);
  std::vector<double> a, b;
  for (int i = 0; i < 10; ++i) { a.push_back(i); b.push_back(i + 3); }
  EXPECT_DOUBLE_EQ(Wasserstein1(a, b), 3);
  EXPECT_DOUBLE_EQ(Wasserstein1(b, a), 3);
  EXPECT_DOUBLE_EQ(Wasserstein1({0, 0, 1, 1}, {0, 1, 1, 1}), 0.25);
  EXPECT_NEAR(Wasserstein1({0, 1}, {0, 0.5, 1}), 1.0 / 6, 1e-12);
  EXPECT_DOUBLE_EQ(Wasserstein1(a, a), 0);
  EXPECT_DOUBLE_EQ(Wasserstein1({}, a), 0);
  // U(0,1) vs U(0,2): W1 = integral of |u - 2u| = 1/2.
  std::vector<double> u1, u2;
  for (int i = 0; i < 1000; ++i) {
    u1.push_back((i + 0.5) / 1000);
    u2.push_back(2 * (i + 0.5) / 1000);
  }
  EXPECT_NEAR(Wasserstein1(u1, u2), 0.5, 1e-9);
  // N(0,1) vs N(2,1): a pure shift, W1 = 2.
  EXPECT_NEAR(Wasserstein1(Normal(1, 20000, 0, 1), Normal(2, 20000, 2, 1)), 2, 0.05);
  // The sketch (64 quantiles of the step quantile function) agrees on a shift.
  EXPECT_DOUBLE_EQ(Wasserstein1Sketch(QuantileSketch(a, 64), QuantileSketch(b, 64)), 3);
  EXPECT_NEAR(Wasserstein1Sketch(QuantileSketch(u1, 64), QuantileSketch(u2, 64)), 0.5, 0.01);
}

TEST(KdeModes, FindsTheTwoModesOfABimodalSample) {
  std::vector<double> x = Normal(7, 300, 100, 2);
  for (double v : Normal(8, 200, 200, 4)) x.push_back(v);
  auto m = KdeModes(x);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_NEAR(m[0].center, 100, 3);
  EXPECT_NEAR(m[1].center, 200, 6);
  EXPECT_EQ(m[0].count, 300u);
  EXPECT_EQ(m[1].count, 200u);
  EXPECT_DOUBLE_EQ(m[0].weight, 0.6);
  EXPECT_LT(m[0].hi, m[1].lo);
}

TEST(KdeModes, NoPresetClusterCount) {
  EXPECT_EQ(KdeModes(Normal(3, 500, 100, 1)).size(), 1u);
  std::vector<double> x = Normal(4, 200, 100, 1);
  for (double v : Normal(5, 200, 130, 1.3)) x.push_back(v);
  for (double v : Normal(6, 100, 170, 1.7)) x.push_back(v);
  auto m = KdeModes(x);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].count, 200u);
  EXPECT_EQ(m[1].count, 200u);
  EXPECT_EQ(m[2].count, 100u);
  // Sub-percent jitter is one mode; two far outliers (1%) merge into it instead of a mode.
  std::vector<double> j = Normal(9, 198, 100, 0.2);
  j.push_back(500);
  j.push_back(510);
  auto one = KdeModes(j);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].count, 200u);
  EXPECT_DOUBLE_EQ(one[0].hi, 510);
  EXPECT_TRUE(KdeModes({}).empty());
  EXPECT_EQ(KdeModes({5, 5, 5}).size(), 1u);
}

TEST(Grid, OneHotCell) {
  // 2 DP replicas x 4 model-parallel positions; column 2 does more work on both replicas.
  std::vector<std::vector<int>> dp = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  std::vector<std::pair<int, double>> v;
  for (int r = 0; r < 8; ++r) {
    const double base = r % 4 == 2 ? 200 : 100;
    v.push_back({r, base});
    v.push_back({r, base * 0.9});
  }
  v.push_back({5, 130});  // one slow step on rank 5
  Grid g = MaxGrid(dp, v);
  EXPECT_EQ(g.rows, 2);
  EXPECT_EQ(g.cols, 4);
  EXPECT_DOUBLE_EQ(g.at(1, 1), 130);
  EXPECT_DOUBLE_EQ(g.at(0, 2), 200);
  auto hot = HotCells(g, 1.1);
  ASSERT_EQ(hot.size(), 1u);
  EXPECT_EQ(hot[0].rank, 5);
  EXPECT_EQ(hot[0].row, 1);
  EXPECT_EQ(hot[0].col, 1);
  EXPECT_DOUBLE_EQ(hot[0].ratio, 1.3);
}

// 8 ranks x 3 kernels x 40 steps; ranks 4-7 (a second pipeline stage) run kernel 2 at twice the
// duration. `slow_rank` runs every kernel `factor` x slower in steps 20-29.
KernelData Synthetic(int slow_rank, double factor) {
  KernelData d;
  d.names = {"gemm_a", "flash_fwd", "gemm_b"};
  for (int r = 0; r < 8; ++r) {
    d.ranks.push_back(r);
    d.hosts[r] = r < 4 ? "h0" : "h1";
    for (int q = 0; q < 8; ++q)
      if (q != r) d.peers[r].push_back(q);
  }
  d.dp_groups = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  for (int r = 0; r < 8; ++r) {
    std::vector<double> per_step(40, 0);
    for (int k = 0; k < 3; ++k) {
      KernelSeries s;
      s.rank = r;
      s.name = k;
      auto noise = Normal(1000 + r * 10 + k, 40, 0, 0.01);
      for (int st = 0; st < 40; ++st) {
        double dur = (k + 1) * 100.0 * (k == 2 && r >= 4 ? 2 : 1) * (1 + noise[st]);
        if (r == slow_rank && st >= 20 && st < 30) dur *= factor;
        s.dur_us.push_back(dur);
        s.start_us.push_back(1e9 + st * 10000.0 + k * 1000);
        s.step.push_back(st);
        per_step[st] += dur;
      }
      d.series.push_back(std::move(s));
    }
    for (double v : per_step) d.step_compute.push_back({r, v});
  }
  return d;
}

TEST(KernelDetector, NamesTheRankWhoseModesShift) {
  KernelAnalysis a;
  auto f = DetectKernelAnomalies(Synthetic(6, 1.25), KernelOptions{}, &a);
  ASSERT_EQ(f.size(), 1u);
  const Finding& x = f[0];
  EXPECT_EQ(x.kind, Kind::kSlowCompute);
  EXPECT_EQ(x.detector, "kernel.modes");
  EXPECT_EQ(x.ranks, (std::vector<int>{6}));
  EXPECT_EQ(x.hosts, (std::vector<std::string>{"h1"}));
  EXPECT_EQ(x.victims.size(), 7u);
  EXPECT_EQ(x.start_us, 1000000000 + 20 * 10000);
  EXPECT_LT(x.end_us, 1000000000 + 30 * 10000);
  std::map<std::string, double> ev;
  for (const Evidence& e : x.evidence) ev[e.key] = e.value;
  EXPECT_EQ(ev["first_step"], 20);
  EXPECT_EQ(ev["last_step"], 29);
  EXPECT_EQ(ev["kernels_shifted"], 3);
  EXPECT_NEAR(ev["slowdown"], 1.25, 0.02);
  EXPECT_NEAR(ev["grid_ratio"], 1.25, 0.05);
  EXPECT_GT(x.confidence, 0.9);
  // The W1 matrix of each kernel: rank 6's row stands out.
  ASSERT_EQ(a.matrices.size(), 3u);
  for (const auto& m : a.matrices) {
    ASSERT_EQ(m.ranks.size(), 8u);
    EXPECT_GT(m.w1[6][7], 0.05);
    EXPECT_LT(m.w1[4][7], 0.02);
  }
  // The shifted kernel's modes: 75% normal, 25% at 1.25x.
  ASSERT_FALSE(a.shifts.empty());
  ASSERT_EQ(a.shifts[0].modes.size(), 2u);
  EXPECT_NEAR(a.shifts[0].modes[1].weight, 0.25, 1e-9);
}

TEST(KernelDetector, HealthyAndPipelineStagesGiveNothing) {
  EXPECT_TRUE(DetectKernelAnomalies(Synthetic(-1, 1), KernelOptions{}).empty());
  // A small shift on a small share of the rank's time stays below the gates.
  EXPECT_TRUE(DetectKernelAnomalies(Synthetic(1, 1.02), KernelOptions{}).empty());
}

// 12 ranks on 3 hosts of 4. Every rank of `slow_host` runs every kernel `factor` x slower in steps
// 20-29 (a host slowdown: the host mates share the slow mode). `stage_host` runs kernel 1 at 1.5x
// all along (a pipeline stage alone on its host doing other work under the same name).
KernelData HostJob(int slow_host, double factor, int stage_host) {
  KernelData d;
  d.names = {"gemm_a", "flash_fwd"};
  for (int r = 0; r < 12; ++r) {
    d.ranks.push_back(r);
    d.hosts[r] = "h" + std::to_string(r / 4);
    for (int q = 0; q < 12; ++q)
      if (q != r) d.peers[r].push_back(q);
  }
  for (int r = 0; r < 12; ++r)
    for (int k = 0; k < 2; ++k) {
      KernelSeries s;
      s.rank = r;
      s.name = k;
      auto noise = Normal(2000 + r * 10 + k, 40, 0, 0.01);
      for (int st = 0; st < 40; ++st) {
        double dur = (k + 1) * 100.0 * (1 + noise[st]);
        if (k == 1 && r / 4 == stage_host) dur *= 1.5;
        if (r / 4 == slow_host && st >= 20 && st < 30) dur *= factor;
        s.dur_us.push_back(dur);
        s.start_us.push_back(1e9 + st * 10000.0 + k * 1000);
        s.step.push_back(st);
      }
      d.series.push_back(std::move(s));
    }
  return d;
}

TEST(KernelDetector, HostSlowdownAgainstOtherHostsAndItsOwnHistory) {
  auto f = DetectKernelAnomalies(HostJob(1, 1.5, -1), KernelOptions{});
  ASSERT_EQ(f.size(), 4u);
  std::vector<int> ranks;
  for (const Finding& x : f) {
    EXPECT_EQ(x.hosts, (std::vector<std::string>{"h1"}));
    ranks.push_back(x.ranks.at(0));
    std::map<std::string, double> ev;
    bool compared_with = false;
    for (const Evidence& e : x.evidence) {
      ev[e.key] = e.value;
      compared_with |= e.key == "compared_with";
    }
    EXPECT_TRUE(compared_with);
    EXPECT_EQ(ev["first_step"], 20);
    EXPECT_EQ(ev["last_step"], 29);
    EXPECT_NEAR(ev["slowdown"], 1.5, 0.03);
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{4, 5, 6, 7}));
}

TEST(KernelDetector, ASlowerShapeAHostRunsFromItsFirstStepIsNotASlowdown) {
  // Host h1 runs one launch in four of each kernel at 1.5x in every step from the first (a shape
  // the other hosts do not run, such as a longer last micro-batch): no change over time.
  KernelData d = HostJob(-1, 1, -1);
  for (KernelSeries& s : d.series)
    if (d.hosts[s.rank] == "h1")
      for (size_t x = 0; x < s.dur_us.size(); x += 4) s.dur_us[x] *= 1.5;
  EXPECT_TRUE(DetectKernelAnomalies(d, KernelOptions{}).empty());
  // The same shape appearing at step 20 is a change, and found.
  KernelData later = HostJob(-1, 1, -1);
  for (KernelSeries& s : later.series)
    if (later.hosts[s.rank] == "h1")
      for (size_t x = 20; x < s.dur_us.size(); x += 2) s.dur_us[x] *= 1.5;
  EXPECT_FALSE(DetectKernelAnomalies(later, KernelOptions{}).empty());
}

TEST(KernelDetector, AStageAloneOnItsHostIsNotASlowdown) {
  // Different all along (no usual mode shared with other hosts): other work, not a slowdown.
  EXPECT_TRUE(DetectKernelAnomalies(HostJob(-1, 1, 2), KernelOptions{}).empty());
  // ... and its slowdown in steps 20-29 is still found, against its own usual mode.
  auto f = DetectKernelAnomalies(HostJob(2, 1.4, 2), KernelOptions{});
  ASSERT_EQ(f.size(), 4u);
  for (const Finding& x : f) EXPECT_EQ(x.hosts, (std::vector<std::string>{"h2"}));
}

TEST(KernelDetector, ATwoSizeKernelIsDatedByItsSlowSamplesOnly) {
  // One kernel name at two sizes (100 us and 240 us, like a loss kernel's forward and backward);
  // rank 5 runs 2.2x slower in steps 20-39: its slow short size (220 us) sits next to its usual
  // long one (240 us). The shift must date from step 20, not from the usual long samples.
  KernelData d;
  d.names = {"loss"};
  for (int r = 0; r < 8; ++r) {
    d.ranks.push_back(r);
    d.hosts[r] = "h" + std::to_string(r / 2);
    KernelSeries s;
    s.rank = r;
    s.name = 0;
    auto noise = Normal(3000 + r, 80, 0, 0.01);
    for (int st = 0; st < 40; ++st)
      for (int k = 0; k < 2; ++k) {
        double dur = (k ? 240.0 : 100.0) * (1 + noise[2 * st + k]);
        if (r == 5 && st >= 20) dur *= 2.2;
        s.dur_us.push_back(dur);
        s.start_us.push_back(1e9 + st * 10000.0 + k * 1000);
        s.step.push_back(st);
      }
    d.series.push_back(std::move(s));
  }
  auto f = DetectKernelAnomalies(d, KernelOptions{});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].ranks, std::vector<int>{5});
  std::map<std::string, double> ev;
  for (const Evidence& e : f[0].evidence) ev[e.key] = e.value;
  EXPECT_EQ(ev["first_step"], 20);
  EXPECT_EQ(ev["last_step"], 39);
}

}  // namespace
}  // namespace collscope::diagnose
