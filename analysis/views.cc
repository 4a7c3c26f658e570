#include "analysis/views.h"

#include <string>

#include "core/nccl_tests_reader.h"
#include "core/taxonomy.h"

namespace collscope {
namespace {

// Every view and macro is written as `CREATE OR REPLACE {TEMP} VIEW|MACRO`; {TEMP} is filled in
// at install time. Conventions (docs/analysis.md):
//   - aggregate `records` by ids first, join the small dimension tables after: scans stay narrow;
//   - bus bandwidth is Inspector's formula over (op, n_ranks, size, exec time) unless the file
//     wrote another value (busbw_gbs_override); NaN reads as NULL and is left out of statistics;
//   - quantiles are nearest-rank: the smallest value whose ECDF reaches p (quantile_disc), computed
//     from value counts, so they are exact and need no sort of the raw records;
//   - "normalised" means divided by the job median of the same kernel key.
constexpr const char* kViews[] = {
    // Operation shapes with their communicator and kernel key: the small side of every join.
    R"sql(CREATE OR REPLACE {TEMP} VIEW op_dims AS
SELECT o.run_id, o.op_id, o.comm_id, c.id AS comm, c.comm_name, c.n_ranks, c.nnodes,
       CAST(c.coll_type AS VARCHAR) AS coll_type, CAST(o.kind AS VARCHAR) AS kind,
       CAST(o.op AS VARCHAR) AS op, CAST(o.algo AS VARCHAR) AS algo,
       CAST(o.proto AS VARCHAR) AS proto, o.peer, o.msg_size_bytes,
       CAST(c.coll_type AS VARCHAR) || '/' || c.n_ranks || 'r' || c.nnodes || 'n/' ||
         CAST(o.op AS VARCHAR) || '/' || o.msg_size_bytes AS kernel_key
FROM operations o JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id)sql",
    // busbw of a (shape, exec time, written override).
    R"sql(CREATE OR REPLACE {TEMP} MACRO shape_busbw(op, n_ranks, size, exec_us, override) AS
nullif(coalesce(override, inspector_busbw(op, n_ranks, size, exec_us)), 'nan'::DOUBLE))sql",
    // One row per (run, kernel key): the (interconnect class, size of communicator, op, message
    // size) NIXT calls a kernel.
    R"sql(CREATE OR REPLACE {TEMP} VIEW kernel_stats AS
WITH per_op AS (
  SELECT run_id, op_id, count(*) AS records, sum(exec_time_us) AS time_us
  FROM records GROUP BY run_id, op_id)
SELECT p.run_id, d.coll_type, d.n_ranks, d.nnodes, d.kind, d.op, d.msg_size_bytes, d.kernel_key,
       sum(p.records) AS records,
       sum(p.records * d.msg_size_bytes) AS bytes,
       sum(p.time_us) AS time_us
FROM per_op p JOIN op_dims d USING (run_id, op_id)
GROUP BY ALL)sql",
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
       wb AS (PARTITION BY run_id ORDER BY bytes DESC, time_us DESC, kernel_key))sql",
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
    // ---- summary -------------------------------------------------------------------------------
    R"sql(CREATE OR REPLACE {TEMP} VIEW counts_by_op AS
SELECT run_id, kind, op, sum(records) AS records, sum(bytes) AS bytes, sum(time_us) AS time_us,
       sum(bytes) / sum(sum(bytes)) OVER (PARTITION BY run_id) AS bytes_share,
       sum(time_us) / sum(sum(time_us)) OVER (PARTITION BY run_id) AS time_share
FROM kernel_stats GROUP BY run_id, kind, op)sql",
    R"sql(CREATE OR REPLACE {TEMP} VIEW counts_by_coll_type AS
SELECT run_id, coll_type, sum(records) AS records, sum(bytes) AS bytes, sum(time_us) AS time_us,
       sum(bytes) / sum(sum(bytes)) OVER (PARTITION BY run_id) AS bytes_share,
       sum(time_us) / sum(sum(time_us)) OVER (PARTITION BY run_id) AS time_share
FROM kernel_stats GROUP BY run_id, coll_type)sql",
    // Distinct (kernel key, busbw, exec time) with their record counts: the exact distribution of
    // each kernel key, small because exec times are integer microseconds.
    R"sql(CREATE OR REPLACE {TEMP} VIEW busbw_values AS
