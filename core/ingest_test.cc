#include "core/ingest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/taxonomy.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

using testing::CollLine;
using testing::TempDir;
using testing::WriteFile;
using testing::WriteGzip;

const std::string kComm = "0x7f8c496ae9f661";

// A process log of `n` AllReduce records of 1 MiB, 100 us (bandwidths as Inspector prints them).
std::string ProcessLog(const std::string& host, int pid, int rank, int first_sn, int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += CollLine(host, pid, kComm, rank, 16, 2, "AllReduce", first_sn + i, 1048576, 100,
                  "10.485760", "19.660800");
  return s;
}

int64_t Count(Store& s, const std::string& sql) {
  Result<int64_t> v = s.QueryInt(sql);
  EXPECT_TRUE(v.ok()) << v.status().message();
  return v.ok() ? *v : -1;
}

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::Open(dir_ / "store.duckdb");
    ASSERT_TRUE(s.ok()) << s.status().message();
    store_ = std::move(*s);
  }
  Result<IngestReport> Run(const std::string& run = "job", uint64_t commit_every = 1ull << 30,
                           int fail_after = 0) {
    IngestOptions o;
    o.run = run;
    o.commit_every_bytes = commit_every;
    o.fail_after_commits = fail_after;
    return Ingest(*store_, {dir_ / "logs"}, o);
  }
  TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(IngestTest, EveryFormatVariantRecursivelyAndCountsReconcile) {
  WriteFile(dir_ / "logs/a/node1-pid10.log", ProcessLog("node1", 10, 0, 1, 5));
  WriteFile(dir_ / "logs/b/deeper/node2-pid20.jsonl", ProcessLog("node2", 20, 8, 1, 4));
  WriteGzip(dir_ / "logs/node3-pid30.log.gz", ProcessLog("node3", 30, 9, 1, 3));
  WriteFile(dir_ / "logs/ignored.txt", "not an input\n");
  // Verbose, p2p with comm_name, v4.1 dump_stats, v4.2 algo, nan bandwidths, and bad lines.
  std::string mixed =
      R"({"header":{"id":"0xa1","rank":1,"n_ranks":8,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1760000000000200,"hostname":"node4","pid":40},"coll_perf":{"coll":"AllGather","coll_sn":7,"coll_msg_size_bytes":4096,"coll_exec_time_us":12,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":2.730667,"coll_busbw_gbs":2.389333,"event_trace_sn":{"coll_start_sn":1,"coll_stop_sn":6,"kernel_events":[{"channel_id":0,"kernel_start_sn":2,"kernel_stop_sn":4,"kernel_record_sn":3},{"channel_id":1,"kernel_start_sn":3,"kernel_stop_sn":5,"kernel_record_sn":4}]},"event_trace_ts":{"coll_start_ts":1760000000000100,"coll_stop_ts":1760000000000150,"kernel_events":[{"channel_id":0,"kernel_start_ts":1760000000000110,"kernel_stop_ts":1760000000000122,"kernel_record_ts":1760000000000121},{"channel_id":1,"kernel_start_ts":1760000000000111,"kernel_stop_ts":1760000000000120,"kernel_record_ts":1760000000000119}]}}})"
      "\n"
      R"({"header":{"id":"0xb2","comm_name":"pp","rank":0,"n_ranks":2,"nnodes":2},"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1760000000000300,"hostname":"node4","pid":40},"p2p_perf":{"p2p":"Send","p2p_sn":1,"p2p_peer":1,"p2p_msg_size_bytes":1048576,"p2p_exec_time_us":100,"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":10.485760,"p2p_busbw_gbs":10.485760}})"
      "\n"
      R"({"header":{"id":"0xa1","rank":1,"n_ranks":8,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.1","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1760000000000400,"hostname":"node4","pid":40},"dump_stats":{"coll_records":1,"coll_dropped_total":3,"coll_dropped_since_last_dump":3,"p2p_records":1,"p2p_dropped_total":0,"p2p_dropped_since_last_dump":0}})"
      "\n"
      R"({"header":{"id":"0xa1","rank":1,"n_ranks":8,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.2","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1760000000000500,"hostname":"node4","pid":40},"coll_perf":{"coll":"AllReduce","coll_algo":"NVLS","coll_proto":"SIMPLE","coll_sn":9,"coll_msg_size_bytes":8,"coll_exec_time_us":0,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":"nan","coll_busbw_gbs":"nan"}})"
      "\n"
      "{broken json\n"
      "\n" +
      CollLine("node4", 40, "0xa1", 1, 8, 1, "AllReduce", 10, 8, 5, "1.5", "2.5");
  WriteFile(dir_ / "logs/node4-pid40.log", mixed);

  Result<IngestReport> r = Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->files_seen, 4u);
  EXPECT_EQ(r->lines_read, 5u + 4 + 3 + 7);
  EXPECT_EQ(r->records_stored, 5u + 4 + 3 + 4);
  EXPECT_EQ(r->dump_stats_stored, 1u);
  EXPECT_EQ(r->lines_rejected, 2u);
  EXPECT_EQ(r->lines_read, r->records_stored + r->dump_stats_stored + r->lines_rejected);

  Store& s = *store_;
  EXPECT_EQ(Count(s, "SELECT count(*) FROM records"), 16);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM records_v"), 16) << "every record joins its dimensions";
  EXPECT_EQ(Count(s, "SELECT count(*) FROM processes"), 4);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM communicators"), 3);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM communicators WHERE id = '0xa1' AND "
                     "coll_type = 'nvlink-only'"), 1);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM communicators WHERE comm_name = 'pp' AND "
                     "coll_type = 'nic-only'"), 1);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM kernel_events WHERE line = 1"), 2);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM dump_stats WHERE coll_dropped_total = 3"), 1);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM records_v WHERE algo = 'NVLS' AND busbw_gbs IS NULL"), 1)
      << "nan is stored as NULL in the views";
  EXPECT_EQ(Count(s, "SELECT count(*) FROM records_v WHERE kind = 'p2p' AND peer = 1"), 1);
  // Bandwidths come back exactly as written, whether derivable or not.
  EXPECT_EQ(Count(s, "SELECT count(*) FROM records_v WHERE op = 'AllReduce' AND "
                     "msg_size_bytes = 1048576 AND algbw_gbs = 10.48576 AND busbw_gbs = 19.6608"),
            12);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM records_v WHERE sn = 10 AND algbw_gbs = 1.5 AND "
                     "busbw_gbs = 2.5"), 1);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM records_v WHERE sn = 7 AND busbw_gbs = 2.389333 AND "
                     "start_ts_us = 1760000000000100 AND n_channels = 2"), 1);
  // Rejected lines are logged with file, line number and reason.
  EXPECT_EQ(Count(s, "SELECT count(*) FROM ingest_log WHERE path LIKE '%node4-pid40.log' AND "
                     "line = 5 AND reason LIKE '%JSON%'"), 1);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM ingest_log WHERE line = 6 AND reason LIKE '%empty%'"),
            1);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM inspector_rows WHERE comm_type = 'hca-only'"), 0);
  EXPECT_EQ(Count(s, "SELECT count(*) FROM ingests WHERE records_stored = 16"), 1);
}

