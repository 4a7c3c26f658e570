// On a simulated job with one NIC-degraded host, and on the bundled example job (examples/job),
// the host table, the host x time heatmap and the rank x communicator heatmap single out that
// host. The layout (4 hosts x 8 GPUs, TP 8 inside a
// host, PP 2) gives communicators over different host pairs (DP over hosts {0,1} and {2,3}, PP
// over {0,2} and {1,3}), so a host's fault is distinguishable from its ring neighbours'.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "analysis/primitives.h"
#include "analysis/report.h"
#include "analysis/views.h"
#include "core/ingest.h"
#include "sim/sim.h"
#include "tests/sim_job.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

// The host table ranks `host` first, its transfer_norm_busbw below `margin` x every other's.
void ExpectFirstByMargin(Store& store, const std::string& host, double margin) {
  auto ht = HostTable(store, AnalysisOptions{});
  ASSERT_TRUE(ht.ok()) << ht.status().message();
  ASSERT_EQ(ht->rows.size(), 4u);
  int h = ColumnOf(*ht, "hostname"), tn = ColumnOf(*ht, "transfer_norm_busbw");
  ASSERT_TRUE(ht->rows[0][tn].has_value());
  EXPECT_EQ(*ht->rows[0][h], host);
  double worst = std::stod(*ht->rows[0][tn]);
  for (size_t i = 1; i < ht->rows.size(); ++i)
    EXPECT_LT(worst, margin * std::stod(*ht->rows[i][tn])) << *ht->rows[i][h];
}

// The number after `"key":` at or after `from` in a JSON text (the ground truth is flat enough).
uint64_t JsonNumber(const std::string& text, const std::string& key, size_t from) {
  size_t at = text.find("\"" + key + "\":", from);
  if (at == std::string::npos) return 0;
  return std::stoull(text.substr(at + key.size() + 3));
}

TEST(DegradedHost, SpatialPrimitivesSingleOutTheHost) {
  testing::TempDir dir;
  testing::RunSimulation(testing::FourHostJob(dir / "job", "kind=nic_degrade,host=1,factor=0.25"));
  ASSERT_FALSE(::testing::Test::HasFailure());

  uint64_t records = 0;
  auto store = testing::IngestSimulatedJob(dir / "job", dir / "s.duckdb", "sim", &records);
  ASSERT_TRUE(store && !::testing::Test::HasFailure());
  ASSERT_GT(records, 1000u);

  AnalysisOptions o;
  // Host table: node-001 first (worst), clearly below the others.
  ExpectFirstByMargin(*store, "node-001", 0.85);

  // Host x time heatmap: node-001 has the lowest mean normalised busbw over the bins.
  o.bin_s = 1;
  o.min_bytes = 1 << 20;
  auto hm = HostTimeHeatmap(*store, o);
  ASSERT_TRUE(hm.ok()) << hm.status().message();
  std::map<std::string, std::pair<double, int>> mean;
  int h = ColumnOf(*hm, "hostname"), v = ColumnOf(*hm, "norm_busbw");
  for (const auto& row : hm->rows) {
    auto& m = mean[*row[h]];
    m.first += std::stod(*row[v]);
    m.second += 1;
  }
  ASSERT_EQ(mean.size(), 4u);
  std::string lowest;
  double low = 1e9;
  for (const auto& [name, m] : mean)
    if (m.first / m.second < low) low = m.first / m.second, lowest = name;
  EXPECT_EQ(lowest, "node-001");

  // Rank x communicator heatmap: the cross-host cells of node-001 are the slowest of their
  // communicators' kind: every cell of node-001 on a cross-host communicator is below 1.
  auto rc = RankCells(*store, o);
  ASSERT_TRUE(rc.ok());
  auto cross = store->Query("SELECT id FROM communicators WHERE nnodes > 1");
  std::set<std::string> cross_ids;
  for (const auto& row : cross->rows) cross_ids.insert(*row[0]);
  int ch = ColumnOf(*rc, "hostname"), cc = ColumnOf(*rc, "comm"), cv = ColumnOf(*rc, "norm_busbw");
  int cells = 0;
  for (const auto& row : rc->rows) {
    if (*row[ch] != "node-001" || !cross_ids.count(*row[cc])) continue;
    ++cells;
    EXPECT_LT(std::stod(*row[cv]), 1.0) << *row[cc];
  }
  EXPECT_GT(cells, 0);

  // The report renders from the same store.
  ReportOptions ro;
  ro.output = dir / "r.html";
  EXPECT_TRUE(WriteReport(*store, ro).ok());
}

// examples/job: node-001's NICs at 0.25x for steps 8-13 of 20, and it shares its data-parallel
// communicators with node-000 and its pipeline ones with node-003. The host table must still
// single it out (its partners' other communicators stayed fast), with or without aggregates, and
// the host x time heatmap must show it lowest during the fault window.
TEST(DegradedHost, ExampleJobSinglesOutTheHost) {
  const std::string job = std::string(COLLSCOPE_SOURCE_DIR) + "/examples/job";
  std::ifstream in(job + "/ground_truth.json");
  ASSERT_TRUE(in) << job;
  std::stringstream truth;
  truth << in.rdbuf();
  const std::string text = truth.str();
  const size_t fault = text.find("\"faults\"");
  ASSERT_NE(fault, std::string::npos);
  const uint64_t start = JsonNumber(text, "start_us", fault), end = JsonNumber(text, "end_us", fault);
  ASSERT_LT(start, end);
  ASSERT_NE(text.find("\"hosts\":[\"node-001\"]", fault), std::string::npos);

  testing::TempDir dir;
  auto store = Store::Open(dir / "s.duckdb");
  ASSERT_TRUE(store.ok());
  IngestOptions io;
  io.run = "job";
  io.threads = 2;
  auto rep = Ingest(**store, {job}, io);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_TRUE(InstallAnalysisViews(**store, false).ok());
  ExpectFirstByMargin(**store, "node-001", 0.8);  // from the records
  auto agg = RefreshAggregates(**store);
  ASSERT_TRUE(agg.ok()) << agg.status().message();
  ExpectFirstByMargin(**store, "node-001", 0.8);  // from the aggregates, as after `ingest`

  // The heatmap at the dump interval, at whole seconds (read from the aggregates) and at the
  // report's resolution for this job: node-001 has the lowest mean over the fault's bins.
  for (double bin_s : {0.2, 1.0, 0.05}) {
    AnalysisOptions o;
    o.bin_s = bin_s;
    auto hm = HostTimeHeatmap(**store, o);
    ASSERT_TRUE(hm.ok()) << hm.status().message();
    std::map<std::string, std::pair<double, int>> mean;
    int h = ColumnOf(*hm, "hostname"), b = ColumnOf(*hm, "bin_start_us"),
        v = ColumnOf(*hm, "norm_busbw");
    for (const auto& row : hm->rows) {
      const uint64_t bin = std::stoull(*row[b]);
      if (bin >= end || bin + static_cast<uint64_t>(bin_s * 1e6) <= start) continue;
      auto& m = mean[*row[h]];
      m.first += std::stod(*row[v]);
      m.second += 1;
    }
    ASSERT_EQ(mean.size(), 4u) << bin_s;
    std::string lowest;
    double low = 1e9;
    for (const auto& [name, m] : mean)
      if (m.first / m.second < low) low = m.first / m.second, lowest = name;
    EXPECT_EQ(lowest, "node-001") << bin_s;
  }
}

}  // namespace
}  // namespace collscope
