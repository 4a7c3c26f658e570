// L2 pipeline bubble from per-rank step phases (detector `steps.stage_idle`).
//
// Why beside the record-based detector (bubble_detect.cc): that one needs the receivers' extra
// idle share in 2+ Inspector dump windows. A bubble shorter than two windows (the 512-GPU job of
// the large suite: about 1.5 one-second windows) leaves it nothing, while every step of the
// bubble shows in the ranks' own step phases.
//
// Per rank and step, idle = step duration - (forward + backward + optimizer + every
// communication phase): time the rank neither computed nor spent in a collective or a
// Send/Recv. It is derived from the named phases, not read from a "host_stall" phase (real
// framework timers have none): any unaccounted gap counts. Its excess over the rank's usual
// idle (its median over the job's faster quarter of steps) is the rank's own gap. A pipeline bubble is a gap of a whole stage (the ranks of
// one pp index) for a run of steps, while the stage's compute stays as usual (otherwise it is a
// slow stage) and the next stage waits for it in its pipeline receives (pp_p2p). One rank's gap
// (a host stall) is not a stage's; a gap of a step or two is noise.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/readers/steps.h"

namespace collscope::diagnose {

struct StageIdleOptions {
  double min_share = 0.05;     // extra idle per step, as a share of the usual step (the
                               // record-based detector's bubble_idle_share)
  double noise_sigmas = 6;     // ... and this far above the step-to-step noise of idle
  double stage_share = 0.75;   // ranks of the stage that idle in a step (its bubble_links)
  int min_steps = 3;           // idle steps in a run (a step or two is jitter)
  int max_gap_steps = 1;       // ordinary steps tolerated inside a run
  double max_compute_growth = 0.10;  // the stage's compute growth that makes it a slow stage
                                     // instead (ComputeOptions::min_growth)
  double min_wait_ratio = 0.5;       // the next stage's extra pp_p2p wait / the stage's extra idle
};

// pipeline_bubble findings from a step series. `stage_of`: global rank -> pipeline stage (from
// the records' pipeline communicators; empty: no stages known, no finding). `host_of`: global
// rank -> host name (may be empty).
std::vector<Finding> DetectStageIdle(const readers::StepSeries& s, const std::map<int, int>& stage_of,
                                     const std::map<int, std::string>& host_of, const StageIdleOptions& o);

}  // namespace collscope::diagnose
