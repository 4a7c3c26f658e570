// End-to-end tests of the `collscope` command: each runs the real binary on files it writes.
#include <gtest/gtest.h>

#include <filesystem>

#include <cstdio>
#include <string>

#include <simdjson.h>

#include "analysis/diagnose/perfetto_test_util.h"
#include "tests/kernel_summary_job.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

using testing::CollLine;

using testing::Output;

Output Collscope(const std::string& args) {
  return testing::RunShell(testing::CollscopeBinary() + " " + args + " 2>&1");
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string a, b;
    for (int sn = 1; sn <= 4; ++sn) {
      a += CollLine("node1", 7, "0xabc", 0, 16, 2, "AllReduce", sn, 1048576, 100, "10.485760",
                    "19.660800");
      b += CollLine("node2", 9, "0xabc", 8, 16, 2, "AllReduce", sn, 1048576, 100, "10.485760",
                    "19.660800");
    }
    testing::WriteFile(dir_ / "job/node1-pid7.log", a + "garbage\n");
    testing::WriteFile(dir_ / "job/node2-pid9.log", b);
    db_ = dir_ / "store.duckdb";
  }
  testing::TempDir dir_;
  std::string db_;
};

TEST_F(CliTest, IngestSqlSummaryExportSchema) {
  Output ing = Collscope("ingest " + dir_ / "job" + " --db " + db_);
  EXPECT_EQ(ing.code, 1) << "stored, with a rejected line\n" << ing.text;
  EXPECT_NE(ing.text.find("run job: 2 files"), std::string::npos) << ing.text;
  EXPECT_NE(ing.text.find("8 records"), std::string::npos) << ing.text;
  EXPECT_NE(ing.text.find("1 rejected"), std::string::npos) << ing.text;
  EXPECT_NE(ing.text.find("node1-pid7.log:5: line: not"), std::string::npos) << ing.text;
  // The store file holds everything once ingest exits (closing it checkpoints): no log beside it.
  EXPECT_FALSE(std::filesystem::exists(db_ + ".wal"));

  Output again = Collscope("ingest " + dir_ / "job" + " --db " + db_ + " --json");
  EXPECT_EQ(again.code, 0) << again.text;
  EXPECT_NE(again.text.find("\"records_stored\": 0"), std::string::npos) << again.text;
  EXPECT_NE(again.text.find("\"files_unchanged\": 2"), std::string::npos) << again.text;


  Output sql = Collscope("sql --db " + db_ +
                         " --json \"SELECT hostname, count(*) AS n, max(busbw_gbs) AS bw "
                         "FROM records_v GROUP BY 1 ORDER BY 1\"");
  EXPECT_EQ(sql.code, 0) << sql.text;
  EXPECT_NE(sql.text.find("{\"hostname\": \"node1\", \"n\": 4, \"bw\": 19.6608}"),
            std::string::npos)
      << sql.text;

  Output refused = Collscope("sql --db " + db_ + " \"DELETE FROM records\"");
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.text.find("read-only"), std::string::npos) << refused.text;

  Output summary = Collscope("summary --db " + db_);
  EXPECT_EQ(summary.code, 0) << summary.text;
  EXPECT_NE(summary.text.find("mixed/16r2n/AllReduce/1048576"), std::string::npos)
      << summary.text;
  Output summary_json = Collscope("summary --json --db " + db_);
  EXPECT_NE(summary_json.text.find("\"time_share\": 1.000000"), std::string::npos)
      << summary_json.text;

  Output exp = Collscope("export --db " + db_ + " --parquet " + dir_ / "pq");
  EXPECT_EQ(exp.code, 0) << exp.text;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "pq/records.parquet"));

  Output schema = Collscope("schema --json");
  EXPECT_EQ(schema.code, 0);
  EXPECT_NE(schema.text.find("\"column\": \"exec_time_us\", \"type\": \"UBIGINT\", "
                             "\"role\": \"measurement\""),
            std::string::npos)
      << schema.text.substr(0, 500);
}

// Host names from the logs reach the terminal through summary's text: control bytes print as '?'.
TEST_F(CliTest, SummaryPrintsNoControlBytesFromTheLogs) {
  for (int r = 0; r < 3; ++r) {
    std::string log;
    for (uint64_t sn = 1; sn <= (r == 2 ? 20u : 80u); ++sn)
      log += CollLine("h\\u001b[2Jx" + std::to_string(r), 40 + r, "0xcafe", r, 4, 3, "AllReduce", sn, 1048576, 100,
                      "10.485760", "15.728640", 1760000000000000 + (sn + 9) / 10 * 200000);
    testing::WriteFile(dir_ / ("esc/host" + std::to_string(r) + "-pid" + std::to_string(40 + r) + ".log"), log);
  }
  ASSERT_EQ(Collscope("ingest " + dir_ / "esc" + " --db " + db_ + " -q").code, 0);
  Output text = Collscope("summary --db " + db_);
  ASSERT_EQ(text.code, 0) << text.text;
  EXPECT_EQ(text.text.find('\x1b'), std::string::npos) << text.text;
  EXPECT_NE(text.text.find("h?[2Jx2 pid 42, rank 2 of 0xcafe"), std::string::npos) << text.text;
  // sql's aligned table too (its CSV and JSON, for programs, keep the bytes).
  Output table = Collscope("sql --db " + db_ + " \"SELECT hostname FROM processes ORDER BY 1\"");
  ASSERT_EQ(table.code, 0) << table.text;
  EXPECT_EQ(table.text.find('\x1b'), std::string::npos) << table.text;
  EXPECT_NE(table.text.find("h?[2Jx0"), std::string::npos) << table.text;
}

