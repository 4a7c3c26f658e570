#include "core/record_batch.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/bandwidth.h"

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

uint32_t RecordBatch::InternOp(const OpKey& k) {
  auto [it, inserted] = op_index_.emplace(k, static_cast<uint32_t>(ops.size()));
  if (inserted) ops.push_back(k);
  return it->second;
}

namespace {
template <typename T>
void Permute(std::vector<T>& v, const std::vector<uint32_t>& perm, std::vector<uint64_t>& scratch) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
  if (v.empty()) return;  // a batch of rejected lines only: memcpy must not see a null pointer
  scratch.resize(v.size());
  T* tmp = reinterpret_cast<T*>(scratch.data());
  for (size_t i = 0; i < perm.size(); ++i) tmp[i] = v[perm[i]];
  std::memcpy(v.data(), tmp, v.size() * sizeof(T));
}
}  // namespace

void RecordBatch::SortByStream() {
  const size_t n = records();
  perm_.resize(n);
  for (size_t i = 0; i < n; ++i) perm_[i] = static_cast<uint32_t>(i);
  auto stream = [&](uint32_t i) {
    const OpKey& k = ops[op_local[i]];
    return (uint64_t{k.comm} << 16) | (uint64_t{k.kind} << 8) | k.op;
  };
  std::stable_sort(perm_.begin(), perm_.end(),
                   [&](uint32_t a, uint32_t b) { return stream(a) < stream(b); });
  for (auto* v : {&line, &sn, &exec_time_us, &dump_ts_us, &start_ts_us, &stop_ts_us,
                  &enqueue_ts_us, &kernel_start_ts_us, &kernel_stop_ts_us})
    Permute(*v, perm_, scratch_);
  for (auto* v : {&process_local, &op_local}) Permute(*v, perm_, scratch_);
  for (auto* v : {&rank, &n_channels, &global_rank, &local_rank, &gpu}) Permute(*v, perm_, scratch_);
  for (auto* v : {&timing_source, &algbw_derived, &busbw_derived}) Permute(*v, perm_, scratch_);
  for (auto* v : {&algbw_gbs, &busbw_gbs, &queue_delay_us, &ch_start_spread_us,
                  &ch_stop_spread_us})
    Permute(*v, perm_, scratch_);
}

void RecordBatch::Clear() {
  file_index = 0;
  end_offset = end_line = bytes = incomplete_tail = timing_source_missing = 0;
  last = false;
  comms.clear();
  processes.clear();
  ops.clear();
  op_index_.clear();
  for (auto* v : {&line, &sn, &exec_time_us, &dump_ts_us, &start_ts_us, &stop_ts_us,
                  &enqueue_ts_us, &kernel_start_ts_us, &kernel_stop_ts_us, &ke_line})
    v->clear();
  for (auto* v : {&process_local, &op_local}) v->clear();
  for (auto* v : {&rank, &n_channels, &global_rank, &local_rank, &gpu}) v->clear();
  for (auto* v : {&timing_source, &algbw_derived, &busbw_derived}) v->clear();
  for (auto* v : {&algbw_gbs, &busbw_gbs, &queue_delay_us, &ch_start_spread_us,
                  &ch_stop_spread_us})
    v->clear();
  ke.clear();
  annotations.clear();
  dump_stats.clear();
  proxy_ops.clear();
  proxy_steps.clear();
  rejections.clear();
}

void RecordBatch::Add(uint64_t line_no, const ParsedLine& p) {
  uint32_t proc = InternProcess(p);
  uint32_t comm = InternComm(p);
  if (p.kind == ParsedLine::Kind::kDumpStats) {
    dump_stats.push_back({line_no, proc, comm, p.rank, p.dump_ts_us, p.coll_records,
                          p.coll_dropped_total, p.coll_dropped_since_last_dump, p.p2p_records,
                          p.p2p_dropped_total, p.p2p_dropped_since_last_dump,
                          p.has_proxy_records ? p.proxy_records : kNullU64, p.proxy_dropped_total,
                          p.proxy_dropped_since_last_dump});
    return;
  }
  if (p.kind == ParsedLine::Kind::kProxy) {
    const ProxyRecord& t = p.proxy;
    for (const ProxyStep& s : p.proxy_steps)
      proxy_steps.push_back({line_no, proc, comm, t.rank, t.parent_type, t.direction, t.channel_id,
                             t.peer, t.proxy_op_sn, t.parent_sn, p.dump_ts_us, s});
    if (t.record_type != ProxyRecordType::kStep)
      proxy_ops.push_back({line_no, proc, comm, p.dump_ts_us, t});
    return;
  }
  OpKey key;
  key.comm = comm;
  key.kind = static_cast<uint8_t>(p.record_kind);
  key.op = p.op;
  key.algo = p.algo;
  key.proto = p.proto;
  key.peer = p.peer;
  key.msg_size_bytes = p.msg_size_bytes;
  line.push_back(line_no);
  process_local.push_back(proc);
  op_local.push_back(InternOp(key));
  rank.push_back(p.rank);
  sn.push_back(p.sn);
  exec_time_us.push_back(p.exec_time_us);
  timing_source.push_back(p.timing_source);
  // Bandwidths Inspector derived from size and time need not be stored: the views recompute them
  // bit-exactly. Compare bit patterns so NaN ("nan" in the file) is never taken as derivable.
  Bandwidth bw = InspectorBandwidth(p.op, p.n_ranks, p.msg_size_bytes, p.exec_time_us);
  algbw_gbs.push_back(p.algbw_gbs);
  busbw_gbs.push_back(p.busbw_gbs);
  algbw_derived.push_back(std::memcmp(&bw.algbw_gbs, &p.algbw_gbs, sizeof(double)) == 0);
  busbw_derived.push_back(std::memcmp(&bw.busbw_gbs, &p.busbw_gbs, sizeof(double)) == 0);
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
  if (p.annotated)
    annotations.push_back({line_no, p.step, std::string(p.phase), p.micro_batch, p.has_user_tag, p.user_tag});
  for (const KernelEvent& k : p.kernel_events) {
    ke_line.push_back(line_no);
    ke.push_back(k);
  }
}

}  // namespace collscope
