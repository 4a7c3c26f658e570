#include "analysis/diagnose/compute_growth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/share_ccld.h"
#include "core/statistics.h"

namespace collscope::diagnose {
namespace {

double Phase(const readers::StepRow& r, const char* name) {
  auto it = r.phases.find(name);
  return it == r.phases.end() ? 0 : it->second;
}

// A compute phase's time: its GPU time where the process measured it, else its host wall time,
// which may include waiting and communication that overlaps the phase.
double ComputePhase(const readers::StepRow& r, const char* name, bool* gpu) {
  auto it = r.gpu_phases.find(name);
  if (it != r.gpu_phases.end()) {
    *gpu = true;
    return it->second;
  }
  return Phase(r, name);
}

struct Obs {
  int64_t step = 0, start = 0, end = 0;
  double c = 0, fwd = 0, bwd = 0, e = 0;
  bool has_e = false;
};

std::string Pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100 * x);
  return b;
}

bool Coincide(int64_t a0, int64_t a1, int64_t b0, int64_t b1, int64_t slack) {
  return a0 <= b1 + slack && b0 <= a1 + slack;
}

// Who a compute finding names, as its sentence starts: "Rank 6 on h1 computes", "All 4 ranks of
// host h2 (8-11) compute" (*whole_host), or "Ranks 1,2 of host h0 compute".
std::string Who(const std::vector<int>& ranks, const std::string& host, int host_ranks, bool* whole_host) {
  *whole_host = ranks.size() > 1 && static_cast<int>(ranks.size()) == host_ranks;
  if (ranks.size() == 1) return "Rank " + std::to_string(ranks[0]) + (host.empty() ? "" : " on " + host) + " computes";
  if (*whole_host)
    return "All " + std::to_string(host_ranks) + " ranks of host " + host + " (" + RankList(ranks) + ") compute";
  return "Ranks " + RankList(ranks) + (host.empty() ? "" : " of host " + host) + " compute";
}

// Host wall time cannot tell a slow kernel from a phase that waited: less sure, and said.
void AddPhaseTiming(const ComputeProfile& p, Finding* f) {
  if (p.wall_timed) f->confidence *= 0.85;
  f->AddText("phase_timing", p.wall_timed ? "host wall clock (no GPU time measured; a phase may include waiting)"
                                          : "GPU time (CUDA events)");
}

}  // namespace

std::map<int, std::vector<OwnStep>> OwnTimeExcess(const readers::StepSeries& s) {
  std::map<int, std::vector<OwnStep>> own;
  // Complete steps only: an unfinished step has no duration.
  for (const readers::StepRow& r : s.rows) {
    if (r.rank < 0 || r.dur_us <= 0) continue;
    own[r.rank].push_back({r.step, r.start_us, r.start_us + static_cast<int64_t>(r.dur_us), OwnTimeUs(r)});
  }
  for (auto& [rank, steps] : own) {
    std::sort(steps.begin(), steps.end(), [](const OwnStep& a, const OwnStep& b) { return a.step < b.step; });
    std::vector<double> v;
    for (const OwnStep& x : steps) v.push_back(x.excess_us);
    const double usual = Median(v);
    for (OwnStep& x : steps) x.excess_us -= usual;
  }
  return own;
}

