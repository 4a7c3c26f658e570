#include "core/inspector_parser.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/taxonomy.h"

namespace collscope {

bool ParseHexHash(std::string_view text, uint64_t* out) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
  if (text.empty() || text.size() > 16) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, 16);
  return ec == std::errc() && p == text.data() + text.size();
}

using simdjson::ondemand::json_type;
using simdjson::ondemand::object;
using simdjson::ondemand::value;

CollType DeriveCollType(int32_t n_ranks, int32_t nnodes) {
  if (n_ranks == 1) return CollType::kSingleRank;
  if (nnodes == 1) return CollType::kNvlinkOnly;
  if (n_ranks == nnodes) return CollType::kNicOnly;
  return CollType::kMixed;
}

std::string_view CollTypeName(CollType type) {
  switch (type) {
    case CollType::kSingleRank: return "single-rank";
    case CollType::kNvlinkOnly: return "nvlink-only";
    case CollType::kNicOnly: return "nic-only";
    case CollType::kMixed: return "mixed";
  }
  return "mixed";
}

int EnumCode(std::string_view enum_name, std::string_view v) {
  for (const EnumSpec& e : EnumTypes()) {
    if (e.name != enum_name) continue;
    for (size_t i = 0; i < e.values.size(); ++i)
      if (e.values[i] == v) return static_cast<int>(i);
    return -1;
  }
  return -1;
}

namespace {

// Small, hot lookups: linear scans over a handful of short strings beat hashing here.
struct EnumTable {
  explicit EnumTable(std::string_view name) {
    for (const EnumSpec& e : EnumTypes())
      if (e.name == name) values = e.values;
  }
  int Find(std::string_view v) const {
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i] == v) return static_cast<int>(i);
    return -1;
  }
  std::span<const std::string_view> values;
};

const EnumTable& Ops() { static const EnumTable t("coll_op"); return t; }
const EnumTable& TimingSources() { static const EnumTable t("timing_source"); return t; }
const EnumTable& Algos() { static const EnumTable t("nccl_algo"); return t; }
const EnumTable& Protos() { static const EnumTable t("nccl_proto"); return t; }

// The key of an object field as written (our keys never contain escapes).
std::string_view Key(simdjson::ondemand::field& field) {
  const char* start = field.key().raw();
  const char* end = static_cast<const char*>(std::memchr(start, '"', 64));
  return end ? std::string_view(start, end - start) : std::string_view();
}

// Field-reading helpers: each returns false with `reason` set on a malformed value.
class Reader {
 public:
  explicit Reader(std::string* reason) : reason_(reason) {}

  bool Fail(std::string_view key, std::string_view what) {
    *reason_ = std::string(key) + ": " + std::string(what);
    return false;
  }
  // Puts `where` before the field name of the reason a failed read left ("proxy_trace.").
  bool Within(std::string_view where) {
    reason_->insert(0, where);
    return false;
  }

  bool U64(value v, std::string_view key, uint64_t* out) {
    uint64_t u;
    if (v.get_uint64().get(u) == simdjson::SUCCESS) {
      *out = u;
      return true;
    }
    json_type t;
    if (v.type().get(t) != simdjson::SUCCESS) return Fail(key, "bad JSON value");
    if (t == json_type::number) {
      double d;
      if (v.get_double().get(d) != simdjson::SUCCESS) return Fail(key, "bad number");
      if (d < 0) return Fail(key, "impossible negative value " + std::to_string(d));
      if (!(d < 1.8e19)) return Fail(key, "number out of range");
      *out = static_cast<uint64_t>(d);  // writers that print 5663.0 mean an integer count
      return true;
    }
    if (t == json_type::string) {
      std::string_view s;
      if (v.get_string().get(s) != simdjson::SUCCESS) return Fail(key, "bad string");
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), u);
      if (ec == std::errc() && p == s.data() + s.size()) {
        *out = u;
        return true;
      }
      return Fail(key, "expected an unsigned integer, got \"" + std::string(s) + "\"");
    }
    return Fail(key, "expected an unsigned integer");
  }

  bool I32(value v, std::string_view key, int32_t* out) {
    int64_t i;
    if (v.get_int64().get(i) != simdjson::SUCCESS) return Fail(key, "expected an integer");
    if (i < INT32_MIN + 1 || i > INT32_MAX) return Fail(key, "integer out of range");
    *out = static_cast<int32_t>(i);
    return true;
  }

  // Doubles may be written as the string "nan" (stored as NULL).
  bool Double(value v, std::string_view key, double* out) {
    double d;
    if (v.get_double().get(d) == simdjson::SUCCESS) {
      *out = d;
      return true;
    }
    std::string_view s;
    if (v.get_string().get(s) == simdjson::SUCCESS) {
      if (s == "nan" || s == "-nan" || s == "NaN") {
        *out = kNullDouble;
        return true;
      }
      if (s == "inf" || s == "-inf") return Fail(key, "impossible value " + std::string(s));
    }
    return Fail(key, "expected a number");
  }

  bool String(value v, std::string_view key, std::string_view* out) {
    if (v.get_string().get(*out) != simdjson::SUCCESS) return Fail(key, "expected a string");
    return true;
  }

  // A string naming a value of `table`; names we do not know read as "unknown". With
  // `keep_existing`, an already set value wins (v4.2 fields over the collscope extras).
  bool Enum(value v, std::string_view key, const EnumTable& table, uint8_t* out,
            bool keep_existing = false) {
    std::string_view s;
    if (!String(v, key, &s)) return false;
    if (keep_existing && *out != kNullEnum) return true;
    int c = table.Find(s);
    *out = static_cast<uint8_t>(c < 0 ? table.Find("unknown") : c);
    return true;
  }

 private:
  std::string* reason_;
};

