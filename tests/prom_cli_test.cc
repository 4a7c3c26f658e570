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
  EXPECT_NE(ing.text.find("NCCL Inspector metric files (Prometheus, OTLP): 2 (10 samples), 0 lines "
                          "or points not understood"),
            std::string::npos)
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
  EXPECT_NE(b.text.find("NCCL Inspector metric files (Prometheus, OTLP): 1 (4 samples), 1 lines or "
                        "points not understood, 1 unfinished last lines"),
            std::string::npos)
      << b.text;
  EXPECT_NE(b.text.find("not understood: " + (dir / "bad/m.prom") + ":5: nccl_bus_bandwidth_gbs: neither"),
            std::string::npos)
      << b.text;
}

// A 2.30 file of one GPU: its data-parallel AllReduce's mean over the window, and the counters.
std::string GpuFile(const std::string& node, int gpu, double dp_us) {
  const std::string labels = "version=\"v5.1\",slurm_job_id=\"9\",node=\"" + node + "\",gpu=\"GPU" +
                             std::to_string(gpu) + "\"";
  return "nccl_collective_exec_time_microseconds{" + labels +
         ",comm_name=\"dp\",n_nodes=\"2\",nranks=\"4\",collective=\"AllReduce\",message_size=\"16-17MB\","
         "algo_proto=\"RING_SIMPLE\"} " + std::to_string(dp_us) + "\n" +
         "nccl_collectives_total{" + labels + "} 1000\nnccl_collectives_dropped_total{" + labels + "} 5\n";
}

TEST(PromCli, SummaryShowsTheFilesAndDiagnoseSaysWhyItComparesNoRankFromThem) {
  testing::TempDir dir;
  const double dp_us[4] = {900, 910, 1400, 905};
  for (int g = 0; g < 4; ++g)
    testing::WriteFile(dir / ("job/nccl_inspector_metrics_" + std::to_string(g) + ".prom"),
                       GpuFile(g < 2 ? "n1" : "n2", g % 2, dp_us[g]));
  ASSERT_EQ(Collscope("ingest " + dir / "job" + " --db " + dir / "s.duckdb").code, 0);

  Output sum = Collscope("summary --db " + dir / "s.duckdb");
  EXPECT_EQ(sum.code, 0) << sum.text;
  EXPECT_NE(sum.text.find(
                "NCCL Inspector metric files: 4 (12 samples, layout 2.30) from 2 nodes, 4 GPUs"),
            std::string::npos)
      << sum.text;
  EXPECT_NE(sum.text.find("Inspector dropped 20 of 4000 operations (PROM_DUMP_STATS counters of 4 GPUs)"),
            std::string::npos)
      << sum.text;
  // The median of 900, 905, 910 and 1400 is 907.5; the largest is node n2's GPU0.
  EXPECT_NE(sum.text.find("AllReduce          2      4 16-17MB        4       908 us      1400 us  n2 GPU0 (1.54x)"),
            std::string::npos)
      << sum.text;
  // No records: no coverage claimed for them.
  EXPECT_NE(sum.text.find("no NCCL Inspector records in this run"), std::string::npos) << sum.text;
  EXPECT_EQ(sum.text.find("every member of every communicator recorded"), std::string::npos) << sum.text;
  Output json = Collscope("summary --db " + dir / "s.duckdb --json");
  EXPECT_NE(json.text.find("\"prom\": {\"files\": 4, \"samples\": 12"), std::string::npos) << json.text;
  EXPECT_NE(json.text.find("\"max_us\": 1400.000, \"max_node\": \"n2\", \"max_gpu\": \"GPU0\""), std::string::npos)
      << json.text;

  // diagnose, from the store and from the files, names them among what it could not use, and why.
  Output db = Collscope("diagnose --db " + dir / "s.duckdb");
  EXPECT_NE(
      db.text.find(
          "could not use: the store's 4 NCCL Inspector metric files (12 samples): a window's mean"),
      std::string::npos)
      << db.text;
  Output paths = Collscope("diagnose " + dir / "job");
  EXPECT_NE(paths.text.find(".prom and 3 more: NCCL Inspector metric files (Prometheus textfiles, "
                            "OTLP JSON): a window's mean"),
            std::string::npos)
      << paths.text;
}

// Inspector's OTLP export as a collector's file exporter keeps it (a request per line, here one
// with a metric of another program): found by content whatever its name, stored beside the
// textfiles, what was not read named, and summary and diagnose say what it is.
TEST(PromCli, OtlpExportIsStoredShownAndNamedByDiagnose) {
  testing::TempDir dir;
  auto point = [](const std::string& node, const std::string& gpu, double us) {
    auto attr = [](const std::string& k, const std::string& v) {
      return "{\"key\":\"" + k + "\",\"value\":{\"stringValue\":\"" + v + "\"}}";
    };
    return "{\"attributes\":[" + attr("version", "v5.1") + "," + attr("node", node) + "," +
           attr("gpu", gpu) + "," + attr("comm_name", "dp") + "," + attr("n_nodes", "2") + "," +
           attr("nranks", "4") + "," + attr("collective", "AllReduce") + "," +
           attr("message_size", "16-17MB") + "," + attr("algo_proto", "RING_SIMPLE") +
           "],\"timeUnixNano\":\"1800000000000000000\",\"asDouble\":" + std::to_string(us) + "}";
  };
  const std::string request =
      "{\"resourceMetrics\":[{\"scopeMetrics\":[{\"metrics\":[{\"name\":\"nccl_collective_exec_"
      "time_microseconds\","
      "\"gauge\":{\"dataPoints\":[" +
      point("n1", "GPU0", 900) + "," + point("n1", "GPU1", 910) + "," + point("n2", "GPU0", 1400) +
      "," + point("n2", "GPU1", 905) +
      "]}},{\"name\":\"otelcol_exporter_sent\",\"sum\":{\"dataPoints\":[{\"asInt\":\"3\"}]}}]}]}]}"
      "\n";
  testing::WriteFile(dir / "job/otel-metrics.log", request);
  Output ing = Collscope("ingest " + dir / "job" + " --db " + dir / "s.duckdb");
  EXPECT_EQ(ing.code, 1) << ing.text;  // a point not read
  EXPECT_NE(ing.text.find("NCCL Inspector metric files (Prometheus, OTLP): 1 (4 samples), 1 lines "
                          "or points not understood"),
            std::string::npos)
      << ing.text;
  EXPECT_NE(
      ing.text.find("otel-metrics.log:1: not an NCCL Inspector metric: otelcol_exporter_sent"),
      std::string::npos)
      << ing.text;
  EXPECT_NE(ing.text.find("0 files (0 read"), std::string::npos)
      << ing.text;  // never taken for an Inspector log
  Output sum = Collscope("summary --db " + dir / "s.duckdb");
  EXPECT_NE(
      sum.text.find(
          "NCCL Inspector metric files: 1 (4 samples, layout otlp v5.1) from 2 nodes, 4 GPUs"),
      std::string::npos)
      << sum.text;
  EXPECT_NE(sum.text.find("n2 GPU0 (1.54x)"), std::string::npos) << sum.text;
  Output paths = Collscope("diagnose " + dir / "job");
  EXPECT_NE(paths.text.find("otel-metrics.log: NCCL Inspector metric files (Prometheus textfiles, "
                            "OTLP JSON): a window's mean"),
            std::string::npos)
      << paths.text;
}

}  // namespace
}  // namespace collscope
