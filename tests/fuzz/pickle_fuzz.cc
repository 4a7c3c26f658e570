// Python pickles, as PyTorch's Flight Recorder writes them, and the dump read from one.
#include <string_view>
#include "core/readers/flight_recorder.h"
#include "core/readers/pickle.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto value = collscope::readers::ParsePickle(std::string_view(reinterpret_cast<const char*>(data), size));
  if (value.ok()) {
    auto dump = collscope::readers::ReadFlightRecorderDump(collscope::fuzz::AsFile(data, size, "nccl_trace_rank_0"));
    (void)dump;
  }
  return 0;
}