// Required-field bookkeeping: one bit per field we must see.
enum Need : uint32_t {
  kId = 1 << 0, kRank = 1 << 1, kNRanks = 1 << 2, kNNodes = 1 << 3,
  kVersion = 1 << 4, kDumpTs = 1 << 5, kHost = 1 << 6, kPid = 1 << 7,
  kOp = 1 << 8, kSn = 1 << 9, kSize = 1 << 10, kTime = 1 << 11, kSource = 1 << 12,
  kAlgBw = 1 << 13, kBusBw = 1 << 14, kPeer = 1 << 15,
};
constexpr uint32_t kNeedHeader = kId | kRank | kNRanks | kNNodes;
constexpr uint32_t kNeedMetadata = kVersion | kDumpTs | kHost | kPid;
constexpr uint32_t kNeedPerf = kOp | kSn | kSize | kTime | kAlgBw | kBusBw;

const char* MissingName(uint32_t missing) {
  static const char* names[] = {"header.id", "header.rank", "header.n_ranks", "header.nnodes",
      "metadata.inspector_output_format_version", "metadata.dump_timestamp_us",
      "metadata.hostname", "metadata.pid", "op", "sequence number", "msg_size_bytes",
      "exec_time_us", "timing_source", "algobw_gbs", "busbw_gbs", "p2p_peer"};
  for (int i = 0; i < 16; ++i)
    if (missing & (1u << i)) return names[i];
  return "field";
}

bool ParseKernelEvents(value v, bool ts, ParsedLine* out, Reader& r) {
  simdjson::ondemand::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS) return r.Fail("kernel_events", "expected a list");
  size_t i = 0;
  for (auto item : arr) {
    object ev;
    if (item.get_object().get(ev) != simdjson::SUCCESS)
      return r.Fail("kernel_events", "expected objects");
    if (out->kernel_events.size() <= i) out->kernel_events.emplace_back();
    KernelEvent& k = out->kernel_events[i];
    for (auto field_r : ev) {
      simdjson::ondemand::field field;
      if (std::move(field_r).get(field) != simdjson::SUCCESS) return r.Fail("line", "malformed JSON");
      std::string_view key = Key(field);
      value fv = field.value();
      bool ok = true;
      if (key == "channel_id") ok = r.I32(fv, key, &k.channel_id);
      else if (key == "kernel_start_sn" || key == "kernel_start_ts")
        ok = r.U64(fv, key, ts ? &k.start_ts_us : &k.start_sn);
      else if (key == "kernel_stop_sn" || key == "kernel_stop_ts")
        ok = r.U64(fv, key, ts ? &k.stop_ts_us : &k.stop_sn);
      else if (key == "kernel_record_sn" || key == "kernel_record_ts")
        ok = r.U64(fv, key, ts ? &k.record_ts_us : &k.record_sn);
      if (!ok) return false;
    }
    ++i;
  }
  if (out->kernel_events.size() < i) out->kernel_events.resize(i);
  return true;
}

bool ParseEventTrace(value v, bool ts, bool p2p, ParsedLine* out, Reader& r) {
  object o;
  if (v.get_object().get(o) != simdjson::SUCCESS) return r.Fail("event_trace", "expected object");
  for (auto field_r : o) {
    simdjson::ondemand::field field;
    if (std::move(field_r).get(field) != simdjson::SUCCESS) return r.Fail("line", "malformed JSON");
    std::string_view key = Key(field);
    value fv = field.value();
    bool ok = true;
    // Only the timestamps are kept of the collective-level counters; *_sn are callback counts.
    if (key == (p2p ? "p2p_start_ts" : "coll_start_ts")) ok = r.U64(fv, key, &out->start_ts_us);
    else if (key == (p2p ? "p2p_stop_ts" : "coll_stop_ts")) ok = r.U64(fv, key, &out->stop_ts_us);
    else if (key == "kernel_events") ok = ParseKernelEvents(fv, ts, out, r);
    if (!ok) return false;
  }
  return true;
}