TEST_F(IngestTest, ReingestIsIdempotentAndGrowthIsIncremental) {
  std::string log = ProcessLog("node1", 10, 0, 1, 3);
  std::string next = ProcessLog("node1", 10, 0, 4, 1);
  // The last line is cut mid-write: it must wait for the next ingest.
  WriteFile(dir_ / "logs/node1-pid10.log", log + next.substr(0, 50));
  Result<IngestReport> first = Run();
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->records_stored, 3u);
  EXPECT_EQ(first->incomplete_tail_bytes, 50u);
  EXPECT_EQ(first->lines_rejected, 0u);

  Result<IngestReport> again = Run();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->records_stored, 0u);
  EXPECT_EQ(again->files_unchanged, 1u);

  WriteFile(dir_ / "logs/node1-pid10.log", next.substr(50) + ProcessLog("node1", 10, 0, 5, 2),
            true);
  Result<IngestReport> grown = Run();
  ASSERT_TRUE(grown.ok());
  EXPECT_EQ(grown->records_stored, 3u);
  EXPECT_EQ(grown->lines_read, 3u);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records"), 6);
  EXPECT_EQ(Count(*store_, "SELECT count(DISTINCT sn) FROM records"), 6);
  EXPECT_EQ(Count(*store_, "SELECT max(line) FROM records"), 6) << "line numbers continue";
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM ingests"), 3);
}