ComputeProfile AnalyzeComputeGrowth(const readers::StepSeries& s, const ComputeOptions& o) {
  ComputeProfile p;
  std::map<int, std::vector<Obs>> by_rank;
  std::vector<double> durs;
  for (const readers::StepRow& r : s.rows) {
    if (r.rank < 0) continue;
    bool gpu = false;
    const double fwd = ComputePhase(r, "forward", &gpu), bwd = ComputePhase(r, "backward", &gpu);
    if (fwd + bwd <= 0) continue;
    if (!gpu) p.wall_timed = true;
    Obs x;
    x.step = r.step;
    x.start = r.start_us;
    x.end = r.start_us + static_cast<int64_t>(r.dur_us);
    x.c = fwd + bwd;
    x.fwd = fwd;
    x.bwd = bwd;
    by_rank[r.rank].push_back(x);
    if (r.dur_us > 0) durs.push_back(r.dur_us);
  }
  p.step_us = Median(durs);
  p.own = OwnTimeExcess(s);
  // Own history: the rank's usual compute per step.
  std::map<int, double> usual, usual_fwd, usual_bwd;
  std::map<int64_t, std::vector<double>> ratios;  // step -> x of every rank
  for (auto& [rank, obs] : by_rank) {
    std::sort(obs.begin(), obs.end(), [](const Obs& a, const Obs& b) { return a.step < b.step; });
    if (static_cast<int>(obs.size()) < 2 * o.min_steps) continue;  // no history to compare with
    std::vector<double> c, f, b;
    for (const Obs& x : obs) { c.push_back(x.c); f.push_back(x.fwd); b.push_back(x.bwd); }
    usual[rank] = Quantile(c, o.baseline_quantile);
    usual_fwd[rank] = Quantile(f, o.baseline_quantile);
    usual_bwd[rank] = Quantile(b, o.baseline_quantile);
    if (usual[rank] <= 0) continue;
    p.usual_compute_us[rank] = usual[rank];
    for (const Obs& x : obs) p.compute_us[rank][x.step] = x.c;
    p.coverage[rank] = {obs.front().start, std::max(obs.back().end, obs.back().start)};
    for (const Obs& x : obs) ratios[x.step].push_back(x.c / usual[rank]);
  }
  // Against the job in the same step: the median rank's ratio.
  std::map<int64_t, double> job;
  for (auto& [step, xs] : ratios)
    if (static_cast<int>(xs.size()) >= o.min_ranks) job[step] = Median(xs);
  std::vector<double> all;
  for (auto& [rank, obs] : by_rank) {
    if (!usual.count(rank) || usual[rank] <= 0) continue;
    for (Obs& x : obs) {
      auto it = job.find(x.step);
      if (it == job.end() || it->second <= 0) continue;
      x.e = x.c / usual[rank] / it->second - 1;
      x.has_e = true;
      all.push_back(x.e);
    }
  }
  if (all.empty()) return p;
  const double med = Median(all);
  std::vector<double> dev;
  for (double e : all) dev.push_back(std::fabs(e - med));
  p.sigma = 1.4826 * Median(dev);
  p.threshold = std::max(o.min_growth, o.noise_sigmas * p.sigma);
  for (auto& entry : by_rank) {
    // Plain references, not structured bindings: the lambda below captures them (Clang 14 cannot).
    const auto& rank = entry.first;
    auto& obs = entry.second;
    if (!usual.count(rank) || usual[rank] <= 0) continue;
    std::vector<const Obs*> run;
    int gap = 0;
    auto close = [&]() {
      if (static_cast<int>(run.size()) >= o.min_steps) {
        ComputeRun cr;
        cr.rank = rank;
        cr.first_step = run.front()->step;
        cr.last_step = run.back()->step;
        cr.slow_steps = static_cast<int>(run.size());
        cr.start_us = run.front()->start;
        cr.end_us = std::max(run.back()->end, run.back()->start);
        std::vector<double> e, c, f, b;
        for (const Obs* x : run) {
          e.push_back(x->e);
          c.push_back(x->c);
          f.push_back(x->fwd);
          b.push_back(x->bwd);
        }
        cr.growth = Median(e);
        cr.usual_us = usual[rank];
        cr.compute_us = Median(c);
        cr.forward_growth = usual_fwd[rank] > 0 ? Median(f) / usual_fwd[rank] - 1 : 0;
        cr.backward_growth = usual_bwd[rank] > 0 ? Median(b) / usual_bwd[rank] - 1 : 0;
        p.runs.push_back(cr);
      }
      run.clear();
      gap = 0;
    };
    for (const Obs& x : obs) {
      if (!x.has_e) continue;
      if (x.e >= p.threshold) {
        run.push_back(&x);
        gap = 0;
      } else if (!run.empty() && ++gap > o.max_gap_steps) {
        close();
      }
    }
    close();
  }
  return p;
}

