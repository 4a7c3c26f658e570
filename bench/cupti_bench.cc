// libcollscope-cupti's four targets (issue: ARGUS-style capture), measured without a GPU through
// the fake CUPTI (capture/cupti/fake_cupti.cc), which writes records in the installed headers'
// layout into the collector's own buffers:
//   1. compression: summary file bytes against CUPTI's raw activity records for the same kernels;
//   2. fidelity: W1 between each summary's reconstructed distribution and the raw durations, for
//      every (kernel, window) of 100 samples or more, relative to the kernel's median;
//   3. host CPU per record on the processing thread (buffers held, then delivered in one flush);
//   4. the kernel-launch path: the library registers no launch callback (stated, by construction).
// Workload: a synthetic transformer step (60 kernel configurations, from 5 us elementwise kernels to
// 2 ms GEMMs, log-normal durations with 2-5% spread and a slow mode on some), at 5,000 kernels per
// 500 ms step (the realistic model) and at 46,000 (ARGUS's 10 MB of records per step).
// Usage: cupti_bench [steps]
#include <sys/wait.h>
#include <unistd.h>

#include <simdjson.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "capture/cupti/collector.h"
#include "capture/cupti/fake_cupti.h"


namespace {

using collscope::capture::Collector;
using collscope::capture::CollectorConfig;
using collscope::capture::FakeCuptiApi;
namespace fs = std::filesystem;

constexpr uint64_t kT0 = 1'764'666'000'000'000'000ull;
constexpr uint64_t kStepNs = 500'000'000;

struct KernelSpec {
  std::string name;
  int32_t grid[3], block[3];
  double median_ns, spread;
  int per_step;
  double slow_share = 0;  // share of launches in a second mode 1.3x slower
};

std::vector<KernelSpec> Model(int kernels_per_step) {
  std::vector<KernelSpec> m;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  int total = 0;
  for (int i = 0; i < 60; ++i) {
    KernelSpec k;
    const bool gemm = i % 4 == 0;
    k.name = gemm ? "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
                    "segment_k_off_kernel__5x_cublas"
                  : "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
                    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)";
    k.name += "_" + std::to_string(i);
    k.grid[0] = 132 * (1 + i % 3), k.grid[1] = 1 + i % 2, k.grid[2] = 1;
    k.block[0] = gemm ? 384 : 128, k.block[1] = 1, k.block[2] = 1;
    k.median_ns = gemm ? 200000 + 1800000 * u(rng) : 5000 + 60000 * u(rng);
    k.spread = 0.02 + 0.03 * u(rng);
    k.per_step = 0;
    k.slow_share = i % 7 == 0 ? 0.2 : 0;
    m.push_back(k);
  }
  // Launches per step: layers of 40, so GEMMs come 40-160 times and elementwise kernels more.
  while (total < kernels_per_step)
    for (KernelSpec& k : m) {
      const int add = std::min(40, kernels_per_step - total);
      k.per_step += add;
      total += add;
      if (total >= kernels_per_step) break;
    }
  return m;
}

bool StepOf(uint64_t unix_ns, int64_t* step) {
  if (unix_ns < kT0) return false;
  *step = static_cast<int64_t>((unix_ns - kT0) / kStepNs);
  return true;
}

// The simulated wall clock: the collector closes windows by it, as it does by the real one.
std::atomic<uint64_t> g_now{0};
uint64_t SimulatedNow() { return g_now.load(); }

// raw[(kernel index, step)] = durations
using Raw = std::map<std::pair<int, int64_t>, std::vector<double>>;

