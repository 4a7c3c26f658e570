#include "analysis/diagnose/bubble_steps.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/share_ccld.h"

namespace collscope::diagnose {
namespace {

struct Obs {
  int64_t start = 0, end = 0;
  double idle = 0, compute = 0, p2p = 0;
};

double Phase(const readers::StepRow& r, const char* name) {
  auto it = r.phases.find(name);
  return it == r.phases.end() ? 0 : it->second;
}

// Median over `ranks` of each rank's median of f(rank, obs) over `steps` (ranks without any of
// those steps are left out); 0 when none has them.
template <typename F>
double StageMedian(const std::map<int, std::map<int64_t, Obs>>& by_rank, const std::vector<int>& ranks,
                   const std::vector<int64_t>& steps, F f) {
  std::vector<double> per_rank;
  for (int r : ranks) {
    auto it = by_rank.find(r);
    if (it == by_rank.end()) continue;
    std::vector<double> v;
    for (int64_t s : steps) {
      auto o = it->second.find(s);
      if (o != it->second.end()) v.push_back(f(r, o->second));
    }
    if (!v.empty()) per_rank.push_back(Median(v));
  }
  return Median(per_rank);
}

std::string Ms(double us) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f ms", us / 1000);
  return b;
}

using StepsByRank = std::map<int, std::map<int64_t, Obs>>;

// Complete steps of ranks with a known stage: an unfinished step (a hang) has no duration. Their
// durations are appended to `durs`.
StepsByRank ObserveSteps(const readers::StepSeries& s, const std::map<int, int>& stage_of, std::vector<double>* durs) {
  StepsByRank by_rank;
  for (const readers::StepRow& r : s.rows) {
    if (r.rank < 0 || r.dur_us <= 0 || !stage_of.count(r.rank)) continue;
    double named = 0;
    for (const auto& [ph, v] : r.phases)
      if (IsCommPhase(ph) || ph == "forward" || ph == "backward" || ph == "optimizer") named += v;
    Obs x;
    x.start = r.start_us;
    x.end = r.start_us + static_cast<int64_t>(r.dur_us);
    x.idle = r.dur_us - named;
    x.compute = Phase(r, "forward") + Phase(r, "backward");
    x.p2p = Phase(r, "pp_p2p");
    by_rank[r.rank][r.step] = x;
    durs->push_back(r.dur_us);
  }
  return by_rank;
}

// Each rank's usual idle, compute and pipeline wait, and the step-to-step noise of idle.
struct UsualLevels {
  std::map<int, double> idle, compute, p2p;
  double sigma = 0;
};

// Usual levels: the rank's median over the job's faster quarter of steps (by the median
// duration over ranks). A bubble lengthens the steps it covers and can fill most of a job; the
// faster quarter still shows the usual level, whereas the rank's median over all steps lands
// halfway when a bubble covers half of them (and the ranks that wait during the bubble then
// seem idle in the ordinary steps). Noise: step-to-step differences of idle, which a level
// shift changes only at its two edges, so a long bubble does not inflate it.
UsualLevels Usual(const StepsByRank& by_rank) {
  std::map<int64_t, std::vector<double>> step_durs;
  for (const auto& [rank, steps] : by_rank)
    for (const auto& [step, x] : steps) step_durs[step].push_back(static_cast<double>(x.end - x.start));
  std::map<int64_t, double> job_dur;
  std::vector<double> job_durs;
  for (auto& [step, v] : step_durs) job_durs.push_back(job_dur[step] = Median(v));
  std::sort(job_durs.begin(), job_durs.end());
  const double fast = job_durs[(job_durs.size() - 1) / 4];
  UsualLevels u;
  std::vector<double> diffs;
  for (const auto& [rank, steps] : by_rank) {
    std::vector<double> idle, c, p2p;
    const Obs* prev = nullptr;
    for (const auto& [step, x] : steps) {
      if (job_dur[step] <= fast) {
        idle.push_back(x.idle);
        c.push_back(x.compute);
        p2p.push_back(x.p2p);
      }
      if (prev) diffs.push_back(std::fabs(x.idle - prev->idle));
      prev = &x;
    }
    u.idle[rank] = Median(idle);
    u.compute[rank] = Median(c);
    u.p2p[rank] = Median(p2p);
  }
  u.sigma = 1.4826 * Median(diffs) / std::sqrt(2.0);
  return u;
}

// What a bubble of `stage` over the steps `run` measured: its extra idle, its compute growth, the
// waiting stage's and its own extra pipeline wait.
struct StageRun {
  int stage = 0, waiter = 0;
  std::vector<int64_t> steps;
  double idle = 0, growth = 0, wait = 0, own_wait = 0;
};

Finding StageIdleFinding(const StageRun& b, const std::vector<int>& ranks, const std::vector<int>& stage_ranks,
                         const std::vector<int>& waiter_ranks, const StepsByRank& by_rank,
                         const std::map<int, std::string>& host_of, double step_us, double sigma) {
  Finding f;
  f.kind = Kind::kPipelineBubble;
  f.detector = "steps.stage_idle";
  f.ranks = stage_ranks;
  f.victims = waiter_ranks;
  std::set<std::string> hosts;
  for (int r : f.ranks)
    if (host_of.count(r)) hosts.insert(host_of.at(r));
  f.hosts.assign(hosts.begin(), hosts.end());
  f.start_us = INT64_MAX;
  f.end_us = INT64_MIN;
  for (int r : ranks) {
    const auto& st = by_rank.at(r);
    if (auto a = st.find(b.steps.front()); a != st.end()) f.start_us = std::min(f.start_us, a->second.start);
    if (auto e = st.find(b.steps.back()); e != st.end()) f.end_us = std::max(f.end_us, e->second.end);
  }
  const double share = b.idle / step_us;
  // Sure when the gap is a large part of the step for many steps.
  f.confidence = std::min(0.95, 0.5 + share) * std::min(1.0, 0.4 + static_cast<double>(b.steps.size()) / 10.0);
  f.Add("stage", b.stage);
  f.Add("extra_idle_us", b.idle);
  f.Add("extra_idle_share", share);
  f.Add("waiter_stage", b.waiter);
  f.Add("waiter_extra_p2p_us", b.wait);
  f.Add("own_extra_p2p_us", b.own_wait);
  f.Add("compute_growth", b.growth);
  f.Add("idle_steps", static_cast<double>(b.steps.size()));
  f.Add("first_step", static_cast<double>(b.steps.front()));
  f.Add("last_step", static_cast<double>(b.steps.back()));
  f.Add("noise_sigma_us", sigma);
  f.summary = "Pipeline stage " + std::to_string(b.stage) + " (ranks " + RankList(f.ranks) + ") is idle " +
              Ms(b.idle) + " more per step in steps " + std::to_string(b.steps.front()) + "-" +
              std::to_string(b.steps.back()) + " (neither computing nor communicating; its compute as usual) " +
              "while stage " + std::to_string(b.waiter) + " waits " + Ms(b.wait) +
              " more in its pipeline receives (a pipeline bubble); check that stage's work between "
              "micro-batches (host-side code, data loading) and its layer balance.";
  return f;
}

}  // namespace

