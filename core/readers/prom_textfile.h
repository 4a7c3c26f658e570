// NCCL Inspector's Prometheus textfile mode (NCCL_INSPECTOR_PROM_DUMP=1): one file per GPU,
// `nccl_inspector_metrics_<gpu-uuid>.prom`, for node_exporter's textfile collector. Two layouts:
// - 2.29.x: per communicator, its latest collective: nccl_algorithm_bandwidth_gbs,
//   nccl_bus_bandwidth_gbs, nccl_collective_exec_time_microseconds, labelled comm_id, hostname,
//   rank, slurm_job, slurm_job_id, nranks, n_nodes, gpu_device_id, collective, coll_sn,
//   timestamp (ISO-8601 UTC, when the dump wrote it) and message_size ("2.00GB", 1024-based).
// - 2.30+ ("version" label, v5.1): per dump, aggregated per (nranks, n_nodes, func, size bucket,
//   comm_name, algo_proto): nccl_bus_bandwidth_gbs is the geometric mean of the bucket's bus
//   bandwidths, nccl_collective_exec_time_microseconds the arithmetic mean of its times (P2P:
//   nccl_p2p_*); message_size is the bucket ("4-5GB", "0B"). Optional counters
//   nccl_collectives_total, nccl_collectives_dropped_total, nccl_p2p_total, nccl_p2p_dropped_total.
//   These values are per-window means, never one operation's value.
//
// Contract:
// - Found by name (`*.prom`) or by content (the first line that is no comment or blank is an
//   `nccl_` metric with labels): IsPromTextfile. Plain files only (not gzip).
// - Each line is Prometheus text exposition as these files hold it: `name{label="value",...}
//   value [timestamp_ms]`, label values with the escapes \\, \" and \n, values as Go's ParseFloat
//   or C's %g writes them (NaN, nan, +Inf, inf, -Inf). Comments (`#`) and blank lines are skipped.
// - Every metric whose name starts with `nccl_` is kept, in either layout (told by its labels:
//   `version` is 2.30, `hostname` 2.29). Every other line is counted in `unused` and the first
//   kMaxPromUnusedNamed named as "path:line: why", never dropped in silence: a metric of another
//   program, a label set that does not parse, a value that is no number, a line over
//   kMaxLineBytes, too many or too long labels, a line with no node. A label that parses but whose
//   value cannot be read (a rank that is no count, a size or timestamp that is no size or time)
//   leaves that column NULL, keeps the sample and is counted the same way; `labels` keeps it
//   as written.
// - Inspector writes the file in place ("w", not a rename): a last line without its newline is
//   a write caught half done. It is not read, not an error, and is counted in
//   `incomplete_tail_bytes`; the next read of the file sees it whole.
// - A file over kMaxPromBytes is refused before it is read, with its path and why.
#pragma once

#include "core/input_files.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/store.h"

namespace collscope::readers {

inline constexpr uint64_t kMaxPromBytes = uint64_t{1} << 30;
inline constexpr size_t kMaxPromLabels = 64;             // labels of one sample
inline constexpr size_t kMaxPromLabelBytes = 4096;       // one label's name or value, unescaped
inline constexpr size_t kMaxPromUnusedNamed = 100;
inline constexpr uint64_t kMaxPromSizeBytes = uint64_t{1} << 50;  // message sizes (1 PiB)
inline constexpr int64_t kMaxPromTimestampUs = int64_t{1} << 53;  // year 2255
inline constexpr int64_t kMaxPromRanks = int64_t{1} << 24;

struct PromSample {
  uint64_t line = 0;
  std::string metric;
  std::string layout;  // "2.29", "2.30", or "otlp <version>" (otlp_metrics.h)
  std::string node;    // node (2.30) or hostname (2.29)
  std::string gpu;     // gpu (2.30) or gpu_device_id (2.29), "GPU<n>"; "" when absent
  std::optional<std::string> comm_name, comm_id, op, message_size, algo_proto, slurm_job_id;
  std::optional<int32_t> rank, n_nodes, nranks;
  std::optional<uint64_t> coll_sn, size_lo_bytes, size_hi_bytes;
  std::optional<int64_t> ts_us;  // 2.29's timestamp label, else the exposition timestamp
  double value = 0;
  std::string labels;  // every label as written (unescaped), as a JSON object
};

// A sample's labels as written (unescaped), in their order.
using PromLabels = std::vector<std::pair<std::string, std::string>>;

// Fills a sample's columns (all but metric, layout, node, line and value, which the caller sets)
// from its labels, and its `labels` JSON. A label whose value cannot be read leaves its column
// NULL; the reasons come back joined with "; " ("" when none), for the caller to count the
// sample once. Shared with the OTLP reader (otlp_metrics.h), whose per-operation points name
// the sequence number p2p_sn for point-to-point and the size in bytes (coll_msg_size_bytes,
// p2p_msg_size_bytes).
std::string FillPromColumns(const PromLabels& labels, PromSample* x);

// The samples' layout if they share one, "mixed" if not, "" with none.
std::string PromFileLayout(const std::vector<PromSample>& samples);

struct PromFile {
  std::string path;
  std::string layout;  // "2.29", "2.30", "mixed", "otlp v5.1", "otlp v5.2", or "" with no samples
  uint64_t lines = 0;  // complete lines read
  uint64_t unused = 0;  // lines (or label values) not understood
  uint64_t incomplete_tail_bytes = 0;  // an unfinished last line, not read
  std::vector<PromSample> samples;
  std::vector<std::string> unused_named;  // "path:line: why", the first kMaxPromUnusedNamed
};

// Found by collscope::IsPromTextfile (core/input_files.h), which the Inspector log reader also
// uses to leave these files alone.

// Parses a file's whole content; `path` names it in reasons.
Result<PromFile> ParsePromTextfile(std::string_view content, const std::string& path);
Result<PromFile> ReadPromTextfile(const std::string& path);

// ---- store: prom_files and prom_samples (docs/schema.md) ----

struct PromIngestReport {
  uint64_t files_seen = 0, files_read = 0, samples = 0, lines_unused = 0, incomplete_tails = 0;
  std::vector<std::string> unused;   // "path:line: why", the first kMaxPromUnusedNamed
  std::vector<std::string> failed;   // "path: why", for files found but not stored
  std::vector<std::string> skipped;  // "path: why", from the input walk
};

// Finds the Prometheus files and OTLP JSON exports (otlp_metrics.h) under `paths`
// (core/input_files.h walk), reads each whole and stores it in the run: a file read again
// replaces the rows it stored before (Inspector rewrites its textfiles in place; a collector
// appends).
Result<PromIngestReport> IngestPromFiles(Store& store, const std::vector<std::string>& paths,
                                         const std::string& run);

// Why no detector compares ranks from these files (`collscope diagnose` and `summary` say it).
inline constexpr const char* kPromNotComparable =
    "a window's mean per communicator kind (2.30, OTLP v5.1) or one latest operation per dump "
    "(2.29), with no membership or sequence numbers to compare the members of one operation; "
    "OTLP v5.2's per-operation points name a node and GPU but no rank, and no detector reads them "
    "yet";

}  // namespace collscope::readers
