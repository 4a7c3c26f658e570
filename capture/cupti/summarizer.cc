#include "capture/cupti/summarizer.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "capture/common/json_escape.h"

namespace collscope::capture {
namespace {

constexpr size_t kWrittenWindowsKept = 4096;

void AppendF(std::string* out, const char* fmt, auto... args) {
  char buf[256];
  const int n = std::snprintf(buf, sizeof buf, fmt, args...);
  if (n > 0) out->append(buf, std::min(static_cast<size_t>(n), sizeof buf - 1));
}

}  // namespace

const char* ActivityKindName(ActivityKind k) {
  switch (k) {
    case ActivityKind::kCompute: return "compute";
    case ActivityKind::kNccl: return "nccl";
    case ActivityKind::kMemcpy: return "memcpy";
    case ActivityKind::kMemset: return "memset";
  }
  return "compute";
}

ActivityKind KernelKindOf(std::string_view name) {
  return name.starts_with("ncclKernel") || name.starts_with("ncclDevKernel") ? ActivityKind::kNccl
                                                                            : ActivityKind::kCompute;
}

uint32_t Summarizer::KernelId(const Activity& a) {
  thread_local std::string key;
  key.assign(a.name);
  key.append(reinterpret_cast<const char*>(a.grid), sizeof a.grid);
  key.append(reinterpret_cast<const char*>(a.block), sizeof a.block);
  auto it = name_ids_.find(key);
  if (it != name_ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(names_.size());
  name_ids_.emplace(key, id);
  KernelDef def{std::string(a.name), a.kind, {a.grid[0], a.grid[1], a.grid[2]}, {a.block[0], a.block[1], a.block[2]}};
  names_.push_back(std::move(def));
  return id;
}

void Summarizer::Add(const Activity& a) {
  int64_t step = 0;
  if (step_at_ != nullptr && step_at_(a.start_ns, &step)) Insert(a, {true, step});
  else Insert(a, {false, static_cast<int64_t>(a.start_ns / window_ns_)});
}

void Summarizer::AddInStep(const Activity& a, int64_t step) { Insert(a, {true, step}); }

void Summarizer::Insert(const Activity& a, WindowId window) {
  ++activities_;
  Key k;
  k.window = window;
  k.name = KernelId(a);
  k.device = a.device;
  k.stream = a.stream;
  auto [it, inserted] = open_.try_emplace(k);
  if (inserted && std::find(written_.begin(), written_.end(), k.window) != written_.end()) ++late_;
  Summary& s = it->second;
  const uint64_t d = a.end_ns > a.start_ns ? a.end_ns - a.start_ns : 0;
  ++s.count;
  s.total_ns += d;
  s.min_ns = std::min(s.min_ns, d);
  s.max_ns = std::max(s.max_ns, d);
  s.first_start_ns = std::min(s.first_start_ns, a.start_ns);
  s.last_end_ns = std::max(s.last_end_ns, a.end_ns);
  s.durations.Add(d);
}

void Summarizer::WriteSummary(const Key& k, const Summary& s, std::string* out) const {
  uint64_t start = s.first_start_ns, end = s.last_end_ns;
  if (!k.window.is_step) {
    start = static_cast<uint64_t>(k.window.id) * window_ns_;
    end = start + window_ns_;
  }
  out->append("{\"type\":\"summary\",\"step\":");
  if (k.window.is_step) AppendF(out, "%" PRId64, k.window.id);
  else out->append("null");
  AppendF(out, ",\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"kernel\":%u,\"device\":%u,\"stream\":%u", start,
          end, k.name, k.device, k.stream);
  AppendF(out, ",\"count\":%" PRIu64 ",\"total_ns\":%" PRIu64 ",\"min_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64, s.count,
          s.total_ns, s.min_ns, s.max_ns);
  out->append(",\"modes\":[");
  bool first = true;
  for (const DurationMode& m : s.durations.Modes()) {
    AppendF(out, "%s[%" PRIu64 ",%.6g,%.4g]", first ? "" : ",", m.count, m.centre_ns, m.spread);
    first = false;
  }
  out->append("]}\n");
}

void Summarizer::Emit(uint64_t closed_before_ns, std::string* out) {
  // A window closes as a whole (a time window at its end, a step window at its last activity's
  // end), so that every summary of one window is written together and only a truly late
  // activity starts a second one.
  std::map<WindowId, uint64_t> closes_at;
  for (const auto& [k, s] : open_) {
    uint64_t& c = closes_at[k.window];
    c = std::max(c, k.window.is_step ? s.last_end_ns : (static_cast<uint64_t>(k.window.id) + 1) * window_ns_);
  }
  for (auto it = open_.begin(); it != open_.end();) {
    const Key& k = it->first;
    if (closed_before_ns != UINT64_MAX && closes_at[k.window] >= closed_before_ns) {
      ++it;
      continue;
    }
    // A name is declared before its first summary.
    for (; names_written_ <= k.name && names_written_ < names_.size(); ++names_written_) {
      const KernelDef& d = names_[names_written_];
      out->append("{\"type\":\"kernel\",\"id\":" + std::to_string(names_written_) + ",\"name\":");
      AppendEscapedJsonString(d.name, out);
      out->append(std::string(",\"kind\":\"") + ActivityKindName(d.kind) + "\"");
      if (d.kind == ActivityKind::kCompute || d.kind == ActivityKind::kNccl)
        AppendF(out, ",\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d]", d.grid[0], d.grid[1], d.grid[2], d.block[0],
                d.block[1], d.block[2]);
      out->append("}\n");
    }
    WriteSummary(k, it->second, out);
    if (written_.empty() || written_.back() != k.window) {
      written_.push_back(k.window);
      if (written_.size() > kWrittenWindowsKept) written_.pop_front();
    }
    it = open_.erase(it);
  }
}

std::string ProcessLine(const SummaryProcess& p) {
  std::string s = "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":1,\"host\":";
  AppendEscapedJsonString(p.host, &s);
  s += ",\"pid\":" + std::to_string(p.pid) + ",\"rank\":" + std::to_string(p.rank) + ",\"local_rank\":" +
       std::to_string(p.local_rank) + ",\"world_size\":" + std::to_string(p.world_size) + ",\"window\":\"" +
       (p.step_windows ? "step" : "time") + "\",\"window_ms\":" + std::to_string(p.window_ms) +
       ",\"clock\":\"realtime\"}\n";
  return s;
}

}  // namespace collscope::capture
