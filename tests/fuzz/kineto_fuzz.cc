// PyTorch profiler (Kineto) trace JSON.
#include <string_view>
#include "core/readers/kineto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto trace = collscope::readers::ParseKinetoTrace(
      std::string_view(reinterpret_cast<const char*>(data), size), "node0_1234.1700000000000.pt.trace.json");
  (void)trace;
  return 0;
}
