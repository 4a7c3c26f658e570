#include "core/readers/step_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/ingest.h"

namespace collscope::readers {
namespace {

namespace fs = std::filesystem;

class StepFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("collscope-stepfile-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  fs::path dir_;
};

const char kProcess[] =
    "{\"collscope_steps_version\":1,\"type\":\"process\",\"hostname\":\"node-3\",\"pid\":77,\"rank\":5,"
    "\"world_size\":8,\"parallel\":{\"dp\":[1,2],\"tp\":[1,4]}}\n";

TEST_F(StepFileTest, StepsPhasesAndLaterGpuTimesAreRead) {
  const std::string path = Write("any-name.txt", std::string(kProcess) +
      "{\"type\":\"step\",\"rank\":-1,\"step\":4,\"start_us\":1000,\"wall_us\":500,\"phases\":["
      "{\"name\":\"forward\",\"start_us\":1010,\"wall_us\":100,\"count\":2},"
      "{\"name\":\"backward\",\"start_us\":1200,\"wall_us\":250.5,\"count\":2}]}\n"
      "{\"type\":\"gpu\",\"rank\":5,\"step\":4,\"phase\":\"forward\",\"gpu_us\":60}\n"
      "{\"type\":\"gpu\",\"rank\":5,\"step\":4,\"phase\":\"forward\",\"gpu_us\":30}\n");
  EXPECT_TRUE(IsStepSeriesFile(path));
  auto f = ReadStepFile(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->procs.size(), 1u);
  EXPECT_EQ(f->procs[0].hostname, "node-3");
  EXPECT_EQ(f->procs[0].parallel[2], 1);  // tp rank
  EXPECT_EQ(f->procs[0].parallel[3], 4);  // tp size
  EXPECT_EQ(f->procs[0].parallel[4], -1);  // pp: not declared
  ASSERT_EQ(f->steps.size(), 1u);
  EXPECT_EQ(f->steps[0].rank, 5);  // rank -1: the process line's
  ASSERT_EQ(f->phases.size(), 2u);
  EXPECT_EQ(f->phases[0].phase, "forward");
  EXPECT_DOUBLE_EQ(f->phases[0].gpu_us, 90);  // both GPU lines add up
  EXPECT_DOUBLE_EQ(f->phases[1].wall_us, 250.5);
  EXPECT_DOUBLE_EQ(f->phases[1].gpu_us, -1);  // not measured
  EXPECT_TRUE(f->rejected.empty());
}

TEST_F(StepFileTest, BadLinesAreRejectedWithTheirLineAndReason) {
  const std::string path = Write("r.steps.jsonl", std::string(kProcess) +
      "{\"type\":\"step\",\"rank\":5,\"step\":1,\"start_us\":1000,\"wall_us\":-3,\"phases\":[]}\n"
      "not json\n"
      "{\"type\":\"step\",\"rank\":5,\"step\":2,\"start_us\":1000,\"wall_us\":3,\"phases\":[{\"start_us\":1}]}\n"
      "{\"type\":\"step\",\"rank\":5,\"step\":3,\"start_us\":1e300,\"wall_us\":3,\"phases\":[]}\n"
      "{\"type\":\"kernel\"}\n"
      "{\"type\":\"step\",\"rank\":5,\"step\":4,\"start_us\":1000,\"wall_us\":3,\"phases\":[]}\n");
  auto f = ReadStepFile(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->rejected.size(), 5u);
  EXPECT_EQ(f->rejected[0].line, 2u);
  EXPECT_EQ(f->rejected[0].reason, "\"wall_us\" out of range");
  EXPECT_EQ(f->rejected[1].reason, "not a JSON object");
  EXPECT_EQ(f->rejected[2].reason, "a phase without a name");
  EXPECT_EQ(f->rejected[3].reason, "\"start_us\" out of range");
  EXPECT_EQ(f->rejected[4].reason, "unknown line type \"kernel\"");
  ASSERT_EQ(f->steps.size(), 1u);  // only step 4, and no phase of a rejected line
  EXPECT_EQ(f->steps[0].step, 4);
  EXPECT_TRUE(f->phases.empty());
}

TEST_F(StepFileTest, AnotherVersionOrNoProcessLineFirstIsRefusedAsAWhole) {
  auto v2 = ReadStepFile(Write("a", "{\"collscope_steps_version\":2,\"type\":\"process\"}\n"));
  ASSERT_FALSE(v2.ok());
  EXPECT_NE(v2.status().message().find("format version 2; this collscope reads version 1"), std::string::npos)
      << v2.status().message();
  auto none = ReadStepFile(Write("b", "{\"type\":\"step\",\"rank\":1}\n"));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(":1: "), std::string::npos) << none.status().message();
  EXPECT_FALSE(IsStepSeriesFile(dir_ / "b"));
}

TEST_F(StepFileTest, IngestStoresEveryTableAndReplacesAFileReadAgain) {
  const std::string path = Write("h-pid77.steps.jsonl", std::string(kProcess) +
      "{\"type\":\"step\",\"rank\":5,\"step\":0,\"start_us\":1000,\"wall_us\":500,\"phases\":["
      "{\"name\":\"forward\",\"start_us\":1010,\"wall_us\":100,\"count\":1}]}\n"
      "oops\n");
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  for (int pass = 0; pass < 2; ++pass) {
    auto rep = IngestStepFiles(**store, {dir_.string()}, "job");
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    EXPECT_EQ(rep->files_read, 1u);
    EXPECT_EQ(rep->lines_rejected, 1u);
    ASSERT_EQ(rep->first_rejections.size(), 1u);
    EXPECT_EQ(rep->first_rejections[0], path + ":3: not a JSON object");
  }
  // Read twice, stored once.
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM steps WHERE source = 'annotation'"), 1);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM step_phases"), 1);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM step_ranks WHERE tp_size = 4 AND pp_rank IS NULL"), 1);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM step_files WHERE lines_rejected = 1"), 1);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM ingest_log WHERE line = 3"), 1);
  std::map<int, std::string> hosts;
  auto series = LoadStepSeries(**store, "job", &hosts);
  ASSERT_TRUE(series.ok()) << series.status().message();
  ASSERT_EQ(series->rows.size(), 1u);
  EXPECT_EQ(series->rows[0].rank, 5);
  EXPECT_DOUBLE_EQ(series->rows[0].phases.at("forward"), 100);
  EXPECT_EQ(hosts.at(5), "node-3");
  EXPECT_TRUE(series->declared_stage.empty()) << "this process declared no pipeline";
}

TEST_F(StepFileTest, AStepFileAmongInspectorLogsIsNoInspectorLog) {
  Write("h-pid77.steps.jsonl", kProcess);
  Write("h-pid77.log", "");
  auto found = DiscoverInputs({dir_.string()});
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->files.size(), 1u);
  EXPECT_EQ(fs::path(found->files[0]).filename(), "h-pid77.log");
  // Named explicitly too.
  auto named = DiscoverInputs({(dir_ / "h-pid77.steps.jsonl").string()});
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(named->files.empty());
}

}  // namespace
}  // namespace collscope::readers