TEST_F(IngestTest, FileRewrittenInPlaceReplacesItsRows) {
  WriteFile(dir_ / "logs/node1-pid10.log", ProcessLog("node1", 10, 0, 1, 4));
  ASSERT_TRUE(Run().ok());
  // Inspector opens its log with "w": a restarted job rewrites the file from the start.
  WriteFile(dir_ / "logs/node1-pid10.log", ProcessLog("node1", 10, 0, 100, 2));
  Result<IngestReport> r = Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->files_rewritten, 1u);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records"), 2);
  EXPECT_EQ(Count(*store_, "SELECT min(sn) FROM records"), 100);
}

// Plugin records that carry the annotated step/phase/micro-batch or a v7 user tag: stored in
// record_annotations by the record's file and line; plain records get no row; a rewritten file
// replaces its rows.
TEST_F(IngestTest, AnnotatedRecordsKeepTheirStepPhaseAndUserTag) {
  const std::string head =
      R"({"header":{"id":"0x5a1","comm_name":"dp","rank":1,"n_ranks":4,"nnodes":1},)"
      R"("metadata":{"inspector_output_format_version":"v4.2","git_rev":"","rec_mechanism":"nccl_profiler_interface",)"
      R"("dump_timestamp_us":1800000000000000,"hostname":"n1","pid":42},)";
  auto line = [&](int sn, const std::string& tag, const std::string& extra) {
    return head + R"("coll_perf":{"coll":"AllGather","coll_algo":"RING","coll_proto":"SIMPLE","coll_sn":)" +
           std::to_string(sn) +
           R"(,"coll_msg_size_bytes":65536,"coll_exec_time_us":31,"coll_timing_source":"kernel_gpu",)"
           R"("coll_algobw_gbs":8.456258,"coll_busbw_gbs":6.342194)" + tag + R"(},"collscope":{"v":1,"global_rank":1)" +
           extra + "}}\n";
  };
  WriteFile(dir_ / "logs/n1-pid42.log",
            line(1, "", R"(,"step":12,"phase":"backward","micro_batch":3)") + line(2, "", "") +
                line(3, R"(,"coll_user_tag":"18446744073709551615")", R"(,"step":13,"phase":"","micro_batch":-1)"));
  ASSERT_TRUE(Run().ok());
  auto rows = store_->Query(
      "SELECT line, step, phase, micro_batch, user_tag FROM record_annotations ORDER BY line");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->rows.size(), 2u);
  EXPECT_EQ(*rows->rows[0][0], "1");
  EXPECT_EQ(*rows->rows[0][1], "12");
  EXPECT_EQ(*rows->rows[0][2], "backward");
  EXPECT_EQ(*rows->rows[0][3], "3");
  EXPECT_FALSE(rows->rows[0][4].has_value());
  EXPECT_EQ(*rows->rows[1][1], "13");
  EXPECT_EQ(*rows->rows[1][2], "");
  EXPECT_FALSE(rows->rows[1][3].has_value());
  EXPECT_EQ(*rows->rows[1][4], "18446744073709551615");
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records"), 3);
  // A bad tag is a rejected line, named with its reason.
  WriteFile(dir_ / "logs/n1-pid42.log", line(7, R"(,"coll_user_tag":"12x")", ""));
  ASSERT_TRUE(Run().ok());
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM record_annotations"), 0) << "the rewritten file's rows replaced";
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM ingest_log WHERE reason LIKE '%decimal uint64%'"), 1);
}

