// Ingests NCCL Inspector logs (and the collscope plugin's, which are a superset) into a store.
//
// Contract:
// - Inputs are files or directories; directories are searched recursively for *.log, *.jsonl
//   and their .gz forms.
// - Incremental and idempotent: each file's ingested prefix (complete lines) is remembered; a
//   file that grew is read from where the last ingest stopped, an unchanged one is skipped, and one
//   rewritten in place (its first bytes changed, or it shrank) has its old rows replaced.
// - Every complete line is either stored (records, dump_stats, proxy_ops and proxy_steps) or
//   written to ingest_log with its file, line number and reason. An incomplete last line is left
//   for a later ingest.
// - Rows and file progress are committed together, so a failure loses at most the uncommitted
//   part of this ingest; nothing stored before is lost and a rerun resumes cleanly.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/input_files.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope {

struct IngestOptions {
  std::string run = "default";
  int threads = 0;                          // parser threads; 0 = hardware concurrency
  uint64_t commit_every_bytes = 1ull << 30;  // input bytes between commits
  size_t block_size = 8 << 20;              // read block; lines longer than this still work
  // Called from the ingesting thread with (bytes done, bytes total) now and then.
  std::function<void(uint64_t, uint64_t)> progress;
  // Test hook: fail (as a crash would) after this many commits; 0 = never.
  int fail_after_commits = 0;
  // Checkpoint the store at the end (what a one-off ingest wants: the file holds everything when
  // the command exits). A process that keeps the store open and ingests every few seconds (the
  // live agent) leaves it to DuckDB's own checkpoints and to closing the store.
  bool checkpoint = true;
};

struct IngestReport {
  int32_t run_id = 0;
  int32_t ingest_id = 0;
  uint64_t files_seen = 0, files_read = 0, files_unchanged = 0, files_rewritten = 0;
  uint64_t bytes_read = 0, lines_read = 0;
  uint64_t records_stored = 0, dump_stats_stored = 0, lines_rejected = 0;
  uint64_t incomplete_tail_bytes = 0;  // bytes of unfinished last lines left for later
  uint64_t records_missing = 0;  // announced by a v4.3/v4.4 marker, never in the file
  uint64_t proxy_ops_stored = 0, proxy_steps_stored = 0;  // v4.3/v4.4 proxy_trace records
  uint64_t records_without_timing_source = 0;  // stored with timing_source NULL
  double seconds = 0;
  std::vector<std::string> first_rejections;  // "path:line: reason", at most 10
  std::vector<std::string> skipped;  // "path: reason" for inputs that could not be read
};

// A file name an Inspector log has: *.log, *.jsonl, or either gzipped.
bool IsInspectorLogName(const std::string& name);

// The Inspector logs under `paths` (*.log, *.jsonl and their .gz; any named file but JSON
// documents; never a file of another format found by content: step/phase series, iteration logs,
// kernel summaries), and what could not be looked at (core/input_files.h). A missing path is an
// error.
Result<InputFiles> DiscoverInputs(const std::vector<std::string>& paths);

Result<IngestReport> Ingest(Store& store, const std::vector<std::string>& paths,
                            const IngestOptions& options);

}  // namespace collscope