// Plays `steps` steps of the model through the fake GPU; returns the records played.
// With `paced`, each step is followed by a pause of a few flush intervals at the simulated time of
// the next step: the writer closes and writes each step as it would in a job (one sync flush of
// the compressed stream per tick).
uint64_t Play(const std::vector<KernelSpec>& model, int steps, Raw* raw, bool paced) {
  std::mt19937_64 rng(17);
  std::normal_distribution<double> z;
  std::uniform_real_distribution<double> u(0, 1);
  uint64_t n = 0;
  for (int s = 0; s < steps; ++s) {
    uint64_t t = kT0 + static_cast<uint64_t>(s) * kStepNs + 1000;
    for (size_t i = 0; i < model.size(); ++i) {
      const KernelSpec& k = model[i];
      for (int j = 0; j < k.per_step; ++j) {
        const double slow = u(rng) < k.slow_share ? 1.3 : 1.0;
        const uint64_t d = static_cast<uint64_t>(std::llround(k.median_ns * slow * std::exp(k.spread * z(rng))));
        fake_cupti_kernel_launch(k.name.c_str(), 0, 7, t, t + d, k.grid, k.block);
        if (raw != nullptr) (*raw)[{static_cast<int>(i), s}].push_back(static_cast<double>(d));
        t += 60;  // launch order within the step; overlap is irrelevant to the summaries
        g_now.store(t, std::memory_order_relaxed);
        ++n;
      }
    }
    g_now = kT0 + static_cast<uint64_t>(s + 1) * kStepNs;
    if (paced) std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  return n;
}

std::vector<double> Reconstruct(const std::vector<std::array<double, 3>>& modes) {
  std::vector<double> out;
  for (const auto& m : modes)
    for (uint64_t i = 0; i < static_cast<uint64_t>(m[0]); ++i) {
      const double q = (static_cast<double>(i) + 0.5) / m[0];
      double lo = -8, hi = 8;
      for (int k = 0; k < 60; ++k) {
        const double mid = (lo + hi) / 2;
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < q ? lo : hi) = mid;
      }
      out.push_back(m[1] * std::exp(m[2] * (lo + hi) / 2));
    }
  return out;
}

struct Fidelity {
  int checked = 0, over = 0;
  double worst = 0, median = 0;
};

