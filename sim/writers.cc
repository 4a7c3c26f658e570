#include "sim/writers.h"

#include <zlib.h>

#include <sys/uio.h>
#include <fcntl.h>
#include <unistd.h>
#include <climits>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace collscope::sim {

void AppendU64(std::string* s, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  s->append(buf, r.ptr);
}

void AppendI64(std::string* s, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  s->append(buf, r.ptr);
}

namespace {
void AppendFixed(std::string* s, double v, int digits, uint64_t scale) {
  if (std::isnan(v)) { s->append("nan"); return; }
  if (v < 0) { s->push_back('-'); v = -v; }
  if (v >= 9e12) {  // outside the exact integer path; never happens for bandwidths/timestamps
    char buf[64];
    int n = std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    s->append(buf, n);
    return;
  }
  const uint64_t q = static_cast<uint64_t>(std::llround(v * static_cast<double>(scale)));
  AppendU64(s, q / scale);
  s->push_back('.');
  uint64_t frac = q % scale;
  char buf[8];
  for (int i = digits - 1; i >= 0; --i) { buf[i] = static_cast<char>('0' + frac % 10); frac /= 10; }
  s->append(buf, digits);
}
}  // namespace

void AppendFixed6(std::string* s, double v) { AppendFixed(s, v, 6, 1000000); }
void AppendFixed3(std::string* s, double v) { AppendFixed(s, v, 3, 1000); }

// ------------------------------------------------------------------------------------------------
// InspectorWriter

InspectorWriter::InspectorWriter(const SimConfig& config, const Layout& layout,
                                 const std::string& dir)
    : config_(config), layout_(layout), dir_(dir) {
  v229_ = config.inspector.flavor == "2.29";
  proxy_ = config.inspector.proxy && !v229_;
  procs_.resize(layout.world);
  budget_ = static_cast<size_t>(std::max<int64_t>(config.output.buffer_mb, 1)) << 20;
  for (Arena& a : arenas_) a.data.reserve(budget_ + (size_t{4} << 20));
  writer_ = std::thread([this] { WriterLoop(); });
  const double interval = static_cast<double>(config.inspector.dump_interval_us);
  for (int r = 0; r < layout.world; ++r) {
    procs_[r].pass_offset_us = std::floor(Uniform(Hash(config.seed, 0xD0D0ULL, r)) * interval);
    procs_[r].p2p_sn.assign(layout.comms.size() ? static_cast<size_t>(CommKind::kCount) : 0, 0);
  }
  prefix_.resize(static_cast<size_t>(layout.world) * static_cast<int>(CommKind::kCount));
  comm_header_.resize(layout.comms.size());
  for (size_t c = 0; c < layout.comms.size(); ++c) {
    const CommInfo& ci = layout.comms[c];
    std::string& h = comm_header_[c];
    h = "{\"header\":{\"id\":\"" + ci.id_text + "\",";
    if (!v229_) h += "\"comm_name\":\"" + ci.name + "\",";
    h += "\"rank\":";
  }
  proc_meta_.resize(layout.world);
  for (int r = 0; r < layout.world; ++r) {
    const RankInfo& ri = layout.ranks[r];
    std::string& m = proc_meta_[r];
    m = ",\"hostname\":\"" + layout.hostnames[ri.host] + "\",\"pid\":";
    AppendI64(&m, ri.pid);
    m += "},";
  }
}

std::string InspectorWriter::FileName(int rank) const {
  const RankInfo& ri = layout_.ranks[rank];
  return layout_.hostnames[ri.host] + "-pid" + std::to_string(ri.pid) + ".log";
}

uint64_t InspectorWriter::LastSn(int, int, Op) const { return 0; }

double InspectorWriter::PassTime(int rank, int64_t k) const {
  const double interval = static_cast<double>(config_.inspector.dump_interval_us);
  const double jitter = std::floor(Uniform(Hash(config_.seed, 0xD1ULL, rank, k)) * 300.0);
  return procs_[rank].pass_offset_us + static_cast<double>(k) * interval + jitter;
}

int64_t InspectorWriter::PassOf(int rank, double t) const {
  const double interval = static_cast<double>(config_.inspector.dump_interval_us);
  int64_t k = static_cast<int64_t>(std::ceil((t - procs_[rank].pass_offset_us) / interval));
  if (k < 0) k = 0;
  if (k > 0 && PassTime(rank, k - 1) >= t) return k - 1;
  while (PassTime(rank, k) < t) ++k;
  return k;
}

InspectorWriter::CommCounters& InspectorWriter::Counters(int rank, int comm) {
  const int kinds = static_cast<int>(CommKind::kCount);
  if (counters_.empty()) counters_.resize(static_cast<size_t>(layout_.world) * kinds);
  return counters_[static_cast<size_t>(rank) * kinds + static_cast<int>(layout_.comms[comm].kind)];
}

void InspectorWriter::AddColl(int rank, int comm, Op op, uint64_t sn, int64_t bytes,
                              double start_us, double end_us, int channels) {
  if (!std::isfinite(end_us)) return;
  {
    // The plugin counts every completed op, recorded or filtered.
    CommCounters& c = Counters(rank, comm);
    c.completed++;
    c.last_activity_us = std::max(c.last_activity_us, end_us);
  }
  if (!v229_ && bytes < config_.inspector.min_size_bytes) { ++filtered_; return; }
  Pending p{};
  p.end_us = end_us;
  p.start_us = start_us;
  p.bytes = bytes;
  p.pass = PassOf(rank, end_us + 3.0);  // the proxy thread reports the kernel stop a bit later
  p.pass_us = PassTime(rank, p.pass);
  p.sn = sn;
  p.comm = comm;
  p.peer = -1;
  p.op = static_cast<uint8_t>(op);
  p.p2p = kColl;
  p.channels = static_cast<uint16_t>(channels);
  procs_[rank].pending.push_back(p);
}

