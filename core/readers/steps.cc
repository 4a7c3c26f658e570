#include "core/readers/steps.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace collscope::readers {

Result<StepSeries> ReadStepSummary(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Error("cannot open " + path);
  StepSeries s;
  s.source = "step_summary";
  std::string line;
  std::map<std::pair<int, int64_t>, StepRow> rows;
  size_t n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (n == 1 && line.rfind("rank,", 0) == 0) continue;
    if (line.empty()) continue;
    size_t p[4];
    size_t pos = 0;
    bool ok = true;
    for (int k = 0; k < 4 && ok; ++k) {
      p[k] = line.find(',', pos);
      ok = p[k] != std::string::npos;
      pos = p[k] + 1;
    }
    if (!ok) return Status::Error(path + ":" + std::to_string(n) + ": expected rank,step,phase,start_us,dur_us");
    const int rank = std::atoi(line.c_str());
    const int64_t step = std::atoll(line.c_str() + p[0] + 1);
    const std::string phase = line.substr(p[1] + 1, p[2] - p[1] - 1);
    const int64_t start = std::atoll(line.c_str() + p[2] + 1);
    const double dur = std::atof(line.c_str() + p[3] + 1);
    StepRow& r = rows[{rank, step}];
    r.rank = rank;
    r.step = step;
    if (phase == "step") {
      r.start_us = start;
      r.dur_us = dur;
    } else {
      r.phases[phase] += dur;
    }
  }
  for (auto& [k, r] : rows)
    if (r.dur_us > 0) s.rows.push_back(std::move(r));
  return s;
}

Result<StepSeries> ReadMegatronLog(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Error("cannot open " + path);
  StepSeries s;
  s.source = "megatron";
  std::string line;
  while (std::getline(f, line)) {
    const size_t it = line.find(" iteration ");
    const size_t el = line.find("elapsed time per iteration (ms):");
    if (it == std::string::npos || el == std::string::npos) continue;
    StepRow r;
    r.step = std::atoll(line.c_str() + it + 11);
    r.dur_us = std::atof(line.c_str() + el + 32) * 1000.0;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon < it && s.host.empty()) s.host = line.substr(0, colon);
    auto field = [&](const char* key, const char* name) {
      const size_t k = line.find(key);
      if (k != std::string::npos) r.phases[name] = std::atof(line.c_str() + k + std::char_traits<char>::length(key));
    };
    field("TFLOPs:", "tflops");
    field("samples per second:", "samples_per_second");
    if (r.dur_us > 0) s.rows.push_back(std::move(r));
  }
  if (s.rows.empty()) return Status::Error(path + ": no Megatron iteration lines found");
  return s;
}

}  // namespace collscope::readers
