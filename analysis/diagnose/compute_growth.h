// L2 compute-phase growth: which ranks' own compute (forward + backward, the per-micro-batch
// kernels; never a wait) grew against their own history and against the rest of the job in the
// same steps. Input: per-rank step phases (step/phase series in the annotation API's format, through the store).
//
// Why this is needed beside the communication detectors: a rank that is late by X per
// micro-batch looks the same in NCCL records whether X is compute or a host-side gap (a slow
// pipeline stage on its own host vs a pipeline bubble, docs/diagnosis.md). Compute phases tell
// them apart: a bubble, a stall, a slow link or a hang adds waiting and host_stall time and
// leaves a rank's forward/backward durations as they were; a slower GPU or host stretches them.
//
// Per rank r and step s: c = forward + backward; x = c / (r's usual c: a low quantile of its
// steps, robust while a fault lasts less than most of the job); excess e = x / (median x of all
// ranks in step s) - 1, so a change the whole job sees (another sequence length, a job-wide
// clock change) cancels, and a slow pipeline stage on one host (all its peers in the stage slow
// together) still stands out against the other stages. A step is slow for r when e is at least
// min_growth and noise_sigmas robust sigmas of the job's e; a run of such steps (short gaps
// allowed) of at least min_steps is a slowdown.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/readers/steps.h"