// summary says what the records cover: a communicator missing ranks, a rank whose log stops
// early (fewer instances than its peers, and its dumps stop), in text and in JSON.
TEST_F(CliTest, SummarySaysWhatTheRecordsCover) {
  std::string logs[3];
  for (int r = 0; r < 3; ++r)
    for (uint64_t sn = 1; sn <= (r == 2 ? 20u : 80u); ++sn)
      logs[r] += CollLine("host" + std::to_string(r), 40 + r, "0xcafe", r, 4, 3, "AllReduce", sn, 1048576, 100,
                          "10.485760", "15.728640", 1760000000000000 + (sn + 9) / 10 * 200000);
  // Host 0's Inspector counted 7 records dropped from its ring (a v4.1 dump_stats line).
  logs[0] += R"({"header":{"id":"0xcafe","rank":0,"n_ranks":4,"nnodes":3},"metadata":{"inspector_output_format_version":"v4.1","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1760000001600000,"hostname":"host0","pid":40},"dump_stats":{"coll_records":10,"coll_dropped_total":7,"coll_dropped_since_last_dump":7,"p2p_records":0,"p2p_dropped_total":0,"p2p_dropped_since_last_dump":0}})" "\n";
  for (int r = 0; r < 3; ++r)
    testing::WriteFile(dir_ / ("cov/host" + std::to_string(r) + "-pid" + std::to_string(40 + r) + ".log"), logs[r]);
  ASSERT_EQ(Collscope("ingest " + dir_ / "cov" + " --db " + db_ + " -q").code, 0);
  Output text = Collscope("summary --db " + db_);
  ASSERT_EQ(text.code, 0) << text.text;
  EXPECT_NE(text.text.find("communicator 0xcafe: records from 3 of its 4 ranks"), std::string::npos) << text.text;
  EXPECT_NE(text.text.find("host2 pid 42, rank 2 of 0xcafe: 20 of 80 AllReduce instances (25%; its peers 100%)"),
            std::string::npos)
      << text.text;
  EXPECT_NE(text.text.find("host2 pid 42: no dump after"), std::string::npos) << text.text;
  EXPECT_NE(text.text.find("every one recorded by some member"), std::string::npos) << text.text;
  EXPECT_NE(text.text.find("Inspector dropped 7 collective and 0 point-to-point records (dump_stats; from 1 process-communicator pair)"),
            std::string::npos)
      << text.text;
  // diagnose says what was lost too.
  Output diagnose = Collscope("diagnose --db " + db_);
  EXPECT_NE(diagnose.text.find("could not use: 7 records NCCL Inspector dropped from its rings"), std::string::npos)
      << diagnose.text;
  Output json = Collscope("summary --json --db " + db_);
  ASSERT_EQ(json.code, 0) << json.text;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json.text).get(doc), simdjson::SUCCESS) << json.text;
  simdjson::dom::element cov = doc["runs"].at(0)["coverage"];
  EXPECT_EQ(uint64_t(cov["incomplete_communicators_total"]), 1u);
  EXPECT_EQ(uint64_t(cov["low_coverage_total"]), 1u);
  EXPECT_EQ(std::string_view(cov["low_coverage"].at(0)["hostname"]), "host2");
  EXPECT_DOUBLE_EQ(double(cov["low_coverage"].at(0)["share"]), 0.25);
  EXPECT_EQ(uint64_t(cov["dump_gaps_total"]), 1u);
  EXPECT_TRUE(bool(cov["dump_gaps"].at(0)["at_end"]));
}

