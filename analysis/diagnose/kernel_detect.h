// L3 kernel-level detector over GPU kernels: Kineto's (the `kernels` table, core/readers/kineto.h)
// and the CUPTI library's kernel summaries (analysis/diagnose/kernel_summaries.h).
//
// Per (rank, compute kernel name) the durations are compressed to a profile (KDE modes and a
// quantile sketch, analysis/diagnose/kernel_stats.h). Per kernel name the ranks that run it are
// compared with a Wasserstein-1 distance matrix: a rank is off when its distance to its nearest
// peers (the k-th nearest, k = a quarter of the others) is both large in absolute terms and many
// times the typical rank's, and it is slower, or when it has a slow mode that no other group of
// ranks shares. A rank whose shifted kernels hold a large share of its compute time is a
// `slow_compute` finding; its process-group peers are the victims (they wait for it in every
// collective). The per-(DP, TP/PP) grid of per-step compute maxima confirms it (a hot cell among
// its data-parallel replicas). NCCL kernels are left out: their duration includes waiting for the
// slowest member (the synchronisation trap), so a late rank shows the *shortest* ones.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "analysis/diagnose/kernel_stats.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::diagnose {

struct KernelSeries {
  int rank = -1;
  int name = -1;                // index into KernelData::names
  std::vector<double> dur_us;   // in start order
  std::vector<double> start_us;
  std::vector<int64_t> step;    // -1 outside every step
  // The exact time in this kernel when the durations are a sample of it (kernel summaries);
  // -1: the durations are every execution, and their sum is the time.
  double total_us = -1;
};

struct KernelData {
  std::vector<int> ranks;                    // sorted
  std::vector<std::string> names;            // compute kernel names
  std::vector<KernelSeries> series;          // one per (rank, name) present
  std::map<int, std::string> hosts;          // rank -> hostname (when known)
  std::vector<std::vector<int>> dp_groups;   // data-parallel groups (global ranks in DP order)
  std::map<int, std::vector<int>> peers;     // rank -> ranks it shares a process group with
  std::vector<std::pair<int, double>> step_compute;  // (rank, summed compute time of one step)
  // NCCL kernels (for the synchronisation-trap evidence): key = same process group (name and
  // ranks), collective, kernel and size.
  struct Nccl {
    int rank = -1, key = -1;
    int64_t step = -1;
    double dur_us = 0;
  };
  std::vector<Nccl> nccl;
};

// Kineto kernels of run `run` (empty: the first run that has kernels). Empty data when the store
// has no Kineto tables.
Result<KernelData> LoadKernelData(Store& store, const std::string& run);

struct KernelOptions {
  KdeOptions kde;
  size_t min_samples = 4;        // per (rank, kernel) profile
  size_t min_ranks = 3;          // ranks running a kernel for a comparison
  double rel_w1 = 0.04;          // nearest-peer W1 / typical duration to call a rank off
  double outlier_factor = 4;     // ... and this many times the typical rank's
  double mode_tolerance = 0.04;  // modes within 4% match
  double min_mode_weight = 0.1;  // a shifted mode must hold this share of the rank's samples
  double min_time_share = 0.2;   // share of the rank's compute time in shifted kernels
  double grid_ratio = 1.05;      // hot cell: this much above its DP replicas
};

// One kernel name on which one rank is off.
struct KernelShift {
  int rank = -1, name = -1;
  double w1_rel = 0;      // distance to the k-th nearest peer, relative
  double typical = 0;     // the typical rank's such distance
  double slowdown = 1;    // (shifted mode or median) / peers' median
  double time_us = 0;     // the rank's time in this kernel
  std::vector<Mode> modes, peer_modes;  // the rank's modes and the common modes of the others
  double start_us = 0, end_us = 0;      // samples in the shifted mode(s)
  int64_t first_step = -1, last_step = -1;
  double lo = 0, hi = 0;                // duration range of the shifted samples
  bool host_level = false;              // found against other hosts only (its host mates share it)
};

struct KernelAnalysis {
  // Per compared kernel name: the ranks and their relative W1 matrix.
  struct Matrix {
    int name = -1;
    std::vector<int> ranks;
    std::vector<std::vector<double>> w1;
  };
  std::vector<Matrix> matrices;
  std::vector<KernelShift> shifts;
  Grid grid;                  // per-step compute maxima per (DP, TP/PP)
  std::vector<HotCell> hot;
};

std::vector<Finding> DetectKernelAnomalies(const KernelData& d, const KernelOptions& o,
                                           KernelAnalysis* analysis = nullptr);

// L3 over the store's Kineto kernels and, when `with_steps`, L1/L2 over its Kineto steps.
// `known_hosts`: the hosts of ranks whose traces name none (a trace's host comes from its file
// name), from another source of the same job (kernel summaries), so that a straggler both
// sources see names one host and consolidates into one finding.
Result<std::vector<Finding>> DiagnoseKineto(Store& store, const std::string& run, bool with_steps,
                                            const KernelOptions& o = {},
                                            const std::map<int, std::string>& known_hosts = {});
// The same for Kineto traces under `paths` (ingested into a temporary store). No traces: none.
Result<std::vector<Finding>> DiagnoseKinetoPaths(const std::vector<std::string>& paths,
                                                 bool with_steps, const KernelOptions& o = {},
                                                 const std::map<int, std::string>& known_hosts = {});

}  // namespace collscope::diagnose
