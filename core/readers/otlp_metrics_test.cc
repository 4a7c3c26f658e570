#include "core/readers/otlp_metrics.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/ingest.h"
#include "core/input_files.h"
#include "core/readers/ingest_inputs.h"
#include "core/store.h"
#include "tests/test_util.h"

namespace collscope::readers {
namespace {

std::string FirstUnused(const PromFile& f) {
  return f.unused_named.empty() ? "" : f.unused_named[0];
}

std::string Attr(const std::string& k, const std::string& v) {
  return "{\"key\":\"" + k + "\",\"value\":{\"stringValue\":\"" + v + "\"}}";
}

// A request body as Inspector posts it (aggregated, v5.1), saved pretty-printed.
const std::string kAggregatedBody =
    R"({
  "resourceMetrics": [{
    "resource": {"attributes": [)" +
    Attr("service.name", "nccl-inspector") + "," + Attr("slurm.job.id", "812") + R"(]},
    "scopeMetrics": [{
      "scope": {"name": "nccl-inspector"},
      "metrics": [
        {"name": "nccl_bus_bandwidth_gbs", "description": "bus bandwidth", "unit": "GB/s",
         "gauge": {"dataPoints": [{"attributes": [)" +
    Attr("version", "v5.1") + "," + Attr("gpu", "GPU3") + "," + Attr("comm_name", "dp") + "," +
    Attr("node", "n7") + "," + Attr("n_nodes", "2") + "," + Attr("nranks", "16") + "," +
    Attr("message_size", "16-17MB") + "," + Attr("collective", "AllReduce") + "," +
    Attr("algo_proto", "RING_SIMPLE") + R"(],
           "timeUnixNano": "1800000000123456789", "asDouble": 171.2}]}},
        {"name": "nccl_p2p_exec_time_microseconds", "unit": "us",
         "gauge": {"dataPoints": [{"attributes": [)" +
    Attr("version", "v5.1") + "," + Attr("gpu", "GPU3") + "," + Attr("comm_name", "pp") + "," +
    Attr("node", "n7") + "," + Attr("p2p_operation", "Send") + "," + Attr("message_size", "2-3MB") +
    R"(],
           "timeUnixNano": "1800000000200000000", "asDouble": 95}]}}
      ]}]}]})";

// Two verbose (v5.2) requests as a collector's file exporter writes them, a document per line.
std::string VerboseLine(int sn, double us) {
  const std::string common = Attr("version", "v5.2") + "," + Attr("node", "n1") + "," +
                             Attr("gpu", "GPU0") + "," + Attr("comm_name", "dp") + "," +
                             Attr("comm_id", "0xd152c00f111816") + "," + Attr("n_nodes", "2") +
                             "," + Attr("nranks", "16");
  return R"({"resourceMetrics":[{"resource":{"attributes":[]},"scopeMetrics":[{"scope":{"name":"nccl-inspector"},"metrics":[)"
         R"({"name":"nccl_collective_exec_time_microseconds","unit":"us","gauge":{"dataPoints":[{"attributes":[)" +
         common + "," + Attr("coll_msg_size_bytes", "16777216") + "," +
         Attr("collective", "AllReduce") + "," + Attr("coll_sn", std::to_string(sn)) + "," +
         Attr("algo_proto", "RING_LL128") + R"(],"timeUnixNano":")" +
         std::to_string(1800000000000000000LL + sn * 1000000LL) + R"(","asDouble":)" +
         std::to_string(us) +
         R"(}]}},)"
         R"({"name":"nccl_p2p_exec_time_microseconds","unit":"us","gauge":{"dataPoints":[{"attributes":[)" +
         common + "," + Attr("p2p_msg_size_bytes", "4096") + "," + Attr("p2p_operation", "Recv") +
         "," + Attr("p2p_sn", "77") + "," +
         R"({"key":"p2p_peer","value":{"intValue":"3"}}],"timeUnixNano":1800000000000000000,"asInt":"12"}]}}]}]}]})"
         "\n";
}

