// libcollscope-cupti without a GPU: the fake CUPTI (fake_cupti.cc) plays the GPU and writes records
// in the installed headers' layout into the collector's buffers, through the same callbacks and
// record walk the real CUPTI drives. Durations come from the real Kineto fixtures
// (../shared/fixtures/kineto) and from synthetic distributions with known modes.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "capture/cupti/collector.h"
#include "capture/cupti/fake_cupti.h"
#include "capture/cupti/duration_modes.h"


namespace collscope::capture {
namespace {

namespace fs = std::filesystem;

// Each collector test runs in a forked child: one collector per process, as in a training job.
int InChild(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Kernel {
  std::string name;
  uint64_t start_ns = 0, dur_ns = 0;
  int32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  std::string Key() const {
    return name + " grid " + std::to_string(grid[0]) + "," + std::to_string(grid[1]) + "," + std::to_string(grid[2]) +
           " block " + std::to_string(block[0]) + "," + std::to_string(block[1]) + "," + std::to_string(block[2]);
  }
};

std::string Gunzip(const fs::path& p) {
  gzFile f = gzopen(p.c_str(), "rb");
  std::string out;
  if (f == nullptr) return out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

fs::path Fixtures() {
  const char* env = std::getenv("COLLSCOPE_FIXTURES");
  return env != nullptr && *env ? fs::path(env) : fs::path(COLLSCOPE_FIXTURES_DEFAULT);
}

// The GPU kernels of a Kineto trace, as (name, start, duration) in ns.
std::vector<Kernel> KinetoKernels(const fs::path& trace) {
  std::vector<Kernel> out;
  const std::string text = Gunzip(trace);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS) return out;
  simdjson::dom::array events;
  if (doc["traceEvents"].get(events) != simdjson::SUCCESS) return out;
  for (simdjson::dom::element e : events) {
    std::string_view cat, name;
    double ts = 0, dur = 0;
    if (e["cat"].get(cat) != simdjson::SUCCESS || cat != "kernel") continue;
    if (e["name"].get(name) != simdjson::SUCCESS || e["ts"].get(ts) != simdjson::SUCCESS ||
        e["dur"].get(dur) != simdjson::SUCCESS)
      continue;
    Kernel k{std::string(name), static_cast<uint64_t>(std::llround(ts * 1000)),
             static_cast<uint64_t>(std::llround(dur * 1000))};
    // The launch configuration, as CUPTI reports it (Kineto copies it into args).
    simdjson::dom::array grid, block;
    if (e["args"]["grid"].get(grid) == simdjson::SUCCESS && e["args"]["block"].get(block) == simdjson::SUCCESS &&
        grid.size() == 3 && block.size() == 3)
      for (size_t i = 0; i < 3; ++i)
        k.grid[i] = static_cast<int32_t>(int64_t(grid.at(i))), k.block[i] = static_cast<int32_t>(int64_t(block.at(i)));
    out.push_back(k);
  }
  return out;
}

// Durations drawn from a mixture of log-normals: {weight, median ns, sigma of log}.
std::vector<uint64_t> Mixture(std::mt19937_64& rng, size_t n, const std::vector<std::array<double, 3>>& parts) {
  std::vector<double> w;
  for (const auto& p : parts) w.push_back(p[0]);
  std::discrete_distribution<int> pick(w.begin(), w.end());
  std::normal_distribution<double> z;
  std::vector<uint64_t> out;
  for (size_t i = 0; i < n; ++i) {
    const auto& p = parts[static_cast<size_t>(pick(rng))];
    out.push_back(static_cast<uint64_t>(std::llround(p[1] * std::exp(p[2] * z(rng)))));
  }
  return out;
}

// The distribution a reader reconstructs from modes: per mode, `count` evenly spaced quantiles
// of its log-normal.
std::vector<double> Reconstruct(const std::vector<DurationMode>& modes) {
  std::vector<double> out;
  for (const DurationMode& m : modes)
    for (uint64_t i = 0; i < m.count; ++i) {
      const double q = (static_cast<double>(i) + 0.5) / static_cast<double>(m.count);
      // Inverse normal CDF by bisection on erfc: precise enough for a test's reference.
      double lo = -8, hi = 8;
      for (int k = 0; k < 60; ++k) {
        const double mid = (lo + hi) / 2;
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < q ? lo : hi) = mid;
      }
      out.push_back(m.centre_ns * std::exp(m.spread * (lo + hi) / 2));
    }
  return out;
}

double W1(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::fabs(a[i] - b[i]);
  return s / static_cast<double>(a.size());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double W1Relative(const std::vector<uint64_t>& raw) {
  LogHistogram h;
  for (uint64_t d : raw) h.Add(d);
  std::vector<double> x(raw.begin(), raw.end());
  return W1(Reconstruct(h.Modes()), x) / Median(x);
}

TEST(DurationModes, KnownModesAreFoundWithTheirWeightsAndCentres) {
  std::mt19937_64 rng(7);
  LogHistogram h;
  for (uint64_t d : Mixture(rng, 20000, {{0.7, 100000, 0.02}, {0.3, 130000, 0.02}})) h.Add(d);
  const auto modes = h.Modes();
  ASSERT_EQ(modes.size(), 2u);
  EXPECT_NEAR(modes[0].centre_ns / 100000, 1.0, 0.01);
  EXPECT_NEAR(modes[1].centre_ns / 130000, 1.0, 0.01);
  EXPECT_NEAR(static_cast<double>(modes[0].count) / 20000, 0.7, 0.02);
  EXPECT_NEAR(modes[0].spread, 0.02, 0.005);
  EXPECT_EQ(modes[0].count + modes[1].count, 20000u);

  LogHistogram one;
  for (uint64_t d : Mixture(rng, 5000, {{1, 50000, 0.05}})) one.Add(d);
  EXPECT_EQ(one.Modes().size(), 1u) << "one log-normal is one mode";
}

TEST(DurationModes, HistogramsOfOneKernelMergeIntoTheSameModes) {
  std::mt19937_64 rng(3);
  const auto d = Mixture(rng, 8000, {{0.5, 20000, 0.03}, {0.5, 40000, 0.03}});
  LogHistogram all, a, b;
  for (size_t i = 0; i < d.size(); ++i) {
    all.Add(d[i]);
    (i % 2 ? a : b).Add(d[i]);
  }
  a.Merge(b);
  ASSERT_EQ(a.count(), all.count());
  const auto ma = a.Modes(), mall = all.Modes();
  ASSERT_EQ(ma.size(), mall.size());
  for (size_t i = 0; i < ma.size(); ++i) {
    EXPECT_EQ(ma[i].count, mall[i].count);
    EXPECT_DOUBLE_EQ(ma[i].centre_ns, mall[i].centre_ns);
  }
}

// The fidelity target: W1 of the reconstruction under 5% of the kernel's median duration.
TEST(DurationModes, ReconstructionIsWithinFivePercentOfTheMedianInW1) {
  std::mt19937_64 rng(11);
  EXPECT_LT(W1Relative(Mixture(rng, 2000, {{1, 80000, 0.02}})), 0.05);
  EXPECT_LT(W1Relative(Mixture(rng, 2000, {{0.6, 80000, 0.03}, {0.4, 120000, 0.05}})), 0.05);
  EXPECT_LT(W1Relative(Mixture(rng, 2000, {{0.9, 5000, 0.1}, {0.1, 60000, 0.3}})), 0.05);
  const fs::path dir = Fixtures() / "kineto";
  if (!fs::exists(dir)) GTEST_SKIP() << "shared fixtures absent (" << dir << "): Kineto durations not checked";
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".gz") continue;
    std::map<std::string, std::vector<uint64_t>> by_name;
    for (const Kernel& k : KinetoKernels(e.path())) by_name[k.Key()].push_back(k.dur_ns);
    for (const auto& [name, durs] : by_name) {
      if (durs.size() < 100) continue;
      EXPECT_LT(W1Relative(durs), 0.05) << e.path().filename() << ": " << name.substr(0, 80);
      ++checked;
    }
  }
  EXPECT_GE(checked, 2) << "kernels (name and launch configuration) of 100 samples or more in the Kineto fixtures";
}

struct SummaryFile {
  std::map<uint32_t, std::string> names, kinds, keys;  // keys: name and launch configuration
  struct Row {
    std::string name, key;
    int64_t step = -1;
    uint64_t start_ns = 0, end_ns = 0, count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
    uint32_t stream = 0;
    std::vector<DurationMode> modes;
  };
  std::vector<Row> rows;
  simdjson::dom::object process, last_stats;
  std::string text;
  size_t stats_lines = 0;
};

SummaryFile ReadSummaries(const fs::path& path, simdjson::dom::parser& parser, std::vector<std::string>* keep) {
  SummaryFile f;
  std::istringstream in(Gunzip(path));  // gzopen reads a plain file as it is
  std::string line;
  while (std::getline(in, line)) {
    keep->push_back(line);
    simdjson::dom::element e;
    if (parser.parse(keep->back()).get(e) != simdjson::SUCCESS) {
      ADD_FAILURE() << "bad line: " << line;
      continue;
    }
    const std::string_view type = e["type"].get_string().value();
    if (type == "kernel") {
      f.names[static_cast<uint32_t>(e["id"].get_uint64().value())] = std::string(e["name"].get_string().value());
      const uint32_t id = static_cast<uint32_t>(e["id"].get_uint64().value());
      f.kinds[id] = std::string(e["kind"].get_string().value());
      Kernel k{f.names[id]};
      simdjson::dom::array grid, block;
      if (e["grid"].get(grid) == simdjson::SUCCESS && e["block"].get(block) == simdjson::SUCCESS)
        for (size_t i = 0; i < 3; ++i)
          k.grid[i] = static_cast<int32_t>(int64_t(grid.at(i))), k.block[i] = static_cast<int32_t>(int64_t(block.at(i)));
      f.keys[id] = k.Key();
    } else if (type == "summary") {
      SummaryFile::Row r;
      const uint32_t id = static_cast<uint32_t>(e["kernel"].get_uint64().value());
      EXPECT_TRUE(f.names.count(id)) << "kernel " << id << " used before it is declared";
      r.name = f.names[id];
      r.key = f.keys[id];
      if (!e["step"].is_null()) r.step = e["step"].get_int64().value();
      r.start_ns = e["start_ns"].get_uint64().value();
      r.end_ns = e["end_ns"].get_uint64().value();
      r.count = e["count"].get_uint64().value();
      r.total_ns = e["total_ns"].get_uint64().value();
      r.min_ns = e["min_ns"].get_uint64().value();
      r.max_ns = e["max_ns"].get_uint64().value();
      r.stream = static_cast<uint32_t>(e["stream"].get_uint64().value());
      simdjson::dom::array modes;
      EXPECT_EQ(e["modes"].get(modes), simdjson::SUCCESS);
      for (simdjson::dom::element m : modes) {
        std::vector<double> v;
        for (simdjson::dom::element x : m) v.push_back(x.is_uint64() ? static_cast<double>(uint64_t(x)) : double(x));
        if (v.size() != 3) {
          ADD_FAILURE() << "a mode is [count, centre, spread]: " << line;
          continue;
        }
        r.modes.push_back({static_cast<uint64_t>(v[0]), v[1], v[2]});
      }
      f.rows.push_back(r);
    } else if (type == "stats") {
      ++f.stats_lines;
    }
  }
  return f;
}

class CollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("collscope-cupti-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  CollectorConfig Config() {
    CollectorConfig c;
    c.dump_dir = dir_.string();
    c.host = "node3";
    c.pid = 4242;
    c.rank = 5;
    c.flush_ms = 20;
    return c;
  }
  fs::path File() { return dir_ / "node3-pid4242.kernels.jsonl.gz"; }
  fs::path dir_;
};