// The most natural first query (a count by op, an ENUM column first) and every DuckDB type that
// the row-wise accessors printed as blanks, in each output format, parsed back.
TEST_F(CliTest, SqlOutputIsValidInEveryFormat) {
  ASSERT_EQ(Collscope("ingest " + dir_ / "job" + " --db " + db_ + " -q").code, 1);
  const std::string q =
      " \"SELECT o.op, count(*) AS n, [1, 2] AS l, {'a': 1} AS s, "
      "'5f8c2a3e-0b1d-4c6e-9f00-123456789abc'::UUID AS u, "
      "TIMESTAMPTZ '2026-12-01 11:54:56+00' AS t, 'say \\\"hi\\\", ok' AS q, NULL AS z "
      "FROM records r JOIN operations o USING (run_id, op_id) GROUP BY o.op\"";
  Output json = Collscope("sql --json --db " + db_ + q);
  ASSERT_EQ(json.code, 0) << json.text;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json.text).get(doc), simdjson::SUCCESS) << "not JSON:\n" << json.text;
  simdjson::dom::object row = doc.at(0).get_object();
  EXPECT_EQ(std::string_view(row["op"].get_string()), "AllReduce");
  EXPECT_EQ(int64_t(row["n"].get_int64()), 8);
  EXPECT_EQ(std::string_view(row["l"].get_string()), "[1, 2]");
  EXPECT_EQ(std::string_view(row["s"].get_string()), "{'a': 1}");
  EXPECT_EQ(std::string_view(row["u"].get_string()), "5f8c2a3e-0b1d-4c6e-9f00-123456789abc");
  EXPECT_EQ(std::string_view(row["t"].get_string()), "2026-12-01 11:54:56+00");
  EXPECT_EQ(std::string_view(row["q"].get_string()), "say \"hi\", ok");
  EXPECT_TRUE(row["z"].is_null());

  Output csv = Collscope("sql --csv --db " + db_ + q);
  ASSERT_EQ(csv.code, 0) << csv.text;
  EXPECT_EQ(csv.text, "op,n,l,s,u,t,q,z\nAllReduce,8,\"[1, 2]\",{'a': 1},"
                      "5f8c2a3e-0b1d-4c6e-9f00-123456789abc,2026-12-01 11:54:56+00,"
                      "\"say \"\"hi\"\", ok\",\n");

  Output table = Collscope("sql --db " + db_ + q);
  ASSERT_EQ(table.code, 0) << table.text;
  EXPECT_NE(table.text.find("AllReduce  8  [1, 2]  {'a': 1}  5f8c2a3e-0b1d-4c6e-9f00-123456789abc  "
                            "2026-12-01 11:54:56+00  say \"hi\", ok  NULL"),
            std::string::npos)
      << table.text;
}

// COLLSCOPE_DUCKDB_THREADS caps DuckDB's threads in the stores a command opens; a value that is
// not a thread count is refused, naming it, rather than ignored.
TEST_F(CliTest, DuckDbThreadsFromTheEnvironment) {
  ASSERT_EQ(Collscope("ingest " + dir_ / "job" + " --db " + db_ + " -q").code, 1);  // one garbage line
  const std::string threads = " sql --db " + db_ + " \"SELECT current_setting('threads') AS t\" --csv";
  Output capped = testing::RunShell("COLLSCOPE_DUCKDB_THREADS=1 " + testing::CollscopeBinary() + threads + " 2>&1");
  EXPECT_EQ(capped.code, 0) << capped.text;
  EXPECT_EQ(capped.text, "t\n1\n");
  for (const char* bad : {"0", "two", "3x", "100000"}) {
    Output refused = testing::RunShell(std::string("COLLSCOPE_DUCKDB_THREADS=") + bad + " " +
                                       testing::CollscopeBinary() + threads + " 2>&1");
    EXPECT_EQ(refused.code, 2) << bad << ": " << refused.text;
    EXPECT_NE(refused.text.find(std::string("COLLSCOPE_DUCKDB_THREADS=") + bad + ": not a thread count"),
              std::string::npos) << refused.text;
  }
}

TEST_F(CliTest, ExitCodes) {
  testing::WriteFile(dir_ / "bad/x-pid1.log", "not json\nnor this\n");
  Output nothing = Collscope("ingest " + dir_ / "bad" + " --db " + db_ + " -q");
  EXPECT_EQ(nothing.code, 2) << "nothing could be stored";
  Output missing = Collscope("ingest " + dir_ / "missing" + " --db " + db_);
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.text.find("missing: no such file or directory"), std::string::npos);
  Output nodb = Collscope("sql --db " + dir_ / "none.duckdb" + " \"SELECT 1\"");
  EXPECT_NE(nodb.code, 0);
  EXPECT_NE(nodb.text.find("no such store"), std::string::npos) << nodb.text;
  for (const char* cmd : {"ingest", "schema", "sql", "export", "summary"}) {
    Output help = Collscope(std::string(cmd) + " --help");
    EXPECT_EQ(help.code, 0) << cmd;
    EXPECT_NE(help.text.find("--"), std::string::npos) << cmd;
  }
}

}  // namespace
}  // namespace collscope