std::vector<Finding> DetectComputeGrowth(const ComputeProfile& p, const std::map<int, std::string>& host_of) {
  std::map<std::string, int> host_size;
  for (const auto& [rank, h] : host_of) host_size[h]++;
  // Runs of one host whose step ranges overlap (or touch) are one slowdown.
  struct Group {
    std::string host;
    std::vector<const ComputeRun*> runs;
    int64_t first = 0, last = 0;
  };
  std::vector<const ComputeRun*> sorted;
  for (const ComputeRun& r : p.runs) sorted.push_back(&r);
  auto host = [&](int rank) {
    auto it = host_of.find(rank);
    return it == host_of.end() ? std::string() : it->second;
  };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const ComputeRun* a, const ComputeRun* b) {
    const std::string ha = host(a->rank), hb = host(b->rank);
    if (ha != hb) return ha < hb;
    return a->first_step < b->first_step;
  });
  std::vector<Group> groups;
  for (const ComputeRun* r : sorted) {
    const std::string h = host(r->rank);
    if (!h.empty() && !groups.empty() && groups.back().host == h && r->first_step <= groups.back().last + 1) {
      groups.back().runs.push_back(r);
      groups.back().last = std::max(groups.back().last, r->last_step);
    } else {
      groups.push_back({h, {r}, r->first_step, r->last_step});
    }
  }
  std::vector<Finding> out;
  for (const Group& g : groups) {
    Finding f;
    f.kind = Kind::kSlowCompute;
    f.detector = "steps.compute";
    if (!g.host.empty()) f.hosts = {g.host};
    std::vector<double> growth, fwd, bwd, usual, now;
    int slow_steps = 0;
    f.start_us = g.runs.front()->start_us;
    f.end_us = g.runs.front()->end_us;
    for (const ComputeRun* r : g.runs) {
      f.ranks.push_back(r->rank);
      growth.push_back(r->growth);
      fwd.push_back(r->forward_growth);
      bwd.push_back(r->backward_growth);
      usual.push_back(r->usual_us);
      now.push_back(r->compute_us);
      slow_steps = std::max(slow_steps, r->slow_steps);
      f.start_us = std::min(f.start_us, r->start_us);
      f.end_us = std::max(f.end_us, r->end_us);
    }
    SortUnique(&f.ranks);
    const double gr = Median(growth), fg = Median(fwd), bg = Median(bwd);
    // Sure when the rank computes much longer for many steps; a 10% growth over 3 steps is weak.
    f.confidence = std::min(0.95, 0.5 + gr) * std::min(1.0, 0.4 + slow_steps / 10.0);
    AddPhaseTiming(p, &f);
    f.Add("compute_growth", gr);
    f.Add("forward_growth", fg);
    f.Add("backward_growth", bg);
    f.Add("usual_compute_us", Median(usual));
    f.Add("compute_us", Median(now));
    f.Add("slow_steps", slow_steps);
    f.Add("first_step", static_cast<double>(g.first));
    f.Add("last_step", static_cast<double>(g.last));
    f.Add("noise_sigma", p.sigma);
    f.Add("host_ranks_flagged", static_cast<double>(f.ranks.size()));
    bool whole_host = false;
    const std::string who = Who(f.ranks, g.host, g.host.empty() ? 0 : host_size[g.host], &whole_host);
    // A backward-only growth is the signature of a kernel that only the backward pass runs
    // (a masked straggler: its forward collectives look normal).
    const bool bwd_only = bg > 2 * std::max(fg, 0.0) + p.threshold;
    f.summary = who + " " + Pct(gr) + " longer per step (forward + backward" +
                (bwd_only ? ", backward only: +" + Pct(bg) + " vs forward +" + Pct(std::max(fg, 0.0)) : "") +
                ") in steps " + std::to_string(g.first) + "-" + std::to_string(g.last) +
                " than " + (f.ranks.size() == 1 ? "its" : "their") +
                " own usual, while the rest of the job did not: " +
                (whole_host ? "a host-wide slowdown; check the host's clocks, power, thermal state and CPU load."
                            : "a compute straggler; check the GPU's clocks, temperature and ECC errors.");
    out.push_back(std::move(f));
  }
  return out;
}