bool ParseCollscope(value v, ParsedLine* out, Reader& r) {
  object o;
  if (v.get_object().get(o) != simdjson::SUCCESS) return r.Fail("collscope", "expected object");
  for (auto field_r : o) {
    simdjson::ondemand::field field;
    if (std::move(field_r).get(field) != simdjson::SUCCESS) return r.Fail("line", "malformed JSON");
    std::string_view key = Key(field);
    value fv = field.value();
    bool ok = true;
    if (key == "global_rank") ok = r.I32(fv, key, &out->global_rank);
    else if (key == "local_rank") ok = r.I32(fv, key, &out->local_rank);
    else if (key == "gpu") ok = r.I32(fv, key, &out->gpu);
    else if (key == "n_channels") ok = r.I32(fv, key, &out->n_channels);
    else if (key == "algo") ok = r.Enum(fv, key, Algos(), &out->algo, true);
    else if (key == "proto") ok = r.Enum(fv, key, Protos(), &out->proto, true);
    else if (key == "start_ts_us") {
      if (out->start_ts_us == kNullU64) ok = r.U64(fv, key, &out->start_ts_us);
    } else if (key == "enqueue_ts_us") ok = r.U64(fv, key, &out->enqueue_ts_us);
    else if (key == "kernel_start_ts_us") ok = r.U64(fv, key, &out->kernel_start_ts_us);
    else if (key == "kernel_stop_ts_us") ok = r.U64(fv, key, &out->kernel_stop_ts_us);
    else if (key == "queue_delay_us") ok = r.Double(fv, key, &out->queue_delay_us);
    else if (key == "ch_start_spread_us") ok = r.Double(fv, key, &out->ch_start_spread_us);
    else if (key == "ch_stop_spread_us") ok = r.Double(fv, key, &out->ch_stop_spread_us);
    else if (key == "step") {
      uint64_t step = 0;
      ok = r.U64(fv, key, &step);
      if (ok && step > static_cast<uint64_t>(INT64_MAX)) return r.Fail(key, "out of range");
      out->step = static_cast<int64_t>(step);
      out->annotated = true;
    } else if (key == "phase") {
      ok = r.String(fv, key, &out->phase);
      out->annotated = true;
    } else if (key == "micro_batch") {
      int32_t mb = 0;
      ok = r.I32(fv, key, &mb);
      out->micro_batch = mb < 0 ? kNullI32 : mb;
      out->annotated = true;
    }
    if (!ok) return false;
  }
  // Zero means "not observed" in the plugin's timestamps.
  for (uint64_t* ts : {&out->kernel_start_ts_us, &out->kernel_stop_ts_us, &out->enqueue_ts_us})
    if (*ts == 0) *ts = kNullU64;
  return true;
}

