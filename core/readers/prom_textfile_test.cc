#include "core/readers/prom_textfile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/line_reader.h"
#include "core/readers/ingest_inputs.h"
#include "core/store.h"
#include "tests/prom_samples.h"
#include "tests/test_util.h"

namespace collscope::readers {
namespace {

std::string FirstUnused(const PromFile& f) { return f.unused_named.empty() ? "" : f.unused_named[0]; }

TEST(Prom, Layout230) {
  auto f = ParsePromTextfile(testing::kProm230, "m.prom");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->unused, 0u) << FirstUnused(*f);
  EXPECT_EQ(f->layout, "2.30");
  EXPECT_EQ(f->lines, 4u);
  EXPECT_EQ(f->incomplete_tail_bytes, 0u);
  ASSERT_EQ(f->samples.size(), 4u);
  const PromSample& bw = f->samples[0];
  EXPECT_EQ(bw.line, 1u);
  EXPECT_EQ(bw.metric, "nccl_bus_bandwidth_gbs");
  EXPECT_EQ(bw.layout, "2.30");
  EXPECT_EQ(bw.node, "n7");
  EXPECT_EQ(bw.gpu, "GPU3");
  EXPECT_EQ(bw.comm_name, "dp");
  EXPECT_FALSE(bw.comm_id);
  EXPECT_FALSE(bw.rank);
  EXPECT_EQ(bw.n_nodes, 2);
  EXPECT_EQ(bw.nranks, 16);
  EXPECT_EQ(bw.op, "AllReduce");
  EXPECT_EQ(bw.message_size, "16-17MB");
  EXPECT_EQ(bw.size_lo_bytes, uint64_t{16} << 20);
  EXPECT_EQ(bw.size_hi_bytes, uint64_t{17} << 20);
  EXPECT_EQ(bw.algo_proto, "RING_SIMPLE");
  EXPECT_EQ(bw.slurm_job_id, "812");
  EXPECT_FALSE(bw.ts_us);
  EXPECT_DOUBLE_EQ(bw.value, 171.2);
  EXPECT_EQ(bw.labels.substr(0, 48), R"({"version":"v5.1","slurm_job_id":"812","node":"n)");
  EXPECT_DOUBLE_EQ(f->samples[1].value, 182.5);
  const PromSample& p2p = f->samples[2];
  EXPECT_EQ(p2p.metric, "nccl_p2p_exec_time_microseconds");
  EXPECT_EQ(p2p.op, "Send");  // p2p_operation
  EXPECT_EQ(p2p.comm_name, "pp");
  EXPECT_FALSE(p2p.algo_proto);
  EXPECT_EQ(p2p.size_lo_bytes, uint64_t{2} << 20);
  const PromSample& total = f->samples[3];
  EXPECT_EQ(total.metric, "nccl_collectives_total");
  EXPECT_FALSE(total.op);
  EXPECT_FALSE(total.message_size);
  EXPECT_DOUBLE_EQ(total.value, 40960);
}

TEST(Prom, Layout229) {
  auto f = ParsePromTextfile(testing::kProm229, "m.prom");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->unused, 0u) << FirstUnused(*f);
  EXPECT_EQ(f->layout, "2.29");
  ASSERT_EQ(f->samples.size(), 6u);
  const PromSample& a = f->samples[1];
  EXPECT_EQ(a.metric, "nccl_bus_bandwidth_gbs");
  EXPECT_EQ(a.layout, "2.29");
  EXPECT_EQ(a.node, "pool0-0002");  // hostname
  EXPECT_EQ(a.gpu, "GPU4");         // gpu_device_id
  EXPECT_EQ(a.comm_id, "0xd152c00f111816");
  EXPECT_FALSE(a.comm_name);
  EXPECT_EQ(a.rank, 4);
  EXPECT_EQ(a.nranks, 8);
  EXPECT_EQ(a.n_nodes, 1);
  EXPECT_EQ(a.op, "AllReduce");
  EXPECT_EQ(a.coll_sn, 228924u);
  EXPECT_EQ(a.slurm_job_id, "4711");
  EXPECT_EQ(a.message_size, "2.00GB");
  EXPECT_EQ(a.size_lo_bytes, uint64_t{2} << 30);
  EXPECT_EQ(a.size_hi_bytes, uint64_t{2} << 30);
  EXPECT_EQ(a.ts_us, int64_t{1760671907} * 1000000);  // 2025-10-17T03:31:47Z
  EXPECT_DOUBLE_EQ(a.value, 210.875);
  EXPECT_EQ(f->samples[3].size_lo_bytes, 512u);  // "%zuB" below 1 KiB
  EXPECT_EQ(f->samples[5].coll_sn, 228925u);
  EXPECT_EQ(f->samples[5].line, 6u);
  // Both layouts in one file.
  auto m = ParsePromTextfile(testing::kProm229 + testing::kProm230, "m.prom");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->layout, "mixed");
  EXPECT_EQ(m->samples.size(), 10u);
}

