#include "analysis/views.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "analysis/aggregate_builder.h"
#include "core/nccl_tests_reader.h"
#include "core/readers/steps.h"
#include "core/taxonomy.h"

namespace collscope {
namespace {

// Version of the agg_* tables' definitions: aggregates of another version are stale.
constexpr int kAggVersion = 3;
// The ingests that can have changed a run's records: those that read a file (new bytes, or a
// rewritten file's rows replaced). An ingest of unchanged files leaves the aggregates fresh.
constexpr const char* kChangingIngests = "(SELECT run_id, count(*) AS n FROM ingests WHERE files_read > 0 GROUP BY run_id)";
// The range_bars parameters whose answer RefreshAggregates materialises (the macro's defaults).
constexpr const char* kRangeBarsDefault = "min_bytes = 1048576 AND bin_s = 5 AND sn_bin = 50";

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
  return s;
}

// Hosts and kernel keys numbered within their run: integer keys for the large groupings and
// aggregates, names joined after. (A later ingest may renumber them, but it also makes the run's
// aggregates stale.)
constexpr const char* kHostIds =
    "SELECT run_id, process_id, hostname, "
    "dense_rank() OVER (PARTITION BY run_id ORDER BY hostname) AS hid FROM processes";
constexpr const char* kHostNames =
    "(SELECT DISTINCT run_id, hid, hostname FROM (SELECT run_id, hostname, "
    "dense_rank() OVER (PARTITION BY run_id ORDER BY hostname) AS hid FROM processes))";
constexpr const char* kKernelNames =
    "(SELECT DISTINCT run_id, kid, kernel_key FROM (SELECT run_id, kernel_key, "
    "dense_rank() OVER (PARTITION BY run_id ORDER BY kernel_key) AS kid FROM op_dims))";

// ---- the aggregates' SQL, over a relation given by the caller ---------------------------------
// Value counts per (process, operation, rank, timing source, exec time, override) with their
// busbw, from `records` rows matching `filter`.
std::string RawCellsSql(const std::string& filter) {
  return R"sql(SELECT v.run_id, v.process_id, v.op_id, v.rank, v.timing_source, v.exec_time_us,
       v.busbw_gbs_override,
       shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, v.exec_time_us, v.busbw_gbs_override)
         AS busbw_gbs, v.records
FROM (SELECT run_id, process_id, op_id, rank, timing_source, exec_time_us, busbw_gbs_override,
             count(*) AS records
      FROM records WHERE )sql" + filter + R"sql( GROUP BY ALL) v
JOIN op_dims d USING (run_id, op_id))sql";
}
// Value counts per (operation, exec time, override), from cells.
std::string ValuesFromCellsSql(const std::string& cells) {
  return "SELECT run_id, op_id, exec_time_us, busbw_gbs_override, busbw_gbs, "
         "sum(records)::BIGINT AS records FROM " + cells + " c GROUP BY ALL";
}
// Per (process, operation, rank, timing source): records, time, records with a busbw, their sum.
std::string ProcOpsFromCellsSql(const std::string& cells) {
  return "SELECT run_id, process_id, op_id, rank, timing_source, sum(records)::BIGINT AS records, "
         "sum(records * exec_time_us)::HUGEINT AS time_us, "
         "coalesce(sum(records) FILTER (WHERE busbw_gbs IS NOT NULL), 0)::BIGINT AS bw_records, "
         "sum(records * busbw_gbs) AS bw_sum FROM " + cells + " c GROUP BY ALL";
}
// Per (host id, kernel id, second of wall clock): records, busbw count/sum/min/max, exec time
// sum/max, and norm_sum: the busbw sum over the kernel's job median from `medians` (run_id,
// kernel_key, median_busbw_gbs), so the host x time heatmap needs no join. busbw per record is
// shape_busbw with the per-operation constants hoisted (the same double operations, so the same
// values).
std::string RawTimeSql(const std::string& filter, const std::string& medians) {
  return R"sql(WITH k AS (
  SELECT run_id, op_id, kernel_key, msg_size_bytes,
         dense_rank() OVER (PARTITION BY run_id ORDER BY kernel_key) AS kid,
         inspector_traffic(op, n_ranks, msg_size_bytes) / 1.0e9 AS traffic_gb,
         inspector_busbw_factor(op, n_ranks) AS factor
  FROM op_dims),
pr AS (
  SELECT run_id, process_id, hostname,
         dense_rank() OVER (PARTITION BY run_id ORDER BY hostname) AS hid
  FROM processes),
x AS (
  SELECT r.run_id, pr.hid, k.kid,
         coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us) // 1000000 AS tbin_s,
         r.exec_time_us,
         nullif(coalesce(r.busbw_gbs_override,
                         CASE WHEN r.exec_time_us = 0 THEN 0.0
                              ELSE round(k.traffic_gb / (CAST(r.exec_time_us AS DOUBLE) / 1000000.0)
                                         * k.factor, 6) END), 'nan'::DOUBLE) AS b
  FROM records r JOIN k USING (run_id, op_id) JOIN pr USING (run_id, process_id)
  WHERE )sql" + filter + R"sql(),
g AS (
  SELECT run_id, hid, kid, tbin_s, count(*) AS records, count(b) AS bw_records, sum(b) AS bw_sum,
         min(b) AS bw_min, max(b) AS bw_max, sum(exec_time_us)::BIGINT AS time_us,
         max(exec_time_us) AS max_exec_us
  FROM x GROUP BY ALL)
SELECT g.run_id, g.hid, g.kid, k.msg_size_bytes, g.tbin_s, g.records, g.bw_records,
       g.bw_sum, g.bw_min, g.bw_max, g.time_us, g.max_exec_us,
       g.bw_sum / nullif(km.median_busbw_gbs, 0) AS norm_sum
FROM g JOIN (SELECT DISTINCT run_id, kid, kernel_key, msg_size_bytes FROM k) k USING (run_id, kid)
LEFT JOIN )sql" + medians + R"sql( km ON km.run_id = g.run_id AND km.kernel_key = k.kernel_key)sql";
}
// kernel_variation over values (a relation with agg_values' columns).
std::string KernelVariationSql(const std::string& values) {
  return Replace(R"sql(WITH v AS (
  SELECT v.run_id, d.kernel_key, v.busbw_gbs, v.exec_time_us, sum(v.records) AS n
  FROM {VALUES} v JOIN op_dims d USING (run_id, op_id) WHERE v.busbw_gbs IS NOT NULL GROUP BY ALL),
w AS (
  SELECT run_id, kernel_key, busbw_gbs AS x, exec_time_us, n,
         sum(n) OVER (PARTITION BY run_id, kernel_key ORDER BY busbw_gbs
                      ROWS UNBOUNDED PRECEDING) AS cum,
         sum(n) OVER (PARTITION BY run_id, kernel_key) AS total,
         sum(n * busbw_gbs) OVER (PARTITION BY run_id, kernel_key)
           / sum(n) OVER (PARTITION BY run_id, kernel_key) AS mean
  FROM v),
s AS (
  SELECT run_id, kernel_key, any_value(total)::BIGINT AS records, any_value(mean) AS mean_busbw_gbs,
         CASE WHEN any_value(total) > 1
              THEN sqrt(sum(n * (x - mean) * (x - mean)) / (any_value(total) - 1)) END
           AS stddev_busbw_gbs,
         min(x) AS min_busbw_gbs,
         min(x) FILTER (WHERE cum >= 0.05 * total) AS p5_busbw_gbs,
         min(x) FILTER (WHERE cum >= 0.25 * total) AS p25_busbw_gbs,
         min(x) FILTER (WHERE cum >= 0.50 * total) AS median_busbw_gbs,
         min(x) FILTER (WHERE cum >= 0.75 * total) AS p75_busbw_gbs,
         min(x) FILTER (WHERE cum >= 0.95 * total) AS p95_busbw_gbs,
         max(x) AS max_busbw_gbs,
         sum(n * exec_time_us) / any_value(total) AS mean_exec_time_us
  FROM w GROUP BY run_id, kernel_key)
SELECT s.run_id, k.coll_type, k.n_ranks, k.nnodes, k.kind, k.op, k.msg_size_bytes, s.kernel_key,
       s.records, s.mean_busbw_gbs, s.stddev_busbw_gbs,
       s.stddev_busbw_gbs / nullif(s.mean_busbw_gbs, 0) AS cv_busbw,
       s.min_busbw_gbs, s.p5_busbw_gbs, s.p25_busbw_gbs, s.median_busbw_gbs, s.p75_busbw_gbs,
       s.p95_busbw_gbs, s.max_busbw_gbs, s.mean_exec_time_us
FROM s JOIN (SELECT DISTINCT run_id, kernel_key, coll_type, n_ranks, nnodes, kind, op, msg_size_bytes
             FROM op_dims) k USING (run_id, kernel_key))sql", "{VALUES}", values);
}
// Per (host id, second), over agg_time rows (`time`): the heatmap's sums at its default size
// threshold (1 MiB), a third of agg_time's rows.
std::string HostTimeSql(const std::string& time) {
  return "SELECT run_id, hid, tbin_s, sum(bw_records)::BIGINT AS records, sum(norm_sum) AS norm_sum "
         "FROM " + time + " t WHERE msg_size_bytes >= 1048576 AND bw_records > 0 AND "
         "norm_sum IS NOT NULL GROUP BY run_id, hid, tbin_s";
}
// host_normalized over cells (a relation with cell_values' columns).
std::string HostNormalizedSql(const std::string& cells) {
  return R"sql(WITH h AS (
  SELECT c.run_id, p.hostname, d.kernel_key, c.busbw_gbs AS x, sum(c.records) AS n
  FROM )sql" + cells + R"sql( c JOIN op_dims d USING (run_id, op_id)
  JOIN processes p USING (run_id, process_id)
  WHERE c.busbw_gbs IS NOT NULL GROUP BY ALL),
w AS (
  SELECT *, sum(n) OVER (PARTITION BY run_id, hostname, kernel_key ORDER BY x
                         ROWS UNBOUNDED PRECEDING) AS cum,
         sum(n) OVER (PARTITION BY run_id, hostname, kernel_key) AS total
  FROM h),
m AS (
  SELECT run_id, hostname, kernel_key, any_value(total)::BIGINT AS records,
         min(x) FILTER (WHERE cum >= 0.5 * total) AS median_busbw_gbs
  FROM w GROUP BY ALL)
SELECT m.run_id, m.hostname, m.kernel_key, k.nnodes, m.records, m.median_busbw_gbs,
       k.median_busbw_gbs AS job_median_busbw_gbs,
       m.median_busbw_gbs / nullif(k.median_busbw_gbs, 0) AS norm_busbw
