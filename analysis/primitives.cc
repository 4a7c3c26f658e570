#include "analysis/primitives.h"

#include <cstdio>

namespace collscope {
namespace {

enum class Filter { kRunId, kNone };

struct Spec {
  PrimitiveInfo info;
  Filter filter;
  // Returns the FROM source for the options (a view name or a macro call).
  std::string (*source)(const AnalysisOptions& o);
  std::string order;  // ORDER BY clause, may be empty
};

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

const char* kMetaColumns[] = {"hostname", "pid", "git_rev", "rec_mechanism", "format_version",
                              "comm", "comm_name", "n_ranks", "nnodes", "coll_type", "kind", "op",
                              "algo", "proto", "msg_size_bytes", "kernel_key", "timing_source"};

bool MetaColumn(const std::string& c) {
  for (const char* m : kMetaColumns)
    if (c == m) return true;
  return false;
}

const std::vector<Spec>& Specs() {
  static const std::vector<Spec> specs = {
      {{"counts_by_op", "summary", "records, bytes and time by op, with shares"}, Filter::kRunId,
       [](const AnalysisOptions&) { return std::string("counts_by_op"); }, "run_id, time_us DESC"},
      {{"kernel_stats", "summary", "records, bytes and time by kernel key"}, Filter::kRunId,
       [](const AnalysisOptions&) { return std::string("kernel_stats"); }, "run_id, time_us DESC"},
      {{"counts_by_coll_type", "summary", "records, bytes and time by interconnect class"},
       Filter::kRunId, [](const AnalysisOptions&) { return std::string("counts_by_coll_type"); },
       "run_id, time_us DESC"},
      {{"hot_kernels", "summary",
        "kernel keys ranked by share of time and of bytes, with cumulative shares"},
       Filter::kRunId, [](const AnalysisOptions&) { return std::string("hot_kernels"); },
       "run_id, rank"},
      {{"busbw_histogram", "summary", "equal-width busbw histogram per kernel key"},
       Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "busbw_histogram(bins := " + std::to_string(o.histogram_bins) + ")";
       },
       ""},
      {{"busbw_ecdf", "summary", "busbw ECDF per kernel key (thinned to ecdf_points)"},
       Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "busbw_ecdf(max_points := " + std::to_string(o.ecdf_points) + ")";
       },
       ""},
      {{"exec_time_ecdf", "summary", "exec-time ECDF per kernel key (thinned to ecdf_points)"},
       Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "exec_time_ecdf(max_points := " + std::to_string(o.ecdf_points) + ")";
       },
       ""},
      {{"kernel_variation", "variation",
        "mean, stddev, CV, min/p5/p25/median/p75/p95/max busbw per kernel key"},
       Filter::kRunId, [](const AnalysisOptions&) { return std::string("kernel_variation"); },
       "run_id, records DESC, kernel_key"},
      {{"variation_scaling", "variation", "CV per (op, size) against communicator size and run"},
       Filter::kRunId, [](const AnalysisOptions&) { return std::string("variation_scaling"); },
       ""},
      {{"busbw_by_shape", "variation",
        "mean and CV of busbw per (op, size, n_ranks), Inspector and nccl-tests runs alike"},
       Filter::kRunId, [](const AnalysisOptions&) { return std::string("busbw_by_shape"); },
       "run_id, op, msg_size_bytes, n_ranks"},
      {{"compare_runs", "variation", "production vs baseline mean and CV per (op, size, n_ranks)"},
       Filter::kNone,
       [](const AnalysisOptions& o) {
         return "compare_runs(" + SqlString(o.prod_run) + ", " + SqlString(o.base_run) + ")";
       },
       ""},
      {{"temporal", "temporal", "busbw and exec time per kernel key in wall-clock bins"},
       Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "temporal(bin_s := " + Num(o.bin_s) + ", min_bytes := " +
                std::to_string(o.min_bytes) + ")";
       },
       ""},
      {{"rank_cells", "spatial", "normalised busbw per (communicator, rank)"}, Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "rank_cells(min_bytes := " + std::to_string(o.min_bytes) + ")";
       },
       ""},
      {{"kind_rank_cells", "spatial",
        "normalised busbw per (communicator kind, process), against the kind's median process"},
       Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "kind_rank_cells(min_bytes := " + std::to_string(o.min_bytes) + ")";
       },
       ""},
      {{"process_stats", "spatial", "normalised busbw per process"}, Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "process_stats(min_bytes := " + std::to_string(o.min_bytes) + ")";
       },
       ""},
      {{"rank_blocks", "spatial", "normalised busbw per block of N ranks"}, Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "rank_blocks(block_ranks := " + std::to_string(o.block_ranks) +
                ", min_bytes := " + std::to_string(o.min_bytes) + ")";
       },
       ""},
      {{"host_normalized", "spatial", "each host's median busbw over the job median, per kernel"},
       Filter::kRunId, [](const AnalysisOptions&) { return std::string("host_normalized"); },
       "run_id, norm_busbw, hostname"},
      {{"host_transfer_normalized", "spatial",
        "per host: median busbw of the cross-host collective instances it takes part in, over "
        "the job median"},
       Filter::kRunId,
       [](const AnalysisOptions&) { return std::string("host_transfer_normalized"); },
       "run_id, norm_busbw, hostname"},
      {{"host_comm_transfer", "spatial",
        "per host and cross-host communicator: geometric mean busbw of its transfers (>= 1 MiB) "
        "over the job median"},
       Filter::kRunId, [](const AnalysisOptions&) { return std::string("host_comm_transfer"); },
       "run_id, hostname, norm_busbw, comm"},
      {{"host_table", "spatial",
        "hosts ranked worst first by their best cross-host communicator's normalised busbw"},
       Filter::kRunId,
       [](const AnalysisOptions&) { return std::string("host_table"); }, "run_id, rank"},
      {{"host_time_heatmap", "spatial", "normalised busbw per (host, time bin)"}, Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "host_time_heatmap(bin_s := " + Num(o.bin_s) + ", min_bytes := " +
                std::to_string(o.min_bytes) + ")";
       },
       ""},
      {{"range_bars", "spatial",
        "min/p25/p50/p75/max busbw by communicator, host, time bin and sequence-number bin"},
       Filter::kRunId,
       [](const AnalysisOptions& o) {
         return "range_bars(min_bytes := " + std::to_string(o.min_bytes) + ", bin_s := " +
                Num(o.bin_s) + ", sn_bin := " + std::to_string(o.sn_bin) + ")";
       },
       ""},
      {{"resource_usage", "resource", "records, bytes and time by n_ranks, nnodes, class and op"},
       Filter::kRunId, [](const AnalysisOptions&) { return std::string("resource_usage"); }, ""},
      {{"group_by_column", "other", "records, bytes and time by any metadata column"},
       Filter::kNone,
       [](const AnalysisOptions& o) { return "group_by_column(" + o.column + ")"; }, ""},
      {{"busbw_by_column", "other", "median busbw by metadata column and kernel key"},
       Filter::kNone,
       [](const AnalysisOptions& o) { return "busbw_by_column(" + o.column + ")"; }, ""},
  };
  return specs;
}

}  // namespace