double ComputeAbovePeers(const ComputeProfile& p, int rank, const SameWork& groups, size_t* group) {
  auto it = p.usual_compute_us.find(rank);
  if (it == p.usual_compute_us.end()) return std::nan("");
  double most = std::nan("");
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!std::binary_search(groups[g].begin(), groups[g].end(), rank)) continue;
    std::vector<double> peers;
    for (int r : groups[g]) {
      auto u = p.usual_compute_us.find(r);
      if (r != rank && u != p.usual_compute_us.end()) peers.push_back(u->second);
    }
    if (peers.size() < 2) continue;
    const double median = Median(std::move(peers));
    if (median <= 0) continue;
    const double above = it->second / median - 1;
    if (!(above <= most)) {
      most = above;
      if (group) *group = g;
    }
  }
  return most;
}

std::vector<Finding> DetectComputeAbovePeers(const ComputeProfile& p, const SameWork& groups,
                                             const std::map<int, std::string>& host_of, const ComputeOptions& o) {
  std::set<int> in_runs;
  for (const ComputeRun& run : p.runs) in_runs.insert(run.rank);
  struct Slow {
    int rank;
    double above, steps_share;
  };
  std::map<std::string, std::vector<Slow>> by_host;  // host, or "rank N" where unknown
  for (const auto& [r, steps] : p.compute_us) {
    if (in_runs.count(r)) continue;
    size_t g = 0;
    const double above = ComputeAbovePeers(p, r, groups, &g);
    if (!(above >= p.threshold)) continue;
    // Above those peers step by step too, not only in its usual (a low quantile of its steps).
    int counted = 0, over = 0;
    for (const auto& [step, c] : steps) {
      std::vector<double> peers;
      for (int q : groups[g]) {
        auto qc = p.compute_us.find(q);
        if (q == r || qc == p.compute_us.end()) continue;
        auto it = qc->second.find(step);
        if (it != qc->second.end()) peers.push_back(it->second);
      }
      if (peers.size() < 2) continue;
      const double m = Median(std::move(peers));
      if (m <= 0) continue;
      ++counted;
      if (c / m - 1 >= p.threshold / 2) ++over;
    }
    if (counted < 2 * o.min_steps || over < 0.8 * counted) continue;
    auto h = host_of.find(r);
    by_host[h == host_of.end() ? "rank " + std::to_string(r) : h->second].push_back(
        {r, above, static_cast<double>(over) / counted});
  }
  std::map<std::string, int> host_size;
  for (const auto& [rank, h] : host_of) host_size[h]++;
  std::vector<Finding> out;
  for (const auto& [key, v] : by_host) {
    Finding f;
    f.kind = Kind::kSlowCompute;
    f.detector = "steps.compute";
    auto h = host_of.find(v[0].rank);
    const std::string host = h == host_of.end() ? "" : h->second;
    if (!host.empty()) f.hosts = {host};
    std::vector<double> above, share, usual;
    f.start_us = INT64_MAX;
    f.end_us = 0;
    for (const Slow& x : v) {
      f.ranks.push_back(x.rank);
      above.push_back(x.above);
      share.push_back(x.steps_share);
      usual.push_back(p.usual_compute_us.at(x.rank));
      auto cov = p.coverage.find(x.rank);
      if (cov != p.coverage.end()) {
        f.start_us = std::min(f.start_us, cov->second.first);
        f.end_us = std::max(f.end_us, cov->second.second);
      }
    }
    if (f.start_us > f.end_us) f.start_us = f.end_us = 0;
    const double a = Median(above), sh = Median(share);
    // As sure as a long run of slow steps: every step of the series is one.
    f.confidence = std::min(0.95, 0.5 + a) * sh;
    AddPhaseTiming(p, &f);
    f.Add("compute_above_peers", a);
    f.Add("steps_above_share", sh);
    f.Add("usual_compute_us", std::round(Median(usual)));
    f.Add("noise_sigma", p.sigma);
    bool whole_host = false;
    const std::string who = Who(f.ranks, host, host.empty() ? 0 : host_size[host], &whole_host);
    f.summary = who + " " + Pct(a) + " longer per step (forward + backward) than the peers doing the same work " +
                "in " + (f.ranks.size() == 1 ? "its" : "their") + " communicators, in " + Pct(sh) +
                " of the steps, however far back the series goes: " +
                (whole_host ? "a host slow throughout; check the host's clocks, power, thermal state and CPU load."
                            : "a GPU slow throughout; check its clocks, temperature and ECC errors.");
    out.push_back(std::move(f));
  }
  return out;
}

