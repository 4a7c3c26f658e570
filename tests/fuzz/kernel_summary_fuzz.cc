// Kernel-summary files of the CUPTI library (docs/cupti.md): detection and reading, plain and as
// a gzip stream (the library's default; a corrupt or cut stream must be refused or read safely).
#include "core/readers/kernel_summary.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string plain = collscope::fuzz::AsFile(data, size, "h-pid1.kernels.jsonl");
  (void)collscope::IsKernelSummaryFile(plain);
  (void)collscope::readers::ReadKernelSummaryFile(plain);
  const std::string gz = collscope::fuzz::AsFile(data, size, "h-pid1.kernels.jsonl.gz");
  (void)collscope::IsKernelSummaryFile(gz);
  (void)collscope::readers::ReadKernelSummaryFile(gz);
  return 0;
}
