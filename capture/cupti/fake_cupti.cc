// A fake CUPTI for tests without a GPU: libcollscope-fake-cupti.so exports the Activity API
// functions the collector uses, under CUPTI's own names, and fake_cupti_* calls that play the GPU.
// Records are written into the buffers CUPTI's client hands out, in the installed headers' layout
// (CUpti_ActivityKernel10, CUpti_ActivityMemcpy6), and delivered as CUPTI does: when a buffer is
// full, or on cuptiActivityFlushAll, on the calling thread. A declined buffer request drops the
// record, and cuptiActivityGetNumDroppedRecords reports it.
#include <cupti_activity.h>

#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

struct State {
  std::mutex mu;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  std::vector<CUpti_ActivityKind> enabled;
  uint8_t* buffer = nullptr;
  size_t size = 0, used = 0;
  size_t dropped = 0;
  std::set<std::string> names;  // CUPTI-owned name storage: lives as long as the process
  int refuse_callbacks = 0;
  // Full buffers kept until the next flush, as CUPTI's worker may hold them: the pool runs dry.
  bool hold_full = false;
  std::vector<std::pair<uint8_t*, std::pair<size_t, size_t>>> held;
};

State& S() {
  static State* s = new State();
  return *s;
}

size_t RecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    default: return 0;
  }
}

// Takes the filled buffer out of the state (to deliver it after unlocking).
void Detach(State& s, uint8_t** buffer, size_t* size, size_t* used) {
  *buffer = s.buffer, *size = s.size, *used = s.used;
  s.buffer = nullptr, s.size = 0, s.used = 0;
}

void Deliver(CUpti_BuffersCallbackCompleteFunc complete, uint8_t* buffer, size_t size, size_t used) {
  if (buffer != nullptr && complete != nullptr) complete(nullptr, 0, buffer, size, used);
}

// Appends one record of `bytes` bytes, requesting a buffer when there is none or it is full.
void Append(const void* record, size_t bytes) {
  State& s = S();
  uint8_t* full = nullptr;
  size_t full_size = 0, full_used = 0;
  CUpti_BuffersCallbackCompleteFunc complete;
  {
    std::lock_guard<std::mutex> g(s.mu);
    complete = s.complete;
    if (s.buffer != nullptr && s.used + bytes > s.size) {
      Detach(s, &full, &full_size, &full_used);
      if (s.hold_full) s.held.push_back({full, {full_size, full_used}}), full = nullptr;
    }
    if (s.buffer == nullptr && s.request != nullptr) {
      size_t max_records = 0;
      s.request(&s.buffer, &s.size, &max_records);
      if (s.buffer == nullptr || s.size < bytes) s.buffer = nullptr, s.size = 0;
    }
    if (s.buffer == nullptr) {
      ++s.dropped;
    } else {
      std::memcpy(s.buffer + s.used, record, bytes);
      s.used += bytes;
    }
  }
  Deliver(complete, full, full_size, full_used);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUptiResult cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc request, CUpti_BuffersCallbackCompleteFunc complete) {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  if (s.refuse_callbacks) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  s.request = request, s.complete = complete;
  return CUPTI_SUCCESS;
}

__attribute__((visibility("default"))) CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  s.enabled.push_back(kind);
  return CUPTI_SUCCESS;
}

__attribute__((visibility("default"))) CUptiResult cuptiActivityFlushAll(uint32_t) {
  State& s = S();
  uint8_t* buffer = nullptr;
  size_t size = 0, used = 0;
  CUpti_BuffersCallbackCompleteFunc complete;
  std::vector<std::pair<uint8_t*, std::pair<size_t, size_t>>> held;
  {
    std::lock_guard<std::mutex> g(s.mu);
    complete = s.complete;
    if (s.complete == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
    Detach(s, &buffer, &size, &used);
    held.swap(s.held);
  }
  for (const auto& [b, su] : held) Deliver(complete, b, su.first, su.second);
  Deliver(complete, buffer, size, used);
  return CUPTI_SUCCESS;
}

__attribute__((visibility("default"))) CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                                              CUpti_Activity** record) {
  size_t offset = 0;
  if (*record != nullptr)
    offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer) + RecordSize((*record)->kind);
  if (offset >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  if (RecordSize(next->kind) == 0 || offset + RecordSize(next->kind) > valid) return CUPTI_ERROR_INVALID_KIND;
  *record = next;
  return CUPTI_SUCCESS;
}

__attribute__((visibility("default"))) CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t,
                                                                                     size_t* dropped) {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  *dropped = s.dropped;
  s.dropped = 0;  // CUPTI resets the count on each read
  return CUPTI_SUCCESS;
}

__attribute__((visibility("default"))) CUptiResult cuptiGetResultString(CUptiResult, const char** str) {
  *str = "CUPTI_ERROR_FAKE";
  return CUPTI_SUCCESS;
}

// The GPU's side: one kernel, memcpy or memset ran.
__attribute__((visibility("default"))) void fake_cupti_kernel_launch(const char* name, uint32_t device,
                                                                      uint32_t stream, uint64_t start_ns,
                                                                      uint64_t end_ns, const int32_t grid[3],
                                                                      const int32_t block[3]) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.gridX = grid[0], k.gridY = grid[1], k.gridZ = grid[2];
  k.blockX = block[0], k.blockY = block[1], k.blockZ = block[2];
  k.start = start_ns, k.end = end_ns, k.deviceId = device, k.streamId = stream;
  {
    State& s = S();
    std::lock_guard<std::mutex> g(s.mu);
    k.name = s.names.insert(name).first->c_str();
  }
  Append(&k, sizeof k);
}

__attribute__((visibility("default"))) void fake_cupti_kernel(const char* name, uint32_t device, uint32_t stream,
                                                               uint64_t start_ns, uint64_t end_ns) {
  const int32_t one[3] = {1, 1, 1};
  fake_cupti_kernel_launch(name, device, stream, start_ns, end_ns, one, one);
}

__attribute__((visibility("default"))) void fake_cupti_memcpy(uint8_t copy_kind, uint32_t device, uint32_t stream,
                                                               uint64_t start_ns, uint64_t end_ns) {
  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = copy_kind, m.start = start_ns, m.end = end_ns, m.deviceId = device, m.streamId = stream;
  Append(&m, sizeof m);
}

__attribute__((visibility("default"))) void fake_cupti_hold_full_buffers(int hold) {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  s.hold_full = hold != 0;
}

// Makes cuptiActivityRegisterCallbacks fail as it does when another tool holds CUPTI.
__attribute__((visibility("default"))) void fake_cupti_refuse_callbacks(int refuse) {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  s.refuse_callbacks = refuse;
}

__attribute__((visibility("default"))) int fake_cupti_enabled(CUpti_ActivityKind kind) {
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  for (CUpti_ActivityKind k : s.enabled)
    if (k == kind) return 1;
  return 0;
}

}  // extern "C"