int DemoteFlatLateArrivals(const ComputeProfile& p, int64_t slack_us, std::vector<Finding>* fs,
                           const SameWork& groups, std::vector<Suppressed>* suppressed) {
  if (p.coverage.empty()) return 0;
  // Its compute grew in the window against its own history, or stands above its same-work peers'
  // throughout (a GPU slow from the first step has no faster history to grow from).
  auto grew = [&](int rank, int64_t a, int64_t b) {
    for (const ComputeRun& r : p.runs)
      if (r.rank == rank && Coincide(r.start_us, r.end_us, a, b, slack_us)) return true;
    return ComputeAbovePeers(p, rank, groups) >= p.threshold;
  };
  auto covered = [&](int rank, int64_t a, int64_t b) {
    auto it = p.coverage.find(rank);
    return it != p.coverage.end() && Coincide(it->second.first, it->second.second, a, b, 0);
  };
  // Kinds whose finding explains another rank's lateness (a symptom-level step finding does not).
  auto explains = [](const Finding& g) {
    return g.kind == Kind::kSlowLink || g.kind == Kind::kHostStall || g.kind == Kind::kPipelineBubble ||
           g.kind == Kind::kHang || g.kind == Kind::kCollectiveMismatch ||
           (g.kind == Kind::kSlowCompute && g.detector == "steps.compute");
  };
  std::vector<bool> drop(fs->size(), false);
  int dropped = 0;
  for (size_t i = 0; i < fs->size(); ++i) {
    Finding& f = (*fs)[i];
    if (f.kind != Kind::kSlowCompute || f.detector == "steps.compute" || f.ranks.empty()) continue;
    bool all_covered = true;
    std::vector<int> grown, flat;
    for (int r : f.ranks) {
      all_covered = all_covered && covered(r, f.start_us, f.end_us);
      (grew(r, f.start_us, f.end_us) ? grown : flat).push_back(r);
    }
    if (!all_covered || flat.empty()) continue;
    if (!grown.empty()) {
      // The rank that computes longer is the straggler; its host mates only followed it.
      f.ranks = grown;
      f.victims.insert(f.victims.end(), flat.begin(), flat.end());
      SortUnique(&f.victims);
      f.Add("compute_flat_ranks", static_cast<double>(flat.size()));
      continue;
    }
    std::vector<size_t> why;
    for (size_t j = 0; j < fs->size(); ++j) {
      const Finding& g = (*fs)[j];
      if (j == i || drop[j] || !explains(g)) continue;
      // (A compute run about f's own ranks would have made them grown, so any other finding in
      // the window is about another cause: a slow link of their host, a stall, a straggler.)
      if (Coincide(g.start_us, g.end_us, f.start_us, f.end_us, slack_us)) why.push_back(j);
    }
    if (why.empty()) continue;  // late for a reason the inputs do not show: keep it
    std::string explained_by;
    for (size_t j : why) {
      Finding& g = (*fs)[j];
      for (int r : f.ranks)
        if (std::find(g.ranks.begin(), g.ranks.end(), r) == g.ranks.end()) g.victims.push_back(r);
      SortUnique(&g.victims);
      explained_by += (explained_by.empty() ? "" : ", ") + std::string(KindName(g.kind)) + " (" + g.detector + ")";
    }
    if (suppressed)
      suppressed->push_back({f, "propagated lateness: its compute neither grew in its window nor stands above its "
                                "peers' doing the same work, and " + explained_by + " in the same window explains it"});
    drop[i] = true;
    ++dropped;
  }
  std::vector<Finding> kept;
  for (size_t i = 0; i < fs->size(); ++i)
    if (!drop[i]) kept.push_back(std::move((*fs)[i]));
  *fs = std::move(kept);
  return dropped;
}

