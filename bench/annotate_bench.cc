// Cost per call of the step/phase annotation API (libcollscope-annotate.so, loaded with dlopen as
// Python's ctypes does), against two peers run in the same process: the clock read every call
// makes (the floor), and a naive annotator that appends to a vector under a mutex. Target: at
// most 100 ns per call. Calls are timed in batches of 4,096 that fit the ring; the writer drains
// between batches (not timed here: it runs on its own thread), and its cost per event is printed
// separately.
//
// Usage: annotate_bench [--benchmark_...]; prints ns per call and the ratios at the end.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr int kBatch = 4096;

struct Api {
  int (*step_begin)(int64_t);
  int (*step_end)();
  int (*phase_begin)(const char*);
  int (*phase_end)(const char*);
  int (*micro_batch)(int32_t);
  int (*flush)();
  uint64_t (*dropped)();
};

Api& Lib() {
  static Api api = [] {
    const std::string dir = std::filesystem::temp_directory_path() / "collscope-annotate-bench";
    setenv("COLLSCOPE_DUMP_DIR", dir.c_str(), 1);
    void* h = dlopen(COLLSCOPE_ANNOTATE_PATH, RTLD_NOW);
    if (!h) {
      std::fprintf(stderr, "dlopen: %s\n", dlerror());
      std::exit(1);
    }
    Api a;
    a.step_begin = reinterpret_cast<int (*)(int64_t)>(dlsym(h, "collscope_step_begin"));
    a.step_end = reinterpret_cast<int (*)()>(dlsym(h, "collscope_step_end"));
    a.phase_begin = reinterpret_cast<int (*)(const char*)>(dlsym(h, "collscope_phase_begin"));
    a.phase_end = reinterpret_cast<int (*)(const char*)>(dlsym(h, "collscope_phase_end"));
    a.micro_batch = reinterpret_cast<int (*)(int32_t)>(dlsym(h, "collscope_micro_batch"));
    a.flush = reinterpret_cast<int (*)()>(dlsym(h, "collscope_flush"));
    a.dropped = reinterpret_cast<uint64_t (*)()>(dlsym(h, "collscope_annotate_dropped"));
    return a;
  }();
  return api;
}

std::map<std::string, double>& NsPerCall() {
  static std::map<std::string, double> m;
  return m;
}

template <typename F>
void Batches(benchmark::State& state, const char* name, F call) {
  double ns = 0;
  int64_t calls = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kBatch; ++i) call(i);
    ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    calls += kBatch;
    state.PauseTiming();
    Lib().flush();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(calls);
  state.counters["ns_per_call"] = ns / static_cast<double>(calls);
  NsPerCall()[name] = ns / static_cast<double>(calls);
}

void BM_PhaseBeginEnd(benchmark::State& state) {
  Api& a = Lib();
  a.step_begin(0);
  Batches(state, "phase_begin/end", [&](int i) { (i & 1) ? a.phase_end("forward") : a.phase_begin("forward"); });
  a.step_end();
  if (a.dropped() != 0) state.SkipWithError("events were dropped: the batch did not fit the ring");
}
BENCHMARK(BM_PhaseBeginEnd)->Iterations(200);

void BM_StepBeginEnd(benchmark::State& state) {
  Api& a = Lib();
  Batches(state, "step_begin/end", [&](int i) { (i & 1) ? a.step_end() : a.step_begin(i); });
}
BENCHMARK(BM_StepBeginEnd)->Iterations(200);

void BM_MicroBatch(benchmark::State& state) {
  Api& a = Lib();
  a.step_begin(0);
  Batches(state, "micro_batch", [&](int i) { a.micro_batch(i); });
  a.step_end();
}
BENCHMARK(BM_MicroBatch)->Iterations(200);

// Peers.
void BM_ClockOnly(benchmark::State& state) {
  int64_t sink = 0;
  Batches(state, "peer: clock_gettime alone", [&](int) {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sink += ts.tv_nsec;
  });
  benchmark::DoNotOptimize(sink);
}
BENCHMARK(BM_ClockOnly)->Iterations(200);

void BM_MutexVector(benchmark::State& state) {
  static std::mutex mu;
  static std::vector<std::pair<int64_t, std::string>> events;
  Batches(state, "peer: mutex + vector<string>", [&](int i) {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    std::lock_guard<std::mutex> g(mu);
    events.emplace_back(ts.tv_nsec + i, "forward");
    if (events.size() > 1u << 16) events.clear();
  });
}
BENCHMARK(BM_MutexVector)->Iterations(200);

// The writer's side: events drained and turned into lines per second of its thread.
void BM_WriterDrain(benchmark::State& state) {
  Api& a = Lib();
  double ns = 0;
  int64_t events = 0;
  for (auto _ : state) {
    a.step_begin(0);
    for (int i = 0; i < kBatch / 2 - 2; ++i) (i & 1) ? a.phase_end("backward") : a.phase_begin("backward");
    a.step_end();
    const auto t0 = std::chrono::steady_clock::now();
    a.flush();
    ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    events += kBatch / 2;
  }
  state.counters["writer_ns_per_event"] = ns / static_cast<double>(events);
  NsPerCall()["writer (per event, its own thread)"] = ns / static_cast<double>(events);
}
BENCHMARK(BM_WriterDrain)->Iterations(100);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const auto& m = NsPerCall();
  auto at = [&](const char* k) { auto it = m.find(k); return it == m.end() ? 0.0 : it->second; };
  std::printf("\nannotation API, ns per call (target <= 100):\n");
  for (const auto& [k, v] : m) std::printf("  %-36s %8.1f\n", k.c_str(), v);
  const double floor = at("peer: clock_gettime alone"), naive = at("peer: mutex + vector<string>");
  if (floor > 0 && naive > 0)
    std::printf("ratios: phase_begin/end = %.2fx the clock read alone, %.2fx a mutex + vector annotator\n",
                at("phase_begin/end") / floor, at("phase_begin/end") / naive);
  return 0;
}