WITH v AS (
  SELECT run_id, op_id, exec_time_us, busbw_gbs_override AS ovr, count(*) AS n
  FROM records GROUP BY ALL)
SELECT v.run_id, d.kernel_key,
       shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, v.exec_time_us, v.ovr) AS busbw_gbs,
       v.exec_time_us, sum(v.n) AS n
FROM v JOIN op_dims d USING (run_id, op_id) GROUP BY ALL)sql",
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
ORDER BY run_id, kernel_key, busbw_gbs)sql",
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
ORDER BY run_id, kernel_key, exec_time_us)sql",
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
FROM b GROUP BY run_id, kernel_key, bin ORDER BY run_id, kernel_key, bin)sql",
    // ---- variation -----------------------------------------------------------------------------
    // Per kernel key: records, mean, sample stddev, CV = stddev / mean, and nearest-rank
    // quantiles of busbw; mean exec time.
    R"sql(CREATE OR REPLACE {TEMP} VIEW kernel_variation AS
WITH v AS (SELECT * FROM busbw_values WHERE busbw_gbs IS NOT NULL),
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
FROM s JOIN kernel_stats k USING (run_id, kernel_key))sql",
    // CV against GPU count: the same (op, size) across communicator sizes and runs.
    R"sql(CREATE OR REPLACE {TEMP} VIEW variation_scaling AS
SELECT r.name AS run, v.run_id, v.op, v.msg_size_bytes, v.n_ranks, v.nnodes, v.coll_type,
       v.records, v.mean_busbw_gbs, v.cv_busbw
FROM kernel_variation v JOIN runs r USING (run_id)
ORDER BY v.op, v.msg_size_bytes, v.n_ranks, r.name)sql",
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
FROM m JOIN v USING (source, run_id, op, msg_size_bytes, n_ranks) JOIN runs r USING (run_id))sql",
    // Production run vs baseline run per matching (op, size, n_ranks).
    R"sql(CREATE OR REPLACE {TEMP} MACRO compare_runs(prod_run, base_run) AS TABLE
SELECT p.op, p.msg_size_bytes, p.n_ranks, p.nnodes AS prod_nnodes, b.nnodes AS base_nnodes,
       p.samples AS prod_samples, p.mean_busbw_gbs AS prod_mean_busbw_gbs, p.cv_busbw AS prod_cv,
       b.samples AS base_samples, b.mean_busbw_gbs AS base_mean_busbw_gbs, b.cv_busbw AS base_cv,
       p.mean_busbw_gbs / nullif(b.mean_busbw_gbs, 0) AS mean_ratio,
       p.cv_busbw / nullif(b.cv_busbw, 0) AS cv_ratio, b.source AS base_source
FROM busbw_by_shape p JOIN busbw_by_shape b USING (op, msg_size_bytes, n_ranks)
WHERE p.run = prod_run AND b.run = base_run
ORDER BY p.op, p.msg_size_bytes, p.n_ranks)sql",
    // ---- temporal ------------------------------------------------------------------------------
    // busbw and exec time per kernel key in wall-clock bins of bin_s seconds (bins start at
    // multiples of bin_s since the epoch), messages of at least min_bytes. The time of a record
    // is when it started when known (verbose or collscope records), else when it was dumped.
    R"sql(CREATE OR REPLACE {TEMP} MACRO temporal(bin_s := 5, min_bytes := 1048576) AS TABLE
WITH d AS (SELECT * FROM op_dims WHERE msg_size_bytes >= min_bytes),
b AS (
  SELECT r.run_id, r.op_id,
         (coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us)
            // CAST(round(bin_s * 1e6) AS UBIGINT)) AS bin,
         r.exec_time_us, r.busbw_gbs_override AS ovr, count(*) AS n
  FROM records r SEMI JOIN d USING (run_id, op_id) GROUP BY ALL),
x AS (
  SELECT b.run_id, d.kernel_key, b.bin, b.n, b.exec_time_us,
         shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, b.exec_time_us, b.ovr) AS busbw
  FROM b JOIN d USING (run_id, op_id))
