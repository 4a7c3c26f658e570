// Stack files of `collscope stacks --out` (core/readers/stacks.h): detection and reading, plain
// and as a gzip stream (read the same way; a corrupt or cut stream must be refused or read safely).
#include "core/readers/stacks.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string plain = collscope::fuzz::AsFile(data, size, "h-pid1.stacks.jsonl");
  (void)collscope::IsStackFile(plain);
  (void)collscope::readers::ReadStackFile(plain);
  const std::string gz = collscope::fuzz::AsFile(data, size, "h-pid1.stacks.jsonl.gz");
  (void)collscope::IsStackFile(gz);
  (void)collscope::readers::ReadStackFile(gz);
  return 0;
}
