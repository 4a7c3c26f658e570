// Scoring findings against ground truth (hand-built cases), and the small evaluation suite: every
// fault kind must stay at or above its floor (analysis/diagnose/eval_floors.txt).
#include "analysis/diagnose/eval.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace collscope::diagnose {
namespace {

// Two faults: a straggler (rank 5 on node-001, 10-20 s) and a degraded NIC on node-002 (30-40 s).
constexpr const char* kTruth = R"({
  "job": {"steps_completed": 100, "world": 16},
  "inspector": {"dump_interval_us": 1000000},
  "faults": [
    {"kind": "gpu_straggler", "triggered": true, "hosts": ["node-001"], "ranks": [5],
     "comms": ["0xa", "0xb"], "start_us": 10000000, "end_us": 20000000},
    {"kind": "nic_degrade", "triggered": true, "hosts": ["node-002"], "ranks": [8, 9],
     "comms": ["0xc"], "start_us": 30000000, "end_us": 40000000},
    {"kind": "host_stall", "triggered": false, "hosts": ["node-003"], "ranks": [12],
     "comms": [], "start_us": 0, "end_us": 1}]})";

Finding Make(Kind k, std::vector<std::string> hosts, std::vector<int> ranks, std::vector<std::string> comms,
             int64_t start_s, int64_t end_s) {
  Finding f;
  f.kind = k;
  f.hosts = std::move(hosts);
  f.ranks = std::move(ranks);
  f.comms = std::move(comms);
  f.start_us = start_s * 1000000;
  f.end_us = end_s * 1000000;
  return f;
}

TEST(Eval, ScoresFindingsAgainstGroundTruth) {
  testing::TempDir dir;
  const std::string gt = dir / "ground_truth.json";
  testing::WriteFile(gt, kTruth);
  EvalReport rep;
  ScenarioResult sr;
  sr.ingest_s = 1.5;
  sr.analysis_s = 0.5;
  const std::vector<Finding> findings = {
      // Right kind, overlaps only through a shared communicator and names another rank: found,
      // not located.
      Make(Kind::kSlowCompute, {"node-001"}, {4}, {"0xa"}, 12, 18),
      // Right kind, wrong time (far outside the window and its slack): false.
      Make(Kind::kSlowLink, {"node-002"}, {}, {"0xc"}, 80, 90),
      // Host-level finding naming the NIC's host: found and located.
      Make(Kind::kSlowLink, {"node-002"}, {}, {}, 31, 39),
      // Step symptom overlapping a fault in time: true, finds nothing.
      Make(Kind::kStepRegression, {}, {}, {}, 15, 16),
      // The untriggered stall is no fault: false.
      Make(Kind::kHostStall, {"node-003"}, {12}, {}, 0, 1),
  };
  ASSERT_TRUE(ScoreFindings(gt, findings, &rep, &sr).ok());
  EXPECT_EQ(sr.faults, 2);
  EXPECT_EQ(sr.found, 2);
  EXPECT_EQ(sr.findings, 5);
  EXPECT_EQ(sr.false_findings, 2);
  EXPECT_FALSE(sr.healthy);
  const KindScore& sc = rep.kinds.at("slow_compute");
  EXPECT_EQ(sc.faults, 1);
  EXPECT_EQ(sc.found_faults, 1);
  EXPECT_EQ(sc.located_faults, 0);
  const KindScore& sl = rep.kinds.at("slow_link");
  EXPECT_EQ(sl.findings, 2);
  EXPECT_EQ(sl.true_findings, 1);
  EXPECT_DOUBLE_EQ(sl.precision(), 0.5);
  EXPECT_DOUBLE_EQ(sl.recall(), 1.0);
  EXPECT_DOUBLE_EQ(sl.located(), 1.0);
  EXPECT_DOUBLE_EQ(sl.time_to_localize_s(), 2.0);
  EXPECT_EQ(rep.kinds.at("step_regression").true_findings, 1);
  EXPECT_EQ(rep.kinds.at("host_stall").faults, 0);
  EXPECT_EQ(rep.kinds.at("host_stall").true_findings, 0);

  // The straggler's own rank makes it located; the floors see it.
  ScenarioResult sr2;
  ASSERT_TRUE(ScoreFindings(gt, {Make(Kind::kSlowCompute, {}, {5}, {}, 10, 20)}, &rep, &sr2).ok());
  EXPECT_EQ(rep.kinds.at("slow_compute").located_faults, 1);
  const std::string floors = dir / "floors.txt";
  testing::WriteFile(floors, "slow_compute 1.0 1.0 1.0\nslow_link 0.5 0.5 0.5\n");
  auto bad = CheckFloors(rep, floors);
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);  // slow_compute: 1 of its 2 faults located
  EXPECT_NE((*bad)[0].find("slow_compute: located 0.5"), std::string::npos) << (*bad)[0];
}

TEST(Eval, SmallSuiteMeetsFloors) {
  auto r = RunEval(BuiltinSuite("small"), EvalOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::printf("%s", r->ToText().c_str());
  auto bad = CheckFloors(*r, std::string(COLLSCOPE_SOURCE_DIR) + "/analysis/diagnose/eval_floors.txt");
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  for (const auto& b : *bad) ADD_FAILURE() << b;
}

}  // namespace
}  // namespace collscope::diagnose
