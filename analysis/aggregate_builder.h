// The agg_* rows of one run (docs/analysis.md, "Aggregates"), computed in C++ from one scan of the
// run's records instead of by the aggregate SQL's passes over them: `collscope ingest` spent most
// of its time after parsing in those passes (their hash groupings of the records and the window
// sorts of value counts, issue 16). RefreshAggregates (analysis/views.h) uses it.
//
// Contract: the rows are the ones the SQL definitions in analysis/views.cc (RawCellsSql,
// RawTimeSql, HostTimeSql, HostNormalizedSql, TransferSql + HostTransferSql + HostCommSql,
// RangeBarsSql at its defaults) give for the run: the same groups and counts, busbw values from
// the same double operations (core/bandwidth.h), nearest-rank quantiles by the same exact
// comparisons; only sums of doubles may differ in their last bits (another summation order). The
// SQL stays the definition (the views read it for stale runs); AggregateBuilderTest checks the
// two agree table by table. agg_meta and agg_kernel_variation stay SQL (one cheap statement each)
// and are written by the caller: meta() gives agg_meta's values, and WriteDerived() reads the
// run's agg_kernel_variation medians, so it must run after that table is written.
//
// Use: Fetch() (the store's connection), Compute() (no store access: it may run on another
// thread while the connection does other work, such as installing the views), then
// WriteCounts(), the caller's agg_kernel_variation, WriteDerived() (the connection again).
//
// Compute() declines (returns false) a run whose records or dimensions hold what the builder does
// not key by: a NULL process or operation id, an id without its dimension row, a NULL kernel key,
// host name or communicator id. The SQL joins would drop or group such rows in ways not worth
// repeating here; the caller then runs the SQL statements.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/store.h"

namespace collscope {

class AggregateBuilder {
 public:
  // `op_dims`: a relation with the op_dims view's columns: the view, or its query in parentheses
  // where the views are not installed yet.
  AggregateBuilder(Store& store, int32_t run_id, std::string op_dims);
  ~AggregateBuilder();
  AggregateBuilder(const AggregateBuilder&) = delete;
  AggregateBuilder& operator=(const AggregateBuilder&) = delete;

  // Reads the run's dimensions and its records (a few columns, held until Compute).
  Status Fetch();
  // Groups what Fetch read, without touching the store. False: declined (see above).
  bool Compute();

  // agg_meta's record count and time span of the run (after Compute).
  struct Meta {
    uint64_t records = 0;
    std::optional<uint64_t> first_dump_us, last_dump_us, first_ts_us, last_ts_us;
  };
  const Meta& meta() const;

  // Appends the run's agg_cells, agg_values and agg_proc_ops rows.
  Status WriteCounts();
  // Appends the run's agg_time, agg_host_time, agg_host_normalized, agg_host_transfer,
  // agg_host_comm and agg_range_bars (default parameters) rows; reads agg_kernel_variation.
  Status WriteDerived();

 private:
  struct State;
  Store& store_;
  int32_t run_id_;
  std::string op_dims_;
  std::unique_ptr<State> s_;
};

}  // namespace collscope