TEST(Prom, LabelEscapesAndOddSpacing) {
  const std::string line =
      "nccl_bus_bandwidth_gbs { version=\"v5.1\", node=\"a\\\\b\", gpu=\"GPU0\", comm_name=\"say \\\"hi\\\"\\nbye\",} "
      "1.5e2 1760671907123\n";
  auto f = ParsePromTextfile(line, "e.prom");
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->samples.size(), 1u) << FirstUnused(*f);
  EXPECT_EQ(f->unused, 0u) << FirstUnused(*f);
  const PromSample& x = f->samples[0];
  EXPECT_EQ(x.node, "a\\b");
  EXPECT_EQ(x.comm_name, "say \"hi\"\nbye");
  EXPECT_DOUBLE_EQ(x.value, 150);
  EXPECT_EQ(x.ts_us, int64_t{1760671907123} * 1000);  // the exposition timestamp, in ms
  // The labels column is JSON of the unescaped values.
  EXPECT_NE(x.labels.find(R"("node":"a\\b")"), std::string::npos) << x.labels;
  EXPECT_NE(x.labels.find(R"("comm_name":"say \"hi\"\nbye")"), std::string::npos) << x.labels;
  // An escape Prometheus does not have is not understood.
  auto bad = ParsePromTextfile("nccl_x{version=\"v5.1\",node=\"a\\tb\"} 1\n", "e.prom");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->samples.size(), 0u);
  ASSERT_EQ(bad->unused, 1u);
  EXPECT_NE(FirstUnused(*bad).find("unknown escape"), std::string::npos) << FirstUnused(*bad);
}

TEST(Prom, NanAndInfValues) {
  std::string text;
  for (const char* v : {"NaN", "nan", "+Inf", "inf", "-Inf", "-inf", "1e999"})
    text += std::string("nccl_bus_bandwidth_gbs{version=\"v5.1\",node=\"n\",gpu=\"GPU0\"} ") + v + "\n";
  auto f = ParsePromTextfile(text, "v.prom");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->unused, 0u) << FirstUnused(*f);
  ASSERT_EQ(f->samples.size(), 7u);
  EXPECT_TRUE(std::isnan(f->samples[0].value));
  EXPECT_TRUE(std::isnan(f->samples[1].value));
  EXPECT_EQ(f->samples[2].value, HUGE_VAL);
  EXPECT_EQ(f->samples[3].value, HUGE_VAL);
  EXPECT_EQ(f->samples[4].value, -HUGE_VAL);
  EXPECT_EQ(f->samples[5].value, -HUGE_VAL);
  EXPECT_EQ(f->samples[6].value, HUGE_VAL);
  // No number at all is not understood.
  auto bad = ParsePromTextfile("nccl_bus_bandwidth_gbs{version=\"v5.1\",node=\"n\"} fast\n", "v.prom");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->samples.size(), 0u);
  EXPECT_EQ(FirstUnused(*bad), "v.prom:1: nccl_bus_bandwidth_gbs: value \"fast\" is no number");
}

TEST(Prom, UnknownMetricIsCountedAndNamed) {
  const std::string text = "# a comment\n\nnode_load1 0.5\n" + testing::kProm230 + "go_goroutines{job=\"x\"} 7\n";
  auto f = ParsePromTextfile(text, "m.prom");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->samples.size(), 4u);
  EXPECT_EQ(f->unused, 2u);
  ASSERT_EQ(f->unused_named.size(), 2u);
  EXPECT_EQ(f->unused_named[0], "m.prom:3: not an NCCL Inspector metric: node_load1 (only nccl_* metrics are read)");
  EXPECT_EQ(f->unused_named[1].substr(0, 53), "m.prom:8: not an NCCL Inspector metric: go_goroutines");
}

TEST(Prom, MalformedLabelsAreCountedWithPathAndLine) {
  const std::string text = testing::kProm229 +
                           "nccl_bus_bandwidth_gbs{hostname=\"h\",rank=4} 1\n"            // 7: unquoted
                           "nccl_bus_bandwidth_gbs{hostname=\"h\" 1\n"                    // 8: no }
                           "nccl_bus_bandwidth_gbs{hostname=\"h\",hostname=\"g\"} 1\n"    // 9: twice
                           "nccl_bus_bandwidth_gbs{rank=\"1\"} 1\n"                        // 10: no layout
                           "nccl_bus_bandwidth_gbs{hostname=\"h\",rank=\"x\"} 1\n";       // 11: kept, rank NULL
  auto f = ParsePromTextfile(text, "/d/m.prom");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->samples.size(), 7u);
  ASSERT_EQ(f->unused, 5u);
  EXPECT_EQ(f->unused_named[0], "/d/m.prom:7: nccl_bus_bandwidth_gbs: label rank's value is not quoted");
  EXPECT_EQ(f->unused_named[1], "/d/m.prom:8: nccl_bus_bandwidth_gbs: a , or } expected after label hostname");
  EXPECT_EQ(f->unused_named[2], "/d/m.prom:9: nccl_bus_bandwidth_gbs: label hostname twice");
  EXPECT_NE(f->unused_named[3].find("/d/m.prom:10: nccl_bus_bandwidth_gbs: neither a 2.30"), std::string::npos);
  EXPECT_EQ(f->unused_named[4],
            "/d/m.prom:11: nccl_bus_bandwidth_gbs: rank \"x\" is no count up to 2^24 (stored as NULL)");
  EXPECT_FALSE(f->samples.back().rank);
  EXPECT_EQ(f->samples.back().line, 11u);
}

