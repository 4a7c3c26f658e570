// Frameworks' iteration logs as step series: Megatron-DeepSpeed's real log (shared fixtures),
// Megatron-LM's stamped lines, NeMo's progress bar, and what is not such a log.
#include "core/readers/iteration_log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/ingest.h"
#include "tests/test_util.h"

namespace collscope::readers {
namespace {

namespace fs = std::filesystem;

std::string Fixtures() {
  const char* e = std::getenv("COLLSCOPE_FIXTURES");
  return e ? e : COLLSCOPE_FIXTURES_DEFAULT;
}

class IterationLogTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    collscope::testing::WriteFile(dir_ / name, text);
    return dir_ / name;
  }
  collscope::testing::TempDir dir_;
};

TEST_F(IterationLogTest, MegatronDeepSpeedLogIsAJobLevelSeriesStoredUnderAnyName) {
  const std::string src = Fixtures() + "/megatron/megatron_deepspeed.log";
  if (!fs::exists(src)) GTEST_SKIP() << "fixture absent: " << src;
  EXPECT_TRUE(IsIterationLog(src));  // its first iteration line is line 1,429
  auto f = ReadIterationLog(src);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->source, "megatron");
  ASSERT_EQ(f->steps.size(), 5u);
  EXPECT_EQ(f->steps[0].step, 1);
  EXPECT_EQ(f->steps[0].rank, -1);
  EXPECT_NEAR(f->steps[0].wall_us, 76015300, 1);
  EXPECT_NEAR(f->steps[4].wall_us, 74494900, 1);
  EXPECT_LT(f->steps[0].start_us, 0);  // unknown
  ASSERT_EQ(f->procs.size(), 1u);
  EXPECT_EQ(f->procs[0].hostname, "vm-07-14");  // the last rank prints the iteration lines
  EXPECT_TRUE(f->rejected.empty());

  // Stored by ingest through the step-series path under a name Inspector discovery would take,
  // and not read as an Inspector log (every line of it would be rejected as no JSON).
  const fs::path copy = dir_ / "job/train.log";
  fs::create_directories(copy.parent_path());
  fs::copy_file(src, copy);
  auto store = Store::Open(dir_ / "s.duckdb");
  ASSERT_TRUE(store.ok());
  auto inspector = Ingest(**store, {dir_ / "job"}, IngestOptions{});
  ASSERT_TRUE(inspector.ok()) << inspector.status().message();
  EXPECT_EQ(inspector->files_seen, 0u);
  EXPECT_EQ(inspector->lines_rejected, 0u);
  for (int pass = 0; pass < 2; ++pass) {  // read again: replaced, not doubled
    auto rep = IngestStepFiles(**store, {dir_ / "job"}, "job");
    ASSERT_TRUE(rep.ok()) << rep.status().message();
    EXPECT_EQ(rep->files_read, 1u);
    EXPECT_EQ(rep->steps, 5u);
  }
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM steps WHERE source = 'megatron' AND rank = -1 AND start_us IS NULL"), 5);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM step_ranks WHERE hostname = 'vm-07-14' AND pid IS NULL"), 1);
  auto series = LoadStepSeries(**store, "job");
  ASSERT_TRUE(series.ok()) << series.status().message();
  ASSERT_EQ(series->rows.size(), 5u);
  EXPECT_EQ(series->rows[1].step, 2);
  EXPECT_NEAR(series->rows[1].dur_us, 75254000, 1);
  EXPECT_EQ(series->rows[1].start_us, 0);
}

TEST_F(IterationLogTest, MegatronLmStampedLinesAndABadOneWithItsLine) {
  const std::string path = Write("out.txt",
      "using world size: 8\n"
      " [2024-05-01 12:00:00] iteration       10/     100 | consumed samples: 640 | elapsed time per iteration (ms): "
      "1234.5 | throughput per GPU (TFLOP/s/GPU): 400.1 | learning rate: 1.0E-04 |\n"
      " [2024-05-01 12:00:12] iteration       20/     100 | consumed samples: 1280 | elapsed time per iteration (ms): "
      "nan | learning rate: 1.0E-04 |\n"
      " [2024-05-01 12:00:25] iteration       30/     100 | elapsed time per iteration (ms): 1250.0 |\n"
      " iteration 99999999999999999999/ 100 | elapsed time per iteration (ms): 1250.0 |\n"
      " iteration 40/ 100 | elapsed time per iteration (ms): -3 |\n");
  EXPECT_TRUE(IsIterationLog(path));
  auto f = ReadIterationLog(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->steps.size(), 2u);
  EXPECT_EQ(f->steps[0].step, 10);
  EXPECT_DOUBLE_EQ(f->steps[0].wall_us, 1234500);
  EXPECT_EQ(f->steps[1].step, 30);
  ASSERT_EQ(f->rejected.size(), 3u);
  EXPECT_EQ(f->rejected[0].line, 3u);
  EXPECT_NE(f->rejected[0].reason.find("elapsed time per iteration"), std::string::npos) << f->rejected[0].reason;
  EXPECT_EQ(f->rejected[1].reason, "step number out of range");
  EXPECT_EQ(f->rejected[2].reason, "iteration time out of range");
  EXPECT_EQ(f->procs[0].hostname, "");  // "[2024-05-01 12" is no host
}

TEST_F(IterationLogTest, NemoProgressBarRefreshedInPlaceKeepsEachStepsLastValue) {
  const std::string path = Write("nemo_log_globalrank-0.txt",
      "Epoch 0: :   9%| | 9/100 [00:11<01:48, reduced_train_loss=8.120, global_step=8.000, train_step_timing in s=1.210]"
      "\rEpoch 0: :  10%| | 10/100 [00:12<01:48, reduced_train_loss=8.100, global_step=9.000, train_step_timing in s=1.230]"
      "\rEpoch 0: :  10%| | 10/100 [00:12<01:48, reduced_train_loss=8.100, global_step=9.000, train_step_timing in s=1.240]\n");
  EXPECT_TRUE(IsIterationLog(path));
  auto f = ReadIterationLog(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->source, "nemo");
  ASSERT_EQ(f->steps.size(), 2u);
  EXPECT_EQ(f->steps[0].step, 8);
  EXPECT_DOUBLE_EQ(f->steps[1].wall_us, 1240000);
}

TEST_F(IterationLogTest, JsonLinesGzipAndPlainTextAreNoIterationLogs) {
  // An Inspector line that happens to hold the words, a gzip stream, and a log without them.
  EXPECT_FALSE(IsIterationLog(Write("a.log", "{\"header\":{\"note\":\" iteration 1/ 2 elapsed time per iteration (ms): 5\"}}\n")));
  EXPECT_FALSE(IsIterationLog(Write("b.log", std::string("\x1f\x8b\x08\x00 iteration 1/ 2 elapsed time per iteration (ms): 5\n", 52))));
  const std::string plain = Write("c.log", "NCCL INFO Bootstrap : Using eth0\nloss 1.0\n");
  EXPECT_FALSE(IsIterationLog(plain));
  auto f = ReadIterationLog(plain);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("c.log"), std::string::npos);
}

}  // namespace
}  // namespace collscope::readers