TEST_F(IngestTest, FilesPastTheFingerprintGrowAndAreRewritten) {
  // Larger than the 4 KiB fingerprint: resuming reuses the stored fingerprint, and a rewrite
  // that grew the file is still noticed by its first bytes.
  WriteFile(dir_ / "logs/node1-pid10.log", ProcessLog("node1", 10, 0, 1, 20));
  ASSERT_TRUE(Run().ok());
  WriteFile(dir_ / "logs/node1-pid10.log", ProcessLog("node1", 10, 0, 21, 5), true);
  Result<IngestReport> grown = Run();
  ASSERT_TRUE(grown.ok()) << grown.status().message();
  EXPECT_EQ(grown->records_stored, 5u);
  EXPECT_EQ(grown->files_rewritten, 0u);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records"), 25);
  WriteFile(dir_ / "logs/node1-pid10.log", ProcessLog("node2", 11, 0, 100, 30));
  Result<IngestReport> rewritten = Run();
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().message();
  EXPECT_EQ(rewritten->files_rewritten, 1u);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records"), 30);
  EXPECT_EQ(Count(*store_, "SELECT min(sn) FROM records"), 100);
}

TEST_F(IngestTest, FailureMidwayLosesNothingCommittedAndRerunCompletes) {
  for (int p = 0; p < 6; ++p)
    WriteFile(dir_ / ("logs/node1-pid" + std::to_string(p) + ".log"),
              ProcessLog("node1", p, p, 1, 200));
  // Commit after every batch, then fail as a crash would after the first commit.
  Result<IngestReport> failed = Run("job", 1, 1);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("injected"), std::string::npos);
  int64_t kept = Count(*store_, "SELECT count(*) FROM records");
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 1200);
  // What is stored agrees with the recorded progress of each file.
  EXPECT_EQ(Count(*store_, "SELECT coalesce(sum(lines_consumed), 0) FROM files"), kept);

  Result<IngestReport> rerun = Run();
  ASSERT_TRUE(rerun.ok()) << rerun.status().message();
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records"), 1200);
  EXPECT_EQ(Count(*store_, "SELECT count(DISTINCT (file_id, line)) FROM records"), 1200);
}

TEST_F(IngestTest, RunsAreSeparate) {
  WriteFile(dir_ / "logs/node1-pid10.log", ProcessLog("node1", 10, 0, 1, 3));
  ASSERT_TRUE(Run("a").ok());
  Result<IngestReport> b = Run("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->records_stored, 3u) << "the same files ingest again into another run";
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records_v WHERE run = 'a'"), 3);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records_v WHERE run = 'b'"), 3);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM runs"), 2);
}

TEST_F(IngestTest, MissingInputIsAnError) {
  IngestOptions o;
  Result<IngestReport> r = Ingest(*store_, {dir_ / "nope"}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
}

TEST_F(IngestTest, ReadOnlyQueriesAndParquetExport) {
  WriteFile(dir_ / "logs/node1-pid10.log", ProcessLog("node1", 10, 0, 1, 3));
  ASSERT_TRUE(Run().ok());
  store_.reset();
  auto ro = Store::Open(dir_ / "store.duckdb", Store::Options::ReadOnly());
  ASSERT_TRUE(ro.ok()) << ro.status().message();
  Store& s = **ro;
  EXPECT_TRUE(s.QueryReadOnly("SELECT count(*) FROM records_v").ok());
  for (const char* write : {"DELETE FROM records", "CREATE TABLE x (a INT)",
                            "SELECT 1; DROP TABLE records", "COPY records TO '/tmp/x.csv'"}) {
    Result<QueryResult> r = s.QueryReadOnly(write);
    EXPECT_FALSE(r.ok()) << write;
  }
  // The sandbox: a store opened without a writable directory writes no file.
  EXPECT_FALSE(s.ExportParquet(dir_ / "parquet").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ / "parquet/records.parquet"));
  ro->reset();
  Store::Options exporting = Store::Options::ReadOnly();
  exporting.writable_dir = dir_ / "parquet";
  ro = Store::Open(dir_ / "store.duckdb", exporting);
  ASSERT_TRUE(ro.ok()) << ro.status().message();
  Store& e = **ro;
  ASSERT_TRUE(e.ExportParquet(dir_ / "parquet").ok());
  for (const char* t : {"records", "operations", "communicators", "processes", "runs", "files",
                        "ingest_log", "taxonomy", "inspector_rows"})
    EXPECT_TRUE(std::filesystem::exists(dir_ / (std::string("parquet/") + t + ".parquet"))) << t;
  EXPECT_EQ(Count(e, "SELECT count(*) FROM read_parquet('" + dir_ / "parquet/inspector_rows.parquet" +
                         "') WHERE coll_busbw_gbs = 19.6608"),
            3);
}

}  // namespace
}  // namespace collscope