namespace collscope {
namespace {

// The simulator's files are exactly what the real plugin writes: ingest must take every line.
TEST(SimulatedJob, IngestsWithZeroRejectedLines) {
  if (Collscope("simulate --help").code != 0) GTEST_SKIP() << "collscope built without sim/";
  testing::TempDir dir;
  Output sim = Collscope("simulate -o " + dir / "job" +
                         " --hosts 2 --gpus-per-host 4 --tp 2 --pp 2 --steps 6 --layers 2 "
                         "--inspector-verbose --seed 3 "
                         "--fault kind=nic_degrade,host=1,factor=0.5,start_step=2,end_step=4");
  ASSERT_EQ(sim.code, 0) << sim.text;
  Output ing = Collscope("ingest " + dir / "job/nccl-inspector" + " --db " + dir / "s.duckdb" +
                         " --json");
  EXPECT_EQ(ing.code, 0) << ing.text;
  EXPECT_NE(ing.text.find("\"lines_rejected\": 0"), std::string::npos) << ing.text;
  EXPECT_EQ(ing.text.find("\"records_stored\": 0,"), std::string::npos) << ing.text;
  Output p2p = Collscope("sql --db " + dir / "s.duckdb" +
                         " --csv \"SELECT count(*) FILTER (WHERE kind = 'p2p') > 0, "
                         "count(*) FILTER (WHERE n_channels > 0) > 0 FROM records_v\"");
  EXPECT_NE(p2p.text.find("true,true"), std::string::npos) << p2p.text;
}

}  // namespace
}  // namespace collscope

