// `collscope ingest` on NCCL Inspector Prometheus textfiles, through the real binary: found by
// name or content, counted, stored, every line not understood named, exit 1 when there is one.
#include <gtest/gtest.h>

#include <string>

#include "tests/prom_samples.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

using testing::Output;

Output Collscope(const std::string& args) {
  return testing::RunShell(testing::CollscopeBinary() + " " + args + " 2>&1");
}

TEST(PromCli, IngestCountsStoresAndNamesWhatItDidNotUnderstand) {
  testing::TempDir dir;
  testing::WriteFile(dir / "job/nccl_inspector_metrics_0a1b2c3d-0000-1111-2222-333344445555.prom", testing::kProm230);
  testing::WriteFile(dir / "job/scraped.txt", testing::kProm229);  // found by content
  Output ing = Collscope("ingest " + dir / "job" + " --db " + dir / "s.duckdb");
  EXPECT_EQ(ing.code, 0) << ing.text;
  EXPECT_NE(ing.text.find("NCCL Inspector Prometheus files: 2 (10 samples), 0 lines not understood"), std::string::npos)
      << ing.text;
  Output json = Collscope("ingest " + dir / "job" + " --db " + dir / "s.duckdb --json");
  EXPECT_NE(json.text.find("\"prom_files_read\": 2, \"prom_samples\": 10, \"prom_lines_unused\": 0"), std::string::npos)
      << json.text;
  // Ingested twice: the files' rows are replaced, not added.
  Output rows = Collscope("sql --db " + dir / "s.duckdb" +
                          " \"SELECT count(*) || ' ' || count(DISTINCT file_id) AS n FROM prom_samples\"");
  EXPECT_NE(rows.text.find("10 2"), std::string::npos) << rows.text;

  // A file with a line it does not understand and a half-written last line: stored, the line
  // named with its path and number, exit 1; the unfinished line is said, not counted against it.
  testing::WriteFile(dir / "bad/m.prom", testing::kProm230 + "nccl_bus_bandwidth_gbs{node=\"n7\"} 1\nnccl_bus_band");
  Output b = Collscope("ingest " + dir / "bad" + " --db " + dir / "b.duckdb");
  EXPECT_EQ(b.code, 1) << b.text;
  EXPECT_NE(b.text.find("NCCL Inspector Prometheus files: 1 (4 samples), 1 lines not understood, 1 unfinished last lines"),
            std::string::npos)
      << b.text;
  EXPECT_NE(b.text.find("not understood: " + (dir / "bad/m.prom") + ":5: nccl_bus_bandwidth_gbs: neither"),
            std::string::npos)
      << b.text;
}

}  // namespace
}  // namespace collscope