namespace collscope {
namespace {

// A v4.4 marker stream, as the reference's example: each batch's lines get their marker's
// communicator, rank, host and pid in the store; proxy lines are stored; a batch cut short at
// the end of the file is reported as missing records.
TEST_F(IngestTest, V44MarkerStreamsAreAttributedToTheirMarker) {
  auto marker = [](const std::string& id, int rank, const std::string& host, int colls, int proxies) {
    return R"({"header":{"id":")" + id + R"(","comm_name":"dp","rank":)" + std::to_string(rank) +
           R"(,"n_ranks":4,"nnodes":2},"metadata":{"inspector_output_format_version":"v4.4","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1800000000500000,"hostname":")" +
           host + R"(","pid":77},"dump_stats":{"coll_records":)" + std::to_string(colls) +
           R"(,"coll_dropped_total":0,"coll_dropped_since_last_dump":0,"p2p_records":0,"p2p_dropped_total":0,"p2p_dropped_since_last_dump":0,"proxy_records":)" +
           std::to_string(proxies) + "}}\n";
  };
  auto coll = [](int sn) {
    return R"({"coll_perf":{"coll":"AllReduce","coll_sn":)" + std::to_string(sn) +
           R"(,"coll_msg_size_bytes":4194304,"coll_exec_time_us":120,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":34.952533,"coll_busbw_gbs":52.4288}})" "\n";
  };
  const std::string proxy =
      R"({"proxy_trace":{"record_type":"proxy_op","record_sn":6,"parent_type":"coll","parent_sn":3,"proxy_op_sn":2,"rank":0,"channel_id":1,"peer":1,"direction":"recv","timing_source":"proxy_cpu"}})" "\n";
  WriteFile(dir_ / "logs/gpu-a-pid77.log",
            marker("0x9b2", 1, "gpu-a", 2, 1) + coll(1) + coll(2) + proxy +
            marker("0x9c3", 3, "gpu-a", 1, 0) + coll(7) +
            marker("0x9b2", 1, "gpu-a", 3, 0) + coll(3));  // cut: 2 of 3 missing
  Result<IngestReport> r = Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->records_stored, 4u);
  EXPECT_EQ(r->dump_stats_stored, 3u);
  EXPECT_EQ(r->proxy_ops_stored, 1u);
  EXPECT_EQ(r->proxy_steps_stored, 0u);
  EXPECT_EQ(r->records_missing, 2u);
  EXPECT_EQ(r->lines_rejected, 0u);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records_v WHERE comm = '0x9b2' AND rank = 1 AND hostname = 'gpu-a' AND pid = 77"), 3);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM records_v WHERE comm = '0x9c3' AND rank = 3 AND sn = 7"), 1);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM ingest_log WHERE reason LIKE '%2 record lines announced%end of the file%'"), 1);
}

}  // namespace
}  // namespace collscope

