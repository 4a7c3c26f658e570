// The injection entry point: CUDA calls InitializeInjection when CUDA_INJECTION64_PATH names this
// library. It opens libcupti.so itself (no link-time CUDA dependency), starts the collector, and
// flushes it at exit. Whatever fails, it says so once and returns success: the job carries on.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <mutex>

#include "capture/cupti/collector.h"

namespace collscope::capture {
namespace {

Collector* g_running = nullptr;

template <typename F>
bool Resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

// The annotation library's step lookup, when it is loaded in this process (by Python's ctypes,
// say, possibly after CUDA started: the collector asks again every tick until it is there).
StepAtFn FindStepAt() {
  using Fn = int (*)(int64_t, int64_t*);
  static std::atomic<Fn> fn{nullptr};
  if (fn.load() == nullptr) {
    Fn f = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "collscope_annotate_step_at"));
    if (f == nullptr) return nullptr;
    fn.store(f);
  }
  return [](uint64_t unix_ns, int64_t* step) { return fn.load()(static_cast<int64_t>(unix_ns), step) == 0; };
}

void StopAtExit() {
  if (g_running != nullptr) g_running->Stop();
}

int Initialize() {
  const char* path = std::getenv("COLLSCOPE_CUPTI_LIBRARY");
  void* lib = nullptr;
  for (const char* name : {path, "libcupti.so", "libcupti.so.13", "libcupti.so.12"}) {
    if (name == nullptr || *name == '\0') continue;
    if ((lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL)) != nullptr) break;
    if (name == path) break;  // a named library that does not open is not replaced by another
  }
  if (lib == nullptr) {
    std::fprintf(stderr, "collscope: cupti: cannot open %s (%s): kernel summaries disabled, training continues\n",
                 path != nullptr && *path ? path : "libcupti.so", dlerror());
    return 1;
  }
  CuptiApi api;
  if (!Resolve(lib, "cuptiActivityRegisterCallbacks", &api.register_callbacks) ||
      !Resolve(lib, "cuptiActivityEnable", &api.enable) || !Resolve(lib, "cuptiActivityFlushAll", &api.flush_all) ||
      !Resolve(lib, "cuptiActivityGetNextRecord", &api.get_next_record)) {
    std::fprintf(stderr, "collscope: cupti: the CUPTI library lacks the Activity API: kernel summaries disabled\n");
    return 1;
  }
  Resolve(lib, "cuptiActivityGetNumDroppedRecords", &api.get_num_dropped_records);
  Resolve(lib, "cuptiGetResultString", &api.get_result_string);
  CollectorConfig config = LoadCollectorConfig();
  config.find_step_at = &FindStepAt;
  g_running = Collector::Start(api, std::move(config));
  if (g_running != nullptr) std::atexit(&StopAtExit);
  return 1;
}

}  // namespace
}  // namespace collscope::capture

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::once_flag once;
  static int result = 1;
  std::call_once(once, [] { result = collscope::capture::Initialize(); });
  return result;
}