TEST(Prom, HalfWrittenLastLineIsATailNotAnError) {
  const std::string cut = testing::kProm230.substr(0, testing::kProm230.size() - 30);
  auto f = ParsePromTextfile(cut, "m.prom");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->unused, 0u) << FirstUnused(*f);
  EXPECT_EQ(f->samples.size(), 3u);
  EXPECT_EQ(f->lines, 3u);
  EXPECT_EQ(f->incomplete_tail_bytes, cut.size() - cut.rfind('\n') - 1);
  // The same through the file reader.
  testing::TempDir dir;
  testing::WriteFile(dir / "m.prom", cut);
  auto r = ReadPromTextfile(dir / "m.prom");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->samples.size(), 3u);
  EXPECT_EQ(r->unused, 0u);
  EXPECT_EQ(r->incomplete_tail_bytes, f->incomplete_tail_bytes);
}

TEST(Prom, HostileInput) {
  // Too many labels, a label value too long, a line over the line limit: each counted.
  std::string many = "nccl_x{version=\"v\",node=\"n\"";
  for (size_t i = 0; i < kMaxPromLabels; ++i) many += ",l" + std::to_string(i) + "=\"1\"";
  many += "} 1\n";
  const std::string long_value = "nccl_x{version=\"v\",node=\"" + std::string(kMaxPromLabelBytes + 1, 'a') + "\"} 1\n";
  const std::string huge = "nccl_x{version=\"v\",node=\"" + std::string(kMaxLineBytes, 'a') + "\"} 1\n";
  auto f = ParsePromTextfile(many + long_value + huge + "nccl_x{version=\"v\",node=\"\xff\"} 1\n", "h.prom");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->samples.size(), 0u);
  ASSERT_EQ(f->unused, 4u);
  EXPECT_NE(f->unused_named[0].find("more than 64 labels"), std::string::npos) << f->unused_named[0];
  EXPECT_NE(f->unused_named[1].find("over 4096 bytes"), std::string::npos) << f->unused_named[1];
  EXPECT_NE(f->unused_named[2].find("h.prom:3: a line of"), std::string::npos) << f->unused_named[2];
  EXPECT_NE(f->unused_named[3].find("not UTF-8"), std::string::npos) << f->unused_named[3];
  // Values read from labels out of their bounds: NULL, counted.
  auto b = ParsePromTextfile("nccl_x{hostname=\"h\",nranks=\"16777217\",message_size=\"2000-2001TB\",coll_sn=\"99999999999999999999\","
                             "timestamp=\"1969-12-31T23:59:59Z\"} 1 9007199254740993\n", "b.prom");
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->unused, 1u) << FirstUnused(*b);  // an exposition timestamp past 2^53 us: not read
  EXPECT_EQ(b->samples.size(), 0u);
  EXPECT_NE(FirstUnused(*b).find("is no milliseconds count"), std::string::npos) << FirstUnused(*b);
  auto c = ParsePromTextfile("nccl_x{hostname=\"h\",nranks=\"16777217\",message_size=\"2000-2001TB\",coll_sn=\"99999999999999999999\","
                             "timestamp=\"1969-12-31T23:59:59Z\"} 1\n", "c.prom");
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->samples.size(), 1u);
  EXPECT_EQ(c->unused, 1u);
  EXPECT_FALSE(c->samples[0].nranks);
  EXPECT_FALSE(c->samples[0].size_lo_bytes);
  EXPECT_FALSE(c->samples[0].coll_sn);
  EXPECT_FALSE(c->samples[0].ts_us);
  // Many bad lines: all counted, the first kMaxPromUnusedNamed named.
  std::string junk;
  for (int i = 0; i < 500; ++i) junk += "junk 1\n";
  auto j = ParsePromTextfile(junk, "j.prom");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->unused, 500u);
  EXPECT_EQ(j->unused_named.size(), kMaxPromUnusedNamed);
  // Over 1 GiB: refused before it is read (a sparse file).
  testing::TempDir dir;
  testing::WriteFile(dir / "big.prom", "");
  std::filesystem::resize_file(dir / "big.prom", kMaxPromBytes + 1);
  auto big = ReadPromTextfile(dir / "big.prom");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("over the 1024 MiB a Prometheus file may have"), std::string::npos)
      << big.status().message();
}