double OwnTimeJump(const ComputeProfile& p, int rank, int64_t a, int64_t b) {
  auto it = p.own.find(rank);
  if (it == p.own.end()) return -1;
  double best = -1;
  bool any = false;
  for (const OwnStep& x : it->second) {
    if (!Coincide(x.start_us, x.end_us, a, b, 0)) continue;
    best = any ? std::max(best, x.excess_us) : x.excess_us;
    any = true;
  }
  return any ? best : -1;
}

double OwnTimeTypicalExcess(const ComputeProfile& p, int rank, int64_t a, int64_t b) {
  auto it = p.own.find(rank);
  if (it == p.own.end()) return 0;
  std::vector<double> v;
  for (const OwnStep& x : it->second)
    if (Coincide(x.start_us, x.end_us, a, b, 0)) v.push_back(x.excess_us);
  return Median(v);
}

namespace {

void Erase(const std::vector<bool>& drop, std::vector<Finding>* fs) {
  std::vector<Finding> kept;
  for (size_t i = 0; i < fs->size(); ++i)
    if (!drop[i]) kept.push_back(std::move((*fs)[i]));
  *fs = std::move(kept);
}

}  // namespace

int DemotePropagatedStalls(const ComputeProfile& p, int64_t slack_us, std::vector<Finding>* fs,
                           std::vector<Suppressed>* suppressed) {
  std::vector<bool> drop(fs->size(), false);
  int dropped = 0;
  for (size_t i = 0; i < fs->size(); ++i) {
    const Finding& f = (*fs)[i];
    if (f.kind != Kind::kHostStall || f.ranks.size() != 1) continue;
    const double wait = f.Number("max_wait_us");
    if (wait <= 0) continue;
    const int64_t a = f.start_us - slack_us, b = f.end_us + slack_us;
    const double own = OwnTimeJump(p, f.ranks[0], a, b);
    if (own < 0 || own >= 0.5 * wait) continue;  // not covered, or its own gap: a real stall
    std::vector<int> stalled;  // ranks whose own time did jump by that much then
    for (const auto& [rank, steps] : p.own)
      if (rank != f.ranks[0] && OwnTimeJump(p, rank, a, b) >= 0.5 * wait) stalled.push_back(rank);
    if (stalled.empty()) continue;  // nobody's own time shows it: keep the finding
    for (size_t j = 0; j < fs->size(); ++j) {
      Finding& g = (*fs)[j];
      if (j == i || drop[j]) continue;
      bool about = false;
      for (int r : g.ranks) about |= std::find(stalled.begin(), stalled.end(), r) != stalled.end();
      if (!about) continue;
      g.victims.push_back(f.ranks[0]);
      SortUnique(&g.victims);
    }
    if (suppressed)
      suppressed->push_back({f, "propagated stall: its own time (outside communication) rose by " +
                                    Fmt("%.0f", own / 1e3) + " ms, under half its " + Fmt("%.0f", wait / 1e3) +
                                    " ms wait, while rank " + std::to_string(stalled[0]) +
                                    "'s own time rose by that much then"});
    drop[i] = true;
    ++dropped;
  }
  Erase(drop, fs);
  return dropped;
}