SELECT run_id, kernel_key, bin, bin * CAST(round(bin_s * 1e6) AS UBIGINT) AS bin_start_us,
       sum(n)::BIGINT AS records, sum(n * busbw) / sum(n) FILTER (WHERE busbw IS NOT NULL)
         AS mean_busbw_gbs,
       min(busbw) AS min_busbw_gbs, max(busbw) AS max_busbw_gbs,
       sum(n * exec_time_us) / sum(n) AS mean_exec_time_us, max(exec_time_us) AS max_exec_time_us
FROM x GROUP BY run_id, kernel_key, bin ORDER BY run_id, kernel_key, bin)sql",
    // ---- spatial -------------------------------------------------------------------------------
    // Value counts per (process, operation): the exact busbw distribution of every cell.
    R"sql(CREATE OR REPLACE {TEMP} VIEW busbw_cells AS
WITH v AS (
  SELECT run_id, process_id, op_id, rank, exec_time_us, busbw_gbs_override AS ovr, count(*) AS n
  FROM records GROUP BY ALL)
SELECT v.run_id, v.process_id, v.op_id, d.comm_id, d.comm, d.comm_name, v.rank, d.kernel_key,
       d.nnodes, d.msg_size_bytes, v.exec_time_us,
       shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, v.exec_time_us, v.ovr) AS busbw_gbs, v.n
FROM v JOIN op_dims d USING (run_id, op_id))sql",
    // Mean busbw and normalised busbw (busbw / job median of the kernel key) per
    // (communicator, rank): the cells of the rank x communicator heatmap.
    R"sql(CREATE OR REPLACE {TEMP} MACRO rank_cells(min_bytes := 1048576) AS TABLE
SELECT c.run_id, c.comm_id, any_value(c.comm) AS comm, any_value(c.comm_name) AS comm_name,
       c.rank, any_value(p.hostname) AS hostname, any_value(c.process_id) AS process_id,
       sum(c.n)::BIGINT AS records, sum(c.n * c.busbw_gbs) / sum(c.n) AS mean_busbw_gbs,
       sum(c.n * c.busbw_gbs / k.median_busbw_gbs) / sum(c.n) AS norm_busbw
FROM busbw_cells c JOIN kernel_variation k USING (run_id, kernel_key)
JOIN processes p USING (run_id, process_id)
WHERE c.msg_size_bytes >= min_bytes AND c.busbw_gbs IS NOT NULL
GROUP BY c.run_id, c.comm_id, c.rank ORDER BY c.run_id, c.comm_id, c.rank)sql",
    // Per process: records and normalised mean busbw; ordinal = position in (host, pid) order.
    R"sql(CREATE OR REPLACE {TEMP} MACRO process_stats(min_bytes := 1048576) AS TABLE
WITH o AS (
  SELECT run_id, process_id, hostname, pid,
         row_number() OVER (PARTITION BY run_id ORDER BY hostname, pid) - 1 AS ordinal
  FROM processes)
SELECT c.run_id, c.process_id, o.ordinal, o.hostname, o.pid, sum(c.n)::BIGINT AS records,
       sum(c.n * c.busbw_gbs / k.median_busbw_gbs) / sum(c.n) AS norm_busbw
FROM busbw_cells c JOIN kernel_variation k USING (run_id, kernel_key) JOIN o USING (run_id, process_id)
WHERE c.msg_size_bytes >= min_bytes AND c.busbw_gbs IS NOT NULL
GROUP BY ALL ORDER BY c.run_id, o.ordinal)sql",
    // Blocks of block_ranks consecutive processes (process ordinal // block_ranks).
    R"sql(CREATE OR REPLACE {TEMP} MACRO rank_blocks(block_ranks := 8, min_bytes := 1048576) AS TABLE
SELECT run_id, ordinal // block_ranks AS block, min(ordinal) AS first_ordinal,
       max(ordinal) AS last_ordinal, sum(records)::BIGINT AS records,
       sum(records * norm_busbw) / sum(records) AS norm_busbw,
       min(hostname) AS first_host, max(hostname) AS last_host
FROM process_stats(min_bytes := min_bytes) GROUP BY ALL ORDER BY run_id, block)sql",
    // Each host's median busbw over the job median, per kernel key (NIXT's host normalisation).
    R"sql(CREATE OR REPLACE {TEMP} VIEW host_normalized AS
