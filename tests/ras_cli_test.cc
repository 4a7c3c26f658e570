// `collscope ingest` and `collscope diagnose` on saved NCCL RAS status reports, through the real
// binary: the report is found by content, counted, stored, and its behind rank named.
#include <gtest/gtest.h>

#include <string>

#include "tests/ras_samples.h"
#include "tests/test_util.h"

namespace collscope {
namespace {

using testing::Output;

Output Collscope(const std::string& args) {
  return testing::RunShell(testing::CollscopeBinary() + " " + args + " 2>&1");
}

TEST(RasCli, IngestCountsAndDiagnoseNamesTheBehindRank) {
  testing::TempDir dir;
  testing::WriteFile(dir / "job/ras-status.log",
                     testing::kRasTextMismatch);  // *.log: still found by content
  Output ing = Collscope("ingest " + dir / "job" + " --db " + dir / "s.duckdb");
  EXPECT_EQ(ing.code, 0) << ing.text;
  EXPECT_NE(ing.text.find("NCCL RAS status reports: 1 (1 read), 0 lines or values not understood"),
            std::string::npos)
      << ing.text;
  Output json = Collscope("ingest " + dir / "job" + " --db " + dir / "s.duckdb --json");
  EXPECT_NE(json.text.find("\"ras_reports_read\": 1"), std::string::npos) << json.text;
  Output rows = Collscope("sql --db " + dir / "s.duckdb" + " \"SELECT count(*) FROM ras_reports\"");
  EXPECT_NE(rows.text.find("1"), std::string::npos) << rows.text;

  for (const std::string& args : {"diagnose " + dir / "job", "diagnose --db " + dir / "s.duckdb"}) {
    Output d = Collscope(args);
    EXPECT_NE(d.text.find("1 NCCL RAS status report"), std::string::npos) << args << "\n" << d.text;
    EXPECT_NE(d.text.find("rank 5 (host 10.0.0.2, pid 4242, GPU 1)"), std::string::npos)
        << args << "\n"
        << d.text;
    Output dj = Collscope(args + " --json");
    EXPECT_NE(dj.text.find("\"detector\": \"ras.status\""), std::string::npos) << dj.text;
    EXPECT_NE(dj.text.find("\"ranks\": [5]"), std::string::npos) << dj.text;
  }

  // A report with lines it does not understand: stored, each line named, and the exit says so.
  std::string bad = testing::kRasTextMismatch + "what is this\n";
  testing::WriteFile(dir / "bad/ras.txt", bad);
  Output b = Collscope("ingest " + dir / "bad" + " --db " + dir / "b.duckdb");
  EXPECT_EQ(b.code, 1) << b.text;
  EXPECT_NE(b.text.find("not understood: " + (dir / "bad/ras.txt") + ":29: "), std::string::npos)
      << b.text;
  // A report that cannot be read at all is named.
  testing::WriteFile(dir / "cut/ras.json", testing::kRasJson.substr(0, 400));
  Output c = Collscope("ingest " + dir / "cut" + " --db " + dir / "c.duckdb");
  EXPECT_NE(c.code, 0) << c.text;
  EXPECT_NE(c.text.find("ras.json: not a RAS report: JSON does not parse"), std::string::npos)
      << c.text;
}

// A saved MONITOR log (`ncclras -m all > monitor.out`) under any name: stored, and the process its
// peers' RAS threads declared dead is named with the events that lost it.
TEST(RasCli, MonitorLogNamesTheDeadProcess) {
  testing::TempDir dir;
  testing::WriteFile(dir / "job/monitor.out", testing::kRasMonitorText);
  Output ing = Collscope("ingest " + dir / "job" + " --db " + dir / "s.duckdb");
  EXPECT_EQ(ing.code, 0) << ing.text;
  EXPECT_NE(ing.text.find("NCCL RAS status reports: 1 (1 read), 0 lines or values not understood"),
            std::string::npos)
      << ing.text;
  for (const std::string& args : {"diagnose " + dir / "job", "diagnose --db " + dir / "s.duckdb"}) {
    Output d = Collscope(args);
    EXPECT_EQ(d.code, 1) << args << "\n" << d.text;
    EXPECT_NE(
        d.text.find("the process (host 10.0.0.3, pid 301): its process is considered dead by RAS"),
        std::string::npos)
        << args << "\n"
        << d.text;
    EXPECT_NE(d.text.find("PEER_TIMEOUT_DEAD: peer failed to respond for 20s"), std::string::npos)
        << args << "\n"
        << d.text;
    EXPECT_EQ(d.text.find("10.0.0.4"), std::string::npos) << "recovered: " << args << "\n"
                                                          << d.text;
    // MONITOR events carry local time without a zone: the finding has no window, and says so.
    EXPECT_NE(d.text.find("   when: not given by its input\n"), std::string::npos) << args << "\n"
                                                                                   << d.text;
    EXPECT_EQ(d.text.find("1970-01-01"), std::string::npos) << args << "\n" << d.text;
  }
}

// A simulated hang job's Inspector logs beside a RAS report naming the rank that never launched:
// one hang finding names it.
TEST(RasCli, BesideASimulatedHang) {
  if (Collscope("simulate --help").code != 0) GTEST_SKIP() << "collscope built without sim/";
  testing::TempDir dir;
  Output sim = Collscope(
      "simulate -o " + dir / "job" +
      " --hosts 2 --gpus-per-host 4 --tp 2 --pp 2 --layers 2 "
      "--hidden 1024 --seq-len 1024 --steps 20 --kineto-max-ranks 0 --dump-interval-us 200000 "
      "--fault kind=hang,rank=5,comm=tp,op=AllReduce,coll_sn=37");
  ASSERT_EQ(sim.code, 0) << sim.text;
  testing::WriteFile(dir / "job/nccl-inspector/ras.txt", testing::kRasTextMismatch);
  Output d = Collscope("diagnose " + dir / "job/nccl-inspector --json");
  EXPECT_NE(d.text.find("ras.status"), std::string::npos) << d.text;
  // The hang findings blaming rank 5 (RAS and the simulated job's own evidence) are one.
  const size_t first = d.text.find("\"kind\": \"hang\"");
  ASSERT_NE(first, std::string::npos) << d.text;
  EXPECT_NE(d.text.find("\"ranks\": [5]"), std::string::npos) << d.text;
}

// Stock Inspector logs of a hung job and a MONITOR log naming the dead process by node address and
// pid: the records' pid joins it to its rank and host name.
TEST(RasCli, AMonitorLogBesideTheRecordsNamesTheRankAndHost) {
  if (Collscope("simulate --help").code != 0) GTEST_SKIP() << "collscope built without sim/";
  testing::TempDir dir;
  Output sim = Collscope("simulate -o " + dir / "job" +
                         " --hosts 2 --gpus-per-host 4 --tp 2 --pp 2 --layers 2 --hidden 1024 --seq-len 1024 --steps 20"
                         " --kineto-max-ranks 0 --dump-interval-us 200000 --fault kind=hang,rank=5,comm=tp,op=AllReduce,coll_sn=37");
  ASSERT_EQ(sim.code, 0) << sim.text;
  // Rank 5's pid and host as the simulator gave them.
  const std::string truth = testing::ReadFile(dir / "job/ground_truth.json");
  const std::string key = "{\"rank\":5,";
  const size_t at = truth.find(key);
  ASSERT_NE(at, std::string::npos) << truth;
  const std::string row = truth.substr(at, truth.find('}', at) - at);
  auto field = [&](const std::string& name) {
    const size_t p = row.find("\"" + name + "\":") + name.size() + 3;
    return row.substr(p, row.find_first_of(",}", p) - p);
  };
  const std::string pid = field("pid"), host = field("hostname");
  ASSERT_FALSE(pid.empty());
  // Stock Inspector logs only: the in-flight state files would name rank 5 themselves.
  Output rm = testing::RunShell("rm " + dir / "job/nccl-inspector/*.inflight.json");
  ASSERT_EQ(rm.code, 0) << rm.text;
  testing::WriteFile(dir / "job/nccl-inspector/monitor.out",
                     "[2026-07-01 10:02:20] PEER_TIMEOUT_DEAD: Process " + pid +
                         " on node 10.0.0.9 managing GPU 1 peer failed to respond for 20s, declaring dead\n");
  Output d = Collscope("diagnose " + dir / "job/nccl-inspector --json");
  EXPECT_EQ(d.code, 1) << d.text;
  EXPECT_NE(d.text.find("\"ranks\": [5]"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("\"hosts\": [" + host + "]"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("rank 5 (host " + host.substr(1, host.size() - 2) + ", RAS node 10.0.0.9, pid " + pid),
            std::string::npos)
      << d.text;
}

// A RAS report from containers (pids that are not the records'), of node-002's tensor-parallel
// communicator in the bundled example job, rank 5 behind: its hash is the records' communicator
// id, so rank 5 there is the records' process, global rank 21 on node-002, though the report
// lists only that 8-rank communicator (which it would otherwise take for the world).
TEST(RasCli, TheCommunicatorHashJoinsRanksWhateverTheirPids) {
  testing::TempDir dir;
  std::string ranks;
  for (int r = 0; r < 8; ++r)
    ranks += std::string(r ? "," : "") + "{\"rank\": " + std::to_string(r) + ", \"host\": \"10.0.0.3\", \"pid\": " +
             std::to_string(10 + r) + ", \"cuda_dev\": " + std::to_string(r) + ", \"nvml_dev\": " + std::to_string(r) +
             ", \"status\": {\"init_state\": 0, \"async_error\": 0, \"finalize_called\": false, \"destroy_flag\": "
             "false, \"abort_flag\": false}, \"collective_counts\": {\"Broadcast\": 0, \"Reduce\": 0, \"AllGather\": 0, "
             "\"ReduceScatter\": 0, \"AllReduce\": " + (r == 5 ? "99" : "100") + "}}";
  testing::WriteFile(dir / "ras.json",
                     "{\"nccl_version\": \"2.30.7\", \"cuda_runtime_version\": 13000, \"cuda_driver_version\": 13000, "
                     "\"timestamp\": \"2026-07-01 10:00:00\", \"communicators_count\": 1, \"communicators\": [{\"hash\": "
                     "\"0x5dd88acc5d7993\", \"secondary_hash\": \"0x1:0x2\", \"size\": 8, \"ranks_count\": 8, "
                     "\"missing_ranks_count\": 0, \"ranks\": [" + ranks + "], \"missing_ranks\": []}], \"ras\": "
                     "{\"collection_time_sec\": 0.004, \"timeouts_count\": 0}}\n");
  ASSERT_EQ(Collscope(std::string("ingest ") + COLLSCOPE_SOURCE_DIR + "/examples/job/nccl-inspector --db " +
                      dir / "s.duckdb --run example").code,
            0);
  Output d = Collscope("diagnose --db " + dir / "s.duckdb " + dir / "ras.json --json");
  EXPECT_NE(d.text.find("\"detector\": \"ras.status\""), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("rank 21 (host node-002, RAS node 10.0.0.3, pid 15, GPU 5)"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("\"hosts\": [\"node-002\"], \"ranks\": [21]"), std::string::npos) << d.text;
}

}  // namespace
}  // namespace collscope