namespace collscope {
namespace {

// The README's main job: the bundled example's degraded NIC is found and named.
TEST(ExampleJob, DiagnoseNamesTheDegradedHost) {
  if (Collscope("diagnose --help").code != 0) GTEST_SKIP() << "collscope built without diagnose";
  testing::TempDir dir;
  // The whole job directory: Inspector logs and Kineto traces land in one run.
  Output ing = Collscope(std::string("ingest ") + COLLSCOPE_SOURCE_DIR + "/examples/job --db " +
                         dir / "s.duckdb" + " --json");
  ASSERT_EQ(ing.code, 0) << ing.text;
  EXPECT_NE(ing.text.find("\"records_stored\": 9600"), std::string::npos) << ing.text;
  EXPECT_NE(ing.text.find("\"kineto_traces_read\": 32"), std::string::npos) << ing.text;
  Output diag = Collscope("diagnose --db " + dir / "s.duckdb" + " --json");
  ASSERT_EQ(diag.code, 1) << "findings exit 1, as diff does\n" << diag.text;
  // It says what it read: the records, the ranks and hosts, and the evidence tier.
  EXPECT_NE(diag.text.find("read: 9600 NCCL records of 32 ranks on 4 hosts"), std::string::npos) << diag.text;
  EXPECT_NE(diag.text.find("evidence tier D"), std::string::npos) << diag.text;
  // Its NIC at a quarter of the bandwidth for six steps is a degradation, not a flap: transfers
  // near the collapse ratio are no working link between bursts.
  EXPECT_EQ(diag.text.find("comm.link_flap"), std::string::npos) << diag.text;
  EXPECT_NE(diag.text.find("\"schema\": \"collscope.findings.v1\""), std::string::npos);
  EXPECT_NE(diag.text.find("{\"kind\": \"slow_link\""), std::string::npos) << diag.text;
  EXPECT_NE(diag.text.find("\"hosts\": [\"node-001\"], \"ranks\": [8, 9, 10, 11, 12, 13, 14, 15]"),
            std::string::npos)
      << diag.text;
}

// diagnose's exit status follows diff's: 0 inputs read and nothing found, 1 findings, 2 nothing
// usable read (said, never silent) or a usage error.
// docs/cli.md: one exit-status table for every command, from the code of the error.
TEST_F(CliTest, ExitStatusesFollowTheErrorsCode) {
  ASSERT_EQ(Collscope("ingest " + dir_ / "job" + " --db " + db_).code, 1);
  Output bad_sql = Collscope("sql --db " + db_ + " \"SELECT nonsense FROM nowhere\"");
  EXPECT_EQ(bad_sql.code, 2) << "invalid argument\n" << bad_sql.text;
  EXPECT_NE(bad_sql.text.find("collscope sql: "), std::string::npos) << bad_sql.text;
  Output no_store = Collscope("sql --db " + dir_ / "absent.duckdb" + " \"SELECT 1\"");
  EXPECT_EQ(no_store.code, 2) << "not found\n" << no_store.text;
  EXPECT_NE(no_store.text.find("no such store (not found)"), std::string::npos) << no_store.text;
  Output no_run = Collscope("summary --db " + db_ + " --run absent");
  EXPECT_EQ(no_run.code, 2) << "not found\n" << no_run.text;
  // Usage errors: 2, as the table says, not the argument parser's own codes; --help succeeds.
  for (const char* usage : {"--bogus", "sql --bogus", "sql \"SELECT 1\" extra", "diagnose --threshold", "nonsense"}) {
    Output u = Collscope(usage);
    EXPECT_EQ(u.code, 2) << usage << "\n" << u.text;
  }
  EXPECT_EQ(Collscope("diagnose --help").code, 0);
  EXPECT_EQ(Collscope("--version").code, 0);
  // A store where the system refuses to create one: a path under a regular file.
  Output refused = Collscope("ingest " + dir_ / "job" + " --db " + dir_ / "job/node2-pid9.log/store.duckdb");
  EXPECT_EQ(refused.code, 3) << "I/O error\n" << refused.text;
  EXPECT_NE(refused.text.find("collscope ingest: "), std::string::npos) << refused.text;
  // The simulator's errors carry codes too: a fault it cannot parse, an output it cannot write.
  const std::string tiny = " --hosts 2 --gpus-per-host 2 --tp 2 --pp 1 --layers 2 --hidden 1024 --seq-len 1024 --steps 2";
  Output bad_fault = Collscope("simulate -o " + dir_ / "sim" + tiny + " --fault host=1");
  EXPECT_EQ(bad_fault.code, 2) << bad_fault.text;
  EXPECT_NE(bad_fault.text.find("has no kind="), std::string::npos) << bad_fault.text;
  Output unwritable = Collscope("simulate -o " + dir_ / "job/node2-pid9.log/sim" + tiny);
  EXPECT_EQ(unwritable.code, 3) << unwritable.text;
  // A scenario file: read (0), not a scenario (2: corruption), absent (3: it cannot be read).
  testing::WriteFile(dir_ / "scenario.json", "{\"faults\": [{\"kind\": \"gpu_straggler\", \"rank\": 1, \"factor\": 1.5}]}");
  testing::WriteFile(dir_ / "not-a-scenario.json", "{\"faults\": 7}");
  EXPECT_EQ(Collscope("simulate -o " + dir_ / "sim2" + tiny + " --scenario " + dir_ / "scenario.json").code, 0);
  Output not_scenario = Collscope("simulate -o " + dir_ / "sim3" + tiny + " --scenario " + dir_ / "not-a-scenario.json");
  EXPECT_EQ(not_scenario.code, 2) << not_scenario.text;
  EXPECT_NE(not_scenario.text.find("has no \"faults\" array"), std::string::npos) << not_scenario.text;
  EXPECT_EQ(Collscope("simulate -o " + dir_ / "sim4" + tiny + " --scenario " + dir_ / "absent.json").code, 3);
}

TEST(Diagnose, ExitStatusAndWhatWasRead) {
  if (Collscope("diagnose --help").code != 0) GTEST_SKIP() << "collscope built without diagnose";
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "empty");
  testing::WriteFile((dir / "empty") + "/notes.txt", "not a log\n");
  Output none = Collscope("diagnose " + dir / "empty");
  EXPECT_EQ(none.code, 2) << none.text;
  EXPECT_NE(none.text.find("read: nothing usable"), std::string::npos) << none.text;
  EXPECT_NE(none.text.find("could not use: " + (dir / "empty") + "/notes.txt" + ": not a format"), std::string::npos)
      << none.text;
  Output sim = Collscope("simulate -o " + dir / "job" + " --hosts 2 --gpus-per-host 2 --tp 2 --pp 2 --layers 2 "
                         "--hidden 1024 --seq-len 1024 --steps 30 --kineto-max-ranks 0 --dump-interval-us 200000");
  ASSERT_EQ(sim.code, 0) << sim.text;
  Output healthy = Collscope("diagnose " + dir / "job" + "/nccl-inspector");
  EXPECT_EQ(healthy.code, 0) << healthy.text;
  EXPECT_NE(healthy.text.find("NCCL records of 4 ranks on 2 hosts"), std::string::npos) << healthy.text;
  EXPECT_NE(healthy.text.find("4 in-flight state files; evidence tier B"), std::string::npos) << healthy.text;
  Output json = Collscope("diagnose " + dir / "job" + "/nccl-inspector --json");
  EXPECT_NE(json.text.find("\"suppressed\": ["), std::string::npos) << json.text;
  Output explain = Collscope("diagnose " + dir / "job" + "/nccl-inspector --explain");
  EXPECT_NE(explain.text.find("suppressed or merged"), std::string::npos) << explain.text;
  EXPECT_EQ(Collscope("diagnose").code, 2);
  // Without --explain, what the cross-checks dropped is still counted: a straggler's partners
  // arrive late too, and are victims.
  ASSERT_EQ(Collscope("simulate -o " + dir / "straggler" + " --hosts 2 --gpus-per-host 4 --tp 2 --pp 2 --layers 2 "
                      "--hidden 1024 --seq-len 1024 --steps 30 --kineto-max-ranks 0 --dump-interval-us 200000 "
                      "--fault kind=gpu_straggler,rank=1,factor=1.6")
                .code,
            0);
  Output victims = Collscope("diagnose " + dir / "straggler" + "/nccl-inspector");
  EXPECT_EQ(victims.code, 1) << victims.text;
  EXPECT_NE(victims.text.find("candidate finding(s) suppressed or merged, each with its reason: see --explain"),
            std::string::npos)
      << victims.text;
}

// Hang evidence goes into the store first: `diagnose --db` after `ingest` sees the in-flight state
// files and Flight Recorder dumps that `diagnose PATHS` sees, and names the same culprit.
TEST(Diagnose, TheStoreHoldsTheHangEvidenceThatPathsGive) {
  if (Collscope("simulate --help").code != 0) GTEST_SKIP() << "collscope built without sim/";
  testing::TempDir dir;
  ASSERT_EQ(Collscope("simulate -o " + dir / "hang" + " --hosts 2 --gpus-per-host 2 --tp 2 --pp 2 --layers 2 "
                      "--hidden 1024 --seq-len 1024 --steps 20 --kineto-max-ranks 0 --dump-interval-us 200000 "
                      "--fault kind=hang,rank=1,comm=tp,start_step=8")
                .code,
            0);
  const std::string logs = dir / "hang" + "/nccl-inspector";
  Output paths = Collscope("diagnose " + logs + " --json");
  EXPECT_NE(paths.text.find("4 in-flight state files; evidence tier B"), std::string::npos) << paths.text;
  const std::string db = dir / "s.duckdb";
  Output ingest = Collscope("ingest " + logs + " --db " + db + " --run hang");
  ASSERT_EQ(ingest.code, 0) << ingest.text;
  EXPECT_NE(ingest.text.find("4 in-flight state files (4 read)"), std::string::npos) << ingest.text;
  Output stored = Collscope("diagnose --db " + db + " --json");
  EXPECT_EQ(stored.code, 1) << stored.text;
  EXPECT_NE(stored.text.find("4 in-flight state files; evidence tier B"), std::string::npos) << stored.text;
  // The same findings, the root cause among them: rank 1 never joined its collective.
  auto findings = [](const std::string& text) { return text.substr(text.find("{\"schema\"")); };
  EXPECT_EQ(findings(stored.text), findings(paths.text));
  EXPECT_NE(stored.text.find("\"ranks\": [1]"), std::string::npos) << stored.text;
  // Ingested again (the plugin rewrites its state files in place), each file is stored once.
  ASSERT_EQ(Collscope("ingest " + logs + " --db " + db + " --run hang").code, 0);
  Output count = Collscope("sql --db " + db + " --json \"SELECT count(*) AS n, count(DISTINCT path) AS paths, "
                           "(SELECT count(*) FROM inflight_comms) AS comms FROM inflight_files\"");
  EXPECT_NE(count.text.find("{\"n\": 4, \"paths\": 4, \"comms\": "), std::string::npos) << count.text;

  // A real job's Flight Recorder dumps (16 ranks), one of them removed and one truncated: the
  // truncated one is named and not stored, and the store still names the rank that never joined.
  const std::string fr = testing::FixturesDir() + "/flight-recorder/gpu_error_1st";
  if (!std::filesystem::exists(fr)) GTEST_SKIP() << "fixture absent: " << fr;
  std::filesystem::create_directories(dir / "fr");
  for (int r = 0; r < 16; ++r)
    if (r != 3) std::filesystem::copy_file(fr + "/_dump_" + std::to_string(r), (dir / "fr") + "/_dump_" + std::to_string(r));
  std::filesystem::resize_file((dir / "fr") + "/_dump_5", 100);
  const std::string frdb = dir / "fr.duckdb";
  Output fri = Collscope("ingest " + dir / "fr" + " --db " + frdb);
  EXPECT_EQ(fri.code, 1) << fri.text;  // stored, but one input could not be
  EXPECT_NE(fri.text.find("15 Flight Recorder dumps (14 read)"), std::string::npos) << fri.text;
  EXPECT_NE(fri.text.find("not stored: " + (dir / "fr") + "/_dump_5"), std::string::npos) << fri.text;
  Output frd = Collscope("diagnose --db " + frdb + " --json");
  EXPECT_EQ(frd.code, 1) << frd.text;
  EXPECT_NE(frd.text.find("14 Flight Recorder dumps"), std::string::npos) << frd.text;
  EXPECT_NE(frd.text.find("\"ranks\": [12]"), std::string::npos) << frd.text;
}

// One default-run rule for every command, and the run it picked is printed: the run with the
// most records, not the first ingested (here a small job stored before the example).
TEST(Diagnose, DefaultRunIsTheOneWithMostRecordsAndIsPrinted) {
  testing::TempDir dir;
  ASSERT_EQ(Collscope("simulate -o " + dir / "tiny" + " --hosts 2 --gpus-per-host 2 --tp 2 --pp 2 --layers 2 "
                      "--hidden 1024 --seq-len 1024 --steps 3 --kineto-max-ranks 0").code, 0);
  const std::string db = dir / "s.duckdb";
  ASSERT_EQ(Collscope("ingest " + dir / "tiny" + "/nccl-inspector --db " + db + " --run tiny").code, 0);
  ASSERT_EQ(Collscope(std::string("ingest ") + COLLSCOPE_SOURCE_DIR + "/examples/job --db " + db + " --run example").code, 0);
  for (const std::string& cmd : {"diagnose --db " + db, "report --db " + db + " -o " + dir / "r.html",
                                "export --db " + db + " --perfetto " + dir / "t.json"}) {
    Output out = Collscope(cmd);
    EXPECT_NE(out.text.find("run: example (the store's run with the most records"), std::string::npos)
        << cmd << "\n" << out.text;
  }
  // The example job's trace, as the command wrote it, passes the format's checks.
  namespace pt = diagnose::perfetto_test;
  EXPECT_EQ(pt::Problems(pt::Parse(testing::ReadFile(dir / "t.json"))), std::vector<std::string>{});
}

// The CUPTI library's kernel summaries: `ingest` stores them (found by content, and not taken for
// Inspector logs) and says so; `diagnose --db` and `diagnose DIR` name the rank whose GEMM slowed.
TEST(KernelSummaries, IngestThenDiagnoseNamesTheSlowRank) {
  if (Collscope("diagnose --help").code != 0) GTEST_SKIP() << "collscope built without diagnose";
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "job");
  testing::SummaryJob job;
  job.slow_rank = 5;
  job.gzip = true;
  testing::WriteSummaryJob(dir / "job", job);
  // The same job's Inspector records: with them the summaries make evidence tier D.
  std::string records;
  for (int sn = 1; sn <= 4; ++sn)
    records += CollLine("node0", 1000, "0xabc", 0, 8, 2, "AllReduce", sn, 1048576, 100, "10.485760", "18.350080");
  testing::WriteFile((dir / "job") + "/node0-pid1000.log", records);
  const std::string db = dir / "s.duckdb";
  Output ing = Collscope("ingest " + dir / "job" + " --db " + db);
  EXPECT_EQ(ing.code, 0) << ing.text;
  EXPECT_NE(ing.text.find("run job: 1 files"), std::string::npos) << ing.text;  // the summaries are no Inspector log
  EXPECT_NE(ing.text.find("kernel summaries (CUPTI): 8 files (8 read): 1440 summary rows, 0 lines rejected\n"),
            std::string::npos)
      << ing.text;
  Output again = Collscope("ingest " + dir / "job" + " --db " + db + " --json");
  EXPECT_EQ(again.code, 0) << again.text;
  EXPECT_NE(again.text.find("\"kernel_summary_files_seen\": 8, \"kernel_summary_files_read\": 8, \"kernel_summaries\": 1440, "
                            "\"kernel_summary_lines_rejected\": 0"),
            std::string::npos)
      << again.text;
  Output rows = Collscope("sql --db " + db + " --csv \"SELECT count(*), count(DISTINCT file_id) FROM kernel_summaries\"");
  EXPECT_NE(rows.text.find("1440,8"), std::string::npos) << rows.text;  // read twice, stored once
  Output stored = Collscope("diagnose --db " + db + " --json");
  EXPECT_EQ(stored.code, 1) << stored.text;
  EXPECT_NE(stored.text.find(", 8 CUPTI kernel-summary files; evidence tier D\n"), std::string::npos) << stored.text;
  EXPECT_NE(stored.text.find("\"detector\": \"kernel.summaries\""), std::string::npos) << stored.text;
  EXPECT_NE(stored.text.find("\"hosts\": [\"node1\"], \"ranks\": [5]"), std::string::npos) << stored.text;
  Output paths = Collscope("diagnose " + dir / "job" + " --json");
  EXPECT_EQ(paths.code, 1) << paths.text;
  auto findings = [](const std::string& text) { return text.substr(std::min(text.size(), text.find("{\"schema\""))); };
  EXPECT_EQ(findings(paths.text), findings(stored.text));
}

