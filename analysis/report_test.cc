#include "analysis/report.h"

#include <gtest/gtest.h>

#include "analysis/views.h"
#include "core/ingest.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

using testing::CollLine;

class Report : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string log;
    for (int sn = 0; sn < 20; ++sn)
      log += CollLine("h1", 1, "0xa", 0, 2, 2, "AllReduce", sn, 4194304, 400 + sn, "10.485760",
                      "10.485760", 1767225600000000 + sn * 1000000);
    testing::WriteFile(dir_ / "logs/h1-pid1.log", log);
    auto store = Store::Open(dir_ / "s.duckdb");
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
    IngestOptions o;
    o.run = "job";
    ASSERT_TRUE(Ingest(*store_, {dir_ / "logs"}, o).ok());
    ASSERT_TRUE(InstallAnalysisViews(*store_, false).ok());
  }
  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(Report, SelfContainedWithEverySectionAndNoNetwork) {
  ReportOptions o;
  auto html = RenderReport(*store_, o);
  ASSERT_TRUE(html.ok()) << html.status().message();
  for (const char* id : {"id=\"overview\"", "id=\"findings\"", "id=\"hot-kernels\"",
                         "id=\"ecdf\"", "id=\"temporal\"", "id=\"spatial\"", "id=\"ranges\"",
                         "id=\"baseline\"", "id=\"report-data\"", "id=\"findings-data\">null"})
    EXPECT_NE(html->find(id), std::string::npos) << id;
  // Nothing is fetched: no external scripts, styles or URLs to load.
  EXPECT_EQ(html->find("<script src"), std::string::npos);
  EXPECT_EQ(html->find("<link"), std::string::npos);
  EXPECT_EQ(html->find("src=\"http"), std::string::npos);
  EXPECT_EQ(html->find("href=\"http"), std::string::npos);
  if (ReportHasCharts()) {
    EXPECT_NE(html->find("echarts"), std::string::npos);
    EXPECT_GT(html->size(), 500000u);
  }
  EXPECT_NE(html->find("\"run\":\"job\""), std::string::npos);
}

TEST_F(Report, FindingsDocumentIsEmbeddedAndValidated) {
  testing::WriteFile(dir_ / "f.json",
                     "{\"schema\":\"collscope.findings.v1\",\"findings\":[{\"kind\":\"nic_degrade\","
                     "\"confidence\":0.9,\"hosts\":[\"h1\"],\"ranks\":[0],\"victims\":[],\"comms\":"
                     "[\"0xa\"],\"start_us\":1,\"end_us\":2,\"summary\":\"</script><b>x\","
                     "\"evidence\":{}}]}");
  ReportOptions o;
  o.findings_path = dir_ / "f.json";
  auto html = RenderReport(*store_, o);
  ASSERT_TRUE(html.ok()) << html.status().message();
  EXPECT_NE(html->find("nic_degrade"), std::string::npos);
  EXPECT_EQ(html->find("</script><b>x"), std::string::npos);  // cannot close the data script
  testing::WriteFile(dir_ / "bad.json", "{\"findings\":[]}");
  o.findings_path = dir_ / "bad.json";
  EXPECT_FALSE(RenderReport(*store_, o).ok());
  o.findings_path = dir_ / "missing.json";
  EXPECT_FALSE(RenderReport(*store_, o).ok());
  o.findings_path.clear();
  o.run = "nope";
  EXPECT_FALSE(RenderReport(*store_, o).ok());
}

}  // namespace
}  // namespace collscope