FROM m JOIN kernel_variation k USING (run_id, kernel_key))sql";
}
// Cross-host transfer instances of at least 1 MiB (smaller ones are latency-bound and say nothing
// of a link's bandwidth) over recs (a relation with records' columns): one row per
// (host id, instance) with the instance's busbw x and the job median of x for its kernel key. A
// collective instance is (operation, sequence number); a point-to-point one is a Send with its
// Recv (communicator, sequence number, rank pair: p2p sequence numbers count per communicator at
// both ends), keyed by the Send's kernel key. Its busbw is that of its fastest record: the last
// rank to arrive, whose time has no waiting in it. (iop: the operation, or minus the
// communicator for p2p, so that an instance is keyed by integers only.)
std::string TransferSql(const std::string& recs) {
  return Replace(R"sql(WITH d AS (SELECT * FROM op_dims WHERE nnodes > 1 AND msg_size_bytes >= 1048576),
ik AS (
  SELECT r.run_id, r.process_id, r.op_id, d.op, r.sn, r.exec_time_us, r.busbw_gbs_override,
         CASE WHEN d.kind = 'p2p' THEN -d.comm_id ELSE r.op_id END AS iop,
         CASE WHEN d.kind = 'p2p' THEN least(r.rank, coalesce(d.peer, -1)) ELSE -1 END AS pa,
         CASE WHEN d.kind = 'p2p' THEN greatest(r.rank, coalesce(d.peer, -1)) ELSE -1 END AS pb
  FROM {RECS} r JOIN d USING (run_id, op_id)),
i AS (
  SELECT run_id, iop, sn, pa, pb,
         coalesce(min(op_id) FILTER (WHERE op = 'Send'), min(op_id)) AS op_id,
         min(exec_time_us) AS t, max(busbw_gbs_override) AS ovr
  FROM ik GROUP BY ALL),
ib AS (
  SELECT i.run_id, i.iop, i.sn, i.pa, i.pb, d.comm_id, d.msg_size_bytes, d.kernel_key,
         shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, i.t, i.ovr) AS x
  FROM i JOIN d USING (run_id, op_id)),
hi AS (
  SELECT DISTINCT ik.run_id, p.hid, ik.iop, ik.sn, ik.pa, ik.pb
  FROM ik JOIN ()sql" + std::string(kHostIds) + R"sql() p USING (run_id, process_id)),
j AS (SELECT run_id, kernel_key, x, count(*) AS n FROM ib WHERE x IS NOT NULL GROUP BY ALL),
jw AS (
  SELECT *, sum(n) OVER (PARTITION BY run_id, kernel_key ORDER BY x ROWS UNBOUNDED PRECEDING)
              AS cum,
         sum(n) OVER (PARTITION BY run_id, kernel_key) AS total FROM j),
jm AS (
  SELECT run_id, kernel_key, min(x) FILTER (WHERE cum >= 0.5 * total) AS job_median_busbw_gbs
  FROM jw GROUP BY ALL)
SELECT hi.run_id, hi.hid, ib.comm_id, ib.kernel_key, ib.msg_size_bytes, ib.x,
       jm.job_median_busbw_gbs
FROM hi JOIN ib USING (run_id, iop, sn, pa, pb)
JOIN jm USING (run_id, kernel_key) WHERE ib.x IS NOT NULL)sql", "{RECS}", recs);
}
// host_transfer_normalized over hx (TransferSql's rows): per host and cross-host kernel key, the
// median busbw of the instances it takes part in over the job median.
std::string HostTransferSql(const std::string& hx) {
  return R"sql(WITH h AS (
  SELECT run_id, hid, kernel_key, x, any_value(job_median_busbw_gbs) AS jm, count(*) AS n
  FROM )sql" + hx + R"sql( GROUP BY run_id, hid, kernel_key, x),
hw AS (
  SELECT *, sum(n) OVER (PARTITION BY run_id, hid, kernel_key ORDER BY x
                         ROWS UNBOUNDED PRECEDING) AS cum,
         sum(n) OVER (PARTITION BY run_id, hid, kernel_key) AS total FROM h),
m AS (
  SELECT run_id, hid, kernel_key, any_value(total)::BIGINT AS instances,
         min(x) FILTER (WHERE cum >= 0.5 * total) AS median_busbw_gbs,
         any_value(jm) AS job_median_busbw_gbs
  FROM hw GROUP BY run_id, hid, kernel_key)
SELECT m.run_id, p.hostname, m.kernel_key, m.instances, m.median_busbw_gbs,
       m.job_median_busbw_gbs, m.median_busbw_gbs / nullif(m.job_median_busbw_gbs, 0) AS norm_busbw
FROM m JOIN (SELECT DISTINCT run_id, hid, hostname FROM ()sql" + kHostIds + R"sql()) p USING (run_id, hid))sql";
}
// host_comm_transfer over hx: per host and cross-host communicator, the geometric mean over the
// communicator's instances of instance busbw over the job median of its kernel key.
std::string HostCommSql(const std::string& hx) {
  return R"sql(WITH g AS (
  SELECT run_id, hid, comm_id, count(*) AS instances,
         exp(avg(ln(x / job_median_busbw_gbs))) AS norm_busbw
  FROM )sql" + hx + R"sql(
  WHERE x > 0 AND job_median_busbw_gbs > 0
  GROUP BY run_id, hid, comm_id)
SELECT g.run_id, p.hostname, g.comm_id, c.comm, c.comm_name, g.instances, g.norm_busbw
FROM g JOIN (SELECT DISTINCT run_id, hid, hostname FROM ()sql" + kHostIds + R"sql()) p USING (run_id, hid)
JOIN (SELECT DISTINCT run_id, comm_id, comm, comm_name FROM op_dims) c USING (run_id, comm_id))sql";
}
// range_bars over cells and recs; {MIN_BYTES}, {BIN_S}, {SN_BIN} are the macro's parameters or
// literals. Communicator and host come from the cells' value counts, time and sequence-number
// bins from one grouping of the records by both (sequence numbers grow with time, so the pairs
// are few), keyed by kernel (not operation: far fewer groups).
std::string RangeBarsSql(const std::string& cells, const std::string& recs,
                         const std::string& min_bytes, const std::string& bin_s,
                         const std::string& sn_bin) {
  std::string sql = R"sql(WITH d AS (
  SELECT *, dense_rank() OVER (PARTITION BY run_id ORDER BY kernel_key) AS kid FROM op_dims
  WHERE msg_size_bytes >= {MIN_BYTES}),
k AS (SELECT DISTINCT run_id, kid, kernel_key, op, n_ranks, msg_size_bytes FROM d),
cv AS MATERIALIZED (
  SELECT c.run_id, d.kernel_key, d.comm, p.hostname, c.busbw_gbs AS v, c.records AS n
  FROM {CELLS} c JOIN d USING (run_id, op_id) JOIN processes p USING (run_id, process_id)),
f AS MATERIALIZED (
  SELECT r.run_id, d.kid,
         (coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us)
            // CAST(round({BIN_S} * 1e6) AS UBIGINT)) AS tbin, r.sn // {SN_BIN} AS sbin,
         r.exec_time_us, r.busbw_gbs_override AS ovr, count(*) AS n
  FROM {RECS} r JOIN d USING (run_id, op_id) GROUP BY ALL),
g AS (
  SELECT run_id, kernel_key, 'communicator' AS dimension, comm AS grp, v, sum(n) AS n FROM cv GROUP BY ALL
  UNION ALL SELECT run_id, kernel_key, 'host', hostname, v, sum(n) FROM cv GROUP BY ALL
  UNION ALL SELECT t.run_id, d.kernel_key, 'time_bin', CAST(t.tbin * CAST(round({BIN_S} * 1e6) AS UBIGINT) AS VARCHAR),
                   shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, t.exec_time_us, t.ovr), sum(t.n)
            FROM f t JOIN k d USING (run_id, kid) GROUP BY ALL
  UNION ALL SELECT s.run_id, d.kernel_key, 'sn_bin', CAST(s.sbin * {SN_BIN} AS VARCHAR),
                   shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, s.exec_time_us, s.ovr), sum(s.n)
            FROM f s JOIN k d USING (run_id, kid) GROUP BY ALL),
w AS (
  SELECT *, sum(n) OVER (PARTITION BY run_id, kernel_key, dimension, grp ORDER BY v
                         ROWS UNBOUNDED PRECEDING) AS cum,
         sum(n) OVER (PARTITION BY run_id, kernel_key, dimension, grp) AS total
  FROM g WHERE v IS NOT NULL)
SELECT run_id, kernel_key, dimension, grp AS "group", any_value(total)::BIGINT AS records,
       min(v) AS min_busbw_gbs, min(v) FILTER (WHERE cum >= 0.25 * total) AS p25_busbw_gbs,
       min(v) FILTER (WHERE cum >= 0.5 * total) AS p50_busbw_gbs,
       min(v) FILTER (WHERE cum >= 0.75 * total) AS p75_busbw_gbs, max(v) AS max_busbw_gbs
FROM w GROUP BY ALL)sql";
  sql = Replace(sql, "{CELLS}", cells);
  sql = Replace(sql, "{RECS}", recs);
  sql = Replace(sql, "{MIN_BYTES}", min_bytes);
  sql = Replace(sql, "{BIN_S}", bin_s);
  return Replace(sql, "{SN_BIN}", sn_bin);
}

// "(" + s + ")" (spelled out: GCC 12's -Wrestrict misfires on the operator+ chain at -O3).
std::string Paren(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('(');
  out.append(s);
  out.push_back(')');
  return out;
}

// agg_kernel_variation's rows of the runs matching `only`, from their agg_values.
std::string KernelVariationInsert(const std::string& only) {
  return "INSERT INTO agg_kernel_variation SELECT * FROM " +
         Paren(KernelVariationSql("(SELECT * FROM agg_values WHERE " + only + ")"));
}

constexpr const char* kFresh = "(SELECT run_id FROM agg_fresh_runs)";
constexpr const char* kStale = "(SELECT run_id FROM agg_stale_runs)";

// The agg_* tables, created empty with the types of the statements that fill them.
std::vector<std::pair<std::string, std::string>> AggTables() {
  const std::string none = "false";
  return {
      {"agg_meta",
       "SELECT 0::INTEGER AS run_id, 0::INTEGER AS version, 0::BIGINT AS ingests, "
       "0::BIGINT AS records, 0::UBIGINT AS first_dump_us, 0::UBIGINT AS last_dump_us, "
       "0::UBIGINT AS first_ts_us, 0::UBIGINT AS last_ts_us, "
       "current_localtimestamp() AS refreshed_at, 0::DOUBLE AS seconds"},
      {"agg_cells", RawCellsSql(none)},
      {"agg_values", ValuesFromCellsSql(Paren(RawCellsSql(none)))},
      {"agg_proc_ops", ProcOpsFromCellsSql(Paren(RawCellsSql(none)))},
      {"agg_time", RawTimeSql(none, "(SELECT 0 AS run_id, '' AS kernel_key, "
                                    "0.0::DOUBLE AS median_busbw_gbs WHERE false)")},
      {"agg_host_time", HostTimeSql(Paren(RawTimeSql(none, "(SELECT 0 AS run_id, '' AS kernel_key, "
                                                      "0.0::DOUBLE AS median_busbw_gbs WHERE false)")))},
      {"agg_kernel_variation", KernelVariationSql(Paren(ValuesFromCellsSql(Paren(RawCellsSql(none)))))},
      // (host_normalized reads kernel_variation, not installed yet: its columns by hand)
      {"agg_host_normalized",
       "SELECT 0::INTEGER AS run_id, ''::VARCHAR AS hostname, ''::VARCHAR AS kernel_key, "
       "0::INTEGER AS nnodes, 0::BIGINT AS records, 0::DOUBLE AS median_busbw_gbs, "
       "0::DOUBLE AS job_median_busbw_gbs, 0::DOUBLE AS norm_busbw"},
      {"agg_host_transfer", HostTransferSql(Paren(TransferSql("(SELECT * FROM records WHERE false)")))},
      {"agg_host_comm", HostCommSql(Paren(TransferSql("(SELECT * FROM records WHERE false)")))},
      {"agg_range_bars",
       "SELECT 0::UBIGINT AS p_min_bytes, 0::DOUBLE AS p_bin_s, 0::INTEGER AS p_sn_bin, * FROM (" +
           RangeBarsSql(Paren(RawCellsSql(none)), "(SELECT * FROM records WHERE false)",
                        "1048576", "5", "50") + ")"},
  };
}

