// The fake CUPTI of fake_cupti.cc (libcollscope-fake-cupti.so), for tests and benchmarks without
// a GPU: the Activity API under CUPTI's own names, and the fake_cupti_* calls that play the GPU.
#pragma once

#include <cupti_activity.h>

#include "capture/cupti/collector.h"

extern "C" {
CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
CUptiResult cuptiActivityEnable(CUpti_ActivityKind);
CUptiResult cuptiActivityFlushAll(uint32_t);
CUptiResult cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**);
CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t*);
// One kernel ran (launch configuration 1x1x1 / 1x1x1, or the one given).
void fake_cupti_kernel(const char* name, uint32_t device, uint32_t stream, uint64_t start_ns, uint64_t end_ns);
void fake_cupti_kernel_launch(const char* name, uint32_t device, uint32_t stream, uint64_t start_ns, uint64_t end_ns,
                              const int32_t grid[3], const int32_t block[3]);
void fake_cupti_memcpy(uint8_t copy_kind, uint32_t device, uint32_t stream, uint64_t start_ns, uint64_t end_ns);
// Full buffers kept until the next flush (CUPTI's worker may hold them: the pool can run dry).
void fake_cupti_hold_full_buffers(int hold);
// cuptiActivityRegisterCallbacks fails, as when another tool holds CUPTI.
void fake_cupti_refuse_callbacks(int refuse);
int fake_cupti_enabled(CUpti_ActivityKind kind);
}

namespace collscope::capture {

// The collector's view of the fake.
inline CuptiApi FakeCuptiApi() {
  CuptiApi api;
  api.register_callbacks = &cuptiActivityRegisterCallbacks;
  api.enable = &cuptiActivityEnable;
  api.flush_all = &cuptiActivityFlushAll;
  api.get_next_record = &cuptiActivityGetNextRecord;
  api.get_num_dropped_records = &cuptiActivityGetNumDroppedRecords;
  return api;
}

}  // namespace collscope::capture