int64_t InspectorWriter::AddP2p(int rank, int comm, Op op, int peer, int64_t bytes,
                                double start_us, double end_us) {
  if (v229_ || !config_.inspector.p2p) return -1;
  if (!std::isfinite(end_us)) return -1;
  const int kind = static_cast<int>(layout_.comms[comm].kind);
  const uint64_t sn = procs_[rank].p2p_sn[kind]++;  // counted even when filtered, as the plugin
  {
    CommCounters& c = Counters(rank, comm);
    c.completed++;
    c.last_activity_us = std::max(c.last_activity_us, end_us);
  }
  if (bytes < config_.inspector.min_size_bytes) { ++filtered_; return -1; }
  Pending p{};
  p.end_us = end_us;
  p.start_us = start_us;
  p.bytes = bytes;
  p.pass = PassOf(rank, end_us + 3.0);
  p.pass_us = PassTime(rank, p.pass);
  p.sn = sn;
  p.comm = comm;
  p.peer = peer;
  p.op = static_cast<uint8_t>(op);
  p.p2p = kP2p;
  p.channels = 1;
  procs_[rank].pending.push_back(p);
  return static_cast<int64_t>(sn);
}

void InspectorWriter::AddProxy(int rank, int comm, const ProxyTransfer& t) {
  if (!proxy_ || !std::isfinite(t.end_us) || !std::isfinite(t.start_us)) return;
  Pending p{};
  p.end_us = t.end_us;
  p.start_us = t.start_us;
  p.bytes = t.bytes;
  p.pass = PassOf(rank, t.end_us + 3.0);
  p.pass_us = PassTime(rank, p.pass);
  p.sn = t.parent_sn;
  p.comm = comm;
  p.peer = t.peer;
  p.op = t.send ? 1 : 0;
  p.p2p = kProxy;
  p.channels = 1;
  p.parent_p2p = t.parent_p2p ? 1 : 0;
  p.wire_us = static_cast<float>(t.wire_us);
  p.wait_a_us = static_cast<float>(t.wait_a_us);
  p.wait_b_us = static_cast<float>(t.wait_b_us);
  procs_[rank].pending.push_back(p);
}

void InspectorWriter::AddInflight(int rank, int comm, Op op, uint64_t sn, int peer, int64_t bytes,
                                  double start_us, int channels, const CollCost& cost) {
  const bool p2p = op == Op::kSend || op == Op::kRecv;
  // Without P2p events (2.29, or NCCL_INSPECTOR_ENABLE_P2P=0) the plugin tracks no p2p op.
  if (p2p && (v229_ || !config_.inspector.p2p)) return;
  if (p2p) sn = procs_[rank].p2p_sn[static_cast<int>(layout_.comms[comm].kind)]++;
  CommCounters& c = Counters(rank, comm);
  InflightOp o;
  o.start_us = start_us;
  o.bytes = bytes;
  o.sn = sn;
  o.peer = p2p ? peer : -1;
  o.op = static_cast<uint8_t>(op);
  o.p2p = p2p;
  o.channels = static_cast<uint16_t>(std::clamp(channels, 1, 64));
  o.algo = static_cast<uint8_t>(cost.algo);
  o.proto = static_cast<uint8_t>(cost.proto);
  c.inflight.push_back(o);
  c.last_activity_us = std::max(c.last_activity_us, start_us);
}

std::string InspectorWriter::StateFileName(int rank) const {
  const RankInfo& ri = layout_.ranks[rank];
  return layout_.hostnames[ri.host] + "-pid" + std::to_string(ri.pid) + ".inflight.json";
}

Status InspectorWriter::WriteStateFiles(double job_end_us) const {
  const int kinds = static_cast<int>(CommKind::kCount);
  static const CommCounters kNone;
  std::string s;
  for (int r = 0; r < layout_.world; ++r) {
    const RankInfo& ri = layout_.ranks[r];
    const double wall0 = static_cast<double>(config_.start_time_us) + layout_.clock_offset_us[ri.host];
    auto wall = [&](double t) {
      std::string v;
      AppendU64(&v, static_cast<uint64_t>(std::max(0.0, std::floor(wall0 + t))));
      return v;
    };
    // Each process finalizes its communicators a little after the job end (the watchdog's
    // abort, or the teardown, does not reach every process at once), one by one in creation
    // order; the last finalize writes the final state.
    const double fin0 = job_end_us + std::floor(Uniform(Hash(config_.seed, 0xF1A1ULL, r)) * 200000.0);
    s.clear();
    s += "{\"collscope_inflight_version\":1,\"hostname\":\"" + layout_.hostnames[ri.host] + "\",\"pid\":";
    AppendI64(&s, ri.pid);
    s += ",\"global_rank\":" + std::to_string(r) + ",\"local_rank\":" + std::to_string(ri.local) +
         ",\"gpu\":" + std::to_string(ri.local);
    std::string comms;
    double fin = fin0;
    for (int k = 0; k < kinds; ++k) {
      const int c = ri.comm[k];
      if (c < 0) continue;
      const CommInfo& ci = layout_.comms[c];
      const CommCounters& cc =
          counters_.empty() ? kNone : counters_[static_cast<size_t>(r) * kinds + k];
      std::vector<InflightOp> ops = cc.inflight;
      std::sort(ops.begin(), ops.end(), [](const InflightOp& a, const InflightOp& b) {
        return a.start_us != b.start_us ? a.start_us < b.start_us : a.sn < b.sn;
      });
      fin += 20;
      if (!comms.empty()) comms += ',';
      comms += "{\"id\":\"" + ci.id_text + "\",\"comm_name\":\"" + ci.name + "\",\"rank\":" +
               std::to_string(ri.comm_rank[k]) + ",\"n_ranks\":" + std::to_string(ci.ranks.size()) +
               ",\"nnodes\":" + std::to_string(ci.hosts.size()) + ",\"ops_started\":";
      AppendU64(&comms, cc.completed + ops.size());
      comms += ",\"ops_completed\":";
      AppendU64(&comms, cc.completed);
      comms += ",\"last_activity_ts_us\":" + wall(cc.last_activity_us) +
               ",\"coll_dropped_total\":0,\"p2p_dropped_total\":0,\"untracked_total\":0,\"inflight\":[";
      for (size_t i = 0; i < ops.size(); ++i) {
        const InflightOp& o = ops[i];
        if (i) comms += ',';
        comms += std::string("{\"kind\":\"") + (o.p2p ? "p2p" : "coll") + "\",\"op\":\"" +
                 std::string(OpName(static_cast<Op>(o.op))) + "\",\"sn\":";
        AppendU64(&comms, o.sn);
        comms += ",\"peer\":" + std::to_string(o.peer) + ",\"msg_size_bytes\":";
        AppendI64(&comms, o.bytes);
        comms += ",\"algo\":\"" + (o.p2p ? std::string("unknown") : std::string(AlgoName(static_cast<Algo>(o.algo)))) +
                 "\",\"proto\":\"" + (o.p2p ? std::string("unknown") : std::string(ProtoName(static_cast<Proto>(o.proto)))) +
                 "\",\"n_channels\":" + std::to_string(o.channels) + ",\"start_ts_us\":" + wall(o.start_us) +
                 ",\"enqueue_ts_us\":" + wall(o.start_us + 4) + ",\"age_us\":";
        AppendU64(&comms, static_cast<uint64_t>(std::max(0.0, fin - o.start_us)));
        comms += ",\"n_channels_started\":" + std::to_string(o.channels) +
                 ",\"n_channels_stopped\":0,\"channels_started\":[";
        for (int ch = 0; ch < o.channels; ++ch) comms += (ch ? "," : "") + std::to_string(ch);
        comms += "],\"channels_stopped\":[],\"proxy\":[]}";
      }
      comms += "],\"finalize_ts_us\":" + wall(fin) + "}";
    }
    s += ",\"heartbeat_ts_us\":" + wall(fin + 5) + ",\"state_seq\":";
    AppendU64(&s, static_cast<uint64_t>(std::max(0.0, fin / 1e6)) + 1);  // one write per second, plus the last
    s += ",\"status\":\"finalized\",\"comms\":[],\"finalized_comms\":[" + comms + "]}\n";
    const std::string path = dir_ + "/" + StateFileName(r);
    FILE* f = std::fopen(path.c_str(), "wb");
    bool ok = f != nullptr;
    if (f) {
      ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
      ok = std::fclose(f) == 0 && ok;
    }
    if (!ok) return Status::IOError("cannot write " + path);
  }
  return Status::Ok();
}

