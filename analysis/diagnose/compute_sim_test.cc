// Per-rank compute phases end to end on simulated jobs: a slowed pipeline stage on its own host
// (which the communication records alone cannot tell from a bubble) against a real bubble of the
// same stage, through DiagnosePaths (Inspector logs + step/phase series), through a store that holds both
// (`ingest` then `diagnose --db`), and through L3 (Kineto).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/kernel_detect.h"
#include "core/ingest.h"
#include "core/readers/step_file.h"
#include "sim/sim.h"
#include "tests/test_util.h"

namespace collscope::diagnose {
namespace {

// 16 GPUs on 4 hosts, TP=2 PP=4 DP=2: pipeline stage s is host s.
sim::SimConfig Pp4Job(const std::string& dir, sim::FaultSpec fault, int kineto_ranks) {
  sim::SimConfig c;
  c.seed = 5;
  c.cluster.hosts = 4;
  c.cluster.gpus_per_host = 4;
  c.cluster.nics_per_host = 4;
  c.parallel.tp = 2;
  c.parallel.pp = 4;
  c.workload.layers = 4;
  c.workload.hidden = 4096;
  c.workload.seq_len = 2048;
  c.workload.micro_batches = 4;
  c.workload.steps = 40;
  c.inspector.dump_interval_us = 200000;
  c.output.dir = dir;
  c.output.kineto_max_ranks = kineto_ranks;
  c.faults.push_back(std::move(fault));
  return c;
}

// Simulates the job and diagnoses its Inspector logs with its step/phase series.
std::vector<Finding> SimulateAndDiagnose(const sim::SimConfig& c) {
  sim::SimStats stats;
  std::string err;
  EXPECT_EQ(sim::Simulate(c, &stats).message(), "");
  auto f = DiagnosePaths({c.output.dir + "/nccl-inspector", c.output.dir + "/steps"}, DiagnoseOptions{});
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? *f : std::vector<Finding>{};
}

std::vector<Finding> Of(const std::vector<Finding>& fs, Kind k) {
  std::vector<Finding> out;
  for (const Finding& f : fs)
    if (f.kind == k) out.push_back(f);
  return out;
}

double Ev(const Finding& f, const std::string& key) {
  for (const Evidence& e : f.evidence)
    if (e.key == key) return e.value;
  return -1;
}

TEST(ComputeGrowthSim, SlowStageIsSlowComputeOfItsHostAndNoBubble) {
  testing::TempDir dir;
  const std::string job = dir / "slow";
  auto c = Pp4Job(job, {"host_slowdown", {{"host", "1"}, {"factor", "1.5"}, {"start_step", "10"}, {"end_step", "30"}}}, 16);
  const std::vector<Finding> f = SimulateAndDiagnose(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto slow = Of(f, Kind::kSlowCompute);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].hosts, (std::vector<std::string>{"node-001"}));
  EXPECT_EQ(slow[0].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(Ev(slow[0], "first_step"), 10);
  EXPECT_EQ(Ev(slow[0], "last_step"), 29);
  EXPECT_NEAR(Ev(slow[0], "compute_growth"), 0.5, 0.05);
  EXPECT_TRUE(Of(f, Kind::kPipelineBubble).empty());
  // The same with the records already in a store (`diagnose --db job.duckdb steps/`):
  // the step series is mapped to the store's hosts and checked against its findings.
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto files = DiscoverInputs({job + "/nccl-inspector"});
  ASSERT_TRUE(files.ok());
  ASSERT_TRUE(Ingest(**store, files->files, IngestOptions{}).ok());
  auto g = DiagnosePaths({job + "/steps"}, DiagnoseOptions{}, nullptr, store->get());
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto slow2 = Of(*g, Kind::kSlowCompute);
  ASSERT_EQ(slow2.size(), 1u);
  EXPECT_EQ(slow2[0].hosts, (std::vector<std::string>{"node-001"}));  // hosts from the store
  // And with the step series stored beside the records (`collscope ingest` of the whole job
  // directory, then `diagnose --db`): the same finding, from the store alone.
  auto both = Store::Open(":memory:");
  ASSERT_TRUE(both.ok());
  ASSERT_TRUE(Ingest(**both, files->files, IngestOptions{}).ok());
  auto sr = readers::IngestStepFiles(**both, {job}, "default");
  ASSERT_TRUE(sr.ok()) << sr.status().message();
  EXPECT_GT(sr->steps, 0u);
  DiagnoseOptions dflt;
  dflt.run = "default";
  InputSummary read;
  auto h = DiagnoseStore(**both, dflt, nullptr, &read);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_GT(read.step_series, 0);
  auto slow3 = Of(*h, Kind::kSlowCompute);
  ASSERT_EQ(slow3.size(), 1u);
  EXPECT_EQ(slow3[0].hosts, slow2[0].hosts);
  EXPECT_EQ(slow3[0].ranks, slow2[0].ranks);
  EXPECT_EQ(slow2[0].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_TRUE(Of(*g, Kind::kPipelineBubble).empty());
  EXPECT_FALSE(DiagnosePaths({job + "/nccl-inspector"}, DiagnoseOptions{}, nullptr, store->get()).ok());
  // L3 from the Kineto traces alone: every rank of the host, against the other hosts.
  auto k = DiagnoseKinetoPaths({job + "/kineto"}, false);
  ASSERT_TRUE(k.ok()) << k.status().message();
  std::vector<int> ranks;
  for (const Finding& x : Of(*k, Kind::kSlowCompute)) {
    EXPECT_EQ(x.hosts, (std::vector<std::string>{"node-001"}));
    EXPECT_EQ(Ev(x, "first_step"), 10);
    EXPECT_EQ(Ev(x, "last_step"), 29);
    ranks.insert(ranks.end(), x.ranks.begin(), x.ranks.end());
  }
  SortUnique(&ranks);
  EXPECT_EQ(ranks, (std::vector<int>{4, 5, 6, 7}));
}

TEST(ComputeGrowthSim, BubbleOfTheSameStageIsNoSlowCompute) {
  testing::TempDir dir;
  const std::string job = dir / "bubble";
  auto c = Pp4Job(job, {"pipeline_bubble", {{"stage", "1"}, {"delay_us", "15000"}, {"start_step", "10"}, {"end_step", "30"}}}, 0);
  const std::vector<Finding> f = SimulateAndDiagnose(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  EXPECT_TRUE(Of(f, Kind::kSlowCompute).empty());
  auto b = Of(f, Kind::kPipelineBubble);
  // Stage 2 delivers late too (it waited for stage 1), but its own time did not grow: only the
  // stage with the gap is the bubble.
  ASSERT_EQ(b.size(), 1u) << FindingsToText(b);
  EXPECT_EQ(b[0].ranks, (std::vector<int>{4, 5, 6, 7}));
  // The records and the stage's own step phases both saw it: one finding names both.
  std::string detectors = b[0].detector;
  for (const Evidence& e : b[0].evidence)
    if (e.key == "also_detected_by") detectors += ", " + e.text;
  EXPECT_NE(detectors.find("comm.pipeline_bubble"), std::string::npos) << detectors;
  EXPECT_NE(detectors.find("steps.stage_idle"), std::string::npos) << detectors;
}

TEST(ComputeGrowthSim, BubbleShorterThanTwoDumpWindowsFromTheStepPhases) {
  // 2 s dump windows and a bubble of about 1.5 s: the records' detector needs two windows, the
  // step phases show each step (the 512-GPU bubble of the large suite, in small).
  testing::TempDir dir;
  const std::string job = dir / "short";
  auto c = Pp4Job(job, {"pipeline_bubble", {{"stage", "1"}, {"delay_us", "10000"}, {"start_step", "12"}, {"end_step", "27"}}}, 0);
  c.inspector.dump_interval_us = 2000000;
  const std::vector<Finding> f = SimulateAndDiagnose(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto b = Of(f, Kind::kPipelineBubble);
  ASSERT_EQ(b.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(b[0].detector, "steps.stage_idle");
  EXPECT_EQ(b[0].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(b[0].hosts, (std::vector<std::string>{"node-001"}));
  EXPECT_EQ(Ev(b[0], "first_step"), 12);
  EXPECT_EQ(Ev(b[0], "last_step"), 26);
  EXPECT_TRUE(Of(f, Kind::kSlowCompute).empty());
  EXPECT_TRUE(Of(f, Kind::kHostStall).empty());
}

TEST(ComputeGrowthSim, BubbleWithoutPipelineRecordsFromTheDeclaredStages) {
  // The 2.29 Inspector writes no Send/Recv records, so the records say nothing of the pipeline;
  // the step series declare each rank's stage (parallel.pp), and that is where the stage comes
  // from (a 128-GPU PP 8 job of a generality sweep went unnamed).
  testing::TempDir dir;
  const std::string job = dir / "bubble229";
  auto c = Pp4Job(job, {"pipeline_bubble", {{"stage", "1"}, {"delay_us", "15000"}, {"start_step", "10"}, {"end_step", "30"}}}, 0);
  c.inspector.flavor = "2.29";
  const std::vector<Finding> f = SimulateAndDiagnose(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto b = Of(f, Kind::kPipelineBubble);
  ASSERT_EQ(b.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(b[0].detector, "steps.stage_idle");
  EXPECT_EQ(b[0].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_TRUE(Of(f, Kind::kSlowCompute).empty()) << FindingsToText(f);
}

}  // namespace
}  // namespace collscope::diagnose