TEST(Otlp, AggregatedBody) {
  auto f = ParseOtlpMetrics(kAggregatedBody, "body.json");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->unused, 0u) << FirstUnused(*f);
  EXPECT_EQ(f->layout, "otlp v5.1");
  EXPECT_EQ(f->incomplete_tail_bytes, 0u);
  ASSERT_EQ(f->samples.size(), 2u);
  const PromSample& bw = f->samples[0];
  EXPECT_EQ(bw.line, 1u);
  EXPECT_EQ(bw.metric, "nccl_bus_bandwidth_gbs");
  EXPECT_EQ(bw.layout, "otlp v5.1");
  EXPECT_EQ(bw.node, "n7");
  EXPECT_EQ(bw.gpu, "GPU3");
  EXPECT_EQ(bw.comm_name, "dp");
  EXPECT_EQ(bw.n_nodes, 2);
  EXPECT_EQ(bw.nranks, 16);
  EXPECT_EQ(bw.op, "AllReduce");
  EXPECT_EQ(bw.size_lo_bytes, uint64_t{16} << 20);
  EXPECT_EQ(bw.size_hi_bytes, uint64_t{17} << 20);
  EXPECT_EQ(bw.algo_proto, "RING_SIMPLE");
  EXPECT_EQ(bw.slurm_job_id, "812");  // from the resource
  EXPECT_EQ(bw.ts_us, int64_t{1800000000123456});
  EXPECT_DOUBLE_EQ(bw.value, 171.2);
  // The point's attributes, then the resource's.
  EXPECT_EQ(bw.labels.substr(0, 34), R"({"version":"v5.1","gpu":"GPU3","co)");
  EXPECT_NE(bw.labels.find(R"("service.name":"nccl-inspector","slurm.job.id":"812"})"),
            std::string::npos)
      << bw.labels;
  const PromSample& p2p = f->samples[1];
  EXPECT_EQ(p2p.op, "Send");
  EXPECT_EQ(p2p.size_lo_bytes, uint64_t{2} << 20);
  EXPECT_DOUBLE_EQ(p2p.value, 95);
}

TEST(Otlp, VerboseDocumentPerLine) {
  auto f =
      ParseOtlpMetrics(VerboseLine(44791, 1234.5) + "\n" + VerboseLine(44792, 1300), "otlp.jsonl");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->unused, 0u) << FirstUnused(*f);
  EXPECT_EQ(f->layout, "otlp v5.2");
  EXPECT_EQ(f->lines, 3u);
  ASSERT_EQ(f->samples.size(), 4u);
  const PromSample& coll = f->samples[2];
  EXPECT_EQ(coll.line, 3u);  // the second document's line, after a blank one
  EXPECT_EQ(coll.comm_id, "0xd152c00f111816");
  EXPECT_EQ(coll.coll_sn, 44792u);
  EXPECT_EQ(coll.message_size, "16777216");
  EXPECT_EQ(coll.size_lo_bytes, 16777216u);
  EXPECT_EQ(coll.size_hi_bytes, 16777216u);
  EXPECT_EQ(coll.algo_proto, "RING_LL128");
  EXPECT_EQ(coll.ts_us, int64_t{1800000000000000} + 44792000);
  EXPECT_DOUBLE_EQ(coll.value, 1300);
  const PromSample& p2p = f->samples[1];
  EXPECT_EQ(p2p.op, "Recv");
  EXPECT_EQ(p2p.coll_sn, 77u);  // p2p_sn
  EXPECT_EQ(p2p.size_lo_bytes, 4096u);
  EXPECT_EQ(p2p.ts_us, int64_t{1800000000000000});  // timeUnixNano as a number
  EXPECT_DOUBLE_EQ(p2p.value, 12);                  // asInt as a string
  EXPECT_NE(p2p.labels.find(R"("p2p_peer":"3")"), std::string::npos) << p2p.labels;
}