void InspectorWriter::Advance(int rank, double now_us) {
  Proc& pr = procs_[rank];
  if (pr.pending.empty()) return;
  scratch_.clear();
  size_t keep = 0;
  for (size_t i = 0; i < pr.pending.size(); ++i) {
    const Pending& p = pr.pending[i];
    if (p.pass_us < now_us) scratch_.push_back(p);
    else pr.pending[keep++] = p;
  }
  pr.pending.resize(keep);
  if (!scratch_.empty()) Emit(rank, scratch_);
}

void InspectorWriter::Emit(int rank, std::vector<Pending>& ready) {
  // A dump pass walks the communicators in creation order and drains each one's collective ring,
  // then its p2p ring, then (v4.4 with proxy tracking) its proxy ring, oldest first.
  std::sort(ready.begin(), ready.end(), [](const Pending& a, const Pending& b) {
    if (a.pass != b.pass) return a.pass < b.pass;
    if (a.comm != b.comm) return a.comm < b.comm;
    if (a.p2p != b.p2p) return a.p2p < b.p2p;
    if (a.end_us != b.end_us) return a.end_us < b.end_us;
    return a.sn < b.sn;
  });
  const size_t ring = static_cast<size_t>(std::max(config_.inspector.ring_size, 1));
  // Each line is below 600 bytes, plus ~110 bytes per channel in verbose mode; a proxy op's two
  // lines with up to 8 steps stay below 3 KB.
  const size_t est = ready.size() * (config_.inspector.verbose ? 4096 : proxy_ ? 3072 : 640);
  if (arenas_[cur_].data.size() + est > arenas_[cur_].data.capacity()) Handoff();
  Arena& arena = arenas_[cur_];
  const size_t chunk_start = arena.data.size();
  Proc& pr = procs_[rank];
  size_t i = 0;
  int64_t cur_pass = -1;
  uint64_t line_in_pass = 0;
  const double wall0 = static_cast<double>(config_.start_time_us) +
                       layout_.clock_offset_us[layout_.ranks[rank].host];
  while (i < ready.size()) {
    // One communicator's share of one dump pass, its rings in batch order.
    size_t group_end = i;
    while (group_end < ready.size() && ready[group_end].pass == ready[i].pass &&
           ready[group_end].comm == ready[i].comm)
      ++group_end;
    size_t first[3], end[3];
    uint64_t kept[3], dropped[3];
    for (uint8_t kind = kColl; kind <= kProxy; ++kind) {
      size_t begin = kind == kColl ? i : end[kind - 1];
      size_t e = begin;
      while (e < group_end && ready[e].p2p == kind) ++e;
      first[kind] = begin;
      if (v229_ && e > begin) {
        first[kind] = e - 1;  // 2.28/2.29: one slot per communicator, overwritten by every completion
      } else if (e - begin > ring) {
        first[kind] = e - ring;  // ring overflow: the oldest entries were overwritten
      }
      end[kind] = e;
      kept[kind] = e - first[kind];
      dropped[kind] = first[kind] - begin;
      dropped_ += dropped[kind];
    }
    if (ready[i].pass != cur_pass) { cur_pass = ready[i].pass; line_in_pass = 0; }
    const double pass_wall = wall0 + PassTime(rank, cur_pass);
    if (proxy_) {
      FormatMarker(rank, ready[i].comm, static_cast<uint64_t>(pass_wall) + line_in_pass / 4, kept,
                   dropped, &arena.data);
      ++line_in_pass;
      ++pr.lines;
    }
    for (uint8_t kind = kColl; kind <= kProxy; ++kind) {
      for (size_t k = first[kind]; k < end[kind]; ++k) {
        if (kind == kProxy) {
          FormatProxy(rank, ready[k], &arena.data);
          pr.lines += 2;
          continue;
        }
        const uint64_t ts = proxy_ ? 0 : static_cast<uint64_t>(pass_wall) + line_in_pass / 4;
        ++line_in_pass;
        FormatLine(rank, ready[k], ts, &arena.data);
        ++pr.lines;
        if (kind == kP2p) ++p2p_written_; else ++coll_written_;
      }
    }
    i = group_end;
  }
  if (arena.data.size() > chunk_start) {
    arena.chunks.push_back({rank, static_cast<uint32_t>(arena.chunks.size()), chunk_start,
                            arena.data.size() - chunk_start});
  }
  if (arena.data.size() >= budget_) Handoff();
}

