#include "analysis/summary.h"

#include <algorithm>

namespace collscope {
namespace {

Result<PromSummary> SummarizeProm(Store& store, int run_id, int top) {
  PromSummary p;
  const std::string run = std::to_string(run_id);
  auto o = store.Query("SELECT files, samples, lines_unused, nodes, gpus, layouts, gpus_counting, ops, dropped, "
                       "coalesce(t0_us, 0), coalesce(t1_us, 0) FROM prom_overview WHERE run_id = " + run);
  if (!o.ok()) return o.status();
  if (o->rows.empty()) return p;
  const auto& r = o->rows[0];
  p.files = std::stoull(*r[0]);
  p.samples = std::stoull(*r[1]);
  p.lines_unused = std::stoull(*r[2]);
  p.nodes = std::stoull(*r[3]);
  p.gpus = std::stoull(*r[4]);
  p.layouts = r[5].value_or("");
  p.gpus_counting = std::stoull(*r[6]);
  p.ops = std::stoull(*r[7]);
  p.dropped = std::stoull(*r[8]);
  p.t0_us = std::stoll(*r[9]);
  p.t1_us = std::stoll(*r[10]);
  auto k = store.Query("SELECT comm, coalesce(op, ''), coalesce(message_size, ''), coalesce(n_nodes, 0), "
                       "coalesce(nranks, 0), gpus, samples, median_us, max_us, max_node, coalesce(max_gpu, ''), "
                       "count(*) OVER () FROM prom_exec_by_kind WHERE run_id = " + run +
                       " ORDER BY max_us / nullif(median_us, 0) DESC NULLS LAST, max_us DESC, comm, op LIMIT " +
                       std::to_string(std::max(top, 0)));
  if (!k.ok()) return k.status();
  for (const auto& row : k->rows) {
    PromKind x;
    x.comm = *row[0];
    x.op = *row[1];
    x.message_size = *row[2];
    x.n_nodes = std::stoi(*row[3]);
    x.nranks = std::stoi(*row[4]);
    x.gpus = std::stoull(*row[5]);
    x.samples = std::stoull(*row[6]);
    x.median_us = std::stod(*row[7]);
    x.max_us = std::stod(*row[8]);
    x.max_node = row[9].value_or("");
    x.max_gpu = *row[10];
    p.kinds_total = std::stoull(*row[11]);
    p.kinds.push_back(std::move(x));
  }
  return p;
}

}  // namespace

Result<std::vector<RunSummary>> Summarize(Store& store, const std::string& run, int top) {
  std::string where = run.empty() ? "" : " WHERE run = " + SqlString(run);
  Result<QueryResult> runs = store.Query(
      "SELECT run_id, run, records, hosts, processes, communicators, files, rejected_lines, "
      "first_dump::VARCHAR, last_dump::VARCHAR FROM run_overview" + where + " ORDER BY run_id");
  if (!runs.ok()) return runs.status();
  if (!run.empty() && runs->rows.empty())
    return Status::NotFound(store.path() + ": no run named \"" + run + "\"");
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
    auto prom = SummarizeProm(store, s.run_id, top);
    if (!prom.ok()) return prom.status();
    s.prom = std::move(*prom);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace collscope
