#include "analysis/diagnose/kernel_summaries.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "analysis/diagnose/diagnose.h"
#include "core/readers/kernel_summary.h"
#include "tests/kernel_summary_job.h"

namespace collscope::diagnose {
namespace {

namespace fs = std::filesystem;

double GeometricMean(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += std::log(v[i]);
  return std::exp(s / static_cast<double>(to - from));
}

double LogSd(const std::vector<double>& v, size_t from, size_t to) {
  const double m = std::log(GeometricMean(v, from, to));
  double s = 0;
  for (size_t i = from; i < to; ++i) s += (std::log(v[i]) - m) * (std::log(v[i]) - m);
  return std::sqrt(s / static_cast<double>(to - from));
}

TEST(SummarySamples, EachModeGetsItsShareAroundItsCentre) {
  // 812 executions: 64 samples, 790 : 22 by largest remainders is 62.27 : 1.73 -> 62 : 2.
  const std::vector<LogNormalMode> modes = {{790, 114.8, 0.021}, {22, 158.3, 0.012}};
  const std::vector<double> s = SummarySamples(812, 90, 170, modes);
  ASSERT_EQ(s.size(), 64u);
  // The evenly spaced quantiles of a log-normal: their geometric mean is its centre, and their
  // log spread close to its spread.
  EXPECT_NEAR(GeometricMean(s, 0, 62), 114.8, 1e-9);
  EXPECT_NEAR(LogSd(s, 0, 62), 0.021, 0.021 * 0.05);
  EXPECT_NEAR(GeometricMean(s, 62, 64), 158.3, 1e-9);
  for (size_t i = 0; i < 62; ++i) EXPECT_LT(std::fabs(s[i] / 114.8 - 1), 0.07) << i;
  // Fewer executions than the cap: one sample each.
  EXPECT_EQ(SummarySamples(3, 1, 1000, {{2, 10, 0.1}, {1, 20, 0.1}}).size(), 3u);
  // The exact min and max bound every sample, however wide a mode.
  for (double v : SummarySamples(40, 99, 101, {{40, 100, 0.5}})) {
    EXPECT_GE(v, 99);
    EXPECT_LE(v, 101);
  }
}

class KernelSummaryDiagnosis : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("collscope-summaries-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto s = Store::Open(":memory:");
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(*s);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Ingest(const testing::SummaryJob& job) {
    testing::WriteSummaryJob(dir_.string(), job);
    auto rep = readers::IngestKernelSummaries(*store_, {dir_.string()}, "job");
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    ASSERT_EQ(rep->files_read, static_cast<uint64_t>(job.hosts * job.gpus_per_host));
    ASSERT_EQ(rep->lines_rejected, 0u) << rep->first_rejections[0];
  }
  fs::path dir_;
  std::unique_ptr<Store> store_;
};

const std::string kGemm = std::string(testing::kSummaryJobGemm) + "<<<132x1x1, 384x1x1>>>";

const Evidence* Find(const Finding& f, const std::string& key) {
  for (const Evidence& e : f.evidence)
    if (e.key == key) return &e;
  return nullptr;
}

// The modes' centres in "180.2 us (75%), 420.1 us (25%)".
std::vector<double> Centres(const std::string& text) {
  std::vector<double> out;
  for (size_t at = 0; at < text.size();) {
    out.push_back(std::stod(text.substr(at)));
    const size_t next = text.find(", ", at);
    at = next == std::string::npos ? text.size() : next + 2;
  }
  return out;
}

TEST_F(KernelSummaryDiagnosis, LoaderBuildsComputeSeriesWithExactTotals) {
  testing::SummaryJob job;
  job.hosts = 1;
  job.gpus_per_host = 3;
  job.steps = 2;
  Ingest(job);
  // A file whose process named no rank is said, not compared.
  std::ofstream(dir_ / "anon.kernels.jsonl")
      << "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":1,\"host\":\"node9\",\"pid\":1,"
         "\"rank\":-1,\"window\":\"time\"}\n";
  ASSERT_TRUE(readers::IngestKernelSummaries(*store_, {(dir_ / "anon.kernels.jsonl").string()}, "job").ok());
  SummarySource source;
  auto d = LoadKernelSummaryData(*store_, "job", &source);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(source.files, 4);
  EXPECT_EQ(source.ranks, 3);
  ASSERT_EQ(source.unusable.size(), 1u);
  EXPECT_EQ(source.unusable[0].rfind((dir_ / "anon.kernels.jsonl").string() + ": kernel summaries that name no rank", 0), 0u)
      << source.unusable[0];
  EXPECT_EQ(d->ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(d->hosts.at(2), "node0");
  // Compute kernels only, each name at each launch configuration its own: seven, one series per
  // rank and kernel.
  EXPECT_EQ(d->names.size(), 7u);
  for (const std::string& n : d->names) EXPECT_TRUE(n.find("nccl") == std::string::npos && n.find("memcpy") == std::string::npos) << n;
  EXPECT_NE(std::find(d->names.begin(), d->names.end(), "flash_fwd_kernel<<<132x1x1, 128x1x1>>>"), d->names.end());
  EXPECT_NE(std::find(d->names.begin(), d->names.end(), "flash_fwd_kernel<<<264x1x1, 128x1x1>>>"), d->names.end());
  ASSERT_EQ(d->series.size(), 21u);
  for (const KernelSeries& s : d->series) {
    const std::string& name = d->names[static_cast<size_t>(s.name)];
    auto total = store_->Query(
        "SELECT sum(total_us), sum(least(count, 64)) FROM kernel_summaries WHERE rank = " + std::to_string(s.rank) +
        " AND name || '<<<' || array_to_string(grid, 'x') || ', ' || array_to_string(block, 'x') || '>>>' = " +
        SqlString(name));
    ASSERT_TRUE(total.ok());
    EXPECT_DOUBLE_EQ(s.total_us, std::stod(*total->rows[0][0])) << name;  // exact, not the samples' sum
    EXPECT_EQ(s.dur_us.size(), std::stoul(*total->rows[0][1])) << name;
    EXPECT_EQ(s.step.front(), 1);
    EXPECT_EQ(s.step.back(), 2);
    EXPECT_TRUE(std::is_sorted(s.start_us.begin(), s.start_us.end())) << name;
  }
  // The main GEMM's two shapes stay two modes, at their centres.
  auto gemm_of_rank0 = std::find_if(d->series.begin(), d->series.end(), [&](const KernelSeries& s) {
    return s.rank == 0 && d->names[static_cast<size_t>(s.name)] == kGemm;
  });
  ASSERT_NE(gemm_of_rank0, d->series.end());
  const KernelSeries& gemm = *gemm_of_rank0;
  std::vector<double> step1(gemm.dur_us.begin(), gemm.dur_us.begin() + 64);
  std::sort(step1.begin(), step1.end());
  EXPECT_NEAR(GeometricMean(step1, 0, 58), 180, 180 * 0.01);  // 360 : 40 of 64 -> 57.6 : 6.4 -> 58 : 6
  EXPECT_NEAR(GeometricMean(step1, 58, 64), 420, 420 * 0.01);
  // Per-(rank, step) compute time and the NCCL kernels' per-window means.
  ASSERT_EQ(d->step_compute.size(), 6u);
  auto step0 = store_->Query("SELECT sum(total_us) FROM kernel_summaries WHERE rank = 0 AND step = 1 AND kind = 'compute'");
  ASSERT_TRUE(step0.ok());
  EXPECT_DOUBLE_EQ(d->step_compute[0].second, std::stod(*step0->rows[0][0]));
  ASSERT_EQ(d->nccl.size(), 6u);
  EXPECT_NEAR(d->nccl[0].dur_us, 400, 400 * 0.01);
}

TEST_F(KernelSummaryDiagnosis, HealthyJobHasNoKernelFinding) {
  Ingest(testing::SummaryJob{});
  auto d = LoadKernelSummaryData(*store_, "job");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->ranks.size(), 8u);
  for (const Finding& f : DetectSummaryAnomalies(*d)) ADD_FAILURE() << f.summary;
}

TEST_F(KernelSummaryDiagnosis, SlowGemmOnOneRankIsItsFinding) {
  testing::SummaryJob job;
  job.slow_rank = 5;
  Ingest(job);
  auto d = LoadKernelSummaryData(*store_, "job");
  ASSERT_TRUE(d.ok()) << d.status().message();
  const std::vector<Finding> found = DetectSummaryAnomalies(*d);
  ASSERT_EQ(found.size(), 1u);
  const Finding& f = found[0];
  EXPECT_EQ(f.kind, Kind::kSlowCompute);
  EXPECT_EQ(f.detector, "kernel.summaries");
  EXPECT_EQ(f.ranks, std::vector<int>{5});
  EXPECT_EQ(f.hosts, std::vector<std::string>{"node1"});
  EXPECT_EQ(f.victims, (std::vector<int>{0, 1, 2, 3, 4, 6, 7}));
  ASSERT_NE(Find(f, "worst_kernel"), nullptr);
  EXPECT_EQ(Find(f, "worst_kernel")->text, kGemm);
  ASSERT_NE(Find(f, "first_step"), nullptr);
  EXPECT_EQ(Find(f, "first_step")->value, 8);
  EXPECT_EQ(Find(f, "last_step")->value, 20);
  ASSERT_NE(Find(f, "slowdown"), nullptr);
  EXPECT_NEAR(Find(f, "slowdown")->value, 1.3, 0.03);
  // The peers' GEMM has the two shapes' modes, each where the files put it.
  const std::vector<double> peer = Centres(Find(f, "worst_kernel_peer_modes")->text);
  ASSERT_EQ(peer.size(), 2u) << Find(f, "worst_kernel_peer_modes")->text;
  EXPECT_NEAR(peer[0], 180, 180 * 0.02);
  EXPECT_NEAR(peer[1], 420, 420 * 0.02);
  // Its all-reduce kernels are the shortest: the others wait for it.
  ASSERT_NE(Find(f, "nccl_kernel_time_ratio"), nullptr);
  EXPECT_LT(Find(f, "nccl_kernel_time_ratio")->value, 0.9);
}

// `diagnose --db` on a store that holds the summaries: the finding, tier D, and what was read.
TEST_F(KernelSummaryDiagnosis, DiagnoseStoreReadsTheSummaries) {
  testing::SummaryJob job;
  job.slow_rank = 5;
  Ingest(job);
  DiagnoseOptions o;
  o.run = "job";
  InputSummary read;
  auto f = DiagnoseStore(*store_, o, nullptr, &read);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->size(), 1u);
  EXPECT_EQ((*f)[0].ranks, std::vector<int>{5});
  EXPECT_EQ(read.kernel_summaries, 8);
  EXPECT_TRUE(read.usable());
  EXPECT_NE(read.ToText().find("read: 8 CUPTI kernel-summary files"), std::string::npos) << read.ToText();
}

// The same straggler in Kineto kernels (traces that name no host) and in kernel summaries of
// the run is one finding, found by both.
TEST_F(KernelSummaryDiagnosis, KinetoAndSummariesOfOneStragglerAreOneFinding) {
  testing::SummaryJob job;
  job.slow_rank = 5;
  Ingest(job);
  auto run = store_->RunId("job", false);
  ASSERT_TRUE(run.ok());
  const std::string rid = std::to_string(*run);
  // 200 GEMMs a step on 8 ranks, rank 5's 1.3x slower from step 8; durations spread by a hash.
  ASSERT_TRUE(store_->Exec(
      "INSERT INTO kineto_traces (run_id, trace_id, path, rank, world_size) SELECT " + rid +
      ", r, 'rank' || r || '.pt.trace.json', r, 8 FROM range(8) t(r);\n"
      "INSERT INTO kernels (run_id, trace_id, rank, step, name, kind, device, stream, start_us, dur_us) SELECT " + rid +
      ", r, r, s, 'sm90_gemm', 'compute', 0, 7, 1764666000000000 + s * 300000 + i * 1000, "
      "180 * (CASE WHEN r = 5 AND s >= 8 THEN 1.3 ELSE 1 END) * exp(0.04 * ((hash(r, s, i) % 1000) / 1000.0 - 0.5)) "
      "FROM range(8) a(r), range(1, 21) b(s), range(200) c(i)").ok());
  DiagnoseOptions o;
  o.run = "job";
  std::vector<Suppressed> merged;
  o.suppressed = &merged;
  InputSummary read;
  auto f = DiagnoseStore(*store_, o, nullptr, &read);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->size(), 1u) << FindingsToText(*f);
  const Finding& x = (*f)[0];
  EXPECT_EQ(x.ranks, std::vector<int>{5});
  EXPECT_EQ(x.hosts, std::vector<std::string>{"node1"});
  ASSERT_NE(Find(x, "also_detected_by"), nullptr) << FindingsToText(*f);
  EXPECT_NE(Find(x, "also_detected_by")->text.find("kernel."), std::string::npos);
  EXPECT_TRUE(read.stored_kernels);
}

}  // namespace
}  // namespace collscope::diagnose