void InspectorWriter::FormatMarker(int rank, int comm, uint64_t dump_ts, const uint64_t kept[3],
                                   const uint64_t dropped[3], std::string* o) {
  CommCounters& cc = Counters(rank, comm);
  o->append(Prefix(rank, comm));
  AppendU64(o, dump_ts);
  o->append(proc_meta_[rank]);
  static constexpr const char* kNames[3] = {"coll", "p2p", "proxy"};
  o->append("\"dump_stats\":{");
  for (int k = 0; k < 3; ++k) {
    cc.dropped_total[k] += dropped[k];
    if (k) o->push_back(',');
    o->append("\"").append(kNames[k]).append("_records\":");
    // Every proxy op is two records: its start and its final record.
    AppendU64(o, k == kProxy ? 2 * kept[k] : kept[k]);
    o->append(",\"").append(kNames[k]).append("_dropped_total\":");
    AppendU64(o, cc.dropped_total[k]);
    o->append(",\"").append(kNames[k]).append("_dropped_since_last_dump\":");
    AppendU64(o, dropped[k]);
  }
  o->append(",\"proxy_ops_dropped_total\":0,\"proxy_ops_dropped_since_last_dump\":0,"
            "\"proxy_steps_overwritten_total\":0,\"proxy_steps_overwritten_since_last_dump\":0,"
            "\"proxy_output_mode\":\"nested\",\"proxy_segment_step_capacity\":8,"
            "\"proxy_pxn_skipped_process_total\":0,\"proxy_steps_enabled\":1}}\n");
}

void InspectorWriter::FormatProxy(int rank, const Pending& p, std::string* o) {
  CommCounters& cc = Counters(rank, p.comm);
  const RankInfo& ri = layout_.ranks[rank];
  const int kind = static_cast<int>(layout_.comms[p.comm].kind);
  const bool send = p.op == 1;
  const double wall = static_cast<double>(config_.start_time_us) + layout_.clock_offset_us[ri.host];
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(p.bytes, 1));
  // NCCL moves a transfer in chunks of the protocol's slice (512 KiB for SIMPLE).
  const uint64_t n_steps = std::clamp<uint64_t>((bytes + (uint64_t{512} << 10) - 1) >> 19, 1, 8);
  const uint64_t chunk = (bytes + n_steps - 1) / n_steps;
  const uint64_t t0 = static_cast<uint64_t>(wall + p.start_us);
  const uint64_t t1 = std::max(t0, static_cast<uint64_t>(wall + p.end_us));
  const uint64_t op_sn = ++cc.proxy_op_sn;
  auto common = [&](const char* type, bool final) {
    o->append("{\"proxy_trace\":{\"record_type\":\"").append(type).append("\",\"record_sn\":");
    AppendU64(o, ++cc.proxy_record_sn);
    o->append(p.parent_p2p ? ",\"parent_type\":\"p2p\",\"parent_sn\":" : ",\"parent_type\":\"coll\",\"parent_sn\":");
    AppendU64(o, p.sn);
    o->append(",\"proxy_op_sn\":");
    AppendU64(o, op_sn);
    if (final) {
      o->append(",\"rank\":");
      AppendI64(o, ri.comm_rank[kind]);
    }
    o->append(",\"channel_id\":0,\"peer\":");
    AppendI64(o, p.peer);
    o->append(send ? ",\"direction\":\"send\"" : ",\"direction\":\"recv\"");
    o->append(",\"timing_source\":\"proxy_cpu\",\"is_final\":");
    o->append(final ? "true" : "false");
    o->append(",\"n_steps\":");
    AppendU64(o, n_steps);
    o->append(",\"chunk_size_bytes\":");
    AppendU64(o, chunk);
  };
  common("proxy_op_start", false);
  o->append(",\"event_trace_ts\":{\"proxy_op_start_ts\":");
  AppendU64(o, t0);
  o->append("}}}\n");

  common("proxy_op", true);
  o->append(",\"n_steps_started\":");
  AppendU64(o, n_steps);
  o->append(",\"n_steps_completed\":");
  AppendU64(o, n_steps);
  o->append(",\"n_steps_dropped\":0,\"trans_size_bytes\":");
  AppendU64(o, bytes);
  o->append(",\"total_us\":");
  AppendU64(o, t1 - t0);
  if (t1 > t0) {
    o->append(",\"op_bw_gbs\":");
    AppendFixed6(o, static_cast<double>(bytes) / (static_cast<double>(t1 - t0) * 1000.0));
  }
  o->append(",\"event_trace_ts\":{\"proxy_op_start_ts\":");
  AppendU64(o, t0);
  o->append(",\"proxy_op_in_progress_ts\":");
  AppendU64(o, t0 + 1);
  o->append(",\"proxy_op_stop_ts\":");
  AppendU64(o, t1);
  o->append("},\"steps\":[");
  // The steps share the op's time evenly; within a step the phases follow NCCL's order (send:
  // GPU produce, peer credit, wire; recv: wire, flush, GPU consume).
  const double n = static_cast<double>(n_steps);
  const double phase[3] = {send ? p.wait_a_us / n : p.wire_us / n,
                           send ? p.wait_b_us / n : p.wait_a_us / n,
                           send ? p.wire_us / n : p.wait_b_us / n};
  static constexpr const char* kSendKeys[3] = {"gpu_produce_us", "peer_credit_us", "wire_us"};
  static constexpr const char* kRecvKeys[3] = {"wire_us", "flush_us", "gpu_consume_us"};
  static constexpr const char* kSendTs[3] = {"send_gpu_wait_ts", "send_peer_wait_ts", "send_wait_ts"};
  static constexpr const char* kRecvTs[3] = {"recv_wait_ts", "recv_flush_wait_ts", "recv_gpu_wait_ts"};
  const double step_us = static_cast<double>(t1 - t0) / n;
  for (uint64_t k = 0; k < n_steps; ++k) {
    const double s0 = static_cast<double>(t0) + step_us * static_cast<double>(k);
    uint64_t ts[4];
    ts[0] = static_cast<uint64_t>(s0);
    for (int ph = 0; ph < 3; ++ph) ts[ph + 1] = ts[ph] + static_cast<uint64_t>(std::max(0.0, phase[ph]));
    if (k) o->push_back(',');
    o->append("{\"proxy_step_sn\":");
    AppendU64(o, ++cc.proxy_record_sn);
    o->append(",\"step\":");
    AppendU64(o, k);
    o->append(",\"trans_size_bytes\":");
    AppendU64(o, k + 1 < n_steps ? chunk : bytes - chunk * (n_steps - 1));
    o->append(",\"total_us\":");
    AppendU64(o, ts[3] - ts[0]);
    for (int ph = 0; ph < 3; ++ph) {
      o->append(",\"").append(send ? kSendKeys[ph] : kRecvKeys[ph]).append("\":");
      AppendU64(o, ts[ph + 1] - ts[ph]);
    }
    o->append(",\"event_trace_ts\":{\"proxy_step_start_ts\":");
    AppendU64(o, ts[0]);
    for (int ph = 0; ph < 3; ++ph) {
      o->append(",\"").append(send ? kSendTs[ph] : kRecvTs[ph]).append("\":");
      AppendU64(o, ts[ph]);
    }
    o->append(",\"proxy_step_stop_ts\":");
    AppendU64(o, ts[3]);
    o->append("}}");
  }
  o->append("]}}\n");
}

