// L3 and L4 end to end on small simulated jobs: a GPU straggler found from the Kineto traces
// through the store, and exported with its collectives (verbose Inspector records, or per dump
// interval where records have no start times).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/kernel_detect.h"
#include "analysis/diagnose/perfetto.h"
#include "analysis/diagnose/perfetto_test_util.h"
#include "core/ingest.h"
#include "core/readers/ingest_inputs.h"
#include "core/readers/kineto.h"
#include "sim/sim.h"
#include "tests/test_util.h"

namespace collscope::diagnose {
namespace {

using perfetto_test::Ev;
using perfetto_test::Parse;
using perfetto_test::Problems;

TEST(KernelDetector, SimulatedGpuStragglerThroughKineto) {
  testing::TempDir dir;
  sim::SimConfig c;
  c.seed = 11;
  c.cluster.hosts = 2;
  c.cluster.gpus_per_host = 8;
  c.workload.steps = 16;
  c.workload.layers = 4;
  c.output.dir = dir / "job";
  c.output.steps = false;
  c.faults.push_back({"gpu_straggler", {{"rank", "5"}, {"factor", "1.3"}, {"start_step", "6"},
                                        {"end_step", "10"}}});
  sim::SimStats stats;
  std::string err;
  ASSERT_EQ(sim::Simulate(c, &stats).message(), "");
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto rep = readers::IngestKineto(**store, {dir / "job"}, "sim");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->files_read, 16u);
  EXPECT_EQ(rep->steps, 16u * 16u);
  auto f = DiagnoseKineto(**store, "sim", true);
  ASSERT_TRUE(f.ok()) << f.status().message();
  std::vector<Finding> slow;
  for (const Finding& x : *f)
    if (x.kind == Kind::kSlowCompute) slow.push_back(x);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].ranks, (std::vector<int>{5}));
  EXPECT_EQ(slow[0].hosts, (std::vector<std::string>{"node-000"}));
  std::map<std::string, double> ev;
  for (const Evidence& e : slow[0].evidence) ev[e.key] = e.value;
  EXPECT_EQ(ev["first_step"], 6);
  EXPECT_EQ(ev["last_step"], 9);  // end_step is exclusive (ground_truth.json: steps 6-9)
  EXPECT_NEAR(ev["slowdown"], 1.3, 0.05);
  EXPECT_GT(ev["grid_ratio"], 1.1);
  // The synchronisation trap: the straggler waits least, its NCCL kernels are the shortest.
  EXPECT_GT(ev["nccl_kernel_time_ratio"], 0);
  EXPECT_LT(ev["nccl_kernel_time_ratio"], 0.9);
  // Victims: its data-, tensor- and pipeline-parallel peers.
  EXPECT_FALSE(slow[0].victims.empty());
  EXPECT_EQ(std::count(slow[0].victims.begin(), slow[0].victims.end(), 5), 0);
}

// The exported jobs: 8 GPUs on 2 hosts, TP 2 PP 2, 12 steps, written under DIR/job.
sim::SimConfig ExportedJob(const testing::TempDir& dir) {
  sim::SimConfig c;
  c.seed = 5;
  c.cluster.hosts = 2;
  c.cluster.gpus_per_host = 4;
  c.cluster.nics_per_host = 4;
  c.parallel.tp = 2;
  c.parallel.pp = 2;
  c.workload.steps = 12;
  c.workload.layers = 4;
  c.output.dir = dir / "job";
  c.output.steps = false;
  return c;
}

// Simulates the job and ingests INPUTS (its files) into a store in memory; null on a failure, which
// it reports.
std::unique_ptr<Store> SimulateAndIngest(const sim::SimConfig& c, const std::string& inputs) {
  sim::SimStats stats;
  const Status simulated = sim::Simulate(c, &stats);
  EXPECT_TRUE(simulated.ok()) << simulated.message();
  auto store = Store::Open(":memory:");
  EXPECT_TRUE(store.ok());
  if (!simulated.ok() || !store.ok()) return nullptr;
  IngestOptions io;
  io.run = "sim";
  io.threads = 1;
  auto ingested = Ingest(**store, {inputs}, io);
  EXPECT_TRUE(ingested.ok()) << ingested.status().message();
  return ingested.ok() ? std::move(*store) : nullptr;
}

// A slow_compute finding of rank 3, with rank 2 its victim, from the first row's two columns
// (start and end, microseconds) of a query.
Finding Rank3SlowOver(const QueryResult& span) {
  Finding f;
  f.kind = Kind::kSlowCompute;
  f.ranks = {3};
  f.victims = {2};
  f.start_us = std::stoll(*span.rows[0][0]);
  f.end_us = std::stoll(*span.rows[0][1]);
  return f;
}