namespace collscope::diagnose {

struct ComputeOptions {
  double min_growth = 0.10;       // a tenth more compute per step than the rank's usual
  double noise_sigmas = 6;        // ... and this far above the job's step-to-step noise
  double baseline_quantile = 0.25;
  int min_steps = 3;              // slow steps in a run (one slow step is jitter, not a straggler)
  int max_gap_steps = 1;          // ordinary steps tolerated inside a run
  int min_ranks = 3;              // ranks with data in a step for the job median to mean anything
};

// One rank's run of slow steps.
struct ComputeRun {
  int rank = -1;
  int64_t first_step = 0, last_step = 0;  // slow steps at both ends
  int slow_steps = 0;
  int64_t start_us = 0, end_us = 0;       // first slow step's start .. last slow step's end
  double growth = 0;                      // median excess e over the slow steps
  double forward_growth = 0, backward_growth = 0;  // median phase / usual phase - 1
  double usual_us = 0, compute_us = 0;    // usual c and median c over the slow steps
};

// A rank's own time in one step: the step minus its communication phases (compute, optimizer,
// host-side gaps; never waiting for others), above its usual (median) own time.
struct OwnStep {
  int64_t step = 0, start_us = 0, end_us = 0;
  double excess_us = 0;
};

// Per rank, in step order, its own time in each complete step above its usual (median) own time.
std::map<int, std::vector<OwnStep>> OwnTimeExcess(const readers::StepSeries& s);

struct ComputeProfile {
  std::vector<ComputeRun> runs;
  std::map<int, std::vector<OwnStep>> own;  // per rank, in step order
  std::map<int, double> usual_compute_us;   // per rank, its usual forward + backward per step
  std::map<int, std::map<int64_t, double>> compute_us;  // per rank and step, forward + backward
  // Ranks with compute phases and the wall-clock span their steps cover.
  std::map<int, std::pair<int64_t, int64_t>> coverage;
  double sigma = 0;          // robust sigma of the excess over all (rank, step)
  double threshold = 0;      // the excess that made a step slow
  double step_us = 0;        // median step duration (for time slack)
  bool wall_timed = false;   // some compute phase had only host wall time (no GPU time)
};

ComputeProfile AnalyzeComputeGrowth(const readers::StepSeries& s, const ComputeOptions& o);

// slow_compute findings (detector `steps.compute`): the slow runs of one host whose windows
// overlap are one finding (every rank of the host: a host slowdown); a run alone on its host is
// a rank finding. `host_of` maps global rank -> host name (empty: no host attribution).
std::vector<Finding> DetectComputeGrowth(const ComputeProfile& p, const std::map<int, std::string>& host_of);

// Groups of global ranks that do the same work each step (SameWorkGroups: a data-, tensor- or
// expert-parallel group; never ranks of different pipeline stages, whose work differs).
using SameWork = std::vector<std::vector<int>>;

// How much more compute (forward + backward) `rank` usually does per step than the median of its
// peers in a group doing the same work, in the group where that is most (a slow host filling its
// tensor-parallel group shows against its data-parallel peers); NaN when no group of the rank has
// two other members with compute data. `group`, when given, receives that group's index. A GPU
// slow for the whole job shows here, not against its own history.
double ComputeAbovePeers(const ComputeProfile& p, int rank, const SameWork& groups, size_t* group = nullptr);

// slow_compute findings (detector `steps.compute`) against peers, for what own history cannot
// show: a GPU or host slow from the first step. A rank without a slow run whose usual compute is
// above its peers' (ComputeAbovePeers at the growth threshold) and whose compute exceeds the
// median of those peers' by half that threshold in at least 80% of the steps they have (at least
// 2 * min_steps of them) computes slowly throughout. Such ranks of one host are one finding,
// windowed over the steps the series covers.
std::vector<Finding> DetectComputeAbovePeers(const ComputeProfile& p, const SameWork& groups,
                                             const std::map<int, std::string>& host_of,
                                             const ComputeOptions& o = ComputeOptions{});

// Late-arrival findings cross-checked against compute: a slow_compute finding of another
// detector whose ranks' compute is covered in its window, did not grow there and is not above
// their peers' (ComputeAbovePeers under the growth threshold), while something else
// explains the lateness (a compute run of another rank, or a finding of another kind in the same
// window), is propagated lateness, not a root cause: it is dropped, with its reason in
// `suppressed`, and its ranks become victims of the explaining findings. Ranks of a finding that
// did not grow while others of it did move to its victims. `slack_us`: how far apart windows may
// be and still coincide. Returns the number of findings dropped.
int DemoteFlatLateArrivals(const ComputeProfile& p, int64_t slack_us, std::vector<Finding>* findings,
                           const SameWork& groups = {},
                           std::vector<Suppressed>* suppressed = nullptr);

// The largest own-time excess of `rank` in the steps that overlap [a_us, b_us]; -1 when the
// series has none there.
double OwnTimeJump(const ComputeProfile& p, int rank, int64_t a_us, int64_t b_us);
// The median own-time excess of `rank` over those steps; 0 when the series has none there.
double OwnTimeTypicalExcess(const ComputeProfile& p, int rank, int64_t a_us, int64_t b_us);

// host_stall findings against own time: a stalled rank's own time jumps by about the stall (the
// gap is its own), its peers' extra time is waiting (communication phases). A host_stall finding
// whose rank's own time rose by less than half its `max_wait_us`, while another rank's rose by
// that much in the same window, is a peer that waited for the stall: it is dropped and named a
// victim of the findings about that rank (its reason in `suppressed`). Returns the number dropped.
int DemotePropagatedStalls(const ComputeProfile& p, int64_t slack_us, std::vector<Finding>* findings,
                           std::vector<Suppressed>* suppressed = nullptr);

// pipeline_bubble findings against the stage's own phases. A bubble is a host-side gap before
// the stage's sends: the stage's own time grows by about the delay and its compute stays as it
// was. A bubble finding most of whose ranks computed longer in its window (compute runs) is a
// slow stage: dropped, and the steps.compute findings of those ranks say so (`also_seen_as`). One
// whose ranks' own time grew by less than half of what its receivers idled (`extra_idle_share`
// of a step) inherited the lateness from upstream (a slow link, a straggler in an earlier
// stage): dropped when a finding of another kind in the same window explains it. Bubbles of
// `steps.stage_idle` are left alone (they were found from the stage's own gap and flat compute)
// and count as a real bubble upstream. Returns the number dropped, each with its reason in
// `suppressed`.
int DemoteBubbles(const ComputeProfile& p, int64_t slack_us, std::vector<Finding>* findings,
                  std::vector<Suppressed>* suppressed = nullptr);

}  // namespace collscope::diagnose
