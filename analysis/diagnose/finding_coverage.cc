#include "analysis/diagnose/finding_coverage.h"

#include <cmath>
#include <map>

#include "core/coverage.h"

namespace collscope::diagnose {
namespace {

// Below this against its peers a rank's coverage is said and weighed; above, counting noise (a
// member that joined one collective later than the others) would only clutter the finding.
constexpr double kWeighBelow = 0.98;

struct RankShare {
  uint64_t seen = 0, known = 0;
  double expected = 0;  // the instances it would hold at its peers' share
};

}  // namespace

Status WeighByCoverage(Store& store, int32_t run_id, const CommData& data, std::vector<Finding>* findings) {
  std::map<int, int64_t> process_of;
  for (const Proc& p : data.procs)
    if (p.global_rank >= 0 && p.process_id >= 0) process_of[p.global_rank] = p.process_id;
  for (Finding& f : *findings) {
    if (f.ranks.empty() || f.detector.rfind("comm.", 0) != 0) continue;
    CoverageQuery q;
    q.run_id = run_id;
    if (f.end_us > f.start_us) {
      q.since_us = f.start_us;
      q.until_us = f.end_us;
    }
    q.comms = f.comms;
    auto members = MemberCoverageOf(store, q);
    if (!members.ok()) return members.status();
    std::map<int64_t, RankShare> by_process;
    for (const MemberCoverage& m : *members) {
      RankShare& r = by_process[m.process_id];
      r.seen += m.seen;
      r.known += m.known;
      r.expected += m.peer_share * static_cast<double>(m.known);
    }
    int least = -1, absent = -1;
    double least_share = 2, least_relative = 2;
    RankShare least_counts;
    for (int rank : f.ranks) {
      auto p = process_of.find(rank);
      auto it = p == process_of.end() ? by_process.end() : by_process.find(p->second);
      if (it == by_process.end() || it->second.known == 0) {
        if (absent < 0) absent = rank;
        continue;
      }
      const RankShare& r = it->second;
      const double share = static_cast<double>(r.seen) / static_cast<double>(r.known);
      const double relative = r.expected > 0 ? std::min(1.0, static_cast<double>(r.seen) / r.expected) : 1.0;
      least_share = std::min(least_share, share);
      if (relative < least_relative) {
        least_relative = relative;
        least = rank;
        least_counts = r;
      }
    }
    if (absent >= 0)
      f.AddText("coverage_note", "rank " + std::to_string(absent) +
                                     " left no record in these communicators and window; the finding rests on "
                                     "its peers' records");
    if (least < 0) continue;
    f.Add("coverage", least_share);
    f.Add("coverage_vs_peers", least_relative);
    if (least_relative >= kWeighBelow) continue;
    const double peers = least_counts.known ? least_counts.expected / static_cast<double>(least_counts.known) : 1;
    f.AddText("coverage_note",
              "rank " + std::to_string(least) + " recorded " + std::to_string(least_counts.seen) + " of " +
                  std::to_string(least_counts.known) +
                  " collective instances its communicators' members recorded in this window (" +
                  Fmt("%.0f", 100.0 * static_cast<double>(least_counts.seen) / static_cast<double>(least_counts.known)) +
                  "%; its peers " + Fmt("%.0f", 100 * peers) + "%): confidence weighed by the square root of " +
                  Fmt("%.2f", least_relative));
    f.confidence *= std::sqrt(least_relative);
  }
  return Status::Ok();
}

}  // namespace collscope::diagnose