TEST(Perfetto, SimulatedStragglerWithCollectives) {
  testing::TempDir dir;
  sim::SimConfig c = ExportedJob(dir);
  c.inspector.verbose = true;  // start/stop times per collective
  c.faults.push_back({"gpu_straggler", {{"rank", "3"}, {"factor", "1.4"}, {"start_step", "5"},
                                        {"end_step", "8"}}});
  auto store = SimulateAndIngest(c, dir / "job");
  ASSERT_TRUE(store);
  ASSERT_TRUE(readers::IngestKineto(*store, {dir / "job"}, "sim").ok());
  auto f = DiagnoseKineto(*store, "sim", false);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->size(), 1u);
  ASSERT_EQ((*f)[0].ranks, (std::vector<int>{3}));
  std::string json;
  auto rep = ExportPerfetto(*store, *f, PerfettoOptions{}, &json);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  auto ev = Parse(json);
  EXPECT_EQ(Problems(ev), std::vector<std::string>{});
  EXPECT_GT(rep->kernels, 100u);
  EXPECT_GT(rep->collectives, 10u);
  EXPECT_EQ(rep->interval_slices, 0u);  // every record placed by its own start time
  EXPECT_EQ(rep->note, "");
  // Context step 4 and steps 5-7, for rank 3 and its peers.
  std::set<std::string> steps;
  std::map<int64_t, size_t> colls;
  bool named = false, instant = false;
  for (const Ev& e : ev) {
    if (e.cat == "step" && e.pid == 3) steps.insert(e.name);
    if (e.cat == "nccl_record") ++colls[e.pid];
    if (e.ph == "M" && e.name == "process_name" && e.pid == 3)
      named = e.args.find("rank 3 (node-000)") != std::string::npos;
    if (e.ph == "i" && e.name == "slow_compute: rank 3") instant = true;
  }
  EXPECT_EQ(steps, (std::set<std::string>{"ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6",
                                          "ProfilerStep#7"}));
  EXPECT_TRUE(named);
  EXPECT_TRUE(instant);
  EXPECT_GT(colls[3], 0u);  // the straggler's own collectives, placed by its global rank
  EXPECT_GE(colls.size(), 2u);
}

// Without NCCL_INSPECTOR_DUMP_VERBOSE=1 a record has no start time: the export shows each rank's
// collectives per communicator and dump pass, one slice over the interval since its previous pass,
// and says so in the trace.
TEST(Perfetto, RecordsWithoutStartTimesAreSlicesPerDumpInterval) {
  testing::TempDir dir;
  sim::SimConfig c = ExportedJob(dir);
  c.inspector.dump_interval_us = 20000;
  auto store = SimulateAndIngest(c, dir / "job/nccl-inspector");
  ASSERT_TRUE(store);
  auto span = store->Query("SELECT min(dump_ts_us), max(dump_ts_us) FROM records");
  ASSERT_TRUE(span.ok());
  std::string json;
  auto rep = ExportPerfetto(*store, {Rank3SlowOver(*span)}, PerfettoOptions{}, &json);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->collectives, 0u);
  EXPECT_GT(rep->interval_slices, 0u);
  EXPECT_NE(rep->note.find("NCCL_INSPECTOR_DUMP_VERBOSE=1"), std::string::npos) << rep->note;
  EXPECT_NE(json.find("\"note\": \"collectives without start times"), std::string::npos);
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> tracks;
  size_t slices = 0;
  EXPECT_EQ(Problems(Parse(json)), std::vector<std::string>{});
  for (const Ev& e : Parse(json)) {
    if (e.cat != "nccl_dump_interval") continue;
    ++slices;
    // One dump pass to the next: about the dump interval, not the microsecond between two lines
    // of one pass.
    EXPECT_GT(e.dur, 0.5 * c.inspector.dump_interval_us) << e.name;
    EXPECT_LT(e.dur, 1.5 * c.inspector.dump_interval_us) << e.name;
    EXPECT_NE(e.name.find(" x "), std::string::npos) << e.name;
    tracks[{e.pid, e.tid}].push_back({e.ts, e.ts + e.dur});
  }
  EXPECT_EQ(slices, rep->interval_slices);
  std::set<int64_t> ranks;
  for (auto& [track, spans] : tracks) {
    ranks.insert(track.first);
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "overlapping slices on rank " << track.first;
  }
  EXPECT_EQ(ranks, (std::set<int64_t>{2, 3}));  // the culprit and its victim
  EXPECT_GE(tracks.size(), 4u);  // a track per communicator of each
}

