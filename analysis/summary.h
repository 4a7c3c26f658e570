// Summary of a store: its runs and, per run, the hot kernels (the few kernel keys that carry the
// time and the bytes) and what the records cover (core/coverage.h: what Inspector dropped, what no
// member recorded, communicators missing members, ranks that recorded less than their peers, and
// windows without dumps), and its NCCL Inspector metric files (Prometheus, OTLP). Backed by the
// run_overview, hot_kernels, prom_overview and prom_exec_by_kind views.
#pragma once

#include <string>
#include <vector>

#include "core/coverage.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope {

struct HotKernel {
  int rank = 0;
  std::string kernel_key, coll_type, op;
  int n_ranks = 0, nnodes = 0;
  uint64_t msg_size_bytes = 0, records = 0, bytes = 0, time_us = 0;
  double bytes_share = 0, time_share = 0, cumulative_time_share = 0;
};

// One communicator kind of the run's NCCL Inspector metric files (prom_exec_by_kind).
struct PromKind {
  std::string comm, op, message_size;  // comm: 2.30's comm_name, 2.29's communicator id
  int n_nodes = 0, nranks = 0;
  uint64_t gpus = 0, samples = 0;
  double median_us = 0, max_us = 0;  // over the GPUs' own means
  std::string max_node, max_gpu;     // the GPU with the largest mean
};

// What the run's Inspector metric files hold (prom_overview); files == 0 when it has none.
struct PromSummary {
  uint64_t files = 0, samples = 0, lines_unused = 0, nodes = 0, gpus = 0;
  std::string layouts;              // "2.29", "2.30", ...
  uint64_t gpus_counting = 0;       // GPUs with Inspector's op counters (PROM_DUMP_STATS)
  uint64_t ops = 0, dropped = 0;    // their running totals, summed
  int64_t t0_us = 0, t1_us = 0;     // sample timestamps, 0 when the files carry none
  std::vector<PromKind> kinds;      // at most `top`, largest slowest-to-median first
  uint64_t kinds_total = 0;
};

struct RunSummary {
  int run_id = 0;
  std::string name;
  uint64_t records = 0, hosts = 0, processes = 0, communicators = 0, files = 0,
           rejected_lines = 0;
  std::string first_dump, last_dump;
  std::vector<HotKernel> hot_kernels;  // at most `top` of them, hottest first
  RunCoverage coverage;                // its lists hold at most `top` entries each
  PromSummary prom;
};

// Every run (or only `run` when not empty), with up to `top` hot kernels each.
Result<std::vector<RunSummary>> Summarize(Store& store, const std::string& run, int top);

}  // namespace collscope
