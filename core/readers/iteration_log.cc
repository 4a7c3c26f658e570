#include "core/readers/iteration_log.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string_view>

#include "core/input_files.h"

namespace collscope::readers {
namespace {

constexpr double kMaxDurUs = 1099511627776.0;  // 2^40, as the step-file reader
constexpr double kMaxStep = 9007199254740992.0;  // 2^53
constexpr size_t kMaxLine = size_t{1} << 20;

// The number right after `key` in `line` (spaces allowed), or false with why.
bool NumberAfter(std::string_view line, std::string_view key, double* out, std::string* why) {
  const size_t k = line.find(key);
  if (k == std::string_view::npos) { *why = "no \"" + std::string(key) + "\""; return false; }
  const std::string rest(line.substr(k + key.size(), 64));
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(rest.c_str(), &end);
  if (end == rest.c_str() || errno == ERANGE || !std::isfinite(v)) {
    *why = "no number after \"" + std::string(key) + "\"";
    return false;
  }
  *out = v;
  return true;
}

// "host: ..." as pdsh and the DeepSpeed launcher prefix every line: a host-like word then ": ".
std::string HostPrefix(std::string_view line, size_t before) {
  const size_t colon = line.find(": ");
  if (colon == std::string_view::npos || colon == 0 || colon > before) return "";
  for (char c : line.substr(0, colon))
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_')) return "";
  return std::string(line.substr(0, colon));
}

struct Parsed {
  const char* source = nullptr;
  int64_t step = 0;
  double dur_us = 0;
  std::string host;
};

bool ParseLine(std::string_view line, Parsed* p, std::string* why) {
  double step = 0, secs_or_ms = 0;
  if (line.find("train_step_timing in s=") != std::string_view::npos) {
    p->source = "nemo";
    if (!NumberAfter(line, "global_step=", &step, why) || !NumberAfter(line, "train_step_timing in s=", &secs_or_ms, why))
      return false;
    p->dur_us = secs_or_ms * 1e6;
  } else {
    p->source = "megatron";
    const size_t it = line.find(" iteration ");
    if (!NumberAfter(line.substr(it), " iteration ", &step, why) ||
        !NumberAfter(line, "elapsed time per iteration (ms):", &secs_or_ms, why))
      return false;
    p->dur_us = secs_or_ms * 1e3;
    p->host = HostPrefix(line, it);
  }
  if (!(step >= 0 && step < kMaxStep && step == std::floor(step))) { *why = "step number out of range"; return false; }
  if (!(p->dur_us > 0 && p->dur_us < kMaxDurUs)) { *why = "iteration time out of range"; return false; }
  p->step = static_cast<int64_t>(step);
  return true;
}

}  // namespace

Result<StepFile> ReadIterationLog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  StepFile f;
  f.path = path;
  std::map<int64_t, double> dur;  // step -> its last iteration time
  StepFileProcess job;
  const char* source = nullptr;
  std::string line;
  while (std::getline(in, line)) {
    f.bytes += line.size() + 1;
    const uint64_t n = ++f.lines;
    // tqdm redraws a progress bar in place: one line of the file holds many refreshes.
    std::string_view rest(line);
    if (rest.size() > kMaxLine) {
      f.rejected.push_back({n, "line longer than 1 MiB", line.substr(0, 80)});
      continue;
    }
    while (!rest.empty()) {
      const size_t cr = rest.find('\r');
      const std::string_view part = rest.substr(0, cr);
      rest = cr == std::string_view::npos ? std::string_view() : rest.substr(cr + 1);
      if (!IsIterationLogLine(part)) continue;
      Parsed p;
      std::string why;
      if (!ParseLine(part, &p, &why)) {
        f.rejected.push_back({n, why, std::string(part.substr(0, 200))});
        continue;
      }
      if (!source) source = p.source;
      if (job.hostname.empty()) job.hostname = p.host;
      dur[p.step] = p.dur_us;
    }
  }
  if (dur.empty()) return Status::Corruption(path + ": no Megatron or NeMo iteration line that could be read");
  f.source = source;
  f.procs.push_back(job);
  for (const auto& [step, us] : dur) f.steps.push_back({-1, step, -1, us});
  return f;
}

}  // namespace collscope::readers
