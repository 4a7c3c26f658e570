// Saved NCCL RAS status reports (ncclras text and JSON), and the hang analysis over them.
#include <string_view>

#include "analysis/diagnose/hang.h"
#include "core/readers/ras.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view content(reinterpret_cast<const char*>(data), size);
  auto r = collscope::readers::ParseRasReport(content, "ras.txt");
  if (r.ok()) (void)collscope::diagnose::AnalyzeRasReports({*r});
  (void)collscope::readers::ReadRasReport(collscope::fuzz::AsFile(data, size, "ras.json"));
  return 0;
}