TEST(Otlp, WhatCannotBeUsedIsCountedAndNamedWithItsLine) {
  const std::string other =
      R"({"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"process_cpu_seconds","sum":{"dataPoints":[{"asDouble":1},{"asDouble":2}]}},)"
      R"({"name":"nccl_hist","histogram":{"dataPoints":[]}},)"
      R"({"name":"nccl_bus_bandwidth_gbs","gauge":{"dataPoints":[{"attributes":[{"key":"gpu","value":{"stringValue":"GPU0"}}],"asDouble":1},)"
      R"({"attributes":[{"key":"node","value":{"stringValue":"n1"}}]},)"
      R"({"attributes":[{"key":"node","value":{"stringValue":"n1"}},{"key":"node","value":{"stringValue":"n2"}}],"asDouble":1},)"
      R"({"attributes":[{"key":"node","value":{"stringValue":"n1"}},{"key":"nranks","value":{"stringValue":"many"}}],"timeUnixNano":"soon","asDouble":7}]}}]}]}]})";
  auto f = ParseOtlpMetrics(VerboseLine(1, 10) + other + "\n{\"resourceMetrics\": [oops\n" +
                                VerboseLine(2, 10) + "{\"resourceMetrics\":[{\"scopeMetr",
                            "m.json");
  ASSERT_TRUE(f.ok()) << f.status().message();
  // Two points of another program, a histogram, a point with no node, one with no value, one
  // with an attribute twice, a line that does not parse; and one point stored with its unreadable
  // nranks and time as NULL, counted once.
  EXPECT_EQ(f->unused, 8u);
  ASSERT_EQ(f->unused_named.size(), 8u);
  EXPECT_EQ(
      f->unused_named[0],
      "m.json:2: not an NCCL Inspector metric: process_cpu_seconds (only nccl_* metrics are read)");
  EXPECT_EQ(f->unused_named[2],
            "m.json:2: nccl_hist: a histogram, not read (Inspector sends gauges)");
  EXPECT_EQ(f->unused_named[3], "m.json:2: nccl_bus_bandwidth_gbs: a point with no node attribute");
  EXPECT_EQ(f->unused_named[4],
            "m.json:2: nccl_bus_bandwidth_gbs: a point with no asDouble or asInt value");
  EXPECT_EQ(f->unused_named[5], "m.json:2: nccl_bus_bandwidth_gbs: attribute node twice");
  EXPECT_EQ(f->unused_named[6].substr(0, 74),
            "m.json:2: nccl_bus_bandwidth_gbs: nranks \"many\" is no count up to 2^24; ti");
  EXPECT_EQ(f->unused_named[7].substr(0, 42), "m.json:3: a line that is no JSON document:");
  ASSERT_EQ(f->samples.size(), 5u);  // 2 + 1 + 2
  EXPECT_FALSE(f->samples[2].nranks);
  EXPECT_FALSE(f->samples[2].ts_us);
  EXPECT_DOUBLE_EQ(f->samples[2].value, 7);
  // The half-written last document is not read and not counted against the file.
  EXPECT_EQ(f->incomplete_tail_bytes, 31u);
  EXPECT_EQ(f->lines, 4u);
}

TEST(Otlp, ABodyThatDoesNotParseIsOneDocumentNotUnderstood) {
  auto f =
      ParseOtlpMetrics(kAggregatedBody.substr(0, kAggregatedBody.size() / 2) + "\n", "cut.json");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->unused, 1u);
  EXPECT_EQ(FirstUnused(*f).substr(0, 33), "cut.json:1: not a JSON document: ");
  EXPECT_TRUE(f->samples.empty());
  EXPECT_EQ(f->layout, "");
  auto no_metrics = ParseOtlpMetrics(R"({"resourceMetrics": 5})", "x.json");
  ASSERT_TRUE(no_metrics.ok());
  EXPECT_EQ(FirstUnused(*no_metrics), "x.json:1: a JSON document with no resourceMetrics array");
}

