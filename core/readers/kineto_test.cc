#include "core/readers/kineto.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "tests/test_util.h"

namespace collscope::readers {
namespace {

using collscope::testing::FixturesDir;
using collscope::testing::TempDir;
using collscope::testing::WriteFile;
using collscope::testing::WriteGzip;

// A hand-written trace: two steps, a launch-correlated kernel that runs after its step's CPU range
// ended (it belongs to the step that launched it), an NCCL kernel with PyTorch's metadata, a
// memcpy, and a kernel outside every step.
std::string TinyTrace(int rank) {
  return R"J({"schemaVersion": 1,
  "distributedInfo": {"backend": "nccl", "rank": )J" + std::to_string(rank) + R"J(, "world_size": 2,
    "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 2, "ranks": [0, 1]}],
    "nccl_version": "2.21.5"},
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}, {"id": 1, "name": "NVIDIA H100"}],
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 42, "tid": 42, "ts": 1000, "dur": 100},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#8", "pid": 42, "tid": 42, "ts": 1100, "dur": 100.5},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 42, "tid": 42, "ts": 1090, "dur": 2, "args": {"correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "gemm_a", "pid": 0, "tid": 7, "ts": 1010, "dur": 20, "args": {"device": 0, "stream": 7, "correlation": 4}},
  {"ph": "X", "cat": "kernel", "name": "gemm_a", "pid": 0, "tid": 7, "ts": 1105, "dur": 30, "args": {"device": 0, "stream": 7, "correlation": 5}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "pid": 0, "tid": 20, "ts": 1140.25, "dur": 10.5,
   "args": {"device": 0, "stream": 20, "correlation": 6, "Collective name": "allreduce", "In msg nelems": 1024,
            "Out msg nelems": 1024, "Group size": 2, "dtype": "BFloat16", "Process Group Name": "0",
            "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1]"}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 1150, "dur": 1, "args": {"device": 0, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "early", "pid": 0, "tid": 7, "ts": 900, "dur": 1, "args": {"device": 0, "stream": 7}},
  {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}
  ],
  "baseTimeNanoseconds": 1700000000000000000}
)J";
}

