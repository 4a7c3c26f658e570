// The job's live metrics over one window of its records, from the store: what the agent serves
// on /metrics and remote-writes each tick (docs/agent.md lists every family and the series
// budget). Every value is relative to peers or to the job itself, so a straggler or a slow host
// stands out in a dashboard instead of being averaged away:
// - per rank: arrival delay (how long after the first member it joined its collectives);
// - per host: transfer bus bandwidth of its best cross-host communicator relative to the job
//   (analysis/views.h HostTransferTableSql), processes
//   reporting, data lag behind the newest host, records the writers dropped;
// - per kernel key (the busiest, bounded): bus bandwidth quantiles.
// Cost is bounded by the window, not the job's length: every query reads records by dump time,
// which the store keeps in append order (zone maps skip the rest). Needs the analysis views
// (InstallAnalysisViews).
#pragma once

#include <string>
#include <vector>

#include "agent/metrics.h"
#include "analysis/diagnose/comm_data.h"
#include "core/store.h"

namespace collscope::agent {

struct JobMetricsOptions {
  uint64_t min_bytes =
      1 << 20;  // bus bandwidth only from messages this large (smaller ones are latency-bound)
  int max_kernel_keys = 10;     // kernel keys with quantile series, busiest first
  int max_ranks_per_host = 16;  // per-rank series kept per host (the rest are summarised by host)
  // The parallel layout (diagnose's InputSummary tp, pp; 0: unknown). When known, per-rank series
  // also carry their grid coordinates (tp_rank, dp_rank, pp_stage) for an ARGUS-style grid, at no
  // extra cardinality: global rank = pp_stage * (world / pp) + dp_rank * tp + tp_rank.
  int tp = 0, pp = 0;
};

Result<std::vector<MetricFamily>> JobMetrics(Store& store, const std::string& run,
                                             const diagnose::TimeWindow& window,
                                             const JobMetricsOptions& options = {});

}  // namespace collscope::agent
