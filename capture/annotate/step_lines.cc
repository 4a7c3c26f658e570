#include "capture/annotate/step_lines.h"

#include "capture/common/json_escape.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace collscope::annotate {
namespace {

void AppendJsonString(const std::string& s, std::string* out) { capture::AppendEscapedJsonString(s, out); }

void AppendInt(int64_t v, std::string* out) { out->append(std::to_string(v)); }

// Microseconds with nanosecond resolution kept as three decimals.
void AppendUs(int64_t ns, std::string* out) {
  char buf[32];
  const int64_t us = ns / 1000, frac = ns % 1000;
  if (frac == 0) std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(us));
  else std::snprintf(buf, sizeof(buf), "%lld.%03lld", static_cast<long long>(us), static_cast<long long>(frac < 0 ? -frac : frac));
  out->append(buf);
}

std::string NameOf(const Event& e) { return std::string(e.name, strnlen(e.name, kNameBytes)); }

// A phase begun without a name still has a row (the format requires a name).
std::string PhaseName(const Event& e) {
  std::string n = NameOf(e);
  return n.empty() ? "(unnamed)" : n;
}

}  // namespace

StepLines::StepLines(ProcessInfo p) : proc_(std::move(p)) {
  std::fill(std::begin(parallel_), std::end(parallel_), -1);
  parallel_[0] = proc_.rank;
  parallel_[1] = proc_.world_size;
}

void StepLines::ProcessLine(std::string* out) const {
  out->append("{\"collscope_steps_version\":1,\"type\":\"process\",\"hostname\":");
  AppendJsonString(proc_.hostname, out);
  out->append(",\"pid\":");
  AppendInt(proc_.pid, out);
  out->append(",\"rank\":");
  AppendInt(parallel_[0], out);
  out->append(",\"world_size\":");
  AppendInt(parallel_[1], out);
  if (proc_.local_rank >= 0) {
    out->append(",\"local_rank\":");
    AppendInt(proc_.local_rank, out);
  }
  static const char* const kDims[] = {"dp", "tp", "pp", "ep", "cp"};
  std::string dims;
  for (int d = 0; d < 5; ++d) {
    const int32_t r = parallel_[2 + 2 * d], s = parallel_[3 + 2 * d];
    if (r < 0 && s < 0) continue;
    dims += std::string(dims.empty() ? "" : ",") + "\"" + kDims[d] + "\":[" + std::to_string(r) + "," +
            std::to_string(s) + "]";
  }
  if (!dims.empty()) out->append(",\"parallel\":{" + dims + "}");
  out->append("}\n");
}

void StepLines::Dropped(uint64_t total, std::string* out) {
  if (total <= dropped_written_) return;
  dropped_written_ = total;
  out->append("{\"type\":\"dropped\",\"events\":" + std::to_string(total) + "}\n");
}

size_t StepLines::PhaseIndex(const std::string& name, int64_t t_ns) {
  for (size_t i = 0; i < phases_.size(); ++i)
    if (phases_[i].name == name) return i;
  phases_.push_back({name, t_ns, 0, 0});
  return phases_.size() - 1;
}

void StepLines::EndStep(int64_t t_ns, std::string* out) {
  if (!in_step_) return;
  for (const Open& o : open_) {
    phases_[o.phase].wall_ns += t_ns - o.begin_ns;
    ++phases_[o.phase].count;
  }
  open_.clear();
  out->append("{\"type\":\"step\",\"rank\":");
  AppendInt(parallel_[0], out);
  out->append(",\"step\":");
  AppendInt(step_, out);
  out->append(",\"start_us\":");
  AppendUs(step_begin_ns_, out);
  out->append(",\"wall_us\":");
  AppendUs(t_ns - step_begin_ns_, out);
  if (micro_batches_ > 0) {
    out->append(",\"micro_batches\":");
    AppendInt(micro_batches_, out);
  }
  if (unmatched_ends_ > 0) {
    out->append(",\"unmatched_phase_ends\":");
    AppendInt(unmatched_ends_, out);
  }
  out->append(",\"phases\":[");
  for (size_t i = 0; i < phases_.size(); ++i) {
    const Phase& p = phases_[i];
    out->append(i ? ",{\"name\":" : "{\"name\":");
    AppendJsonString(p.name, out);
    out->append(",\"start_us\":");
    AppendUs(p.first_ns, out);
    out->append(",\"wall_us\":");
    AppendUs(p.wall_ns, out);
    out->append(",\"count\":");
    AppendInt(p.count, out);
    out->push_back('}');
  }
  out->append("]}\n");
  in_step_ = false;
  phases_.clear();
  micro_batches_ = 0;
  unmatched_ends_ = 0;
}

void StepLines::Add(const Event& e, std::string* out) {
  switch (e.type) {
    case EventType::kStepBegin:
      EndStep(e.t_ns, out);
      in_step_ = true;
      step_ = e.value;
      step_begin_ns_ = e.t_ns;
      break;
    case EventType::kStepEnd:
      EndStep(e.t_ns, out);
      break;
    case EventType::kPhaseBegin:
      if (!in_step_) break;  // a phase outside every step has no step to belong to
      open_.push_back({PhaseIndex(PhaseName(e), e.t_ns), e.t_ns});
      break;
    case EventType::kPhaseEnd: {
      if (!in_step_) break;
      const std::string name = NameOf(e);
      auto it = open_.rbegin();
      if (e.name[0] != '\0')
        while (it != open_.rend() && phases_[it->phase].name != name) ++it;
      if (it == open_.rend()) {
        ++unmatched_ends_;
        break;
      }
      Phase& p = phases_[it->phase];
      p.wall_ns += e.t_ns - it->begin_ns;
      ++p.count;
      open_.erase(std::next(it).base());
      break;
    }
    case EventType::kMicroBatch:
      if (in_step_) micro_batches_ = std::max<int32_t>(micro_batches_, static_cast<int32_t>(e.value) + 1);
      break;
    case EventType::kParallel:
      if (std::equal(std::begin(parallel_), std::end(parallel_), e.parallel)) break;
      std::copy(std::begin(e.parallel), std::end(e.parallel), parallel_);
      ProcessLine(out);
      break;
    case EventType::kGpuTime: {
      out->append("{\"type\":\"gpu\",\"rank\":");
      AppendInt(parallel_[0], out);
      out->append(",\"step\":");
      AppendInt(e.value, out);
      out->append(",\"phase\":");
      AppendJsonString(PhaseName(e), out);
      char buf[48];
      std::snprintf(buf, sizeof(buf), ",\"gpu_us\":%.3f}\n", e.gpu_us);
      out->append(buf);
      break;
    }
  }
}

}  // namespace collscope::annotate
