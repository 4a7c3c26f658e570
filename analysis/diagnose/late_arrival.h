// slow_compute from who waits for whom: a rank that arrives last at its collectives far more
// often than chance, and that waited on nobody meanwhile (late_arrival.cc, docs/diagnosis.md).
#pragma once

#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/finding.h"

namespace collscope::diagnose {

struct LateOptions {
  double window_us = 2e5;       // WindowUs of the data
  int min_instances = 8;        // material complete instances over the run of windows (sampled: none)
  // A wait below this (or 3x the kernel key's median arrival spread) is noise.
  double min_wait_us = 20;
  double min_z = 5;             // last this many standard deviations above chance (1/n)...
  double alpha = 0.01;          // ...and as unlikely by chance, over every communicator membership.
  // A root cause must cost its peers at least this share of their time in that communicator
  // (weaker lateness still explains and leads others' lateness). Healthy GPUs of one model differ
  // in speed by a few tenths of a percent to a percent (clocks, thermals), fixed for the job, so
  // the slowest GPU of a group is last as consistently as a fault, and costs its peers about as
  // much: jobs with GPU speeds spread 0.4-1% (an independent generator's, and the simulator's with
  // gpu_speed_sigma) drew findings costing 0.2-0.9%, most under half a percent. The floor is no
  // higher, as a slow rank's cost spreads over every communicator and pipeline transfer it holds
  // up, so one communicator's share understates it (a host 1.8x slower in compute cost its job
  // 4.6% of the step, and its data-parallel peers 0.6% of theirs).
  double min_wait_share = 0.005;
  // Propagated, not a root cause: what it waited on others explains this share of what it made
  // its peers wait.
  double explained_share = 0.5;
  std::vector<Suppressed>* suppressed = nullptr;  // explained late ranks go here, with why
};

// A rank arriving last in one communicator over a run of windows [w0, w1].
struct LateEvent {
  int proc = -1, comm = -1;
  int w0 = 0, w1 = 0;
  int instances = 0, last = 0;
  int sampled = 0;        // of the instances, sampled records (each against its neighbours')
  double wait_us = 0;     // its peers' wait summed over the instances it arrived last at
  double z = 0;           // binomial z-score of `last` against chance
  double log_p = 0;       // log of the exact binomial tail P(last or more | chance)
  double wait_share = 0;  // wait_us over the run's duration
  // A member of a host found late as a whole (its members share the late arrivals): the index of
  // that host's test, shared by its members' events; -1 for a rank's own.
  int host_test = -1;
  // That host test's members all arrived after every other member (not just its last one).
  bool host_as_whole = false;
  // Per window of the run (w0..w1): its late arrivals and its peers' wait for it, so that what
  // explains its lateness is weighed where the lateness happened.
  std::vector<int> last_by_w;
  std::vector<double> wait_by_w;
  // ... and its instances and their summed chance of showing it last (a rank's own event only:
  // a host test's member shares the host's), so that a part of the run can be tested as the
  // run was: against log_bar, charged log_runs for the choice of run.
  std::vector<int> instances_by_w;
  std::vector<double> chance_by_w;
  double log_bar = 0, log_runs = 0;
  // Its late arrivals and its peers' wait for it in windows [a, b] of its run.
  int LastIn(int a, int b) const;
  double WaitIn(int a, int b) const;
};

std::vector<LateEvent> FindLateEvents(const CommData& d, const LateOptions& o);
// Per process and window of `window_us`: how much longer its point-to-point sends and receives
// took than the same transfers of its sibling pipelines (same communicator name and size, same
// positions and direction, same size, an all-to-all's of any size; their lower quartile), i.e.
// what it waited on its pipeline (or expert) peers beyond the usual.
// `sides`, when given, gets the same per (process, its communicator, whether the peer's position
// in it is below its own): which side of its pipeline it waited on.
// `by_comm`, when given, gets the same per (process << 32 | its communicator).
using PipelineSideWaits = std::map<std::tuple<int, int, bool>, std::vector<double>>;
using CommWaits = std::unordered_map<uint64_t, std::vector<double>>;
std::vector<std::vector<double>> SiblingP2pWaits(const CommData& d, double window_us,
                                                 PipelineSideWaits* sides = nullptr,
                                                 CommWaits* by_comm = nullptr);
std::vector<Finding> DetectLateArrivals(const CommData& d, const LateOptions& o);

}  // namespace collscope::diagnose