// With step/phase series (the annotation API's) and no Kineto trace, each rank's steps are on its
// steps track, so that its collectives without start times, a slice per dump interval, are read
// against its steps.
TEST(Perfetto, StepSeriesStepsAreOnTheStepsTrack) {
  testing::TempDir dir;
  sim::SimConfig c = ExportedJob(dir);
  c.output.steps = true;
  c.inspector.dump_interval_us = 20000;
  auto store = SimulateAndIngest(c, dir / "job/nccl-inspector");
  ASSERT_TRUE(store);
  IngestOptions io;
  io.run = "sim";  // SimulateAndIngest's
  auto series = readers::IngestInputs(*store, {dir / "job/steps"}, io);
  ASSERT_TRUE(series.ok()) << series.status().message();
  auto span = store->Query(
      "SELECT CAST(min(start_us) AS BIGINT), CAST(max(start_us + dur_us) AS BIGINT) FROM steps "
      "WHERE step IN (5, 6)");
  ASSERT_TRUE(span.ok());
  ASSERT_TRUE(span->rows.size() == 1 && span->rows[0][0] && span->rows[0][1])
      << "no steps 5 and 6 stored";
  std::string json;
  auto rep = ExportPerfetto(*store, {Rank3SlowOver(*span)}, PerfettoOptions{}, &json);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  auto ev = Parse(json);
  EXPECT_EQ(Problems(ev), std::vector<std::string>{});
  EXPECT_GT(rep->interval_slices, 0u);
  std::map<int64_t, std::set<std::string>> steps;  // rank -> its step slices
  for (const Ev& e : ev)
    if (e.cat == "step") steps[e.pid].insert(e.name);
  // Steps 5 and 6, and step 4 before them, of the straggler and its victim.
  const std::set<std::string> want = {"step 4", "step 5", "step 6"};
  EXPECT_EQ(steps[3], want);
  EXPECT_EQ(steps[2], want);
  EXPECT_EQ(rep->steps, 6u);
}

// The 256-GPU jobs (TP 8, PP 4, EP 4 on 32 hosts of 8): a degraded NIC, a slow GPU and a
// hang, each diagnosed from its Inspector logs and state files (tier B) in the store and exported
// with its findings. Each trace passes the format's checks and shows the culprit: a root-cause
// slice from the finding's start on the culprit rank's track, or on one of its host's ranks'.
TEST(Perfetto, The256GpuJobsCulpritsAreInTheirTraces) {
#ifdef COLLSCOPE_SANITIZED
  GTEST_SKIP()
      << "256 GPUs take minutes under the sanitizers; the small jobs above run the same export";
#endif
  struct Case {
    const char* fault;
    int rank;          // the culprit rank, or -1 for a host
    const char* host;  // the culprit host
  };
  for (const Case& k :
       {Case{"kind=nic_degrade,host=13,factor=0.25,start_step=5,end_step=20", -1, "node-013"},
        Case{"kind=gpu_straggler,rank=150,factor=1.4,start_step=5,end_step=20", 150, "node-018"},
        Case{"kind=hang,rank=77,comm=tp,start_step=12", 77, "node-009"}}) {
    SCOPED_TRACE(k.fault);
    testing::TempDir dir;
    sim::SimConfig c;
    c.seed = 5;
    c.cluster.hosts = 32;
    c.cluster.gpus_per_host = c.cluster.nics_per_host = 8;
    c.parallel.tp = 8;
    c.parallel.pp = 4;
    c.parallel.ep = 4;
    c.workload.steps = 24;
    c.workload.layers = 4;
    c.hang_timeout_s = 30;
    c.output.dir = dir / "job";
    c.output.steps = false;
    c.output.kineto_max_ranks = 0;
    sim::FaultSpec spec;
    ASSERT_EQ(sim::ParseFaultSpec(k.fault, &spec).message(), "");
    c.faults.push_back(spec);
    auto store = SimulateAndIngest(c, dir / "job/nccl-inspector");
    ASSERT_TRUE(store);
    std::vector<std::string> state_files;  // tier B: the plugin's in-flight state, beside the logs
    for (const auto& e : std::filesystem::directory_iterator(dir / "job/nccl-inspector"))
      if (e.path().string().ends_with(".inflight.json")) state_files.push_back(e.path());
    DiagnoseOptions o;
    o.run = "sim";  // SimulateAndIngest's
    auto f = DiagnosePaths(state_files, o, nullptr, store.get());
    ASSERT_TRUE(f.ok()) << f.status().message();
    const Finding* culprit = nullptr;
    for (const Finding& x : *f)
      if (k.rank >= 0 ? x.ranks == std::vector<int>{k.rank}
                      : x.hosts == std::vector<std::string>{k.host})
        culprit = &x;
    ASSERT_NE(culprit, nullptr) << FindingsToText(*f);
    std::string json;
    auto rep = ExportPerfetto(*store, *f, PerfettoOptions{}, &json);
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    auto ev = Parse(json);
    EXPECT_EQ(Problems(ev), std::vector<std::string>{});
    std::set<int64_t> culprit_pids;  // the culprit rank, or its host's ranks
    for (const Ev& e : ev)
      if (e.ph == "M" && e.name == "process_name" &&
          (k.rank >= 0 ? e.pid == k.rank
                       : e.args.find(std::string("(") + k.host + ")") != std::string::npos))
        culprit_pids.insert(e.pid);
    ASSERT_FALSE(culprit_pids.empty()) << "no track of the culprit";
    bool root_slice = false;
    for (const Ev& e : ev)
      root_slice = root_slice ||
                   (e.ph == "X" && culprit_pids.count(e.pid) && e.name.ends_with("(root cause)") &&
                    std::abs(e.ts - static_cast<double>(culprit->start_us)) < 1);
    EXPECT_TRUE(root_slice)
        << "no root-cause slice on the culprit's tracks from the finding's start";
  }
}

}  // namespace
}  // namespace collscope::diagnose
