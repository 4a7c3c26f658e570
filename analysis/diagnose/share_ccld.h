// CCL-D's compute-vs-communication share P: of the time a rank's step grew by, the share spent in
// communication phases. P <= alpha (0.4): the rank computes more slowly (a compute straggler, or
// host-side work); P >= beta (0.6): it spends the extra time communicating (a slow link, or
// waiting for a straggler elsewhere); in between: both. Over a job, one rank with P <= alpha
// while its peers are >= beta is a compute straggler (the synchronisation trap: its peers'
// extra time is waiting); every rank >= beta is a communication slowdown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/readers/steps.h"

namespace collscope::diagnose {

inline constexpr double kShareAlpha = 0.4;
inline constexpr double kShareBeta = 0.6;

// P = d_comm / (d_comm + d_compute) over the positive growths; -1 when nothing grew.
double ShareP(double d_comm, double d_compute);
// "compute", "communication" or "mixed" (P < 0: "none").
const char* ShareClass(double p);
// Whether a step/phase series phase is communication (tp_comm, cp_comm, ep_comm, pp_p2p, dp_comm,
// world_comm) rather than compute (forward, backward, optimizer, host_stall).
bool IsCommPhase(const std::string& phase);
// A rank's own time in a step: the step less its communication phases (compute, optimizer,
// host-side gaps; never waiting on others). Phases that overlap may make it negative.
double OwnTimeUs(const readers::StepRow& row);

struct ShareVerdict {
  std::string cls = "none";  // compute | communication | mixed | none
  double job_p = -1;         // P of the job (all ranks' growth together)
  int rank = -1;             // compute: the rank with the lowest P among those that grew most
  double rank_p = -1;
};
// Per rank, median phase times over steps [a, b) against the steps in `base` (indexes into the
// sorted step numbers of `s`); a rank counts when its step grew by at least half the largest
// growth.
ShareVerdict ClassifySlowdown(const readers::StepSeries& s, const std::vector<int64_t>& steps_after,
                              const std::vector<int64_t>& steps_before);

}  // namespace collscope::diagnose
