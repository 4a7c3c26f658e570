#include "analysis/summary.h"

#include <gtest/gtest.h>

#include "analysis/views.h"
#include "core/ingest.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

using testing::CollLine;

TEST(Summary, HotKernelsRankedByTimeWithShares) {
  testing::TempDir dir;
  std::string log;
  for (int sn = 1; sn <= 3; ++sn)
    log += CollLine("h1", 1, "0xa", 0, 8, 1, "AllReduce", sn, 1048576, 100, "10.485760",
                    "18.350080");
  log += CollLine("h1", 1, "0xb", 0, 16, 2, "AllGather", 1, 4096, 900, "0.072818", "0.068267");
  testing::WriteFile(dir / "logs/h1-pid1.log", log);
  testing::WriteFile(dir / "logs/h2-pid2.log",
                     CollLine("h2", 2, "0xb", 8, 16, 2, "AllGather", 1, 4096, 900, "0.072818",
                              "0.068267"));
  auto store = Store::Open(dir / "s.duckdb");
  ASSERT_TRUE(store.ok());
  IngestOptions o;
  o.run = "job";
  ASSERT_TRUE(Ingest(**store, {dir / "logs"}, o).ok());
  ASSERT_TRUE(InstallAnalysisViews(**store, false).ok());

  Result<std::vector<RunSummary>> r = Summarize(**store, "", 10);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  const RunSummary& s = (*r)[0];
  EXPECT_EQ(s.name, "job");
  EXPECT_EQ(s.records, 5u);
  EXPECT_EQ(s.hosts, 2u);
  EXPECT_EQ(s.processes, 2u);
  EXPECT_EQ(s.communicators, 2u);
  ASSERT_EQ(s.hot_kernels.size(), 2u);
  const HotKernel& first = s.hot_kernels[0];
  EXPECT_EQ(first.kernel_key, "mixed/16r2n/AllGather/4096");
  EXPECT_EQ(first.time_us, 1800u);
  EXPECT_DOUBLE_EQ(first.time_share, 1800.0 / 2100.0);
  EXPECT_DOUBLE_EQ(first.bytes_share, 8192.0 / (8192.0 + 3 * 1048576.0));
  const HotKernel& second = s.hot_kernels[1];
  EXPECT_EQ(second.kernel_key, "nvlink-only/8r1n/AllReduce/1048576");
  EXPECT_EQ(second.records, 3u);
  EXPECT_DOUBLE_EQ(second.cumulative_time_share, 1.0);

  EXPECT_FALSE(Summarize(**store, "nope", 10).ok());
  // Read-only sessions get the same views as temporary objects.
  store->reset();
  auto ro = Store::Open(dir / "s.duckdb", Store::Options::ReadOnly());
  ASSERT_TRUE(ro.ok());
  EXPECT_TRUE(InstallAnalysisViews(**ro, true).ok());
  EXPECT_EQ(*(*ro)->QueryInt("SELECT count(*) FROM hot_kernels"), 2);
  // ... which the store already holds as this binary defines them: none is made again (each
  // costs a parse and bind at every command's start).
  EXPECT_EQ(*(*ro)->QueryInt("SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT internal"), 0);
  EXPECT_EQ(*(*ro)->QueryInt("SELECT count(*) FROM duckdb_tables() WHERE temporary"), 0);
}

}  // namespace
}  // namespace collscope
