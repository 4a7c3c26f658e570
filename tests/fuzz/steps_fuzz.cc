// Per-step series: step/phase series files (the annotation API's format) and Megatron/NeMo
// iteration logs.
#include "core/readers/step_file.h"
#include "core/readers/iteration_log.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)collscope::readers::ReadStepFile(collscope::fuzz::AsFile(data, size, "rank.steps.jsonl"));
  const std::string log = collscope::fuzz::AsFile(data, size, "train.log");
  (void)collscope::IsIterationLog(log);
  (void)collscope::readers::ReadIterationLog(log);
  return 0;
}