const std::vector<PrimitiveInfo>& Primitives() {
  static const std::vector<PrimitiveInfo> list = [] {
    std::vector<PrimitiveInfo> out;
    for (const Spec& s : Specs()) out.push_back(s.info);
    return out;
  }();
  return list;
}

Result<std::string> PrimitiveSql(const std::string& name, const AnalysisOptions& o) {
  for (const Spec& s : Specs()) {
    if (s.info.name != name) continue;
    if ((name == "group_by_column" || name == "busbw_by_column") && !MetaColumn(o.column)) {
      std::string known;
      for (const char* m : kMetaColumns) known += std::string(known.empty() ? "" : ", ") + m;
      return Status::InvalidArgument("unknown column \"" + o.column + "\" (one of: " + known + ")");
    }
    if (name == "compare_runs" && (o.prod_run.empty() || o.base_run.empty()))
      return Status::InvalidArgument("compare_runs needs a production run and a baseline run");
    std::string sql = "SELECT * FROM " + s.source(o);
    if (!o.run.empty()) {
      if (s.filter == Filter::kRunId)
        sql += " WHERE run_id = (SELECT run_id FROM runs WHERE name = " + SqlString(o.run) + ")";
      else if (name != "compare_runs")
        sql += " WHERE run = " + SqlString(o.run);
    }
    if (!s.order.empty()) sql += " ORDER BY " + s.order;
    return sql;
  }
  return Status::InvalidArgument("unknown primitive \"" + name + "\"");
}

