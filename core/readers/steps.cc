#include "core/readers/steps.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace collscope::readers {

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