namespace collscope {
namespace {

// v4.4 proxy_trace records land in proxy_ops and proxy_steps with their marker's process,
// communicator and (unless they carry their own) rank; nested steps take their record's
// direction, peer and channel. A file rewritten in place replaces its proxy rows.
std::string ProxyMarker(const std::string& version, int rank, int colls, int proxies,
                        const std::string& host = "gpu-a", int pid = 77) {
  return R"({"header":{"id":"0x9b2","comm_name":"dp","rank":)" + std::to_string(rank) +
         R"(,"n_ranks":4,"nnodes":2},"metadata":{"inspector_output_format_version":")" + version +
         R"(","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1800000000500000,"hostname":")" +
         host + R"(","pid":)" + std::to_string(pid) + R"(},"dump_stats":{"coll_records":)" +
         std::to_string(colls) +
         R"(,"coll_dropped_total":0,"coll_dropped_since_last_dump":0,"p2p_records":0,"p2p_dropped_total":0,"p2p_dropped_since_last_dump":0,"proxy_records":)" +
         std::to_string(proxies) +
         R"(,"proxy_dropped_total":7,"proxy_dropped_since_last_dump":2,"proxy_output_mode":"nested"}})"
         "\n";
}
const std::string kProxyColl =
    R"({"coll_perf":{"coll":"AllReduce","coll_sn":3,"coll_msg_size_bytes":4194304,"coll_exec_time_us":120,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":34.952533,"coll_busbw_gbs":52.4288}})"
    "\n";
const std::string kProxyStart =
    R"({"proxy_trace":{"record_type":"proxy_op_start","record_sn":5,"parent_type":"coll","parent_sn":3,"proxy_op_sn":2,"channel_id":1,"peer":2,"direction":"recv","timing_source":"proxy_cpu","is_final":false,"n_steps":2,"chunk_size_bytes":524288,"event_trace_ts":{"proxy_op_start_ts":1800000000400000}}})"
    "\n";
const std::string kProxyFinal =
    R"({"proxy_trace":{"record_type":"proxy_op","record_sn":6,"parent_type":"coll","parent_sn":3,"proxy_op_sn":2,"rank":1,"channel_id":1,"peer":2,"direction":"recv","timing_source":"proxy_cpu","is_final":true,"n_steps":2,"chunk_size_bytes":524288,"n_steps_started":2,"n_steps_completed":2,"n_steps_dropped":0,"trans_size_bytes":1048576,"total_us":90,"op_bw_gbs":11.650844,"event_trace_ts":{"proxy_op_start_ts":1800000000400000,"proxy_op_stop_ts":1800000000400090},"steps":[)"
    R"({"proxy_step_sn":1,"step":0,"trans_size_bytes":524288,"total_us":50,"wire_us":30,"flush_us":5,"gpu_consume_us":10,"event_trace_ts":{"proxy_step_stop_ts":1800000000400051}},)"
    R"({"proxy_step_sn":2,"step":1,"trans_size_bytes":524288,"total_us":38,"wire_us":31}]}})"
    "\n";
const std::string kProxyFlatSend =
    R"({"proxy_trace":{"record_type":"proxy_step","record_sn":9,"parent_type":"coll","parent_sn":3,"proxy_op_sn":3,"channel_id":0,"peer":3,"direction":"send","timing_source":"proxy_cpu","proxy_step_sn":4,"step":0,"trans_size_bytes":65536,"total_us":20,"gpu_produce_us":2.5,"peer_credit_us":12,"wire_us":5}})"
    "\n";

