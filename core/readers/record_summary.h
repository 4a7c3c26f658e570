// Record summaries: the compact per-host files that carry a job's records from per-host agents
// to one aggregator over the job's shared file system (docs/scale.md, "The summary format").
//
// Layout: ROOT/host=<host>/<until_us>.parquet (hive partitioning; <host> percent-encoded outside
// [A-Za-z0-9._-]; <until_us> the exporter's wall clock in µs, 16 digits, so names sort in the
// order they were written). One file per host and export, zstd-compressed, flat rows:
//   row_type 'record': one NCCL record, with its process (hostname, pid, git_rev, rec_mechanism,
//     format_version), communicator (comm_id as Inspector prints it, comm_hash, comm_name,
//     n_ranks, nnodes), operation (kind, op, algo, proto, peer, msg_size_bytes) and measurement
//     (rank, global_rank, local_rank, gpu, n_channels, sn, exec_time_us, timing_source, the two
//     bandwidth overrides, dump/start/stop and kernel start/stop timestamps);
//   row_type 'dump_stats': one Inspector dump_stats line (process, communicator, rank,
//     dump_ts_us and the six coll_/p2p_ counters), the writers' drops.
// Parquet key-value metadata: collscope.format = "collscope-record-summary",
// collscope.format_version = "1" (kRecordSummaryVersion).
//
// Contract:
// - Writing (ExportRecordSummaries) is atomic per file: a hidden temporary name, then a rename;
//   a reader never sees a partial file, and a file is immutable once in place. Each export holds
//   the rows ingested since the previous one (per input file, the lines between the previous
//   export's and this one's `files.lines_consumed`). The progress is committed to the store
//   before the renames, with the renames still owed, so a crash between the two is finished by
//   the next export: every row ships exactly once.
// - Reading (IngestRecordSummaries) loads each file once, by path (kept in `files`, with its
//   rows as lines_consumed; records point at it, `line` = row number in the file), into the
//   same tables as an Inspector ingest (processes, communicators, operations, records,
//   dump_stats), interning processes by (hostname, pid), communicators by (hash, ranks, nodes,
//   name) and operations by their shape, so every analysis works unchanged on the result.
//   A file that cannot be read, lacks the metadata, has another format version or a value the
//   store refuses (an unknown op) is named in `failed` and stored not at all; it is retried on
//   the next ingest (a newer collscope may read it). Files are read by DuckDB in an in-memory
//   database sandboxed to the folders that hold them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/store.h"

namespace collscope::readers {

inline constexpr int kRecordSummaryVersion = 1;
inline constexpr const char* kRecordSummaryFormat = "collscope-record-summary";

// True for a file of the format by its place: a *.parquet in a host=... folder.
bool IsRecordSummaryPath(const std::string& path);

// True for a folder that holds only host=... folders (and hidden entries): a summary root, which
// no other importer needs to look into.
bool IsRecordSummaryRoot(const std::string& path);

struct SummaryExportOptions {
  std::string run = "default";
  std::string root;                // ROOT; must be (under) the store's writable_dir
  std::vector<std::string> hosts;  // export only these hosts' records; empty: every host
  int64_t now_us = 0;              // the file names' clock
};

struct SummaryExportReport {
  uint64_t files_written = 0, records = 0, dump_stats = 0, bytes = 0;
  std::vector<std::string> paths;
};

// Writes what run `run` gained since the last export, one file per host.
Result<SummaryExportReport> ExportRecordSummaries(Store& store, const SummaryExportOptions& options);

struct RecordSummaryIngestReport {
  uint64_t files_seen = 0, files_read = 0, files_unchanged = 0;
  uint64_t records_stored = 0, dump_stats_stored = 0;
  uint64_t batches = 0;             // transactions the files were loaded in
  std::vector<std::string> failed;  // "path: why" for files not stored
};

// Parquet bytes loaded per transaction. A batch's rows are staged whole in memory (60-80 times its
// compressed size, measured), so this bounds what an aggregator holds when it starts behind: after
// a restart, or with a backlog of hosts' files (docs/scale.md).
inline constexpr uint64_t kSummaryBatchBytes = 8ull << 20;

// Stores the summary files under `paths` that run `run` has not loaded yet, in batches of at most
// `batch_bytes` (a larger file is a batch of its own).
Result<RecordSummaryIngestReport> IngestRecordSummaries(Store& store,
                                                        const std::vector<std::string>& paths,
                                                        const std::string& run,
                                                        uint64_t batch_bytes = kSummaryBatchBytes);

}  // namespace collscope::readers