const char* const kAggComments[][2] = {
    {"agg_meta", "analysis aggregates: one row per run they cover (version, the run''s ingests that read a file "
                 "count when they were made, records, time span); stale when the count changed"},
    {"agg_cells", "analysis aggregate: records per (run, process, op, rank, timing source, exec "
                  "time, busbw override) with busbw"},
    {"agg_values", "analysis aggregate: records per (run, op, exec time, busbw override) with busbw"},
    {"agg_proc_ops", "analysis aggregate: per (run, process, op, rank, timing source) records, "
                     "time, records with a busbw and their busbw sum"},
    {"agg_time", "analysis aggregate: per (run, host, kernel key, second) records, busbw "
                 "count/sum/min/max, exec time sum/max, busbw sum over the kernel''s job median"},
    {"agg_host_time", "analysis aggregate: per (run, host id, second) agg_time''s heatmap sums "
                      "for messages of at least 1 MiB"},
    {"agg_kernel_variation", "analysis aggregate: kernel_variation, materialised"},
    {"agg_host_normalized", "analysis aggregate: host_normalized, materialised"},
    {"agg_host_transfer", "analysis aggregate: host_transfer_normalized, materialised"},
    {"agg_host_comm", "analysis aggregate: host_comm_transfer, materialised"},
    {"agg_range_bars", "analysis aggregate: range_bars at the parameters p_*, materialised"},
};

// Operation shapes with their communicator and kernel key: the small side of every join. The
// op_dims view's query, also read by the aggregate builder before the views exist.
constexpr const char* kOpDimsSelect = R"sql(SELECT o.run_id, o.op_id, o.comm_id, c.id AS comm, c.comm_name, c.n_ranks, c.nnodes,
       CAST(c.coll_type AS VARCHAR) AS coll_type, CAST(o.kind AS VARCHAR) AS kind,
       CAST(o.op AS VARCHAR) AS op, CAST(o.algo AS VARCHAR) AS algo,
       CAST(o.proto AS VARCHAR) AS proto, o.peer, o.msg_size_bytes,
       CAST(c.coll_type AS VARCHAR) || '/' || c.n_ranks || 'r' || c.nnodes || 'n/' ||
         CAST(o.op AS VARCHAR) || '/' || o.msg_size_bytes AS kernel_key
FROM operations o JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id)sql";

// Views and macros installed before anything else: the small dimension side of every join.
std::vector<std::string> BaseViews() {
  return {
      std::string("CREATE OR REPLACE {TEMP} VIEW op_dims AS\n") + kOpDimsSelect,
      // busbw of a (shape, exec time, written override).
      R"sql(CREATE OR REPLACE {TEMP} MACRO shape_busbw(op, n_ranks, size, exec_us, override) AS
nullif(coalesce(override, inspector_busbw(op, n_ranks, size, exec_us)), 'nan'::DOUBLE))sql",
  };
}

// Where every primitive reads: the fresh runs' aggregates or the stale runs' records, and the
// run-level views over them.
void SourceViews(std::vector<std::string>& v, bool use_aggregates) {
  // (Not a correlated subquery: every view reads this one, several times.)
  v.push_back(std::string(R"sql(CREATE OR REPLACE {TEMP} VIEW agg_fresh_runs AS
SELECT m.run_id FROM agg_meta m
LEFT JOIN )sql") + kChangingIngests + R"sql( i USING (run_id)
WHERE )sql" + (use_aggregates ? "" : "false AND ") + "m.version = " +
              std::to_string(kAggVersion) + " AND m.ingests = coalesce(i.n, 0)");
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} VIEW agg_stale_runs AS
SELECT run_id FROM runs WHERE run_id NOT IN (SELECT run_id FROM agg_fresh_runs))sql");
  // Value counts per cell (process, op, rank, timing source, exec time, override).
  v.push_back("CREATE OR REPLACE {TEMP} VIEW raw_cells AS " +
              RawCellsSql(std::string("run_id IN ") + kStale));
  v.push_back(std::string("CREATE OR REPLACE {TEMP} VIEW cell_values AS SELECT * FROM agg_cells "
                          "WHERE run_id IN ") + kFresh + " UNION ALL SELECT * FROM raw_cells");
  v.push_back(std::string("CREATE OR REPLACE {TEMP} VIEW op_values AS SELECT * FROM agg_values "
                          "WHERE run_id IN ") + kFresh + " UNION ALL " +
              ValuesFromCellsSql("raw_cells"));
  v.push_back(std::string("CREATE OR REPLACE {TEMP} VIEW proc_ops AS SELECT * FROM agg_proc_ops "
                          "WHERE run_id IN ") + kFresh + " UNION ALL " +
              ProcOpsFromCellsSql("raw_cells"));
  // Time span of each run (records' start, else kernel start, else dump time).
  v.push_back(std::string(R"sql(CREATE OR REPLACE {TEMP} VIEW run_span AS
SELECT run_id, records, first_dump_us, last_dump_us, first_ts_us, last_ts_us FROM agg_meta
WHERE run_id IN )sql") + kFresh + R"sql(
UNION ALL
SELECT run_id, count(*), min(dump_ts_us), max(dump_ts_us),
       min(coalesce(start_ts_us, kernel_start_ts_us, dump_ts_us)),
       max(coalesce(start_ts_us, kernel_start_ts_us, dump_ts_us))
FROM records WHERE run_id IN )sql" + kStale + " GROUP BY run_id");
  // One row per (run, kernel key): the (interconnect class, size of communicator, op, message
  // size) NIXT calls a kernel.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} VIEW kernel_stats AS
WITH per_op AS (
  SELECT run_id, op_id, sum(records) AS records, sum(records * exec_time_us) AS time_us
  FROM op_values GROUP BY run_id, op_id)
SELECT p.run_id, d.coll_type, d.n_ranks, d.nnodes, d.kind, d.op, d.msg_size_bytes, d.kernel_key,
       sum(p.records) AS records,
       sum(p.records * d.msg_size_bytes) AS bytes,
       sum(p.time_us) AS time_us
FROM per_op p JOIN op_dims d USING (run_id, op_id)
GROUP BY ALL)sql");
  v.push_back(
    // Kernels ranked by share of time (rank) and of bytes (bytes_rank), with running shares.
    R"sql(CREATE OR REPLACE {TEMP} VIEW hot_kernels AS
SELECT run_id, row_number() OVER w AS rank, kernel_key, coll_type, n_ranks, nnodes, kind, op,
       msg_size_bytes, records, bytes, time_us,
       bytes / sum(bytes) OVER (PARTITION BY run_id) AS bytes_share,
       time_us / sum(time_us) OVER (PARTITION BY run_id) AS time_share,
       sum(time_us) OVER (w ROWS UNBOUNDED PRECEDING) / sum(time_us) OVER (PARTITION BY run_id)
         AS cumulative_time_share,
       row_number() OVER wb AS bytes_rank,
       sum(bytes) OVER (wb ROWS UNBOUNDED PRECEDING) / sum(bytes) OVER (PARTITION BY run_id)
         AS cumulative_bytes_share
FROM kernel_stats
WINDOW w AS (PARTITION BY run_id ORDER BY time_us DESC, bytes DESC, kernel_key),
       wb AS (PARTITION BY run_id ORDER BY bytes DESC, time_us DESC, kernel_key))sql");
  // One row per run: what is in it.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} VIEW run_overview AS
SELECT ru.run_id, ru.name AS run, coalesce(s.records, 0) AS records,
       (SELECT count(DISTINCT hostname) FROM processes p WHERE p.run_id = ru.run_id) AS hosts,
       (SELECT count(*) FROM processes p WHERE p.run_id = ru.run_id) AS processes,
       (SELECT count(*) FROM communicators c WHERE c.run_id = ru.run_id) AS communicators,
       (SELECT count(*) FROM files f WHERE f.run_id = ru.run_id) AS files,
       (SELECT count(*) FROM ingest_log l WHERE l.run_id = ru.run_id) AS rejected_lines,
       make_timestamp(s.first_dump_us::BIGINT) AS first_dump,
       make_timestamp(s.last_dump_us::BIGINT) AS last_dump
FROM runs ru LEFT JOIN run_span s USING (run_id))sql");
  // NCCL Inspector's Prometheus textfiles of a run: what was read, and Inspector's own drop
  // counters (PROM_DUMP_STATS: running totals, so each GPU's largest).
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} VIEW prom_overview AS
WITH gpus AS (
  SELECT run_id, node, gpu,
         max(value) FILTER (WHERE metric IN ('nccl_collectives_total', 'nccl_p2p_total')) AS ops,
         max(value) FILTER (WHERE metric IN ('nccl_collectives_dropped_total', 'nccl_p2p_dropped_total')) AS dropped,
         min(ts_us) AS t0, max(ts_us) AS t1
  FROM prom_samples GROUP BY ALL)
SELECT f.run_id, f.files, f.samples, f.lines_unused, f.layouts,
       count(DISTINCT g.node) AS nodes, count(g.node) AS gpus,
       count(g.ops) AS gpus_counting, coalesce(sum(g.ops), 0)::UBIGINT AS ops,
       coalesce(sum(g.dropped), 0)::UBIGINT AS dropped, min(g.t0) AS t0_us, max(g.t1) AS t1_us
FROM (SELECT run_id, count(*) AS files, sum(samples)::UBIGINT AS samples, sum(lines_unused)::UBIGINT AS lines_unused,
             string_agg(DISTINCT layout, ', ' ORDER BY layout) AS layouts
      FROM prom_files GROUP BY run_id) f
LEFT JOIN gpus g USING (run_id)
GROUP BY ALL)sql");
  // Their exec times by communicator kind (2.30: comm_name; 2.29: the communicator itself), each
  // GPU's mean over its dumps against the other GPUs of the kind: a window's mean carries no
  // membership or sequence number, so this is what they can show, not who waited for whom.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} VIEW prom_exec_by_kind AS
WITH per_gpu AS (
  SELECT run_id, coalesce(comm_name, comm_id, '') AS comm, op, n_nodes, nranks, message_size, node, gpu,
         avg(value) AS exec_us, count(*) AS samples
  FROM prom_samples
  WHERE metric IN ('nccl_collective_exec_time_microseconds', 'nccl_p2p_exec_time_microseconds') AND isfinite(value)
  GROUP BY ALL)
SELECT run_id, comm, op, n_nodes, nranks, message_size, count(*) AS gpus, sum(samples)::UBIGINT AS samples,
       median(exec_us) AS median_us, max(exec_us) AS max_us,
       arg_max(node, exec_us) AS max_node, arg_max(gpu, exec_us) AS max_gpu
