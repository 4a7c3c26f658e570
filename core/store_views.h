// SQL views created in every store (after the tables of the taxonomy). They are the stable,
// documented way to query: analyses and users read these rather than joining ids by hand.
#pragma once

namespace collscope {

inline constexpr const char* kStoreViewsSql = R"sql(
CREATE OR REPLACE VIEW records_v AS
SELECT ru.name AS run, r.*, p.hostname, p.pid, c.id AS comm, c.comm_hash, c.comm_name,
       c.n_ranks, c.nnodes, c.coll_type,
       CAST(c.coll_type AS VARCHAR) || '/' || c.n_ranks || 'r' || c.nnodes || 'n/' ||
         CAST(r.op AS VARCHAR) || '/' || r.msg_size_bytes AS kernel_key
FROM records r
JOIN communicators c USING (run_id, comm_id)
JOIN processes p USING (run_id, process_id)
JOIN runs ru USING (run_id);
COMMENT ON VIEW records_v IS 'records joined with run, process and communicator; kernel_key = coll_type/n_ranks r nnodes n/op/msg_size_bytes';

CREATE OR REPLACE VIEW inspector_rows AS
SELECT ru.name AS run, c.id, r.rank, c.n_ranks, c.nnodes,
       CASE c.coll_type WHEN 'nic-only' THEN 'hca-only' ELSE CAST(c.coll_type AS VARCHAR) END AS comm_type,
       CAST(r.op AS VARCHAR) AS coll, r.sn AS coll_sn, r.msg_size_bytes AS coll_msg_size_bytes,
       r.exec_time_us AS coll_exec_time_us, CAST(r.timing_source AS VARCHAR) AS coll_timing_source,
       r.algbw_gbs AS coll_algobw_gbs, r.busbw_gbs AS coll_busbw_gbs,
       p.format_version AS inspector_output_format_version, p.git_rev, p.rec_mechanism,
       r.dump_ts_us AS dump_timestamp_us, p.hostname, p.pid
FROM records r
JOIN communicators c USING (run_id, comm_id)
JOIN processes p USING (run_id, process_id)
JOIN runs ru USING (run_id)
WHERE r.kind = 'coll';
COMMENT ON VIEW inspector_rows IS 'collective records as the flattened rows of NVIDIA''s perf_summary_exporter and NIXT (comm_type uses their hca-only spelling)';

CREATE OR REPLACE VIEW hosts AS
SELECT run_id, hostname, count(*) AS processes FROM processes GROUP BY ALL;
COMMENT ON VIEW hosts IS 'hosts of each run with their process count';
)sql";

}  // namespace collscope
