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

namespace {

// Writes v as printf's "%lf" does (nan and inf as quoted strings) at p, which has room for 352
// characters; returns the end.
char* FormatDouble(double v, char* p) {
  if (std::isnan(v)) {
    std::memcpy(p, "\"nan\"", 5);
    return p + 5;
  }
  if (std::isinf(v)) {
    const std::string_view t = v > 0 ? "\"inf\"" : "\"-inf\"";
    std::memcpy(p, t.data(), t.size());
    return p + t.size();
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
      const uint64_t q = static_cast<uint64_t>(whole) + (frac > 0.5 ? 1 : 0);
      if (std::signbit(v)) *p++ = '-';
      p = std::to_chars(p, p + 24, q / 1000000).ptr;
      *p++ = '.';
      uint64_t f = q % 1000000;
      for (int i = 5; i >= 0; --i, f /= 10) p[i] = static_cast<char>('0' + f % 10);
      return p + 6;
    }
  }
  return std::to_chars(p, p + 352, v, std::chars_format::fixed, 6).ptr;  // %lf of DBL_MAX: 316
}

}  // namespace

void AppendDouble(double v, std::string* out) {
  char buf[352];
  out->append(buf, FormatDouble(v, buf));
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

namespace {

// A record's fields are written into a stack buffer and appended to the output once: appended one
// by one to the std::string, they held the writer to 1.8-1.9 M records/s against 2.4 M
// (bench/capture_hotpath_bench.cc, BM_CaptureWriterThroughput).
class Line {
 public:
  explicit Line(char* buf) : p_(buf) {}
  template <size_t N>
  void Lit(const char (&s)[N]) {
    std::memcpy(p_, s, N - 1);
    p_ += N - 1;
  }
  void Key(const char* prefix, std::string_view rest, bool first = false) {  // ,"<prefix><rest>
    if (!first) *p_++ = ',';
    *p_++ = '"';
    const size_t n = std::strlen(prefix);
    std::memcpy(p_, prefix, n);
    p_ += n;
    std::memcpy(p_, rest.data(), rest.size());
    p_ += rest.size();
  }
  void Uint(uint64_t v) { p_ = std::to_chars(p_, p_ + 24, v).ptr; }
  void Int(int64_t v) { p_ = std::to_chars(p_, p_ + 24, v).ptr; }
  void Double(double v) { p_ = FormatDouble(v, p_); }
  // Names of at most 15 bytes (ops, algorithms, protocols, phases, timing sources).
  void Name(std::string_view s) {
    s = s.substr(0, 15);
    if (IsPlainJson(s)) {
      *p_++ = '"';
      if (!s.empty()) std::memcpy(p_, s.data(), s.size());  // an empty view may hold no pointer
      p_ += s.size();
      *p_++ = '"';
      return;
    }
    std::string quoted;
    AppendEscapedJsonString(s, &quoted);
    std::memcpy(p_, quoted.data(), quoted.size());
    p_ += quoted.size();
  }
  void KV(const char* key, uint64_t v) {
    *p_++ = '"';
    const size_t n = std::strlen(key);
    std::memcpy(p_, key, n);
    p_ += n;
    Lit("\":");
    Uint(v);
  }
  void Char(char c) { *p_++ = c; }
  char* end() const { return p_; }

 private:
  char* p_;
};

// The most a record can take past its head: fixed text and numbers, five doubles of up to 352
// characters, five names escaped at up to 6 bytes each, and per channel trace two objects.
constexpr size_t kRecordBody = 1024 + 5 * 352 + 5 * 96;
constexpr size_t kTraceText = 2 * 160;

}  // namespace

void FormatRecord(std::string_view head, const CommIdentity& comm, const ProcessIdentity& proc,
                  const CompletedRecord& r, std::span<const ChannelTrace> traces, bool verbose,
                  std::string* out) {
  out->append(head);
  const size_t n_traces = verbose ? std::min<size_t>(traces.size(), kMaxChannels) : 0;
  char buf[kRecordBody + kMaxChannels * kTraceText];
  Line l(buf);
  const Bandwidth bw = ComputeBandwidth(r.func, r.is_p2p, r.msg_bytes, r.exec_us, comm.nranks);
  const char* p = r.is_p2p ? "p2p" : "coll";  // key prefix
  if (r.is_p2p)
    l.Lit(",\"p2p_perf\":{\"p2p\":");
  else
    l.Lit(",\"coll_perf\":{\"coll\":");
  l.Name(FuncName(r.func));
  l.Key(p, "_sn\":");
  l.Uint(r.sn);
  if (r.is_p2p) {
    l.Lit(",\"p2p_peer\":");
    l.Int(r.peer);
  }
  l.Key(p, "_msg_size_bytes\":");
  l.Uint(r.msg_bytes);
  l.Key(p, "_exec_time_us\":");
  l.Uint(r.exec_us);
  l.Key(p, "_timing_source\":");
  l.Name(TimingSourceName(r.source));
  l.Key(p, "_algobw_gbs\":");
  l.Double(bw.algbw_gbs);
  l.Key(p, "_busbw_gbs\":");
  l.Double(bw.busbw_gbs);
  if (r.user_tag != 0) {
    // As Inspector's user-tag variant writes it: the uint64 as a decimal string.
    l.Key(p, "_user_tag\":\"");
    l.Uint(r.user_tag);
    l.Char('"');
  }
  if (verbose) {
    l.Lit(",\"event_trace_sn\":{");
    l.Key(p, "_start_sn\":", /*first=*/true);
    l.Uint(r.start_sn);
    l.Key(p, "_stop_sn\":");
    l.Uint(r.stop_sn);
    l.Lit(",\"kernel_events\":[");
    for (size_t i = 0; i < n_traces; ++i) {
      const ChannelTrace& t = traces[i];
      if (i) l.Char(',');
      l.Char('{');
      l.KV("channel_id", t.channel_id);
      l.Char(',');
      l.KV("kernel_start_sn", t.start_sn);
      l.Char(',');
      l.KV("kernel_stop_sn", t.stop_sn);
      l.Char(',');
      l.KV("kernel_record_sn", t.record_sn);
      l.Char('}');
    }
    l.Lit("]},\"event_trace_ts\":{");
    l.Key(p, "_start_ts\":", /*first=*/true);
    l.Uint(r.start_ns / 1000);
    l.Key(p, "_stop_ts\":");
    l.Uint(r.enqueue_ns / 1000);
    l.Lit(",\"kernel_events\":[");
    for (size_t i = 0; i < n_traces; ++i) {
      const ChannelTrace& t = traces[i];
      if (i) l.Char(',');
      l.Char('{');
      l.KV("channel_id", t.channel_id);
      l.Char(',');
      l.KV("kernel_start_ts", t.start_ns / 1000);
      l.Char(',');
      l.KV("kernel_stop_ts", t.stop_ns / 1000);
      l.Char(',');
      l.KV("kernel_record_ts", t.record_ns / 1000);
      l.Char('}');
    }
    l.Lit("]}");
  }
  l.Lit("},\"collscope\":{\"v\":1,\"global_rank\":");
  l.Int(proc.global_rank);
  l.Lit(",\"local_rank\":");
  l.Int(proc.local_rank);
  l.Lit(",\"gpu\":");
  l.Int(proc.gpu);
  char nb[16];
  l.Lit(",\"algo\":");
  l.Name(UnpackName(r.algo, nb));
  l.Lit(",\"proto\":");
  l.Name(UnpackName(r.proto, nb));
  l.Lit(",\"n_channels\":");
  l.Uint(r.n_channels);
  l.Lit(",\"start_ts_us\":");
  l.Uint(r.start_ns / 1000);
  l.Lit(",\"enqueue_ts_us\":");
  l.Uint(r.enqueue_ns / 1000);
  l.Lit(",\"kernel_start_ts_us\":");
  l.Uint(r.kernel_start_ns / 1000);
  l.Lit(",\"kernel_stop_ts_us\":");
  l.Uint(r.kernel_stop_ns / 1000);
  l.Lit(",\"queue_delay_us\":");
  double queue_delay = 0;
  if (r.kernel_start_ns != 0 && r.enqueue_ns != 0) {
    // Signed: the proxy thread can observe a channel start before the host recorded the enqueue.
    // Subtract in integers: wall-clock ns exceed a double's 53-bit mantissa.
    const int64_t d = static_cast<int64_t>(r.kernel_start_ns - r.enqueue_ns);
    queue_delay = static_cast<double>(d) / 1000.0;
  }
  l.Double(queue_delay);
  l.Lit(",\"ch_start_spread_us\":");
  l.Double(r.ch_start_spread_us);
  l.Lit(",\"ch_stop_spread_us\":");
  l.Double(r.ch_stop_spread_us);
  if (r.step >= 0) {
    // Only with the annotation library in the process.
    l.Lit(",\"step\":");
    l.Int(r.step);
    l.Lit(",\"phase\":");
    const bool has_phase = (r.phase.w[0] & 0xff) != 0;
    l.Name(has_phase ? UnpackName(r.phase, nb) : std::string_view());
    l.Lit(",\"micro_batch\":");
    l.Int(r.micro_batch);
  }
  l.Lit("}}\n");
  out->append(buf, l.end());
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
