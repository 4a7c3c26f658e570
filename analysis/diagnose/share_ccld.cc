#include "analysis/diagnose/share_ccld.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "analysis/diagnose/comm_data.h"

namespace collscope::diagnose {

double ShareP(double d_comm, double d_compute) {
  d_comm = std::max(0.0, d_comm);
  d_compute = std::max(0.0, d_compute);
  if (d_comm + d_compute <= 0) return -1;
  return d_comm / (d_comm + d_compute);
}

const char* ShareClass(double p) {
  if (p < 0) return "none";
  if (p <= kShareAlpha) return "compute";
  if (p >= kShareBeta) return "communication";
  return "mixed";
}

bool IsCommPhase(const std::string& p) {
  return std::find(std::begin(readers::kCommunicationPhases), std::end(readers::kCommunicationPhases), p) !=
         std::end(readers::kCommunicationPhases);
}

double OwnTimeUs(const readers::StepRow& row) {
  double comm = 0;
  for (const auto& [phase, us] : row.phases)
    if (IsCommPhase(phase)) comm += us;
  return row.dur_us - comm;
}

ShareVerdict ClassifySlowdown(const readers::StepSeries& s, const std::vector<int64_t>& after,
                              const std::vector<int64_t>& before) {
  ShareVerdict v;
  const std::set<int64_t> A(after.begin(), after.end()), B(before.begin(), before.end());
  // rank -> (comm, compute) per step, split into after/before.
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> ca, cb, pa, pb;
  for (const auto& r : s.rows) {
    const bool in_a = A.count(r.step), in_b = B.count(r.step);
    if (!in_a && !in_b) continue;
    double comm = 0, comp = 0;
    for (const auto& [ph, us] : r.phases) {
      if (ph == "step") continue;
      (IsCommPhase(ph) ? comm : comp) += us;
    }
    auto& dst = in_a ? ca[r.rank] : cb[r.rank];
    dst.first.push_back(comm);
    dst.second.push_back(comp);
  }
  struct R { int rank; double dcomm, dcomp; };
  std::vector<R> rs;
  double most = 0, jc = 0, jp = 0;
  for (auto& [rank, a] : ca) {
    auto it = cb.find(rank);
    if (it == cb.end() || a.first.empty() || it->second.first.empty()) continue;
    const double dcomm = Median(a.first) - Median(it->second.first);
    const double dcomp = Median(a.second) - Median(it->second.second);
    rs.push_back({rank, dcomm, dcomp});
    most = std::max(most, dcomm + dcomp);
    jc += std::max(0.0, dcomm);
    jp += std::max(0.0, dcomp);
  }
  if (rs.empty() || most <= 0) return v;
  v.job_p = ShareP(jc, jp);
  double lowest = 2;
  for (const R& r : rs) {
    if (r.dcomm + r.dcomp < 0.5 * most) continue;
    const double p = ShareP(r.dcomm, r.dcomp);
    if (p >= 0 && p < lowest) { lowest = p; v.rank = r.rank; v.rank_p = p; }
  }
  if (v.rank_p >= 0 && v.rank_p <= kShareAlpha) v.cls = "compute";
  else if (v.rank_p >= kShareBeta) { v.cls = "communication"; v.rank = -1; }
  else { v.cls = "mixed"; }
  return v;
}

}  // namespace collscope::diagnose