FROM per_gpu GROUP BY ALL)sql");
  // A finding's culprit against its peers over time: the exec times of the communicators it names
  // (ids as written, `comms`) against their siblings (same name, size and span). Each (op, bin)
  // cell's median over the siblings' usual (median) cell of the same op and size: healthy, both
  // stay near 1; members waiting for a straggler, or a slow link's transfers, lift the named
  // communicators alone. Bins of bin_us from t0_us, by start time (dump time without). One scan
  // of the records, of the siblings' classes only.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO culprit_series(rid, comms, t0_us, bin_us) AS TABLE
WITH named AS (SELECT comm_id, coalesce(comm_name, '') AS cname, n_ranks, nnodes FROM communicators
               WHERE run_id = rid AND list_contains(comms, id)),
ops AS (SELECT o.op_id, o.comm_id IN (SELECT comm_id FROM named) AS culprit, coalesce(c.comm_name, '') AS cname,
               c.n_ranks, c.nnodes, o.op, o.msg_size_bytes
        FROM operations o JOIN communicators c USING (run_id, comm_id)
        WHERE o.run_id = rid AND (coalesce(c.comm_name, ''), c.n_ranks, c.nnodes) IN (SELECT (cname, n_ranks, nnodes) FROM named)),
cells AS (SELECT op_id, t0_us + (coalesce(start_ts_us, dump_ts_us)::BIGINT - t0_us) // bin_us * bin_us AS bin_start_us,
                 median(exec_time_us::DOUBLE) AS x, count(*) AS n
          FROM records WHERE run_id = rid AND exec_time_us > 0 AND op_id IN (SELECT op_id FROM ops) GROUP BY ALL),
joined AS (SELECT * FROM cells JOIN ops USING (op_id)),
usual AS (SELECT cname, n_ranks, nnodes, op, msg_size_bytes, median(x) AS m FROM joined WHERE NOT culprit GROUP BY ALL)
SELECT bin_start_us, culprit, round(median(x / m), 4) AS ratio, sum(n)::BIGINT AS records
FROM joined JOIN usual USING (cname, n_ranks, nnodes, op, msg_size_bytes)
WHERE m > 0
GROUP BY ALL ORDER BY bin_start_us, culprit)sql");
}

