// nccl-tests output (all_reduce_perf and friends), as logs and mpirun --tag-output leave it.
#include <string_view>
#include "core/nccl_tests_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto log = collscope::ParseNcclTestsOutput(std::string_view(reinterpret_cast<const char*>(data), size),
                                             "all_reduce_perf.log");
  (void)log;
  return 0;
}
