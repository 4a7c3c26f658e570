#include "core/nccl_tests_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "tests/test_util.h"

namespace collscope {
namespace {

std::string Fixture(const std::string& name) {
  return testing::FixturesDir() + "/nccl-tests/" + name;
}

#define SKIP_WITHOUT_FIXTURES()                                                          \
  if (!std::filesystem::exists(Fixture("nccl_allreduce.log")))                          \
  GTEST_SKIP() << "nccl-tests fixtures not found in " << testing::FixturesDir()          \
               << "/nccl-tests (set COLLSCOPE_FIXTURES)"

const NcclTestsResult* Find(const NcclTestsLog& log, uint64_t size, bool in_place) {
  for (const auto& r : log.results)
    if (r.size_bytes == size && r.in_place == in_place) return &r;
  return nullptr;
}

TEST(NcclTestsReader, OpFromNames) {
  EXPECT_EQ(NcclTestsOpFromName("all_reduce_perf"), "AllReduce");
  EXPECT_EQ(NcclTestsOpFromName("/x/nccl_reducescatter.log"), "ReduceScatter");
  EXPECT_EQ(NcclTestsOpFromName("reduce_scatter_perf"), "ReduceScatter");
  EXPECT_EQ(NcclTestsOpFromName("nccl_reduce.log"), "Reduce");
  EXPECT_EQ(NcclTestsOpFromName("alltoall_perf"), "AlltoAll");
  EXPECT_EQ(NcclTestsOpFromName("all_gather_perf"), "AllGather");
  EXPECT_EQ(NcclTestsOpFromName("sendrecv_perf"), "SendRecv");
  EXPECT_EQ(NcclTestsOpFromName("results.txt"), "");
}

TEST(NcclTestsReader, KnownAnswersOfTheRealLogs) {
  SKIP_WITHOUT_FIXTURES();
  struct Case { const char* file; const char* op; double avg; };
  const Case cases[] = {{"nccl_allreduce.log", "AllReduce", 68.4048},
                        {"nccl_allgather.log", "AllGather", 58.2651},
                        {"nccl_reducescatter.log", "ReduceScatter", 60.168},
                        {"nccl_alltoall.log", "AlltoAll", 58.6481},
                        {"nccl_broadcast.log", "Broadcast", 64.8653},
                        {"nccl_reduce.log", "Reduce", 65.018}};
  for (const Case& c : cases) {
    auto log = ReadNcclTestsFile(Fixture(c.file));
    ASSERT_TRUE(log.ok()) << c.file << ": " << log.status().message();
    EXPECT_EQ(log->op, c.op) << c.file;
    EXPECT_EQ(log->results.size(), 2u * 34) << c.file;  // 34 rows, two blocks each
    EXPECT_EQ(log->n_ranks, 8) << c.file;
    EXPECT_EQ(log->nnodes, 1) << c.file;
    EXPECT_EQ(log->n_gpus, 8);
    EXPECT_EQ(log->iters, 20);
    EXPECT_EQ(log->warmup_iters, 5);
    EXPECT_EQ(log->max_bytes, 8589934592u);
    ASSERT_TRUE(log->avg_busbw_gbs.has_value());
    EXPECT_DOUBLE_EQ(*log->avg_busbw_gbs, c.avg);
    EXPECT_EQ(log->out_of_bounds.value_or(-1), 0);
    // The footer's average is the mean of every busbw in the file (to ~0.001).
    double sum = 0;
    for (const auto& r : log->results) sum += r.busbw_gbs;
    EXPECT_NEAR(sum / static_cast<double>(log->results.size()), c.avg, 0.002) << c.file;
    for (uint64_t size : {8589934592ull, 4294967296ull, 2147483648ull, 1073741824ull,
                          536870912ull, 32ull})
      EXPECT_NE(Find(*log, size, false), nullptr) << c.file << " " << size;
    // The NCCL INFO line is skipped (all but alltoall have one).
    EXPECT_EQ(log->skipped_lines, std::string(c.file) == "nccl_alltoall.log" ? 0 : 1) << c.file;
  }
  auto ar = ReadNcclTestsFile(Fixture("nccl_allreduce.log"));
  const NcclTestsResult* oop = Find(*ar, 8589934592ull, false);
  const NcclTestsResult* ip = Find(*ar, 8589934592ull, true);
  ASSERT_TRUE(oop && ip);
  EXPECT_DOUBLE_EQ(oop->time_us, 63896);
  EXPECT_DOUBLE_EQ(oop->algbw_gbs, 134.44);
  EXPECT_DOUBLE_EQ(oop->busbw_gbs, 235.26);
  EXPECT_DOUBLE_EQ(ip->time_us, 63959);
  EXPECT_DOUBLE_EQ(ip->algbw_gbs, 134.30);
  EXPECT_DOUBLE_EQ(ip->busbw_gbs, 235.03);
  EXPECT_EQ(oop->redop, "sum");
  EXPECT_FALSE(oop->root.has_value());
  EXPECT_FALSE(oop->n_wrong.has_value());  // N/A
  EXPECT_EQ(oop->msg_size_bytes, 8589934592ull);
  auto a2a = ReadNcclTestsFile(Fixture("nccl_alltoall.log"));
  oop = Find(*a2a, 8589934592ull, false);
  ip = Find(*a2a, 8589934592ull, true);
  ASSERT_TRUE(oop && ip);
  EXPECT_DOUBLE_EQ(oop->time_us, 33508);
  EXPECT_DOUBLE_EQ(oop->busbw_gbs, 224.31);
  EXPECT_DOUBLE_EQ(ip->algbw_gbs, 258.47);
  EXPECT_DOUBLE_EQ(ip->busbw_gbs, 226.16);
  EXPECT_EQ(oop->redop, "");  // the header names redop; the rows have none
  EXPECT_EQ(oop->msg_size_bytes, 8589934592ull / 8);  // Inspector: per peer
  auto red = ReadNcclTestsFile(Fixture("nccl_reduce.log"));
  const NcclTestsResult* r = Find(*red, 8589934592ull, false);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->redop, "sum");
  EXPECT_EQ(r->root.value_or(-9), 0);
  EXPECT_DOUBLE_EQ(r->busbw_gbs, 228.38);
  auto bc = ReadNcclTestsFile(Fixture("nccl_broadcast.log"));
  r = Find(*bc, 8589934592ull, true);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->redop, "");
  EXPECT_EQ(r->root.value_or(-9), 0);
  EXPECT_DOUBLE_EQ(r->busbw_gbs, 234.70);
  auto ag = ReadNcclTestsFile(Fixture("nccl_allgather.log"));
  EXPECT_EQ(Find(*ag, 8589934592ull, false)->msg_size_bytes, 8589934592ull / 8);
}