// Summary: counts and distributions per kernel key.
void SummaryViews(std::vector<std::string>& v) {
  v.push_back(
    R"sql(CREATE OR REPLACE {TEMP} VIEW counts_by_op AS
SELECT run_id, kind, op, sum(records) AS records, sum(bytes) AS bytes, sum(time_us) AS time_us,
       sum(bytes) / sum(sum(bytes)) OVER (PARTITION BY run_id) AS bytes_share,
       sum(time_us) / sum(sum(time_us)) OVER (PARTITION BY run_id) AS time_share
FROM kernel_stats GROUP BY run_id, kind, op)sql");
  v.push_back(
    R"sql(CREATE OR REPLACE {TEMP} VIEW counts_by_coll_type AS
SELECT run_id, coll_type, sum(records) AS records, sum(bytes) AS bytes, sum(time_us) AS time_us,
       sum(bytes) / sum(sum(bytes)) OVER (PARTITION BY run_id) AS bytes_share,
       sum(time_us) / sum(sum(time_us)) OVER (PARTITION BY run_id) AS time_share
FROM kernel_stats GROUP BY run_id, coll_type)sql");
  // Distinct (kernel key, busbw, exec time) with their record counts: the exact distribution of
  // each kernel key, small because exec times are integer microseconds.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} VIEW busbw_values AS
SELECT v.run_id, d.kernel_key, v.busbw_gbs, v.exec_time_us, sum(v.records) AS n
FROM op_values v JOIN op_dims d USING (run_id, op_id) GROUP BY ALL)sql");
  v.push_back(
    // ECDF of busbw per kernel key, thinned to at most max_points + 1 points: a point is kept
    // where the cumulative fraction crosses a multiple of 1/max_points (and the first one), so
    // with max_points >= the number of distinct values every point of the exact ECDF is kept.
    R"sql(CREATE OR REPLACE {TEMP} MACRO busbw_ecdf(max_points := 200) AS TABLE
WITH v AS (
  SELECT run_id, kernel_key, busbw_gbs, sum(n) AS n FROM busbw_values
  WHERE busbw_gbs IS NOT NULL GROUP BY ALL),
c AS (
  SELECT run_id, kernel_key, busbw_gbs, n,
         sum(n) OVER w / sum(n) OVER (PARTITION BY run_id, kernel_key) AS ecdf,
         coalesce(sum(n) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
           / sum(n) OVER (PARTITION BY run_id, kernel_key) AS prev
  FROM v WINDOW w AS (PARTITION BY run_id, kernel_key ORDER BY busbw_gbs))
SELECT run_id, kernel_key, busbw_gbs, ecdf FROM c
WHERE prev = 0 OR floor(ecdf * max_points) > floor(prev * max_points)
ORDER BY run_id, kernel_key, busbw_gbs)sql");
  v.push_back(
    R"sql(CREATE OR REPLACE {TEMP} MACRO exec_time_ecdf(max_points := 200) AS TABLE
WITH v AS (
  SELECT run_id, kernel_key, exec_time_us, sum(n) AS n FROM busbw_values GROUP BY ALL),
c AS (
  SELECT run_id, kernel_key, exec_time_us, n,
         sum(n) OVER w / sum(n) OVER (PARTITION BY run_id, kernel_key) AS ecdf,
         coalesce(sum(n) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
           / sum(n) OVER (PARTITION BY run_id, kernel_key) AS prev
  FROM v WINDOW w AS (PARTITION BY run_id, kernel_key ORDER BY exec_time_us))
SELECT run_id, kernel_key, exec_time_us, ecdf FROM c
WHERE prev = 0 OR floor(ecdf * max_points) > floor(prev * max_points)
ORDER BY run_id, kernel_key, exec_time_us)sql");
  v.push_back(
    // Equal-width histogram of busbw per kernel key between its min and max; bin i covers
    // [lo + i*w, lo + (i+1)*w), the last bin includes the max.
    R"sql(CREATE OR REPLACE {TEMP} MACRO busbw_histogram(bins := 40) AS TABLE
WITH v AS (SELECT * FROM busbw_values WHERE busbw_gbs IS NOT NULL),
r AS (SELECT run_id, kernel_key, min(busbw_gbs) AS lo, max(busbw_gbs) AS hi FROM v GROUP BY ALL),
b AS (
  SELECT v.run_id, v.kernel_key, r.lo, r.hi,
         CASE WHEN r.hi = r.lo THEN 0
              ELSE least(floor((v.busbw_gbs - r.lo) / ((r.hi - r.lo) / bins)), bins - 1) END
           ::INTEGER AS bin,
         v.n
  FROM v JOIN r USING (run_id, kernel_key))
SELECT run_id, kernel_key, bin,
       any_value(lo) + bin * (any_value(hi) - any_value(lo)) / bins AS bin_lo,
       CASE WHEN any_value(hi) = any_value(lo) THEN any_value(hi)
            ELSE any_value(lo) + (bin + 1) * (any_value(hi) - any_value(lo)) / bins END AS bin_hi,
       sum(n) AS records
FROM b GROUP BY run_id, kernel_key, bin ORDER BY run_id, kernel_key, bin)sql");
}

// Variation: the spread of each kernel key.
void VariationViews(std::vector<std::string>& v) {
  v.push_back(
    // Per kernel key: records, mean, sample stddev, CV = stddev / mean, and nearest-rank
    // quantiles of busbw; mean exec time.
    // (Materialised for fresh runs: every spatial primitive normalises by its medians.)
    std::string("CREATE OR REPLACE {TEMP} VIEW kernel_variation AS SELECT * FROM "
                "agg_kernel_variation WHERE run_id IN ") + kFresh + " UNION ALL SELECT * FROM " +
        Paren(KernelVariationSql(Paren(ValuesFromCellsSql("raw_cells")))));
  v.push_back(
    // CV against GPU count: the same (op, size) across communicator sizes and runs.
    R"sql(CREATE OR REPLACE {TEMP} VIEW variation_scaling AS
SELECT r.name AS run, v.run_id, v.op, v.msg_size_bytes, v.n_ranks, v.nnodes, v.coll_type,
       v.records, v.mean_busbw_gbs, v.cv_busbw
FROM kernel_variation v JOIN runs r USING (run_id)
ORDER BY v.op, v.msg_size_bytes, v.n_ranks, r.name)sql");
  v.push_back(
    // busbw statistics per (run, op, Inspector message size, n_ranks) from Inspector records and
    // from nccl-tests baselines alike: what `collscope compare` matches on.
    R"sql(CREATE OR REPLACE {TEMP} VIEW busbw_by_shape AS
WITH ins AS (
  SELECT b.run_id, d.op, d.msg_size_bytes, d.n_ranks, max(d.nnodes) AS nnodes, b.busbw_gbs AS x,
         sum(b.n) AS n
  FROM busbw_values b
  JOIN (SELECT DISTINCT run_id, kernel_key, op, msg_size_bytes, n_ranks, nnodes FROM op_dims
        WHERE kind = 'coll') d USING (run_id, kernel_key)
  WHERE b.busbw_gbs IS NOT NULL GROUP BY ALL),
nt AS (
  SELECT run_id, CAST(op AS VARCHAR) AS op, msg_size_bytes, n_ranks, max(nnodes) AS nnodes,
         busbw_gbs AS x, count(*) AS n
  FROM nccl_tests_results WHERE busbw_gbs IS NOT NULL GROUP BY ALL),
u AS (SELECT 'inspector' AS source, * FROM ins UNION ALL SELECT 'nccl-tests', * FROM nt),
m AS (
  SELECT source, run_id, op, msg_size_bytes, n_ranks, max(nnodes) AS nnodes,
         sum(n)::BIGINT AS samples, sum(n * x) / sum(n) AS mean_busbw_gbs
  FROM u GROUP BY ALL),
v AS (
  SELECT m.source, m.run_id, m.op, m.msg_size_bytes, m.n_ranks,
         sum(u.n * (u.x - m.mean_busbw_gbs) * (u.x - m.mean_busbw_gbs)) AS ss
  FROM m JOIN u USING (source, run_id, op, msg_size_bytes, n_ranks)
  GROUP BY m.source, m.run_id, m.op, m.msg_size_bytes, m.n_ranks)
SELECT m.source, m.run_id, r.name AS run, m.op, m.msg_size_bytes, m.n_ranks, m.nnodes, m.samples,
       m.mean_busbw_gbs,
       CASE WHEN m.samples > 1 THEN sqrt(v.ss / (m.samples - 1)) END AS stddev_busbw_gbs,
       CASE WHEN m.samples > 1 THEN sqrt(v.ss / (m.samples - 1)) / nullif(m.mean_busbw_gbs, 0) END
         AS cv_busbw
FROM m JOIN v USING (source, run_id, op, msg_size_bytes, n_ranks) JOIN runs r USING (run_id))sql");
  v.push_back(
    // Production run vs baseline run per matching (op, size, n_ranks).
    R"sql(CREATE OR REPLACE {TEMP} MACRO compare_runs(prod_run, base_run) AS TABLE
SELECT p.op, p.msg_size_bytes, p.n_ranks, p.nnodes AS prod_nnodes, b.nnodes AS base_nnodes,
       p.samples AS prod_samples, p.mean_busbw_gbs AS prod_mean_busbw_gbs, p.cv_busbw AS prod_cv,
       b.samples AS base_samples, b.mean_busbw_gbs AS base_mean_busbw_gbs, b.cv_busbw AS base_cv,
       p.mean_busbw_gbs / nullif(b.mean_busbw_gbs, 0) AS mean_ratio,
       p.cv_busbw / nullif(b.cv_busbw, 0) AS cv_ratio, b.source AS base_source
FROM busbw_by_shape p JOIN busbw_by_shape b USING (op, msg_size_bytes, n_ranks)
WHERE p.run = prod_run AND b.run = base_run
ORDER BY p.op, p.msg_size_bytes, p.n_ranks)sql");
}

// Temporal: per wall-clock time bin.
void TemporalViews(std::vector<std::string>& v) {
  // busbw and exec time per kernel key in wall-clock bins of bin_s seconds (bins start at
  // multiples of bin_s since the epoch), messages of at least min_bytes. The time of a record
  // is when it started when known (verbose or collscope records), else when it was dumped.
  // Whole-second bins of fresh runs add up agg_time's one-second bins; the rest read records.
  v.push_back(std::string(R"sql(CREATE OR REPLACE {TEMP} MACRO temporal(bin_s := 5, min_bytes := 1048576) AS TABLE
WITH ft AS (
  SELECT run_id, kid, tbin_s // CAST(greatest(1, round(bin_s)) AS UBIGINT) AS bin,
         sum(records) AS records, sum(bw_records) AS bw_records, sum(bw_sum) AS bw_sum,
         min(bw_min) AS bw_min, max(bw_max) AS bw_max, sum(time_us) AS time_us,
         max(max_exec_us) AS max_exec_us
  FROM agg_time WHERE msg_size_bytes >= min_bytes
  GROUP BY ALL),
fast AS (
  SELECT ft.run_id, k.kernel_key, ft.bin, ft.records, ft.bw_records, ft.bw_sum, ft.bw_min,
         ft.bw_max, ft.time_us, ft.max_exec_us
  FROM ft JOIN )sql") + kKernelNames + R"sql( k USING (run_id, kid)
  WHERE ft.run_id IN (SELECT run_id FROM agg_fresh_runs WHERE bin_s >= 1 AND bin_s = floor(bin_s))),
d AS (SELECT * FROM op_dims WHERE msg_size_bytes >= min_bytes),
b AS (
  SELECT r.run_id, r.op_id,
         (coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us)
            // CAST(round(bin_s * 1e6) AS UBIGINT)) AS bin,
         r.exec_time_us, r.busbw_gbs_override AS ovr, count(*) AS n
  FROM records r SEMI JOIN d USING (run_id, op_id)
  WHERE r.run_id IN (SELECT run_id FROM agg_stale_runs UNION ALL
                     SELECT run_id FROM runs WHERE NOT (bin_s >= 1 AND bin_s = floor(bin_s)))
  GROUP BY ALL),
x AS (
  SELECT b.run_id, d.kernel_key, b.bin, b.n, b.exec_time_us,
         shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, b.exec_time_us, b.ovr) AS busbw
  FROM b JOIN d USING (run_id, op_id)),
slow AS (
  SELECT run_id, kernel_key, bin, sum(n) AS records,
         sum(n) FILTER (WHERE busbw IS NOT NULL) AS bw_records, sum(n * busbw) AS bw_sum,
         min(busbw) AS bw_min, max(busbw) AS bw_max, sum(n * exec_time_us) AS time_us,
         max(exec_time_us) AS max_exec_us
  FROM x GROUP BY ALL)
SELECT run_id, kernel_key, bin, bin * CAST(round(bin_s * 1e6) AS UBIGINT) AS bin_start_us,
       records::BIGINT AS records, bw_sum / bw_records AS mean_busbw_gbs,
       bw_min AS min_busbw_gbs, bw_max AS max_busbw_gbs, time_us / records AS mean_exec_time_us,
       max_exec_us AS max_exec_time_us
FROM (SELECT * FROM fast UNION ALL SELECT * FROM slow) ORDER BY run_id, kernel_key, bin)sql");
}

// Per host: its busbw against the job, its transfers, its communicators, its time bins.
void HostViews(std::vector<std::string>& v) {
  // Each host's median busbw over the job median, per kernel key (NIXT's host normalisation).
  v.push_back(std::string("CREATE OR REPLACE {TEMP} VIEW host_normalized AS SELECT * FROM "
                          "agg_host_normalized WHERE run_id IN ") + kFresh + " UNION ALL SELECT * FROM " +
              Paren(HostNormalizedSql("raw_cells")));
  // Per host and cross-host kernel key: the median busbw of the transfer instances (TransferCtes)
  // the host takes part in, over the job median. Every host of an instance is charged with it,
  // because all ranks of a ring report the same slow time: the median flags a degraded host and
  // its ring partners alike; host_comm_transfer tells them apart.
  v.push_back(std::string("CREATE OR REPLACE {TEMP} VIEW host_transfer_normalized AS SELECT * "
                          "FROM agg_host_transfer WHERE run_id IN ") + kFresh + " UNION ALL SELECT * FROM " +
              Paren(HostTransferSql(Paren(TransferSql(
                  std::string("(SELECT * FROM records WHERE run_id IN ") + kStale + ")")))));
  // Per host, for each communicator spanning hosts: how fast its transfers ran against the job.
  v.push_back(std::string("CREATE OR REPLACE {TEMP} VIEW host_comm_transfer AS SELECT * "
                          "FROM agg_host_comm WHERE run_id IN ") + kFresh + " UNION ALL SELECT * FROM " +
              Paren(HostCommSql(Paren(TransferSql(
                  std::string("(SELECT * FROM records WHERE run_id IN ") + kStale + ")")))));
  v.push_back(
    // The host table, ranked worst first by transfer_norm_busbw: the host's best cross-host
    // communicator (host_comm_transfer). A communicator runs no faster than its slowest member,
    // so a host's network does at least what its best communicator shows: a degraded host is the
    // one whose communicators are all slow, while each of its partners has a fast one as well.
    // Hosts without cross-host transfers rank by norm_busbw: the record-weighted geometric mean
    // of their normalised medians over every kernel.
    // (host_transfer_normalized and host_comm_transfer spelled out here, so that the stale runs'
    // transfer instances are found once.)
    std::string(R"sql(CREATE OR REPLACE {TEMP} VIEW host_table AS
WITH hx AS MATERIALIZED ()sql") + TransferSql(std::string("(SELECT * FROM records WHERE run_id IN ") + kStale + ")") + R"sql(),
n AS (
  SELECT run_id, hostname, sum(records)::BIGINT AS records,
         exp(sum(records * ln(norm_busbw)) / sum(records)) AS norm_busbw,
         arg_min(kernel_key, norm_busbw) AS worst_kernel, min(norm_busbw) AS worst_kernel_norm
  FROM host_normalized WHERE norm_busbw > 0 GROUP BY ALL),
t AS (
  SELECT run_id, hostname, arg_min(kernel_key, norm_busbw) AS worst_transfer_kernel
  FROM (SELECT * FROM agg_host_transfer WHERE run_id IN )sql" + kFresh + R"sql(
        UNION ALL SELECT * FROM ()sql" + HostTransferSql("hx") + R"sql())
  WHERE norm_busbw > 0 GROUP BY ALL),
c AS (
  SELECT run_id, hostname, count(*) AS transfer_comms, max(norm_busbw) AS transfer_norm_busbw,
         arg_max(comm, (norm_busbw, comm)) AS best_comm, min(norm_busbw) AS worst_comm_norm
  FROM (SELECT * FROM agg_host_comm WHERE run_id IN )sql" + kFresh + R"sql(
        UNION ALL SELECT * FROM ()sql" + HostCommSql("hx") + R"sql())
  GROUP BY ALL),
p AS (SELECT run_id, hostname, count(*) AS processes FROM processes GROUP BY ALL)
SELECT n.run_id, row_number() OVER (PARTITION BY n.run_id
         ORDER BY coalesce(c.transfer_norm_busbw, n.norm_busbw), n.norm_busbw, n.hostname) AS rank,
       n.hostname, p.processes, n.records, n.norm_busbw, c.transfer_norm_busbw, c.transfer_comms,
       c.best_comm, c.worst_comm_norm, n.worst_kernel, n.worst_kernel_norm, t.worst_transfer_kernel
FROM n JOIN p USING (run_id, hostname) LEFT JOIN t USING (run_id, hostname)
LEFT JOIN c USING (run_id, hostname)
ORDER BY n.run_id, rank)sql");
  // Host x time-bin heatmap of normalised busbw (record busbw / job median of its kernel key).
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO host_time_heatmap(bin_s := 5, min_bytes := 1048576) AS TABLE
WITH fh AS (
  SELECT run_id, hid, tbin_s // CAST(greatest(1, round(bin_s)) AS UBIGINT) AS bin,
         sum(records) AS records, sum(norm_sum) AS norm_sum
  FROM agg_host_time WHERE min_bytes = 1048576
  GROUP BY ALL
  UNION ALL
  SELECT run_id, hid, tbin_s // CAST(greatest(1, round(bin_s)) AS UBIGINT) AS bin,
         sum(bw_records) AS records, sum(norm_sum) AS norm_sum
  FROM agg_time
  WHERE min_bytes <> 1048576 AND msg_size_bytes >= min_bytes AND bw_records > 0
    AND norm_sum IS NOT NULL
  GROUP BY ALL),
fast AS (
  SELECT fh.run_id, h.hostname, fh.bin, fh.records, fh.norm_sum
  FROM fh JOIN )sql" + std::string(kHostNames) + R"sql( h USING (run_id, hid)
  WHERE fh.run_id IN (SELECT run_id FROM agg_fresh_runs WHERE bin_s >= 1 AND bin_s = floor(bin_s))),
d AS (SELECT * FROM op_dims WHERE msg_size_bytes >= min_bytes),
b AS (
  SELECT r.run_id, r.process_id, r.op_id,
         (coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us)
            // CAST(round(bin_s * 1e6) AS UBIGINT)) AS bin,
         r.exec_time_us, r.busbw_gbs_override AS ovr, count(*) AS n
  FROM records r SEMI JOIN d USING (run_id, op_id)
  WHERE r.run_id IN (SELECT run_id FROM agg_stale_runs UNION ALL
                     SELECT run_id FROM runs WHERE NOT (bin_s >= 1 AND bin_s = floor(bin_s)))
  GROUP BY ALL),
x AS (
  SELECT b.run_id, p.hostname, b.bin, b.n,
         shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, b.exec_time_us, b.ovr)
           / nullif(k.median_busbw_gbs, 0) AS norm
  FROM b JOIN d USING (run_id, op_id) JOIN kernel_variation k USING (run_id, kernel_key)
  JOIN processes p USING (run_id, process_id)),
slow AS (
  SELECT run_id, hostname, bin, sum(n) AS records, sum(n * norm) AS norm_sum
  FROM x WHERE norm IS NOT NULL GROUP BY ALL)
SELECT run_id, hostname, bin, bin * CAST(round(bin_s * 1e6) AS UBIGINT) AS bin_start_us,
       records::BIGINT AS records, norm_sum / records AS norm_busbw
FROM (SELECT * FROM fast UNION ALL SELECT * FROM slow) ORDER BY run_id, hostname, bin)sql");
}

