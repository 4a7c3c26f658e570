#include "core/taxonomy.h"

#include <array>

namespace collscope {
namespace {

using R = Role;

constexpr std::string_view kOps[] = {
    "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Send",   "Recv",
    "SendRecv",  "AlltoAll",  "All2All",       "AllGatherV", "Gather", "Scatter", "Invalid"};
constexpr std::string_view kKinds[] = {"coll", "p2p"};
constexpr std::string_view kTimingSources[] = {"kernel_gpu", "kernel_cpu", "collective_cpu",
                                               "unknown"};
constexpr std::string_view kAlgos[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                       "NVLS", "NVLS_TREE", "PAT", "unknown"};
constexpr std::string_view kProtos[] = {"LL", "LL128", "SIMPLE", "unknown"};
constexpr std::string_view kCollTypes[] = {"single-rank", "nvlink-only", "nic-only", "mixed"};

constexpr EnumSpec kEnums[] = {
    {"coll_kind", kKinds},     {"coll_op", kOps},     {"timing_source", kTimingSources},
    {"nccl_algo", kAlgos},     {"nccl_proto", kProtos}, {"coll_type", kCollTypes},
};

constexpr TableSpec kTables[] = {
    {"runs", "run_id", "One row per named run (a job, a baseline, a simulation)."},
    {"files", "run_id, file_id", "Every input file of a run and how far it has been ingested."},
    {"processes", "run_id, process_id", "One row per writing process (host, pid)."},
    {"communicators", "run_id, comm_id",
     "One row per NCCL communicator seen in a run, with its derived interconnect class."},
    {"operations", "run_id, op_id",
     "One row per distinct operation shape in a run: communicator, kind, op, algorithm, "
     "protocol, peer and message size. Records point here, which keeps the store small."},
    {"records", "", "One row per completed collective or point-to-point operation per rank."},
    {"kernel_events", "",
     "Per-channel kernel events of verbose records (NCCL_INSPECTOR_DUMP_VERBOSE=1)."},
    {"dump_stats", "", "Inspector v4.1 dump_stats lines: records written and dropped per dump."},
    {"ingests", "run_id, ingest_id", "One row per `collscope ingest` into a run."},
    {"ingest_log", "", "Every input line that was not stored, with the reason."},
};

constexpr FieldSpec kFields[] = {
    // runs
    {"runs", "run_id", "INTEGER", R::kIdentifier, "derived", "Run number, unique in the store."},
    {"runs", "name", "VARCHAR", R::kIdentifier, "--run", "Run name given at ingest."},
    {"runs", "created_at", "TIMESTAMP", R::kProvenance, "derived", "When the run was created."},
    // files
    {"files", "run_id", "INTEGER", R::kIdentifier, "derived", "Run the file belongs to."},
    {"files", "file_id", "INTEGER", R::kIdentifier, "derived", "File number within the run."},
    {"files", "path", "VARCHAR", R::kProvenance, "file system", "Absolute path of the file."},
    {"files", "compressed", "BOOLEAN", R::kProvenance, "file name", "True for gzip input."},
    {"files", "bytes_consumed", "UBIGINT", R::kCounter, "derived",
     "Uncompressed bytes of complete lines read so far; the next ingest resumes here."},
    {"files", "lines_consumed", "UBIGINT", R::kCounter, "derived", "Complete lines read so far."},
    {"files", "fingerprint", "UBIGINT", R::kProvenance, "derived",
     "Hash of the file's first bytes, to notice a file rewritten in place."},
    {"files", "size_seen", "UBIGINT", R::kProvenance, "file system",
     "File size at the last ingest."},
    {"files", "mtime_ns_seen", "BIGINT", R::kProvenance, "file system",
     "Modification time at the last ingest (ns since the epoch)."},
    // processes
    {"processes", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"processes", "process_id", "INTEGER", R::kIdentifier, "derived", "Process number in run."},
    {"processes", "hostname", "VARCHAR", R::kIdentifier, "metadata.hostname", "Host name."},
    {"processes", "pid", "UBIGINT", R::kIdentifier, "metadata.pid", "Process id on the host."},
    {"processes", "git_rev", "VARCHAR", R::kConfiguration, "metadata.git_rev",
     "Build revision of the writing plugin."},
    {"processes", "rec_mechanism", "VARCHAR", R::kConfiguration, "metadata.rec_mechanism",
     "How records were captured (nccl_profiler_interface)."},
    {"processes", "format_version", "VARCHAR", R::kConfiguration,
     "metadata.inspector_output_format_version", "Inspector output format version (v4.0-v4.2)."},
    // communicators
    {"communicators", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"communicators", "comm_id", "INTEGER", R::kIdentifier, "derived", "Communicator number."},
    {"communicators", "comm_hash", "UBIGINT", R::kIdentifier, "header.id",
     "NCCL communicator hash (header.id parsed from hex)."},
    {"communicators", "id", "VARCHAR", R::kIdentifier, "header.id",
     "Communicator hash as Inspector prints it (0x%lx)."},
    {"communicators", "comm_name", "VARCHAR", R::kConfiguration, "header.comm_name",
     "Communicator name (NCCL 2.30+), NULL when absent."},
    {"communicators", "n_ranks", "INTEGER", R::kConfiguration, "header.n_ranks",
     "Number of ranks in the communicator."},
    {"communicators", "nnodes", "INTEGER", R::kConfiguration, "header.nnodes",
     "Number of nodes (hosts) the communicator spans."},
    {"communicators", "coll_type", "coll_type", R::kConfiguration, "derived",
     "Interconnect class: single-rank (n_ranks=1), nvlink-only (nnodes=1), nic-only "
     "(n_ranks=nnodes), else mixed."},
    // operations
    {"operations", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"operations", "op_id", "INTEGER", R::kIdentifier, "derived", "Operation shape number."},
    {"operations", "comm_id", "INTEGER", R::kIdentifier, "header", "Communicator."},
    {"operations", "kind", "coll_kind", R::kWorkload, "coll_perf|p2p_perf",
     "Collective or point-to-point record."},
    {"operations", "op", "coll_op", R::kWorkload, "coll_perf.coll|p2p_perf.p2p", "Operation."},
    {"operations", "algo", "nccl_algo", R::kWorkload, "coll_perf.coll_algo|collscope.algo",
     "NCCL algorithm (v4.2 or collscope plugin), NULL when absent."},
    {"operations", "proto", "nccl_proto", R::kWorkload, "coll_perf.coll_proto|collscope.proto",
     "NCCL protocol (v4.2 or collscope plugin), NULL when absent."},
    {"operations", "peer", "INTEGER", R::kWorkload, "p2p_perf.p2p_peer",
     "Peer rank of a point-to-point operation, NULL for collectives."},
    {"operations", "msg_size_bytes", "UBIGINT", R::kWorkload, "coll_msg_size_bytes",
     "Message size in bytes (per-rank buffer for AllGather and ReduceScatter)."},
    // records
    {"records", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"records", "file_id", "INTEGER", R::kIdentifier, "derived", "File the line came from."},
    {"records", "line", "UBIGINT", R::kCounter, "derived", "Line number in the file (1-based)."},
    {"records", "process_id", "INTEGER", R::kIdentifier, "metadata", "Writing process."},
    {"records", "op_id", "INTEGER", R::kIdentifier, "derived",
     "Operation shape (communicator, op, size, ...): join operations, or use records_v."},
    {"records", "rank", "INTEGER", R::kIdentifier, "header.rank", "Rank within the communicator."},
    {"records", "sn", "UBIGINT", R::kCounter, "coll_perf.coll_sn|p2p_perf.p2p_sn",
     "Sequence number: per communicator and collective type (coll), per communicator (p2p)."},
    {"records", "exec_time_us", "UBIGINT", R::kMeasurement, "coll_exec_time_us",
     "Execution time in microseconds (max over channels for kernel timing)."},
    {"records", "timing_source", "timing_source", R::kMeasurement, "coll_timing_source",
     "Where exec time came from: kernel_gpu, kernel_cpu or collective_cpu."},
    {"records", "algbw_gbs_override", "DOUBLE", R::kMeasurement, "coll_algobw_gbs",
     "The written algorithm bandwidth when it differs from Inspector's formula over "
     "msg_size_bytes, exec_time_us and n_ranks, else NULL (NaN when written as nan); "
     "records_v.algbw_gbs always holds the value."},
    {"records", "busbw_gbs_override", "DOUBLE", R::kMeasurement, "coll_busbw_gbs",
     "The written bus bandwidth when it differs from Inspector's formula, else NULL (NaN when "
     "written as nan); records_v.busbw_gbs always holds the value."},
    {"records", "dump_ts_us", "UBIGINT", R::kCounter, "metadata.dump_timestamp_us",
     "Wall-clock microseconds when the line was written (not when the op ran)."},
    {"records", "start_ts_us", "UBIGINT", R::kCounter, "event_trace_ts.coll_start_ts",
     "Wall-clock microseconds the operation started (verbose records), else NULL."},
    {"records", "stop_ts_us", "UBIGINT", R::kCounter, "event_trace_ts.coll_stop_ts",
     "Wall-clock microseconds the operation stopped (verbose records), else NULL."},
    {"records", "n_channels", "INTEGER", R::kWorkload, "kernel_events|collscope.n_channels",
     "Channels the operation ran on, when known."},
    {"records", "global_rank", "INTEGER", R::kIdentifier, "collscope.global_rank",
     "Global rank of the process (collscope plugin), else NULL."},
    {"records", "local_rank", "INTEGER", R::kIdentifier, "collscope.local_rank",
     "Rank of the process on its host (collscope plugin), else NULL."},
    {"records", "gpu", "INTEGER", R::kIdentifier, "collscope.gpu", "CUDA device index."},
    {"records", "enqueue_ts_us", "UBIGINT", R::kCounter, "collscope.enqueue_ts_us",
     "Wall-clock microseconds the operation was enqueued (collscope plugin)."},
    {"records", "kernel_start_ts_us", "UBIGINT", R::kCounter, "collscope.kernel_start_ts_us",
     "Wall-clock microseconds the first channel started, seen by the CPU (collscope plugin)."},
    {"records", "kernel_stop_ts_us", "UBIGINT", R::kCounter, "collscope.kernel_stop_ts_us",
     "Wall-clock microseconds the last channel stopped, seen by the CPU (collscope plugin)."},
    {"records", "queue_delay_us", "DOUBLE", R::kMeasurement, "collscope.queue_delay_us",
     "Enqueue to first kernel start, microseconds (collscope plugin)."},
    {"records", "ch_start_spread_us", "DOUBLE", R::kMeasurement, "collscope.ch_start_spread_us",
     "Spread of per-channel GPU start times, microseconds (collscope plugin)."},
    {"records", "ch_stop_spread_us", "DOUBLE", R::kMeasurement, "collscope.ch_stop_spread_us",
     "Spread of per-channel GPU stop times, microseconds (collscope plugin)."},
    // kernel_events
    {"kernel_events", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"kernel_events", "file_id", "INTEGER", R::kIdentifier, "derived", "File of the record."},
    {"kernel_events", "line", "UBIGINT", R::kCounter, "derived", "Line of the record."},
    {"kernel_events", "channel_id", "INTEGER", R::kIdentifier, "kernel_events[].channel_id",
     "Channel."},
    {"kernel_events", "start_sn", "UBIGINT", R::kCounter, "event_trace_sn", "Start callback n."},
    {"kernel_events", "stop_sn", "UBIGINT", R::kCounter, "event_trace_sn", "Stop callback n."},
    {"kernel_events", "record_sn", "UBIGINT", R::kCounter, "event_trace_sn", "Record callback n."},
    {"kernel_events", "start_ts_us", "UBIGINT", R::kCounter, "event_trace_ts",
     "Wall-clock microseconds the channel kernel started."},
    {"kernel_events", "stop_ts_us", "UBIGINT", R::kCounter, "event_trace_ts",
     "Wall-clock microseconds the channel kernel stopped."},
    {"kernel_events", "record_ts_us", "UBIGINT", R::kCounter, "event_trace_ts",
     "Wall-clock microseconds the channel stop was recorded."},
    // dump_stats
    {"dump_stats", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"dump_stats", "file_id", "INTEGER", R::kIdentifier, "derived", "File."},
    {"dump_stats", "line", "UBIGINT", R::kCounter, "derived", "Line."},
    {"dump_stats", "process_id", "INTEGER", R::kIdentifier, "metadata", "Writing process."},
    {"dump_stats", "comm_id", "INTEGER", R::kIdentifier, "header", "Communicator."},
    {"dump_stats", "rank", "INTEGER", R::kIdentifier, "header.rank", "Rank in communicator."},
    {"dump_stats", "dump_ts_us", "UBIGINT", R::kCounter, "metadata.dump_timestamp_us",
     "When the dump was written."},
    {"dump_stats", "coll_records", "UBIGINT", R::kCounter, "dump_stats.coll_records",
     "Collective records written in this dump."},
    {"dump_stats", "coll_dropped_total", "UBIGINT", R::kCounter, "dump_stats.coll_dropped_total",
     "Collective records dropped since start."},
    {"dump_stats", "coll_dropped_since_last_dump", "UBIGINT", R::kCounter,
     "dump_stats.coll_dropped_since_last_dump", "Collective records dropped since last dump."},
    {"dump_stats", "p2p_records", "UBIGINT", R::kCounter, "dump_stats.p2p_records",
     "P2P records written in this dump."},
    {"dump_stats", "p2p_dropped_total", "UBIGINT", R::kCounter, "dump_stats.p2p_dropped_total",
     "P2P records dropped since start."},
    {"dump_stats", "p2p_dropped_since_last_dump", "UBIGINT", R::kCounter,
     "dump_stats.p2p_dropped_since_last_dump", "P2P records dropped since last dump."},
    // ingests
    {"ingests", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"ingests", "ingest_id", "INTEGER", R::kIdentifier, "derived", "Ingest number in the run."},
    {"ingests", "started_at", "TIMESTAMP", R::kProvenance, "derived", "Start time."},
    {"ingests", "finished_at", "TIMESTAMP", R::kProvenance, "derived", "End time."},
    {"ingests", "files_seen", "UBIGINT", R::kProvenance, "derived", "Input files found."},
    {"ingests", "files_read", "UBIGINT", R::kProvenance, "derived", "Files with new bytes."},
    {"ingests", "bytes_read", "UBIGINT", R::kProvenance, "derived", "Uncompressed bytes read."},
    {"ingests", "lines_read", "UBIGINT", R::kProvenance, "derived", "Complete lines read."},
    {"ingests", "records_stored", "UBIGINT", R::kProvenance, "derived", "Records stored."},
    {"ingests", "dump_stats_stored", "UBIGINT", R::kProvenance, "derived",
     "dump_stats lines stored."},
    {"ingests", "lines_rejected", "UBIGINT", R::kProvenance, "derived",
     "Lines written to ingest_log instead."},
    // ingest_log
    {"ingest_log", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"ingest_log", "ingest_id", "INTEGER", R::kIdentifier, "derived", "Ingest that saw it."},
    {"ingest_log", "path", "VARCHAR", R::kProvenance, "file system", "File."},
    {"ingest_log", "line", "UBIGINT", R::kProvenance, "derived", "Line number (1-based)."},
    {"ingest_log", "reason", "VARCHAR", R::kProvenance, "derived", "Why it was not stored."},
    {"ingest_log", "excerpt", "VARCHAR", R::kProvenance, "input", "First 200 bytes of line."},
};

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kIdentifier: return "identifier";
    case Role::kConfiguration: return "configuration";
    case Role::kWorkload: return "workload";
    case Role::kMeasurement: return "measurement";
    case Role::kCounter: return "counter";
    case Role::kProvenance: return "provenance";
  }
  return "unknown";
}