TEST_F(IngestTest, ProxyTraceRecordsAreStored) {
  // Marker rank 1: proxy_op_start has no rank of its own and takes 1; the final proxy_op says 1.
  // The flat step of the second batch has its marker's 3.
  WriteFile(dir_ / "logs/gpu-a-pid77.log", ProxyMarker("v4.4", 1, 1, 2) + kProxyColl + kProxyStart +
                                               kProxyFinal + ProxyMarker("v4.4", 3, 0, 1) +
                                               kProxyFlatSend);
  // v4.3 flat steps carry their own rank (0 here, under a marker of rank 2), and no durations.
  WriteFile(
      dir_ / "logs/gpu-b-pid78.log",
      ProxyMarker("v4.3", 2, 0, 1, "gpu-b", 78) +
          R"({"proxy_trace":{"record_type":"proxy_step","record_sn":1,"parent_type":"coll","parent_sn":8,"proxy_op_sn":1,"rank":0,"channel_id":2,"peer":1,"direction":"recv","proxy_step_sn":1,"step":0,"trans_size_bytes":4096}})"
          "\n");
  Result<IngestReport> r = Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->lines_rejected, 0u) << (r->first_rejections.empty() ? "" : r->first_rejections[0]);
  EXPECT_EQ(r->records_missing, 0u);
  EXPECT_EQ(r->proxy_ops_stored, 2u);
  EXPECT_EQ(r->proxy_steps_stored, 4u);  // 2 nested, 2 flat
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM proxy_ops"), 2);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM proxy_steps"), 4);

  // Ops: the marker's process and communicator (the ones its records have), rank as resolved.
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM proxy_ops o JOIN communicators c USING (run_id, comm_id) "
                  "JOIN processes p USING (run_id, process_id) WHERE c.id = '0x9b2' AND "
                  "p.hostname = 'gpu-a' AND p.pid = 77 AND o.rank = 1 AND o.peer = 2 AND "
                  "o.channel_id = 1 AND o.direction = 'recv' AND o.parent_type = 'coll' AND "
                  "o.parent_sn = 3 AND o.proxy_op_sn = 2 AND o.dump_ts_us = 1800000000500000"),
            2);
  EXPECT_EQ(Count(*store_,
                  "SELECT count(DISTINCT comm_id) FROM (SELECT comm_id FROM proxy_ops UNION ALL "
                  "SELECT o.comm_id FROM records JOIN operations o USING (run_id, op_id))"),
            1);
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM proxy_ops WHERE record_type = 'proxy_op_start' AND "
                  "line = 3 AND record_sn = 5 AND n_steps = 2 AND chunk_size_bytes = 524288 AND "
                  "start_ts_us = 1800000000400000 AND stop_ts_us IS NULL AND total_us IS NULL AND "
                  "n_steps_completed IS NULL AND trans_size_bytes IS NULL"),
            1);
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM proxy_ops WHERE record_type = 'proxy_op' AND line = 4 AND "
                  "n_steps_completed = 2 AND n_steps_dropped = 0 AND trans_size_bytes = 1048576 "
                  "AND total_us = 90 AND stop_ts_us = 1800000000400090"),
            1);

  // Nested steps: their record's line, direction, peer, channel and op; their own timings.
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM proxy_steps WHERE line = 4 AND rank = 1 AND "
                  "direction = 'recv' AND peer = 2 AND channel_id = 1 AND proxy_op_sn = 2 AND "
                  "parent_type = 'coll' AND parent_sn = 3 AND trans_size_bytes = 524288"),
            2);
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM proxy_steps WHERE step = 0 AND proxy_step_sn = 1 AND "
                  "total_us = 50 AND wire_us = 30 AND flush_us = 5 AND gpu_consume_us = 10 AND "
                  "gpu_produce_us IS NULL AND peer_credit_us IS NULL AND "
                  "stop_ts_us = 1800000000400051"),
            1);
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM proxy_steps WHERE step = 1 AND wire_us = 31 AND "
                  "flush_us IS NULL AND stop_ts_us IS NULL"),
            1);
  // Flat steps: the marker's rank unless the record has its own.
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM proxy_steps WHERE line = 6 AND rank = 3 AND "
                  "direction = 'send' AND peer = 3 AND gpu_produce_us = 2.5 AND "
                  "peer_credit_us = 12 AND wire_us = 5 AND total_us = 20 AND "
                  "trans_size_bytes = 65536"),
            1);
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM proxy_steps s JOIN processes p USING (run_id, process_id) "
                  "WHERE p.hostname = 'gpu-b' AND s.rank = 0 AND s.total_us IS NULL AND "
                  "s.wire_us IS NULL AND s.trans_size_bytes = 4096"),
            1);
  // The markers' proxy counters.
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM dump_stats WHERE proxy_dropped_total = 7 AND "
                  "proxy_dropped_since_last_dump = 2"),
            3);
  EXPECT_EQ(Count(*store_, "SELECT sum(proxy_records) FROM dump_stats"), 4);

  // Rewritten in place (the first bytes differ): the file's proxy rows are replaced, not added.
  WriteFile(dir_ / "logs/gpu-a-pid77.log", ProxyMarker("v4.4", 1, 0, 1) + kProxyFinal);
  Result<IngestReport> again = Run();
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->files_rewritten, 1u);
  EXPECT_EQ(again->proxy_ops_stored, 1u);
  EXPECT_EQ(again->proxy_steps_stored, 2u);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM proxy_ops"), 1);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM proxy_steps"), 3);
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM proxy_steps s JOIN processes p USING "
                  "(run_id, process_id) WHERE p.hostname = 'gpu-a' AND s.line = 2"),
            2);
}