std::vector<Finding> DetectStageIdle(const readers::StepSeries& s, const std::map<int, int>& stage_of,
                                     const std::map<int, std::string>& host_of, const StageIdleOptions& o) {
  std::vector<Finding> out;
  if (stage_of.empty()) return out;
  std::vector<double> durs;
  const StepsByRank by_rank = ObserveSteps(s, stage_of, &durs);
  const double step_us = Median(durs);
  if (by_rank.empty() || step_us <= 0) return out;
  const UsualLevels usual = Usual(by_rank);
  const double thr = std::max(o.min_share * step_us, o.noise_sigmas * usual.sigma);
  std::map<int, std::vector<int>> members;  // stage -> ranks with steps
  for (const auto& [rank, steps] : by_rank) members[stage_of.at(rank)].push_back(rank);
  std::map<int, std::vector<int>> all_members;  // stage -> every rank the records place there
  for (const auto& [rank, st] : stage_of) all_members[st].push_back(rank);

  for (const auto& entry : members) {
    // Plain references, not structured bindings: lambdas below capture them (Clang 14 cannot).
    const auto& stage = entry.first;
    const auto& ranks = entry.second;
    // Steps where most of the stage idled beyond its usual.
    std::map<int64_t, std::pair<int, int>> count;  // step -> (ranks with data, ranks idle)
    for (int r : ranks)
      for (const auto& [step, x] : by_rank.at(r)) {
        auto& c = count[step];
        c.first++;
        if (x.idle - usual.idle.at(r) >= thr) c.second++;
      }
    std::vector<int64_t> run;
    int gap = 0;
    auto close = [&]() {
      if (static_cast<int>(run.size()) < o.min_steps) {
        run.clear();
        return;
      }
      StageRun b;
      b.stage = stage;
      b.steps = run;
      b.idle = StageMedian(by_rank, ranks, run, [&](int r, const Obs& x) { return x.idle - usual.idle.at(r); });
      b.growth = StageMedian(by_rank, ranks, run, [&](int r, const Obs& x) {
        return usual.compute.at(r) > 0 ? x.compute / usual.compute.at(r) - 1 : 0;
      });
      // The stage that waits for the late activations: the next one (the last stage, which
      // sends no activations, would make the previous one wait for its gradients).
      b.waiter = all_members.count(stage + 1) ? stage + 1 : stage - 1;
      const bool has_waiter = b.waiter >= 0 && all_members.count(b.waiter);
      const auto extra_p2p = [&](int r, const Obs& x) { return x.p2p - usual.p2p.at(r); };
      b.wait = has_waiter ? StageMedian(by_rank, all_members[b.waiter], run, extra_p2p) : 0;
      // What the stage itself waited more in its own pipeline receives: a bubble's origin is
      // not behind anyone, while a stage downstream of one waits as long as the origin idles, and
      // how its frameworks' timers split that wait between the receive and the gap after it
      // shifts stage by stage (a 256-GPU PP 8 job: stage 4 "idle" 5.7 ms more while it waited
      // 55 ms more, all of it stage 0's bubble).
      b.own_wait = StageMedian(by_rank, ranks, run, extra_p2p);
      // A slowed stage idles because compute moved (its own finding, steps.compute); a gap
      // nobody waits for delays nothing; a stage that waited more than it idled follows another.
      if (b.growth < o.max_compute_growth && has_waiter && b.wait >= o.min_wait_ratio * b.idle && b.own_wait < b.idle)
        out.push_back(StageIdleFinding(b, ranks, all_members[stage], all_members[b.waiter], by_rank, host_of,
                                       step_us, usual.sigma));
      run.clear();
    };
    for (const auto& [step, c] : count) {
      const bool high = c.second >= o.stage_share * static_cast<double>(all_members[stage].size()) &&
                        c.second >= o.stage_share * c.first;
      if (high) {
        run.push_back(step);
        gap = 0;
      } else if (!run.empty() && ++gap > o.max_gap_steps) {
        close();
        gap = 0;
      }
    }
    close();
  }
  return out;
}

}  // namespace collscope::diagnose
