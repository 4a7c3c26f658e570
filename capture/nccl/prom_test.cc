// Unit tests of the Prometheus textfile renderer (prom_textfile.h), its configuration, and the
// test-side text-format checker (test_prom.h). The plugin-level tests (file on disk, atomic
// replacement, promtool) are in plugin_test.cc.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "capture/nccl/config.h"
#include "capture/nccl/prom_textfile.h"
#include "capture/nccl/test_prom.h"

namespace collscope::capture {
namespace {

using testing::ParsePromText;
using testing::PromFile;
using testing::PromSample;

TEST(CapturePromFormat, SizeBuckets) {
  EXPECT_EQ(PromSizeBucket(0), "0B");
  EXPECT_EQ(PromSizeBucket(1), "1-2B");
  EXPECT_EQ(PromSizeBucket(1023), "1023-1024B");
  EXPECT_EQ(PromSizeBucket(1024), "1-2KB");
  EXPECT_EQ(PromSizeBucket(4096), "4-5KB");
  EXPECT_EQ(PromSizeBucket(8191), "7-8KB");
  EXPECT_EQ(PromSizeBucket(16 * 1048576 + 524288), "16-17MB");
  EXPECT_EQ(PromSizeBucket(512ull * 1048576 + 1), "512-513MB");
  EXPECT_EQ(PromSizeBucket(2621440), "2-3MB");
  EXPECT_EQ(PromSizeBucket(4ull * 1073741824 + 536870912), "4-5GB");
  EXPECT_EQ(PromSizeBucket(3ull << 40), "3-4TB");
}

TEST(CapturePromFormat, EscapesAndValues) {
  std::string s;
  AppendPromLabelValue("a\"b\\c\nd", &s);
  EXPECT_EQ(s, "a\\\"b\\\\c\\nd");
  s.clear();
  AppendPromValue(162.2016, &s);
  EXPECT_EQ(s, "162.202");  // Inspector's %.6g
  s.clear();
  AppendPromValue(1234567.0, &s);
  EXPECT_EQ(s, "1.23457e+06");
  s.clear();
  AppendPromValue(std::nan(""), &s);
  s.push_back(' ');
  AppendPromValue(HUGE_VAL, &s);
  s.push_back(' ');
  AppendPromValue(-HUGE_VAL, &s);
  EXPECT_EQ(s, "NaN +Inf -Inf");
  s.clear();
  AppendPromValue(1800000000.123, &s, 15);
  EXPECT_EQ(s, "1800000000.123");
}

// The checker must reject what node_exporter or Prometheus would reject; otherwise the plugin
// tests that rely on it prove nothing.
TEST(CapturePromFormat, CheckerRejectsInvalidText) {
  PromFile f;
  EXPECT_EQ(ParsePromText("a 1\n# HELP b x\n# TYPE b gauge\nb{l=\"v\",m=\"w\\\"\"} +Inf\n", &f), "");
  ASSERT_EQ(f.samples.size(), 2u);
  EXPECT_EQ(f.samples[1].Label("m"), "w\"");
  EXPECT_EQ(f.types["b"], "gauge");
  const std::vector<std::string> bad = {
      "a 1",                                  // no final newline
      "a 1\nb 2\na 3\n",                      // a split group
      "a{x=\"1\"} 1\na{x=\"1\"} 2\n",         // repeated series
      "a 1 1700000000000\n",                  // client timestamp
      "a{x=\"\\t\"} 1\n",                     // bad escape
      "a{x=\"1} 1\n",                         // unterminated value
      "a 1\n# TYPE a gauge\n",                // TYPE after the first sample
      "# TYPE a gauge\n# TYPE a gauge\na 1\n",  // two TYPE lines
      "# TYPE a kind\na 1\n",                 // unknown type
      "1a 1\n",                               // bad metric name
      "a{__x=\"1\"} 1\n",                     // reserved label name
      "a{x=\"1\",x=\"2\"} 1\n",               // duplicate label
      "a one\n",                              // bad value
      "a{x=\"1\"}1\n",                        // no space
  };
  for (const std::string& t : bad) {
    PromFile g;
    EXPECT_NE(ParsePromText(t, &g), "") << t;
  }
}

TEST(CaptureConfig, PrometheusTextfileInterval) {
  std::map<std::string, std::string> env;
  auto load = [&] {
    static std::map<std::string, std::string>* cur;
    cur = &env;
    return LoadConfig([](const char* n) -> const char* {
      auto it = cur->find(n);
      return it == cur->end() ? nullptr : it->second.c_str();
    });
  };
  Config c = load();
  EXPECT_FALSE(c.prom_dump);
  EXPECT_EQ(c.prom_interval_us, -1);  // off unless NCCL_INSPECTOR_PROM_DUMP=1
  EXPECT_TRUE(c.require_kernel_timing);
  EXPECT_FALSE(c.prom_dump_stats);
  EXPECT_EQ(c.prom_dir, c.dump_dir);
  EXPECT_EQ(c.prom_max_buckets, 512u);

  env = {{"NCCL_INSPECTOR_PROM_DUMP", "1"}};
  EXPECT_EQ(load().prom_interval_us, 30000000);  // our 1 s default raised to Inspector's 30 s
  const std::pair<const char*, int64_t> cases[] = {
      {"0", 30000000}, {"5000000", 30000000}, {"45000000", 45000000}, {"-1", -1}};
  for (const auto& [interval, want] : cases) {
    env["NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS"] = interval;
    EXPECT_EQ(load().prom_interval_us, want) << interval;
  }
  env["COLLSCOPE_PROM_INTERVAL_MS"] = "50";  // collscope's override, -1 notwithstanding
  env["COLLSCOPE_PROM_DIR"] = "/tmp/textfiles";
  env["NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING"] = "0";
  env["NCCL_INSPECTOR_PROM_DUMP_STATS"] = "1";
  c = load();
  EXPECT_EQ(c.prom_interval_us, 50000);
  EXPECT_EQ(c.prom_dir, "/tmp/textfiles");
  EXPECT_FALSE(c.require_kernel_timing);
  EXPECT_TRUE(c.prom_dump_stats);
  EXPECT_TRUE(c.warnings.empty());
  env["NCCL_INSPECTOR_PROM_DUMP"] = "0";
  EXPECT_EQ(load().prom_interval_us, -1);  // the override alone does not turn it on
}

CompletedRecord Rec(const char* func, uint64_t bytes, uint64_t exec_us, const char* algo = "RING",
                    const char* proto = "SIMPLE", TimingSource src = TimingSource::kKernelGpu) {
  CompletedRecord r;
  r.func = ParseFunc(func);
  r.is_p2p = r.func == Func::kSend || r.func == Func::kRecv;
  r.msg_bytes = bytes;
  r.exec_us = exec_us;
  r.source = src;
  r.algo = PackName(algo);
  r.proto = PackName(proto);
  return r;
}

PromProcessLabels Labels() {
  PromProcessLabels l;
  l.slurm_job_id = "812";
  l.node = "n7";
  l.gpu = "GPU3";
  return l;
}

const PromSample* Find(const PromFile& f, const std::string& name,
                       const std::map<std::string, std::string>& want) {
  for (const PromSample* s : f.Named(name)) {
    bool ok = true;
    for (const auto& [k, v] : want) ok = ok && s->Label(k) == v;
    if (ok) return s;
  }
  return nullptr;
}

PromFile Parse(const std::string& text) {
  PromFile f;
  const std::string err = ParsePromText(text, &f);
  EXPECT_EQ(err, "") << text;
  return f;
}

TEST(CapturePromTextfile, AggregatesOneWindowLikeInspector) {
  PromTextfile p(Labels(), 512, true, true);
  CommIdentity dp{0xa1, "dp", 3, 16, 2}, dp2{0xc3, "dp", 5, 16, 2}, pp{0xb2, "pp", 0, 2, 2};
  const uint32_t g_dp = p.CommGroup(dp), g_pp = p.CommGroup(pp);
  EXPECT_EQ(p.CommGroup(dp2), g_dp);  // same name, size and nodes: one bucket set, as Inspector
  const uint64_t big = 16 * 1048576 + 524288;
  for (uint64_t t : {100, 200, 400}) p.Add(g_dp, Rec("AllReduce", big, t));
  p.Add(g_dp, Rec("AllReduce", big, 200));  // from the second "dp" communicator
  p.Add(g_dp, Rec("AllReduce", big, 50, "TREE", "LL"));
  p.Add(g_dp, Rec("AllReduce", big, 900, "RING", "SIMPLE", TimingSource::kKernelCpu));  // excluded
  p.Add(g_dp, Rec("AllGather", 4096, 0));  // exec 0: busbw 0 stays out of the geometric mean
  p.Add(g_pp, Rec("Send", 2621440, 50));
  p.Add(g_pp, Rec("Send", 2621440, 200));
  p.Add(g_pp, Rec("Recv", 0, 7));
  p.AddDrops(3, 1);
  const uint64_t now = 1800000000123456789ull;
  const std::string text = p.Render({{"dp", 2, now - 2500000000ull}, {"dp", 0, 0}, {"pp", 0, 0}}, now);
  const PromFile f = Parse(text);

  // Exact lines: label order, label values and %.6g as NCCL 2.30 Inspector writes them.
  const double bus = double(big) / 1e3 / 200.0 * 30.0 / 16.0;  // geometric mean of t is 200 us
  char want[512];
  std::snprintf(want, sizeof(want),
                "nccl_bus_bandwidth_gbs{version=\"v5.1\",slurm_job_id=\"812\",node=\"n7\",gpu=\"GPU3\","
                "comm_name=\"dp\",n_nodes=\"2\",nranks=\"16\",collective=\"AllReduce\","
                "message_size=\"16-17MB\",algo_proto=\"RING_SIMPLE\"} %.6g\n",
                bus);
  EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  EXPECT_NE(text.find("nccl_collective_exec_time_microseconds{version=\"v5.1\",slurm_job_id=\"812\","
                      "node=\"n7\",gpu=\"GPU3\",comm_name=\"dp\",n_nodes=\"2\",nranks=\"16\","
                      "collective=\"AllReduce\",message_size=\"16-17MB\",algo_proto=\"RING_SIMPLE\"} 225\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("nccl_p2p_exec_time_microseconds{version=\"v5.1\",slurm_job_id=\"812\",node=\"n7\","
                      "gpu=\"GPU3\",comm_name=\"pp\",n_nodes=\"2\",nranks=\"2\",p2p_operation=\"Send\","
                      "message_size=\"2-3MB\"} 125\n"),
            std::string::npos)
      << text;

  const std::vector<std::string> coll_labels = {"version", "slurm_job_id", "node", "gpu", "comm_name",
                                                "n_nodes", "nranks", "collective", "message_size",
                                                "algo_proto"};
  const std::vector<std::string> p2p_labels = {"version", "slurm_job_id", "node", "gpu", "comm_name",
                                               "n_nodes", "nranks", "p2p_operation", "message_size"};
  for (const char* n : {"nccl_bus_bandwidth_gbs", "nccl_collective_exec_time_microseconds",
                        "collscope_collective_operations", "collscope_collective_exec_time_max_seconds"}) {
    ASSERT_EQ(f.Named(n).size(), 3u) << n;  // RING_SIMPLE and TREE_LL AllReduce, AllGather
    for (const PromSample* s : f.Named(n)) EXPECT_EQ(s->LabelNames(), coll_labels) << s->line;
  }
  for (const char* n : {"nccl_p2p_bus_bandwidth_gbs", "nccl_p2p_exec_time_microseconds",
                        "collscope_p2p_operations", "collscope_p2p_exec_time_max_seconds"}) {
    ASSERT_EQ(f.Named(n).size(), 2u) << n;
    for (const PromSample* s : f.Named(n)) EXPECT_EQ(s->LabelNames(), p2p_labels) << s->line;
  }
  const PromSample* tree = Find(f, "nccl_bus_bandwidth_gbs", {{"algo_proto", "TREE_LL"}});
  ASSERT_NE(tree, nullptr);
  EXPECT_NEAR(tree->value, double(big) / 1e3 / 50.0 * 30.0 / 16.0, 1e-3);
  const PromSample* ag = Find(f, "nccl_bus_bandwidth_gbs", {{"collective", "AllGather"}});
  ASSERT_NE(ag, nullptr);
  EXPECT_EQ(ag->Label("message_size"), "4-5KB");
  EXPECT_EQ(ag->value, 0.0);
  const PromSample* send = Find(f, "nccl_p2p_bus_bandwidth_gbs", {{"p2p_operation", "Send"}});
  ASSERT_NE(send, nullptr);
  EXPECT_NEAR(send->value, 2621440.0 / 1e3 / 100.0, 1e-3);  // P2P busbw = S/t; geo-mean t = 100
  const PromSample* recv = Find(f, "nccl_p2p_exec_time_microseconds", {{"p2p_operation", "Recv"}});
  ASSERT_NE(recv, nullptr);
  EXPECT_EQ(recv->Label("message_size"), "0B");
  EXPECT_EQ(recv->value, 7.0);

  const PromSample* n_ring = Find(f, "collscope_collective_operations", {{"collective", "AllReduce"}, {"algo_proto", "RING_SIMPLE"}});
  ASSERT_NE(n_ring, nullptr);
  EXPECT_EQ(n_ring->value, 4.0);
  const PromSample* max_ring =
      Find(f, "collscope_collective_exec_time_max_seconds", {{"collective", "AllReduce"}, {"algo_proto", "RING_SIMPLE"}});
  ASSERT_NE(max_ring, nullptr);
  EXPECT_DOUBLE_EQ(max_ring->value, 400e-6);

  // Inspector's device counters (PROM_DUMP_STATS): integers, Inspector's four labels.
  const std::map<std::string, double> stats = {{"nccl_collectives_total", 7 + 3},
                                               {"nccl_collectives_dropped_total", 3},
                                               {"nccl_p2p_total", 3 + 1},
                                               {"nccl_p2p_dropped_total", 1}};
  for (const auto& [name, v] : stats) {
    ASSERT_EQ(f.Named(name).size(), 1u) << name;
    const PromSample* s = f.Named(name)[0];
    EXPECT_EQ(s->LabelNames(), (std::vector<std::string>{"version", "slurm_job_id", "node", "gpu"}));
    EXPECT_EQ(s->value, v) << name;
    EXPECT_EQ(s->value_text.find_first_not_of("0123456789"), std::string::npos) << s->line;
  }
  EXPECT_EQ(Find(f, "collscope_records_total", {{"kind", "coll"}})->value, 7.0);
  EXPECT_EQ(Find(f, "collscope_records_dropped_total", {{"kind", "p2p"}})->value, 1.0);
  EXPECT_EQ(Find(f, "collscope_prometheus_records_excluded_total", {{"reason", "timing_source"}})->value, 1.0);
  const PromSample* inflight = Find(f, "collscope_inflight_operations", {{"comm_name", "dp"}});
  ASSERT_NE(inflight, nullptr);
  EXPECT_EQ(inflight->value, 2.0);  // two "dp" communicators merged
  EXPECT_NEAR(Find(f, "collscope_inflight_oldest_age_seconds", {{"comm_name", "dp"}})->value, 2.5, 1e-9);
  EXPECT_EQ(Find(f, "collscope_inflight_oldest_age_seconds", {{"comm_name", "pp"}})->value, 0.0);
  EXPECT_NEAR(f.Named("collscope_prometheus_window_timestamp_seconds")[0]->value, 1800000000.123, 1e-6);

  // Inspector's names carry no HELP/TYPE (as Inspector); every collscope series does.
  for (const PromSample& s : f.samples) {
    if (s.name.rfind("nccl_", 0) == 0) {
      EXPECT_EQ(f.types.count(s.name), 0u) << s.name;
      EXPECT_EQ(f.helps.count(s.name), 0u) << s.name;
    } else {
      EXPECT_EQ(s.name.rfind("collscope_", 0), 0u) << s.name;
      ASSERT_EQ(f.types.count(s.name), 1u) << s.name;
      EXPECT_EQ(f.helps.count(s.name), 1u) << s.name;
      const bool total = s.name.size() > 6 && s.name.compare(s.name.size() - 6, 6, "_total") == 0;
      EXPECT_EQ(f.types.at(s.name), total ? "counter" : "gauge") << s.name;
    }
  }
}

TEST(CapturePromTextfile, WindowsReplaceAndIdleWindowsKeepTheLastBuckets) {
  PromTextfile p(Labels(), 512, true, false);
  const uint32_t g = p.CommGroup({1, "tp", 0, 4, 1});
  p.Add(g, Rec("ReduceScatter", 1 << 20, 100));
  const PromFile a = Parse(p.Render({{"tp", 0, 0}}, 1000000000000ull));
  ASSERT_EQ(a.Named("nccl_collective_exec_time_microseconds").size(), 1u);
  EXPECT_TRUE(a.Named("nccl_collectives_total").empty());  // PROM_DUMP_STATS off

  // Idle window: the bucket series stay exactly as they were (Inspector leaves the file alone).
  const uint64_t now2 = 1000000000000ull + 30000000000ull;
  const PromFile b = Parse(p.Render({{"tp", 1, now2 - 4000000000ull}}, now2));
  ASSERT_EQ(b.Named("nccl_collective_exec_time_microseconds").size(), 1u);
  EXPECT_EQ(b.Named("nccl_collective_exec_time_microseconds")[0]->line,
            a.Named("nccl_collective_exec_time_microseconds")[0]->line);
  EXPECT_EQ(b.Named("collscope_prometheus_window_timestamp_seconds")[0]->value, 1000.0);
  EXPECT_EQ(b.Named("collscope_inflight_oldest_age_seconds")[0]->value, 4.0);

  // A new window with records replaces the old buckets: nothing of the first window remains.
  p.Add(g, Rec("AllGather", 1 << 20, 100));
  const PromFile c = Parse(p.Render({{"tp", 0, 0}}, now2 + 30000000000ull));
  ASSERT_EQ(c.Named("nccl_collective_exec_time_microseconds").size(), 1u);
  EXPECT_EQ(c.Named("nccl_collective_exec_time_microseconds")[0]->Label("collective"), "AllGather");
  EXPECT_EQ(c.Named("collscope_records_total")[0]->value, 2.0);  // totals keep counting
}

TEST(CapturePromTextfile, CardinalityIsBounded) {
  PromTextfile p(Labels(), 3, true, false);
  const uint32_t g = p.CommGroup({1, "w", 0, 8, 1});
  for (uint64_t kb = 1; kb <= 10; ++kb) p.Add(g, Rec("AllReduce", kb * 1024, 10));
  p.Add(g, Rec("AllReduce", 1024, 30));  // an existing bucket still aggregates
  std::vector<PromInflight> inflight;
  for (int i = 0; i < 10; ++i) inflight.push_back({"c" + std::to_string(i), 1, 1});
  const PromFile f = Parse(p.Render(inflight, 2000000000ull));
  EXPECT_EQ(f.Named("nccl_bus_bandwidth_gbs").size(), 3u);
  EXPECT_EQ(Find(f, "nccl_collective_exec_time_microseconds", {{"message_size", "1-2KB"}})->value, 20.0);
  EXPECT_EQ(Find(f, "collscope_prometheus_records_excluded_total", {{"reason", "bucket_limit"}})->value, 7.0);
  EXPECT_EQ(f.Named("collscope_inflight_operations").size(), 3u);
}

TEST(CapturePromTextfile, HostileCommunicatorNamesStayValid) {
  PromTextfile p(Labels(), 16, false, false);
  const uint32_t g = p.CommGroup({1, "a\"b\\c\nd", 0, 2, 1});
  p.Add(g, Rec("Broadcast", 8192, 3, "", "", TimingSource::kCollectiveCpu));  // timing filter off
  const PromFile f = Parse(p.Render({{"a\"b\\c\nd", 0, 0}}, 1));
  ASSERT_EQ(f.Named("nccl_bus_bandwidth_gbs").size(), 1u);
  EXPECT_EQ(f.Named("nccl_bus_bandwidth_gbs")[0]->Label("comm_name"), "a\"b\\c\nd");
  EXPECT_EQ(f.Named("nccl_bus_bandwidth_gbs")[0]->Label("algo_proto"), "unknown_unknown");
}

}  // namespace
}  // namespace collscope::capture
