// A finding weighs its confidence by the coverage of the ranks it names (finding_coverage.h):
// the same straggler, once with every record and once with a third of its own collective records
// lost (its ring overwritten between dumps), on a small simulated job.
#include "analysis/diagnose/finding_coverage.h"

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

TEST(FindingCoverage, AStragglerWhoseRingLostAThirdIsNamedWithLessConfidenceAndSaysWhy) {
  testing::TempDir dir;
  testing::RunSimulation(testing::FourHostJob(dir / "job", "kind=gpu_straggler,rank=13,factor=1.5", 16));
  auto store = testing::IngestSimulatedJob(dir / "job", dir / "store.duckdb", "job");
  ASSERT_TRUE(store);
  DiagnoseOptions o;
  o.run = "job";
  auto whole = DiagnoseStore(*store, o);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  const Finding* full = FindingOfRank(*whole, 13);
  ASSERT_NE(full, nullptr) << FindingsToText(*whole);
  ASSERT_NE(EvidenceOf(*full, "coverage_vs_peers"), nullptr);
  EXPECT_DOUBLE_EQ(EvidenceOf(*full, "coverage_vs_peers")->value, 1.0);
  EXPECT_EQ(EvidenceOf(*full, "coverage_note"), nullptr) << "nothing lost, nothing to say";

  auto data = LoadCommData(*store, "job");
  ASSERT_TRUE(data.ok()) << data.status().message();
  int64_t process_id = -1;
  for (const Proc& p : data->procs)
    if (p.global_rank == 13) process_id = p.process_id;
  ASSERT_GE(process_id, 0);
  // Its ring of the straggling communicator overwritten through the middle third of the job's
  // collectives there (Inspector's rings drop per communicator and kind).
  const std::string comm = full->comms.at(0);
  ASSERT_TRUE(store
                  ->Exec("WITH o AS (SELECT op_id FROM operations JOIN communicators USING (run_id, comm_id) WHERE id = '" +
                         comm + "' AND kind = 'coll'), s AS (SELECT min(sn) AS lo, max(sn) AS hi FROM records "
                         "WHERE op_id IN (SELECT op_id FROM o)) DELETE FROM records WHERE process_id = " +
                         std::to_string(process_id) +
                         " AND op_id IN (SELECT op_id FROM o) AND sn BETWEEN (SELECT lo + (hi - lo) / 3 FROM s) AND "
                         "(SELECT lo + 2 * (hi - lo) / 3 FROM s)")
                  .ok());
  auto halved = DiagnoseStore(*store, o);
  ASSERT_TRUE(halved.ok()) << halved.status().message();
  const Finding* half = FindingOfRank(*halved, 13);
  ASSERT_NE(half, nullptr) << FindingsToText(*halved);
  const Evidence* relative = EvidenceOf(*half, "coverage_vs_peers");
  ASSERT_NE(relative, nullptr);
  EXPECT_GT(relative->value, 0.5);
  EXPECT_LT(relative->value, 0.8);
  const Evidence* note = EvidenceOf(*half, "coverage_note");
  ASSERT_NE(note, nullptr) << FindingsToText(*halved);
  EXPECT_NE(note->text.find("rank 13 recorded"), std::string::npos) << note->text;
  EXPECT_LE(half->confidence, std::sqrt(relative->value) + 1e-9);
}

}  // namespace
}  // namespace collscope::diagnose
