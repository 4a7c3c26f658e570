#include "analysis/diagnose/steps.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/compute_growth.h"
#include "analysis/diagnose/share_ccld.h"

namespace collscope::diagnose {

std::vector<size_t> Pelt(const std::vector<double>& x, double penalty, size_t min_seg) {
  const size_t n = x.size();
  if (n < 2 * min_seg) return {};
  std::vector<double> s1(n + 1, 0), s2(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    s1[i + 1] = s1[i] + x[i];
    s2[i + 1] = s2[i] + x[i] * x[i];
  }
  if (penalty <= 0) {
    std::vector<double> d;
    for (size_t i = 1; i < n; ++i) d.push_back(std::fabs(x[i] - x[i - 1]));
    const double mad = Median(d) / (0.6745 * std::sqrt(2.0));
    const double var = std::max(mad * mad, 1e-12 + 1e-6 * (s1[n] / n) * (s1[n] / n));
    penalty = 2.0 * std::log(static_cast<double>(n)) * var * 3;
  }
  auto cost = [&](size_t a, size_t b) {  // sum of squared deviations on [a, b)
    const double m = static_cast<double>(b - a);
    const double s = s1[b] - s1[a];
    return (s2[b] - s2[a]) - s * s / m;
  };
  std::vector<double> F(n + 1, std::numeric_limits<double>::infinity());
  std::vector<size_t> last(n + 1, 0);
  F[0] = -penalty;
  std::vector<size_t> cand = {0};
  for (size_t t = min_seg; t <= n; ++t) {
    double best = std::numeric_limits<double>::infinity();
    size_t arg = 0;
    for (size_t s : cand) {
      if (t - s < min_seg) continue;
      const double v = F[s] + cost(s, t) + penalty;
      if (v < best) {
        best = v;
        arg = s;
      }
    }
    F[t] = best;
    last[t] = arg;
    std::vector<size_t> keep;
    for (size_t s : cand)
      if (t - s < min_seg || F[s] + cost(s, t) <= F[t]) keep.push_back(s);
    keep.push_back(t);
    cand.swap(keep);
    std::sort(cand.begin(), cand.end());
    cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
  }
  std::vector<size_t> cps;
  for (size_t t = n; t > 0 && last[t] > 0; t = last[t]) cps.push_back(last[t]);
  std::reverse(cps.begin(), cps.end());
  return cps;
}

std::vector<size_t> Spikes(const std::vector<double>& x, int window, double ratio) {
  std::vector<size_t> out;
  const size_t n = static_cast<size_t>(window);
  if (x.size() <= n) return out;
  for (size_t i = 0; i < x.size(); ++i) {
    // The steps before it; the first steps, which have too few, against the steps after them (a
    // stall in step 5 of a 40-step job went unseen).
    const size_t a = i >= n ? i - n : i + 1, b = i >= n ? i : std::min(x.size(), i + 1 + n);
    std::vector<double> w(x.begin() + static_cast<std::ptrdiff_t>(a), x.begin() + static_cast<std::ptrdiff_t>(b));
    const double m = Median(w);
    if (m > 0 && x[i] > ratio * m) out.push_back(i);
  }
  return out;
}

namespace {

// Per step, every rank's own time (the step less its communication phases) above the rank's
// usual (median) own time.
struct StallTimes {
  std::map<int64_t, std::vector<std::pair<int, double>>> own_excess;  // step -> (rank, excess)
};

StallTimes StallTimesOf(const StepSeries& s) {
  StallTimes t;
  for (const auto& [rank, steps] : OwnTimeExcess(s))
    for (const OwnStep& x : steps) t.own_excess[x.step].push_back({rank, x.excess_us});
  return t;
}

struct StepStall {
  size_t index = 0;            // into the job series
  std::vector<int> ranks;      // who stalled
  double own_excess_us = 0;    // the least own-time growth among them
  double spike_excess_us = 0;  // how much longer the step was than the job's median step
};

// Who stalled in `step`, whose longest rank took `excess_us` more than the job's median step. In
// a synchronous job every rank's step stretches by a stall, but only the stalled ranks' own time
// grows; the others' extra time is waiting, in their communication phases. The stalled ranks are
// those whose own time grew by at least half the excess, when they are at most half the step's
// ranks; none when the series cannot tell (without communication phases, everyone's own time
// grows alike).
StepStall WhoStalled(const StallTimes& t, int64_t step, double excess_us) {
  StepStall st;
  st.spike_excess_us = excess_us;
  auto it = t.own_excess.find(step);
  if (it == t.own_excess.end() || it->second.size() < 2 || excess_us <= 0) return st;
  double least = INFINITY;
  for (const auto& [rank, e] : it->second)
    if (e >= 0.5 * excess_us) {
      st.ranks.push_back(rank);
      least = std::min(least, e);
    }
  if (2 * st.ranks.size() > it->second.size()) st.ranks.clear();
  std::sort(st.ranks.begin(), st.ranks.end());
  st.own_excess_us = st.ranks.empty() ? 0 : least;
  return st;
}

// The one host all of `ranks` run on; empty when they span several or one is unknown.
std::string HostOf(const std::vector<int>& ranks, const std::map<int, std::string>& host_of) {
  std::string host;
  for (int r : ranks) {
    auto it = host_of.find(r);
    if (it == host_of.end() || (!host.empty() && it->second != host)) return "";
    host = it->second;
  }
  return host;
}

template <typename When>
Finding StallFinding(const std::vector<StepStall>& v, const StallTimes& t,
                     const std::vector<int64_t>& steps, const std::vector<double>& x,
                     double median_step_us, const std::map<int, std::string>& host_of,
                     const When& when) {
  Finding f;
  f.kind = Kind::kHostStall;
  f.detector = "steps.stall";
  std::set<int> ranks, others;
  const StepStall* worst = &v[0];
  double held = INFINITY;  // the weakest stall's own-time growth against its spike
  for (const StepStall& st : v) {
    ranks.insert(st.ranks.begin(), st.ranks.end());
    if (x[st.index] > x[worst->index]) worst = &st;
    held = std::min(held, st.own_excess_us / st.spike_excess_us);
    for (const auto& [rank, excess] : t.own_excess.at(steps[st.index])) others.insert(rank);
  }
  f.ranks.assign(ranks.begin(), ranks.end());
  for (int r : others)
    if (!ranks.count(r)) f.victims.push_back(r);
  if (const std::string host = HostOf(f.ranks, host_of); !host.empty()) f.hosts = {host};
  f.start_us = when(v.front().index);
  f.end_us = when(v.back().index) + static_cast<int64_t>(x[v.back().index]);
  // Own time that grew by about the whole spike leaves no doubt who held the step.
  f.confidence = held >= 0.8 ? 0.8 : 0.6;
  f.Add("stalls", static_cast<double>(v.size()));
  f.Add("max_stall_us", std::round(worst->own_excess_us));
  f.Add("worst_step", static_cast<double>(steps[worst->index]));
  f.Add("worst_ratio", x[worst->index] / median_step_us);
  f.Add("median_step_us", std::round(median_step_us));
  std::string who =
      f.ranks.size() == 1 ? "Rank " + std::to_string(f.ranks[0]) : "Ranks " + RankList(f.ranks);
  if (!f.hosts.empty()) who += " on " + f.hosts[0];
  const bool one = f.ranks.size() == 1;
  f.summary =
      who + (one ? " stalled " : " stalled together ") +
      (v.size() == 1 ? "" : std::to_string(v.size()) + " times, ") + "for up to " +
      Fmt("%.2f", worst->own_excess_us / 1e6) + " s (step " + std::to_string(steps[worst->index]) +
      ", " + Fmt("%.1f", x[worst->index] / median_step_us) + "x the median step) in " +
      (one ? "its" : "their") + " own time, outside communication, while " +
      std::to_string(f.victims.size()) +
      " other ranks waited in their communication phases: a host-side stall (JIT compilation, "
      "garbage collection, data loading, I/O); check " +
      (one ? "that rank's" : "those ranks'") + " Python stack at that time.";
  return f;
}

}  // namespace

namespace {

// The job's step series: per step, the longest step of any rank, its earliest start, and each
// phase's longest. Per-rank series, where there are any, decide: a framework's job-level iteration
// times (rank -1) may number their steps otherwise.
struct JobSteps {
  bool per_rank = false;
  std::vector<int64_t> steps;
  std::vector<double> x;  // step time, us
  std::map<int64_t, int64_t> start;
  std::map<int64_t, std::map<std::string, double>> phases;