// What cannot be used is said: a file of another format version is not stored (ingest exits 1)
// and `diagnose DIR` names it; a file that names no rank is stored, and diagnose says its kernels
// were not compared.
TEST(KernelSummaries, WhatCannotBeUsedIsSaid) {
  if (Collscope("diagnose --help").code != 0) GTEST_SKIP() << "collscope built without diagnose";
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "job");
  testing::SummaryJob job;
  job.steps = 4;
  testing::WriteSummaryJob(dir / "job", job);
  const std::string v2 = (dir / "job") + "/node9-pid1.kernels.jsonl";
  testing::WriteFile(v2, "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":2}\n");
  const std::string anon = (dir / "job") + "/node9-pid2.kernels.jsonl";
  testing::WriteFile(anon, "{\"type\":\"process\",\"format\":\"collscope-kernels\",\"format_version\":1,"
                           "\"host\":\"node9\",\"pid\":2,\"rank\":-1,\"window\":\"time\"}\n");
  const std::string db = dir / "s.duckdb";
  Output ing = Collscope("ingest " + dir / "job" + " --db " + db);
  EXPECT_EQ(ing.code, 1) << ing.text;
  EXPECT_NE(ing.text.find("kernel summaries (CUPTI): 10 files (9 read)"), std::string::npos) << ing.text;
  EXPECT_NE(ing.text.find("not stored: " + v2 + ":1: kernel-summary format version 2; this collscope reads version 1"),
            std::string::npos)
      << ing.text;
  const std::string unranked = "could not use: " + anon + ": kernel summaries that name no rank";
  Output stored = Collscope("diagnose --db " + db);
  EXPECT_EQ(stored.code, 0) << stored.text;
  EXPECT_NE(stored.text.find("read: 9 CUPTI kernel-summary files\n"), std::string::npos) << stored.text;
  EXPECT_NE(stored.text.find(unranked), std::string::npos) << stored.text;
  Output paths = Collscope("diagnose " + dir / "job");
  EXPECT_EQ(paths.code, 0) << paths.text;
  EXPECT_NE(paths.text.find("could not use: " + v2 + ":1: kernel-summary format version 2"), std::string::npos)
      << paths.text;
  EXPECT_NE(paths.text.find(unranked), std::string::npos) << paths.text;
}

