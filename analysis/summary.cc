#include "analysis/summary.h"

#include <algorithm>

namespace collscope {

Result<std::vector<RunSummary>> Summarize(Store& store, const std::string& run, int top) {
  std::string where = run.empty() ? "" : " WHERE run = " + SqlString(run);
  Result<QueryResult> runs = store.Query(
      "SELECT run_id, run, records, hosts, processes, communicators, files, rejected_lines, "
      "first_dump::VARCHAR, last_dump::VARCHAR FROM run_overview" + where + " ORDER BY run_id");
  if (!runs.ok()) return runs.status();
  if (!run.empty() && runs->rows.empty())
    return Status::Error(store.path() + ": no run named \"" + run + "\"");
  std::vector<RunSummary> out;
  for (const auto& row : runs->rows) {
    RunSummary s;
    s.run_id = std::stoi(*row[0]);
    s.name = *row[1];
    s.records = std::stoull(*row[2]);
    s.hosts = std::stoull(*row[3]);
    s.processes = std::stoull(*row[4]);
    s.communicators = std::stoull(*row[5]);
    s.files = std::stoull(*row[6]);
    s.rejected_lines = std::stoull(*row[7]);
    s.first_dump = row[8].value_or("");
    s.last_dump = row[9].value_or("");
    Result<QueryResult> hot = store.Query(
        "SELECT rank, kernel_key, coll_type, op, n_ranks, nnodes, msg_size_bytes, records, bytes, "
        "time_us, bytes_share, time_share, cumulative_time_share FROM hot_kernels WHERE run_id = " +
        std::to_string(s.run_id) + " ORDER BY rank LIMIT " + std::to_string(top));
    if (!hot.ok()) return hot.status();
    for (const auto& h : hot->rows) {
      HotKernel k;
      k.rank = std::stoi(*h[0]);
      k.kernel_key = *h[1];
      k.coll_type = *h[2];
      k.op = *h[3];
      k.n_ranks = std::stoi(*h[4]);
      k.nnodes = std::stoi(*h[5]);
      k.msg_size_bytes = std::stoull(*h[6]);
      k.records = std::stoull(*h[7]);
      k.bytes = std::stoull(*h[8]);
      k.time_us = std::stoull(*h[9]);
      k.bytes_share = std::stod(*h[10]);
      k.time_share = std::stod(*h[11]);
      k.cumulative_time_share = std::stod(*h[12]);
      s.hot_kernels.push_back(std::move(k));
    }
    auto coverage = SummarizeCoverage(store, s.run_id, static_cast<size_t>(std::max(top, 0)));
    if (!coverage.ok()) return coverage.status();
    s.coverage = std::move(*coverage);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace collscope