namespace {
// Raw writer into a stack buffer: one std::string append per line instead of dozens.
struct Raw {
  char* p;
  void Lit(std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
  void U64(uint64_t v) { p = std::to_chars(p, p + 24, v).ptr; }
  void I64(int64_t v) { p = std::to_chars(p, p + 24, v).ptr; }
  void Fixed6(double v) {
    if (!(v >= 0 && v < 9e12)) {  // NaN, negative or huge: printf path
      p += std::snprintf(p, 64, "%lf", v);
      return;
    }
    const uint64_t q = static_cast<uint64_t>(std::llround(v * 1e6));
    U64(q / 1000000);
    *p++ = '.';
    uint64_t frac = q % 1000000;
    for (int i = 5; i >= 0; --i) { p[i] = static_cast<char>('0' + frac % 10); frac /= 10; }
    p += 6;
  }
};
}  // namespace

const std::string& InspectorWriter::Prefix(int rank, int comm) {
  const int kind = static_cast<int>(layout_.comms[comm].kind);
  std::string& s = prefix_[static_cast<size_t>(rank) * static_cast<int>(CommKind::kCount) + kind];
  if (s.empty()) {
    const CommInfo& ci = layout_.comms[comm];
    s = comm_header_[comm];
    AppendI64(&s, layout_.ranks[rank].comm_rank[kind]);
    s += ",\"n_ranks\":";
    AppendU64(&s, ci.ranks.size());
    s += ",\"nnodes\":";
    AppendU64(&s, ci.hosts.size());
    s += proxy_ ? "},\"metadata\":{\"inspector_output_format_version\":\"v4.4\",\"git_rev\":\""
                : "},\"metadata\":{\"inspector_output_format_version\":\"v4.0\",\"git_rev\":\"";
    s += config_.inspector.git_rev;
    s += "\",\"rec_mechanism\":\"nccl_profiler_interface\",\"dump_timestamp_us\":";
  }
  return s;
}

void InspectorWriter::FormatLine(int rank, const Pending& p, uint64_t dump_ts, std::string* o) {
  const CommInfo& ci = layout_.comms[p.comm];
  const RankInfo& ri = layout_.ranks[rank];
  const std::string& prefix = Prefix(rank, p.comm);
  const std::string& meta = proc_meta_[rank];
  char buf[1024];
  Raw w{buf};
  const Op op = static_cast<Op>(p.op);
  const double exec = std::max(0.0, p.end_us - p.start_us);
  const uint64_t exec_us = static_cast<uint64_t>(exec);  // truncated, as the plugin prints it
  double algbw = 0, busbw = 0;
  InspectorBandwidth(op, static_cast<int>(ci.ranks.size()), p.bytes, exec_us, &algbw, &busbw);
  // A line of a v4.4 batch is a single-key object; its marker carries header and metadata.
  const std::string_view head = dump_ts == 0 ? std::string_view("{") : std::string_view(prefix);
  if (dump_ts != 0) {
    w.U64(dump_ts);
    w.Lit(meta);
  }
  if (p.p2p) {
    w.Lit("\"p2p_perf\":{\"p2p\":\"");
    w.Lit(OpName(op));
    w.Lit("\",\"p2p_sn\":");
    w.U64(p.sn);
    w.Lit(",\"p2p_peer\":");
    w.I64(p.peer);
    w.Lit(",\"p2p_msg_size_bytes\":");
    w.U64(static_cast<uint64_t>(p.bytes));
    w.Lit(",\"p2p_exec_time_us\":");
    w.U64(exec_us);
    w.Lit(",\"p2p_timing_source\":\"kernel_gpu\",\"p2p_algobw_gbs\":");
    w.Fixed6(algbw);
    w.Lit(",\"p2p_busbw_gbs\":");
    w.Fixed6(busbw);
  } else {
    w.Lit("\"coll_perf\":{\"coll\":\"");
    w.Lit(OpName(op));
    w.Lit("\",\"coll_sn\":");
    w.U64(p.sn);
    w.Lit(",\"coll_msg_size_bytes\":");
    w.U64(static_cast<uint64_t>(p.bytes));
    w.Lit(",\"coll_exec_time_us\":");
    w.U64(exec_us);
    w.Lit(",\"coll_timing_source\":\"kernel_gpu\",\"coll_algobw_gbs\":");
    w.Fixed6(algbw);
    w.Lit(",\"coll_busbw_gbs\":");
    w.Fixed6(busbw);
  }
  const size_t n = static_cast<size_t>(w.p - buf);
  const size_t old = o->size();
  o->resize(old + head.size() + n + 3);
  char* d = o->data() + old;
  std::memcpy(d, head.data(), head.size());
  std::memcpy(d + head.size(), buf, n);
  if (!config_.inspector.verbose) {
    std::memcpy(d + head.size() + n, "}}\n", 3);
    return;
  }
  o->resize(old + head.size() + n);
  const std::string_view pre = p.p2p ? "p2p" : "coll";
  if (config_.inspector.verbose) {
    // Per-operation callback counters and wall-clock timestamps, one entry per channel.
    const int nch = std::max<int>(1, p.channels);
    const double wall = static_cast<double>(config_.start_time_us) +
                        layout_.clock_offset_us[ri.host];
    const uint64_t kstart = static_cast<uint64_t>(wall + p.start_us);
    const uint64_t kstop = static_cast<uint64_t>(wall + p.end_us);
    const uint64_t enq = kstart > 12 ? kstart - 12 : 0;
    o->append(",\"event_trace_sn\":{\"");
    o->append(pre);
    o->append("_start_sn\":1,\"");
    o->append(pre);
    o->append("_stop_sn\":2,\"kernel_events\":[");
    for (int c = 0; c < nch; ++c) {
      if (c) o->push_back(',');
      o->append("{\"channel_id\":");
      AppendI64(o, c);
      o->append(",\"kernel_start_sn\":");
      AppendI64(o, 3 + c);
      o->append(",\"kernel_stop_sn\":");
      AppendI64(o, 4 + nch + 2 * c);
      o->append(",\"kernel_record_sn\":");
      AppendI64(o, 3 + nch + 2 * c);
      o->append("}");
    }
    o->append("]},\"event_trace_ts\":{\"");
    o->append(pre);
    o->append("_start_ts\":");
    AppendU64(o, enq);
    o->append(",\"");
    o->append(pre);
    o->append("_stop_ts\":");
    AppendU64(o, enq + 4);
    o->append(",\"kernel_events\":[");
    for (int c = 0; c < nch; ++c) {
      // Channels start within a few us of each other; the slowest one defines the exec time.
      const uint64_t skew = static_cast<uint64_t>(c % 3);
      const uint64_t cstop = c == 0 ? kstop : kstop - static_cast<uint64_t>(c % 4);
      if (c) o->push_back(',');
      o->append("{\"channel_id\":");
      AppendI64(o, c);
      o->append(",\"kernel_start_ts\":");
      AppendU64(o, kstart + skew);
      o->append(",\"kernel_stop_ts\":");
      AppendU64(o, cstop + 6);
      o->append(",\"kernel_record_ts\":");
      AppendU64(o, cstop + 3);
      o->append("}");
    }
    o->append("]}");
  }
  o->append("}}\n");
}

InspectorWriter::~InspectorWriter() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void InspectorWriter::Handoff() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });  // the writer finished the previous arena
  if (arenas_[cur_].chunks.empty()) return;
  busy_ = true;
  cur_ = 1 - cur_;
  lock.unlock();
  cv_.notify_all();
}