// Spatial: per rank, process, host and communicator.
void SpatialViews(std::vector<std::string>& v) {
  // Value counts per (process, operation): the exact busbw distribution of every cell.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} VIEW busbw_cells AS
SELECT v.run_id, v.process_id, v.op_id, d.comm_id, d.comm, d.comm_name, v.rank, d.kernel_key,
       d.nnodes, d.msg_size_bytes, v.exec_time_us, v.busbw_gbs, v.records AS n
FROM cell_values v JOIN op_dims d USING (run_id, op_id))sql");
  // Mean busbw and normalised busbw (busbw / job median of the kernel key) per
  // (communicator, rank): the cells of the rank x communicator heatmap.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO rank_cells(min_bytes := 1048576) AS TABLE
SELECT c.run_id, d.comm_id, any_value(d.comm) AS comm, any_value(d.comm_name) AS comm_name,
       c.rank, any_value(p.hostname) AS hostname, any_value(c.process_id) AS process_id,
       sum(c.bw_records)::BIGINT AS records, sum(c.bw_sum) / sum(c.bw_records) AS mean_busbw_gbs,
       sum(c.bw_sum / k.median_busbw_gbs) / sum(c.bw_records) AS norm_busbw
FROM proc_ops c JOIN op_dims d USING (run_id, op_id)
JOIN kernel_variation k ON k.run_id = c.run_id AND k.kernel_key = d.kernel_key
JOIN processes p ON p.run_id = c.run_id AND p.process_id = c.process_id
WHERE d.msg_size_bytes >= min_bytes AND c.bw_records > 0
GROUP BY c.run_id, d.comm_id, c.rank ORDER BY c.run_id, d.comm_id, c.rank)sql");
  // Each process's position in its run's (host, pid) order: the process axis of the spatial views.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} VIEW process_ordinals AS
SELECT run_id, process_id, hostname, pid,
       row_number() OVER (PARTITION BY run_id ORDER BY hostname, pid) - 1 AS ordinal
FROM processes)sql");
  // Every process in every communicator kind (comm_name, else "N-rank groups on K hosts"): its
  // busbw over the median process of that kind for the same kernel, so that healthy structure
  // (a kind's own speed) stays neutral and a job of thousands of ranks is one row per kind, not a
  // row per communicator; ordinal from process_ordinals.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO kind_rank_cells(min_bytes := 1048576) AS TABLE
WITH x AS (
  SELECT c.run_id, c.process_id, d.kernel_key,
         CASE WHEN coalesce(d.comm_name, '') IN ('', 'unknown')
              THEN d.n_ranks || '-rank groups on ' || coalesce(d.nnodes::VARCHAR, '?') || ' hosts'
              ELSE d.comm_name END AS comm_kind,
         sum(c.bw_sum) AS bw_sum, sum(c.bw_records) AS bw_records
  FROM proc_ops c JOIN op_dims d USING (run_id, op_id)
  WHERE d.msg_size_bytes >= min_bytes AND c.bw_records > 0
  GROUP BY ALL),
m AS (SELECT run_id, comm_kind, kernel_key, median(bw_sum / bw_records) AS peer_busbw_gbs FROM x GROUP BY ALL)
SELECT x.run_id, x.comm_kind, o.ordinal, o.hostname, o.pid, x.process_id,
       sum(x.bw_records)::BIGINT AS records, sum(x.bw_sum / m.peer_busbw_gbs) / sum(x.bw_records) AS norm_busbw
FROM x JOIN m USING (run_id, comm_kind, kernel_key) JOIN process_ordinals o USING (run_id, process_id)
WHERE m.peer_busbw_gbs > 0
GROUP BY ALL ORDER BY x.run_id, x.comm_kind, o.ordinal)sql");
  // Per process: records and normalised mean busbw; ordinal = position in (host, pid) order.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO process_stats(min_bytes := 1048576) AS TABLE
SELECT c.run_id, c.process_id, o.ordinal, o.hostname, o.pid, sum(c.bw_records)::BIGINT AS records,
       sum(c.bw_sum / k.median_busbw_gbs) / sum(c.bw_records) AS norm_busbw
FROM proc_ops c JOIN op_dims d USING (run_id, op_id)
JOIN kernel_variation k ON k.run_id = c.run_id AND k.kernel_key = d.kernel_key
JOIN process_ordinals o ON o.run_id = c.run_id AND o.process_id = c.process_id
WHERE d.msg_size_bytes >= min_bytes AND c.bw_records > 0
GROUP BY ALL ORDER BY c.run_id, o.ordinal)sql");
  v.push_back(
    // Blocks of block_ranks consecutive processes (process ordinal // block_ranks).
    R"sql(CREATE OR REPLACE {TEMP} MACRO rank_blocks(block_ranks := 8, min_bytes := 1048576) AS TABLE
SELECT run_id, ordinal // block_ranks AS block, min(ordinal) AS first_ordinal,
       max(ordinal) AS last_ordinal, sum(records)::BIGINT AS records,
       sum(records * norm_busbw) / sum(records) AS norm_busbw,
       min(hostname) AS first_host, max(hostname) AS last_host
FROM process_stats(min_bytes := min_bytes) GROUP BY ALL ORDER BY run_id, block)sql");
  HostViews(v);
  // Range bars: min/p25/p50/p75/max of busbw per kernel key and communicator, host, time bin,
  // sequence-number bin (nearest-rank quantiles from value counts). The default parameters'
  // answer of fresh runs is materialised (agg_range_bars).
  {
    const std::string recompute = std::string("(SELECT run_id FROM agg_stale_runs UNION ALL "
                                              "SELECT run_id FROM runs WHERE NOT (") +
                                  kRangeBarsDefault + "))";
    v.push_back(
        "CREATE OR REPLACE {TEMP} MACRO range_bars(min_bytes := 1048576, bin_s := 5, "
        "sn_bin := 50) AS TABLE SELECT * FROM (SELECT run_id, kernel_key, dimension, \"group\", "
        "records, min_busbw_gbs, p25_busbw_gbs, p50_busbw_gbs, p75_busbw_gbs, max_busbw_gbs "
        "FROM agg_range_bars WHERE p_min_bytes = min_bytes AND p_bin_s = bin_s AND "
        "p_sn_bin = sn_bin AND run_id IN (SELECT run_id FROM agg_fresh_runs WHERE " +
        std::string(kRangeBarsDefault) + ") UNION ALL SELECT * FROM " +
        Paren(RangeBarsSql("(SELECT * FROM cell_values WHERE run_id IN " + recompute + ")",
                     "(SELECT * FROM records WHERE run_id IN " + recompute + ")", "min_bytes",
                     "bin_s", "sn_bin")) +
        ") ORDER BY run_id, kernel_key, dimension, \"group\"");
  }
}

// Resource usage per communicator shape, and every metadata column per process and operation.
void ResourceAndOtherViews(std::vector<std::string>& v) {
  v.push_back(
    R"sql(CREATE OR REPLACE {TEMP} VIEW resource_usage AS
SELECT k.run_id, k.n_ranks, k.nnodes, k.coll_type, k.kind, k.op, sum(k.records) AS records,
       sum(k.bytes) AS bytes, sum(k.time_us) AS time_us,
       (SELECT count(DISTINCT comm_id) FROM op_dims d WHERE d.run_id = k.run_id
          AND d.n_ranks = k.n_ranks AND d.nnodes = k.nnodes AND d.op = k.op AND d.kind = k.kind)
         AS communicators
FROM kernel_stats k GROUP BY ALL ORDER BY k.run_id, k.n_ranks, k.nnodes, k.op)sql");
  // ---- other ---------------------------------------------------------------------------------
  // Per process and operation shape, with every metadata column: group it by any of them.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} VIEW meta_cells AS
WITH c AS (
  SELECT run_id, process_id, op_id, timing_source, sum(records)::BIGINT AS records,
         sum(time_us)::HUGEINT AS time_us
  FROM proc_ops GROUP BY ALL)
SELECT r.name AS run, c.run_id, p.hostname, p.pid, p.git_rev, p.rec_mechanism, p.format_version,
       d.comm, d.comm_name, d.n_ranks, d.nnodes, d.coll_type, d.kind, d.op, d.algo, d.proto,
       d.msg_size_bytes, d.kernel_key, CAST(c.timing_source AS VARCHAR) AS timing_source, c.records, c.time_us,
       c.records * d.msg_size_bytes AS bytes
FROM c JOIN op_dims d USING (run_id, op_id) JOIN processes p USING (run_id, process_id)
JOIN runs r USING (run_id))sql");
  v.push_back(
    // Records, bytes, time and time-weighted busbw (total traffic-bytes / total time) by any
    // metadata column: SELECT * FROM group_by_column(git_rev).
    R"sql(CREATE OR REPLACE {TEMP} MACRO group_by_column(col) AS TABLE
SELECT run, CAST(col AS VARCHAR) AS value, sum(records)::BIGINT AS records,
       sum(bytes)::HUGEINT AS bytes, sum(time_us)::HUGEINT AS time_us,
       count(DISTINCT hostname) AS hosts, count(DISTINCT kernel_key) AS kernels
FROM meta_cells GROUP BY ALL ORDER BY run, value)sql");
  // Median busbw by metadata column and kernel key (NIXT's "other" primitive), per record: the
  // median of DuckDB's median() (quantile_cont: the two middle values interpolated), computed
  // from the value counts of the cells. col: a column of records_v's metadata (hostname, pid,
  // git_rev, rec_mechanism, format_version, comm, comm_name, n_ranks, nnodes, coll_type, kind, op,
  // algo, proto, msg_size_bytes, kernel_key, timing_source, rank).
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO busbw_by_column(col) AS TABLE
WITH mc AS (
  SELECT c.run_id, p.hostname, p.pid, p.git_rev, p.rec_mechanism, p.format_version,
         d.comm, d.comm_name, d.n_ranks, d.nnodes, d.coll_type, d.kind, d.op, d.algo, d.proto,
         d.msg_size_bytes, d.kernel_key, c.timing_source, c.rank, c.busbw_gbs, c.records AS n
  FROM cell_values c JOIN op_dims d USING (run_id, op_id) JOIN processes p USING (run_id, process_id)),
g AS (
  SELECT run_id, CAST(col AS VARCHAR) AS value, kernel_key, busbw_gbs AS x, sum(n) AS n
  FROM mc GROUP BY ALL),
w AS (
  SELECT *, sum(n) OVER (PARTITION BY run_id, value, kernel_key) AS records,
         sum(n) FILTER (WHERE x IS NOT NULL) OVER (PARTITION BY run_id, value, kernel_key) AS total,
         sum(n) OVER (PARTITION BY run_id, value, kernel_key ORDER BY x ASC NULLS LAST
                      ROWS UNBOUNDED PRECEDING) AS cum
  FROM g),
m AS (
  SELECT run_id, value, kernel_key, any_value(records)::BIGINT AS records,
         min(x) FILTER (WHERE cum >= floor((total - 1) * 0.5) + 1) AS lo,
         min(x) FILTER (WHERE cum >= ceil((total - 1) * 0.5) + 1) AS hi
  FROM w GROUP BY ALL)
SELECT r.name AS run, m.value, m.kernel_key, m.records, m.lo + (m.hi - m.lo) * 0.5 AS median_busbw_gbs
FROM m JOIN runs r USING (run_id) ORDER BY run, kernel_key, value)sql");
}