Result<QueryResult> RunPrimitive(Store& store, const std::string& name,
                                 const AnalysisOptions& options) {
  Result<std::string> sql = PrimitiveSql(name, options);
  if (!sql.ok()) return sql.status();
  if (!options.run.empty()) {
    Result<int32_t> id = store.RunId(options.run, false);
    if (!id.ok()) return id.status();
  }
  return store.Query(*sql);
}

Result<QueryResult> RunPrimitive(Store& store, const std::string& name, const std::string& run) {
  AnalysisOptions o;
  o.run = run;
  if (name == "compare_runs") {
    // The benchmark has no baseline: compare the run with itself.
    Result<QueryResult> r = store.Query("SELECT name FROM runs ORDER BY run_id LIMIT 1");
    if (!r.ok()) return r.status();
    if (r->rows.empty()) return QueryResult{};
    o.prod_run = o.base_run = *r->rows[0][0];
  }
  return RunPrimitive(store, name, o);
}

#define COLLSCOPE_PRIMITIVE(Fn, name) \
  Result<QueryResult> Fn(Store& store, const AnalysisOptions& o) { return RunPrimitive(store, name, o); }
COLLSCOPE_PRIMITIVE(CountsByOp, "counts_by_op")
COLLSCOPE_PRIMITIVE(CountsByKernel, "kernel_stats")
COLLSCOPE_PRIMITIVE(CountsByCollType, "counts_by_coll_type")
COLLSCOPE_PRIMITIVE(HotKernels, "hot_kernels")
COLLSCOPE_PRIMITIVE(BusbwHistogram, "busbw_histogram")
COLLSCOPE_PRIMITIVE(BusbwEcdf, "busbw_ecdf")
COLLSCOPE_PRIMITIVE(ExecTimeEcdf, "exec_time_ecdf")
COLLSCOPE_PRIMITIVE(KernelVariation, "kernel_variation")
COLLSCOPE_PRIMITIVE(VariationScaling, "variation_scaling")
COLLSCOPE_PRIMITIVE(BusbwByShape, "busbw_by_shape")
COLLSCOPE_PRIMITIVE(CompareRuns, "compare_runs")
COLLSCOPE_PRIMITIVE(Temporal, "temporal")
COLLSCOPE_PRIMITIVE(RankCells, "rank_cells")
COLLSCOPE_PRIMITIVE(KindRankCells, "kind_rank_cells")
COLLSCOPE_PRIMITIVE(ProcessStats, "process_stats")
COLLSCOPE_PRIMITIVE(RankBlocks, "rank_blocks")
COLLSCOPE_PRIMITIVE(HostNormalized, "host_normalized")
COLLSCOPE_PRIMITIVE(HostTransferNormalized, "host_transfer_normalized")
COLLSCOPE_PRIMITIVE(HostCommTransfer, "host_comm_transfer")
COLLSCOPE_PRIMITIVE(HostTable, "host_table")
COLLSCOPE_PRIMITIVE(HostTimeHeatmap, "host_time_heatmap")
COLLSCOPE_PRIMITIVE(RangeBars, "range_bars")
COLLSCOPE_PRIMITIVE(ResourceUsage, "resource_usage")
COLLSCOPE_PRIMITIVE(GroupByColumn, "group_by_column")
COLLSCOPE_PRIMITIVE(BusbwByColumn, "busbw_by_column")
#undef COLLSCOPE_PRIMITIVE

int ColumnOf(const QueryResult& r, const std::string& name) {
  for (size_t i = 0; i < r.columns.size(); ++i)
    if (r.columns[i] == name) return static_cast<int>(i);
  return -1;
}

}  // namespace collscope