TEST_F(IngestTest, BadProxyLinesAreLoggedAndTheRestStored) {
  WriteFile(dir_ / "logs/gpu-a-pid77.log",
            ProxyMarker("v4.4", 1, 0, 2) +
                R"({"proxy_trace":{"record_type":"proxy_op","steps":[{"wire_us":-4}]}})"
                "\n" +
                kProxyFinal);
  Result<IngestReport> r = Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->lines_rejected, 1u);
  EXPECT_EQ(r->proxy_ops_stored, 1u);
  EXPECT_EQ(r->proxy_steps_stored, 2u);
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM ingest_log WHERE line = 2 AND reason LIKE "
                  "'proxy_trace.steps[].wire_us: impossible negative duration%'"),
            1);
}

// A store made before the proxy tables and dump_stats' proxy counters gets them on open.
TEST_F(IngestTest, OlderStoreGainsProxyTablesAndColumns) {
  ASSERT_TRUE(
      store_
          ->Exec(
              "DROP TABLE proxy_ops; DROP TABLE proxy_steps; ALTER TABLE dump_stats DROP COLUMN "
              "proxy_records; ALTER TABLE dump_stats DROP COLUMN proxy_dropped_total; ALTER TABLE "
              "dump_stats DROP COLUMN proxy_dropped_since_last_dump; DELETE FROM taxonomy WHERE "
              "table_name LIKE 'proxy_%' OR column_name LIKE 'proxy_%'")
          .ok());
  store_.reset();
  auto s = Store::Open(dir_ / "store.duckdb");
  ASSERT_TRUE(s.ok()) << s.status().message();
  store_ = std::move(*s);
  EXPECT_EQ(static_cast<size_t>(Count(*store_, "SELECT count(*) FROM taxonomy")), Fields().size());
  EXPECT_EQ(Count(*store_,
                  "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'dump_stats' "
                  "AND column_name = 'proxy_dropped_total' AND comment LIKE 'counter: %'"),
            1);
  WriteFile(dir_ / "logs/gpu-a-pid77.log", ProxyMarker("v4.4", 1, 0, 1) + kProxyFinal);
  Result<IngestReport> r = Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM proxy_steps"), 2);
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM dump_stats WHERE proxy_records = 1"), 1);
}

}  // namespace
// An Inspector Prometheus textfile is its own format (core/readers/prom_textfile.h): found by
// content under an Inspector-like name, or named on the command line, it is not read as a log.
TEST_F(IngestTest, APrometheusFileIsNoInspectorLogWhateverItsName) {
  const std::string prom =
      "nccl_bus_bandwidth_gbs{version=\"v5.1\",slurm_job_id=\"812\",node=\"n7\",gpu=\"GPU3\",comm_name=\"dp\","
      "n_nodes=\"2\",nranks=\"16\",collective=\"AllReduce\",message_size=\"16-17MB\",algo_proto=\"RING_SIMPLE\"} 171.2\n";
  WriteFile(dir_ / "logs/scraped.log", prom);
  WriteFile(dir_ / "logs/node1-pid10.log", ProcessLog("node1", 10, 0, 1, 5));
  Result<IngestReport> r = Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->lines_rejected, 0u);
  EXPECT_GT(r->records_stored, 0u);
  IngestOptions o;
  o.run = "named";
  WriteFile(dir_ / "metrics.prom", prom);
  Result<IngestReport> named = Ingest(*store_, {dir_ / "metrics.prom"}, o);
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named->lines_rejected, 0u);
}

}  // namespace collscope