// Steps and phases per rank, where the store has step/phase series (the annotation API's format)
// or Kineto steps. A rank's compute time in a step is the wall time of its phases that are not
// communication (forward, backward, optimizer...; Kineto steps: the step's compute kernels). Not
// the step less its communication phases: frameworks nest and overlap those (a pipeline phase
// spans the backward pass), so the difference moves with the network and would light up healthy
// ranks. Its peers are the ranks of the same pipeline stage at the same step, which run the same
// layers (every rank when no stage is declared): a rank at 1.0 is as its peers, so healthy
// structure stays neutral. A collective inside a compute phase holds its group mates as long as
// its slowest member, so a slow GPU shows in its tensor-parallel group's row, itself the darkest.
void StepViews(std::vector<std::string>& v) {
  // The SQL list of the communication phases: ('tp_comm', ...).
  auto CommunicationPhasesSql = [] {
    std::string list;
    for (std::string_view p : readers::kCommunicationPhases) list += (list.empty() ? "('" : ", '") + std::string(p) + "'";
    return list + ")";
  };
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO step_rank_times(rid) AS TABLE
WITH s AS (
  SELECT rank, step, min(start_us) AS start_us,
         coalesce(max(dur_us) FILTER (WHERE source = 'annotation'), max(dur_us)) AS step_us,
         max(compute_us) FILTER (WHERE source = 'kineto') AS kernel_compute_us
  FROM steps WHERE run_id = rid AND rank >= 0 GROUP BY ALL),
c AS (
  SELECT rank, step,
         sum(wall_us) FILTER (WHERE phase NOT IN )sql" + CommunicationPhasesSql() + R"sql() AS compute_us
  FROM step_phases WHERE run_id = rid GROUP BY ALL),
r AS (
  SELECT rank, any_value(hostname) AS hostname, any_value(pp_rank) AS pp_rank, any_value(tp_rank) AS tp_rank,
         any_value(dp_rank) AS dp_rank
  FROM step_ranks WHERE run_id = rid AND rank >= 0 GROUP BY rank),
k AS (SELECT rank, any_value(hostname) AS hostname FROM kineto_traces WHERE run_id = rid AND rank >= 0 GROUP BY rank)
SELECT s.rank, coalesce(r.hostname, k.hostname) AS hostname, r.pp_rank, r.tp_rank, r.dp_rank, s.step,
       s.start_us, s.step_us, coalesce(c.compute_us, s.kernel_compute_us) AS compute_us
FROM s LEFT JOIN c USING (rank, step) LEFT JOIN r USING (rank) LEFT JOIN k USING (rank))sql");
  // Rank x step: each cell's compute time over its peers' median at that step. Above max_rows ranks,
  // a row per host, holding its worst rank (a slow GPU still stands out in its host's row).
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO step_cells(rid, max_rows := 256) AS TABLE
WITH t AS (SELECT * FROM step_rank_times(rid)),
peers AS (SELECT step, pp_rank, median(compute_us) AS med FROM t GROUP BY ALL),
x AS (SELECT t.*, t.compute_us / nullif(p.med, 0) AS ratio
      FROM t JOIN peers p ON t.step = p.step AND t.pp_rank IS NOT DISTINCT FROM p.pp_rank),
n AS (SELECT count(DISTINCT rank) AS ranks FROM t)
SELECT CASE WHEN (SELECT ranks FROM n) > max_rows THEN coalesce(hostname, '(unknown host)') ELSE 'rank ' || rank END AS row_label,
       any_value(hostname) AS hostname, min(rank) AS first_rank, arg_max(rank, coalesce(ratio, 0)) AS rank, step,
       min(start_us)::BIGINT AS start_us, max(step_us)::BIGINT AS step_us, max(compute_us)::BIGINT AS compute_us,
       round(max(ratio), 4) AS ratio, count(*)::INTEGER AS ranks
FROM x GROUP BY row_label, step ORDER BY first_rank, step)sql");
  // Phases per rank: each phase's mean wall time per step, and whether it is communication.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO phase_means(rid, max_rows := 256) AS TABLE
WITH p AS (SELECT rank, phase, sum(wall_us) AS wall_us, count(DISTINCT step) AS steps
           FROM step_phases WHERE run_id = rid AND rank >= 0 GROUP BY ALL),
h AS (SELECT rank, any_value(hostname) AS hostname FROM step_ranks WHERE run_id = rid GROUP BY rank),
n AS (SELECT count(DISTINCT rank) AS ranks FROM p)
SELECT CASE WHEN (SELECT ranks FROM n) > max_rows THEN coalesce(hostname, '(unknown host)') ELSE 'rank ' || rank END AS row_label,
       any_value(hostname) AS hostname, min(rank) AS first_rank, phase,
       round(avg(wall_us / steps), 1) AS mean_us,
       phase IN )sql" + CommunicationPhasesSql() + R"sql( AS communication
FROM p LEFT JOIN h USING (rank) GROUP BY row_label, phase ORDER BY first_rank, row_label, phase)sql");
  // The ARGUS grid: a cell per rank at (data-parallel rank, pipeline stage and tensor-parallel
  // rank), its longest compute time of a step (the run's first step left out: warm-up) over the
  // median of its stage's. Ranks whose series declare no layout are not placed.
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO parallel_grid(rid) AS TABLE
WITH t AS (SELECT * FROM step_rank_times(rid) WHERE dp_rank IS NOT NULL),
first AS (SELECT min(step) AS s, count(DISTINCT step) AS n FROM t),
m AS (SELECT rank, any_value(hostname) AS hostname, any_value(dp_rank) AS dp_rank, any_value(pp_rank) AS pp_rank,
             any_value(tp_rank) AS tp_rank, max(compute_us) AS max_compute_us
      FROM t WHERE step > (SELECT s FROM first) OR (SELECT n FROM first) < 3 GROUP BY rank)
SELECT rank, hostname, dp_rank, pp_rank, tp_rank, max_compute_us::BIGINT AS max_compute_us,
       round(max_compute_us / nullif(median(max_compute_us) OVER (PARTITION BY pp_rank), 0), 4) AS ratio
FROM m ORDER BY pp_rank, tp_rank, dp_rank)sql");
}

// Kernels against their peers, from the CUPTI library's kernel summaries (their log-normal modes)
// or, without them, Kineto's kernels: per rank and compute kernel (the summaries' name and launch
// configuration; Kineto's name), the geometric mean duration over the median of the ranks that run
// it. Only the top_kernels by time; above max_rows ranks, a row per host holding its worst rank.
// NCCL kernels are left out: their duration includes waiting for the slowest member.
void KernelViews(std::vector<std::string>& v) {
  v.push_back(R"sql(CREATE OR REPLACE {TEMP} MACRO kernel_mode_cells(rid, top_kernels := 12, max_rows := 256) AS TABLE
WITH src AS (
  SELECT rank, host,
         name || '<<<' || coalesce(array_to_string(grid, ','), '') || ' | ' || coalesce(array_to_string(block, ','), '') || '>>>' AS kernel,
         unnest(modes) AS m
  FROM kernel_summaries WHERE run_id = rid AND kind = 'compute' AND rank IS NOT NULL),
summ AS (SELECT rank, host, kernel, m.count::DOUBLE AS n, m.centre_us AS centre FROM src WHERE m.count > 0 AND m.centre_us > 0),
kin AS (
  SELECT k.rank, t.hostname AS host, k.name AS kernel, 1.0 AS n, k.dur_us AS centre
  FROM kernels k JOIN kineto_traces t USING (run_id, trace_id)
  WHERE k.run_id = rid AND k.kind = 'compute' AND k.dur_us > 0 AND k.rank IS NOT NULL AND NOT EXISTS (SELECT 1 FROM summ)),
d AS (SELECT * FROM summ UNION ALL SELECT * FROM kin),
top AS (SELECT kernel FROM d GROUP BY kernel ORDER BY sum(n * centre) DESC, kernel LIMIT top_kernels),
r AS (SELECT rank, any_value(host) AS host, kernel, exp(sum(n * ln(centre)) / sum(n)) AS geo_us, sum(n) AS executions
      FROM d WHERE kernel IN (SELECT kernel FROM top) GROUP BY rank, kernel),
x AS (SELECT r.*, geo_us / nullif(median(geo_us) OVER (PARTITION BY kernel), 0) AS ratio FROM r),
n AS (SELECT count(DISTINCT rank) AS ranks FROM r)
SELECT CASE WHEN (SELECT ranks FROM n) > max_rows THEN coalesce(host, '(unknown host)') ELSE 'rank ' || rank END AS row_label,
       any_value(host) AS hostname, min(rank) AS first_rank, arg_max(rank, coalesce(ratio, 0)) AS rank, kernel,
       round(max(geo_us), 2) AS geo_us, round(max(ratio), 4) AS ratio, sum(executions)::BIGINT AS executions,
       count(*)::INTEGER AS ranks
FROM x GROUP BY row_label, kernel ORDER BY first_rank, kernel)sql");
}

// Every other view and macro. Sources read the agg_* tables for the runs whose aggregates are
// fresh (agg_fresh_runs) and the records for the others (agg_stale_runs), so answers never depend
// on whether RefreshAggregates ran: only their cost does.
std::vector<std::string> Views(bool use_aggregates) {
  std::vector<std::string> v;
  SourceViews(v, use_aggregates);
  SummaryViews(v);
  VariationViews(v);
  TemporalViews(v);
  SpatialViews(v);
  StepViews(v);
  KernelViews(v);
  ResourceAndOtherViews(v);
  return v;
}

Status Install(Store& store, const std::string& sql, bool temporary) {
  std::string s = sql;
  size_t at = s.find("{TEMP} ");
  if (at != std::string::npos) s.replace(at, 7, temporary ? "TEMP " : "");
  Status st = store.Exec(s);
  if (!st.ok()) return st.WithPrefix("analysis view: ");
  return Status::Ok();
}

// Creates the agg_* tables that are missing (TEMP and empty in a read-only session).
// A writable store's agg_* tables of another shape (made by an older version) are dropped and
// made again, and every run's aggregates marked missing. A read-only session shadows them with
// empty TEMP tables of the current shape (and an empty agg_meta: every run reads the records).
Status EnsureAggTables(Store& store, bool temporary) {
  bool shadowed = false;
  for (const auto& [name, select] : AggTables()) {
    Result<int64_t> n = store.QueryInt("SELECT count(*) FROM duckdb_tables() WHERE table_name = " +
                                       SqlString(name));
    if (!n.ok()) return n.status();
    if (*n > 0) {
      Result<int64_t> same = store.QueryInt(
          "SELECT CAST((SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY column_index) "
          "FROM duckdb_columns() WHERE table_name = " + SqlString(name) + " AND database_name <> 'temp') = "
          "(SELECT string_agg(column_name || ' ' || column_type, ', ') FROM (DESCRIBE " + select +
          ")) AS INTEGER)");
      if (!same.ok()) return same.status();
      if (*same) continue;
      if (!temporary) {
        COLLSCOPE_RETURN_IF_ERROR(store.Exec("DROP TABLE " + name));
        if (name != "agg_meta")
          COLLSCOPE_RETURN_IF_ERROR(store.Exec("DELETE FROM agg_meta"));
      } else if (name != "agg_meta") {
        shadowed = true;
      }
    }
    Status st = store.Exec(std::string("CREATE ") + (temporary ? "OR REPLACE TEMP " : "") +
                           "TABLE " + name + " AS SELECT * FROM (" + select + ") LIMIT 0");
    if (!st.ok()) return st.WithPrefix("analysis aggregates: " + name + ": ");
    if (!temporary) {
      for (const auto& c : kAggComments)
        if (name == c[0])
          COLLSCOPE_RETURN_IF_ERROR(
              store.Exec("COMMENT ON TABLE " + name + " IS '" + c[1] + "'"));
    }
  }
  if (shadowed)
    COLLSCOPE_RETURN_IF_ERROR(store.Exec("CREATE OR REPLACE TEMP TABLE agg_meta AS SELECT * FROM (" +
                                         AggTables().front().second + ") LIMIT 0"));
  return Status::Ok();
}

