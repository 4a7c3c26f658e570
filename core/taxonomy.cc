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
    {"record_annotations", "",
     "The annotated step, phase and micro-batch and the ABI v7 user tag of the records that carry "
     "them (collscope plugin), by the record's file and line."},
    {"dump_stats", "",
     "Inspector dump_stats lines (v4.1 and later; the marker lines of v4.3/v4.4 streams): records "
     "written and dropped per dump."},
    {"proxy_ops", "",
     "One row per op-level proxy_trace record of Inspector v4.3/v4.4 "
     "(NCCL_INSPECTOR_ENABLE_PROXY=1):"
     " proxy_op_start, proxy_op_segment and the final proxy_op of a ProxyOp, the network proxy's "
     "work on one channel towards one peer. Key a ProxyOp by (process, comm, rank, proxy_op_sn). "
     "Times are CPU proxy-callback times, not GPU or NIC times."},
    {"proxy_steps", "",
     "One row per ProxyStep of Inspector v4.3/v4.4: each element of a proxy_op or proxy_op_segment "
     "record's steps[] (nested mode), and each flat proxy_step record. The phase durations tell "
     "which end of the link a step waited on; they need not add up to total_us."},
    {"ingests", "run_id, ingest_id", "One row per `collscope ingest` into a run."},
    {"ingest_log", "", "Every input line that was not stored, with the reason."},
    {"nccl_tests_files", "run_id, file_id",
     "One row per nccl-tests text log stored as (part of) a baseline run: the test and its "
     "preamble."},
    {"nccl_tests_results", "",
     "One row per nccl-tests data row and block (out-of-place, in-place) of a baseline run."},    {"kineto_traces", "run_id, trace_id",
     "One row per PyTorch profiler (Kineto) trace of a run: its rank, process groups and counts."},
    {"steps", "",
     "One row per rank and training step (iteration) with its wall-clock range: Kineto "
     "ProfilerStep#N ranges, with the GPU time attributed to the step, and the steps of "
     "step/phase series files (the annotation API's format)."},
    {"step_files", "run_id, file_id",
     "One row per step/phase series file (the annotation API's format) of a run."},
    {"step_ranks", "",
     "One row per process of a step/phase series file: its rank, host, pid and parallel "
     "coordinates."},
    {"step_phases", "",
     "One row per rank, step and named phase of a step/phase series file: its wall time and, "
     "where measured, its GPU time."},
    {"kernels", "",
     "One row per GPU activity (kernel, memcpy, memset) of a Kineto trace, with its step and, for "
     "NCCL kernels, PyTorch's collective metadata."},
    {"fr_dumps", "run_id, file_id",
     "One row per PyTorch NCCL Flight Recorder dump (pickle or JSON) of a run: the rank that wrote "
     "it. Hang evidence: what each rank had enqueued, started and completed."},
    {"fr_process_groups", "", "One row per process group a Flight Recorder dump lists (pg_config)."},
    {"fr_pg_status", "", "One row per process group of a Flight Recorder dump's pg_status."},
    {"fr_entries", "", "One row per collective or point-to-point entry of a Flight Recorder dump."},
    {"inflight_files", "run_id, file_id",
     "One row per collscope in-flight state file of a run (docs/capture.md): the process, its "
     "status and heartbeat. Hang evidence: what each process had in flight."},
    {"inflight_comms", "", "One row per communicator of an in-flight state file."},
    {"inflight_ops", "", "One row per operation in flight in a communicator of a state file."},
    {"ras_reports", "run_id, file_id",
     "One row per saved NCCL RAS status report (`ncclras` text or JSON output) of a run: its NCCL "
     "version, the job's size as RAS saw it, and what was read. Hang evidence: which ranks launched "
     "fewer operations, are missing, dead or in error. A report read again replaces its rows."},
    {"ras_comms", "", "One row per communicator a RAS report names."},
    {"ras_ranks", "",
     "One row per rank a RAS report names (or group of ranks the text form counts together, or "
     "job process of its INCOMPLETE and DEAD blocks) and NCCL function with a launched count."},
    {"prom_files", "run_id, file_id",
     "One row per NCCL Inspector Prometheus textfile (`nccl_inspector_metrics_<gpu-uuid>.prom`, one per GPU) of a run: its layout and what was read. A file read again replaces its rows (Inspector rewrites it in place)."},
    {"prom_samples", "",
     "One row per sample line of an NCCL Inspector Prometheus file. 2.29 files hold each communicator's latest collective; 2.30+ files hold per-dump aggregates per (nranks, n_nodes, collective, size bucket, comm_name, algo_proto): bus bandwidth as the geometric mean and execution time as the arithmetic mean of the operations drained in that dump, so a 2.30 value is a per-window mean, never one operation's value."},
    {"kernel_summary_files", "run_id, file_id",
     "One row per kernel-summary file of collscope's CUPTI library (docs/cupti.md) of a run: the "
     "process, its windows, what was read and the library's last counters."},
    {"kernel_summaries", "",
     "One row per window, GPU activity (kernel, memcpy, memset), device and stream of a "
     "kernel-summary file: exact count and duration totals, and the duration distribution's "
     "log-normal modes. Late summary lines of a window are added in."},
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
    // record_annotations
    {"record_annotations", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"record_annotations", "file_id", "INTEGER", R::kIdentifier, "derived", "File of the record."},
    {"record_annotations", "line", "UBIGINT", R::kCounter, "derived", "Line of the record."},
    {"record_annotations", "step", "BIGINT", R::kWorkload, "collscope.step",
     "Step current when the operation started (the annotation library), else NULL."},
    {"record_annotations", "phase", "VARCHAR", R::kWorkload, "collscope.phase",
     "Innermost annotated phase then ('' when none), NULL without a step."},
    {"record_annotations", "micro_batch", "INTEGER", R::kWorkload, "collscope.micro_batch",
     "Annotated micro-batch then, else NULL."},
    {"record_annotations", "user_tag", "UBIGINT", R::kConfiguration, "coll_user_tag|p2p_user_tag",
     "NCCL ABI v7 userProfilerTag of the call, else NULL."},
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
    // Columns added to a table after stores with it exist go at its end: an older store gets them
    // by ALTER TABLE ADD COLUMN, which appends (core/store.cc).
    {"dump_stats", "proxy_records", "UBIGINT", R::kCounter, "dump_stats.proxy_records",
     "Top-level proxy_trace lines that follow the marker (v4.3/v4.4 with proxy tracking on), "
     "NULL when the marker has no such key."},
    {"dump_stats", "proxy_dropped_total", "UBIGINT", R::kCounter, "dump_stats.proxy_dropped_total",
     "Proxy ring records (steps, starts, segments, finals) overwritten since start, NULL when the "
     "marker has no such key."},
    {"dump_stats", "proxy_dropped_since_last_dump", "UBIGINT", R::kCounter,
     "dump_stats.proxy_dropped_since_last_dump",
     "Proxy ring records overwritten since the last dump, NULL when the marker has no such key."},
    // proxy_ops
    {"proxy_ops", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"proxy_ops", "file_id", "INTEGER", R::kIdentifier, "derived", "File the line came from."},
    {"proxy_ops", "line", "UBIGINT", R::kCounter, "derived", "Line number in the file (1-based)."},
    {"proxy_ops", "process_id", "INTEGER", R::kIdentifier, "metadata",
     "Writing process (the marker's)."},
    {"proxy_ops", "comm_id", "INTEGER", R::kIdentifier, "header", "Communicator (the marker's)."},
    {"proxy_ops", "rank", "INTEGER", R::kIdentifier, "proxy_trace.rank|header.rank",
     "Rank within the communicator: the record's own (final proxy_op), else the marker's."},
    {"proxy_ops", "record_type", "VARCHAR", R::kWorkload, "proxy_trace.record_type",
     "proxy_op_start (nested mode: the op began), proxy_op_segment (nested mode: steps buffered "
     "so far) or proxy_op (the final record, with the op's metrics)."},
    {"proxy_ops", "record_sn", "UBIGINT", R::kCounter, "proxy_trace.record_sn",
     "Ring entry number per communicator; in v4.4 gaps do not imply loss."},
    {"proxy_ops", "parent_type", "VARCHAR", R::kWorkload, "proxy_trace.parent_type",
     "What the op serves: coll, p2p or unknown (names collscope does not know read as unknown)."},
    {"proxy_ops", "parent_sn", "UBIGINT", R::kCounter, "proxy_trace.parent_sn",
     "The parent's coll_sn or p2p_sn (records.sn)."},
    {"proxy_ops", "proxy_op_sn", "UBIGINT", R::kCounter, "proxy_trace.proxy_op_sn",
     "ProxyOp number per communicator (a dropped op leaves a gap); unique only with process, "
     "comm and rank."},
    {"proxy_ops", "channel_id", "INTEGER", R::kIdentifier, "proxy_trace.channel_id", "Channel."},
    {"proxy_ops", "peer", "INTEGER", R::kIdentifier, "proxy_trace.peer",
     "Rank of the other end of the link, in the communicator."},
    {"proxy_ops", "direction", "VARCHAR", R::kWorkload, "proxy_trace.direction", "send or recv."},
    {"proxy_ops", "n_steps", "UBIGINT", R::kWorkload, "proxy_trace.n_steps",
     "Steps the op was posted with."},
    {"proxy_ops", "chunk_size_bytes", "UBIGINT", R::kWorkload, "proxy_trace.chunk_size_bytes",
     "Largest slice one step moves (not the bytes moved: see trans_size_bytes)."},
    {"proxy_ops", "n_steps_completed", "UBIGINT", R::kMeasurement, "proxy_trace.n_steps_completed",
     "Steps that completed (final proxy_op)."},
    {"proxy_ops", "n_steps_dropped", "UBIGINT", R::kMeasurement, "proxy_trace.n_steps_dropped",
     "Steps not tracked (final proxy_op)."},
    {"proxy_ops", "trans_size_bytes", "UBIGINT", R::kMeasurement, "proxy_trace.trans_size_bytes",
     "Bytes observed moving (final proxy_op)."},
    {"proxy_ops", "total_us", "DOUBLE", R::kMeasurement, "proxy_trace.total_us",
     "Op stop minus start, microseconds (final proxy_op, v4.4)."},
    {"proxy_ops", "start_ts_us", "UBIGINT", R::kCounter, "event_trace_ts.proxy_op_start_ts",
     "Wall-clock microseconds the op started, when written."},
    {"proxy_ops", "stop_ts_us", "UBIGINT", R::kCounter, "event_trace_ts.proxy_op_stop_ts",
     "Wall-clock microseconds the op stopped, when written."},
    {"proxy_ops", "dump_ts_us", "UBIGINT", R::kCounter, "metadata.dump_timestamp_us",
     "Wall-clock microseconds the marker's dump was written."},
    // proxy_steps
    {"proxy_steps", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"proxy_steps", "file_id", "INTEGER", R::kIdentifier, "derived", "File the line came from."},
    {"proxy_steps", "line", "UBIGINT", R::kCounter, "derived",
     "Line number in the file (1-based) of the step's record."},
    {"proxy_steps", "process_id", "INTEGER", R::kIdentifier, "metadata",
     "Writing process (the marker's)."},
    {"proxy_steps", "comm_id", "INTEGER", R::kIdentifier, "header", "Communicator (the marker's)."},
    {"proxy_steps", "rank", "INTEGER", R::kIdentifier, "proxy_trace.rank|header.rank",
     "Rank within the communicator: the record's own (v4.3 flat steps, a final proxy_op's nested "
     "steps), else the marker's."},
    {"proxy_steps", "proxy_op_sn", "UBIGINT", R::kCounter, "proxy_trace.proxy_op_sn",
     "The step's ProxyOp (proxy_ops.proxy_op_sn)."},
    {"proxy_steps", "parent_type", "VARCHAR", R::kWorkload, "proxy_trace.parent_type",
     "What the op serves: coll, p2p or unknown (a nested step's from its record)."},
    {"proxy_steps", "parent_sn", "UBIGINT", R::kCounter, "proxy_trace.parent_sn",
     "The parent's coll_sn or p2p_sn."},
    {"proxy_steps", "channel_id", "INTEGER", R::kIdentifier, "proxy_trace.channel_id",
     "Channel (a nested step's from its record)."},
    {"proxy_steps", "peer", "INTEGER", R::kIdentifier, "proxy_trace.peer",
     "Rank of the other end of the link (a nested step's from its record)."},
    {"proxy_steps", "direction", "VARCHAR", R::kWorkload, "proxy_trace.direction",
     "send or recv (a nested step's from its record)."},
    {"proxy_steps", "proxy_step_sn", "UBIGINT", R::kCounter, "proxy_step_sn",
     "Step record number."},
    {"proxy_steps", "step", "INTEGER", R::kCounter, "step", "Step index within the op."},
    {"proxy_steps", "trans_size_bytes", "UBIGINT", R::kMeasurement, "trans_size_bytes",
     "Bytes observed for the step (first transfer-size callback)."},
    {"proxy_steps", "total_us", "DOUBLE", R::kMeasurement, "total_us",
     "Step stop minus start, microseconds (v4.4)."},
    {"proxy_steps", "gpu_produce_us", "DOUBLE", R::kMeasurement, "gpu_produce_us",
     "Send: waiting for the GPU to produce the data, microseconds."},
    {"proxy_steps", "peer_credit_us", "DOUBLE", R::kMeasurement, "peer_credit_us",
     "Send: waiting for the receiver's credit, microseconds."},
    {"proxy_steps", "wire_us", "DOUBLE", R::kMeasurement, "wire_us",
     "On the network, microseconds (send: send wait to stop; recv: recv wait to flush wait)."},
    {"proxy_steps", "flush_us", "DOUBLE", R::kMeasurement, "flush_us",
     "Recv: flushing received data, microseconds."},
    {"proxy_steps", "gpu_consume_us", "DOUBLE", R::kMeasurement, "gpu_consume_us",
     "Recv: waiting for the GPU to consume the data, microseconds."},
    {"proxy_steps", "stop_ts_us", "UBIGINT", R::kCounter, "event_trace_ts.proxy_step_stop_ts",
     "Wall-clock microseconds the step stopped, when written."},
    {"proxy_steps", "dump_ts_us", "UBIGINT", R::kCounter, "metadata.dump_timestamp_us",
     "Wall-clock microseconds the marker's dump was written."},
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
    // nccl_tests_files
    {"nccl_tests_files", "run_id", "INTEGER", R::kIdentifier, "derived", "Baseline run."},
    {"nccl_tests_files", "file_id", "INTEGER", R::kIdentifier, "derived",
     "Log number within the run."},
    {"nccl_tests_files", "path", "VARCHAR", R::kProvenance, "file system",
     "Absolute path of the log."},
    {"nccl_tests_files", "test", "VARCHAR", R::kConfiguration, "preamble|file name",
     "Test program (all_reduce_perf, ...) or the log's file name when the preamble does not say."},
    {"nccl_tests_files", "op", "coll_op", R::kWorkload, "preamble|file name",
     "Collective of the (first) test in the log."},
    {"nccl_tests_files", "n_ranks", "INTEGER", R::kConfiguration, "# Rank lines",
     "Ranks of the test (device lines of the preamble)."},
    {"nccl_tests_files", "nnodes", "INTEGER", R::kConfiguration, "# Rank lines",
     "Distinct hosts of the device lines."},
    {"nccl_tests_files", "n_threads", "INTEGER", R::kConfiguration, "# nThread",
     "Threads per process (nThread)."},
    {"nccl_tests_files", "n_gpus", "INTEGER", R::kConfiguration, "# nGpus",
     "GPUs per thread (nGpus)."},
    {"nccl_tests_files", "min_bytes", "UBIGINT", R::kConfiguration, "# minBytes",
     "Smallest size of the sweep."},
    {"nccl_tests_files", "max_bytes", "UBIGINT", R::kConfiguration, "# maxBytes",
     "Largest size of the sweep."},
    {"nccl_tests_files", "warmup_iters", "INTEGER", R::kConfiguration, "# warmup iters",
     "Warm-up iterations per size."},
    {"nccl_tests_files", "iters", "INTEGER", R::kConfiguration, "# iters",
     "Timed iterations per size (each row is their average)."},
    {"nccl_tests_files", "gpu", "VARCHAR", R::kConfiguration, "# Rank lines",
     "GPU name of the first device line."},
    {"nccl_tests_files", "avg_busbw_gbs", "DOUBLE", R::kMeasurement, "# Avg bus bandwidth",
     "The log's own average bus bandwidth (GB/s) over every row and block."},
    {"nccl_tests_files", "out_of_bounds", "BIGINT", R::kMeasurement, "# Out of bounds values",
     "Out-of-bounds values reported by the test."},
    {"nccl_tests_files", "skipped_lines", "INTEGER", R::kProvenance, "derived",
     "Lines neither preamble nor data (interleaved NCCL INFO lines)."},
    // nccl_tests_results
    {"nccl_tests_results", "run_id", "INTEGER", R::kIdentifier, "derived", "Baseline run."},
    {"nccl_tests_results", "file_id", "INTEGER", R::kIdentifier, "derived", "Log of the row."},
    {"nccl_tests_results", "line", "UBIGINT", R::kCounter, "derived",
     "Line of the row in the log (1-based)."},
    {"nccl_tests_results", "op", "coll_op", R::kWorkload, "preamble|file name",
     "Collective, as NCCL names it."},
    {"nccl_tests_results", "size_bytes", "UBIGINT", R::kWorkload, "size",
     "The size column: max(send, recv) bytes, the total over ranks for AllGather and "
     "ReduceScatter."},
    {"nccl_tests_results", "count", "UBIGINT", R::kWorkload, "count", "Elements per rank."},
    {"nccl_tests_results", "dtype", "VARCHAR", R::kWorkload, "type", "Data type."},
    {"nccl_tests_results", "redop", "VARCHAR", R::kWorkload, "redop",
     "Reduction operation, NULL when the test has none."},
    {"nccl_tests_results", "root", "INTEGER", R::kWorkload, "root",
     "Root rank of rooted tests (-1 when not rooted), NULL when the test prints none."},
    {"nccl_tests_results", "in_place", "BOOLEAN", R::kWorkload, "table block",
     "True for the in-place block of the row, false for out-of-place."},
    {"nccl_tests_results", "time_us", "DOUBLE", R::kMeasurement, "time",
     "Average time per operation, microseconds."},
    {"nccl_tests_results", "algbw_gbs", "DOUBLE", R::kMeasurement, "algbw",
     "Algorithm bandwidth as printed (GB/s)."},
    {"nccl_tests_results", "busbw_gbs", "DOUBLE", R::kMeasurement, "busbw",
     "Bus bandwidth as printed (GB/s)."},
    {"nccl_tests_results", "n_wrong", "BIGINT", R::kMeasurement, "#wrong",
     "Wrong elements found by validation, NULL when printed as N/A."},
    {"nccl_tests_results", "n_ranks", "INTEGER", R::kConfiguration, "# Rank lines",
     "Ranks of the test."},
    {"nccl_tests_results", "nnodes", "INTEGER", R::kConfiguration, "# Rank lines",
     "Hosts of the test."},
    {"nccl_tests_results", "msg_size_bytes", "UBIGINT", R::kWorkload, "derived",
     "The size as Inspector records it (coll_msg_size_bytes): size_bytes / n_ranks for "
     "AllGather, ReduceScatter and AlltoAll, else size_bytes; what production is matched on."},    // kineto_traces
    {"kineto_traces", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"kineto_traces", "trace_id", "INTEGER", R::kIdentifier, "derived",
     "Trace number within the run."},
    {"kineto_traces", "path", "VARCHAR", R::kProvenance, "file system",
     "Absolute path of the trace file."},
    {"kineto_traces", "rank", "INTEGER", R::kIdentifier, "distributedInfo.rank",
     "Global rank of the traced process."},
    {"kineto_traces", "rank_source", "VARCHAR", R::kProvenance, "derived",
     "Where rank came from: distributedInfo, or file order when the trace has none."},
    {"kineto_traces", "world_size", "INTEGER", R::kConfiguration, "distributedInfo.world_size",
     "Ranks of the job, NULL when absent."},
    {"kineto_traces", "hostname", "VARCHAR", R::kIdentifier, "file name",
     "Host from a HOST_PID.MS.pt.trace.json file name (PyTorch's default), else NULL."},
    {"kineto_traces", "pid", "BIGINT", R::kIdentifier, "traceEvents[].pid",
     "CPU process id of the ProfilerStep events, NULL when the trace has none."},
    {"kineto_traces", "device_name", "VARCHAR", R::kConfiguration, "deviceProperties[].name",
     "GPU model of the trace's device, NULL when absent."},
    {"kineto_traces", "nccl_version", "VARCHAR", R::kConfiguration,
     "distributedInfo.nccl_version", "NCCL version, NULL when absent."},
    {"kineto_traces", "pg_config", "VARCHAR", R::kConfiguration, "distributedInfo.pg_config",
     "Process groups (name, description, ranks) as minified JSON, NULL when absent."},
    {"kineto_traces", "base_time_ns", "BIGINT", R::kCounter, "baseTimeNanoseconds",
     "Offset of every ts (wall clock = base_time_ns / 1000 + ts), 0 when absent."},
    {"kineto_traces", "events", "UBIGINT", R::kCounter, "traceEvents", "Events in the trace."},
    {"kineto_traces", "steps", "INTEGER", R::kCounter, "derived", "ProfilerStep ranges stored."},
    {"kineto_traces", "kernels", "UBIGINT", R::kCounter, "derived", "GPU activities stored."},
    // steps
    {"steps", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"steps", "trace_id", "INTEGER", R::kIdentifier, "derived", "Kineto trace of the step."},
    {"steps", "rank", "INTEGER", R::kIdentifier, "kineto_traces.rank", "Global rank."},
    {"steps", "step", "BIGINT", R::kCounter, "ProfilerStep#N", "Step (iteration) number."},
    {"steps", "start_us", "DOUBLE", R::kCounter, "ts",
     "Wall-clock microseconds the step's CPU range started."},
    {"steps", "dur_us", "DOUBLE", R::kMeasurement, "dur",
     "Duration of the step's CPU range, microseconds."},
    {"steps", "source", "VARCHAR", R::kProvenance, "derived",
     "What marked the step: kineto (ProfilerStep#N) or annotation (a step/phase series file)."},
    {"steps", "n_kernels", "INTEGER", R::kCounter, "derived",
     "GPU activities attributed to the step."},
    {"steps", "compute_us", "DOUBLE", R::kMeasurement, "derived",
     "Summed duration of the step's compute kernels, microseconds."},
    {"steps", "nccl_us", "DOUBLE", R::kMeasurement, "derived",
     "Summed duration of the step's NCCL kernels, microseconds."},
    {"steps", "gpu_end_us", "DOUBLE", R::kCounter, "derived",
     "Wall-clock microseconds the step's last GPU activity ended, NULL when it has none."},
    {"steps", "file_id", "INTEGER", R::kIdentifier, "derived",
     "Step/phase series file of the step (step_files); NULL for Kineto steps."},
    // step_files
    {"step_files", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"step_files", "file_id", "INTEGER", R::kIdentifier, "derived", "File number within the run's step files."},
    {"step_files", "path", "VARCHAR", R::kProvenance, "file system", "Path of the file."},
    {"step_files", "bytes", "UBIGINT", R::kProvenance, "file system", "Size of the file when read."},
    {"step_files", "lines", "UBIGINT", R::kCounter, "derived", "Lines read."},
    {"step_files", "lines_rejected", "UBIGINT", R::kCounter, "derived",
     "Lines not stored (each is in ingest_log with its reason)."},
    {"step_files", "dropped_events", "UBIGINT", R::kCounter, "dropped.events",
     "Annotation events the writer's ring had to drop (its last \"dropped\" line)."},
    // step_ranks
    {"step_ranks", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"step_ranks", "file_id", "INTEGER", R::kIdentifier, "derived", "Step file."},
    {"step_ranks", "rank", "INTEGER", R::kIdentifier, "process.rank", "Global rank (-1: unknown)."},
    {"step_ranks", "hostname", "VARCHAR", R::kIdentifier, "process.hostname", "Host of the process."},
    {"step_ranks", "pid", "BIGINT", R::kIdentifier, "process.pid", "Process id."},
    {"step_ranks", "world_size", "INTEGER", R::kConfiguration, "process.world_size", "Ranks in the job (-1: unknown)."},
    {"step_ranks", "local_rank", "INTEGER", R::kIdentifier, "process.local_rank", "Rank within the host, NULL when unknown."},
    {"step_ranks", "dp_rank", "INTEGER", R::kConfiguration, "process.parallel.dp[0]", "Data-parallel rank, NULL when not declared."},
    {"step_ranks", "dp_size", "INTEGER", R::kConfiguration, "process.parallel.dp[1]", "Data-parallel size."},
    {"step_ranks", "tp_rank", "INTEGER", R::kConfiguration, "process.parallel.tp[0]", "Tensor-parallel rank."},
    {"step_ranks", "tp_size", "INTEGER", R::kConfiguration, "process.parallel.tp[1]", "Tensor-parallel size."},
    {"step_ranks", "pp_rank", "INTEGER", R::kConfiguration, "process.parallel.pp[0]", "Pipeline stage."},
    {"step_ranks", "pp_size", "INTEGER", R::kConfiguration, "process.parallel.pp[1]", "Pipeline stages."},
    {"step_ranks", "ep_rank", "INTEGER", R::kConfiguration, "process.parallel.ep[0]", "Expert-parallel rank."},
    {"step_ranks", "ep_size", "INTEGER", R::kConfiguration, "process.parallel.ep[1]", "Expert-parallel size."},
    {"step_ranks", "cp_rank", "INTEGER", R::kConfiguration, "process.parallel.cp[0]", "Context-parallel rank."},
    {"step_ranks", "cp_size", "INTEGER", R::kConfiguration, "process.parallel.cp[1]", "Context-parallel size."},
    // step_phases
    {"step_phases", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"step_phases", "file_id", "INTEGER", R::kIdentifier, "derived", "Step file."},
    {"step_phases", "rank", "INTEGER", R::kIdentifier, "step.rank", "Global rank."},
    {"step_phases", "step", "BIGINT", R::kCounter, "step.step", "Step (iteration) number."},
    {"step_phases", "phase", "VARCHAR", R::kWorkload, "step.phases[].name", "Phase name as the framework gave it."},
    {"step_phases", "start_us", "DOUBLE", R::kCounter, "step.phases[].start_us",
     "Wall-clock microseconds the phase first began in the step."},
    {"step_phases", "wall_us", "DOUBLE", R::kMeasurement, "step.phases[].wall_us",
     "Host wall time in the phase during the step, microseconds (may include waiting and overlapped communication)."},
    {"step_phases", "count", "INTEGER", R::kCounter, "step.phases[].count", "Times the phase ran in the step."},
    {"step_phases", "gpu_us", "DOUBLE", R::kMeasurement, "gpu.gpu_us",
     "GPU time of the phase in the step, microseconds; NULL where not measured."},
    // kernels
    {"kernels", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"kernels", "trace_id", "INTEGER", R::kIdentifier, "derived", "Kineto trace."},
    {"kernels", "rank", "INTEGER", R::kIdentifier, "kineto_traces.rank", "Global rank."},
    {"kernels", "step", "BIGINT", R::kCounter, "derived",
     "Step whose CPU range launched it (cuda_runtime correlation), else the last step started "
     "before it ran; NULL outside every step."},
    {"kernels", "name", "VARCHAR", R::kWorkload, "name", "Kernel name as CUPTI reports it."},
    {"kernels", "kind", "VARCHAR", R::kWorkload, "cat|name",
     "compute, nccl (an NCCL kernel), memcpy or memset."},
    {"kernels", "device", "INTEGER", R::kIdentifier, "args.device", "CUDA device."},
    {"kernels", "stream", "INTEGER", R::kIdentifier, "args.stream|tid", "CUDA stream."},
    {"kernels", "start_us", "DOUBLE", R::kCounter, "ts",
     "Wall-clock microseconds the activity started on the GPU."},
    {"kernels", "dur_us", "DOUBLE", R::kMeasurement, "dur", "GPU duration, microseconds."},
    {"kernels", "correlation", "BIGINT", R::kIdentifier, "args.correlation",
     "CUPTI correlation id linking it to its launch, NULL when absent."},
    {"kernels", "coll", "VARCHAR", R::kWorkload, "args.Collective name",
     "Collective as PyTorch names it (allreduce, _allgather_base, ...), NULL when absent."},
    {"kernels", "in_nelems", "BIGINT", R::kWorkload, "args.In msg nelems",
     "Input elements of the collective, NULL when absent."},
    {"kernels", "out_nelems", "BIGINT", R::kWorkload, "args.Out msg nelems",
     "Output elements of the collective, NULL when absent."},
    {"kernels", "group_size", "INTEGER", R::kConfiguration, "args.Group size",
     "Ranks of the process group, NULL when absent."},
    {"kernels", "dtype", "VARCHAR", R::kWorkload, "args.dtype",
     "Element type (Float, BFloat16, ...), NULL when absent."},
    {"kernels", "pg_name", "VARCHAR", R::kConfiguration, "args.Process Group Name",
     "Process group name, NULL when absent."},
    {"kernels", "pg_desc", "VARCHAR", R::kConfiguration, "args.Process Group Description",
     "Process group description (default_pg, DATA_PARALLEL_GROUP, ...), NULL when absent."},
    {"kernels", "pg_ranks", "VARCHAR", R::kConfiguration, "args.Process Group Ranks",
     "Global ranks of the process group as printed ([0, 1, ...]), NULL when absent."},
    // fr_dumps
    {"fr_dumps", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"fr_dumps", "file_id", "INTEGER", R::kIdentifier, "derived", "Dump number within the run's dumps."},
    {"fr_dumps", "path", "VARCHAR", R::kProvenance, "file system", "Path of the dump."},
    {"fr_dumps", "bytes", "UBIGINT", R::kProvenance, "file system", "Size of the dump when read."},
    {"fr_dumps", "rank", "INTEGER", R::kIdentifier, "rank (else the name's suffix)", "Global rank that wrote the dump."},
    {"fr_dumps", "version", "VARCHAR", R::kProvenance, "version", "Flight Recorder format version."},
    {"fr_dumps", "nccl_version", "VARCHAR", R::kConfiguration, "nccl_version", "NCCL version of the process."},
    // fr_process_groups
    {"fr_process_groups", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"fr_process_groups", "file_id", "INTEGER", R::kIdentifier, "derived", "Dump (fr_dumps)."},
    {"fr_process_groups", "pg_name", "VARCHAR", R::kIdentifier, "pg_config.name", "Process group name."},
    {"fr_process_groups", "pg_desc", "VARCHAR", R::kConfiguration, "pg_config.desc", "Process group description."},
    {"fr_process_groups", "ranks", "INTEGER[]", R::kConfiguration, "pg_config.ranks", "Global ranks of the group's members."},
    // fr_pg_status
    {"fr_pg_status", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"fr_pg_status", "file_id", "INTEGER", R::kIdentifier, "derived", "Dump (fr_dumps)."},
    {"fr_pg_status", "pg_id", "BIGINT", R::kIdentifier, "pg_status key", "The dumping rank's local process-group id."},
    {"fr_pg_status", "last_enqueued", "BIGINT", R::kCounter, "last_enqueued_collective", "Last collective enqueued (-1: none)."},
    {"fr_pg_status", "last_started", "BIGINT", R::kCounter, "last_started_collective", "Last collective started (-1: none)."},
    {"fr_pg_status", "last_completed", "BIGINT", R::kCounter, "last_completed_collective", "Last collective completed (-1: none)."},
    // fr_entries
    {"fr_entries", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"fr_entries", "file_id", "INTEGER", R::kIdentifier, "derived", "Dump (fr_dumps)."},
    {"fr_entries", "record_id", "BIGINT", R::kIdentifier, "record_id", "Entry number in the rank's ring."},
    {"fr_entries", "pg_id", "BIGINT", R::kIdentifier, "pg_id", "The dumping rank's local process-group id."},
    {"fr_entries", "pg_name", "VARCHAR", R::kIdentifier, "process_group[0]", "Process group name."},
    {"fr_entries", "pg_desc", "VARCHAR", R::kConfiguration, "process_group[1]", "Process group description."},
    {"fr_entries", "collective_seq_id", "BIGINT", R::kIdentifier, "collective_seq_id", "Collective sequence number in the group (-1: none)."},
    {"fr_entries", "p2p_seq_id", "BIGINT", R::kIdentifier, "p2p_seq_id", "Point-to-point sequence number (-1: none)."},
    {"fr_entries", "op_id", "BIGINT", R::kIdentifier, "op_id", "Operation number (-1: none)."},
    {"fr_entries", "profiling_name", "VARCHAR", R::kWorkload, "profiling_name", "Operation, e.g. nccl:all_reduce."},
    {"fr_entries", "is_p2p", "BOOLEAN", R::kWorkload, "is_p2p", "A point-to-point operation."},
    {"fr_entries", "state", "VARCHAR", R::kMeasurement, "state", "scheduled, started or completed."},
    {"fr_entries", "retired", "BOOLEAN", R::kMeasurement, "retired", "The entry's work was retired."},
    {"fr_entries", "time_created_ns", "BIGINT", R::kMeasurement, "time_created_ns", "When the entry was created (ns since the epoch)."},
    {"fr_entries", "timeout_ms", "BIGINT", R::kConfiguration, "timeout_ms", "The operation's timeout."},
    {"fr_entries", "input_sizes", "VARCHAR", R::kWorkload, "input_sizes", "Input tensor shapes, e.g. 4027x5120 (tensors joined by ;)."},
    {"fr_entries", "output_sizes", "VARCHAR", R::kWorkload, "output_sizes", "Output tensor shapes."},
    {"fr_entries", "input_dtypes", "VARCHAR", R::kWorkload, "input_dtypes", "Input tensor types."},
    {"fr_entries", "output_dtypes", "VARCHAR", R::kWorkload, "output_dtypes", "Output tensor types."},
    // inflight_files
    {"inflight_files", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"inflight_files", "file_id", "INTEGER", R::kIdentifier, "derived", "State file number within the run's state files."},
    {"inflight_files", "path", "VARCHAR", R::kProvenance, "file system", "Path of the state file."},
    {"inflight_files", "bytes", "UBIGINT", R::kProvenance, "file system", "Size of the file when read."},
    {"inflight_files", "hostname", "VARCHAR", R::kIdentifier, "hostname", "Host of the process."},
    {"inflight_files", "pid", "BIGINT", R::kIdentifier, "pid", "Process id."},
    {"inflight_files", "global_rank", "INTEGER", R::kIdentifier, "global_rank", "Global rank (-1: the launcher set none)."},
    {"inflight_files", "status", "VARCHAR", R::kMeasurement, "status", "running, or how the process ended."},
    {"inflight_files", "heartbeat_ts_us", "BIGINT", R::kMeasurement, "heartbeat_ts_us", "When the process last wrote the file (us since the epoch)."},
    // inflight_comms
    {"inflight_comms", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"inflight_comms", "file_id", "INTEGER", R::kIdentifier, "derived", "State file (inflight_files)."},
    {"inflight_comms", "comm_index", "INTEGER", R::kIdentifier, "derived", "Position of the communicator in its file."},
    {"inflight_comms", "comm_id", "VARCHAR", R::kIdentifier, "comms[].id", "Communicator id (the plugin's hash)."},
    {"inflight_comms", "comm_name", "VARCHAR", R::kIdentifier, "comms[].comm_name", "Communicator name, empty when unnamed."},
    {"inflight_comms", "rank", "INTEGER", R::kIdentifier, "comms[].rank", "The process's rank in the communicator."},
    {"inflight_comms", "n_ranks", "INTEGER", R::kConfiguration, "comms[].n_ranks", "Ranks in the communicator."},
    {"inflight_comms", "ops_started", "UBIGINT", R::kCounter, "comms[].ops_started", "Operations started."},
    {"inflight_comms", "ops_completed", "UBIGINT", R::kCounter, "comms[].ops_completed", "Operations completed."},
    {"inflight_comms", "finalized", "BOOLEAN", R::kMeasurement, "finalized_comms", "Finalized (aborted) with operations in flight."},
    // inflight_ops
    {"inflight_ops", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"inflight_ops", "file_id", "INTEGER", R::kIdentifier, "derived", "State file (inflight_files)."},
    {"inflight_ops", "comm_index", "INTEGER", R::kIdentifier, "derived", "Communicator (inflight_comms)."},
    {"inflight_ops", "kind", "VARCHAR", R::kWorkload, "inflight[].kind", "coll or p2p."},
    {"inflight_ops", "op", "VARCHAR", R::kWorkload, "inflight[].op", "NCCL function."},
    {"inflight_ops", "sn", "BIGINT", R::kIdentifier, "inflight[].sn", "coll_sn (per function) or p2p_sn."},
    {"inflight_ops", "peer", "INTEGER", R::kWorkload, "inflight[].peer", "Point-to-point peer's communicator rank (-1: none)."},
    {"inflight_ops", "msg_size_bytes", "BIGINT", R::kWorkload, "inflight[].msg_size_bytes", "Message size."},
    {"inflight_ops", "n_channels", "INTEGER", R::kConfiguration, "inflight[].n_channels", "Channels of the operation."},
    {"inflight_ops", "channels_started", "INTEGER", R::kMeasurement, "inflight[].channels_started", "Channels whose kernel started."},
    {"inflight_ops", "channels_stopped", "INTEGER", R::kMeasurement, "inflight[].channels_stopped", "Channels whose kernel stopped."},
    {"inflight_ops", "start_ts_us", "BIGINT", R::kMeasurement, "inflight[].start_ts_us", "When the operation started (us since the epoch; 0: not yet)."},
    {"inflight_ops", "enqueue_ts_us", "BIGINT", R::kMeasurement, "inflight[].enqueue_ts_us", "When the operation was enqueued (us since the epoch)."},
    // ras_reports
    {"ras_reports", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"ras_reports", "file_id", "INTEGER", R::kIdentifier, "derived", "Report number within the run's RAS reports."},
    {"ras_reports", "path", "VARCHAR", R::kProvenance, "file system", "Path of the report."},
    {"ras_reports", "bytes", "UBIGINT", R::kProvenance, "file system", "Size of the file when read."},
    {"ras_reports", "format", "VARCHAR", R::kConfiguration, "derived", "text or json (a status report), monitor or monitor-json (a MONITOR event log)."},
    {"ras_reports", "nccl_version", "VARCHAR", R::kConfiguration, "NCCL version / nccl_version", "NCCL version of the process that answered."},
    {"ras_reports", "timestamp", "VARCHAR", R::kCounter, "timestamp", "When the report was made (JSON only; server local time, no zone)."},
    {"ras_reports", "job_processes", "BIGINT", R::kConfiguration, "Job summary", "Processes in the job (text Job summary; -1: not given)."},
    {"ras_reports", "job_nodes", "BIGINT", R::kConfiguration, "Job summary", "Nodes in the job (-1: not given)."},
    {"ras_reports", "collection_s", "DOUBLE", R::kMeasurement, "Communicators... (Xs) / ras.collection_time_sec", "Seconds RAS took to gather the data (-1: not given)."},
    {"ras_reports", "timeouts", "BIGINT", R::kMeasurement, "TIMEOUT / ras.timeouts_count", "Timeouts while gathering: the data may be incomplete."},
    {"ras_reports", "lines", "UBIGINT", R::kCounter, "derived", "Lines (text) or values (JSON) read."},
    {"ras_reports", "lines_unused", "UBIGINT", R::kCounter, "derived", "Lines or values not understood (`collscope ingest` names them)."},
    // ras_comms
    {"ras_comms", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"ras_comms", "file_id", "INTEGER", R::kIdentifier, "derived", "RAS report (ras_reports)."},
    {"ras_comms", "comm_index", "INTEGER", R::kIdentifier, "derived", "Position of the communicator in its report."},
    {"ras_comms", "comm_hash", "VARCHAR", R::kIdentifier, "#g-c (hash) / communicators[].hash", "Communicator hash as 0x and 16 hex digits."},
    {"ras_comms", "label", "VARCHAR", R::kIdentifier, "#g-c", "Group and communicator index in the text form, empty in JSON."},
    {"ras_comms", "size", "INTEGER", R::kConfiguration, "Ranks per comm / size", "Ranks in the communicator (-1: unknown)."},
    {"ras_comms", "ranks_reported", "INTEGER", R::kMeasurement, "ranks_count", "Ranks that answered (-1: unknown)."},
    {"ras_comms", "missing_ranks", "INTEGER", R::kMeasurement, "Missing communicator data from N rank(s) / missing_ranks_count", "Ranks the report is missing (-1: unknown)."},
    {"ras_comms", "status", "VARCHAR", R::kMeasurement, "Status", "The text form's group status (INIT, RUNNING, FINALIZE, ABORT, NOCOMM); empty when unknown."},
    {"ras_comms", "errors", "VARCHAR", R::kMeasurement, "Errors", "The text form's group errors (OK, MISMATCH, INCOMPLETE,ERROR, ...); empty when unknown."},
    // ras_ranks
    {"ras_ranks", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"ras_ranks", "file_id", "INTEGER", R::kIdentifier, "derived", "RAS report (ras_reports)."},
    {"ras_ranks", "comm_index", "INTEGER", R::kIdentifier, "derived", "Communicator (ras_comms); -1 for a job process of an INCOMPLETE or DEAD block."},
    {"ras_ranks", "entry", "INTEGER", R::kIdentifier, "derived", "Position of the rank (or group, or process) in its communicator's list."},
    {"ras_ranks", "rank", "INTEGER", R::kIdentifier, "Rank R / ranks[].rank", "Rank within the communicator; -1 for a group of ranks or a job process."},
    {"ras_ranks", "n_ranks", "INTEGER", R::kMeasurement, "N ranks ...", "Ranks the row stands for (1 for a named rank)."},
    {"ras_ranks", "host", "VARCHAR", R::kIdentifier, "on node H / host", "Node of the rank's process; empty when unknown."},
    {"ras_ranks", "pid", "BIGINT", R::kIdentifier, "process P / pid", "Process id (-1: unknown)."},
    {"ras_ranks", "cuda_dev", "INTEGER", R::kIdentifier, "GPU g / cuda_dev", "CUDA device (-1: unknown)."},
    {"ras_ranks", "nvml_dev", "INTEGER", R::kIdentifier, "(NVML n) / nvml_dev", "NVML device (-1: unknown)."},
    {"ras_ranks", "state", "VARCHAR", R::kMeasurement, "derived",
     "ok, missing, unresponsive, dead, error, or the status a status MISMATCH gave (INIT, FINALIZE, ABORT, ...)."},
    {"ras_ranks", "detail", "VARCHAR", R::kMeasurement, "reported ... / status", "The error text, status or reason; a job process's GPU list."},
    {"ras_ranks", "func", "VARCHAR", R::kWorkload, "<Func> operation counts / collective_counts",
     "NCCL function of the launched count (collective: 2.24's one count); empty when the row has none."},
    {"ras_ranks", "launched", "BIGINT", R::kCounter, "launched up to operation K / collective_counts",
     "Operations of the function launched (not completed); -1 when the row has none."},
    {"ras_ranks", "events", "VARCHAR", R::kMeasurement, "MONITOR events",
     "A MONITOR log's events about the process, oldest first (time EVENT: details; ...); empty for a status report."},
    // prom_files
    {"prom_files", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"prom_files", "file_id", "INTEGER", R::kIdentifier, "derived", "File number within the run's Prometheus files."},
    {"prom_files", "path", "VARCHAR", R::kProvenance, "file system", "Path of the file."},
    {"prom_files", "bytes", "UBIGINT", R::kProvenance, "file system", "Size of the file when read."},
    {"prom_files", "layout", "VARCHAR", R::kConfiguration, "derived", "2.29, 2.30, mixed, or empty with no samples."},
    {"prom_files", "lines", "UBIGINT", R::kCounter, "derived", "Complete lines read."},
    {"prom_files", "samples", "UBIGINT", R::kCounter, "derived", "Samples stored (prom_samples)."},
    {"prom_files", "lines_unused", "UBIGINT", R::kCounter, "derived", "Lines or label values not understood (`collscope ingest` names them)."},
    {"prom_files", "incomplete_tail_bytes", "UBIGINT", R::kProvenance, "derived", "Bytes of an unfinished last line (a write caught half done), not read."},
    // prom_samples
    {"prom_samples", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"prom_samples", "file_id", "INTEGER", R::kIdentifier, "derived", "File (prom_files)."},
    {"prom_samples", "line", "UBIGINT", R::kProvenance, "derived", "Line number in the file (dumps appended to one file follow each other)."},
    {"prom_samples", "metric", "VARCHAR", R::kConfiguration, "metric name", "Metric name (nccl_bus_bandwidth_gbs, nccl_collective_exec_time_microseconds, nccl_collectives_total, ...)."},
    {"prom_samples", "layout", "VARCHAR", R::kConfiguration, "labels", "2.29 (hostname, comm_id, rank labels: latest collective) or 2.30 (version label: per-dump aggregate)."},
    {"prom_samples", "node", "VARCHAR", R::kIdentifier, "node / hostname", "Host that wrote the sample."},
    {"prom_samples", "gpu", "VARCHAR", R::kIdentifier, "gpu / gpu_device_id", "CUDA device as GPU<n>; empty when absent."},
    {"prom_samples", "comm_name", "VARCHAR", R::kIdentifier, "comm_name", "Communicator name (2.30), else NULL."},
    {"prom_samples", "comm_id", "VARCHAR", R::kIdentifier, "comm_id", "Communicator hash (2.29), else NULL."},
    {"prom_samples", "rank", "INTEGER", R::kIdentifier, "rank", "Rank within the communicator (2.29), else NULL."},
    {"prom_samples", "n_nodes", "INTEGER", R::kConfiguration, "n_nodes", "Nodes of the communicator, NULL when absent or unreadable."},
    {"prom_samples", "nranks", "INTEGER", R::kConfiguration, "nranks", "Ranks of the communicator, NULL when absent or unreadable."},
    {"prom_samples", "op", "VARCHAR", R::kWorkload, "collective / p2p_operation", "NCCL function, NULL for the counters."},
    {"prom_samples", "coll_sn", "UBIGINT", R::kCounter, "coll_sn", "Sequence number of the collective (2.29), else NULL."},
    {"prom_samples", "message_size", "VARCHAR", R::kWorkload, "message_size", "Message size as written: 2.29 the size (2.00GB), 2.30 the bucket (4-5GB, 0B)."},
    {"prom_samples", "size_lo_bytes", "UBIGINT", R::kWorkload, "message_size", "Bytes: 2.30 the bucket's lower bound, 2.29 the size (to the two decimals written); NULL when absent or unreadable."},
    {"prom_samples", "size_hi_bytes", "UBIGINT", R::kWorkload, "message_size", "Bytes: 2.30 the bucket's upper bound (exclusive), 2.29 the size again; NULL when absent or unreadable."},
    {"prom_samples", "algo_proto", "VARCHAR", R::kConfiguration, "algo_proto", "Algorithm and protocol (RING_SIMPLE) of a 2.30 collective bucket, else NULL."},
    {"prom_samples", "slurm_job_id", "VARCHAR", R::kIdentifier, "slurm_job_id", "Slurm job id as written (unknown when unset), NULL when absent."},
    {"prom_samples", "ts_us", "BIGINT", R::kCounter, "timestamp / exposition timestamp", "Microseconds since the epoch: 2.29's timestamp label (when the dump wrote the line), else the line's timestamp; NULL when neither."},
    {"prom_samples", "value", "DOUBLE", R::kMeasurement, "value", "The value as written (NaN and +-Inf kept): 2.29 one operation's, 2.30 a mean over the dump's window, counters a running count."},
    {"prom_samples", "labels", "VARCHAR", R::kProvenance, "labels", "Every label as written (unescaped), as a JSON object."},
    // kernel_summary_files
    {"kernel_summary_files", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"kernel_summary_files", "file_id", "INTEGER", R::kIdentifier, "derived", "File number within the run's kernel-summary files."},
    {"kernel_summary_files", "path", "VARCHAR", R::kProvenance, "file system", "Path of the file."},
    {"kernel_summary_files", "bytes", "UBIGINT", R::kProvenance, "file system", "Size of the file when read."},
    {"kernel_summary_files", "host", "VARCHAR", R::kIdentifier, "process.host", "Host of the process."},
    {"kernel_summary_files", "pid", "BIGINT", R::kIdentifier, "process.pid", "Process id."},
    {"kernel_summary_files", "rank", "INTEGER", R::kIdentifier, "process.rank", "Global rank, NULL when the launcher set none."},
    {"kernel_summary_files", "local_rank", "INTEGER", R::kIdentifier, "process.local_rank", "Rank within the host, NULL when unknown."},
    {"kernel_summary_files", "world_size", "INTEGER", R::kConfiguration, "process.world_size", "Ranks in the job, NULL when unknown."},
    {"kernel_summary_files", "window_kind", "VARCHAR", R::kConfiguration, "process.window",
     "step (windows are the annotated training steps) or time (fixed time windows)."},
    {"kernel_summary_files", "window_ms", "BIGINT", R::kConfiguration, "process.window_ms", "Length of a time window, milliseconds."},
    {"kernel_summary_files", "clock", "VARCHAR", R::kConfiguration, "process.clock", "Clock of the timestamps (realtime: Unix epoch)."},
    {"kernel_summary_files", "lines", "UBIGINT", R::kCounter, "derived", "Lines read."},
    {"kernel_summary_files", "lines_rejected", "UBIGINT", R::kCounter, "derived",
     "Lines not stored (each is in ingest_log with its reason)."},
    {"kernel_summary_files", "lines_unknown", "UBIGINT", R::kCounter, "derived",
     "Lines of a type this collscope does not know (a later writer's), skipped."},
    {"kernel_summary_files", "summaries", "UBIGINT", R::kCounter, "derived", "Rows stored in kernel_summaries."},
    {"kernel_summary_files", "records", "UBIGINT", R::kCounter, "stats.records",
     "Activity records the library processed (its last stats line; NULL when it wrote none)."},
    {"kernel_summary_files", "kernels", "UBIGINT", R::kCounter, "stats.kernels", "Kernels, memcpys and memsets it summarised."},
    {"kernel_summary_files", "untimed", "UBIGINT", R::kCounter, "stats.untimed",
     "Of those, the ones CUPTI could not time (NULL when the library did not say)."},
    {"kernel_summary_files", "dropped_by_cupti", "UBIGINT", R::kCounter, "stats.dropped_by_cupti", "Records CUPTI dropped."},
    {"kernel_summary_files", "buffers_refused", "UBIGINT", R::kCounter, "stats.buffers_refused",
     "Buffer requests refused because the library's pool was empty (CUPTI drops those records)."},
    {"kernel_summary_files", "invalid_records", "UBIGINT", R::kCounter, "stats.invalid_records", "Records CUPTI marked incomplete or invalid."},
    {"kernel_summary_files", "late", "UBIGINT", R::kCounter, "stats.late", "Kernels that arrived after their window was written."},
    // kernel_summaries
    {"kernel_summaries", "run_id", "INTEGER", R::kIdentifier, "derived", "Run."},
    {"kernel_summaries", "file_id", "INTEGER", R::kIdentifier, "derived", "Kernel-summary file (kernel_summary_files)."},
    {"kernel_summaries", "line", "UBIGINT", R::kProvenance, "derived", "Line of the window's first summary line."},
    {"kernel_summaries", "host", "VARCHAR", R::kIdentifier, "process.host", "Host of the process."},
    {"kernel_summaries", "rank", "INTEGER", R::kIdentifier, "process.rank", "Global rank, NULL when unknown."},
    {"kernel_summaries", "device", "INTEGER", R::kIdentifier, "summary.device", "CUDA device."},
    {"kernel_summaries", "stream", "INTEGER", R::kIdentifier, "summary.stream", "CUDA stream."},
    {"kernel_summaries", "name", "VARCHAR", R::kWorkload, "kernel.name", "Kernel name as CUPTI reports it (memcpy HtoD, memset, ...)."},
    {"kernel_summaries", "kind", "VARCHAR", R::kWorkload, "kernel.kind", "compute, nccl, memcpy or memset."},
    {"kernel_summaries", "grid", "INTEGER[]", R::kWorkload, "kernel.grid",
     "Launch grid [x, y, z]; NULL for memcpy and memset. A name runs at several launch configurations."},
    {"kernel_summaries", "block", "INTEGER[]", R::kWorkload, "kernel.block", "Thread block [x, y, z]; NULL for memcpy and memset."},
    {"kernel_summaries", "step", "BIGINT", R::kCounter, "summary.step", "Training step of the window, NULL for a time window."},
    {"kernel_summaries", "start_us", "DOUBLE", R::kCounter, "summary.start_ns",
     "Window start, microseconds since the epoch (a step window: its first kernel's start)."},
    {"kernel_summaries", "end_us", "DOUBLE", R::kCounter, "summary.end_ns",
     "Window end, microseconds since the epoch (a step window: its last kernel's end)."},
    {"kernel_summaries", "count", "BIGINT", R::kMeasurement, "summary.count", "Executions in the window (exact)."},
    {"kernel_summaries", "total_us", "DOUBLE", R::kMeasurement, "summary.total_ns", "Summed duration, microseconds (exact)."},
    {"kernel_summaries", "min_us", "DOUBLE", R::kMeasurement, "summary.min_ns", "Shortest duration, microseconds (exact)."},
    {"kernel_summaries", "max_us", "DOUBLE", R::kMeasurement, "summary.max_ns", "Longest duration, microseconds (exact)."},
    {"kernel_summaries", "modes", "STRUCT(count BIGINT, centre_us DOUBLE, spread DOUBLE)[]", R::kMeasurement, "summary.modes",
     "The duration distribution as log-normal modes: executions, geometric mean (microseconds) and "
     "standard deviation of the log duration; the counts add up to count."},
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