TEST(NcclTestsReader, NewerPreambleExtraColumnsAndSeveralTests) {
  std::string text =
      "# nccl-tests version 2.19.6 nccl-headers=22807 nccl-library=22807\n"
      "# Collective test starting: all_gather_perf\n"
      "# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 1 iters: 5 "
      "agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
      "#  Rank  0 Group  0 Pid   4242 on      nodeA device  0 [0000:1b:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid   4243 on      nodeB device  0 [0000:1b:00] NVIDIA H100 80GB HBM3\n"
      "#\n#                                                              out-of-place                       in-place\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
      "        1024           128     float    none      -1    12.50    0.08    0.04      0    12.40    0.08    0.04      0\n"
      "        2048           256     float    none      -1   1.2e+03    0.00    0.00      0    13.00    0.16    0.08      0\n"
      "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.04 \n#\n"
      "# Collective test concluded: all_gather_perf\n"
      "# Collective test starting: all_reduce_perf\n"
      "# nThread 1 nGpus 1 minBytes 1024 maxBytes 1024 step: 2(factor) warmup iters: 1 iters: 5 "
      "agg iters: 1 validation: 1 graph: 0\n"
      "#  Rank  0 Group  0 Pid   4242 on      nodeA device  0 [0000:1b:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid   4243 on      nodeB device  0 [0000:1b:00] NVIDIA H100 80GB HBM3\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong   i_min   i_max   i_p99  i_cv%\n"
      "        1024           256     float     sum      -1    20.00    0.05    0.05      0   1   2   3   4.5    21.00    0.05    0.05      0   1   2   3   4.5   2024-05-01 12:00:00\n";
  auto log = ParseNcclTestsOutput(text, "mixed.log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_EQ(log->results.size(), 6u);
  EXPECT_EQ(log->results[0].op, "AllGather");
  EXPECT_EQ(log->results[0].root.value_or(-9), -1);
  EXPECT_EQ(log->results[0].redop, "none");
  EXPECT_EQ(log->results[0].n_wrong.value_or(-1), 0);
  EXPECT_EQ(log->results[0].n_ranks, 2);
  EXPECT_EQ(log->results[0].nnodes, 2);
  EXPECT_EQ(log->results[0].msg_size_bytes, 512u);
  EXPECT_DOUBLE_EQ(log->results[2].time_us, 1200);  // exponent notation
  EXPECT_EQ(log->results[4].op, "AllReduce");
  EXPECT_EQ(log->results[4].redop, "sum");
  EXPECT_DOUBLE_EQ(log->results[5].time_us, 21);  // -I columns and -S timestamp skipped
  EXPECT_EQ(log->results[5].msg_size_bytes, 1024u);
  EXPECT_EQ(log->devices.size(), 2u);
  EXPECT_EQ(log->devices[1].host, "nodeB");
  EXPECT_EQ(log->devices[1].gpu, "NVIDIA H100 80GB HBM3");
}

TEST(NcclTestsReader, ErrorsNameTheLine) {
  auto no_op = ParseNcclTestsOutput(
      "#  Rank  0 Pid 1 on a device 0 [0x00] X\n"
      "        1024           256     float     sum    20.00    0.05    0.05  N/A   21.00    0.05    0.05  N/A\n",
      "results.txt");
  ASSERT_FALSE(no_op.ok());
  EXPECT_NE(no_op.status().message().find("results.txt:2"), std::string::npos);
  auto bad = ParseNcclTestsOutput(
      "        1024           256     float     sum    abc    0.05    0.05  N/A   21.00    0.05    0.05  N/A\n",
      "all_reduce.log");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("all_reduce.log:1"), std::string::npos);
  auto forced = ParseNcclTestsOutput(
      "        1024           256     float     sum    20.00    0.05  0.0875  N/A   21.00    0.05  0.0875  N/A\n",
      "results.txt", "AllReduce");
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->n_ranks, 8);  // recovered from busbw / algbw = 2(n-1)/n = 1.75
}

TEST(NcclTestsReader, StoredAsABaselineRunAndReplacedOnReStore) {
  SKIP_WITHOUT_FIXTURES();
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto log = ReadNcclTestsFile(Fixture("nccl_allreduce.log"));
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE(StoreNcclTestsLog(**store, "a100-base", Fixture("nccl_allreduce.log"), *log).ok());
  ASSERT_TRUE(StoreNcclTestsLog(**store, "a100-base", Fixture("nccl_allreduce.log"), *log).ok());
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM nccl_tests_results"), 68);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM nccl_tests_files"), 1);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM runs WHERE name = 'a100-base'"), 1);
  EXPECT_EQ(*(*store)->QueryInt("SELECT count(*) FROM nccl_tests_results WHERE op = 'AllReduce' "
                                "AND in_place AND busbw_gbs = 235.03"), 1);
}

}  // namespace
}  // namespace collscope