bool ParsePerf(value v, bool p2p, ParsedLine* out, uint32_t* seen, Reader& r) {
  object o;
  if (v.get_object().get(o) != simdjson::SUCCESS)
    return r.Fail(p2p ? "p2p_perf" : "coll_perf", "expected an object");
  out->record_kind = p2p ? RecordKind::kP2p : RecordKind::kColl;
  for (auto field_r : o) {
    simdjson::ondemand::field field;
    if (std::move(field_r).get(field) != simdjson::SUCCESS) return r.Fail("line", "malformed JSON");
    std::string_view key = Key(field);
    value fv = field.value();
    // Strip the "coll_" / "p2p_" prefix once so both record kinds share one dispatch.
    std::string_view k = key;
    if (!p2p && k.substr(0, 5) == "coll_") k.remove_prefix(5);
    else if (p2p && k.substr(0, 4) == "p2p_") k.remove_prefix(4);
    else if (p2p && k == "p2p") k = "coll";
    bool ok = true;
    std::string_view s;
    if (k == "coll" || (!p2p && key == "coll")) {
      ok = r.String(fv, key, &s);
      if (ok) {
        int c = Ops().Find(s);
        if (c < 0) return r.Fail(key, "unknown operation \"" + std::string(s) + "\"");
        out->op = static_cast<uint8_t>(c);
        *seen |= kOp;
      }
    } else if (k == "sn") {
      ok = r.U64(fv, key, &out->sn);
      *seen |= kSn;
    } else if (k == "msg_size_bytes") {
      ok = r.U64(fv, key, &out->msg_size_bytes);
      *seen |= kSize;
    } else if (k == "exec_time_us") {
      ok = r.U64(fv, key, &out->exec_time_us);
      *seen |= kTime;
    } else if (k == "timing_source") {
      ok = r.Enum(fv, key, TimingSources(), &out->timing_source);
      *seen |= kSource;
    } else if (k == "algobw_gbs") {
      ok = r.Double(fv, key, &out->algbw_gbs);
      *seen |= kAlgBw;
    } else if (k == "busbw_gbs") {
      ok = r.Double(fv, key, &out->busbw_gbs);
      *seen |= kBusBw;
    } else if (k == "peer") {
      ok = r.I32(fv, key, &out->peer);
      *seen |= kPeer;
    } else if (k == "algo") {
      ok = r.Enum(fv, key, Algos(), &out->algo);
    } else if (k == "proto") {
      ok = r.Enum(fv, key, Protos(), &out->proto);
    } else if (k == "user_tag") {
      // ABI v7's userProfilerTag, a uint64 written as a decimal string (Inspector's user-tag form).
      ok = r.String(fv, key, &s);
      uint64_t tag = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), tag);
      if (ok && (ec != std::errc() || end != s.data() + s.size() || s.empty()))
        return r.Fail(key, "not a decimal uint64 \"" + std::string(s) + "\"");
      out->user_tag = tag;
      out->has_user_tag = true;
      out->annotated = true;
    } else if (key == "event_trace_sn") {
      ok = ParseEventTrace(fv, false, p2p, out, r);
    } else if (key == "event_trace_ts") {
      ok = ParseEventTrace(fv, true, p2p, out, r);
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace

namespace {

// The header object: the communicator (id, comm_name) and this rank's place in it.
bool ParseHeader(value v, ParsedLine* out, uint32_t* seen, Reader& r) {
  object o;
  if (v.get_object().get(o) != simdjson::SUCCESS) return r.Fail("header", "expected an object");
  for (auto hf_r : o) {
    simdjson::ondemand::field hf;
    if (std::move(hf_r).get(hf) != simdjson::SUCCESS) return r.Fail("line", "malformed JSON");
    std::string_view hk = Key(hf);
    value hv = hf.value();
    bool ok = true;
    if (hk == "id") {
      ok = r.String(hv, "header.id", &out->comm_hash_text);
      if (ok && !ParseHexHash(out->comm_hash_text, &out->comm_hash))
        return r.Fail("header.id", "not a hex communicator id: \"" +
                                       std::string(out->comm_hash_text) + "\"");
      *seen |= kId;
    } else if (hk == "comm_name") {
      ok = r.String(hv, "header.comm_name", &out->comm_name);
      out->has_comm_name = ok;
    } else if (hk == "rank") {
      ok = r.I32(hv, "header.rank", &out->rank);
      *seen |= kRank;
    } else if (hk == "n_ranks") {
      ok = r.I32(hv, "header.n_ranks", &out->n_ranks);
      *seen |= kNRanks;
    } else if (hk == "nnodes") {
      ok = r.I32(hv, "header.nnodes", &out->nnodes);
      *seen |= kNNodes;
    }
    if (!ok) return false;
  }
  return true;
}

// The metadata object: the format version, when the dump was written, and by which process.
bool ParseMetadata(value v, ParsedLine* out, uint32_t* seen, Reader& r) {
  object o;
  if (v.get_object().get(o) != simdjson::SUCCESS) return r.Fail("metadata", "expected an object");
  for (auto mf_r : o) {
    simdjson::ondemand::field mf;
    if (std::move(mf_r).get(mf) != simdjson::SUCCESS) return r.Fail("line", "malformed JSON");
    std::string_view mk = Key(mf);
    value mv = mf.value();
    bool ok = true;
    if (mk == "inspector_output_format_version") {
      ok = r.String(mv, mk, &out->format_version);
      *seen |= kVersion;
    } else if (mk == "git_rev") {
      ok = r.String(mv, mk, &out->git_rev);
    } else if (mk == "rec_mechanism") {
      ok = r.String(mv, mk, &out->rec_mechanism);
    } else if (mk == "dump_timestamp_us") {
      ok = r.U64(mv, mk, &out->dump_ts_us);
      *seen |= kDumpTs;
    } else if (mk == "hostname") {
      ok = r.String(mv, mk, &out->hostname);
      *seen |= kHost;
    } else if (mk == "pid") {
      ok = r.U64(mv, mk, &out->pid);
      *seen |= kPid;
    }
    if (!ok) return false;
  }
  return true;
}

// The dump_stats object: how many records the ring buffers held and dropped.
bool ParseDumpStats(value v, ParsedLine* out, Reader& r) {
  object o;
  if (v.get_object().get(o) != simdjson::SUCCESS) return r.Fail("dump_stats", "expected an object");
  for (auto sf_r : o) {
    simdjson::ondemand::field sf;
    if (std::move(sf_r).get(sf) != simdjson::SUCCESS) return r.Fail("line", "malformed JSON");
    std::string_view sk = Key(sf);
    value sv = sf.value();
    uint64_t* dst = sk == "coll_records"                   ? &out->coll_records
                    : sk == "coll_dropped_total"           ? &out->coll_dropped_total
                    : sk == "coll_dropped_since_last_dump" ? &out->coll_dropped_since_last_dump
                    : sk == "p2p_records"                  ? &out->p2p_records
                    : sk == "p2p_dropped_total"            ? &out->p2p_dropped_total
                    : sk == "p2p_dropped_since_last_dump"  ? &out->p2p_dropped_since_last_dump
                    : sk == "proxy_records"                ? &out->proxy_records
                    : sk == "proxy_dropped_total"          ? &out->proxy_dropped_total
                    : sk == "proxy_dropped_since_last_dump"
                        ? &out->proxy_dropped_since_last_dump
                        : nullptr;
    if (dst && !r.U64(sv, sk, dst)) return false;
    out->has_proxy_records |= dst == &out->proxy_records;
  }
  return true;
}

// Values the store holds but the analyses cannot (a sum overflows, a cast to BIGINT fails) are
// refused here, so that one poison value cannot fail `summary`, `report` or `diagnose` for a
// whole store later. The limits are far beyond any real job.
constexpr uint64_t kMaxTimestampUs = uint64_t{1} << 53;  // year 2255; exact in a double
constexpr uint64_t kMaxExecTimeUs = uint64_t{1} << 40;   // 12.7 days for one operation
constexpr uint64_t kMaxMsgSizeBytes = uint64_t{1} << 50;  // 1 PiB in one operation
constexpr uint64_t kMaxCounter = uint64_t{1} << 62;       // sequence numbers, dump_stats counters
constexpr uint64_t kMaxPid = (uint64_t{1} << 31) - 1;
constexpr int32_t kMaxRanks = 1 << 24;  // ranks in one communicator
constexpr int32_t kMaxChannelId = 1 << 16;  // NCCL has at most 64 channels per communicator

bool InRange(const ParsedLine& l, Reader& r) {
  auto check = [&](const char* field, uint64_t v, uint64_t max, const char* what) {
    if (v <= max) return true;
    return r.Fail(field, std::to_string(v) + " is out of range (more than " + std::to_string(max) +
                             " " + what + ")");
  };
  // Optional fields use kNullU64 for "absent".
  auto optional = [&](const char* field, uint64_t v, uint64_t max, const char* what) {
    return v == kNullU64 || check(field, v, max, what);
  };
  if (l.n_ranks > kMaxRanks)
    return r.Fail("header.n_ranks", std::to_string(l.n_ranks) + " is out of range (more than " +
                                        std::to_string(kMaxRanks) + " ranks in one communicator)");
  bool ok = check("metadata.dump_timestamp_us", l.dump_ts_us, kMaxTimestampUs, "us since 1970") &&
            check("metadata.pid", l.pid, kMaxPid, "for a process id") &&
            check("exec_time_us", l.exec_time_us, kMaxExecTimeUs, "us for one operation") &&
            check("msg_size_bytes", l.msg_size_bytes, kMaxMsgSizeBytes, "bytes for one operation") &&
            check("sequence number", l.sn, kMaxCounter, "") &&
            optional("event_trace_ts", l.start_ts_us, kMaxTimestampUs, "us since 1970") &&
            optional("event_trace_ts", l.stop_ts_us, kMaxTimestampUs, "us since 1970") &&
            optional("collscope.enqueue_ts_us", l.enqueue_ts_us, kMaxTimestampUs, "us since 1970") &&
            optional("collscope.kernel_start_ts_us", l.kernel_start_ts_us, kMaxTimestampUs, "us since 1970") &&
            optional("collscope.kernel_stop_ts_us", l.kernel_stop_ts_us, kMaxTimestampUs, "us since 1970");
  for (uint64_t v : {l.coll_records, l.coll_dropped_total, l.coll_dropped_since_last_dump,
                     l.p2p_records, l.p2p_dropped_total, l.p2p_dropped_since_last_dump, l.proxy_records})
    ok = ok && check("dump_stats", v, kMaxCounter, "");
  for (uint64_t v : {l.proxy_dropped_total, l.proxy_dropped_since_last_dump})
    ok = ok && optional("dump_stats", v, kMaxCounter, "");
  for (const KernelEvent& k : l.kernel_events)
    for (uint64_t v : {k.start_ts_us, k.stop_ts_us, k.record_ts_us})
      ok = ok && optional("kernel_events", v, kMaxTimestampUs, "us since 1970");
  return ok;
}

// proxy_trace fields, each bounded as it is read; a reason names the field where it sits
// ("proxy_trace.steps[].wire_us").
class ProxyFields {
 public:
  ProxyFields(Reader& r, std::string_view where) : r_(r), where_(where) {}

  bool Fail(std::string_view key, std::string_view what) {
    r_.Fail(key, what);
    return r_.Within(where_);
  }
  bool U64(value v, std::string_view key, uint64_t max, const char* what, uint64_t* out) {
    if (!r_.U64(v, key, out)) return r_.Within(where_);
    if (*out <= max) return true;
    return Fail(key, std::to_string(*out) + " is out of range (more than " + std::to_string(max) +
                         " " + what + ")");
  }
  bool I32(value v, std::string_view key, int32_t max, int32_t* out) {
    if (!r_.I32(v, key, out)) return r_.Within(where_);
    if (*out >= 0 && *out <= max) return true;
    return Fail(key, std::to_string(*out) + " is out of range (0.." + std::to_string(max) + ")");
  }
  // Durations are written as integers in practice; a float is taken as written, "nan" as absent.
  bool Duration(value v, std::string_view key, double* out) {
    if (!r_.Double(v, key, out)) return r_.Within(where_);
    if (std::isnan(*out)) return true;
    if (*out < 0) return Fail(key, "impossible negative duration");
    if (*out <= static_cast<double>(kMaxExecTimeUs)) return true;
    char text[32];
    std::snprintf(text, sizeof text, "%g", *out);
    return Fail(key, std::string(text) + " is out of range (more than " +
                         std::to_string(kMaxExecTimeUs) + " us)");
  }
  bool Timestamp(value v, std::string_view key, uint64_t* out) {
    return U64(v, key, kMaxTimestampUs, "us since 1970", out);
  }
  bool Counter(value v, std::string_view key, uint64_t* out) {
    return U64(v, key, kMaxCounter, "for a counter", out);
  }
  bool Bytes(value v, std::string_view key, uint64_t* out) {
    return U64(v, key, kMaxMsgSizeBytes, "bytes", out);
  }
  // event_trace_ts, whose fields sit at `where`: the timestamps a column keeps (null pointers:
  // not kept here). The others (the phase entries the durations come from) are not stored.
  bool Timestamps(value v, std::string_view where, uint64_t* op_start, uint64_t* op_stop,
                  uint64_t* step_stop) {
    object o;
    if (v.get_object().get(o) != simdjson::SUCCESS)
      return Fail("event_trace_ts", "expected an object");
    ProxyFields fields(r_, where);
    for (auto field_r : o) {
      simdjson::ondemand::field field;
      if (std::move(field_r).get(field) != simdjson::SUCCESS)
        return r_.Fail("line", "malformed JSON");
      std::string_view key = Key(field);
      uint64_t* dst = key == "proxy_op_start_ts"    ? op_start
                      : key == "proxy_op_stop_ts"   ? op_stop
                      : key == "proxy_step_stop_ts" ? step_stop
                                                    : nullptr;
      if (dst && !fields.Timestamp(field.value(), key, dst)) return false;
    }
    return true;
  }
  // One of a step's own keys; `*matched` is false for a key a step does not have.
  bool StepField(std::string_view key, value v, ProxyStep* s, bool* matched) {
    *matched = true;
    if (key == "proxy_step_sn") return Counter(v, key, &s->proxy_step_sn);
    if (key == "step") return I32(v, key, INT32_MAX, &s->step);
    if (key == "gpu_produce_us") return Duration(v, key, &s->gpu_produce_us);
    if (key == "peer_credit_us") return Duration(v, key, &s->peer_credit_us);
    if (key == "wire_us") return Duration(v, key, &s->wire_us);
    if (key == "flush_us") return Duration(v, key, &s->flush_us);
    if (key == "gpu_consume_us") return Duration(v, key, &s->gpu_consume_us);
    *matched = false;
    return true;
  }

 private:
  Reader& r_;
  std::string_view where_;
};

bool ParseProxySteps(value v, std::vector<ProxyStep>* steps, Reader& r) {
  ProxyFields f(r, "proxy_trace.steps[].");
  simdjson::ondemand::array arr;
  if (v.get_array().get(arr) != simdjson::SUCCESS)
    return r.Fail("proxy_trace.steps", "expected a list");
  for (auto item : arr) {
    object o;
    if (item.get_object().get(o) != simdjson::SUCCESS)
      return r.Fail("proxy_trace.steps", "expected objects");
    ProxyStep& s = steps->emplace_back();
    for (auto field_r : o) {
      simdjson::ondemand::field field;
      if (std::move(field_r).get(field) != simdjson::SUCCESS)
        return r.Fail("line", "malformed JSON");
      std::string_view key = Key(field);
      value fv = field.value();
      bool ok = true, matched = false;
      if (key == "trans_size_bytes")
        ok = f.Bytes(fv, key, &s.trans_size_bytes);
      else if (key == "total_us")
        ok = f.Duration(fv, key, &s.total_us);
      else if (key == "event_trace_ts")
        ok = f.Timestamps(fv, "proxy_trace.steps[].event_trace_ts.", nullptr, nullptr,
                          &s.stop_ts_us);
      else
        ok = f.StepField(key, fv, &s, &matched);
      if (!ok) return false;
    }
  }
  return true;
}

// A proxy_trace object: an op-level record (proxy_op_start, proxy_op_segment, proxy_op) or a
// flat proxy_step. Keys are read by name in any order; keys not known here are skipped.
bool ParseProxy(value v, ProxyRecord* t, std::vector<ProxyStep>* steps, Reader& r) {
  ProxyFields f(r, "proxy_trace.");
  object o;
  if (v.get_object().get(o) != simdjson::SUCCESS)
    return r.Fail("proxy_trace", "expected an object");
  bool typed = false;
  ProxyStep flat;  // a flat proxy_step's own keys; trans_size_bytes and total_us are shared
  for (auto field_r : o) {
    simdjson::ondemand::field field;
    if (std::move(field_r).get(field) != simdjson::SUCCESS) return r.Fail("line", "malformed JSON");
    std::string_view key = Key(field);
    value fv = field.value();
    std::string_view s;
    bool ok = true, matched = false;
    if (key == "record_type") {
      ok = r.String(fv, "proxy_trace.record_type", &s);
      if (!ok) return false;
      auto it = std::find(std::begin(kProxyRecordTypes), std::end(kProxyRecordTypes), s);
      if (it == std::end(kProxyRecordTypes))
        return r.Fail("proxy_trace.record_type",
                      "unknown proxy record type \"" + std::string(s) + "\"");
      t->record_type = static_cast<ProxyRecordType>(it - std::begin(kProxyRecordTypes));
      typed = true;
    } else if (key == "parent_type") {
      ok = r.String(fv, "proxy_trace.parent_type", &s);
      if (!ok) return false;
      // Parents collscope does not know read as "unknown", as NCCL names an unknown parent.
      auto it = std::find(std::begin(kProxyParentTypes), std::end(kProxyParentTypes), s);
      if (it == std::end(kProxyParentTypes)) it = std::end(kProxyParentTypes) - 1;
      t->parent_type = static_cast<uint8_t>(it - std::begin(kProxyParentTypes));
    } else if (key == "direction") {
      ok = r.String(fv, "proxy_trace.direction", &s);
      if (!ok) return false;
      auto it = std::find(std::begin(kProxyDirections), std::end(kProxyDirections), s);
      if (it == std::end(kProxyDirections))
        return r.Fail("proxy_trace.direction",
                      "expected \"send\" or \"recv\", got \"" + std::string(s) + "\"");
      t->direction = static_cast<uint8_t>(it - std::begin(kProxyDirections));
    } else if (key == "record_sn") {
      ok = f.Counter(fv, key, &t->record_sn);
    } else if (key == "parent_sn") {
      ok = f.Counter(fv, key, &t->parent_sn);
    } else if (key == "proxy_op_sn") {
      ok = f.Counter(fv, key, &t->proxy_op_sn);
    } else if (key == "rank") {
      ok = f.I32(fv, key, kMaxRanks - 1, &t->rank);  // checked against n_ranks once it is known
    } else if (key == "channel_id") {
      ok = f.I32(fv, key, kMaxChannelId, &t->channel_id);
    } else if (key == "peer") {
      ok = f.I32(fv, key, kMaxRanks - 1, &t->peer);
    } else if (key == "n_steps") {
      ok = f.Counter(fv, key, &t->n_steps);
    } else if (key == "chunk_size_bytes") {
      ok = f.Bytes(fv, key, &t->chunk_size_bytes);
    } else if (key == "n_steps_completed") {
      ok = f.Counter(fv, key, &t->n_steps_completed);
    } else if (key == "n_steps_dropped") {
      ok = f.Counter(fv, key, &t->n_steps_dropped);
    } else if (key == "trans_size_bytes") {
      ok = f.Bytes(fv, key, &t->trans_size_bytes);
    } else if (key == "total_us") {
      ok = f.Duration(fv, key, &t->total_us);
    } else if (key == "event_trace_ts") {
      ok = f.Timestamps(fv, "proxy_trace.event_trace_ts.", &t->start_ts_us, &t->stop_ts_us,
                        &flat.stop_ts_us);
    } else if (key == "steps") {
      ok = ParseProxySteps(fv, steps, r);
    } else {
      ok = f.StepField(key, fv, &flat, &matched);
    }
    if (!ok) return false;
  }
  if (!typed) return r.Fail("proxy_trace.record_type", "missing field");
  if (t->record_type == ProxyRecordType::kStep) {
    flat.trans_size_bytes = t->trans_size_bytes;
    flat.total_us = t->total_us;
    steps->clear();
    steps->push_back(flat);
  }
  return true;
}

}  // namespace

namespace {

// The header and metadata fields: what a marker line lends the lines of its batch.
constexpr std::string_view ParsedLine::*kContextText[] = {
    &ParsedLine::comm_hash_text, &ParsedLine::comm_name, &ParsedLine::format_version,
    &ParsedLine::git_rev, &ParsedLine::rec_mechanism, &ParsedLine::hostname};

void CopyContext(const ParsedLine& from, ParsedLine* to) {
  for (auto field : kContextText) to->*field = from.*field;
  to->has_comm_name = from.has_comm_name;
  to->comm_hash = from.comm_hash;
  to->dump_ts_us = from.dump_ts_us;
  to->pid = from.pid;
  to->rank = from.rank;
  to->n_ranks = from.n_ranks;
  to->nnodes = from.nnodes;
}

}  // namespace

void InspectorLineParser::Remember(const ParsedLine& l) {
  // Built in place: the context's views point into marker_.text, which a move would invalidate.
  marker_ = Marker{};
  marker_.active = true;
  std::string_view v = l.format_version;
  marker_.counts_lines = v != "v4.0" && v != "v4.1" && v != "v4.2";
  CopyContext(l, &marker_.context);
  static_assert(std::extent_v<decltype(marker_.text)> == std::size(kContextText));
  for (size_t i = 0; i < std::size(kContextText); ++i) {
    marker_.text[i] = std::string(l.*kContextText[i]);
    marker_.context.*kContextText[i] = marker_.text[i];
  }
  marker_.coll_left = l.coll_records;
  marker_.p2p_left = l.p2p_records;
  marker_.proxy_left = l.proxy_records;
}

bool InspectorLineParser::Parse(const char* data, size_t len, size_t readable, ParsedLine* out,
                                std::string* reason) {
  Reader r(reason);
  // Every field starts from its default: a value of an earlier line (a git_rev, a dump_stats
  // counter) never carries over, and no view into an earlier line's buffer survives.
  std::vector<KernelEvent> events = std::move(out->kernel_events);
  std::vector<ProxyStep> steps = std::move(out->proxy_steps);
  events.clear();
  steps.clear();
  *out = ParsedLine{};
  out->kernel_events = std::move(events);
  out->proxy_steps = std::move(steps);

  simdjson::ondemand::document doc;
  if (parser_.iterate(data, len, readable).get(doc) != simdjson::SUCCESS)
    return r.Fail("line", "not JSON");
  object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) return r.Fail("line", "not a JSON object");

  uint32_t seen = 0;
  bool has_perf = false, has_stats = false, has_context = false, has_proxy = false;
  bool is_p2p = false;
  int keys = 0;
  for (auto field_result : root) {
    ++keys;
    simdjson::ondemand::field field;
    if (std::move(field_result).get(field) != simdjson::SUCCESS) return r.Fail("line", "malformed JSON");
    std::string_view key = Key(field);
    value v = field.value();
    if (key == "header") {
      has_context = true;
      if (!ParseHeader(v, out, &seen, r)) return false;
    } else if (key == "metadata") {
      has_context = true;
      if (!ParseMetadata(v, out, &seen, r)) return false;
    } else if (key == "coll_perf" || key == "p2p_perf") {
      is_p2p = key == "p2p_perf";
      has_perf = true;
      if (!ParsePerf(v, is_p2p, out, &seen, r)) return false;
    } else if (key == "dump_stats") {
      has_stats = true;
      if (!ParseDumpStats(v, out, r)) return false;
    } else if (key == "collscope") {
      if (!ParseCollscope(v, out, r)) return false;
    } else if (key == "proxy_trace") {
      has_proxy = true;
      if (!ParseProxy(v, &out->proxy, &out->proxy_steps, r)) return false;
    }
  }
  // Past the object's closing brace there must be nothing: `{...}{...}` is two records glued.
  const char* rest = nullptr;
  if (doc.current_location().get(rest) == simdjson::SUCCESS)
    return r.Fail("line", "more than one JSON value on the line");

  if (!has_context) {
    // One record of a v4.3/v4.4 batch: its header and metadata are its marker's.
    if (keys != 1 || !(has_perf || has_proxy))
      return r.Fail("line", "no header or metadata, and not a single coll_perf, p2p_perf or "
                            "proxy_trace record of a v4.3/v4.4 batch");
    const char* what = has_proxy ? "proxy_trace" : is_p2p ? "p2p_perf" : "coll_perf";
    if (!marker_.active)
      return r.Fail("line", std::string(what) + " record with no marker line before it (v4.3/v4.4 "
                    "streams carry header and metadata only on the marker; was the file split "
                    "or read from the middle of a batch?)");
    // A batch lists its collectives, then its P2P records, then its proxy records.
    uint64_t& left = has_proxy ? marker_.proxy_left : is_p2p ? marker_.p2p_left : marker_.coll_left;
    if (left == 0)
      return r.Fail("line", std::string("more ") + what + " records than the marker announced");
    --left;
    CopyContext(marker_.context, out);
    seen |= kNeedHeader | kNeedMetadata;
  } else {
    out->batch_lines_missing = marker_.owed();
    marker_.active = false;
  }
  if (has_proxy && (has_perf || has_stats))
    return r.Fail("line", "a proxy_trace record together with coll_perf, p2p_perf or dump_stats");

  // A proxy_trace line with its own header and metadata (the v4.3 proxy draft) is checked as
  // any self-contained line; one of a batch has its marker's, checked with the marker.
  uint32_t need = kNeedHeader | kNeedMetadata;
  if (has_perf) need |= kNeedPerf | (is_p2p ? uint32_t{kPeer} : 0u);
  if (uint32_t missing = need & ~seen) return r.Fail(MissingName(missing), "missing field");
  if (!has_perf && !has_stats && !has_proxy)
    return r.Fail("line", "no coll_perf, p2p_perf or dump_stats");
  if (has_perf && !(seen & kSource)) {
    // NVIDIA's README example leaves coll_timing_source out; released builds always write it.
    out->timing_source = kNullEnum;
    out->timing_source_missing = true;
  }
  std::string_view v = out->format_version;
  if (v != "v4.0" && v != "v4.1" && v != "v4.2" && v != "v4.3" && v != "v4.4")
    return r.Fail("metadata.inspector_output_format_version",
                  "unknown format version \"" + std::string(v) + "\"");
  if (out->n_ranks <= 0) return r.Fail("header.n_ranks", "impossible value " + std::to_string(out->n_ranks));
  if (out->nnodes <= 0 || out->nnodes > out->n_ranks)
    return r.Fail("header.nnodes", "impossible value " + std::to_string(out->nnodes) +
                                       " for n_ranks " + std::to_string(out->n_ranks));
  if (out->rank < 0 || out->rank >= out->n_ranks)
    return r.Fail("header.rank", "rank " + std::to_string(out->rank) + " outside 0.." +
                                     std::to_string(out->n_ranks - 1));
  if (!InRange(*out, r)) return false;
  if (has_proxy) {
    ProxyRecord& t = out->proxy;
    if (t.rank == kNullI32) t.rank = out->rank;  // only final proxy_op records carry their own
    if (t.rank >= out->n_ranks)
      return r.Fail("proxy_trace.rank", "rank " + std::to_string(t.rank) + " outside 0.." +
                                            std::to_string(out->n_ranks - 1));
    if (t.peer != kNullI32 && t.peer >= out->n_ranks)
      return r.Fail("proxy_trace.peer", "peer " + std::to_string(t.peer) + " outside 0.." +
                                            std::to_string(out->n_ranks - 1));
    out->kind = ParsedLine::Kind::kProxy;
    return true;
  }
  if (!has_perf) {
    out->kind = ParsedLine::Kind::kDumpStats;
    Remember(*out);
    return true;
  }
  if (out->algbw_gbs < 0 || out->busbw_gbs < 0)
    return r.Fail(is_p2p ? "p2p_busbw_gbs" : "coll_busbw_gbs", "impossible negative bandwidth");
  if (is_p2p && (out->peer < 0 || out->peer >= out->n_ranks))
    return r.Fail("p2p_perf.p2p_peer", "peer " + std::to_string(out->peer) + " outside 0.." +
                                           std::to_string(out->n_ranks - 1));
  if (!out->kernel_events.empty() && out->n_channels == kNullI32)
    out->n_channels = static_cast<int32_t>(out->kernel_events.size());
  return true;
}

}  // namespace collscope
