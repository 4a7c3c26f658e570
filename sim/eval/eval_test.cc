// Scoring findings against ground truth (hand-built cases), and the small evaluation suite: every
// fault kind must stay at or above its floor (sim/eval/eval_floors.txt).
#include "sim/eval/eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <set>

#include "tests/test_util.h"

namespace collscope::diagnose {
namespace {

// Two faults: a straggler (rank 5 on node-001, 10-20 s) and a degraded NIC on node-002 (30-40 s).
constexpr const char* kTruth = R"({
  "job": {"steps_completed": 100, "world": 16},
  "inspector": {"dump_interval_us": 1000000},
  "ranks": [{"rank": 4, "hostname": "node-001"}, {"rank": 5, "hostname": "node-001"},
            {"rank": 8, "hostname": "node-002"}, {"rank": 9, "hostname": "node-002"},
            {"rank": 12, "hostname": "node-003"}],
  "faults": [
    {"kind": "gpu_straggler", "triggered": true, "hosts": ["node-001"], "ranks": [5],
     "comms": ["0xa", "0xb"], "start_us": 10000000, "end_us": 20000000, "params": {"factor": "1.4"}},
    {"kind": "nic_degrade", "triggered": true, "hosts": ["node-002"], "ranks": [8, 9],
     "comms": ["0xc"], "start_us": 30000000, "end_us": 40000000, "params": {"factor": "0.25"}},
    {"kind": "host_stall", "triggered": false, "hosts": ["node-003"], "ranks": [12],
     "comms": [], "start_us": 0, "end_us": 1}]})";

Finding Make(Kind k, std::vector<std::string> hosts, std::vector<int> ranks, std::vector<std::string> comms,
             int64_t start_s, int64_t end_s, double confidence = 0.5) {
  Finding f;
  f.kind = k;
  f.hosts = std::move(hosts);
  f.ranks = std::move(ranks);
  f.comms = std::move(comms);
  f.start_us = start_s * 1000000;
  f.end_us = end_s * 1000000;
  f.confidence = confidence;
  return f;
}

TEST(Eval, ScoresStrictly) {
  testing::TempDir dir;
  const std::string gt = dir / "ground_truth.json";
  testing::WriteFile(gt, kTruth);
  TierScore tier;
  ScenarioResult sr;
  TierRun run;
  const std::vector<Finding> findings = {
      // Right kind and time, shares a communicator and the host, but names another rank: false.
      Make(Kind::kSlowCompute, {"node-001"}, {4}, {"0xa"}, 12, 18, 0.9),
      // The straggler and an innocent rank: not contained in the culprit set, false.
      Make(Kind::kSlowCompute, {"node-001"}, {4, 5}, {}, 12, 18, 0.9),
      // Victims only (no root cause named): false.
      [] { Finding f = Make(Kind::kSlowCompute, {}, {}, {"0xa"}, 12, 18); f.victims = {5}; return f; }(),
      // Right kind, wrong time (far outside the window and its slack): false.
      Make(Kind::kSlowLink, {"node-002"}, {}, {"0xc"}, 80, 90),
      // The NIC's host and its communicator partner: two hosts for a one-host fault, false.
      Make(Kind::kSlowLink, {"node-001", "node-002"}, {}, {}, 31, 39),
      // Host-level finding naming the NIC's host alone: true and exact.
      Make(Kind::kSlowLink, {"node-002"}, {}, {}, 31, 39, 0.9),
      // The same again: a false duplicate.
      Make(Kind::kSlowLink, {}, {9}, {}, 31, 39),
      // Step symptom overlapping a fault in time: names no culprit, false.
      Make(Kind::kStepRegression, {}, {}, {}, 15, 16),
      // The untriggered stall is no fault: false.
      Make(Kind::kHostStall, {"node-003"}, {12}, {}, 0, 1),
  };
  ASSERT_TRUE(ScoreFindings(gt, findings, 2.0, &tier, &sr, &run).ok());
  EXPECT_EQ(sr.faults, 2);
  EXPECT_FALSE(sr.healthy);
  EXPECT_EQ(run.findings, 9);
  EXPECT_EQ(run.found, 1);
  EXPECT_EQ(run.false_findings, 8);
  EXPECT_EQ(run.false_symptoms, 1);  // the step regression: false, and told apart
  // Each triggered fault with its severity and whether this tier found it, so misses can be read.
  ASSERT_EQ(sr.fault_labels.size(), 2u);
  EXPECT_EQ(sr.fault_labels[0].fault_kind, "gpu_straggler");
  EXPECT_DOUBLE_EQ(sr.fault_labels[0].severity, 1.4);
  EXPECT_DOUBLE_EQ(sr.fault_labels[1].severity, 4.0);
  EXPECT_EQ(run.fault_found, (std::vector<bool>{false, true}));
  const KindScore& sc = tier.kinds.at("slow_compute");
  EXPECT_EQ(sc.faults, 1);
  EXPECT_EQ(sc.found_faults, 0);
  EXPECT_EQ(sc.true_findings, 0);
  const KindScore& sl = tier.kinds.at("slow_link");
  EXPECT_EQ(sl.findings, 4);
  EXPECT_EQ(sl.true_findings, 1);
  EXPECT_EQ(sl.exact_findings, 1);
  EXPECT_EQ(sl.duplicates, 1);
  EXPECT_DOUBLE_EQ(sl.precision(), 0.25);
  EXPECT_DOUBLE_EQ(sl.recall(), 1.0);
  EXPECT_DOUBLE_EQ(sl.exact_rate(), 1.0);
  EXPECT_DOUBLE_EQ(sl.time_to_localize_s(), 2.0);
  EXPECT_EQ(tier.kinds.at("step_regression").true_findings, 0);
  EXPECT_EQ(tier.kinds.at("host_stall").faults, 0);
  // Calibration: of the three 0.9 findings one was right.
  EXPECT_EQ(tier.calibration[4].findings, 3);
  EXPECT_EQ(tier.calibration[4].true_findings, 1);
  // Severities: the straggler's factor (missed) and the NIC's bandwidth loss (found).
  ASSERT_EQ(tier.severity.at("nic_degrade").size(), 1u);
  EXPECT_DOUBLE_EQ(tier.severity.at("nic_degrade")[0].severity, 4.0);
  EXPECT_TRUE(tier.severity.at("nic_degrade")[0].found);
  EXPECT_FALSE(tier.severity.at("gpu_straggler")[0].found);

  // The straggler's own rank, and only it, is true and exact. The floors see the tier (the second
  // job counts both faults again: each kind has 2 faults, 1 found).
  ScenarioResult sr2;
  TierRun run2;
  ASSERT_TRUE(ScoreFindings(gt, {Make(Kind::kSlowCompute, {}, {5}, {}, 10, 20)}, 1.0, &tier, &sr2, &run2).ok());
  EXPECT_EQ(tier.kinds.at("slow_compute").found_faults, 1);
  EXPECT_EQ(tier.kinds.at("slow_compute").exact_faults, 1);
  EvalReport rep;
  rep.tiers["A"] = tier;
  const std::string floors = dir / "floors.txt";
  testing::WriteFile(floors, "A slow_compute 0.25 1.0 0.5\nA slow_link 0.5 0.5 0.5\nB slow_link 0 0\n"
                             "A false_per_1000_healthy_steps 0\n");
  auto bad = CheckFloors(rep, floors);
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  ASSERT_EQ(bad->size(), 3u) << ::testing::PrintToString(*bad);
  EXPECT_NE((*bad)[0].find("tier A slow_compute: recall 0.5"), std::string::npos) << (*bad)[0];
  EXPECT_NE((*bad)[1].find("tier A slow_link: precision 0.25"), std::string::npos) << (*bad)[1];
  EXPECT_NE((*bad)[2].find("tier B slow_link: tier not scored"), std::string::npos) << (*bad)[2];
}