void InspectorWriter::WriterLoop() {
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return busy_ || stop_; });
    if (!busy_ && stop_) return;
    Arena& a = arenas_[1 - cur_];
    lock.unlock();
    WriteArena(a);
    lock.lock();
    busy_ = false;
    lock.unlock();
    cv_.notify_all();
  }
}

void InspectorWriter::WriteArena(Arena& a) {
  std::sort(a.chunks.begin(), a.chunks.end(), [](const Chunk& x, const Chunk& y) {
    return x.rank != y.rank ? x.rank < y.rank : x.seq < y.seq;
  });
  std::vector<iovec> iov;
  size_t i = 0;
  while (i < a.chunks.size()) {
    const int rank = a.chunks[i].rank;
    size_t j = i;
    iov.clear();
    size_t total = 0;
    for (; j < a.chunks.size() && a.chunks[j].rank == rank; ++j) {
      iov.push_back({a.data.data() + a.chunks[j].offset, a.chunks[j].len});
      total += a.chunks[j].len;
    }
    i = j;
    Proc& pr = procs_[rank];
    const std::string path = dir_ + "/" + FileName(rank);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | (pr.created ? O_APPEND : O_TRUNC), 0666);
    pr.created = true;
    if (fd < 0) {
      if (error_.empty()) error_ = "cannot open " + path + ": " + std::strerror(errno);
      continue;
    }
    size_t k = 0;
    while (k < iov.size()) {
      const int n = static_cast<int>(std::min<size_t>(iov.size() - k, IOV_MAX));
      size_t want = 0;
      for (int m = 0; m < n; ++m) want += iov[k + m].iov_len;
      const ssize_t w = ::writev(fd, iov.data() + k, n);
      if (w < 0 || static_cast<size_t>(w) != want) {
        // Rare short write: finish the remaining bytes one chunk at a time.
        size_t done = w < 0 ? 0 : static_cast<size_t>(w);
        for (int m = 0; m < n; ++m) {
          const iovec& v = iov[k + m];
          size_t off = done >= v.iov_len ? v.iov_len : done;
          done -= off;
          while (off < v.iov_len) {
            const ssize_t x = ::write(fd, static_cast<char*>(v.iov_base) + off, v.iov_len - off);
            if (x <= 0) {
              if (error_.empty()) error_ = "short write to " + path;
              break;
            }
            off += static_cast<size_t>(x);
          }
        }
      }
      k += n;
    }
    if (::close(fd) != 0 && error_.empty()) error_ = "cannot close " + path;
    bytes_written_ += total;
  }
  a.data.clear();
  a.chunks.clear();
}

Status InspectorWriter::Finish(double job_end_us) {
  for (int r = 0; r < layout_.world; ++r) {
    Proc& pr = procs_[r];
    // Only passes that ran before the process exited were written.
    size_t keep = 0;
    for (const Pending& p : pr.pending) {
      if (p.pass_us <= job_end_us) pr.pending[keep++] = p;
      else ++dropped_;
    }
    pr.pending.resize(keep);
    Advance(r, kInf);
  }
  Handoff();
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
  }
  // Processes whose plugin never wrote anything leave no file, as the real plugin (the file is
  // opened at the first dump that has data).
  return error_.empty() ? Status::Ok() : Status::IOError(error_);
}

// ------------------------------------------------------------------------------------------------
// KinetoWriter