int DemoteBubbles(const ComputeProfile& p, int64_t slack_us, std::vector<Finding>* fs,
                  std::vector<Suppressed>* suppressed) {
  std::vector<bool> drop(fs->size(), false);
  int dropped = 0;
  // Per bubble finding: did its ranks' own time grow by half of what its receivers idled (their
  // own gap: a real bubble)? -1: the series does not cover them.
  auto own_gap = [&](const Finding& f) {
    // The step-phase bubble is the stage's own gap by construction, measured against a baseline
    // that a bubble over half the job does not shift (this median would, halving the gap).
    if (f.detector == "steps.stage_idle") return 1;
    const double idle_us = f.Number("extra_idle_share") * p.step_us;
    std::vector<double> own;
    for (int r : f.ranks)
      if (p.own.count(r)) own.push_back(OwnTimeTypicalExcess(p, r, f.start_us, f.end_us));
    if (idle_us <= 0 || own.empty() || own.size() != f.ranks.size()) return -1;
    return Median(own) >= 0.5 * idle_us ? 1 : 0;
  };
  for (size_t i = 0; i < fs->size(); ++i) {
    const Finding& f = (*fs)[i];
    // (A step-phase bubble already checked its stage's compute and own gap.)
    if (f.kind != Kind::kPipelineBubble || f.ranks.empty() || f.detector == "steps.stage_idle") continue;
    std::vector<int> grown;
    for (int r : f.ranks)
      for (const ComputeRun& run : p.runs)
        if (run.rank == r && Coincide(run.start_us, run.end_us, f.start_us, f.end_us, slack_us)) {
          grown.push_back(r);
          break;
        }
    if (2 * grown.size() <= f.ranks.size()) {
      // Inherited lateness: the stage's own time did not grow by what its receivers idled. An
      // upstream finding explains it: another kind, or a bubble whose own gap is in the series
      // (bubbles grow downstream: the next stage waits and then delivers late itself).
      if (own_gap(f) != 0) continue;
      bool explained = false;
      for (size_t j = 0; j < fs->size(); ++j) {
        const Finding& g = (*fs)[j];
        if (j == i || drop[j] || g.kind == Kind::kStepRegression || g.kind == Kind::kStepJitter) continue;
        if (g.kind == Kind::kPipelineBubble && own_gap(g) != 1) continue;
        explained |= Coincide(g.start_us, g.end_us, f.start_us, f.end_us, slack_us);
      }
      if (explained) {
        if (suppressed)
          suppressed->push_back({f, "inherited lateness: the stage's own time did not grow by what its receivers "
                                    "idled, and another finding in the same window explains it upstream"});
        drop[i] = true;
        ++dropped;
      }
      continue;
    }
    for (size_t j = 0; j < fs->size(); ++j) {
      Finding& g = (*fs)[j];
      if (j == i || g.kind != Kind::kSlowCompute || g.detector != "steps.compute") continue;
      bool about = false;
      for (int r : g.ranks) about |= std::find(grown.begin(), grown.end(), r) != grown.end();
      if (about)
        g.AddText("also_seen_as", "pipeline_bubble (" + f.detector +
                                      "): the stage's own compute grew, so its late activations are a slow stage");
    }
    if (suppressed)
      suppressed->push_back({f, "a slow stage, not a bubble: most of its ranks' compute grew in its window "
                                "(steps.compute)"});
    drop[i] = true;
    ++dropped;
  }
  Erase(drop, fs);
  return dropped;
}

}  // namespace collscope::diagnose
