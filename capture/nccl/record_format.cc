#include "capture/nccl/record_format.h"

#include "capture/common/json_escape.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace collscope::capture {
namespace {

struct FuncEntry {
  const char* name;
  Func func;
};
// NCCL core's function strings; PutSignal etc. exist in newer cores and have no bw formula.
constexpr FuncEntry kFuncs[] = {
    {"AllReduce", Func::kAllReduce},
    {"AllGather", Func::kAllGather},
    {"ReduceScatter", Func::kReduceScatter},
    {"Broadcast", Func::kBroadcast},
    {"Reduce", Func::kReduce},
    {"Send", Func::kSend},
    {"Recv", Func::kRecv},
    {"SendRecv", Func::kSendRecv},
    {"AlltoAll", Func::kAlltoAll},
    {"Gather", Func::kGather},
    {"Scatter", Func::kScatter},
    {"AllGatherV", Func::kAllGatherV},
    {"PutSignal", Func::kPutSignal},
    {"Signal", Func::kSignal},
    {"WaitSignal", Func::kWaitSignal},
};

struct TypeEntry {
  const char* name;
  size_t size;
};
constexpr TypeEntry kTypes[] = {
    {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclInt32", 4},      {"ncclUint32", 4},
    {"ncclInt64", 8},   {"ncclUint64", 8},   {"ncclFloat16", 2},    {"ncclFloat32", 4},
    {"ncclFloat64", 8}, {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
};

}  // namespace

Func ParseFunc(const char* name) noexcept {
  if (name == nullptr) return Func::kInvalid;
  for (const auto& e : kFuncs) {
    if (std::strcmp(name, e.name) == 0) return e.func;
  }
  return Func::kInvalid;
}

std::string_view FuncName(Func f) noexcept {
  for (const auto& e : kFuncs) {
    if (e.func == f) return e.name;
  }
  return "Invalid";
}

size_t DatatypeSize(const char* name) noexcept {
  if (name == nullptr) return 0;
  // Fast path (runs per operation): every NCCL type name carries its width in bits as the first
  // number ("ncclBfloat16", "ncclFloat8e4m3"); confirm with one strcmp against the table.
  const char* p = name;
  while (*p != '\0' && (*p < '0' || *p > '9')) ++p;
  unsigned bits = 0;
  while (*p >= '0' && *p <= '9' && bits < 1000)
    bits = bits * 10 + static_cast<unsigned>(*p++ - '0');
  const size_t guess = bits / 8;
  for (const auto& e : kTypes) {
    if (e.size == guess && std::strcmp(name, e.name) == 0) return e.size;
  }
  return 0;
}

std::string_view TimingSourceName(TimingSource s) noexcept {
  switch (s) {
    case TimingSource::kKernelGpu:
      return "kernel_gpu";
    case TimingSource::kKernelCpu:
      return "kernel_cpu";
    case TimingSource::kCollectiveCpu:
      return "collective_cpu";
  }
  return "unknown";
}

PackedName PackName(const char* s) noexcept {
  PackedName p;
  if (s == nullptr) return p;
  char buf[16] = {};
  for (int i = 0; i < 15 && s[i] != '\0'; ++i) buf[i] = s[i];
  std::memcpy(p.w, buf, sizeof(buf));
  return p;
}

std::string_view UnpackName(const PackedName& p, char (&out)[16]) noexcept {
  std::memcpy(out, p.w, sizeof(out));
  out[15] = '\0';
  size_t n = std::strlen(out);
  if (n == 0) return "unknown";
  return std::string_view(out, n);
}

Bandwidth ComputeBandwidth(Func f, bool is_p2p, uint64_t msg_bytes, uint64_t exec_us,
                           int nranks) noexcept {
  Bandwidth bw;
  if (exec_us == 0 || nranks <= 0) return bw;
  const double n = nranks;
  const double s = static_cast<double>(msg_bytes);
  double traffic = 0, factor = 0;
  if (is_p2p) {
    traffic = s;
    factor = 1;
  } else {
    switch (f) {
      case Func::kAllReduce:
        traffic = s;
        factor = 2.0 * (n - 1) / n;
        break;
      case Func::kReduceScatter:
      case Func::kAllGather:
      case Func::kAllGatherV:
        // NCCL reports the per-rank count for AG/RS, so the moved total is S * n.
        traffic = s * n;
        factor = (n - 1) / n;
        break;
      case Func::kBroadcast:
      case Func::kReduce:
      case Func::kSend:
      case Func::kRecv:
      case Func::kSendRecv:
        traffic = s;
        factor = 1;
        break;
      default:
        return bw;
    }
  }
  const double t = static_cast<double>(exec_us) / 1e6;
  bw.algbw_gbs = traffic / 1e9 / t;
  bw.busbw_gbs = bw.algbw_gbs * factor;
  return bw;
}

ExecTiming ComputeExecTiming(std::span<const ChannelTiming> channels, uint64_t op_start_ns,
                             uint64_t op_complete_ns) noexcept {
  ExecTiming t;
  bool have_gpu = false, have_cpu = false;
  uint64_t gpu_max = 0, cpu_max = 0;
  uint64_t gs_min = UINT64_MAX, gs_max = 0, ge_min = UINT64_MAX, ge_max = 0;
  uint64_t cs_min = UINT64_MAX, ce_max = 0;
  for (const ChannelTiming& c : channels) {
    if (c.gpu_start != 0 && c.gpu_stop != 0 && c.gpu_stop > c.gpu_start) {
      uint64_t us = (c.gpu_stop - c.gpu_start) / 1000;
      if (!have_gpu || us > gpu_max) gpu_max = us;
      have_gpu = true;
    }
    if (c.cpu_start_ns != 0 && c.cpu_stop_ns != 0 && c.cpu_stop_ns >= c.cpu_start_ns) {
      uint64_t us = (c.cpu_stop_ns - c.cpu_start_ns) / 1000;
      if (!have_cpu || us > cpu_max) cpu_max = us;
      have_cpu = true;
    }
    if (c.gpu_start != 0) {
      gs_min = std::min(gs_min, c.gpu_start);
      gs_max = std::max(gs_max, c.gpu_start);
    }
    if (c.gpu_stop != 0) {
      ge_min = std::min(ge_min, c.gpu_stop);
      ge_max = std::max(ge_max, c.gpu_stop);
    }
    if (c.cpu_start_ns != 0) cs_min = std::min(cs_min, c.cpu_start_ns);
    if (c.cpu_stop_ns != 0) ce_max = std::max(ce_max, c.cpu_stop_ns);
  }
  if (have_gpu) {
    t.exec_us = gpu_max;
    t.source = TimingSource::kKernelGpu;
  } else if (have_cpu) {
    t.exec_us = cpu_max;
    t.source = TimingSource::kKernelCpu;
  } else {
    t.exec_us = op_complete_ns > op_start_ns ? (op_complete_ns - op_start_ns) / 1000 : 0;
    t.source = TimingSource::kCollectiveCpu;
  }
  t.kernel_start_ns = cs_min == UINT64_MAX ? 0 : cs_min;
  t.kernel_stop_ns = ce_max;
  if (gs_min != UINT64_MAX) t.ch_start_spread_us = static_cast<double>(gs_max - gs_min) / 1000.0;
  if (ge_min != UINT64_MAX) t.ch_stop_spread_us = static_cast<double>(ge_max - ge_min) / 1000.0;
  return t;
}

// ---------------------------------------------------------------------------------------------
// JSON helpers

void AppendJsonString(std::string_view s, std::string* out) { AppendEscapedJsonString(s, out); }

void AppendUint(uint64_t v, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

void AppendInt(int64_t v, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

void AppendDouble(double v, std::string* out) {
  if (std::isnan(v)) {
    out->append("\"nan\"");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "\"inf\"" : "\"-inf\"");
    return;
  }
  // Six decimals by integer arithmetic: the shortest-path formatter costs 70 ns a value, and a
  // record has five, most of the writer's time. printf rounds the exact binary value; the product
  // by 10^6 is within half an ulp of it, so the two agree wherever that product lies more than an
  // ulp from a half (the rest, and large values, take the exact path).
  const double a = std::fabs(v);
  if (a < 1e9) {
    const double scaled = a * 1e6;
    const double whole = std::floor(scaled);
    const double frac = scaled - whole;  // exact: both are below 2^53
    if (std::fabs(frac - 0.5) > std::nextafter(scaled, HUGE_VAL) - scaled) {
      uint64_t q = static_cast<uint64_t>(whole) + (frac > 0.5 ? 1 : 0);
      char buf[32];
      char* p = buf;
      if (std::signbit(v)) *p++ = '-';
      p = std::to_chars(p, buf + sizeof(buf), q / 1000000).ptr;
      *p++ = '.';
      uint64_t f = q % 1000000;
      for (int i = 5; i >= 0; --i, f /= 10) p[i] = static_cast<char>('0' + f % 10);
      out->append(buf, p + 6);
      return;
    }
  }
  char buf[352];  // %lf of DBL_MAX is 316 characters
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, 6);
  out->append(buf, r.ptr);
}

void AppendHexId(uint64_t v, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, 16);
  out->append("\"0x");
  out->append(buf, r.ptr);
  out->push_back('"');
}

namespace {

void AppendHeaderAndMetadata(const CommIdentity& comm, const ProcessIdentity& proc,
                             std::string_view version, uint64_t dump_ts_us, std::string* out) {
  out->append("{\"header\":{\"id\":");
  AppendHexId(comm.comm_id, out);
  out->append(",\"comm_name\":");
  AppendJsonString(comm.comm_name, out);
  out->append(",\"rank\":");
  AppendInt(comm.rank, out);
  out->append(",\"n_ranks\":");
  AppendInt(comm.nranks, out);
  out->append(",\"nnodes\":");
  AppendUint(static_cast<uint64_t>(comm.nnodes < 0 ? 0 : comm.nnodes), out);
  out->append("},\"metadata\":{\"inspector_output_format_version\":");
  AppendJsonString(version, out);
  out->append(",\"git_rev\":");
  AppendJsonString(proc.git_rev, out);
  out->append(",\"rec_mechanism\":\"nccl_profiler_interface\",\"dump_timestamp_us\":");
  AppendUint(dump_ts_us, out);
  out->append(",\"hostname\":");
  AppendJsonString(proc.hostname, out);
  out->append(",\"pid\":");
  AppendUint(proc.pid, out);
  out->push_back('}');
}

void AppendKV(const char* key, uint64_t v, std::string* out) {
  out->push_back('"');
  out->append(key);
  out->append("\":");
  AppendUint(v, out);
}

}  // namespace

std::string RecordHead(const CommIdentity& comm, const ProcessIdentity& proc, uint64_t dump_ts_us) {
  std::string head;
  AppendHeaderAndMetadata(comm, proc, "v4.0", dump_ts_us, &head);
  return head;
}

void FormatRecord(const CommIdentity& comm, const ProcessIdentity& proc, const CompletedRecord& r,
                  std::span<const ChannelTrace> traces, bool verbose, uint64_t dump_ts_us,
                  std::string* out) {
  FormatRecord(RecordHead(comm, proc, dump_ts_us), comm, proc, r, traces, verbose, out);
}

void FormatRecord(std::string_view head, const CommIdentity& comm, const ProcessIdentity& proc,
                  const CompletedRecord& r, std::span<const ChannelTrace> traces, bool verbose,
                  std::string* out) {
  out->append(head);
  const Bandwidth bw = ComputeBandwidth(r.func, r.is_p2p, r.msg_bytes, r.exec_us, comm.nranks);
  const char* p = r.is_p2p ? "p2p" : "coll";  // key prefix
  const std::string_view name = FuncName(r.func);
  out->append(r.is_p2p ? ",\"p2p_perf\":{\"p2p\":" : ",\"coll_perf\":{\"coll\":");
  AppendJsonString(name, out);
  out->append(",\"");
  out->append(p);
  out->append("_sn\":");
  AppendUint(r.sn, out);
  if (r.is_p2p) {
    out->append(",\"p2p_peer\":");
    AppendInt(r.peer, out);
  }
  out->append(",\"");
  out->append(p);
  out->append("_msg_size_bytes\":");
  AppendUint(r.msg_bytes, out);
  out->append(",\"");
  out->append(p);
  out->append("_exec_time_us\":");
  AppendUint(r.exec_us, out);
  out->append(",\"");
  out->append(p);
  out->append("_timing_source\":");
  AppendJsonString(TimingSourceName(r.source), out);
  out->append(",\"");
  out->append(p);
  out->append("_algobw_gbs\":");
  AppendDouble(bw.algbw_gbs, out);
  out->append(",\"");
  out->append(p);
  out->append("_busbw_gbs\":");
  AppendDouble(bw.busbw_gbs, out);
  if (r.user_tag != 0) {
    // As Inspector's user-tag variant writes it: the uint64 as a decimal string.
    out->append(",\"");
    out->append(p);
    out->append("_user_tag\":\"");
    AppendUint(r.user_tag, out);
    out->append("\"");
  }
  if (verbose) {
    out->append(",\"event_trace_sn\":{\"");
    out->append(p);
    out->append("_start_sn\":");
    AppendUint(r.start_sn, out);
    out->append(",\"");
    out->append(p);
    out->append("_stop_sn\":");
    AppendUint(r.stop_sn, out);
    out->append(",\"kernel_events\":[");
    for (size_t i = 0; i < traces.size(); ++i) {
      const ChannelTrace& t = traces[i];
      if (i) out->push_back(',');
      out->push_back('{');
      AppendKV("channel_id", t.channel_id, out);
      out->push_back(',');
      AppendKV("kernel_start_sn", t.start_sn, out);
      out->push_back(',');
      AppendKV("kernel_stop_sn", t.stop_sn, out);
      out->push_back(',');
      AppendKV("kernel_record_sn", t.record_sn, out);
      out->push_back('}');
    }
    out->append("]},\"event_trace_ts\":{\"");
    out->append(p);
    out->append("_start_ts\":");
    AppendUint(r.start_ns / 1000, out);
    out->append(",\"");
    out->append(p);
    out->append("_stop_ts\":");
    AppendUint(r.enqueue_ns / 1000, out);
    out->append(",\"kernel_events\":[");
    for (size_t i = 0; i < traces.size(); ++i) {
      const ChannelTrace& t = traces[i];
      if (i) out->push_back(',');
      out->push_back('{');
      AppendKV("channel_id", t.channel_id, out);
      out->push_back(',');
      AppendKV("kernel_start_ts", t.start_ns / 1000, out);
      out->push_back(',');
      AppendKV("kernel_stop_ts", t.stop_ns / 1000, out);
      out->push_back(',');
      AppendKV("kernel_record_ts", t.record_ns / 1000, out);
      out->push_back('}');
    }
    out->append("]}");
  }
  out->append("},\"collscope\":{\"v\":1,\"global_rank\":");
  AppendInt(proc.global_rank, out);
  out->append(",\"local_rank\":");
  AppendInt(proc.local_rank, out);
  out->append(",\"gpu\":");
  AppendInt(proc.gpu, out);
  char nb[16];
  out->append(",\"algo\":");
  AppendJsonString(UnpackName(r.algo, nb), out);
  out->append(",\"proto\":");
  AppendJsonString(UnpackName(r.proto, nb), out);
  out->append(",\"n_channels\":");
  AppendUint(r.n_channels, out);
  out->append(",\"start_ts_us\":");
  AppendUint(r.start_ns / 1000, out);
  out->append(",\"enqueue_ts_us\":");
  AppendUint(r.enqueue_ns / 1000, out);
  out->append(",\"kernel_start_ts_us\":");
  AppendUint(r.kernel_start_ns / 1000, out);
  out->append(",\"kernel_stop_ts_us\":");
  AppendUint(r.kernel_stop_ns / 1000, out);
  out->append(",\"queue_delay_us\":");
  double queue_delay = 0;
  if (r.kernel_start_ns != 0 && r.enqueue_ns != 0) {
    // Signed: the proxy thread can observe a channel start before the host recorded the enqueue.
    // Subtract in integers: wall-clock ns exceed a double's 53-bit mantissa.
    const int64_t d = static_cast<int64_t>(r.kernel_start_ns - r.enqueue_ns);
    queue_delay = static_cast<double>(d) / 1000.0;
  }
  AppendDouble(queue_delay, out);
  out->append(",\"ch_start_spread_us\":");
  AppendDouble(r.ch_start_spread_us, out);
  out->append(",\"ch_stop_spread_us\":");
  AppendDouble(r.ch_stop_spread_us, out);
  if (r.step >= 0) {
    // Only with the annotation library in the process.
    char nb[16];
    out->append(",\"step\":");
    AppendInt(r.step, out);
    out->append(",\"phase\":");
    const bool has_phase = (r.phase.w[0] & 0xff) != 0;
    AppendJsonString(has_phase ? UnpackName(r.phase, nb) : std::string_view(), out);
    out->append(",\"micro_batch\":");
    AppendInt(r.micro_batch, out);
  }
  out->append("}}\n");
}

void FormatDumpStats(const CommIdentity& comm, const ProcessIdentity& proc, const DumpStats& s,
                     uint64_t dump_ts_us, std::string* out) {
  AppendHeaderAndMetadata(comm, proc, "v4.1", dump_ts_us, out);
  out->append(",\"dump_stats\":{");
  AppendKV("coll_records", s.coll_records, out);
  out->push_back(',');
  AppendKV("coll_dropped_total", s.coll_dropped_total, out);
  out->push_back(',');
  AppendKV("coll_dropped_since_last_dump", s.coll_dropped_since_last, out);
  out->push_back(',');
  AppendKV("p2p_records", s.p2p_records, out);
  out->push_back(',');
  AppendKV("p2p_dropped_total", s.p2p_dropped_total, out);
  out->push_back(',');
  AppendKV("p2p_dropped_since_last_dump", s.p2p_dropped_since_last, out);
  out->append("}}\n");
}

}  // namespace collscope::capture
