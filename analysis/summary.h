// Summary of a store: its runs and, per run, the hot kernels (the few kernel keys that carry the
// time and the bytes) and what the records cover (core/coverage.h: what Inspector dropped, what no
// member recorded, communicators missing members, ranks that recorded less than their peers, and
// windows without dumps). Backed by the run_overview and hot_kernels views.
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

struct RunSummary {
  int run_id = 0;
  std::string name;
  uint64_t records = 0, hosts = 0, processes = 0, communicators = 0, files = 0,
           rejected_lines = 0;
  std::string first_dump, last_dump;
  std::vector<HotKernel> hot_kernels;  // at most `top` of them, hottest first
  RunCoverage coverage;                // its lists hold at most `top` entries each
};

// Every run (or only `run` when not empty), with up to `top` hot kernels each.
Result<std::vector<RunSummary>> Summarize(Store& store, const std::string& run, int top);

}  // namespace collscope