std::string TableDdl(std::string_view table) {
  const TableSpec* spec = nullptr;
  for (const TableSpec& t : kTables)
    if (t.name == table) spec = &t;
  if (!spec) return {};
  std::string ddl = "CREATE TABLE IF NOT EXISTS " + std::string(table) + " (";
  bool first = true;
  for (const FieldSpec& f : kFields) {
    if (f.table != table) continue;
    ddl += (first ? "" : ", ") + std::string(f.name) + " " + std::string(f.sql_type);
    first = false;
  }
  if (!spec->primary_key.empty()) ddl += ", PRIMARY KEY (" + std::string(spec->primary_key) + ")";
  ddl += ");\n";
  ddl += "COMMENT ON TABLE " + std::string(table) + " IS " + Quote(spec->description) + ";\n";
  for (const FieldSpec& f : kFields)
    if (f.table == table)
      ddl += "COMMENT ON COLUMN " + std::string(f.table) + "." + std::string(f.name) + " IS " +
             Quote(std::string(RoleName(f.role)) + ": " + std::string(f.description)) + ";\n";
  return ddl;
}

std::string SchemaDdl() {
  std::string ddl;
  for (const EnumSpec& e : kEnums) {
    ddl += "CREATE TYPE " + std::string(e.name) + " AS ENUM (";
    for (size_t i = 0; i < e.values.size(); ++i) ddl += (i ? ", " : "") + Quote(e.values[i]);
    ddl += ");\n";
  }
  for (const TableSpec& t : kTables) ddl += TableDdl(t.name);
  return ddl;
}

}  // namespace collscope
