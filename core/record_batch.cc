#include "core/record_batch.h"

namespace collscope {

uint32_t RecordBatch::InternComm(const ParsedLine& p) {
  // Files hold few communicators, and consecutive lines mostly repeat one: scan from the back.
  for (size_t i = comms.size(); i-- > 0;) {
    const CommKey& c = comms[i];
    if (c.hash == p.comm_hash && c.n_ranks == p.n_ranks && c.nnodes == p.nnodes &&
        c.has_name == p.has_comm_name && c.name == p.comm_name)
      return static_cast<uint32_t>(i);
  }
  CommKey c;
  c.hash = p.comm_hash;
  c.n_ranks = p.n_ranks;
  c.nnodes = p.nnodes;
  c.has_name = p.has_comm_name;
  c.name = std::string(p.comm_name);
  c.hash_text = std::string(p.comm_hash_text);
  comms.push_back(std::move(c));
  return static_cast<uint32_t>(comms.size() - 1);
}

uint32_t RecordBatch::InternProcess(const ParsedLine& p) {
  for (size_t i = processes.size(); i-- > 0;)
    if (processes[i].pid == p.pid && processes[i].hostname == p.hostname)
      return static_cast<uint32_t>(i);
  ProcessKey k;
  k.hostname = std::string(p.hostname);
  k.pid = p.pid;
  k.git_rev = std::string(p.git_rev);
  k.rec_mechanism = std::string(p.rec_mechanism);
  k.format_version = std::string(p.format_version);
  processes.push_back(std::move(k));
  return static_cast<uint32_t>(processes.size() - 1);
}

void RecordBatch::Add(uint64_t line_no, const ParsedLine& p) {
  uint32_t proc = InternProcess(p);
  uint32_t comm = InternComm(p);
  if (p.kind == ParsedLine::Kind::kDumpStats) {
    dump_stats.push_back({line_no, proc, comm, p.rank, p.dump_ts_us, p.coll_records,
                          p.coll_dropped_total, p.coll_dropped_since_last_dump, p.p2p_records,
                          p.p2p_dropped_total, p.p2p_dropped_since_last_dump});
    return;
  }
  line.push_back(line_no);
  process_local.push_back(proc);
  comm_local.push_back(comm);
  rank.push_back(p.rank);
  kind.push_back(static_cast<uint8_t>(p.record_kind));
  op.push_back(p.op);
  algo.push_back(p.algo);
  proto.push_back(p.proto);
  sn.push_back(p.sn);
  peer.push_back(p.peer);
  msg_size_bytes.push_back(p.msg_size_bytes);
  exec_time_us.push_back(p.exec_time_us);
  timing_source.push_back(p.timing_source);
  algbw_gbs.push_back(p.algbw_gbs);
  busbw_gbs.push_back(p.busbw_gbs);
  dump_ts_us.push_back(p.dump_ts_us);
  start_ts_us.push_back(p.start_ts_us);
  stop_ts_us.push_back(p.stop_ts_us);
  n_channels.push_back(p.n_channels);
  global_rank.push_back(p.global_rank);
  local_rank.push_back(p.local_rank);
  gpu.push_back(p.gpu);
  enqueue_ts_us.push_back(p.enqueue_ts_us);
  kernel_start_ts_us.push_back(p.kernel_start_ts_us);
  kernel_stop_ts_us.push_back(p.kernel_stop_ts_us);
  queue_delay_us.push_back(p.queue_delay_us);
  ch_start_spread_us.push_back(p.ch_start_spread_us);
  ch_stop_spread_us.push_back(p.ch_stop_spread_us);
  for (const KernelEvent& k : p.kernel_events) {
    ke_line.push_back(line_no);
    ke.push_back(k);
  }
}

}  // namespace collscope
