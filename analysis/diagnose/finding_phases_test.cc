// A finding of the record detectors says which annotated phase its collectives ran in
// (finding_phases.h): a simulated straggler, diagnosed before and after its records carry the
// plugin's step and phase tags.
#include "analysis/diagnose/finding_phases.h"

#include <gtest/gtest.h>

#include <algorithm>
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

TEST(FindingPhases, AStragglersFindingSaysWhichAnnotatedPhaseItsCollectivesRanIn) {
  testing::TempDir dir;
  testing::RunSimulation(testing::FourHostJob(dir / "job", "kind=gpu_straggler,rank=13,factor=1.5", 16));
  auto store = testing::IngestSimulatedJob(dir / "job", dir / "store.duckdb", "job");
  ASSERT_TRUE(store);
  DiagnoseOptions o;
  o.run = "job";
  auto plain = DiagnoseStore(*store, o);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  const Finding* untagged = FindingOfRank(*plain, 13);
  ASSERT_NE(untagged, nullptr) << FindingsToText(*plain);
  EXPECT_EQ(EvidenceOf(*untagged, "phases"), nullptr) << "stock records carry no phase";
  EXPECT_EQ(untagged->summary.find(" ran in "), std::string::npos) << untagged->summary;

  // The plugin's tags as ingest stores them: the finding's communicators' collectives ran in
  // backward, every other record in forward; the step is the record's sequence number.
  std::string comms;
  for (const std::string& c : untagged->comms) comms += (comms.empty() ? "'" : ", '") + c + "'";
  ASSERT_TRUE(store
                  ->Exec("INSERT INTO record_annotations (run_id, file_id, line, step, phase) "
                         "SELECT r.run_id, r.file_id, r.line, r.sn, CASE WHEN c.id IN (" + comms +
                         ") THEN 'backward' ELSE 'forward' END FROM records r JOIN operations o USING (run_id, op_id) "
                         "JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id")
                  .ok());
  auto tagged = DiagnoseStore(*store, o);
  ASSERT_TRUE(tagged.ok()) << tagged.status().message();
  const Finding* f = FindingOfRank(*tagged, 13);
  ASSERT_NE(f, nullptr) << FindingsToText(*tagged);
  const Evidence* phases = EvidenceOf(*f, "phases");
  ASSERT_NE(phases, nullptr) << FindingsToText(*tagged);
  EXPECT_EQ(phases->text, "backward 100%");
  ASSERT_NE(EvidenceOf(*f, "annotated_steps"), nullptr);
  EXPECT_NE(EvidenceOf(*f, "annotated_steps")->text.find('-'), std::string::npos);
  ASSERT_NE(EvidenceOf(*f, "annotated_records"), nullptr);
  EXPECT_GT(EvidenceOf(*f, "annotated_records")->value, 0);
  EXPECT_NE(f->summary.find("Its collectives here ran in backward (100% of "), std::string::npos) << f->summary;
}

}  // namespace
}  // namespace collscope::diagnose