TEST(Prom, FoundByNameOrContent) {
  EXPECT_TRUE(LooksLikePromTextfile(testing::kProm230));
  EXPECT_TRUE(LooksLikePromTextfile("# comment\n\n" + testing::kProm229));
  EXPECT_FALSE(LooksLikePromTextfile("node_load1 0.5\n" + testing::kProm230));
  EXPECT_FALSE(LooksLikePromTextfile("nccl_bus_bandwidth_gbs 5\n"));  // no labels
  EXPECT_FALSE(LooksLikePromTextfile("{\"header\":{}}\n"));
  testing::TempDir dir;
  testing::WriteFile(dir / "metrics.txt", testing::kProm230);
  testing::WriteFile(dir / "other.txt", "hello\n");
  testing::WriteFile(dir / "empty.prom", "");
  EXPECT_TRUE(IsPromTextfile(dir / "metrics.txt"));
  EXPECT_FALSE(IsPromTextfile(dir / "other.txt"));
  EXPECT_TRUE(IsPromTextfile(dir / "empty.prom"));
}

TEST(Prom, StoreRowsAndReplaceOnReingest) {
  testing::TempDir dir;
  testing::WriteFile(dir / "job/nccl_inspector_metrics_aaaa.prom", testing::kProm230);
  testing::WriteFile(dir / "job/nccl_inspector_metrics_bbbb.prom", testing::kProm229);
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto rep = IngestPromFiles(**store, {dir / "job"}, "r");
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->files_seen, 2u);
  EXPECT_EQ(rep->files_read, 2u);
  EXPECT_EQ(rep->samples, 10u);
  auto q = [&](const std::string& sql) {
    auto r = (*store)->Query(sql);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() && !r->rows.empty() && r->rows[0][0] ? *r->rows[0][0] : std::string("NULL");
  };
  EXPECT_EQ(q("SELECT count(*) FROM prom_samples"), "10");
  EXPECT_EQ(q("SELECT string_agg(layout || ':' || samples, ',' ORDER BY path) FROM prom_files"), "2.30:4,2.29:6");
  EXPECT_EQ(q("SELECT node || ' ' || gpu || ' ' || comm_name || ' ' || nranks || ' ' || op || ' ' || size_lo_bytes || "
              "' ' || size_hi_bytes || ' ' || algo_proto || ' ' || value FROM prom_samples WHERE line = 1 AND layout = '2.30'"),
            "n7 GPU3 dp 16 AllReduce 16777216 17825792 RING_SIMPLE 171.2");
  EXPECT_EQ(q("SELECT comm_id || ' ' || rank || ' ' || coll_sn || ' ' || ts_us || ' ' || (comm_name IS NULL) "
              "FROM prom_samples WHERE line = 2 AND layout = '2.29'"),
            "0xd152c00f111816 4 228924 1760671907000000 true");
  EXPECT_EQ(q("SELECT labels FROM prom_samples WHERE metric = 'nccl_collectives_total'"),
            R"({"version":"v5.1","slurm_job_id":"812","node":"n7","gpu":"GPU3"})");
  // Rewritten in place (the next dump, half written): its rows are replaced, not added.
  testing::WriteFile(dir / "job/nccl_inspector_metrics_aaaa.prom", testing::kProm230.substr(0, 100));
  auto again = IngestPromFiles(**store, {dir / "job"}, "r");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->incomplete_tails, 1u);
  EXPECT_EQ(q("SELECT count(*) FROM prom_files"), "2");
  EXPECT_EQ(q("SELECT count(*) FROM prom_samples"), "6");
  EXPECT_EQ(q("SELECT incomplete_tail_bytes FROM prom_files WHERE layout = ''"), "100");
  // Through IngestInputs: the counts and the names of what was not understood.
  testing::WriteFile(dir / "bad/x.prom", testing::kProm230 + "nccl_x{node=\"n\"} 1\n");
  IngestOptions o;
  o.run = "b";
  auto in = IngestInputs(**store, {dir / "bad"}, o);
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->prom.files_read, 1u);
  EXPECT_TRUE(in->AnythingLost());
  ASSERT_EQ(in->NotStored().size(), 1u);
  EXPECT_EQ(in->NotStored()[0].substr(0, 15), "not understood:");
  EXPECT_NE(in->NotStored()[0].find("x.prom:5: nccl_x: neither"), std::string::npos) << in->NotStored()[0];
}

}  // namespace
}  // namespace collscope::readers
