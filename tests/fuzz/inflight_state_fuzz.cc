// collscope in-flight state files (<host>-pid<pid>.inflight.json), and the hang analysis over one.
#include "analysis/diagnose/hang.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto state = collscope::readers::ReadInflightState(collscope::fuzz::AsFile(data, size, "node0-pid1.inflight.json"));
  if (state.ok()) (void)collscope::diagnose::AnalyzeInflight({*state});
  return 0;
}