// Everything InstallAnalysisViews defines, and the table shapes the aggregates' shapes follow
// from, as one fingerprint.
std::string AnalysisFingerprint(bool use_aggregates) {
  std::string all = SchemaDdl();
  for (const std::string& view : BaseViews()) all += view;
  for (const auto& [name, select] : AggTables()) all += name + select;
  for (const std::string& view : Views(use_aggregates)) all += view;
  return DefinitionsFingerprint(all);
}

}  // namespace

Status InstallAnalysisViews(Store& store, bool temporary, bool use_aggregates) {
  // A store whose persisted definitions are this binary's needs neither TEMP copies nor a
  // re-creation: every reading command would otherwise spend most of its start-up here.
  const std::string fingerprint = AnalysisFingerprint(use_aggregates);
  Result<std::string> held = store.MetaValue("analysis_views");
  if (held.ok() && *held == fingerprint) return Status::Ok();
  // Stores made before the nccl-tests tables existed: busbw_by_shape reads them.
  Result<int64_t> nt = store.QueryInt(
      "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'nccl_tests_results'");
  if (!nt.ok()) return nt.status();
  if (*nt == 0) {
    if (!temporary) {
      COLLSCOPE_RETURN_IF_ERROR(EnsureNcclTestsTables(store));
    } else {
      std::string ddl = "CREATE TEMP TABLE nccl_tests_results (";
      bool first = true;
      for (const FieldSpec& f : Fields()) {
        if (f.table != "nccl_tests_results") continue;
        ddl += (first ? "" : ", ") + std::string(f.name) + " " + std::string(f.sql_type);
        first = false;
      }
      COLLSCOPE_RETURN_IF_ERROR(store.Exec(ddl + ")"));
    }
  }
  for (const std::string& view : BaseViews()) COLLSCOPE_RETURN_IF_ERROR(Install(store, view, temporary));
  COLLSCOPE_RETURN_IF_ERROR(EnsureAggTables(store, temporary));
  for (const std::string& view : Views(use_aggregates))
    COLLSCOPE_RETURN_IF_ERROR(Install(store, view, temporary));
  return temporary ? Status::Ok() : store.SetMetaValue("analysis_views", fingerprint);
}

namespace {

// The SQL that fills a run's agg_* tables from its records: the definition of every aggregate,
// run when the builder declines a run (analysis/aggregate_builder.h). `only` is "run_id = R".
std::vector<std::string> AggregateSql(const std::string& r, const std::string& only) {
  return {
      // The run reads as fresh from here on (inside the transaction), so the materialised
      // primitives below are computed from the aggregates made just before them.
      "INSERT INTO agg_meta SELECT " + r + ", " + std::to_string(kAggVersion) +
          ", (SELECT coalesce(max(n), 0) FROM " + kChangingIngests + " WHERE " + only + "), count(*), min(dump_ts_us), "
          "max(dump_ts_us), min(coalesce(start_ts_us, kernel_start_ts_us, dump_ts_us)), "
          "max(coalesce(start_ts_us, kernel_start_ts_us, dump_ts_us)), "
          "current_localtimestamp(), 0 FROM records WHERE " + only,
      "INSERT INTO agg_cells " + RawCellsSql(only),
      "INSERT INTO agg_values " +
          ValuesFromCellsSql("(SELECT * FROM agg_cells WHERE " + only + ")"),
      "INSERT INTO agg_proc_ops " +
          ProcOpsFromCellsSql("(SELECT * FROM agg_cells WHERE " + only + ")"),
      KernelVariationInsert(only),
      "INSERT INTO agg_time SELECT * FROM " +
          Paren(RawTimeSql("r." + only, "(SELECT * FROM kernel_variation WHERE " + only + ")")),
      "INSERT INTO agg_host_time " + HostTimeSql("(SELECT * FROM agg_time WHERE " + only + ")"),
      "INSERT INTO agg_host_normalized SELECT * FROM " +
          Paren(HostNormalizedSql("(SELECT * FROM agg_cells WHERE " + only + ")")),
      // The transfer instances once, for both of their aggregates.
      "CREATE OR REPLACE TEMP TABLE agg_tmp_transfer AS " +
          TransferSql("(SELECT * FROM records WHERE " + only + ")"),
      "INSERT INTO agg_host_transfer SELECT * FROM " + Paren(HostTransferSql("agg_tmp_transfer")),
      "INSERT INTO agg_host_comm SELECT * FROM " + Paren(HostCommSql("agg_tmp_transfer")),
      "DROP TABLE agg_tmp_transfer",
      "INSERT INTO agg_range_bars SELECT 1048576, 5, 50, * FROM (" +
          RangeBarsSql("(SELECT * FROM agg_cells WHERE " + only + ")",
                       "(SELECT * FROM records WHERE " + only + ")", "1048576", "5", "50") +
          ")",
  };
}

std::string SqlNumber(const std::optional<uint64_t>& v) {
  return v ? std::to_string(*v) : std::string("NULL");
}

// One run's aggregates, inside the caller's transaction: the builder's one scan of the records,
// or the SQL where it declines. agg_kernel_variation is SQL either way (cheap, from agg_values).
// `builder`: the run's builder, already fetched and computed (`computed`: its answer), or null.
Status RefreshRun(Store& store, const std::string& r, std::unique_ptr<AggregateBuilder> builder,
                  bool computed) {
  const std::string only = "run_id = " + r;
  for (const char* table : {"agg_meta", "agg_cells", "agg_values", "agg_proc_ops", "agg_time",
                            "agg_kernel_variation", "agg_host_time", "agg_host_normalized",
                            "agg_host_transfer", "agg_host_comm", "agg_range_bars"})
    COLLSCOPE_RETURN_IF_ERROR(store.Exec(std::string("DELETE FROM ") + table + " WHERE " + only));
  if (!builder) {
    builder = std::make_unique<AggregateBuilder>(store, std::stoi(r), "op_dims");
    COLLSCOPE_RETURN_IF_ERROR(builder->Fetch());
    computed = builder->Compute();
  }
  if (!computed) {
    for (const std::string& sql : AggregateSql(r, only)) COLLSCOPE_RETURN_IF_ERROR(store.Exec(sql));
    return Status::Ok();
  }
  const AggregateBuilder::Meta& m = builder->meta();
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(
      "INSERT INTO agg_meta SELECT " + r + ", " + std::to_string(kAggVersion) +
      ", (SELECT coalesce(max(n), 0) FROM " + kChangingIngests + " WHERE " + only + "), " +
      std::to_string(m.records) + ", " + SqlNumber(m.first_dump_us) + ", " +
      SqlNumber(m.last_dump_us) + ", " + SqlNumber(m.first_ts_us) + ", " +
      SqlNumber(m.last_ts_us) + ", current_localtimestamp(), 0"));
  COLLSCOPE_RETURN_IF_ERROR(builder->WriteCounts());
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(KernelVariationInsert(only)));
  return builder->WriteDerived();
}

}  // namespace

Result<AggregateReport> RefreshAggregates(Store& store, const std::string& run) {
  auto t0 = std::chrono::steady_clock::now();
  // One transaction for the definitions and every run's aggregates: one commit instead of one
  // per definition and per run, and on an error none of it is kept (the runs read as stale).
  COLLSCOPE_RETURN_IF_ERROR(store.Exec("BEGIN TRANSACTION"));
  auto fail = [&](const Status& st) -> Status {
    store.Exec("ROLLBACK").IgnoreError();
    return st.WithPrefix("analysis aggregates: ");
  };
  std::string which = "SELECT run_id FROM agg_stale_runs ORDER BY run_id";
  if (!run.empty()) {
    Result<int32_t> id = store.RunId(run, false);
    if (!id.ok()) {
      store.Exec("ROLLBACK").IgnoreError();
      return id.status();
    }
    which = "SELECT " + std::to_string(*id);
  }
  // A store without aggregates yet (the first refresh, as after the first ingest into a new
  // store) has every run stale, and must have its views made (a parse and bind of each, about
  // 0.1 s, on this thread): the first run's builder reads its records before, from the base
  // tables, and groups them on a second thread meanwhile.
  Result<int64_t> has_aggregates = store.QueryInt(
      "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND "
      "table_name = 'agg_meta'");
  if (!has_aggregates.ok()) return fail(has_aggregates.status());
  std::string first;
  std::unique_ptr<AggregateBuilder> early;
  bool early_computed = false;
  if (*has_aggregates == 0) {
    Result<QueryResult> runs = store.Query(run.empty() ? "SELECT min(run_id) FROM runs" : which);
    if (!runs.ok()) return fail(runs.status());
    if (!runs->rows.empty() && runs->rows[0][0]) {
      first = *runs->rows[0][0];
      early = std::make_unique<AggregateBuilder>(store, std::stoi(first), Paren(kOpDimsSelect));
      Status st = early->Fetch();
      if (!st.ok()) return fail(st);
    }
  }
  Status views;
  {
    std::thread computing;
    if (early) computing = std::thread([&] { early_computed = early->Compute(); });
    views = InstallAnalysisViews(store, false);
    if (computing.joinable()) computing.join();
  }
  if (!views.ok()) {
    store.Exec("ROLLBACK").IgnoreError();
    return views;
  }
  Result<QueryResult> runs = store.Query(which);
  if (!runs.ok()) return fail(runs.status());
  AggregateReport report;
  for (const auto& row : runs->rows) {
    const std::string r = *row[0];
    auto t = std::chrono::steady_clock::now();
    Status st = r == first ? RefreshRun(store, r, std::move(early), early_computed)
                           : RefreshRun(store, r, nullptr, false);
    if (!st.ok()) return fail(st);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    st = store.Exec("UPDATE agg_meta SET seconds = " + std::to_string(secs) + " WHERE run_id = " + r);
    if (!st.ok()) return fail(st);
    ++report.runs;
  }
  Status st = store.Exec("COMMIT");
  if (!st.ok()) return fail(st);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

Result<std::unique_ptr<Store>> OpenForAnalysis(const std::string& path) {
  auto store = Store::Open(path, Store::Options::ReadOnly());
  if (!store.ok()) return store.status();
  COLLSCOPE_RETURN_IF_ERROR(InstallAnalysisViews(**store, true));
  return store;
}

std::string HostTransferTableSql(const std::string& records) {
  return "WITH hx AS MATERIALIZED (" + TransferSql(records) + ") SELECT run_id, hostname, count(*) AS transfer_comms, " +
         "max(norm_busbw) AS transfer_norm_busbw FROM (" + HostCommSql("hx") + ") GROUP BY ALL";
}

}  // namespace collscope
