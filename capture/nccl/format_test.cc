// Unit tests of the plugin's pure parts: formulas, timing selection, JSON formatting, config,
// and the bounded ring. The end-to-end dlopen harness is plugin_test.cc.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "capture/nccl/bounded_ring.h"
#include "capture/nccl/config.h"
#include "capture/nccl/record_format.h"

namespace collscope::capture {
namespace {

TEST(CaptureFormat, FuncAndDatatypeNames) {
  EXPECT_EQ(ParseFunc("AllReduce"), Func::kAllReduce);
  EXPECT_EQ(ParseFunc("ReduceScatter"), Func::kReduceScatter);
  EXPECT_EQ(ParseFunc("Send"), Func::kSend);
  EXPECT_EQ(ParseFunc("AlltoAll"), Func::kAlltoAll);
  EXPECT_EQ(ParseFunc("Bogus"), Func::kInvalid);
  EXPECT_EQ(ParseFunc(nullptr), Func::kInvalid);
  EXPECT_EQ(FuncName(Func::kAllGather), "AllGather");
  EXPECT_EQ(FuncName(Func::kInvalid), "Invalid");
  EXPECT_EQ(DatatypeSize("ncclFloat32"), 4u);
  EXPECT_EQ(DatatypeSize("ncclBfloat16"), 2u);
  EXPECT_EQ(DatatypeSize("ncclUint64"), 8u);
  EXPECT_EQ(DatatypeSize("ncclFloat8e5m2"), 1u);
  EXPECT_EQ(DatatypeSize("ncclWeird"), 0u);
  EXPECT_EQ(DatatypeSize(nullptr), 0u);
}

TEST(CaptureFormat, BandwidthFormulas) {
  // 1 s execution makes algbw = traffic / 1e9.
  Bandwidth ar = ComputeBandwidth(Func::kAllReduce, false, 1000000000, 1000000, 8);
  EXPECT_DOUBLE_EQ(ar.algbw_gbs, 1.0);
  EXPECT_DOUBLE_EQ(ar.busbw_gbs, 2.0 * 7 / 8);
  Bandwidth ag = ComputeBandwidth(Func::kAllGather, false, 100000000, 1000000, 8);
  EXPECT_DOUBLE_EQ(ag.algbw_gbs, 0.8);  // per-rank size times n
  EXPECT_DOUBLE_EQ(ag.busbw_gbs, 0.8 * 7 / 8);
  Bandwidth rs = ComputeBandwidth(Func::kReduceScatter, false, 100000000, 500000, 4);
  EXPECT_DOUBLE_EQ(rs.algbw_gbs, 0.8);
  EXPECT_DOUBLE_EQ(rs.busbw_gbs, 0.8 * 3 / 4);
  Bandwidth bc = ComputeBandwidth(Func::kBroadcast, false, 2000000000, 1000000, 16);
  EXPECT_DOUBLE_EQ(bc.algbw_gbs, 2.0);
  EXPECT_DOUBLE_EQ(bc.busbw_gbs, 2.0);
  Bandwidth p2p = ComputeBandwidth(Func::kSend, true, 3000000000, 1000000, 2);
  EXPECT_DOUBLE_EQ(p2p.busbw_gbs, 3.0);
  EXPECT_EQ(ComputeBandwidth(Func::kAlltoAll, false, 1 << 20, 10, 8).busbw_gbs, 0.0);
  EXPECT_EQ(ComputeBandwidth(Func::kAllReduce, false, 1 << 20, 0, 8).algbw_gbs, 0.0);
  EXPECT_EQ(ComputeBandwidth(Func::kInvalid, false, 1 << 20, 10, 8).algbw_gbs, 0.0);
}

TEST(CaptureFormat, ExecTimePrefersGpuTimers) {
  std::vector<ChannelTiming> ch = {
      {0, 1000000, 1000000 + 25999, 5000, 9000},  // 25.999 us -> 25
      {1, 1000300, 1000300 + 30500, 5100, 9900},  // 30.5 us -> 30 (the max)
      {2, 1000100, 1000100 + 10000, 5200, 9500},
  };
  ExecTiming t = ComputeExecTiming(ch, 1000, 20000);
  EXPECT_EQ(t.source, TimingSource::kKernelGpu);
  EXPECT_EQ(t.exec_us, 30u);
  EXPECT_EQ(t.kernel_start_ns, 5000u);
  EXPECT_EQ(t.kernel_stop_ns, 9900u);
  EXPECT_DOUBLE_EQ(t.ch_start_spread_us, 0.3);
  EXPECT_DOUBLE_EQ(t.ch_stop_spread_us, (1030800.0 - 1010100.0) / 1000.0);
}

TEST(CaptureFormat, ExecTimeFallsBackToCpuThenCollective) {
  // GPU stop missing or not after start: channel CPU timestamps decide.
  std::vector<ChannelTiming> cpu = {{0, 5000, 0, 1000000, 1042000},
                                    {1, 9000, 8000, 1000000, 1017999}};
  ExecTiming t = ComputeExecTiming(cpu, 1, 2);
  EXPECT_EQ(t.source, TimingSource::kKernelCpu);
  EXPECT_EQ(t.exec_us, 42u);
  EXPECT_EQ(t.ch_stop_spread_us, 0.0);  // only one channel has a stop timer

  std::vector<ChannelTiming> none = {{0, 0, 0, 0, 0}};
  t = ComputeExecTiming(none, 1000000, 1077500);
  EXPECT_EQ(t.source, TimingSource::kCollectiveCpu);
  EXPECT_EQ(t.exec_us, 77u);
  t = ComputeExecTiming({}, 1000000, 1003000);
  EXPECT_EQ(t.source, TimingSource::kCollectiveCpu);
  EXPECT_EQ(t.exec_us, 3u);
  EXPECT_EQ(t.kernel_start_ns, 0u);
  EXPECT_EQ(TimingSourceName(TimingSource::kKernelGpu), "kernel_gpu");
  EXPECT_EQ(TimingSourceName(TimingSource::kKernelCpu), "kernel_cpu");
  EXPECT_EQ(TimingSourceName(TimingSource::kCollectiveCpu), "collective_cpu");
}

TEST(CaptureFormat, DoublesMatchPrintfLf) {
  std::vector<double> values = {0.0,   -0.0,   1.5,   1.0 / 3, 123456.7890125,   1e-7,
                                -1e-7, 2.5e15, -4.25, 1e20,    999999999.9999996};
  // Exact halves at the seventh decimal (k/128 times 10^6 ends in .5), which printf rounds to even.
  for (int k = -300; k <= 300; ++k) values.push_back(k / 128.0);
  // Bandwidths, delays and spreads of every magnitude: the integer path against printf.
  uint64_t seed = 12345;
  for (int i = 0; i < 200000; ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    const double unit = static_cast<double>(seed >> 11) / 9007199254740992.0;
    values.push_back((i % 2 ? -1 : 1) * unit * std::pow(10.0, i % 13 - 4));
  }
  for (double v : values) {
    std::string s;
    AppendDouble(v, &s);
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%lf", v);
    ASSERT_EQ(s, buf) << v;
  }
  std::string s;
  AppendDouble(std::nan(""), &s);
  EXPECT_EQ(s, "\"nan\"");
  s.clear();
  AppendDouble(HUGE_VAL, &s);
  EXPECT_EQ(s, "\"inf\"");
}

TEST(CaptureFormat, HexIdAndStrings) {
  std::string s;
  AppendHexId(0x7f8c496ae9f661ull, &s);
  EXPECT_EQ(s, "\"0x7f8c496ae9f661\"");
  s.clear();
  AppendHexId(0, &s);
  EXPECT_EQ(s, "\"0x0\"");
  s.clear();
  AppendJsonString("a\"b\\c\n\x01", &s);
  EXPECT_EQ(s, "\"a\\\"b\\\\c\\n\\u0001\"");
}

// A communicator named with bytes that are no UTF-8 (issue 10, D6): its records used to be
// rejected at ingest and its state file unreadable. Invalid bytes become the text \xHH; valid
// UTF-8 stays as it is.
TEST(CaptureFormat, NamesThatAreNoUtf8StayValidJson) {
  std::string s;
  AppendJsonString("dp\xff\xfe-\xc3\xa4-\xe2\x82", &s);
  EXPECT_EQ(s, "\"dp\\\\xff\\\\xfe-\xc3\xa4-\\\\xe2\\\\x82\"");
  s.clear();
  AppendJsonString("\xed\xa0\x80", &s);  // a UTF-16 surrogate written as UTF-8: not valid
  EXPECT_EQ(s, "\"\\\\xed\\\\xa0\\\\x80\"");
}

TEST(CaptureFormat, PackedNames) {
  char buf[16];
  EXPECT_EQ(UnpackName(PackName("RING"), buf), "RING");
  EXPECT_EQ(UnpackName(PackName("COLLNET_DIRECT"), buf), "COLLNET_DIRECT");
  EXPECT_EQ(UnpackName(PackName("ABCDEFGHIJKLMNOPQRS"), buf), "ABCDEFGHIJKLMNO");
  EXPECT_EQ(UnpackName(PackName(nullptr), buf), "unknown");
  EXPECT_EQ(UnpackName(PackName(""), buf), "unknown");
}

CommIdentity TestComm() {
  CommIdentity c;
  c.comm_id = 0xabc123;
  c.comm_name = "tp";
  c.rank = 3;
  c.nranks = 8;
  c.nnodes = 2;
  return c;
}

ProcessIdentity TestProc() {
  ProcessIdentity p;
  p.hostname = "node-1";
  p.pid = 4242;
  p.global_rank = 11;
  p.local_rank = 3;
  p.gpu = 3;
  p.git_rev = "collscope-0.1.0";
  return p;
}

TEST(CaptureFormat, CollRecordExactLine) {
  CompletedRecord r;
  r.func = Func::kAllReduce;
  r.source = TimingSource::kKernelGpu;
  r.n_channels = 2;
  r.sn = 17;
  r.msg_bytes = 1000000000;
  r.exec_us = 1000000;
  r.start_ns = 1700000000000001000ull;
  r.enqueue_ns = 1700000000000005000ull;
  r.kernel_start_ns = 1700000000000007500ull;
  r.kernel_stop_ns = 1700000001000009000ull;
  r.ch_start_spread_us = 0.25;
  r.ch_stop_spread_us = 1.5;
  r.algo = PackName("RING");
  r.proto = PackName("SIMPLE");
  std::string out;
  FormatRecord(TestComm(), TestProc(), r, {}, false, 1700000002000000ull, &out);
  EXPECT_EQ(
      out,
      "{\"header\":{\"id\":\"0xabc123\",\"comm_name\":\"tp\",\"rank\":3,\"n_ranks\":8,"
      "\"nnodes\":2},\"metadata\":{\"inspector_output_format_version\":\"v4.0\","
      "\"git_rev\":\"collscope-0.1.0\",\"rec_mechanism\":\"nccl_profiler_interface\","
      "\"dump_timestamp_us\":1700000002000000,\"hostname\":\"node-1\",\"pid\":4242},"
      "\"coll_perf\":{\"coll\":\"AllReduce\",\"coll_sn\":17,\"coll_msg_size_bytes\":1000000000,"
      "\"coll_exec_time_us\":1000000,\"coll_timing_source\":\"kernel_gpu\","
      "\"coll_algobw_gbs\":1.000000,\"coll_busbw_gbs\":1.750000},"
      "\"collscope\":{\"v\":1,\"global_rank\":11,\"local_rank\":3,\"gpu\":3,\"algo\":\"RING\","
      "\"proto\":\"SIMPLE\",\"n_channels\":2,\"start_ts_us\":1700000000000001,"
      "\"enqueue_ts_us\":1700000000000005,\"kernel_start_ts_us\":1700000000000007,"
      "\"kernel_stop_ts_us\":1700000001000009,\"queue_delay_us\":2.500000,"
      "\"ch_start_spread_us\":0.250000,\"ch_stop_spread_us\":1.500000}}\n");
}

TEST(CaptureFormat, P2pRecordAndVerboseTrace) {
  CompletedRecord r;
  r.is_p2p = true;
  r.func = Func::kRecv;
  r.source = TimingSource::kKernelCpu;
  r.n_channels = 1;
  r.peer = 5;
  r.sn = 2;
  r.msg_bytes = 4096;
  r.exec_us = 4;
  r.start_ns = 10000;
  r.enqueue_ns = 12000;
  r.start_sn = 1;
  r.stop_sn = 2;
  std::vector<ChannelTrace> tr = {{0, 3, 5, 4, 13000, 17000, 16500}};
  std::string out;
  FormatRecord(TestComm(), TestProc(), r, tr, true, 99, &out);
  const std::string perf =
      "\"p2p_perf\":{\"p2p\":\"Recv\",\"p2p_sn\":2,\"p2p_peer\":5,\"p2p_msg_size_bytes\":4096,"
      "\"p2p_exec_time_us\":4,\"p2p_timing_source\":\"kernel_cpu\","
      "\"p2p_algobw_gbs\":1.024000,\"p2p_busbw_gbs\":1.024000,"
      "\"event_trace_sn\":{\"p2p_start_sn\":1,\"p2p_stop_sn\":2,\"kernel_events\":[{"
      "\"channel_id\":0,\"kernel_start_sn\":3,\"kernel_stop_sn\":5,\"kernel_record_sn\":4}]},"
      "\"event_trace_ts\":{\"p2p_start_ts\":10,\"p2p_stop_ts\":12,\"kernel_events\":[{"
      "\"channel_id\":0,\"kernel_start_ts\":13,\"kernel_stop_ts\":17,\"kernel_record_ts\":16}]}},"
      "\"collscope\":{\"v\":1,\"global_rank\":11,\"local_rank\":3,\"gpu\":3,\"algo\":\"unknown\","
      "\"proto\":\"unknown\",\"n_channels\":1,\"start_ts_us\":10,\"enqueue_ts_us\":12,"
      "\"kernel_start_ts_us\":0,\"kernel_stop_ts_us\":0,\"queue_delay_us\":0.000000,"
      "\"ch_start_spread_us\":0.000000,\"ch_stop_spread_us\":0.000000}}\n";
  ASSERT_NE(out.find(perf), std::string::npos) << out;
}

// The longest record the writer can meet (a record is built in a fixed stack buffer): every
// channel traced, every number at its widest, names that all need escapes, the step annotated.
// Under ASan an overflow of the buffer fails here.
TEST(CaptureFormat, TheWidestRecordFitsItsBuffer) {
  CompletedRecord r;
  r.func = Func::kAllGather;
  r.source = TimingSource::kCollectiveCpu;
  r.n_channels = UINT8_MAX;
  r.peer = INT32_MIN;
  r.sn = r.msg_bytes = r.user_tag = UINT64_MAX;
  r.start_sn = r.stop_sn = UINT32_MAX;
  r.exec_us = 1;
  r.start_ns = r.enqueue_ns = r.kernel_stop_ns = UINT64_MAX;
  r.kernel_start_ns = 1;
  r.ch_start_spread_us = r.ch_stop_spread_us = -1.7976931348623157e308;
  r.algo = r.proto = r.phase = PackName("\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"");
  r.step = INT64_MAX;
  r.micro_batch = INT32_MIN;
  std::vector<ChannelTrace> tr(
      kMaxChannels, {255, UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX});
  r.n_traces = kMaxChannels;
  std::string out;
  FormatRecord(TestComm(), TestProc(), r, tr, true, UINT64_MAX, &out);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_NE(
      out.find("\"ch_stop_spread_us\":-"
               "17976931348623157081452742373170435679807056752584499659891747680315726078002853876"
               "05895586327668781715404589535143824642343213268894641827684675467035375169860499105"
               "76551282076245490090389328944075868508455133942304583236903222948165808559332123348"
               "274797826204144723168738177180919299881250404026184124858368.000000"),
      std::string::npos);
  EXPECT_NE(out.find("\"kernel_record_ts\":18446744073709551"), std::string::npos);
  EXPECT_EQ(std::count(out.begin(), out.end(), '{'), std::count(out.begin(), out.end(), '}'));
}

TEST(CaptureFormat, DumpStatsLine) {
  DumpStats s{10, 3, 1, 0, 0, 0};
  std::string out;
  FormatDumpStats(TestComm(), TestProc(), s, 5, &out);
  EXPECT_NE(out.find("\"inspector_output_format_version\":\"v4.1\""), std::string::npos);
  EXPECT_NE(out.find(",\"dump_stats\":{\"coll_records\":10,\"coll_dropped_total\":3,"
                     "\"coll_dropped_since_last_dump\":1,\"p2p_records\":0,"
                     "\"p2p_dropped_total\":0,\"p2p_dropped_since_last_dump\":0}}\n"),
            std::string::npos)
      << out;
}

std::map<std::string, std::string>* g_env = nullptr;
const char* FakeEnv(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

TEST(CaptureConfig, DefaultsAndOverrides) {
  std::map<std::string, std::string> env;
  g_env = &env;
  Config c = LoadConfig(&FakeEnv);
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.dump_dir, "nccl-inspector-unknown-jobid");
  EXPECT_EQ(c.dump_interval_us, 1000000);
  EXPECT_EQ(c.min_size_bytes, 0u);
  EXPECT_TRUE(c.enable_p2p);
  EXPECT_EQ(c.coll_ring_size, 4096u);
  EXPECT_EQ(c.p2p_ring_size, 4096u);
  EXPECT_EQ(c.inflight_pool_size, 512u);
  EXPECT_EQ(c.state_interval_ms, 1000);
  EXPECT_FALSE(c.proxy_events);
  EXPECT_EQ(c.sample_every, 1u);
  EXPECT_TRUE(c.warnings.empty());

  env = {{"SLURM_JOBID", "12345"},
         {"NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS", "0"},
         {"NCCL_INSPECTOR_DUMP_VERBOSE", "1"},
         {"NCCL_INSPECTOR_ENABLE_P2P", "0"},
         {"NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", "8192"},
         {"NCCL_INSPECTOR_DUMP_COLL_RING_SIZE", "1000"},
         {"COLLSCOPE_SAMPLE_EVERY", "10"},
         {"COLLSCOPE_PROXY_EVENTS", "1"},
         {"COLLSCOPE_DUMP_STATS", "drops"},
         {"COLLSCOPE_ENABLE", "0"}};
  c = LoadConfig(&FakeEnv);
  EXPECT_FALSE(c.enable);
  EXPECT_EQ(c.dump_dir, "nccl-inspector-12345");
  EXPECT_EQ(c.dump_interval_us, 0);
  EXPECT_TRUE(c.verbose);
  EXPECT_FALSE(c.enable_p2p);
  EXPECT_EQ(c.min_size_bytes, 8192u);
  EXPECT_EQ(c.coll_ring_size, 1024u);
  EXPECT_EQ(c.p2p_ring_size, 1024u);  // verbose default
  EXPECT_EQ(c.sample_every, 10u);
  EXPECT_TRUE(c.proxy_events);
  EXPECT_EQ(c.dump_stats, DumpStatsMode::kDrops);

  env = {{"NCCL_INSPECTOR_DUMP_DIR", "/x/y"},
         {"COLLSCOPE_SAMPLE_EVERY", "zero"},
         {"NCCL_INSPECTOR_DUMP_VERBOSE", "7"},
         {"COLLSCOPE_DUMP_STATS", "sometimes"}};
  c = LoadConfig(&FakeEnv);
  EXPECT_EQ(c.dump_dir, "/x/y");
  EXPECT_EQ(c.sample_every, 1u);
  EXPECT_FALSE(c.verbose);
  EXPECT_EQ(c.warnings.size(), 3u);
  g_env = nullptr;
}

TEST(CaptureConfig, RoundUpPow2) {
  EXPECT_EQ(RoundUpPow2(1, 2, 1024), 2u);
  EXPECT_EQ(RoundUpPow2(3, 2, 1024), 4u);
  EXPECT_EQ(RoundUpPow2(1024, 2, 1024), 1024u);
  EXPECT_EQ(RoundUpPow2(5000, 2, 1024), 1024u);
}

TEST(CaptureRing, FullRingRefusesThenDrainsInOrder) {
  BoundedRing<int> ring(4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.TryPush([&](int& v, uint32_t) { v = i; }));
  EXPECT_FALSE(ring.TryPush([](int& v, uint32_t) { v = 99; }));
  for (int i = 0; i < 4; ++i) {
    int got = -1;
    EXPECT_TRUE(ring.TryPop([&](const int& v, uint32_t) { got = v; }));
    EXPECT_EQ(got, i);
  }
  EXPECT_FALSE(ring.TryPop([](const int&, uint32_t) {}));
  EXPECT_TRUE(ring.TryPush([](int& v, uint32_t) { v = 5; }));
}

TEST(CaptureRing, ManyProducersOneConsumer) {
  BoundedRing<uint64_t> ring(1024);
  constexpr int kThreads = 4, kPer = 20000;
  std::atomic<int> dropped{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) {
        const uint64_t v = (uint64_t(t) << 32) | uint64_t(i);
        if (!ring.TryPush([&](uint64_t& cell, uint32_t) { cell = v; })) dropped.fetch_add(1);
      }
    });
  }
  std::vector<int> last(kThreads, -1);
  int popped = 0;
  std::thread consumer([&] {
    for (;;) {
      const bool finished = done.load();
      bool any = false;
      while (ring.TryPop([&](const uint64_t& v, uint32_t) {
        const int t = int(v >> 32), i = int(v & 0xffffffff);
        EXPECT_GT(i, last[t]);  // per-producer order is preserved
        last[t] = i;
        ++popped;
      })) {
        any = true;
      }
      if (finished && !any) break;
    }
  });
  for (auto& p : producers) p.join();
  done.store(true);
  consumer.join();
  EXPECT_EQ(popped + dropped.load(), kThreads * kPer);
}

}  // namespace
}  // namespace collscope::capture