WITH h AS (
  SELECT c.run_id, p.hostname, c.kernel_key, c.busbw_gbs AS x, sum(c.n) AS n
  FROM busbw_cells c JOIN processes p USING (run_id, process_id)
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
FROM m JOIN kernel_variation k USING (run_id, kernel_key))sql",
    // Per host, for communicators spanning hosts: the bandwidth of each collective instance
    // (communicator, op, sequence number) is that of its fastest record, i.e. of the last rank to
    // arrive, whose time has no waiting in it; every host taking part is charged with it. A
    // degraded NIC slows every instance it takes part in, so its host has the lowest median over
    // the job median even where all ranks of a ring report the same slow time.
    R"sql(CREATE OR REPLACE {TEMP} VIEW host_transfer_normalized AS
WITH d AS (SELECT * FROM op_dims WHERE nnodes > 1),
i AS (
  SELECT r.run_id, r.op_id, r.sn, min(r.exec_time_us) AS t, any_value(r.busbw_gbs_override) AS ovr
  FROM records r SEMI JOIN d USING (run_id, op_id) GROUP BY ALL),
ib AS (
  SELECT i.run_id, i.op_id, i.sn, d.kernel_key,
         shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, i.t, i.ovr) AS x
  FROM i JOIN d USING (run_id, op_id)),
hi AS (
  SELECT DISTINCT r.run_id, p.hostname, r.op_id, r.sn
  FROM records r SEMI JOIN d USING (run_id, op_id) JOIN processes p USING (run_id, process_id)),
h AS (
  SELECT ib.run_id, hi.hostname, ib.kernel_key, ib.x, count(*) AS n
  FROM hi JOIN ib USING (run_id, op_id, sn) WHERE ib.x IS NOT NULL GROUP BY ALL),
hw AS (
  SELECT *, sum(n) OVER (PARTITION BY run_id, hostname, kernel_key ORDER BY x
                         ROWS UNBOUNDED PRECEDING) AS cum,
         sum(n) OVER (PARTITION BY run_id, hostname, kernel_key) AS total FROM h),
hm AS (
  SELECT run_id, hostname, kernel_key, any_value(total)::BIGINT AS instances,
         min(x) FILTER (WHERE cum >= 0.5 * total) AS median_busbw_gbs
  FROM hw GROUP BY ALL),
j AS (SELECT run_id, kernel_key, x, count(*) AS n FROM ib WHERE x IS NOT NULL GROUP BY ALL),
jw AS (
  SELECT *, sum(n) OVER (PARTITION BY run_id, kernel_key ORDER BY x ROWS UNBOUNDED PRECEDING)
              AS cum,
         sum(n) OVER (PARTITION BY run_id, kernel_key) AS total FROM j),
jm AS (
  SELECT run_id, kernel_key, min(x) FILTER (WHERE cum >= 0.5 * total) AS job_median_busbw_gbs
  FROM jw GROUP BY ALL)
SELECT hm.run_id, hm.hostname, hm.kernel_key, hm.instances, hm.median_busbw_gbs,
       jm.job_median_busbw_gbs, hm.median_busbw_gbs / nullif(jm.job_median_busbw_gbs, 0) AS norm_busbw
FROM hm JOIN jm USING (run_id, kernel_key))sql",
    // The host table: per host, the record-weighted geometric mean of its normalised medians
    // (all kernels, and cross-host transfers), its worst kernel, ranked worst first.
    R"sql(CREATE OR REPLACE {TEMP} VIEW host_table AS
WITH n AS (
  SELECT run_id, hostname, sum(records)::BIGINT AS records,
         exp(sum(records * ln(norm_busbw)) / sum(records)) AS norm_busbw,
         arg_min(kernel_key, norm_busbw) AS worst_kernel, min(norm_busbw) AS worst_kernel_norm
  FROM host_normalized WHERE norm_busbw > 0 GROUP BY ALL),
t AS (
  SELECT run_id, hostname,
         exp(sum(instances * ln(norm_busbw)) / sum(instances)) AS transfer_norm_busbw,
         arg_min(kernel_key, norm_busbw) AS worst_transfer_kernel
  FROM host_transfer_normalized WHERE norm_busbw > 0 GROUP BY ALL),