// W1 of every (kernel, step) summary of 100 samples or more against its raw durations.
Fidelity CheckFidelity(const fs::path& file, const std::vector<KernelSpec>& model, Raw& raw) {
  std::map<std::string, int> index;  // "name|grid|block" -> model index
  for (size_t i = 0; i < model.size(); ++i) index[model[i].name] = static_cast<int>(i);
  std::map<uint64_t, int> id_to_model;
  simdjson::dom::parser parser;
  std::string text;
  gzFile gz = gzopen(file.c_str(), "rb");
  char buf[1 << 16];
  for (int n; gz != nullptr && (n = gzread(gz, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  if (gz != nullptr) gzclose(gz);
  std::istringstream in(text);
  std::string line;
  std::vector<double> rel;
  while (std::getline(in, line)) {
    simdjson::dom::element e;
    if (parser.parse(line).get(e) != simdjson::SUCCESS) continue;
    std::string_view type = e["type"].get_string().value();
    if (type == "kernel") {
      id_to_model[e["id"].get_uint64().value()] = index[std::string(e["name"].get_string().value())];
    } else if (type == "summary" && !e["step"].is_null()) {
      const uint64_t count = e["count"].get_uint64().value();
      if (count < 100) continue;
      std::vector<std::array<double, 3>> modes;
      simdjson::dom::array ms;
      if (e["modes"].get(ms) != simdjson::SUCCESS) continue;
      for (simdjson::dom::element m : ms) {
        std::array<double, 3> v{};
        size_t k = 0;
        for (simdjson::dom::element x : m) v[k++ % 3] = x.is_uint64() ? static_cast<double>(uint64_t(x)) : double(x);
        modes.push_back(v);
      }
      std::vector<double>& r = raw[{id_to_model[e["kernel"].get_uint64().value()], e["step"].get_int64().value()}];
      std::vector<double> rec = Reconstruct(modes);
      if (rec.size() != r.size()) continue;
      std::sort(r.begin(), r.end());
      std::sort(rec.begin(), rec.end());
      double w1 = 0;
      for (size_t i = 0; i < r.size(); ++i) w1 += std::fabs(r[i] - rec[i]);
      rel.push_back(w1 / static_cast<double>(r.size()) / r[r.size() / 2]);
    }
  }
  Fidelity f;
  f.checked = static_cast<int>(rel.size());
  for (double x : rel) f.over += x >= 0.05, f.worst = std::max(f.worst, x);
  if (!rel.empty()) {
    std::sort(rel.begin(), rel.end());
    f.median = rel[rel.size() / 2];
  }
  return f;
}

// One scenario in a child process (one collector per process, as in a training job).
void Scenario(const char* title, int kernels_per_step, int steps, bool step_windows, const fs::path& dir) {
  std::fflush(nullptr);
  if (fork() != 0) {
    int status;
    wait(&status);
    return;
  }
  const std::vector<KernelSpec> model = Model(kernels_per_step);
  CollectorConfig c;
  c.dump_dir = dir.string();
  c.host = "bench";
  c.pid = getpid();
  c.rank = 0;
  c.flush_ms = 10;
  c.now_ns = &SimulatedNow;
  if (step_windows) c.find_step_at = [] { return collscope::capture::StepAtFn(&StepOf); };
  Collector* col = Collector::Start(FakeCuptiApi(), c);
  if (col == nullptr) _exit(1);
  if (step_windows) std::this_thread::sleep_for(std::chrono::milliseconds(120));  // a tick finds the lookup
  Raw raw;
  const uint64_t n = Play(model, steps, &raw, true);
  col->Stop();
  const double raw_bytes = static_cast<double>(n) * sizeof(CUpti_ActivityKernel10);
  const double file_bytes = static_cast<double>(fs::file_size(col->path()));
  std::printf("%-50s %7llu records  raw %6.2f MB  summaries %6.1f KB  %6.0fx  (%.0f B per step)\n", title,
              static_cast<unsigned long long>(n), raw_bytes / 1e6, file_bytes / 1e3, raw_bytes / file_bytes,
              file_bytes / steps);
  if (step_windows) {
    const Fidelity f = CheckFidelity(col->path(), model, raw);
    std::printf("%-50s W1/median over %d (kernel, step) summaries of >= 100 samples: median %.4f, worst %.4f, "
                "%d at or above 0.05 (target: all below)\n",
                "", f.checked, f.median, f.worst, f.over);
  }
  std::fflush(stdout);
  _exit(0);
}

void CostPerRecord(const fs::path& dir) {
  std::fflush(nullptr);
  if (fork() != 0) {
    int status;
    wait(&status);
    return;
  }
  const std::vector<KernelSpec> model = Model(5000);
  CollectorConfig c;
  c.dump_dir = dir.string();
  c.host = "bench-cost";
  c.pid = getpid();
  c.flush_ms = 600000;  // only the flush below delivers
  c.buffers = 160, c.buffer_bytes = 1 << 20;
  c.find_step_at = [] { return collscope::capture::StepAtFn(&StepOf); };
  fake_cupti_hold_full_buffers(1);
  Collector* col = Collector::Start(FakeCuptiApi(), c);
  if (col == nullptr) _exit(1);
  const uint64_t n = Play(model, 120, nullptr, false);  // 600,000 records, ~130 MB of buffers held
  timespec a, b;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  cuptiActivityFlushAll(0);  // every held buffer is processed on this thread
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  const double ns = static_cast<double>(b.tv_sec - a.tv_sec) * 1e9 + static_cast<double>(b.tv_nsec - a.tv_nsec);
  const auto s = col->stats();
  std::printf("host CPU per record on the processing thread: %.0f ns (%llu records, %llu refused buffers; target "
              "<= 1000 ns)\n",
              ns / static_cast<double>(s.activities), static_cast<unsigned long long>(s.activities),
              static_cast<unsigned long long>(s.buffers_refused));
  if (s.activities != n) std::printf("  (played %llu)\n", static_cast<unsigned long long>(n));
  col->Stop();
  std::fflush(stdout);
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 40;
  const fs::path dir = fs::temp_directory_path() / ("collscope-cupti-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::printf("libcollscope-cupti, fake CUPTI (records in the CUDA 13.0 headers' layout, %zu B per kernel)\n",
              sizeof(CUpti_ActivityKernel10));
  Scenario("5,000 kernels/step, step windows", 5000, steps, true, dir);
  Scenario("5,000 kernels/step, 10 s windows (no steps)", 5000, steps, false, dir);
  Scenario("46,000 kernels/step (ARGUS's 10 MB), step windows", 46000, std::max(4, steps / 8), true, dir);
  CostPerRecord(dir);
  std::printf("kernel-launch path: nothing added (no CUPTI callback is subscribed; records reach the library "
              "only in completed buffers, and a buffer request is one lock-free pop)\n");
  if (std::getenv("COLLSCOPE_BENCH_KEEP") == nullptr) fs::remove_all(dir);
  else std::printf("summary files kept in %s\n", dir.c_str());
  return 0;
}