  explicit JobSteps(const StepSeries& s) {
    per_rank = std::any_of(s.rows.begin(), s.rows.end(), [](const auto& r) { return r.rank >= 0; });
    std::map<int64_t, double> job;
    for (const auto& r : s.rows) {
      if (per_rank && r.rank < 0) continue;
      job[r.step] = std::max(job[r.step], r.dur_us);
      if (r.start_us && (!start.count(r.step) || r.start_us < start[r.step])) start[r.step] = r.start_us;
      for (const auto& [p, v] : r.phases) phases[r.step][p] = std::max(phases[r.step][p], v);
    }
    for (auto& [k, v] : job) {
      steps.push_back(k);
      x.push_back(v);
    }
  }
  int64_t When(size_t i) const {
    auto it = start.find(steps[i]);
    return it == start.end() ? 0 : it->second;
  }
  double Phase(size_t i, const std::string& p) const {
    auto st = phases.find(steps[i]);
    if (st == phases.end()) return 0;
    auto it = st->second.find(p);
    return it == st->second.end() ? 0 : it->second;
  }
  // The phase of steps [a, b) that grew most over the steps `base`, and by how much.
  std::pair<std::string, double> Grew(size_t a, size_t b, const std::vector<size_t>& base) const {
    std::string best;
    double inc = 0;
    auto at_a = phases.find(steps[a]);
    if (at_a == phases.end()) return {best, inc};
    for (const auto& [p, v] : at_a->second) {
      (void)v;
      std::vector<double> bv, av;
      for (size_t i : base) av.push_back(Phase(i, p));
      for (size_t i = a; i < b; ++i) bv.push_back(Phase(i, p));
      const double d = Median(bv) - Median(av);
      if (d > inc) {
        inc = d;
        best = p;
      }
    }
    return {best, inc};
  }
};

// A lasting level shift of the step time: steps [b, c) against [a, b).
Finding RegressionFinding(const StepSeries& s, const JobSteps& j, size_t a, size_t b, size_t c, double before,
                          double after) {
  const std::vector<double>& x = j.x;
  Finding f;
  f.kind = Kind::kStepRegression;
  f.detector = "steps.pelt";
  f.start_us = j.When(b);
  f.end_us = c < x.size() ? j.When(c) : j.When(c - 1) + static_cast<int64_t>(x[c - 1]);
  std::vector<size_t> base;
  for (size_t i = a; i < b; ++i) base.push_back(i);
  auto [phase, inc] = j.Grew(b, c, base);
  f.confidence = std::min(1.0, 0.5 + (after / before - 1));
  f.Add("step_us_before", before);
  f.Add("step_us_after", after);
  f.Add("first_step", static_cast<double>(j.steps[b]));
  f.Add("steps", static_cast<double>(c - b));
  if (!phase.empty()) {
    f.AddText("phase_grew", phase);
    f.Add("phase_growth_us", inc);
  }
  // CCL-D share P (alpha 0.4 / beta 0.6): compute or communication slowdown, per rank.
  if (s.source == "annotation") {
    std::vector<int64_t> sa, sb;
    for (size_t i = b; i < c; ++i) sa.push_back(j.steps[i]);
    for (size_t i = a; i < b; ++i) sb.push_back(j.steps[i]);
    const ShareVerdict v = ClassifySlowdown(s, sa, sb);
    if (v.cls != "none") {
      f.Add("comm_share_P", v.job_p);
      f.AddText("slowdown_class", v.cls);
      if (v.rank >= 0) {
        f.Add("lowest_P_rank", v.rank);
        f.Add("lowest_P", v.rank_p);
      }
    }
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "Step time rose from %.1f ms to %.1f ms (+%.0f%%) at step %lld for %zu steps",
                before / 1e3, after / 1e3, 100 * (after / before - 1), static_cast<long long>(j.steps[b]), c - b);
  f.summary = std::string(buf) + (phase.empty() ? "" : "; the " + phase + " phase grew most") +
              ": look at the slow_* findings of that window for the cause.";
  return f;
}

// Spikes that no rank's own time explains, outside the regressions.
Finding JitterFinding(const JobSteps& j, const std::vector<size_t>& unexplained, const std::vector<bool>& in_regression,
                      double med) {
  const std::vector<double>& x = j.x;
  Finding f;
  f.kind = Kind::kStepJitter;
  f.detector = "steps.window";
  f.start_us = j.When(unexplained.front());
  f.end_us = j.When(unexplained.back()) + static_cast<int64_t>(x[unexplained.back()]);
  double worst = 0;
  size_t wi = unexplained[0];
  for (size_t i : unexplained)
    if (x[i] > worst) {
      worst = x[i];
      wi = i;
    }
  std::vector<size_t> base;
  for (size_t i = 0; i < x.size(); ++i)
    if (!in_regression[i]) base.push_back(i);
  auto [phase, inc] = j.Grew(wi, wi + 1, base);
  (void)inc;
  f.confidence = std::min(1.0, 0.4 + 0.2 * unexplained.size());
  f.Add("spikes", static_cast<double>(unexplained.size()));
  f.Add("worst_step", static_cast<double>(j.steps[wi]));
  f.Add("worst_ratio", worst / med);
  if (!phase.empty()) f.AddText("phase_grew", phase);
  char buf[200];
  std::snprintf(buf, sizeof buf, "%zu step(s) spiked to up to %.1fx the median step time (worst: step %lld)",
                unexplained.size(), worst / med, static_cast<long long>(j.steps[wi]));
  // The slowest rank of a synchronous step is chance (every rank waits out the same spike), so
  // none is named: the ranks' own time did not tell who held the others.
  f.summary = std::string(buf) + (phase.empty() ? "" : "; the " + phase + " phase grew") +
              ": transient, and no rank's own time (outside communication) grew by it; check for "
              "stalls or "
              "contention then.";
  return f;
}

}  // namespace

std::vector<Finding> DetectStepAnomalies(const StepSeries& s, const StepOptions& o,
                                         const std::map<int, std::string>& host_of) {
  std::vector<Finding> out;
  const JobSteps j(s);
  const std::vector<int64_t>& steps = j.steps;
  const std::vector<double>& x = j.x;
  if (x.size() < 4) return out;
  auto when = [&](size_t i) { return j.When(i); };
  const double med = Median(x);
  // Change points: lasting level shifts.
  auto cps = Pelt(x, 0, static_cast<size_t>(o.min_segment));
  std::vector<size_t> bounds = {0};
  bounds.insert(bounds.end(), cps.begin(), cps.end());
  bounds.push_back(x.size());
  std::vector<bool> in_regression(x.size(), false);
  for (size_t k = 1; k + 1 < bounds.size(); ++k) {
    const size_t a = bounds[k - 1], b = bounds[k], c = bounds[k + 1];
    const double before = Median(std::vector<double>(x.begin() + a, x.begin() + b));
    const double after = Median(std::vector<double>(x.begin() + b, x.begin() + c));
    if (after < o.regression_ratio * before) continue;
    for (size_t i = b; i < c; ++i) in_regression[i] = true;
    out.push_back(RegressionFinding(s, j, a, b, c, before, after));
  }
  // Spikes outside regressions: a stall where the ranks' own time names who stalled, else jitter.
  std::vector<size_t> spikes;
  for (size_t i : Spikes(x, o.window, o.jitter_ratio))
    if (!in_regression[i]) spikes.push_back(i);
  std::vector<size_t> unexplained;
  // Stalls of the same ranks are one finding. Another rank's stall is another event, even on the
  // same host: a finding naming both would name neither's culprit alone (a 24-GPU sweep job's two
  // stalls of ranks 16 and 19, steps apart, became one finding for "ranks 16,19").
  std::map<std::vector<int>, std::vector<StepStall>> stalls;  // ranks -> their stalls
  const StallTimes times = j.per_rank ? StallTimesOf(s) : StallTimes{};
  for (size_t i : spikes) {
    StepStall st = WhoStalled(times, steps[i], x[i] - med);
    if (st.ranks.empty()) {
      // A job's first steps are its warm-up (compilation, autotuning, allocator growth), slow on
      // every rank: there only a minority's stall is news.
      if (i >= static_cast<size_t>(o.window)) unexplained.push_back(i);
      continue;
    }
    st.index = i;
    stalls[st.ranks].push_back(std::move(st));
  }
  for (const auto& [key, v] : stalls) out.push_back(StallFinding(v, times, steps, x, med, host_of, when));
  if (!unexplained.empty()) out.push_back(JitterFinding(j, unexplained, in_regression, med));
  return out;
}

}  // namespace collscope::diagnose
