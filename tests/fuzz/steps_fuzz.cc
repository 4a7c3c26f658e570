// Per-step series: step summaries (the annotation API's CSV) and Megatron/NeMo iteration logs.
#include "core/readers/steps.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)collscope::readers::ReadStepSummary(collscope::fuzz::AsFile(data, size, "step_summary.csv"));
  (void)collscope::readers::ReadMegatronLog(collscope::fuzz::AsFile(data, size, "train.log"));
  return 0;
}