p AS (SELECT run_id, hostname, count(*) AS processes FROM processes GROUP BY ALL)
SELECT n.run_id, row_number() OVER (PARTITION BY n.run_id
         ORDER BY coalesce(t.transfer_norm_busbw, n.norm_busbw), n.norm_busbw, n.hostname) AS rank,
       n.hostname, p.processes, n.records, n.norm_busbw, t.transfer_norm_busbw, n.worst_kernel,
       n.worst_kernel_norm, t.worst_transfer_kernel
FROM n JOIN p USING (run_id, hostname) LEFT JOIN t USING (run_id, hostname)
ORDER BY n.run_id, rank)sql",
    // Host x time-bin heatmap of normalised busbw (record busbw / job median of its kernel key).
    R"sql(CREATE OR REPLACE {TEMP} MACRO host_time_heatmap(bin_s := 5, min_bytes := 1048576) AS TABLE
WITH d AS (SELECT * FROM op_dims WHERE msg_size_bytes >= min_bytes),
b AS (
  SELECT r.run_id, r.process_id, r.op_id,
         (coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us)
            // CAST(round(bin_s * 1e6) AS UBIGINT)) AS bin,
         r.exec_time_us, r.busbw_gbs_override AS ovr, count(*) AS n
  FROM records r SEMI JOIN d USING (run_id, op_id) GROUP BY ALL),
x AS (
  SELECT b.run_id, p.hostname, b.bin, b.n,
         shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, b.exec_time_us, b.ovr)
           / nullif(k.median_busbw_gbs, 0) AS norm
  FROM b JOIN d USING (run_id, op_id) JOIN kernel_variation k USING (run_id, kernel_key)
  JOIN processes p USING (run_id, process_id))
SELECT run_id, hostname, bin, bin * CAST(round(bin_s * 1e6) AS UBIGINT) AS bin_start_us,
       sum(n)::BIGINT AS records, sum(n * norm) / sum(n) AS norm_busbw
FROM x WHERE norm IS NOT NULL GROUP BY ALL ORDER BY run_id, hostname, bin)sql",
    // Range bars: min/p25/p50/p75/max of busbw per kernel key and communicator, host, time bin,
    // sequence-number bin (nearest-rank quantiles from value counts).
    R"sql(CREATE OR REPLACE {TEMP} MACRO range_bars(min_bytes := 1048576, bin_s := 5, sn_bin := 50) AS TABLE
WITH d AS (SELECT * FROM op_dims WHERE msg_size_bytes >= min_bytes),
base AS (
  SELECT r.run_id, r.op_id, r.process_id, r.exec_time_us, r.busbw_gbs_override AS ovr,
         (coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us)
            // CAST(round(bin_s * 1e6) AS UBIGINT)) AS tbin,
         r.sn // sn_bin AS sbin, count(*) AS n
  FROM records r SEMI JOIN d USING (run_id, op_id) GROUP BY ALL),
x AS (
  SELECT b.run_id, d.kernel_key, d.comm, p.hostname, b.tbin, b.sbin, b.n,
         shape_busbw(d.op, d.n_ranks, d.msg_size_bytes, b.exec_time_us, b.ovr) AS v
  FROM base b JOIN d USING (run_id, op_id) JOIN processes p USING (run_id, process_id)),
g AS (
  SELECT run_id, kernel_key, 'communicator' AS dimension, comm AS grp, v, sum(n) AS n FROM x GROUP BY ALL
  UNION ALL SELECT run_id, kernel_key, 'host', hostname, v, sum(n) FROM x GROUP BY ALL
  UNION ALL SELECT run_id, kernel_key, 'time_bin', CAST(tbin * CAST(round(bin_s * 1e6) AS UBIGINT) AS VARCHAR), v, sum(n) FROM x GROUP BY ALL
  UNION ALL SELECT run_id, kernel_key, 'sn_bin', CAST(sbin * sn_bin AS VARCHAR), v, sum(n) FROM x GROUP BY ALL),
