// SQL views created in every store (after the tables of the taxonomy). They are the stable,
// documented way to query: analyses and users read these rather than joining ids by hand.
#pragma once

namespace collscope {

inline constexpr const char* kStoreViewsSql = R"sql(
CREATE OR REPLACE VIEW records_v AS
SELECT ru.name AS run, r.run_id, r.file_id, r.line, r.process_id, p.hostname, p.pid,
       o.comm_id, c.id AS comm, c.comm_hash, c.comm_name, c.n_ranks, c.nnodes, c.coll_type,
       r.rank, r.op_id, o.kind, o.op, o.algo, o.proto, o.peer, o.msg_size_bytes, r.sn,
       r.exec_time_us, r.timing_source,
       nullif(coalesce(r.algbw_gbs_override,
                       inspector_algbw(o.op, c.n_ranks, o.msg_size_bytes, r.exec_time_us)),
              'nan'::DOUBLE) AS algbw_gbs,
       nullif(coalesce(r.busbw_gbs_override,
                       inspector_busbw(o.op, c.n_ranks, o.msg_size_bytes, r.exec_time_us)),
              'nan'::DOUBLE) AS busbw_gbs,
       r.dump_ts_us, r.start_ts_us, r.stop_ts_us, r.n_channels, r.global_rank, r.local_rank,
       r.gpu, r.enqueue_ts_us, r.kernel_start_ts_us, r.kernel_stop_ts_us, r.queue_delay_us,
       r.ch_start_spread_us, r.ch_stop_spread_us,
       CAST(c.coll_type AS VARCHAR) || '/' || c.n_ranks || 'r' || c.nnodes || 'n/' ||
         CAST(o.op AS VARCHAR) || '/' || o.msg_size_bytes AS kernel_key
FROM records r
JOIN operations o USING (run_id, op_id)
JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id
JOIN processes p ON p.run_id = r.run_id AND p.process_id = r.process_id
JOIN runs ru ON ru.run_id = r.run_id;
COMMENT ON VIEW records_v IS 'records with run, process, communicator and operation, and both bandwidths (NULL where the file wrote nan); kernel_key = coll_type/<n_ranks>r<nnodes>n/op/msg_size_bytes';

CREATE OR REPLACE VIEW inspector_rows AS
SELECT run, comm AS id, rank, n_ranks, nnodes,
       CASE coll_type WHEN 'nic-only' THEN 'hca-only' ELSE CAST(coll_type AS VARCHAR) END AS comm_type,
       CAST(op AS VARCHAR) AS coll, sn AS coll_sn, msg_size_bytes AS coll_msg_size_bytes,
       exec_time_us AS coll_exec_time_us, CAST(timing_source AS VARCHAR) AS coll_timing_source,
       algbw_gbs AS coll_algobw_gbs, busbw_gbs AS coll_busbw_gbs,
       p.format_version AS inspector_output_format_version, p.git_rev, p.rec_mechanism,
       dump_ts_us AS dump_timestamp_us, v.hostname, v.pid
FROM records_v v JOIN processes p USING (run_id, process_id)
WHERE kind = 'coll';
COMMENT ON VIEW inspector_rows IS 'collective records as the flattened rows of NVIDIA''s perf_summary_exporter and NIXT (comm_type uses their hca-only spelling)';

CREATE OR REPLACE VIEW hosts AS
SELECT run_id, hostname, count(*) AS processes FROM processes GROUP BY ALL;
COMMENT ON VIEW hosts IS 'hosts of each run with their process count';
)sql";

}  // namespace collscope
