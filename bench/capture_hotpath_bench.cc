// Microbenchmarks of collscope's NCCL profiler plugin, loaded through dlopen as NCCL loads it.
//
// BM_CaptureHotPath: NCCL-side cost of one collective as the plugin sees it: Coll start, 8
//   channels x (KernelCh start, KernelChStop record, KernelCh stop), Coll stop (which completes
//   the op and pushes its record). Target: < 1 us per collective.
// BM_CaptureWriterThroughput: records/s the writer formats and writes (finalize drains a full
//   ring of completed records into the dump file).
// BM_DefaultsAtRate: the plugin at its default settings (4,096-record rings, 1 s dumps) with 8
//   communicators each completing 10,000 collectives a second for 2 s: records written, records
//   dropped (target 0) and the writer's share of a core (target < 5%).
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <benchmark/benchmark.h>

#include "capture/nccl/profiler_abi.h"

#ifndef COLLSCOPE_PLUGIN_PATH
#error "COLLSCOPE_PLUGIN_PATH must name the built plugin"
#endif

namespace {

namespace fs = std::filesystem;

struct Plugin {
  Plugin() {
    // COLLSCOPE_BENCH_PLUGIN: another build of the plugin, to run as a peer in the same session.
    const char* other = std::getenv("COLLSCOPE_BENCH_PLUGIN");
    dl = dlopen(other != nullptr ? other : COLLSCOPE_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    if (dl != nullptr) t = static_cast<collscope_ncclProfiler_v6_t*>(dlsym(dl, "ncclProfiler_v6"));
  }
  ~Plugin() {
    if (dl != nullptr) dlclose(dl);
  }
  void* dl = nullptr;
  collscope_ncclProfiler_v6_t* t = nullptr;
};

std::string BenchDir() {
  const fs::path p = fs::temp_directory_path() / ("collscope-bench-" + std::to_string(getpid()));
  fs::create_directories(p);
  return p.string();
}

struct Descrs {
  collscope_ncclProfilerEventDescr_v6_t coll{};
  collscope_ncclProfilerEventDescr_v6_t ch[8]{};
  collscope_ncclProfilerEventStateArgs_t stop[8]{};
  Descrs() {
    coll.type = collscope_ncclProfileColl;
    coll.coll.func = "AllReduce";
    coll.coll.datatype = "ncclBfloat16";
    coll.coll.count = 1 << 20;
    coll.coll.nChannels = 8;
    coll.coll.algo = "RING";
    coll.coll.proto = "SIMPLE";
    for (int c = 0; c < 8; ++c) {
      ch[c].type = collscope_ncclProfileKernelCh;
      ch[c].kernelCh.channelId = static_cast<uint8_t>(c);
    }
  }
};

// One collective's worth of callbacks.
inline void OneCollective(collscope_ncclProfiler_v6_t* t, void* ctx, Descrs& d, uint64_t sn) {
  d.coll.coll.seqNumber = sn;
  void* h = nullptr;
  t->startEvent(ctx, &h, &d.coll);
  t->stopEvent(h);  // enqueued
  void* kh[8];
  for (int c = 0; c < 8; ++c) {
    d.ch[c].parentObj = h;
    d.ch[c].kernelCh.pTimer = 1000000 + sn * 100000 + static_cast<uint64_t>(c) * 40;
    t->startEvent(ctx, &kh[c], &d.ch[c]);
  }
  for (int c = 0; c < 8; ++c) {
    d.stop[c].kernelCh.pTimer = 1000000 + sn * 100000 + 60000 + static_cast<uint64_t>(c) * 90;
    t->recordEventState(kh[c], collscope_ncclProfilerKernelChStop, &d.stop[c]);
    t->stopEvent(kh[c]);
  }
}

// range(0): 1 = writer thread draining continuously beside the hot path, 0 = no periodic writer
// (isolates the callbacks). The ring holds every iteration's record, so none is dropped.
// range(1): 1 = verbose traces (each ring cell then carries 64 channel traces, so the verbose
// runs use a smaller ring and fewer iterations).
void BM_CaptureHotPath(benchmark::State& state) {
  const bool verbose = state.range(1) != 0;
  const std::string dir = BenchDir();
  setenv("NCCL_INSPECTOR_DUMP_DIR", dir.c_str(), 1);
  setenv("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", state.range(0) ? "0" : "-1", 1);
  setenv("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE", verbose ? "32768" : "262144", 1);
  setenv("NCCL_INSPECTOR_DUMP_VERBOSE", verbose ? "1" : "0", 1);
  Plugin p;
  if (p.t == nullptr) {
    state.SkipWithError("cannot load plugin");
    return;
  }
  void* ctx = nullptr;
  int mask = 0;
  p.t->init(&ctx, 0x1234, &mask, "bench", 1, 8, 0, nullptr);
  Descrs d;
  uint64_t sn = 0;
  for (auto _ : state) OneCollective(p.t, ctx, d, sn++);
  state.SetItemsProcessed(state.iterations());
  state.counters["ns_per_coll"] = benchmark::Counter(
      static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
  p.t->finalize(ctx);
  fs::remove_all(dir);
  unsetenv("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE");
  unsetenv("NCCL_INSPECTOR_DUMP_VERBOSE");
}
BENCHMARK(BM_CaptureHotPath)
    ->ArgsProduct({{0, 1}, {0}})
    ->ArgNames({"writer", "verbose"})
    ->Iterations(200000)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_CaptureHotPath)
    ->ArgsProduct({{0, 1}, {1}})
    ->ArgNames({"writer", "verbose"})
    ->Iterations(30000)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_CaptureWriterThroughput(benchmark::State& state) {
  const int kRecords = state.range(0) ? 16384 : 65536;  // verbose cells are 2.5 KiB larger
  const std::string dir = BenchDir();
  setenv("NCCL_INSPECTOR_DUMP_DIR", dir.c_str(), 1);
  setenv("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "-1", 1);
  setenv("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE", std::to_string(kRecords).c_str(), 1);
  setenv("NCCL_INSPECTOR_DUMP_VERBOSE", state.range(0) ? "1" : "0", 1);
  Plugin p;
  if (p.t == nullptr) {
    state.SkipWithError("cannot load plugin");
    return;
  }
  Descrs d;
  size_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    void* ctx = nullptr;
    int mask = 0;
    p.t->init(&ctx, 0x5678, &mask, "bench", 2, 16, 3, nullptr);
    for (int i = 0; i < kRecords; ++i) OneCollective(p.t, ctx, d, static_cast<uint64_t>(i));
    state.ResumeTiming();
    p.t->finalize(ctx);  // formats and writes kRecords records
    state.PauseTiming();
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".log") bytes += fs::file_size(e.path());
      fs::remove(e.path());
    }
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kRecords);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  fs::remove_all(dir);
  unsetenv("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE");
  unsetenv("NCCL_INSPECTOR_DUMP_VERBOSE");
}
BENCHMARK(BM_CaptureWriterThroughput)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("verbose")
    ->Unit(benchmark::kMillisecond);

double CpuSeconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void BM_DefaultsAtRate(benchmark::State& state) {
  const int kComms = 8, kPerSecond = static_cast<int>(state.range(0)), kSeconds = 2;
  const std::string dir = BenchDir();
  setenv("NCCL_INSPECTOR_DUMP_DIR", dir.c_str(), 1);
  unsetenv("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS");  // the defaults
  unsetenv("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE");
  unsetenv("NCCL_INSPECTOR_DUMP_VERBOSE");
  Plugin p;
  if (p.t == nullptr) {
    state.SkipWithError("cannot load plugin");
    return;
  }
  Descrs d;
  uint64_t issued = 0, written = 0;
  double writer_share = 0;
  for (auto _ : state) {
    void* ctx[kComms];
    for (int c = 0; c < kComms; ++c) {
      int mask = 0;
      p.t->init(&ctx[c], 0x9000 + static_cast<uint64_t>(c), &mask, "bench", 2, 16, 3, nullptr);
    }
    const double cpu0 = CpuSeconds(RUSAGE_SELF), me0 = CpuSeconds(RUSAGE_THREAD);
    const auto t0 = std::chrono::steady_clock::now();
    // Paced in 1 ms ticks: each communicator completes kPerSecond / 1000 collectives per tick.
    for (int tick = 0; tick < kSeconds * 1000; ++tick) {
      for (int c = 0; c < kComms; ++c)
        for (int i = 0; i < kPerSecond / 1000; ++i) OneCollective(p.t, ctx[c], d, issued++);
      std::this_thread::sleep_until(t0 + std::chrono::milliseconds(tick + 1));
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    writer_share = ((CpuSeconds(RUSAGE_SELF) - cpu0) - (CpuSeconds(RUSAGE_THREAD) - me0)) / wall;
    for (int c = 0; c < kComms; ++c) p.t->finalize(ctx[c]);
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".log") {
        std::ifstream f(e.path());
        std::string line;
        while (std::getline(f, line)) written += line.find("\"coll_perf\"") != std::string::npos;
      }
      fs::remove(e.path());
    }
  }
  state.counters["issued"] = static_cast<double>(issued);
  state.counters["written"] = static_cast<double>(written);
  state.counters["dropped"] = static_cast<double>(issued - written);
  state.counters["writer_core_share"] = writer_share;
  std::printf("defaults at %d collectives/s x %d communicators for %d s: %llu issued, %llu written, %llu "
              "dropped (target 0); writer %.1f%% of a core (target < 5%%)\n",
              kPerSecond, kComms, kSeconds, static_cast<unsigned long long>(issued),
              static_cast<unsigned long long>(written), static_cast<unsigned long long>(issued - written),
              100 * writer_share);
  fs::remove_all(dir);
}
BENCHMARK(BM_DefaultsAtRate)->Arg(10000)->ArgName("per_comm_per_s")->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
