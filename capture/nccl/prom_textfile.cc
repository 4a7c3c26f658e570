#include "capture/nccl/prom_textfile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

namespace collscope::capture {
namespace {

constexpr const char* kUnits[] = {"B", "KB", "MB", "GB", "TB"};
constexpr int kNumUnits = 5;

// Unit index and floor for a non-zero size (see PromSizeBucket).
void SizeBucket(uint64_t bytes, uint8_t* unit, uint16_t* floor) {
  int u = 0;
  while (u + 1 < kNumUnits && bytes >= (uint64_t{1} << (10 * (u + 1)))) ++u;
  const uint64_t f = bytes >> (10 * u);
  *unit = static_cast<uint8_t>(u);
  // Only the top unit can exceed 1023 (sizes of 1 PiB and more): keep them in one bucket.
  *floor = static_cast<uint16_t>(std::min<uint64_t>(f, 65534));
}

std::string BucketLabel(bool zero, uint8_t unit, uint16_t floor) {
  if (zero) return "0B";
  return std::to_string(floor) + "-" + std::to_string(floor + 1) + kUnits[unit];
}

void AppendLabel(const char* name, std::string_view value, bool first, std::string* out) {
  if (!first) out->push_back(',');
  out->append(name);
  out->append("=\"");
  AppendPromLabelValue(value, out);
  out->push_back('"');
}

void AppendHelpType(const char* name, const char* type, const char* help, std::string* out) {
  out->append("# HELP ").append(name).push_back(' ');
  out->append(help).push_back('\n');
  out->append("# TYPE ").append(name).push_back(' ');
  out->append(type).push_back('\n');
}

// Inspector's series print "%.6g"; collscope's own print 15 significant digits (timestamps and
// counters stay exact).
void AppendSample(const char* name, const std::string& labels, double v, std::string* out) {
  out->append(name);
  out->push_back('{');
  out->append(labels);
  out->append("} ");
  AppendPromValue(v, out, std::strncmp(name, "nccl_", 5) == 0 ? 6 : 15);
  out->push_back('\n');
}

}  // namespace

std::string PromSizeBucket(uint64_t bytes) {
  if (bytes == 0) return "0B";
  uint8_t unit;
  uint16_t floor;
  SizeBucket(bytes, &unit, &floor);
  return BucketLabel(false, unit, floor);
}

void AppendPromLabelValue(std::string_view v, std::string* out) {
  for (char ch : v) {
    if (ch == '\\') {
      out->append("\\\\");
    } else if (ch == '"') {
      out->append("\\\"");
    } else if (ch == '\n') {
      out->append("\\n");
    } else {
      out->push_back(ch);
    }
  }
}

void AppendPromValue(double v, std::string* out, int digits) {
  if (std::isnan(v)) {
    out->append("NaN");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
  } else {
    char b[32];
    const int n = std::snprintf(b, sizeof(b), "%.*g", digits, v);
    if (n > 0) out->append(b, static_cast<size_t>(std::min<int>(n, sizeof(b) - 1)));
  }
}

bool PromTextfile::Key::operator==(const Key& o) const {
  return group == o.group && func == o.func && is_p2p == o.is_p2p && unit == o.unit &&
         zero == o.zero && floor == o.floor && algo.w[0] == o.algo.w[0] &&
         algo.w[1] == o.algo.w[1] && proto.w[0] == o.proto.w[0] && proto.w[1] == o.proto.w[1];
}

size_t PromTextfile::KeyHash::operator()(const Key& k) const noexcept {
  uint64_t h = (uint64_t{k.group} << 32) ^ (uint64_t{static_cast<uint8_t>(k.func)} << 24) ^
               (uint64_t{k.is_p2p} << 23) ^ (uint64_t{k.zero} << 22) ^ (uint64_t{k.unit} << 16) ^
               k.floor;
  for (uint64_t w : {k.algo.w[0], k.algo.w[1], k.proto.w[0], k.proto.w[1]}) {
    h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return static_cast<size_t>(h);
}

PromTextfile::PromTextfile(PromProcessLabels labels, uint32_t max_buckets,
                           bool require_kernel_timing, bool dump_stats)
    : labels_(std::move(labels)),
      max_buckets_(max_buckets == 0 ? 1 : max_buckets),
      require_kernel_timing_(require_kernel_timing),
      dump_stats_(dump_stats) {}

uint32_t PromTextfile::CommGroup(const CommIdentity& comm) {
  for (size_t i = 0; i < groups_.size(); ++i) {
    const Group& g = groups_[i];
    if (g.comm_name == comm.comm_name && g.nranks == comm.nranks && g.nnodes == comm.nnodes)
      return static_cast<uint32_t>(i);
  }
  groups_.push_back({comm.comm_name, comm.nranks, comm.nnodes});
  return static_cast<uint32_t>(groups_.size() - 1);
}

void PromTextfile::AddDrops(uint64_t coll, uint64_t p2p) {
  coll_dropped_ += coll;
  p2p_dropped_ += p2p;
}

void PromTextfile::Add(uint32_t group, const CompletedRecord& r) {
  (r.is_p2p ? p2p_total_ : coll_total_)++;
  if (group >= groups_.size()) return;
  if (require_kernel_timing_ && r.source != TimingSource::kKernelGpu) {
    ++excluded_timing_;
    return;
  }
  Key k;
  k.group = group;
  k.func = r.func;
  k.is_p2p = r.is_p2p;
  k.zero = r.msg_bytes == 0;
  if (!k.zero) SizeBucket(r.msg_bytes, &k.unit, &k.floor);
  if (!r.is_p2p) {
    k.algo = r.algo;
    k.proto = r.proto;
  }
  auto it = window_.find(k);
  if (it == window_.end()) {
    if (window_.size() >= max_buckets_) {
      ++excluded_limit_;
      return;
    }
    it = window_.emplace(k, Agg{}).first;
  }
  Agg& a = it->second;
  const Bandwidth bw = ComputeBandwidth(r.func, r.is_p2p, r.msg_bytes, r.exec_us, groups_[group].nranks);
  ++a.n;
  a.exec_sum_us += static_cast<double>(r.exec_us);
  a.exec_max_us = std::max(a.exec_max_us, r.exec_us);
  if (bw.busbw_gbs > 0 && std::isfinite(bw.busbw_gbs)) {
    ++a.n_bw;
    a.log_bw_sum += std::log(bw.busbw_gbs);
  }
}

void PromTextfile::AppendBaseLabels(bool with_version, std::string* out) const {
  if (with_version) AppendLabel("version", "v5.1", true, out);
  AppendLabel("slurm_job_id", labels_.slurm_job_id, !with_version, out);
  AppendLabel("node", labels_.node, false, out);
  AppendLabel("gpu", labels_.gpu, false, out);
}

// Inspector 2.30 label order: version, slurm_job_id, node, gpu, comm_name, n_nodes, nranks, then
// collective, message_size, algo_proto (collectives) or p2p_operation, message_size (P2P).
void PromTextfile::AppendBucketLabels(const Key& k, std::string* out) const {
  const Group& g = groups_[k.group];
  AppendBaseLabels(true, out);
  AppendLabel("comm_name", g.comm_name, false, out);
  AppendLabel("n_nodes", std::to_string(g.nnodes), false, out);
  AppendLabel("nranks", std::to_string(g.nranks), false, out);
  AppendLabel(k.is_p2p ? "p2p_operation" : "collective", FuncName(k.func), false, out);
  AppendLabel("message_size", BucketLabel(k.zero, k.unit, k.floor), false, out);
  if (!k.is_p2p) {
    char a[16], p[16];
    std::string ap(UnpackName(k.algo, a));
    ap.push_back('_');
    ap.append(UnpackName(k.proto, p));
    AppendLabel("algo_proto", ap, false, out);
  }
}

void PromTextfile::RenderBuckets(uint64_t now_ns) {
  struct Row {
    std::string labels;
    const Agg* agg;
  };
  std::vector<Row> coll, p2p;
  for (const auto& [k, a] : window_) {
    Row row{{}, &a};
    AppendBucketLabels(k, &row.labels);
    (k.is_p2p ? p2p : coll).push_back(std::move(row));
  }
  auto by_labels = [](const Row& x, const Row& y) { return x.labels < y.labels; };
  std::sort(coll.begin(), coll.end(), by_labels);
  std::sort(p2p.begin(), p2p.end(), by_labels);
  auto busbw = [](const Agg& a) { return a.n_bw > 0 ? std::exp(a.log_bw_sum / double(a.n_bw)) : 0.0; };
  auto mean_us = [](const Agg& a) { return a.n > 0 ? a.exec_sum_us / double(a.n) : 0.0; };

  std::string& s = bucket_section_;
  s.clear();
  // Inspector's four families, no HELP/TYPE (as Inspector writes them).
  for (const Row& r : coll) AppendSample("nccl_bus_bandwidth_gbs", r.labels, busbw(*r.agg), &s);
  for (const Row& r : coll) AppendSample("nccl_collective_exec_time_microseconds", r.labels, mean_us(*r.agg), &s);
  for (const Row& r : p2p) AppendSample("nccl_p2p_bus_bandwidth_gbs", r.labels, busbw(*r.agg), &s);
  for (const Row& r : p2p) AppendSample("nccl_p2p_exec_time_microseconds", r.labels, mean_us(*r.agg), &s);
  // collscope's per-bucket additions: the same labels, so PromQL can match them one to one.
  struct Extra {
    const char* name;
    const char* help;
    const std::vector<Row>* rows;
    bool count;
  };
  const Extra extras[] = {
      {"collscope_collective_operations",
       "Collectives aggregated into this bucket's nccl_* values (the last window with records).",
       &coll, true},
      {"collscope_collective_exec_time_max_seconds",
       "Slowest collective in this bucket's window (Inspector exports only the mean).", &coll, false},
      {"collscope_p2p_operations",
       "Point-to-point operations aggregated into this bucket's nccl_p2p_* values.", &p2p, true},
      {"collscope_p2p_exec_time_max_seconds", "Slowest point-to-point operation in this bucket's window.",
       &p2p, false},
  };
  for (const Extra& e : extras) {
    if (e.rows->empty()) continue;
    AppendHelpType(e.name, "gauge", e.help, &s);
    for (const Row& r : *e.rows) {
      AppendSample(e.name, r.labels,
                   e.count ? double(r.agg->n) : double(r.agg->exec_max_us) / 1e6, &s);
    }
  }
  AppendHelpType("collscope_prometheus_window_timestamp_seconds", "gauge",
                 "Wall-clock time at which the per-bucket series above were computed.", &s);
  std::string base;
  AppendBaseLabels(false, &base);
  AppendSample("collscope_prometheus_window_timestamp_seconds", base, double(now_ns / 1000000) / 1e3, &s);
}

std::string PromTextfile::Render(const std::vector<PromInflight>& inflight, uint64_t now_ns) {
  if (!window_.empty()) RenderBuckets(now_ns);
  window_.clear();

  std::string out = bucket_section_;
  std::string base, base_v;
  AppendBaseLabels(false, &base);
  AppendBaseLabels(true, &base_v);
  if (dump_stats_) {
    // Inspector's optional device counters (NCCL_INSPECTOR_PROM_DUMP_STATS), printed as integers.
    const std::pair<const char*, uint64_t> stats[] = {{"nccl_collectives_total", coll_total_ + coll_dropped_},
                                                      {"nccl_collectives_dropped_total", coll_dropped_},
                                                      {"nccl_p2p_total", p2p_total_ + p2p_dropped_},
                                                      {"nccl_p2p_dropped_total", p2p_dropped_}};
    for (const auto& [name, v] : stats) {
      out.append(name).push_back('{');
      out.append(base_v).append("} ");
      out.append(std::to_string(v)).push_back('\n');
    }
  }
  auto kinds = [&](const char* name, const char* help, uint64_t coll, uint64_t p2p) {
    AppendHelpType(name, "counter", help, &out);
    AppendSample(name, base + ",kind=\"coll\"", double(coll), &out);
    AppendSample(name, base + ",kind=\"p2p\"", double(p2p), &out);
  };
  kinds("collscope_records_total", "Completed operations recorded by this process since the plugin started.",
        coll_total_, p2p_total_);
  kinds("collscope_records_dropped_total",
        "Completed operations lost to a full ring or in-flight pool since the plugin started.", coll_dropped_,
        p2p_dropped_);
  AppendHelpType("collscope_prometheus_records_excluded_total", "counter",
                 "Recorded operations left out of the nccl_* aggregates, by reason.", &out);
  AppendSample("collscope_prometheus_records_excluded_total", base + ",reason=\"timing_source\"",
               double(excluded_timing_), &out);
  AppendSample("collscope_prometheus_records_excluded_total", base + ",reason=\"bucket_limit\"",
               double(excluded_limit_), &out);

  // In flight, per communicator name (several communicators may share one: counts add up, the
  // oldest operation wins), at most max_buckets_ names.
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_name;
  for (const PromInflight& f : inflight) {
    auto it = by_name.find(f.comm_name);
    if (it == by_name.end()) {
      if (by_name.size() >= max_buckets_) continue;
      it = by_name.emplace(f.comm_name, std::pair<uint64_t, uint64_t>{0, 0}).first;
    }
    it->second.first += f.ops;
    if (f.ops > 0 && f.oldest_start_ns > 0 &&
        (it->second.second == 0 || f.oldest_start_ns < it->second.second)) {
      it->second.second = f.oldest_start_ns;
    }
  }
  if (!by_name.empty()) {
    std::vector<std::pair<std::string, double>> ages;
    AppendHelpType("collscope_inflight_operations", "gauge",
                   "Operations started and not yet completed, per communicator name.", &out);
    for (const auto& [name, v] : by_name) {
      std::string l = base;
      AppendLabel("comm_name", name, false, &l);
      AppendSample("collscope_inflight_operations", l, double(v.first), &out);
      const double age = v.second > 0 && now_ns > v.second ? double(now_ns - v.second) / 1e9 : 0.0;
      ages.emplace_back(std::move(l), age);
    }
    AppendHelpType("collscope_inflight_oldest_age_seconds", "gauge",
                   "Age of the oldest operation in flight per communicator name (0: none); "
                   "it grows while a collective hangs.",
                   &out);
    for (const auto& [l, age] : ages) AppendSample("collscope_inflight_oldest_age_seconds", l, age, &out);
  }
  return out;
}

}  // namespace collscope::capture