// The Kineto fixtures' kernels replayed through the fake GPU, from two threads while the writer
// flushes: per kernel, counts, totals, minima and maxima are exact, and the modes add up.
TEST_F(CollectorTest, ReplayedKinetoKernelsAreSummarisedExactly) {
  const fs::path trace = Fixtures() / "kineto/nccl_parser_config/nccl_data.json.gz";
  if (!fs::exists(trace)) GTEST_SKIP() << "shared fixtures absent (" << trace << ")";
  const std::vector<Kernel> kernels = KinetoKernels(trace);
  ASSERT_GT(kernels.size(), 1000u);
  ASSERT_EQ(InChild([&] {
              CollectorConfig c = Config();
              c.buffers = 4, c.buffer_bytes = 64 * 1024;  // many buffers' worth: the pool recycles
              Collector* col = Collector::Start(FakeCuptiApi(), c);
              if (col == nullptr) return 1;
              if (!fake_cupti_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ||
                  fake_cupti_enabled(CUPTI_ACTIVITY_KIND_KERNEL))
                return 2;  // concurrent kernels, never the serialising kind
              std::thread other([&] {
                for (size_t i = 1; i < kernels.size(); i += 2)
                  fake_cupti_kernel_launch(kernels[i].name.c_str(), 0, 7, kernels[i].start_ns,
                                           kernels[i].start_ns + kernels[i].dur_ns, kernels[i].grid, kernels[i].block);
              });
              for (size_t i = 0; i < kernels.size(); i += 2) {
                fake_cupti_kernel_launch(kernels[i].name.c_str(), 0, 7, kernels[i].start_ns,
                                         kernels[i].start_ns + kernels[i].dur_ns, kernels[i].grid, kernels[i].block);
                if (i % 256 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
              }
              other.join();
              col->Stop();
              const CollectorStats s = col->stats();
              return s.activities == kernels.size() && s.buffers_refused == 0 ? 0 : 3;
            }),
            0);
  simdjson::dom::parser parser;
  std::vector<std::string> keep;
  keep.reserve(100000);
  const SummaryFile f = ReadSummaries(File(), parser, &keep);
  std::map<std::string, std::vector<uint64_t>> raw;
  for (const Kernel& k : kernels) raw[k.Key()].push_back(k.dur_ns);
  std::map<std::string, SummaryFile::Row> summed;
  for (const SummaryFile::Row& r : f.rows) {
    uint64_t mode_count = 0;
    for (const DurationMode& m : r.modes) mode_count += m.count;
    EXPECT_EQ(mode_count, r.count);
    EXPECT_EQ(r.step, -1) << "no annotation library: time windows";
    EXPECT_EQ(r.end_ns - r.start_ns, 10'000'000'000u);
    SummaryFile::Row& s = summed[r.key];
    s.min_ns = s.count ? std::min(s.min_ns, r.min_ns) : r.min_ns;
    s.max_ns = std::max(s.max_ns, r.max_ns);
    s.count += r.count;
    s.total_ns += r.total_ns;
  }
  ASSERT_EQ(summed.size(), raw.size());
  for (const auto& [name, d] : raw) {
    const SummaryFile::Row& s = summed[name];
    EXPECT_EQ(s.count, d.size()) << name;
    uint64_t total = 0;
    for (uint64_t x : d) total += x;
    EXPECT_EQ(s.total_ns, total) << name;
    EXPECT_EQ(s.min_ns, *std::min_element(d.begin(), d.end())) << name;
    EXPECT_EQ(s.max_ns, *std::max_element(d.begin(), d.end())) << name;
  }
  EXPECT_GE(f.stats_lines, 1u);
  EXPECT_NE(keep.front().find("\"format\":\"collscope-kernels\",\"format_version\":1"), std::string::npos);
  EXPECT_NE(keep.front().find("\"rank\":5"), std::string::npos);
}

// Kernels are windowed by the annotated step that was current when they started.
bool StepEvery100Ms(uint64_t unix_ns, int64_t* step) {
  if (unix_ns < 1'000'000'000) return false;
  *step = static_cast<int64_t>((unix_ns - 1'000'000'000) / 100'000'000);
  return true;
}

TEST_F(CollectorTest, AnnotatedStepsAreTheWindows) {
  ASSERT_EQ(InChild([&] {
              CollectorConfig c = Config();
              c.find_step_at = [] { return StepAtFn(&StepEvery100Ms); };
              c.now_ns = [] { return uint64_t{0}; };  // nothing closes before Stop
              Collector* col = Collector::Start(FakeCuptiApi(), c);
              if (col == nullptr) return 1;
              std::this_thread::sleep_for(std::chrono::milliseconds(60));  // a tick finds the lookup
              for (int i = 0; i < 50; ++i) {
                const uint64_t t = 1'000'000'000 + static_cast<uint64_t>(i) * 10'000'000;  // 10 ms apart
                fake_cupti_kernel("gemm", 0, 1, t, t + 2'000'000);
              }
              fake_cupti_kernel("early", 0, 1, 500'000'000, 501'000'000);  // before the first step
              fake_cupti_memcpy(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 0, 2, 1'000'000'000, 1'000'500'000);
              col->Stop();
              return 0;
            }),
            0);
  simdjson::dom::parser parser;
  std::vector<std::string> keep;
  keep.reserve(1000);
  const SummaryFile f = ReadSummaries(File(), parser, &keep);
  std::map<int64_t, uint64_t> gemm_per_step;
  bool early_in_time_window = false, memcpy_seen = false;
  for (const SummaryFile::Row& r : f.rows) {
    if (r.name == "gemm") gemm_per_step[r.step] += r.count;
    if (r.name == "early") early_in_time_window = r.step == -1;
    if (r.name == "memcpy HtoD") memcpy_seen = r.step == 0 && r.stream == 2;
  }
  EXPECT_EQ(gemm_per_step, (std::map<int64_t, uint64_t>{{0, 10}, {1, 10}, {2, 10}, {3, 10}, {4, 10}}));
  EXPECT_TRUE(early_in_time_window);
  EXPECT_TRUE(memcpy_seen);
  EXPECT_NE(keep.front().find("\"window\":\"step\""), std::string::npos);
}

// An empty pool declines CUPTI's buffer requests: CUPTI drops those records and says so; both
// counts reach the stats line, and the job goes on.
TEST_F(CollectorTest, AnEmptyPoolIsCountedNotHidden) {
  ASSERT_EQ(InChild([&] {
              CollectorConfig c = Config();
              c.buffers = 2, c.buffer_bytes = 16 * 1024;
              c.gzip = false;  // the plain form, read below as text
              c.flush_ms = 60000;  // no periodic flush: the fake GPU outruns the pool
              fake_cupti_hold_full_buffers(1);  // CUPTI's worker hands full buffers back late
              Collector* col = Collector::Start(FakeCuptiApi(), c);
              if (col == nullptr) return 1;
              for (int i = 0; i < 2000; ++i) fake_cupti_kernel("k", 0, 0, 1000 + i, 2000 + i);
              col->Stop();
              return 0;
            }),
            0);
  std::ifstream in(dir_ / "node3-pid4242.kernels.jsonl");
  std::string line, stats;
  while (std::getline(in, line))
    if (line.find("\"type\":\"stats\"") != std::string::npos) stats = line;
  ASSERT_FALSE(stats.empty());
  simdjson::dom::parser parser;
  simdjson::dom::element e = parser.parse(stats).value();
  const uint64_t kernels = e["kernels"].get_uint64().value();
  const uint64_t dropped = e["dropped_by_cupti"].get_uint64().value();
  EXPECT_EQ(kernels + dropped, 2000u) << stats;
  EXPECT_GT(dropped, 0u) << stats;
  EXPECT_GT(e["buffers_refused"].get_uint64().value(), 0u) << stats;
}

// The injection entry point, loaded as CUDA loads it, with the fake CUPTI as its libcupti.so.
TEST_F(CollectorTest, InjectionWritesSummariesAtExitAndSurvivesAMissingCupti) {
  const int rc = InChild([&] {
    setenv("COLLSCOPE_DUMP_DIR", dir_.c_str(), 1);
    setenv("COLLSCOPE_CUPTI_LIBRARY", COLLSCOPE_FAKE_CUPTI_PATH, 1);
    setenv("RANK", "3", 1);
    void* lib = dlopen(COLLSCOPE_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return 1;
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
    if (init == nullptr || init() != 1) return 2;
    void* fake = dlopen(COLLSCOPE_FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    auto kernel = reinterpret_cast<void (*)(const char*, uint32_t, uint32_t, uint64_t, uint64_t)>(
        dlsym(fake, "fake_cupti_kernel"));
    if (kernel == nullptr) return 3;
    for (int i = 0; i < 300; ++i) kernel("sgemm", 1, 3, 1'700'000'000'000'000'000 + i * 1000000, 1'700'000'000'000'000'000 + i * 1000000 + 50000 + i);
    std::exit(0);  // the atexit flush writes the file
  });
  ASSERT_EQ(rc, 0);
  bool found = false;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().string().find(".kernels.jsonl") == std::string::npos) continue;
    simdjson::dom::parser parser;
    std::vector<std::string> keep;
    keep.reserve(100);
    const SummaryFile f = ReadSummaries(e.path(), parser, &keep);
    uint64_t n = 0;
    for (const auto& r : f.rows) n += r.name == "sgemm" ? r.count : 0;
    EXPECT_EQ(n, 300u);
    EXPECT_NE(keep.front().find("\"rank\":3"), std::string::npos);
    found = true;
  }
  EXPECT_TRUE(found) << "no summary file in " << dir_;

  const int missing = InChild([&] {
    setenv("COLLSCOPE_DUMP_DIR", dir_.c_str(), 1);
    setenv("COLLSCOPE_CUPTI_LIBRARY", "/nonexistent/libcupti.so", 1);
    void* lib = dlopen(COLLSCOPE_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
    return init != nullptr && init() == 1 ? 0 : 1;  // says so, and lets CUDA go on
  });
  EXPECT_EQ(missing, 0);
}

}  // namespace
}  // namespace collscope::capture