TEST(Kineto, ParsesStepsKernelsAndNcclMetadata) {
  auto t = ParseKinetoTrace(TinyTrace(1), "/x/host-a_4242.1700000000000.pt.trace.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->rank, 1);
  EXPECT_EQ(t->world_size, 2);
  EXPECT_EQ(t->rank_source, "distributedInfo");
  EXPECT_EQ(t->hostname, "host-a");
  EXPECT_EQ(t->pid, 42);  // from the ProfilerStep events, not the file name
  EXPECT_EQ(t->nccl_version, "2.21.5");
  EXPECT_EQ(t->device_name, "NVIDIA H100");
  ASSERT_EQ(t->pgs.size(), 1u);
  EXPECT_EQ(t->pgs[0].desc, "default_pg");
  EXPECT_EQ(t->pgs[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(t->events, 9u);
  ASSERT_EQ(t->steps.size(), 2u);
  const double base = 1700000000000000.0;
  EXPECT_EQ(t->steps[0].step, 7);
  EXPECT_DOUBLE_EQ(t->steps[0].start_us, base + 1000);
  EXPECT_DOUBLE_EQ(t->steps[1].dur_us, 100.5);
  ASSERT_EQ(t->kernels.size(), 5u);  // sorted by start
  EXPECT_EQ(t->Str(t->kernels[0].name), "early");
  EXPECT_EQ(t->kernels[0].step, -1);
  EXPECT_EQ(t->kernels[1].step, 7);
  // Launched at 1090 (inside step 7), ran at 1105 (inside step 8's CPU range): step 7.
  EXPECT_EQ(t->kernels[2].step, 7);
  EXPECT_EQ(t->kernels[2].correlation, 5);
  const KinetoKernel& n = t->kernels[3];
  EXPECT_EQ(n.kind, KernelKind::kNccl);
  EXPECT_EQ(n.step, 8);  // no launch event: the last step started before it ran
  EXPECT_EQ(n.stream, 20);
  EXPECT_DOUBLE_EQ(n.start_us, base + 1140.25);
  EXPECT_DOUBLE_EQ(n.dur_us, 10.5);
  EXPECT_EQ(t->Str(n.coll), "allreduce");
  EXPECT_EQ(n.in_nelems, 1024);
  EXPECT_EQ(n.group_size, 2);
  EXPECT_EQ(t->Str(n.dtype), "BFloat16");
  EXPECT_EQ(t->Str(n.pg_desc), "default_pg");
  EXPECT_EQ(t->Str(n.pg_ranks), "[0, 1]");
  EXPECT_EQ(t->kernels[4].kind, KernelKind::kMemcpy);
  EXPECT_EQ(t->steps[0].n_kernels, 2);
  EXPECT_DOUBLE_EQ(t->steps[0].compute_us, 50);
  EXPECT_DOUBLE_EQ(t->steps[1].nccl_us, 10.5);
  EXPECT_EQ(t->steps[1].n_kernels, 2);
}

TEST(Kineto, RejectsWhatIsNotATrace) {
  EXPECT_FALSE(ParseKinetoTrace("{\"a\": 1}", "x.json").ok());
  EXPECT_FALSE(ParseKinetoTrace("not json", "x.json").ok());
  EXPECT_FALSE(ReadKinetoTrace("/nonexistent/x.pt.trace.json").ok());
}

// Found by tests/fuzz/kineto_fuzz: an integer field written as a float beyond int64 was
// converted anyway (undefined behaviour; UBSan aborts). It is no integer: the field is unread.
TEST(Kineto, AnIntegerFieldBeyondInt64IsNotRead) {
  std::string trace = TinyTrace(1);
  const std::string pid = "\"pid\": 42, \"tid\": 42, \"ts\": 1000";
  ASSERT_NE(trace.find(pid), std::string::npos);
  trace.replace(trace.find(pid), pid.size(), "\"pid\": 1.8e19, \"tid\": 42, \"ts\": 1000");
  auto t = ParseKinetoTrace(trace, "/x/host-a_4242.1700000000000.pt.trace.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->pid, 42);  // from the other step's event
  EXPECT_EQ(t->steps.size(), 2u);
}

// Found by tests/fuzz/kineto_fuzz and pickle_fuzz (Flight Recorder process groups use the same
// list): digits past int were accumulated into a signed overflow. Such a number is no rank.
TEST(Kineto, RankListDropsNumbersPastInt) {
  EXPECT_EQ(RankList("[0, 1, 2]"), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(RankList("0,99999999999999999999999,2"), (std::vector<int>{0, 2}));
  EXPECT_EQ(RankList("[2147483647, 2147483648]"), (std::vector<int>{2147483647}));
}

TEST(Kineto, IngestsIntoTheStoreOnceAndFeedsTheStepDetector) {
  TempDir dir;
  WriteFile(dir / "job/host-b_200.1.pt.trace.json", TinyTrace(1));
  WriteGzip(dir / "job/host-a_100.1.pt.trace.json.gz", TinyTrace(0));
  WriteFile(dir / "job/ground_truth.json", "{\"format\": 1}");  // not a trace: left alone
  WriteFile(dir / "job/x.inflight.json", "{\"schemaVersion\": 1, \"traceEvents\": []}");
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto rep = IngestKineto(**store, {dir / "job"}, "r1");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->files_seen, 2u);
  EXPECT_EQ(rep->files_read, 2u);
  EXPECT_EQ(rep->kernels, 10u);
  EXPECT_EQ(rep->nccl_kernels, 2u);
  EXPECT_EQ(rep->steps, 4u);
  Store& s = **store;
  EXPECT_EQ(*s.QueryInt("SELECT count(*) FROM kernels WHERE kind = 'nccl' AND coll = 'allreduce' "
                        "AND pg_desc = 'default_pg' AND in_nelems = 1024"), 2);
  EXPECT_EQ(*s.QueryInt("SELECT count(*) FROM kernels WHERE step IS NULL"), 2);
  EXPECT_EQ(*s.QueryInt("SELECT count(*) FROM kineto_traces WHERE hostname = 'host-b' AND rank = 1"), 1);
  EXPECT_EQ(*s.QueryInt("SELECT count(DISTINCT trace_id) FROM steps"), 2);
  // Same files again: nothing new.
  auto again = IngestKineto(s, {dir / "job"}, "r1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_unchanged, 2u);
  EXPECT_EQ(again->files_read, 0u);
  EXPECT_EQ(*s.QueryInt("SELECT count(*) FROM kernels"), 10);
  auto series = LoadKinetoSteps(s, "r1");
  ASSERT_TRUE(series.ok()) << series.status().message();
  EXPECT_EQ(series->source, "kineto");
  ASSERT_EQ(series->rows.size(), 4u);
  EXPECT_EQ(series->rows[0].rank, 0);
  EXPECT_EQ(series->rows[0].step, 7);
  EXPECT_EQ(series->rows[0].start_us, 1700000000001000);
  EXPECT_DOUBLE_EQ(series->rows[0].phases.at("compute"), 50);
  EXPECT_EQ(series->rows[3].rank, 1);
  EXPECT_DOUBLE_EQ(series->rows[3].dur_us, 100.5);
}

TEST(Kineto, CreatesItsTablesInAnOlderStore) {
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Exec("DROP TABLE kernels; DROP TABLE steps; DROP TABLE kineto_traces").ok());
  EXPECT_FALSE(HasKinetoTables(**store));
  auto series = LoadKinetoSteps(**store, "");
  ASSERT_TRUE(series.ok());
  EXPECT_TRUE(series->rows.empty());
  ASSERT_TRUE(EnsureKinetoTables(**store).ok());
  EXPECT_TRUE(HasKinetoTables(**store));
}

// The real traces of ../shared/fixtures/kineto (HolisticTraceAnalysis test data).
class KinetoFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FixturesDir() + "/kineto";
    if (!std::filesystem::exists(dir_ + "/nccl_parser_config/nccl_data.json.gz"))
      GTEST_SKIP() << "Kineto fixtures not found in " << dir_ << " (set COLLSCOPE_FIXTURES)";
  }
  std::string dir_;
};

TEST_F(KinetoFixture, NcclDataTraceHasItsDocumentedFacts) {
  auto t = ReadKinetoTrace(dir_ + "/nccl_parser_config/nccl_data.json.gz");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->rank, 0);
  EXPECT_EQ(t->world_size, 2);
  EXPECT_EQ(t->nccl_version, "2.17.1");
  EXPECT_EQ(t->device_name, "NVIDIA A100-PG509-200");
  EXPECT_EQ(t->base_time_ns, 1711964646000000000);
  ASSERT_EQ(t->pgs.size(), 1u);
  EXPECT_EQ(t->pgs[0].name, "0");
  EXPECT_EQ(t->pgs[0].desc, "default_pg");
  EXPECT_EQ(t->pgs[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(t->events, 40573u);
  ASSERT_EQ(t->steps.size(), 3u);
  EXPECT_EQ(t->steps[0].step, 4);
  EXPECT_EQ(t->steps[2].step, 6);
  EXPECT_NEAR(t->steps[0].dur_us, 222442.191, 1e-6);
  // ts is relative to baseTimeNanoseconds: the wall clock is 2024-05-22.
  EXPECT_NEAR(t->steps[0].start_us, 1711964646e6 + 4458676416788.066, 0.5);
  std::map<std::string, int> kinds, colls;
  std::map<int, int> streams;
  for (const KinetoKernel& k : t->kernels) {
    kinds[std::string(KernelKindName(k.kind))]++;
    if (k.kind == KernelKind::kNccl) {
      colls[t->Str(k.coll)]++;
      streams[k.stream]++;
      EXPECT_EQ(t->Str(k.pg_desc), "default_pg");
      EXPECT_EQ(k.group_size, 2);
    }
  }
  EXPECT_EQ(kinds["compute"], 2679);
  EXPECT_EQ(kinds["nccl"], 21);
  EXPECT_EQ(kinds["memcpy"], 960);
  EXPECT_EQ(kinds["memset"], 114);
  EXPECT_EQ(colls["allreduce"], 15);
  EXPECT_EQ(colls["broadcast"], 6);
  EXPECT_EQ(streams[40], 21);
  // Every activity was launched inside one of the three steps, evenly.
  for (const KinetoStep& s : t->steps) EXPECT_EQ(s.n_kernels, 1258) << s.step;
  EXPECT_NEAR(t->steps[0].compute_us, 38506.406, 1e-3);
  EXPECT_NEAR(t->steps[2].nccl_us, 22587.443, 1e-3);
  // The first allreduce's metadata.
  for (const KinetoKernel& k : t->kernels) {
    if (k.kind != KernelKind::kNccl || t->Str(k.coll) != "allreduce") continue;
    if (k.in_nelems != 6637568) continue;
    EXPECT_EQ(k.out_nelems, 6637568);
    EXPECT_EQ(t->Str(k.dtype), "Float");
    EXPECT_EQ(t->Str(k.pg_ranks), "[0, 1]");
    return;
  }
  ADD_FAILURE() << "no allreduce of 6637568 elements";
}

TEST_F(KinetoFixture, SampledTwoRankTracesIngest) {
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto rep = IngestKineto(**store, {dir_ + "/trace_filter"}, "hta");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->files_read, 2u);
  EXPECT_EQ(rep->steps, 4u);
  EXPECT_EQ(rep->kernels, 1204u + 1154u);
  EXPECT_EQ(rep->nccl_kernels, 20u);
  Store& s = **store;
  EXPECT_EQ(*s.QueryInt("SELECT count(*) FROM kineto_traces WHERE world_size = 128 AND pg_config IS NULL"), 2);
  EXPECT_EQ(*s.QueryInt("SELECT count(*) FROM kernels WHERE rank = 0 AND step = 551"), 602);
  EXPECT_EQ(*s.QueryInt("SELECT count(*) FROM kernels WHERE rank = 1 AND step = 552"), 577);
  EXPECT_EQ(*s.QueryInt("SELECT count(*) FROM kernels WHERE kind = 'nccl' AND name LIKE "
                        "'ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t%' AND stream IN (84, 203)"), 20);
  EXPECT_EQ(*s.QueryInt("SELECT count(DISTINCT stream) FROM kernels WHERE rank = 0 AND kind IN ('compute', 'nccl')"), 4);
  // ProfilerStep#551 of rank 0, wall clock as written (no baseTimeNanoseconds).
  EXPECT_EQ(*s.QueryInt("SELECT CAST(start_us AS BIGINT) FROM steps WHERE rank = 0 AND step = 551"),
            1682725898079292);
  EXPECT_EQ(*s.QueryInt("SELECT CAST(dur_us AS BIGINT) FROM steps WHERE rank = 1 AND step = 552"), 630639);
  EXPECT_EQ(*s.QueryInt("SELECT CAST(round(nccl_us) AS BIGINT) FROM steps WHERE rank = 1 AND step = 552"),
            211026);
}

}  // namespace
}  // namespace collscope::readers
