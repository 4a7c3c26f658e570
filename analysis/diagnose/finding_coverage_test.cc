// What the records add to the findings they found, on a small simulated job. A finding weighs its
// confidence by the coverage of the ranks it names (finding_coverage.h): the same straggler, once
// with every record and once with a third of its own collective records lost (its ring overwritten
// between dumps). It says which annotated phase its collectives ran in (finding_phases.h): before
// and after the records carry the plugin's step and phase tags.
#include "analysis/diagnose/finding_coverage.h"
#include "analysis/diagnose/finding_phases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "analysis/diagnose/diagnose.h"
#include "tests/sim_job.h"
#include "tests/test_util.h"

namespace collscope::diagnose {
namespace {

const Finding* FindingOfRank(const std::vector<Finding>& fs, int rank) {
  for (const Finding& f : fs)
    if (f.kind == Kind::kSlowCompute && std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end()) return &f;
  return nullptr;
}

const Evidence* EvidenceOf(const Finding& f, const std::string& key) {
  for (const Evidence& e : f.evidence)
    if (e.key == key) return &e;
  return nullptr;
}

// Rank 13 of a small simulated job 1.5x slow, ingested into a store.
class StragglerJob : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::RunSimulation(testing::FourHostJob(dir_ / "job", "kind=gpu_straggler,rank=13,factor=1.5", 16));
    store_ = testing::IngestSimulatedJob(dir_ / "job", dir_ / "store.duckdb", "job");
    ASSERT_TRUE(store_);
  }
  std::vector<Finding> Diagnose() {
    DiagnoseOptions o;
    o.run = "job";
    auto found = DiagnoseStore(*store_, o);
    EXPECT_TRUE(found.ok()) << found.status().message();
    return found.ok() ? *found : std::vector<Finding>{};
  }
  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};
class FindingCoverage : public StragglerJob {};
class FindingPhases : public StragglerJob {};

TEST_F(FindingCoverage, AStragglerWhoseRingLostAThirdIsNamedWithLessConfidenceAndSaysWhy) {
  const std::vector<Finding> whole = Diagnose();
  const Finding* full = FindingOfRank(whole, 13);
  ASSERT_NE(full, nullptr) << FindingsToText(whole);
  ASSERT_NE(EvidenceOf(*full, "coverage_vs_peers"), nullptr);
  EXPECT_DOUBLE_EQ(EvidenceOf(*full, "coverage_vs_peers")->value, 1.0);
  EXPECT_EQ(EvidenceOf(*full, "coverage_note"), nullptr) << "nothing lost, nothing to say";

  auto data = LoadCommData(*store_, "job");
  ASSERT_TRUE(data.ok()) << data.status().message();
  int64_t process_id = -1;
  for (const Proc& p : data->procs)
    if (p.global_rank == 13) process_id = p.process_id;
  ASSERT_GE(process_id, 0);
  // Its ring of the straggling communicator overwritten through the middle third of the job's
  // collectives there (Inspector's rings drop per communicator and kind).
  const std::string comm = full->comms.at(0);
  ASSERT_TRUE(store_
                  ->Exec("WITH o AS (SELECT op_id FROM operations JOIN communicators USING (run_id, comm_id) WHERE id = '" +
                         comm + "' AND kind = 'coll'), s AS (SELECT min(sn) AS lo, max(sn) AS hi FROM records "
                         "WHERE op_id IN (SELECT op_id FROM o)) DELETE FROM records WHERE process_id = " +
                         std::to_string(process_id) +
                         " AND op_id IN (SELECT op_id FROM o) AND sn BETWEEN (SELECT lo + (hi - lo) / 3 FROM s) AND "
                         "(SELECT lo + 2 * (hi - lo) / 3 FROM s)")
                  .ok());
  const std::vector<Finding> halved = Diagnose();
  const Finding* half = FindingOfRank(halved, 13);
  ASSERT_NE(half, nullptr) << FindingsToText(halved);
  const Evidence* relative = EvidenceOf(*half, "coverage_vs_peers");
  ASSERT_NE(relative, nullptr);
  EXPECT_GT(relative->value, 0.5);
  EXPECT_LT(relative->value, 0.8);
  const Evidence* note = EvidenceOf(*half, "coverage_note");
  ASSERT_NE(note, nullptr) << FindingsToText(halved);
  EXPECT_NE(note->text.find("rank 13 recorded"), std::string::npos) << note->text;
  EXPECT_LE(half->confidence, std::sqrt(relative->value) + 1e-9);
}

// A finding of the record detectors says which annotated phase its collectives ran in.
TEST_F(FindingPhases, AStragglersFindingSaysWhichAnnotatedPhaseItsCollectivesRanIn) {
  const std::vector<Finding> plain = Diagnose();
  const Finding* untagged = FindingOfRank(plain, 13);
  ASSERT_NE(untagged, nullptr) << FindingsToText(plain);
  EXPECT_EQ(EvidenceOf(*untagged, "phases"), nullptr) << "stock records carry no phase";
  EXPECT_EQ(untagged->summary.find(" ran in "), std::string::npos) << untagged->summary;

  // The plugin's tags as ingest stores them: the finding's communicators' collectives ran in
  // backward, every other record in forward; the step is the record's sequence number.
  std::string comms;
  for (const std::string& c : untagged->comms) comms += (comms.empty() ? "'" : ", '") + c + "'";
  ASSERT_TRUE(store_
                  ->Exec("INSERT INTO record_annotations (run_id, file_id, line, step, phase) "
                         "SELECT r.run_id, r.file_id, r.line, r.sn, CASE WHEN c.id IN (" + comms +
                         ") THEN 'backward' ELSE 'forward' END FROM records r JOIN operations o USING (run_id, op_id) "
                         "JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id")
                  .ok());
  const std::vector<Finding> tagged = Diagnose();
  const Finding* f = FindingOfRank(tagged, 13);
  ASSERT_NE(f, nullptr) << FindingsToText(tagged);
  const Evidence* phases = EvidenceOf(*f, "phases");
  ASSERT_NE(phases, nullptr) << FindingsToText(tagged);
  EXPECT_EQ(phases->text, "backward 100%");
  ASSERT_NE(EvidenceOf(*f, "annotated_steps"), nullptr);
  EXPECT_NE(EvidenceOf(*f, "annotated_steps")->text.find('-'), std::string::npos);
  ASSERT_NE(EvidenceOf(*f, "annotated_records"), nullptr);
  EXPECT_GT(EvidenceOf(*f, "annotated_records")->value, 0);
  EXPECT_NE(f->summary.find("Its collectives here ran in backward (100% of "), std::string::npos) << f->summary;
}

}  // namespace
}  // namespace collscope::diagnose
