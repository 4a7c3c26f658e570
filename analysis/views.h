// The analysis SQL library: views and macros over the store's tables (docs/sql.md). They are
// installed into a store by InstallAnalysisViews: persistently after an ingest, or as TEMP
// objects in a read-only session, so `collscope sql` users and the C++ primitives read the same
// definitions.
//
// Aggregates (docs/analysis.md, "Aggregates"): RefreshAggregates materialises compact agg_*
// tables per run (value counts per cell, one-second bins, the parameterless spatial answers) so
// the primitives read thousands of rows instead of millions of records. Every view reads them
// only for runs whose aggregates are fresh (agg_fresh_runs: same definitions version, and the
// run's ingests count unchanged since) and the records otherwise, so the answers are the same
// with or without them.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "core/store.h"

namespace collscope {

// Creates (or replaces) every analysis view; `temporary` for read-only stores. Missing agg_*
// tables are created empty (TEMP when `temporary`); in a writable store, those of an older shape
// are made again (and every run's aggregates are then missing). use_aggregates = false makes every run read
// the records (for tests and benchmarks comparing the two).
Status InstallAnalysisViews(Store& store, bool temporary, bool use_aggregates = true);

struct AggregateReport {
  int runs = 0;         // runs (re)aggregated
  double seconds = 0;   // wall time
};

// Installs the views (InstallAnalysisViews) and (re)computes the agg_* tables of `run` (by name),
// or of every run whose aggregates are missing or stale when `run` is empty, all in one
// transaction; then the views read them. The rows come from the aggregate builder's one scan of
// each run's records (analysis/aggregate_builder.h), or from the SQL definitions for a run it
// declines. The store must be writable, with no transaction open. `collscope ingest` calls it.
Result<AggregateReport> RefreshAggregates(Store& store, const std::string& run = "");

// The host table's transfer columns over any relation of records (`records`: a subquery or table
// name with the records' columns; a live agent passes its window): per (run_id, hostname),
// transfer_norm_busbw, the normalised transfer bus bandwidth of the host's best cross-host
// communicator (a communicator runs no faster than its slowest member, so a degraded host is the
// one whose communicators are all slow), and transfer_comms. Needs the views installed.
std::string HostTransferTableSql(const std::string& records);

// Opens the store at `path` read-only with the analysis views installed (as temporary views):
// what every reading command starts with.
Result<std::unique_ptr<Store>> OpenForAnalysis(const std::string& path);

}  // namespace collscope