std::span<const FieldSpec> Fields() { return kFields; }
std::span<const TableSpec> Tables() { return kTables; }
std::span<const EnumSpec> EnumTypes() { return kEnums; }

int ColumnIndex(std::string_view table, std::string_view column) {
  int i = 0;
  for (const FieldSpec& f : kFields) {
    if (f.table != table) continue;
    if (f.name == column) return i;
    ++i;
  }
  return -1;
}

namespace {
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}
}  // namespace

std::string SchemaDdl() {
  std::string ddl;
  for (const EnumSpec& e : kEnums) {
    ddl += "CREATE TYPE " + std::string(e.name) + " AS ENUM (";
    for (size_t i = 0; i < e.values.size(); ++i) ddl += (i ? ", " : "") + Quote(e.values[i]);
    ddl += ");\n";
  }
  for (const TableSpec& t : kTables) {
    ddl += "CREATE TABLE " + std::string(t.name) + " (";
    bool first = true;
    for (const FieldSpec& f : kFields) {
      if (f.table != t.name) continue;
      ddl += (first ? "" : ", ") + std::string(f.name) + " " + std::string(f.sql_type);
      first = false;
    }
    if (!t.primary_key.empty()) ddl += ", PRIMARY KEY (" + std::string(t.primary_key) + ")";
    ddl += ");\n";
    ddl += "COMMENT ON TABLE " + std::string(t.name) + " IS " + Quote(t.description) + ";\n";
  }
  for (const FieldSpec& f : kFields) {
    ddl += "COMMENT ON COLUMN " + std::string(f.table) + "." + std::string(f.name) + " IS " +
           Quote(std::string(RoleName(f.role)) + ": " + std::string(f.description)) + ";\n";
  }
  return ddl;
}

}  // namespace collscope
