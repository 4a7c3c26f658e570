// NCCL Inspector's OTLP/HTTP JSON export (NCCL_INSPECTOR_OTEL_EXPORT=1, dev/PR lines), as a user
// keeps it: an OpenTelemetry Collector's file exporter (one ExportMetricsServiceRequest JSON
// document per line) or a saved request body (one document, laid out any way). Inspector sends
// gauges only, in two forms, told by each point's `version` attribute:
// - v5.1 (default): per dump, aggregated like the 2.30 Prometheus textfile (prom_textfile.h):
//   nccl_bus_bandwidth_gbs (geometric mean), nccl_collective_exec_time_microseconds (arithmetic
//   mean), nccl_p2p_*, labelled gpu, comm_name, node, n_nodes, nranks, message_size (a bucket),
//   collective and algo_proto, or p2p_operation; timestamped by the bucket's latest operation.
// - v5.2 (NCCL_INSPECTOR_OTEL_VERBOSE=1): one point per operation, adding comm_id,
//   coll_msg_size_bytes | p2p_msg_size_bytes, coll_sn | p2p_sn, p2p_peer and the algbw metrics.
//
// Contract:
// - Found by content, whatever the name: IsOtlpMetricsFile (core/input_files.h). Plain files only.
// - Every data point of a gauge or sum named nccl_* becomes one PromSample, stored in
//   prom_samples beside the textfiles' (IngestPromFiles): the point's attributes are its labels
//   (prom_textfile.h FillPromColumns), followed by the resource's (`slurm.job.id` fills
//   slurm_job_id where the point has none); timeUnixNano is ts_us; asDouble or asInt the value.
//   The layout is "otlp " + the version attribute, or "otlp" with none.
// - A point that cannot be used is counted in `unused` and the first kMaxPromUnusedNamed named as
//   "path:line: why", never dropped in silence: another program's metric, a histogram or summary,
//   a point with no node attribute or no value, too many or too long attributes, a document that
//   does not parse or has no resourceMetrics. An attribute or time that parses but cannot be read
//   leaves its column NULL, keeps the point and is counted the same way. `line` is the line where
//   the point's document starts.
// - A file that parses whole is one document (a saved body); otherwise a document per line, where
//   any line parses alone (a damaged line is named, the others read); otherwise it is one
//   document that does not parse.
// - A last line with no newline that does not parse is a write caught half done: not read, not
//   an error, counted in `incomplete_tail_bytes`.
// - A file over kMaxPromBytes is refused before it is read, with its path and why.
#pragma once

#include <string>
#include <string_view>

#include "core/readers/prom_textfile.h"
#include "core/status.h"

namespace collscope::readers {

// Parses a file's whole content; `path` names it in reasons.
Result<PromFile> ParseOtlpMetrics(std::string_view content, const std::string& path);
Result<PromFile> ReadOtlpMetrics(const std::string& path);

}  // namespace collscope::readers