// Stack files of `collscope stacks --out` (core/readers/stacks.h): ingest says what it read and
// what it could not, stores no Inspector file for them, and SQL groups threads by position.
TEST(StackFiles, IngestSaysWhatWasReadAndSqlGroupsByPosition) {
  testing::TempDir dir;
  auto process = [](int pid, int version) {
    return "{\"collscope_stacks\":" + std::to_string(version) + ",\"type\":\"process\",\"host\":\"node1\",\"pid\":" +
           std::to_string(pid) + ",\"rank\":" + std::to_string(pid - 100) +
           ",\"exe\":\"/usr/bin/python3\",\"command\":\"python3 train.py\",\"python\":\"3.11.2\","
           "\"python_unread\":\"\",\"interval_us\":100000,\"native\":true}\n";
  };
  auto stacks = [](int tid, int count, const std::string& frames) {
    return "{\"type\":\"stacks\",\"tid\":" + std::to_string(tid) +
           ",\"thread\":\"python3\",\"window_start_us\":1764666000000000,\"window_end_us\":1764666010000000,"
           "\"first_us\":1764666000000000,\"last_us\":1764666009900000,\"count\":" +
           std::to_string(count) + ",\"frames\":\"" + frames + "\"}\n";
  };
  const std::string end =
      "{\"type\":\"end\",\"samples\":100,\"failed\":0,\"dropped\":0,\"mean_sample_us\":800,"
      "\"mean_stopped_us\":400,\"max_stopped_us\":900,\"exited\":false}\n";
  const std::string wait = "main;train_step (train.py:42);wait (python3.11/threading.py:320);pthread_cond_wait";
  testing::WriteFile((dir / "job") + "/node1-pid100.stacks.jsonl", process(100, 1) + stacks(100, 100, wait) + end);
  testing::WriteFile((dir / "job") + "/node1-pid101.stacks.jsonl",
                     process(101, 1) + stacks(101, 99, wait) + stacks(101, 0, wait) + end);
  const std::string v2 = (dir / "job") + "/node1-pid102.stacks.jsonl";
  testing::WriteFile(v2, process(102, 2));
  const std::string db = dir / "s.duckdb";
  Output ing = Collscope("ingest " + dir / "job" + " --db " + db);
  EXPECT_EQ(ing.code, 1) << ing.text;  // stored, with a rejected line and a file refused
  EXPECT_NE(ing.text.find("run job: 0 files"), std::string::npos) << ing.text;  // no Inspector log among them
  EXPECT_NE(ing.text.find("stack files (collscope stacks): 3 files (2 read): 2 stack rows, 1 lines rejected\n"),
            std::string::npos)
      << ing.text;
  EXPECT_NE(ing.text.find("rejected " + (dir / "job") + "/node1-pid101.stacks.jsonl:3: \"count\" is not positive"),
            std::string::npos)
      << ing.text;
  EXPECT_NE(ing.text.find("not stored: " + v2 + ":1: stack file version 2; this collscope reads version 1"),
            std::string::npos)
      << ing.text;
  Output again = Collscope("ingest " + dir / "job" + " --db " + db + " --json");
  EXPECT_NE(again.text.find("\"stack_files_seen\": 3, \"stack_files_read\": 2, \"stack_files_incomplete\": 0, "
                            "\"stacks\": 2, \"stack_lines_rejected\": 1, \"stack_lines_unknown\": 0"),
            std::string::npos)
      << again.text;
  Output rows = Collscope("sql --db " + db +
                          " --csv \"SELECT position_label, count(DISTINCT pid), sum(count) FROM stack_samples "
                          "WHERE tid = pid GROUP BY 1\"");
  EXPECT_EQ(rows.code, 0) << rows.text;
  EXPECT_NE(rows.text.find("train_step (train.py:42) -> pthread_cond_wait,2,199"), std::string::npos) << rows.text;
  // With no finding to join them to, diagnose still says it read them.
  Output diag = Collscope("diagnose --db " + db);
  EXPECT_NE(diag.text.find("sampled call stacks of 2 processes (collscope stacks)"), std::string::npos) << diag.text;
}

}  // namespace
}  // namespace collscope
