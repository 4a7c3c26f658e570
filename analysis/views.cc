#include "analysis/views.h"

#include <string>

namespace collscope {
namespace {

// Views are written as `CREATE OR REPLACE {TEMP} VIEW`; {TEMP} is filled in at install time.
constexpr const char* kViews[] = {
    // One row per (run, kernel key): the (interconnect class, size of communicator, op, message
    // size) NIXT calls a kernel. Aggregates by operation shape first, so the wide join is small.
    R"sql(CREATE OR REPLACE {TEMP} VIEW kernel_stats AS
WITH per_op AS (
  SELECT run_id, op_id, count(*) AS records, sum(exec_time_us) AS time_us
  FROM records GROUP BY run_id, op_id)
SELECT p.run_id, c.coll_type, c.n_ranks, c.nnodes, o.kind, o.op, o.msg_size_bytes,
       CAST(c.coll_type AS VARCHAR) || '/' || c.n_ranks || 'r' || c.nnodes || 'n/' ||
         CAST(o.op AS VARCHAR) || '/' || o.msg_size_bytes AS kernel_key,
       sum(p.records) AS records,
       sum(p.records * o.msg_size_bytes) AS bytes,
       sum(p.time_us) AS time_us
FROM per_op p
JOIN operations o ON o.run_id = p.run_id AND o.op_id = p.op_id
JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id
GROUP BY ALL)sql",
    // Kernels ranked by their share of time, with shares of bytes and time and the running share.
    R"sql(CREATE OR REPLACE {TEMP} VIEW hot_kernels AS
SELECT run_id, row_number() OVER w AS rank, kernel_key, coll_type, n_ranks, nnodes, kind, op,
       msg_size_bytes, records, bytes, time_us,
       bytes / sum(bytes) OVER (PARTITION BY run_id) AS bytes_share,
       time_us / sum(time_us) OVER (PARTITION BY run_id) AS time_share,
       sum(time_us) OVER (w ROWS UNBOUNDED PRECEDING) / sum(time_us) OVER (PARTITION BY run_id)
         AS cumulative_time_share
FROM kernel_stats
WINDOW w AS (PARTITION BY run_id ORDER BY time_us DESC, bytes DESC, kernel_key))sql",
    // One row per run: what is in it.
    R"sql(CREATE OR REPLACE {TEMP} VIEW run_overview AS
SELECT ru.run_id, ru.name AS run,
       (SELECT count(*) FROM records r WHERE r.run_id = ru.run_id) AS records,
       (SELECT count(DISTINCT hostname) FROM processes p WHERE p.run_id = ru.run_id) AS hosts,
       (SELECT count(*) FROM processes p WHERE p.run_id = ru.run_id) AS processes,
       (SELECT count(*) FROM communicators c WHERE c.run_id = ru.run_id) AS communicators,
       (SELECT count(*) FROM files f WHERE f.run_id = ru.run_id) AS files,
       (SELECT count(*) FROM ingest_log l WHERE l.run_id = ru.run_id) AS rejected_lines,
       (SELECT make_timestamp(min(dump_ts_us)::BIGINT) FROM records r WHERE r.run_id = ru.run_id)
         AS first_dump,
       (SELECT make_timestamp(max(dump_ts_us)::BIGINT) FROM records r WHERE r.run_id = ru.run_id)
         AS last_dump
FROM runs ru)sql",
};

}  // namespace

Status InstallAnalysisViews(Store& store, bool temporary) {
  for (const char* view : kViews) {
    std::string sql = view;
    size_t at = sql.find("{TEMP} ");
    sql.replace(at, 7, temporary ? "TEMP " : "");
    COLLSCOPE_RETURN_IF_ERROR(store.Exec(sql));
  }
  return Status::Ok();
}

}  // namespace collscope