TEST(Eval, DetectionLimit) {
  TierScore t;
  // Found from 1.3 up, missed below; the miss at 1.6 pools 1.3-1.6 at 2/3, so 95% needs 1.8.
  t.severity["gpu_straggler"] = {{1.05, false}, {1.1, false}, {1.2, false}, {1.3, true}, {1.5, true},
                                 {1.6, false}, {1.8, true}, {2.0, true}, {2.2, true}};
  EXPECT_DOUBLE_EQ(t.DetectionLimit("gpu_straggler", 0.5), 1.3);
  EXPECT_DOUBLE_EQ(t.DetectionLimit("gpu_straggler", 0.95), 1.8);
  EXPECT_TRUE(std::isnan(t.DetectionLimit("nic_degrade", 0.5)));
}

// The split by Inspector flavour is the same scoring: its parts add up to each tier's totals.
void ExpectFlavoursAddUp(const EvalReport& r) {
  EXPECT_FALSE(r.by_flavor.empty());
  for (const auto& [tier, ts] : r.tiers)
    for (const auto& [kind, k] : ts.kinds) {
      KindScore sum;
      for (const auto& [flavor, by_tier] : r.by_flavor) {
        auto t = by_tier.find(tier);
        if (t == by_tier.end()) continue;
        auto it = t->second.kinds.find(kind);
        if (it == t->second.kinds.end()) continue;
        sum.faults += it->second.faults;
        sum.found_faults += it->second.found_faults;
        sum.findings += it->second.findings;
        sum.true_findings += it->second.true_findings;
      }
      EXPECT_EQ(sum.faults, k.faults) << tier << " " << kind;
      EXPECT_EQ(sum.found_faults, k.found_faults) << tier << " " << kind;
      EXPECT_EQ(sum.findings, k.findings) << tier << " " << kind;
      EXPECT_EQ(sum.true_findings, k.true_findings) << tier << " " << kind;
    }
  EXPECT_NE(r.ToText().find("== by Inspector flavour"), std::string::npos);
  EXPECT_NE(r.ToJson().find("\"by_inspector_flavor\": {\"2."), std::string::npos);
}