KinetoWriter::KinetoWriter(const SimConfig& config, const Layout& layout, const std::string& dir,
                           const std::string& summary_dir)
    : config_(config), layout_(layout), dir_(dir), summary_dir_(summary_dir) {
  enabled_ = config.mode == Mode::kTraining && layout.world <= config.output.kineto_max_ranks;
  if (!enabled_) return;
  if (config.output.kernel_summaries)
    summarizers_.assign(static_cast<size_t>(layout.world), capture::Summarizer(10'000'000'000, nullptr));
  if (config.output.kineto_traces) events_.resize(layout.world);
  correlation_.assign(layout.world, 1000);
  // Kineto prints timestamps relative to baseTimeNanoseconds; base + ts is the wall clock.
  base_us_ = std::floor(static_cast<double>(config.start_time_us) / 1e6 - 3.0e6) * 1e6;
}

bool KinetoWriter::StepOn(int step) const {
  if (!enabled_) return false;
  if (step < config_.output.kineto_first_step) return false;
  if (config_.output.kineto_last_step >= 0 && step > config_.output.kineto_last_step) return false;
  return true;
}

void KinetoWriter::Event(int rank, std::string_view cat, std::string_view name, int64_t pid,
                         int64_t tid, double start_us, double dur_us, const std::string& args) {
  if (events_.empty()) return;  // summaries only
  std::string& s = events_[rank];
  const double ts = static_cast<double>(config_.start_time_us) +
                    layout_.clock_offset_us[layout_.ranks[rank].host] + start_us - base_us_;
  s.append("  {\"ph\": \"X\", \"cat\": \"");
  s.append(cat);
  s.append("\", \"name\": \"");
  s.append(name);
  s.append("\", \"pid\": ");
  AppendI64(&s, pid);
  s.append(", \"tid\": ");
  AppendI64(&s, tid);
  s.append(", \"ts\": ");
  AppendFixed3(&s, ts);
  s.append(", \"dur\": ");
  AppendFixed3(&s, dur_us);
  s.append(", \"args\": {");
  s.append(args);
  s.append("}},\n");
}

void KinetoWriter::Kernel(int rank, const std::string& name, int stream, double start_us,
                          double dur_us, const std::string& extra_args) {
  if (!enabled_ || !std::isfinite(start_us) || !std::isfinite(dur_us)) return;
  const uint64_t corr = correlation_[rank]++;
  const int device = layout_.ranks[rank].local;
  std::string args = "\"External id\": ";
  AppendU64(&args, corr);
  args += ", \"queued\": 0, \"device\": ";
  AppendI64(&args, device);
  args += ", \"context\": 1, \"stream\": ";
  AppendI64(&args, stream);
  args += ", \"correlation\": ";
  AppendU64(&args, corr);
  if (!extra_args.empty()) {
    args += ", ";
    args += extra_args;
  }
  Event(rank, "kernel", name, device, stream, start_us, dur_us, args);
  if (!summarizers_.empty()) {
    // As CUPTI times it: wall-clock ns of the host (with its clock offset), one launch shape per
    // kernel name.
    const double wall_us = static_cast<double>(config_.start_time_us) +
                           layout_.clock_offset_us[layout_.ranks[rank].host] + start_us;
    capture::Activity a;
    a.name = name;
    a.kind = capture::KernelKindOf(name);
    a.grid[0] = 132, a.grid[1] = 1, a.grid[2] = 1;
    a.block[0] = a.kind == capture::ActivityKind::kNccl ? 640 : 256, a.block[1] = 1, a.block[2] = 1;
    a.device = static_cast<uint32_t>(device), a.stream = static_cast<uint32_t>(stream);
    a.start_ns = static_cast<uint64_t>(std::llround(wall_us * 1000));
    a.end_ns = a.start_ns + static_cast<uint64_t>(std::llround(dur_us * 1000));
    summarizers_[static_cast<size_t>(rank)].AddInStep(a, step_);
  }
}

void KinetoWriter::Annotation(int rank, const std::string& name, double start_us, double dur_us,
                              bool gpu) {
  if (!enabled_ || !std::isfinite(start_us) || !std::isfinite(dur_us)) return;
  const uint64_t corr = correlation_[rank]++;
  std::string args = "\"External id\": ";
  AppendU64(&args, corr);
  const int64_t pid = layout_.ranks[rank].pid;
  Event(rank, "user_annotation", name, pid, pid, start_us, dur_us, args);
  if (gpu) {
    Event(rank, "gpu_user_annotation", name, layout_.ranks[rank].local, 7, start_us, dur_us, args);
  }
}

Status KinetoWriter::Finish() {
  if (!enabled_) return Status::Ok();
  for (size_t r = 0; r < summarizers_.size(); ++r) {
    const RankInfo& ri = layout_.ranks[r];
    capture::SummaryProcess p;
    p.host = layout_.hostnames[ri.host], p.pid = ri.pid, p.rank = static_cast<int32_t>(r);
    p.local_rank = ri.local, p.world_size = layout_.world, p.step_windows = true, p.window_ms = 10000;
    std::string text = capture::ProcessLine(p);
    summarizers_[r].Emit(UINT64_MAX, &text);
    text += "{\"type\":\"stats\",\"records\":" + std::to_string(summarizers_[r].activities()) +
            ",\"kernels\":" + std::to_string(summarizers_[r].activities()) +
            ",\"untimed\":0,\"dropped_by_cupti\":0,\"buffers_refused\":0,\"invalid_records\":0,\"late\":0}\n";
    const std::string path =
        summary_dir_ + "/" + p.host + "-pid" + std::to_string(ri.pid) +
        (config_.output.kernel_summaries_gzip ? ".kernels.jsonl.gz" : ".kernels.jsonl");
    if (config_.output.kernel_summaries_gzip) {
      gzFile gz = gzopen(path.c_str(), "wb6");
      if (!gz) return Status::IOError("cannot open " + path);
      const bool wrote = gzwrite(gz, text.data(), static_cast<unsigned>(text.size())) ==
                         static_cast<int>(text.size());
      if (gzclose(gz) != Z_OK || !wrote) return Status::IOError("cannot write " + path);
    } else {
      FILE* f = std::fopen(path.c_str(), "wb");
      if (!f) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
      const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
      if (std::fclose(f) != 0 || !wrote) return Status::IOError("cannot write " + path);
    }
  }
  summarizers_.clear();
  if (events_.empty()) return Status::Ok();
  for (int r = 0; r < layout_.world; ++r) {
    const RankInfo& ri = layout_.ranks[r];
    std::string doc = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n";
    for (int g = 0; g < layout_.gpus_per_host; ++g) {
      doc += "    {\"id\": " + std::to_string(g) +
             ", \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 85045379072, "
             "\"computeMajor\": 9, \"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, "
             "\"maxThreadsPerMultiprocessor\": 2048, \"regsPerBlock\": 65536, \"warpSize\": 32, "
             "\"sharedMemPerBlock\": 49152, \"numSms\": 132, \"regsPerMultiprocessor\": 65536, "
             "\"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472}";
      doc += g + 1 < layout_.gpus_per_host ? ",\n" : "\n";
    }
    doc += "  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(r) +
           ", \"world_size\": " + std::to_string(layout_.world) + ", \"pg_count\": ";
    std::vector<int> pgs;
    for (int k = 0; k < static_cast<int>(CommKind::kCount); ++k)
      if (ri.comm[k] >= 0) pgs.push_back(ri.comm[k]);
    std::sort(pgs.begin(), pgs.end());
    doc += std::to_string(pgs.size()) + ", \"pg_config\": [";
    for (size_t i = 0; i < pgs.size(); ++i) {
      const CommInfo& c = layout_.comms[pgs[i]];
      if (i) doc += ", ";
      doc += "{\"pg_name\": \"" + std::to_string(c.pg_index) + "\", \"pg_desc\": \"" + c.name +
             "\", \"backend_config\": \"cuda:nccl\", \"pg_size\": " +
             std::to_string(c.ranks.size()) + ", \"ranks\": [";
      for (size_t m = 0; m < c.ranks.size(); ++m) {
        if (m) doc += ", ";
        doc += std::to_string(c.ranks[m]);
      }
      doc += "]}";
    }
    doc += "], \"nccl_version\": \"2.30.3\"},\n  \"traceEvents\": [\n";
    // Process / thread metadata first, as Kineto writes them.
    doc += "  {\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": " +
           std::to_string(ri.pid) + ", \"tid\": 0, \"args\": {\"name\": \"python3\"}},\n";
    doc += "  {\"name\": \"process_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": " +
           std::to_string(ri.local) + ", \"tid\": 0, \"args\": {\"name\": \"GPU " +
           std::to_string(ri.local) + "\"}},\n";
    std::string& ev = events_[r];
    doc += ev;
    ev.clear();
    ev.shrink_to_fit();
    doc += "  {\"name\": \"thread_name\", \"ph\": \"M\", \"ts\": 0, \"pid\": " +
           std::to_string(ri.pid) + ", \"tid\": " + std::to_string(ri.pid) +
           ", \"args\": {\"name\": \"thread " + std::to_string(ri.pid) + " (python3)\"}}\n";
    const std::string name = layout_.hostnames[ri.host] + "_" + std::to_string(ri.pid) + "." +
                             std::to_string(config_.start_time_us / 1000) + ".pt.trace.json";
    doc += "  ],\n  \"traceName\": \"" + name + "\",\n  \"displayTimeUnit\": \"ms\",\n" +
           "  \"baseTimeNanoseconds\": " + std::to_string(static_cast<int64_t>(base_us_) * 1000) +
           "\n}\n";
    const std::string path = dir_ + "/" + name + (config_.output.kineto_gzip ? ".gz" : "");
    if (config_.output.kineto_gzip) {
      gzFile gz = gzopen(path.c_str(), "wb6");
      if (!gz) return Status::IOError("cannot open " + path);
      // Fixed header: gzip stores no name/mtime with gzopen, so output stays byte-identical.
      if (gzwrite(gz, doc.data(), static_cast<unsigned>(doc.size())) !=
          static_cast<int>(doc.size())) {
        gzclose(gz);
        return Status::IOError("cannot write " + path);
      }
      if (gzclose(gz) != Z_OK) return Status::IOError("cannot close " + path);
    } else {
      FILE* f = std::fopen(path.c_str(), "wb");
      if (!f) return Status::IOError("cannot open " + path);
      std::fwrite(doc.data(), 1, doc.size(), f);
      std::fclose(f);
    }
  }
  return Status::Ok();
}

StepWriter::StepWriter(const SimConfig& config, const Layout& layout, const std::string& dir)
    : config_(config), layout_(layout), dir_(dir) {
  enabled_ = config.output.steps && config.mode == Mode::kTraining;
  if (!enabled_) return;
  pending_.resize(layout.world);
  started_.assign(layout.world, false);
  for (int r = 0; r < layout.world; ++r) {
    const RankInfo& ri = layout.ranks[r];
    std::string& s = pending_[r];
    s = "{\"collscope_steps_version\":1,\"type\":\"process\",\"hostname\":\"" + layout.hostnames[ri.host] +
        "\",\"pid\":" + std::to_string(ri.pid) + ",\"rank\":" + std::to_string(r) +
        ",\"world_size\":" + std::to_string(layout.world) + ",\"local_rank\":" + std::to_string(ri.local) +
        ",\"parallel\":{";
    const std::pair<int, int> dims[] = {{ri.dp, layout.dp}, {ri.tp, layout.tp}, {ri.pp, layout.pp},
                                        {ri.ep, layout.ep}, {ri.cp, layout.cp}};
    const char* const names[] = {"dp", "tp", "pp", "ep", "cp"};
    for (int d = 0; d < 5; ++d)
      s += std::string(d ? "," : "") + "\"" + names[d] + "\":[" + std::to_string(dims[d].first) + "," +
           std::to_string(dims[d].second) + "]";
    s += "}}\n";
  }
}

void StepWriter::Step(int rank, int64_t step, double start_us, double dur_us, const std::vector<Phase>& phases) {
  if (!enabled_) return;
  const double wall0 = static_cast<double>(config_.start_time_us) + layout_.clock_offset_us[layout_.ranks[rank].host];
  std::string& s = pending_[rank];
  s += "{\"type\":\"step\",\"rank\":" + std::to_string(rank) + ",\"step\":" + std::to_string(step) + ",\"start_us\":";
  AppendI64(&s, std::llround(wall0 + start_us));
  s += ",\"wall_us\":";
  AppendI64(&s, std::llround(dur_us));
  s += ",\"phases\":[";
  bool first = true;
  for (const Phase& p : phases) {
    if (!std::isfinite(p.start_us)) continue;
    s += first ? "{\"name\":\"" : ",{\"name\":\"";
    first = false;
    s += p.name;
    s += "\",\"start_us\":";
    AppendI64(&s, std::llround(wall0 + p.start_us));
    s += ",\"wall_us\":";
    AppendI64(&s, std::llround(p.dur_us));
    s += ",\"count\":1}";
  }
  s += "]}\n";
  // Bounded memory on long jobs: a rank's lines go to its file every 32 KB.
  if (s.size() > (32u << 10)) {
    if (Status st = Flush(rank); !st.ok()) {
      error_ = st;  // Finish reports it
      enabled_ = false;
    }
  }
}

Status StepWriter::Flush(int rank) {
  const RankInfo& ri = layout_.ranks[rank];
  const std::string path = dir_ + "/" + layout_.hostnames[ri.host] + "-pid" + std::to_string(ri.pid) + ".steps.jsonl";
  FILE* f = std::fopen(path.c_str(), started_[rank] ? "ab" : "wb");
  if (!f) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  const bool ok = std::fwrite(pending_[rank].data(), 1, pending_[rank].size(), f) == pending_[rank].size();
  if (std::fclose(f) != 0 || !ok) return Status::IOError("cannot write " + path);
  started_[rank] = true;
  pending_[rank].clear();
  return Status::Ok();
}

Status StepWriter::Finish() {
  if (!config_.output.steps || config_.mode != Mode::kTraining) return Status::Ok();
  if (!enabled_) return error_;
  for (int r = 0; r < layout_.world; ++r)
    if (!pending_[r].empty()) COLLSCOPE_RETURN_IF_ERROR(Flush(r));
  return Status::Ok();
}

}  // namespace collscope::sim
