// The analysis primitives (docs/analysis.md): each is a named SQL view or table macro of the
// analysis library (analysis/views.cc), and a C++ function here that runs exactly that view, so
// `collscope sql` users, `collscope analyze`, the report and library callers get one definition.
//
// Every function takes the store (with InstallAnalysisViews done) and options; `run` limits the
// result to one run by name (empty: every run). Results come back as QueryResult tables whose
// columns are documented in docs/analysis.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/store.h"

namespace collscope {

struct AnalysisOptions {
  std::string run;                  // only this run (by name); empty for all
  double bin_s = 5;                 // temporal bin width, seconds
  uint64_t min_bytes = 1 << 20;     // temporal / spatial: messages at least this large
  int ecdf_points = 200;            // ECDF points kept per kernel key
  int histogram_bins = 40;          // histogram bins per kernel key
  int block_ranks = 8;              // spatial: ranks per block
  int sn_bin = 50;                  // range bars: sequence numbers per bin
  std::string column = "git_rev";   // "other": the metadata column to group by
  std::string prod_run, base_run;   // baseline comparison
};

struct PrimitiveInfo {
  std::string name;      // the name `collscope analyze` takes (the view or macro name)
  std::string category;  // summary, variation, temporal, spatial, resource, other
  std::string description;
};

// Every primitive, in documentation order.
const std::vector<PrimitiveInfo>& Primitives();

// The SQL that a primitive runs (a SELECT over its view or macro, filtered to the run).
Result<std::string> PrimitiveSql(const std::string& name, const AnalysisOptions& options);
Result<QueryResult> RunPrimitive(Store& store, const std::string& name,
                                 const AnalysisOptions& options);
// Shorthand used by the benchmark: default options, only `run`.
Result<QueryResult> RunPrimitive(Store& store, const std::string& name, const std::string& run);

// summary
Result<QueryResult> CountsByOp(Store& store, const AnalysisOptions& o);        // counts_by_op
Result<QueryResult> CountsByKernel(Store& store, const AnalysisOptions& o);    // kernel_stats
Result<QueryResult> CountsByCollType(Store& store, const AnalysisOptions& o);  // counts_by_coll_type
Result<QueryResult> HotKernels(Store& store, const AnalysisOptions& o);        // hot_kernels
Result<QueryResult> BusbwHistogram(Store& store, const AnalysisOptions& o);    // busbw_histogram()
Result<QueryResult> BusbwEcdf(Store& store, const AnalysisOptions& o);         // busbw_ecdf()
Result<QueryResult> ExecTimeEcdf(Store& store, const AnalysisOptions& o);      // exec_time_ecdf()
// variation
Result<QueryResult> KernelVariation(Store& store, const AnalysisOptions& o);   // kernel_variation
Result<QueryResult> VariationScaling(Store& store, const AnalysisOptions& o);  // variation_scaling
Result<QueryResult> BusbwByShape(Store& store, const AnalysisOptions& o);      // busbw_by_shape
Result<QueryResult> CompareRuns(Store& store, const AnalysisOptions& o);       // compare_runs()
// temporal
Result<QueryResult> Temporal(Store& store, const AnalysisOptions& o);          // temporal()
// spatial
Result<QueryResult> RankCells(Store& store, const AnalysisOptions& o);         // rank_cells()
Result<QueryResult> KindRankCells(Store& store, const AnalysisOptions& o);     // kind_rank_cells()
Result<QueryResult> ProcessStats(Store& store, const AnalysisOptions& o);      // process_stats()
Result<QueryResult> RankBlocks(Store& store, const AnalysisOptions& o);        // rank_blocks()
Result<QueryResult> HostNormalized(Store& store, const AnalysisOptions& o);    // host_normalized
Result<QueryResult> HostTransferNormalized(Store& store, const AnalysisOptions& o);
Result<QueryResult> HostCommTransfer(Store& store, const AnalysisOptions& o);  // host_comm_transfer
Result<QueryResult> HostTable(Store& store, const AnalysisOptions& o);         // host_table
Result<QueryResult> HostTimeHeatmap(Store& store, const AnalysisOptions& o);   // host_time_heatmap()
Result<QueryResult> RangeBars(Store& store, const AnalysisOptions& o);         // range_bars()
// resource
Result<QueryResult> ResourceUsage(Store& store, const AnalysisOptions& o);     // resource_usage
// other
Result<QueryResult> GroupByColumn(Store& store, const AnalysisOptions& o);     // group_by_column()
Result<QueryResult> BusbwByColumn(Store& store, const AnalysisOptions& o);     // busbw_by_column()

// Column index by name in a result, or -1.
int ColumnOf(const QueryResult& r, const std::string& name);

}  // namespace collscope