TEST(Eval, ExplorationSeedsAreTheirOwn) {
  // Each CI shape twice, on seeds neither the development nor the held-out suite draws; every
  // job named once. An unknown suite is no suite (it ran the small one).
  const auto explore = BuiltinSuite("explore"), small = BuiltinSuite("small"), heldout = BuiltinSuite("heldout");
  EXPECT_GT(explore.size(), 2 * small.size() - 2);
  std::set<std::string> names;
  for (const Scenario& s : explore) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    if (s.name.rfind("healthy-1000steps", 0) == 0) continue;  // the long healthy job, one seed
    const size_t at = s.name.rfind("-s");
    ASSERT_NE(at, std::string::npos) << s.name;
    const int seed = std::atoi(s.name.c_str() + at + 2);
    EXPECT_TRUE(seed >= 2001 && seed <= 2016) << s.name;
  }
  for (const auto* other : {&small, &heldout}) {
    for (const Scenario& s : *other) {
      if (s.name.rfind("healthy-1000steps", 0) != 0) {
        EXPECT_EQ(names.count(s.name), 0u) << s.name;
      }
    }
  }
  EXPECT_TRUE(BuiltinSuite("smal").empty());
}

// A suite file's scenarios are what its lines say; a bad line is refused with its file and line;
// and its jobs are simulated and scored like the built-in suites'.
TEST(Eval, SuiteFileScenariosAreScored) {
  testing::TempDir dir;
  const std::string path = dir / "suite.txt";
  testing::WriteFile(path,
                     "# two jobs\n"
                     "\n"
                     "tiny-nic hosts=4 gpus_per_host=2 tp=2 layers=4 hidden=4096 seq_len=2048 steps=16 "
                     "dump_interval_us=200000 fault=kind=nic_degrade,host=1,factor=0.2,start_step=4,end_step=12  # a note\n"
                     "tiny-healthy hosts=2 gpus_per_host=2 tp=2 layers=2 steps=4 damage=cut:3\n");
  auto suite = ReadSuiteFile(path);
  ASSERT_TRUE(suite.ok()) << suite.status().message();
  ASSERT_EQ(suite->size(), 2u);
  EXPECT_EQ((*suite)[0].name, "tiny-nic");
  EXPECT_EQ((*suite)[0].args.size(), 8u);
  EXPECT_EQ((*suite)[0].faults, std::vector<std::string>{"kind=nic_degrade,host=1,factor=0.2,start_step=4,end_step=12"});
  EXPECT_TRUE((*suite)[0].damage.empty());
  EXPECT_TRUE((*suite)[1].faults.empty());
  EXPECT_EQ((*suite)[1].damage, "cut:3");

  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"a hosts=2\nb tpp=2\n", ":2: unknown scenario setting tpp"},
           {"a fault=kind=nic_degrad,host=1\n", ":1: "},
           {"a hosts=2\na hosts=4\n", ":2: scenario a named twice"},
           {"hosts=2\n", ":1: a line starts with the scenario's name"},
           {"a\"b hosts=2\n", ":1: a line starts with the scenario's name"},
           {"a damage=cut:\n", ":1: damage is missing:RANK or cut:RANK"},
           {"# nothing\n", "no scenario"}}) {
    testing::WriteFile(path, text);
    auto bad = ReadSuiteFile(path);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(path), std::string::npos) << bad.status().message();
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status().message();
  }
  EXPECT_FALSE(ReadSuiteFile(dir / "absent.txt").ok());

  EvalOptions o;
  o.work_dir = dir / "work";
  o.only = "tiny-nic";
  auto r = RunEval(*suite, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->scenarios.size(), 1u);
  // Each job says which Inspector flavour wrote its logs (the simulator's default).
  EXPECT_NE(r->ToJson().find("{\"name\": \"tiny-nic\", \"flavor\": \"2.30\""), std::string::npos)
      << r->ToJson();
  const KindScore& link = r->tiers.at("A").kinds.at("slow_link");
  EXPECT_EQ(link.faults, 1);
  EXPECT_EQ(link.found_faults, 1) << r->ToText();
}

TEST(Eval, SmallSuiteMeetsFloors) {
#ifdef COLLSCOPE_SANITIZED
  // Under the sanitizers the suite runs 5-10x slower: one seed's jobs check the code paths, and
  // the floors are checked by the release build.
  EvalOptions o;
  o.only = "-16g-s1";
  auto r = RunEval(BuiltinSuite("small"), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->scenarios.size(), 10u);
  ExpectFlavoursAddUp(*r);
#else
  auto r = RunEval(BuiltinSuite("small"), EvalOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::printf("%s", r->ToText().c_str());
  auto bad = CheckFloors(*r, std::string(COLLSCOPE_SOURCE_DIR) + "/sim/eval/eval_floors.txt");
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  for (const auto& b : *bad) ADD_FAILURE() << b;
  ExpectFlavoursAddUp(*r);
  EXPECT_EQ(r->by_flavor.size(), 2u) << "the suite draws both flavours";
#endif
}

}  // namespace
}  // namespace collscope::diagnose