// A collector's file whose first request was damaged is still read line by line; its first
// request caught half written is a tail, not a document that does not parse.
TEST(Otlp, ADamagedFirstLineLeavesTheOthersRead) {
  auto f = ParseOtlpMetrics("{\"resourceMetrics\": [tru\n" + VerboseLine(1, 10), "c.jsonl");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->samples.size(), 2u);
  EXPECT_EQ(f->unused, 1u);
  EXPECT_EQ(FirstUnused(*f).substr(0, 42), "c.jsonl:1: a line that is no JSON document");
  const std::string line = VerboseLine(1, 10);
  auto half = ParseOtlpMetrics(line.substr(0, 100), "c.jsonl");
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->unused, 0u) << FirstUnused(*half);
  EXPECT_EQ(half->incomplete_tail_bytes, 100u);
  EXPECT_EQ(half->lines, 0u);
}

TEST(Otlp, HostileInput) {
  std::string many =
      R"({"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"nccl_x","gauge":{"dataPoints":[{"attributes":[)";
  for (int i = 0; i < 70; ++i) many += (i ? "," : "") + Attr("k" + std::to_string(i), "v");
  many += R"(],"asDouble":1},{"attributes":[)" + Attr("node", std::string(5000, 'n')) +
          R"(],"asDouble":1}]}}]}]}]})";
  auto f = ParseOtlpMetrics(many, "h.json");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->unused, 2u);
  EXPECT_EQ(f->unused_named[0], "h.json:1: nccl_x: more than 64 attributes");
  EXPECT_EQ(f->unused_named[1], "h.json:1: nccl_x: attribute node's value is over 4096 bytes");
  testing::TempDir dir;
  testing::WriteFile(dir / "big.json", "{\"resourceMetrics\":[]}");
  std::filesystem::resize_file(dir / "big.json", kMaxPromBytes + 1);
  auto big = ReadOtlpMetrics(dir / "big.json");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("over the 1024 MiB an OTLP metrics file may have"),
            std::string::npos)
      << big.status().message();
}

TEST(Otlp, FoundByContentAndNeverReadAsAnInspectorLog) {
  EXPECT_TRUE(LooksLikeOtlpMetrics(kAggregatedBody));
  EXPECT_TRUE(LooksLikeOtlpMetrics("\xEF\xBB\xBF " + VerboseLine(1, 1)));
  EXPECT_FALSE(LooksLikeOtlpMetrics(R"({"traceEvents": []})"));
  EXPECT_FALSE(LooksLikeOtlpMetrics(R"([{"resourceMetrics": []}])"));
  EXPECT_FALSE(LooksLikeOtlpMetrics(R"({"header":{"id":"0x1"},"metadata":{}})"));
  testing::TempDir dir;
  testing::WriteFile(dir / "job/collector.log", VerboseLine(1, 1));  // an Inspector-like name
  testing::WriteFile(dir / "job/body.json", kAggregatedBody);
  EXPECT_TRUE(IsOtlpMetricsFile(dir / "job/collector.log"));
  auto logs = DiscoverInputs({dir / "job", dir / "job/collector.log"});
  ASSERT_TRUE(logs.ok());
  EXPECT_TRUE(logs->files.empty());
  // Stored through IngestInputs beside the textfiles, in the same tables.
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  IngestOptions o;
  o.run = "r";
  auto in = IngestInputs(**store, {dir / "job"}, o);
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->prom.files_read, 2u);
  EXPECT_EQ(in->prom.samples, 4u);
  EXPECT_FALSE(in->AnythingLost());
  EXPECT_EQ(in->records.records_stored, 0u);
  auto q = [&](const std::string& sql) {
    auto r = (*store)->Query(sql);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() && !r->rows.empty() && r->rows[0][0] ? *r->rows[0][0] : std::string("NULL");
  };
  EXPECT_EQ(q("SELECT string_agg(layout || ':' || samples, ',' ORDER BY path) FROM prom_files"),
            "otlp v5.1:2,otlp v5.2:2");
  EXPECT_EQ(q("SELECT comm_id || ' ' || coll_sn || ' ' || op || ' ' || value FROM prom_samples "
              "WHERE layout = 'otlp v5.2' "
              "AND op = 'AllReduce'"),
            "0xd152c00f111816 1 AllReduce 1.0");
  EXPECT_EQ(q("SELECT slurm_job_id FROM prom_samples WHERE layout = 'otlp v5.1' LIMIT 1"), "812");
}

}  // namespace
}  // namespace collscope::readers