w AS (
  SELECT *, sum(n) OVER (PARTITION BY run_id, kernel_key, dimension, grp ORDER BY v
                         ROWS UNBOUNDED PRECEDING) AS cum,
         sum(n) OVER (PARTITION BY run_id, kernel_key, dimension, grp) AS total
  FROM g WHERE v IS NOT NULL)
SELECT run_id, kernel_key, dimension, grp AS "group", any_value(total)::BIGINT AS records,
       min(v) AS min_busbw_gbs, min(v) FILTER (WHERE cum >= 0.25 * total) AS p25_busbw_gbs,
       min(v) FILTER (WHERE cum >= 0.5 * total) AS p50_busbw_gbs,
       min(v) FILTER (WHERE cum >= 0.75 * total) AS p75_busbw_gbs, max(v) AS max_busbw_gbs
FROM w GROUP BY ALL ORDER BY run_id, kernel_key, dimension, "group")sql",
    // ---- resource ------------------------------------------------------------------------------
    R"sql(CREATE OR REPLACE {TEMP} VIEW resource_usage AS
SELECT k.run_id, k.n_ranks, k.nnodes, k.coll_type, k.kind, k.op, sum(k.records) AS records,
       sum(k.bytes) AS bytes, sum(k.time_us) AS time_us,
       (SELECT count(DISTINCT comm_id) FROM op_dims d WHERE d.run_id = k.run_id
          AND d.n_ranks = k.n_ranks AND d.nnodes = k.nnodes AND d.op = k.op AND d.kind = k.kind)
         AS communicators
FROM kernel_stats k GROUP BY ALL ORDER BY k.run_id, k.n_ranks, k.nnodes, k.op)sql",
    // ---- other ---------------------------------------------------------------------------------
    // Per process and operation shape, with every metadata column: group it by any of them.
    R"sql(CREATE OR REPLACE {TEMP} VIEW meta_cells AS
WITH c AS (
  SELECT run_id, process_id, op_id, timing_source, count(*) AS records,
         sum(exec_time_us) AS time_us
  FROM records GROUP BY ALL)
SELECT r.name AS run, c.run_id, p.hostname, p.pid, p.git_rev, p.rec_mechanism, p.format_version,
       d.comm, d.comm_name, d.n_ranks, d.nnodes, d.coll_type, d.kind, d.op, d.algo, d.proto,
       d.msg_size_bytes, d.kernel_key, CAST(c.timing_source AS VARCHAR) AS timing_source, c.records, c.time_us,
       c.records * d.msg_size_bytes AS bytes
FROM c JOIN op_dims d USING (run_id, op_id) JOIN processes p USING (run_id, process_id)
JOIN runs r USING (run_id))sql",
    // Records, bytes, time and time-weighted busbw (total traffic-bytes / total time) by any
    // metadata column: SELECT * FROM group_by_column(git_rev).
    R"sql(CREATE OR REPLACE {TEMP} MACRO group_by_column(col) AS TABLE
SELECT run, CAST(col AS VARCHAR) AS value, sum(records)::BIGINT AS records,
       sum(bytes)::HUGEINT AS bytes, sum(time_us)::HUGEINT AS time_us,
       count(DISTINCT hostname) AS hosts, count(DISTINCT kernel_key) AS kernels
FROM meta_cells GROUP BY ALL ORDER BY run, value)sql",
    // Median busbw by metadata column and kernel key (NIXT's "other" primitive), per record.
    R"sql(CREATE OR REPLACE {TEMP} MACRO busbw_by_column(col) AS TABLE
SELECT run, CAST(col AS VARCHAR) AS value, kernel_key, count(*) AS records,
       median(busbw_gbs) AS median_busbw_gbs
FROM (SELECT v.*, p.git_rev, p.rec_mechanism, p.format_version
      FROM records_v v JOIN processes p USING (run_id, process_id))
GROUP BY ALL ORDER BY run, kernel_key, value)sql",
};

}  // namespace

Status InstallAnalysisViews(Store& store, bool temporary) {
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
  for (const char* view : kViews) {
    std::string sql = view;
    size_t at = sql.find("{TEMP} ");
    sql.replace(at, 7, temporary ? "TEMP " : "");
    Status st = store.Exec(sql);
    if (!st.ok()) return Status::Error("analysis view: " + st.message());
  }
  return Status::Ok();
}

}  // namespace collscope
