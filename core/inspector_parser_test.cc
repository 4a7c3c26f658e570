#include "core/inspector_parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "core/bandwidth.h"
#include "core/taxonomy.h"

namespace collscope {
namespace {

const char* kMeta40 =
    R"("metadata":{"inspector_output_format_version":"v4.0","git_rev":"9019a1912-dirty",)"
    R"("rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1760000000123456,)"
    R"("hostname":"node-1.example","pid":4242})";

struct Parsed {
  bool ok;
  ParsedLine line;
  std::string reason;
};

Parsed Parse(const std::string& text) {
  static InspectorLineParser parser;
  std::string buf = text + std::string(simdjson::SIMDJSON_PADDING, '\0');
  Parsed p;
  p.ok = parser.Parse(buf.data(), text.size(), buf.size(), &p.line, &p.reason);
  return p;
}

std::string Line(const std::string& header, const std::string& meta, const std::string& body) {
  return "{\"header\":" + header + "," + meta + "," + body + "}";
}
const std::string kHeader = R"({"id":"0x7f8c496ae9f661","rank":3,"n_ranks":16,"nnodes":2})";

TEST(InspectorParser, V40CollPerf) {
  Parsed p = Parse(Line(kHeader, kMeta40,
                        R"("coll_perf":{"coll":"AllReduce","coll_sn":8995,)"
                        R"("coll_msg_size_bytes":2360832,"coll_exec_time_us":5663,)"
                        R"("coll_timing_source":"kernel_gpu","coll_algobw_gbs":0.416887,)"
                        R"("coll_busbw_gbs":0.781663})"));
  ASSERT_TRUE(p.ok) << p.reason;
  const ParsedLine& l = p.line;
  EXPECT_EQ(l.kind, ParsedLine::Kind::kRecord);
  EXPECT_EQ(l.comm_hash, 0x7f8c496ae9f661ull);
  EXPECT_EQ(l.comm_hash_text, "0x7f8c496ae9f661");
  EXPECT_FALSE(l.has_comm_name);
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.n_ranks, 16);
  EXPECT_EQ(l.nnodes, 2);
  EXPECT_EQ(l.format_version, "v4.0");
  EXPECT_EQ(l.git_rev, "9019a1912-dirty");
  EXPECT_EQ(l.hostname, "node-1.example");
  EXPECT_EQ(l.pid, 4242u);
  EXPECT_EQ(l.dump_ts_us, 1760000000123456u);
  EXPECT_EQ(l.record_kind, RecordKind::kColl);
  EXPECT_EQ(l.op, EnumCode("coll_op", "AllReduce"));
  EXPECT_EQ(l.sn, 8995u);
  EXPECT_EQ(l.msg_size_bytes, 2360832u);
  EXPECT_EQ(l.exec_time_us, 5663u);
  EXPECT_EQ(l.timing_source, EnumCode("timing_source", "kernel_gpu"));
  EXPECT_DOUBLE_EQ(l.algbw_gbs, 0.416887);
  EXPECT_DOUBLE_EQ(l.busbw_gbs, 0.781663);
  EXPECT_EQ(l.algo, kNullEnum);
  EXPECT_EQ(l.peer, kNullI32);
  EXPECT_TRUE(l.kernel_events.empty());
}

TEST(InspectorParser, VerboseEventTraces) {
  Parsed p = Parse(Line(
      kHeader, kMeta40,
      R"("coll_perf":{"coll":"AllGather","coll_sn":7,"coll_msg_size_bytes":4096,)"
      R"("coll_exec_time_us":12,"coll_timing_source":"kernel_cpu","coll_algobw_gbs":5.461333,)"
      R"("coll_busbw_gbs":5.12,"event_trace_sn":{"coll_start_sn":1,"coll_stop_sn":6,)"
      R"("kernel_events":[{"channel_id":0,"kernel_start_sn":2,"kernel_stop_sn":4,"kernel_record_sn":3},)"
      R"({"channel_id":1,"kernel_start_sn":5,"kernel_stop_sn":7,"kernel_record_sn":6}]},)"
      R"("event_trace_ts":{"coll_start_ts":1760000000000100,"coll_stop_ts":1760000000000150,)"
      R"("kernel_events":[{"channel_id":0,"kernel_start_ts":1760000000000110,)"
      R"("kernel_stop_ts":1760000000000122,"kernel_record_ts":1760000000000121},)"
      R"({"channel_id":1,"kernel_start_ts":1760000000000111,"kernel_stop_ts":1760000000000120,)"
      R"("kernel_record_ts":1760000000000119}]}})"));
  ASSERT_TRUE(p.ok) << p.reason;
  const ParsedLine& l = p.line;
  EXPECT_EQ(l.timing_source, EnumCode("timing_source", "kernel_cpu"));
  EXPECT_EQ(l.start_ts_us, 1760000000000100u);
  EXPECT_EQ(l.stop_ts_us, 1760000000000150u);
  ASSERT_EQ(l.kernel_events.size(), 2u);
  EXPECT_EQ(l.n_channels, 2);
  EXPECT_EQ(l.kernel_events[1].channel_id, 1);
  EXPECT_EQ(l.kernel_events[1].start_sn, 5u);
  EXPECT_EQ(l.kernel_events[1].record_sn, 6u);
  EXPECT_EQ(l.kernel_events[0].stop_ts_us, 1760000000000122u);
  EXPECT_EQ(l.kernel_events[1].record_ts_us, 1760000000000119u);
}

TEST(InspectorParser, P2pPerfWithCommName) {
  Parsed p = Parse(Line(R"({"id":"0x1f","comm_name":"pp_stage","rank":0,"n_ranks":2,"nnodes":2})",
                        kMeta40,
                        R"("p2p_perf":{"p2p":"Send","p2p_sn":3,"p2p_peer":1,)"
                        R"("p2p_msg_size_bytes":1048576,"p2p_exec_time_us":100,)"
                        R"("p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":10.48576,)"
                        R"("p2p_busbw_gbs":10.48576})"));
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.line.record_kind, RecordKind::kP2p);
  EXPECT_TRUE(p.line.has_comm_name);
  EXPECT_EQ(p.line.comm_name, "pp_stage");
  EXPECT_EQ(p.line.op, EnumCode("coll_op", "Send"));
  EXPECT_EQ(p.line.peer, 1);
  EXPECT_EQ(p.line.sn, 3u);
  EXPECT_EQ(p.line.msg_size_bytes, 1048576u);
}

TEST(InspectorParser, V41DumpStats) {
  std::string meta = kMeta40;
  meta.replace(meta.find("v4.0"), 4, "v4.1");
  Parsed p = Parse(Line(kHeader, meta,
                        R"("dump_stats":{"coll_records":10,"coll_dropped_total":5,)"
                        R"("coll_dropped_since_last_dump":2,"p2p_records":1,)"
                        R"("p2p_dropped_total":0,"p2p_dropped_since_last_dump":0})"));
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.line.kind, ParsedLine::Kind::kDumpStats);
  EXPECT_EQ(p.line.coll_records, 10u);
  EXPECT_EQ(p.line.coll_dropped_total, 5u);
  EXPECT_EQ(p.line.coll_dropped_since_last_dump, 2u);
  EXPECT_EQ(p.line.p2p_records, 1u);
}

TEST(InspectorParser, V42AlgoProto) {
  std::string meta = kMeta40;
  meta.replace(meta.find("v4.0"), 4, "v4.2");
  Parsed p = Parse(Line(kHeader, meta,
                        R"("coll_perf":{"coll":"AllReduce","coll_algo":"RING","coll_proto":"LL128",)"
                        R"("coll_sn":1,"coll_msg_size_bytes":8,"coll_exec_time_us":5,)"
                        R"("coll_timing_source":"kernel_gpu","coll_algobw_gbs":0.0016,)"
                        R"("coll_busbw_gbs":0.003})"));
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.line.algo, EnumCode("nccl_algo", "RING"));
  EXPECT_EQ(p.line.proto, EnumCode("nccl_proto", "LL128"));
}

TEST(InspectorParser, NanDoublesAndFloatTimes) {
  Parsed p = Parse(Line(kHeader, kMeta40,
                        R"("coll_perf":{"coll":"Broadcast","coll_sn":1,"coll_msg_size_bytes":8,)"
                        R"("coll_exec_time_us":5663.0,"coll_timing_source":"collective_cpu",)"
                        R"("coll_algobw_gbs":"nan","coll_busbw_gbs":"nan"})"));
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.line.exec_time_us, 5663u);
  EXPECT_TRUE(std::isnan(p.line.algbw_gbs));
  EXPECT_TRUE(std::isnan(p.line.busbw_gbs));
}

TEST(InspectorParser, CollscopeExtras) {
  Parsed p = Parse(Line(kHeader, kMeta40,
                        R"("coll_perf":{"coll":"AllReduce","coll_sn":1,"coll_msg_size_bytes":8,)"
                        R"("coll_exec_time_us":5,"coll_timing_source":"kernel_gpu",)"
                        R"("coll_algobw_gbs":0.0016,"coll_busbw_gbs":0.003},)"
                        R"("collscope":{"v":1,"global_rank":12,"local_rank":4,"gpu":4,)"
                        R"("algo":"TREE","proto":"SIMPLE","n_channels":8,"start_ts_us":100,)"
                        R"("enqueue_ts_us":110,"kernel_start_ts_us":120,"kernel_stop_ts_us":0,)"
                        R"("queue_delay_us":10.5,"ch_start_spread_us":1.25,"ch_stop_spread_us":2.5})"));
  ASSERT_TRUE(p.ok) << p.reason;
  const ParsedLine& l = p.line;
  EXPECT_EQ(l.global_rank, 12);
  EXPECT_EQ(l.local_rank, 4);
  EXPECT_EQ(l.gpu, 4);
  EXPECT_EQ(l.algo, EnumCode("nccl_algo", "TREE"));
  EXPECT_EQ(l.proto, EnumCode("nccl_proto", "SIMPLE"));
  EXPECT_EQ(l.n_channels, 8);
  EXPECT_EQ(l.start_ts_us, 100u);
  EXPECT_EQ(l.enqueue_ts_us, 110u);
  EXPECT_EQ(l.kernel_start_ts_us, 120u);
  EXPECT_EQ(l.kernel_stop_ts_us, kNullU64) << "0 means not observed";
  EXPECT_DOUBLE_EQ(l.queue_delay_us, 10.5);
  EXPECT_DOUBLE_EQ(l.ch_stop_spread_us, 2.5);
}

TEST(InspectorParser, StateDoesNotLeakBetweenLines) {
  Parsed first = Parse(Line(R"({"id":"0x1f","comm_name":"x","rank":0,"n_ranks":2,"nnodes":2})",
                            kMeta40,
                            R"("p2p_perf":{"p2p":"Recv","p2p_sn":3,"p2p_peer":1,)"
                            R"("p2p_msg_size_bytes":1,"p2p_exec_time_us":1,)"
                            R"("p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":0,)"
                            R"("p2p_busbw_gbs":0})"));
  ASSERT_TRUE(first.ok);
  InspectorLineParser parser;
  ParsedLine line;
  std::string reason;
  std::string a = Line(R"({"id":"0x1f","comm_name":"x","rank":0,"n_ranks":2,"nnodes":2})", kMeta40,
                       R"("p2p_perf":{"p2p":"Recv","p2p_sn":3,"p2p_peer":1,"p2p_msg_size_bytes":1,)"
                       R"("p2p_exec_time_us":1,"p2p_timing_source":"kernel_gpu",)"
                       R"("p2p_algobw_gbs":0,"p2p_busbw_gbs":0})") +
                  std::string(64, '\0');
  ASSERT_TRUE(parser.Parse(a.data(), a.size() - 64, a.size(), &line, &reason));
  std::string b = Line(kHeader, kMeta40,
                       R"("coll_perf":{"coll":"AllReduce","coll_sn":1,"coll_msg_size_bytes":8,)"
                       R"("coll_exec_time_us":5,"coll_timing_source":"kernel_gpu",)"
                       R"("coll_algobw_gbs":0.0016,"coll_busbw_gbs":0.003})") +
                  std::string(64, '\0');
  ASSERT_TRUE(parser.Parse(b.data(), b.size() - 64, b.size(), &line, &reason));
  EXPECT_FALSE(line.has_comm_name);
  EXPECT_EQ(line.peer, kNullI32);
  EXPECT_EQ(line.record_kind, RecordKind::kColl);
}

struct BadCase {
  std::string name, line, reason_contains;
};

TEST(InspectorParser, RejectsBadLinesWithReasons) {
  const std::string perf =
      R"("coll_perf":{"coll":"AllReduce","coll_sn":1,"coll_msg_size_bytes":8,)"
      R"("coll_exec_time_us":5,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":1,)"
      R"("coll_busbw_gbs":1})";
  std::string v5 = kMeta40;
  v5.replace(v5.find("v4.0"), 4, "v5.0");
  std::string no_pid = kMeta40;
  no_pid.replace(no_pid.find(",\"pid\":4242"), 11, "");
  std::string negative = perf;
  negative.replace(negative.find("\"coll_exec_time_us\":5"), 21, "\"coll_exec_time_us\":-5");
  std::string unknown_op = perf;
  unknown_op.replace(unknown_op.find("AllReduce"), 9, "Frobnicate");
  std::string neg_bw = perf;
  neg_bw.replace(neg_bw.find("\"coll_busbw_gbs\":1"), 18, "\"coll_busbw_gbs\":-1");
  const BadCase cases[] = {
      {"not json", "this is not json", "not"},
      {"truncated", Line(kHeader, kMeta40, perf).substr(0, 80), "JSON"},
      {"array", "[1,2,3]", "not a JSON object"},
      {"unknown version", Line(kHeader, v5, perf), "unknown format version \"v5.0\""},
      {"missing pid", Line(kHeader, no_pid, perf), "metadata.pid: missing"},
      {"negative time", Line(kHeader, kMeta40, negative), "coll_exec_time_us: impossible negative"},
      {"unknown op", Line(kHeader, kMeta40, unknown_op), "unknown operation \"Frobnicate\""},
      {"negative bw", Line(kHeader, kMeta40, neg_bw), "impossible negative bandwidth"},
      {"rank out of range",
       Line(R"({"id":"0x1","rank":16,"n_ranks":16,"nnodes":2})", kMeta40, perf), "header.rank"},
      {"nnodes > n_ranks", Line(R"({"id":"0x1","rank":0,"n_ranks":2,"nnodes":4})", kMeta40, perf),
       "header.nnodes"},
      {"bad hash", Line(R"({"id":"zz","rank":0,"n_ranks":2,"nnodes":1})", kMeta40, perf),
       "not a hex communicator id"},
      {"no body", Line(kHeader, kMeta40, "\"other\":{}"), "no coll_perf, p2p_perf or dump_stats"},
      {"string count", Line(kHeader, kMeta40, R"("coll_perf":{"coll":"AllReduce","coll_sn":"x"})"),
       "coll_sn"},
  };
  for (const BadCase& c : cases) {
    Parsed p = Parse(c.line);
    EXPECT_FALSE(p.ok) << c.name;
    EXPECT_NE(p.reason.find(c.reason_contains), std::string::npos)
        << c.name << ": reason was \"" << p.reason << "\"";
  }
}

TEST(InspectorParser, CollTypeDerivation) {
  EXPECT_EQ(DeriveCollType(1, 1), CollType::kSingleRank);
  EXPECT_EQ(DeriveCollType(8, 1), CollType::kNvlinkOnly);
  EXPECT_EQ(DeriveCollType(4, 4), CollType::kNicOnly);
  EXPECT_EQ(DeriveCollType(16, 2), CollType::kMixed);
  EXPECT_EQ(CollTypeName(CollType::kNicOnly), "nic-only");
}

}  // namespace
}  // namespace collscope

namespace collscope {
namespace {

// A parser fed one file's lines in order, as ingest feeds it: one ParsedLine reused throughout.
struct Stream {
  InspectorLineParser parser;
  ParsedLine line;
  Stream() { parser.StartFile(); }
  Parsed Next(const std::string& text) {
    std::string buf = text + std::string(simdjson::SIMDJSON_PADDING, '\0');
    Parsed p;
    p.ok = parser.Parse(buf.data(), text.size(), buf.size(), &line, &p.reason);
    p.line = line;
    // Views into `buf` die with it: keep the ones tests look at.
    host = std::string(p.line.hostname);
    git_rev = std::string(p.line.git_rev);
    comm_name = std::string(p.line.comm_name);
    return p;
  }
  std::string host, git_rev, comm_name;
};

std::string Marker(const std::string& version, const std::string& id, const std::string& name,
                   int rank, const std::string& host, int pid, int colls, int p2ps, int proxies) {
  return R"({"header":{"id":")" + id + R"(","comm_name":")" + name + R"(","rank":)" + std::to_string(rank) +
         R"(,"n_ranks":4,"nnodes":2},"metadata":{"inspector_output_format_version":")" + version +
         R"(","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1800000000500000,"hostname":")" +
         host + R"(","pid":)" + std::to_string(pid) + R"(},"dump_stats":{"coll_records":)" + std::to_string(colls) +
         R"(,"coll_dropped_total":0,"coll_dropped_since_last_dump":0,"p2p_records":)" + std::to_string(p2ps) +
         R"(,"p2p_dropped_total":0,"p2p_dropped_since_last_dump":0)" +
         (proxies >= 0 ? R"(,"proxy_records":)" + std::to_string(proxies) + R"(,"proxy_output_mode":"nested")" : std::string()) +
         "}}";
}
const std::string kBatchColl =
    R"({"coll_perf":{"coll":"AllReduce","coll_algo":"RING","coll_proto":"SIMPLE","coll_sn":3,"coll_msg_size_bytes":4194304,"coll_exec_time_us":120,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":34.952533,"coll_busbw_gbs":34.952533}})";
const std::string kBatchP2p =
    R"({"p2p_perf":{"p2p":"Send","p2p_sn":9,"p2p_peer":1,"p2p_msg_size_bytes":1048576,"p2p_exec_time_us":50,"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":20.97152,"p2p_busbw_gbs":20.97152}})";
const std::string kBatchProxy =
    R"({"proxy_trace":{"record_type":"proxy_op","record_sn":6,"parent_type":"coll","parent_sn":3,"proxy_op_sn":2,"rank":0,"channel_id":1,"peer":1,"direction":"recv","timing_source":"proxy_cpu","is_final":true,"n_steps":2}})";

TEST(InspectorParser, V44MarkerContextGoesToEveryLineOfItsBatch) {
  Stream s;
  Parsed m = s.Next(Marker("v4.4", "0x9b2", "dp", 2, "gpu-a", 77, 2, 1, 1));
  ASSERT_TRUE(m.ok) << m.reason;
  EXPECT_EQ(m.line.kind, ParsedLine::Kind::kDumpStats);
  EXPECT_EQ(m.line.proxy_records, 1u);
  for (int i = 0; i < 2; ++i) {
    Parsed c = s.Next(kBatchColl);
    ASSERT_TRUE(c.ok) << c.reason;
    EXPECT_EQ(c.line.kind, ParsedLine::Kind::kRecord);
    EXPECT_EQ(c.line.rank, 2);
    EXPECT_EQ(c.line.n_ranks, 4);
    EXPECT_EQ(c.line.comm_hash, 0x9b2u);
    EXPECT_EQ(s.comm_name, "dp");
    EXPECT_EQ(s.host, "gpu-a");
    EXPECT_EQ(c.line.pid, 77u);
    EXPECT_EQ(c.line.dump_ts_us, 1800000000500000u);
    EXPECT_EQ(c.line.algo, EnumCode("nccl_algo", "RING"));
  }
  Parsed p = s.Next(kBatchP2p);
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_EQ(p.line.record_kind, RecordKind::kP2p);
  EXPECT_EQ(p.line.rank, 2);
  EXPECT_EQ(p.line.peer, 1);
  Parsed x = s.Next(kBatchProxy);
  ASSERT_TRUE(x.ok) << x.reason;
  EXPECT_EQ(x.line.kind, ParsedLine::Kind::kProxy);
  EXPECT_EQ(s.parser.EndFile(), 0u);

  // The next comm's batch: its own rank and host, never the previous marker's.
  ASSERT_TRUE(s.Next(Marker("v4.4", "0x77", "tp", 0, "gpu-b", 78, 1, 0, -1)).ok);
  Parsed c = s.Next(kBatchColl);
  ASSERT_TRUE(c.ok) << c.reason;
  EXPECT_EQ(c.line.rank, 0);
  EXPECT_EQ(c.line.comm_hash, 0x77u);
  EXPECT_EQ(s.host, "gpu-b");
  // One more than announced is refused, not given the marker's context.
  Parsed extra = s.Next(kBatchColl);
  EXPECT_FALSE(extra.ok);
  EXPECT_NE(extra.reason.find("more coll_perf records than the marker announced"), std::string::npos) << extra.reason;
}

TEST(InspectorParser, BatchLinesWithoutTheirMarkerAreRefusedAndCutBatchesCounted) {
  Stream s;
  Parsed orphan = s.Next(kBatchColl);
  EXPECT_FALSE(orphan.ok);
  EXPECT_NE(orphan.reason.find("no marker line before it"), std::string::npos) << orphan.reason;

  // A v4.3 batch of 3 collectives cut after one: the next marker notices two missing lines.
  ASSERT_TRUE(s.Next(Marker("v4.3", "0x1", "a", 1, "h", 5, 3, 0, 0)).ok);
  ASSERT_TRUE(s.Next(kBatchColl).ok);
  Parsed next = s.Next(Marker("v4.3", "0x2", "b", 1, "h", 5, 2, 0, 0));
  ASSERT_TRUE(next.ok) << next.reason;
  EXPECT_EQ(next.line.batch_lines_missing, 2u);
  ASSERT_TRUE(s.Next(kBatchColl).ok);
  EXPECT_EQ(s.parser.EndFile(), 1u) << "the file ends one line into a batch of two";

  // A bad marker gives its batch no context: its lines are refused, not given the last one's.
  Stream t;
  ASSERT_TRUE(t.Next(Marker("v4.4", "0x1", "a", 1, "h", 5, 1, 0, 0)).ok);
  ASSERT_TRUE(t.Next(kBatchColl).ok);
  std::string bad = Marker("v4.4", "0x2", "b", 9, "h", 5, 1, 0, 0);  // rank 9 of 4
  EXPECT_FALSE(t.Next(bad).ok);
  EXPECT_FALSE(t.Next(kBatchColl).ok);
}

TEST(InspectorParser, NoValueCarriesIntoTheNextLine) {
  Stream s;
  std::string with_rev = Line(kHeader, kMeta40,
                              R"("coll_perf":{"coll":"AllReduce","coll_sn":1,"coll_msg_size_bytes":8,)"
                              R"("coll_exec_time_us":5,"coll_timing_source":"kernel_gpu",)"
                              R"("coll_algobw_gbs":0.0016,"coll_busbw_gbs":0.003})");
  ASSERT_TRUE(s.Next(with_rev).ok);
  EXPECT_EQ(s.git_rev, "9019a1912-dirty");
  std::string meta_without_rev =
      R"("metadata":{"inspector_output_format_version":"v4.1","dump_timestamp_us":1,"hostname":"h","pid":1})";
  Parsed stats = s.Next(Line(kHeader, meta_without_rev,
                             R"("dump_stats":{"coll_records":7,"coll_dropped_total":3})"));
  ASSERT_TRUE(stats.ok) << stats.reason;
  EXPECT_EQ(s.git_rev, "") << "git_rev of the previous line";
  EXPECT_EQ(stats.line.coll_dropped_total, 3u);
  Parsed stats2 = s.Next(Line(kHeader, meta_without_rev, R"("dump_stats":{"p2p_records":1})"));
  ASSERT_TRUE(stats2.ok) << stats2.reason;
  EXPECT_EQ(stats2.line.coll_records, 0u) << "a dump_stats counter of the previous line";
  EXPECT_EQ(stats2.line.coll_dropped_total, 0u);
  EXPECT_EQ(s.git_rev, "");
}

TEST(InspectorParser, ReadmeExampleWithoutTimingSourceIsStoredAsUnknown) {
  // NVIDIA's README "Output Example" leaves coll_timing_source out.
  Parsed p = Parse(Line(kHeader, kMeta40,
                        R"("coll_perf":{"coll":"AllReduce","coll_sn":8995,"coll_msg_size_bytes":2360832,)"
                        R"("coll_exec_time_us":5663,"coll_algobw_gbs":0.416887,"coll_busbw_gbs":0.781663})"));
  ASSERT_TRUE(p.ok) << p.reason;
  EXPECT_TRUE(p.line.timing_source_missing);
  EXPECT_EQ(p.line.timing_source, kNullEnum);
}

TEST(InspectorParser, TwoObjectsOnOneLineAreRefused) {
  std::string one = Line(kHeader, kMeta40,
                         R"("coll_perf":{"coll":"AllReduce","coll_sn":1,"coll_msg_size_bytes":8,)"
                         R"("coll_exec_time_us":5,"coll_timing_source":"kernel_gpu",)"
                         R"("coll_algobw_gbs":0.0016,"coll_busbw_gbs":0.003})");
  Parsed p = Parse(one + one);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.reason.find("more than one JSON value"), std::string::npos) << p.reason;
  EXPECT_TRUE(Parse(one + "  ").ok);
}

}  // namespace
}  // namespace collscope

namespace collscope {
namespace {

// The reference's self-made v4.4 batch (docs: inspector-formats-2.md §3.4), nested mode, with
// the marker's rank 1 (so that a rank taken from nowhere, 0, shows) and its elided keys written.
const std::string kV44Marker =
    R"({"header":{"id":"0x9b2","comm_name":"dp","rank":1,"n_ranks":2,"nnodes":2},"metadata":{"inspector_output_format_version":"v4.4","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1800000000500000,"hostname":"gpu-a","pid":77},"dump_stats":{"coll_records":1,"coll_dropped_total":0,"coll_dropped_since_last_dump":0,"p2p_records":0,"p2p_dropped_total":0,"p2p_dropped_since_last_dump":0,"proxy_records":2,"proxy_dropped_total":5,"proxy_dropped_since_last_dump":3,"proxy_ops_dropped_total":0,"proxy_ops_dropped_since_last_dump":0,"proxy_steps_overwritten_total":0,"proxy_steps_overwritten_since_last_dump":0,"proxy_output_mode":"nested","proxy_segment_step_capacity":8,"proxy_pxn_skipped_process_total":0,"proxy_steps_enabled":1}})";
const std::string kV44Start =
    R"({"proxy_trace":{"record_type":"proxy_op_start","record_sn":5,"parent_type":"coll","parent_sn":3,"proxy_op_sn":2,"channel_id":1,"peer":0,"direction":"recv","timing_source":"proxy_cpu","is_final":false,"n_steps":2,"chunk_size_bytes":524288,"event_trace_ts":{"proxy_op_start_ts":1800000000400000}}})";
const std::string kV44Final =
    R"({"proxy_trace":{"record_type":"proxy_op","record_sn":6,"parent_type":"coll","parent_sn":3,"proxy_op_sn":2,"rank":1,"channel_id":1,"peer":0,"direction":"recv","timing_source":"proxy_cpu","is_final":true,"n_steps":2,"chunk_size_bytes":524288,"n_steps_started":2,"n_steps_completed":2,"n_steps_dropped":0,"trans_size_bytes":1048576,"total_us":90,"op_bw_gbs":11.650844,"event_trace_sn":{"proxy_op_start_sn":1,"proxy_op_in_progress_sn":2,"proxy_op_stop_sn":9},"event_trace_ts":{"proxy_op_start_ts":1800000000400000,"proxy_op_in_progress_ts":1800000000400004,"proxy_op_stop_ts":1800000000400090},"steps":[)"
    R"({"proxy_step_sn":1,"step":0,"trans_size_bytes":524288,"total_us":50,"wire_us":30,"flush_us":5,"gpu_consume_us":10,"event_trace_ts":{"proxy_step_start_ts":1800000000400001,"recv_wait_ts":1800000000400006,"recv_flush_wait_ts":1800000000400036,"recv_gpu_wait_ts":1800000000400041,"proxy_step_stop_ts":1800000000400051}},)"
    R"({"proxy_step_sn":2,"step":1,"trans_size_bytes":524288,"total_us":38,"wire_us":31,"event_trace_ts":{"proxy_step_start_ts":1800000000400052,"recv_wait_ts":1800000000400053}}]}})";

TEST(InspectorParser, V44NestedProxyBatch) {
  Stream s;
  Parsed m = s.Next(kV44Marker);
  ASSERT_TRUE(m.ok) << m.reason;
  EXPECT_EQ(m.line.kind, ParsedLine::Kind::kDumpStats);
  EXPECT_EQ(m.line.proxy_records, 2u);
  EXPECT_TRUE(m.line.has_proxy_records);
  EXPECT_EQ(m.line.proxy_dropped_total, 5u);
  EXPECT_EQ(m.line.proxy_dropped_since_last_dump, 3u);
  ASSERT_TRUE(s.Next(kBatchColl).ok);

  Parsed start = s.Next(kV44Start);
  ASSERT_TRUE(start.ok) << start.reason;
  EXPECT_EQ(start.line.kind, ParsedLine::Kind::kProxy);
  const ProxyRecord& a = start.line.proxy;
  EXPECT_EQ(a.record_type, ProxyRecordType::kOpStart);
  EXPECT_EQ(a.rank, 1) << "a record without rank has its marker's";
  EXPECT_EQ(start.line.comm_hash, 0x9b2u);
  EXPECT_EQ(start.line.pid, 77u);
  EXPECT_EQ(a.record_sn, 5u);
  EXPECT_EQ(kProxyParentTypes[a.parent_type], "coll");
  EXPECT_EQ(a.parent_sn, 3u);
  EXPECT_EQ(a.proxy_op_sn, 2u);
  EXPECT_EQ(a.channel_id, 1);
  EXPECT_EQ(a.peer, 0);
  EXPECT_EQ(kProxyDirections[a.direction], "recv");
  EXPECT_EQ(a.n_steps, 2u);
  EXPECT_EQ(a.chunk_size_bytes, 524288u);
  EXPECT_EQ(a.start_ts_us, 1800000000400000u);
  EXPECT_EQ(a.stop_ts_us, kNullU64);
  EXPECT_EQ(a.n_steps_completed, kNullU64);
  EXPECT_TRUE(std::isnan(a.total_us));
  EXPECT_TRUE(start.line.proxy_steps.empty());

  Parsed fin = s.Next(kV44Final);
  ASSERT_TRUE(fin.ok) << fin.reason;
  const ProxyRecord& o = fin.line.proxy;
  EXPECT_EQ(o.record_type, ProxyRecordType::kOp);
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.n_steps_completed, 2u);
  EXPECT_EQ(o.n_steps_dropped, 0u);
  EXPECT_EQ(o.trans_size_bytes, 1048576u);
  EXPECT_EQ(o.total_us, 90.0);
  EXPECT_EQ(o.start_ts_us, 1800000000400000u);
  EXPECT_EQ(o.stop_ts_us, 1800000000400090u);
  ASSERT_EQ(fin.line.proxy_steps.size(), 2u);
  const ProxyStep& s0 = fin.line.proxy_steps[0];
  EXPECT_EQ(s0.proxy_step_sn, 1u);
  EXPECT_EQ(s0.step, 0);
  EXPECT_EQ(s0.trans_size_bytes, 524288u);
  EXPECT_EQ(s0.total_us, 50.0);
  EXPECT_EQ(s0.wire_us, 30.0);
  EXPECT_EQ(s0.flush_us, 5.0);
  EXPECT_EQ(s0.gpu_consume_us, 10.0);
  EXPECT_TRUE(std::isnan(s0.gpu_produce_us)) << "a send phase of a recv step";
  EXPECT_EQ(s0.stop_ts_us, 1800000000400051u);
  const ProxyStep& s1 = fin.line.proxy_steps[1];
  EXPECT_EQ(s1.step, 1);
  EXPECT_EQ(s1.wire_us, 31.0);
  EXPECT_TRUE(std::isnan(s1.flush_us));
  EXPECT_EQ(s1.stop_ts_us, kNullU64) << "a step whose stop never fired";
  EXPECT_EQ(s.parser.EndFile(), 0u);
}

TEST(InspectorParser, FlatProxyStepsV44AndV43) {
  // v4.4 flat mode: a step is its own record, with the common keys but rank.
  Stream s;
  ASSERT_TRUE(s.Next(Marker("v4.4", "0x9b2", "dp", 2, "gpu-a", 77, 0, 0, 1)).ok);
  Parsed f = s.Next(
      R"({"proxy_trace":{"record_type":"proxy_step","record_sn":7,"parent_type":"p2p","parent_sn":4,"proxy_op_sn":3,"channel_id":0,"peer":3,"direction":"send","timing_source":"proxy_cpu","proxy_step_sn":11,"step":2,"trans_size_bytes":65536,"total_us":20,"gpu_produce_us":2.5,"peer_credit_us":12,"wire_us":5,"event_trace_ts":{"proxy_step_start_ts":1800000000400100,"send_gpu_wait_ts":1800000000400101,"proxy_step_stop_ts":1800000000400120}}})");
  ASSERT_TRUE(f.ok) << f.reason;
  EXPECT_EQ(f.line.proxy.record_type, ProxyRecordType::kStep);
  EXPECT_EQ(f.line.proxy.rank, 2) << "the marker's";
  EXPECT_EQ(kProxyDirections[f.line.proxy.direction], "send");
  EXPECT_EQ(kProxyParentTypes[f.line.proxy.parent_type], "p2p");
  EXPECT_EQ(f.line.proxy.peer, 3);
  ASSERT_EQ(f.line.proxy_steps.size(), 1u);
  const ProxyStep& st = f.line.proxy_steps[0];
  EXPECT_EQ(st.proxy_step_sn, 11u);
  EXPECT_EQ(st.step, 2);
  EXPECT_EQ(st.trans_size_bytes, 65536u);
  EXPECT_EQ(st.total_us, 20.0);
  EXPECT_EQ(st.gpu_produce_us, 2.5) << "a float duration is taken as written";
  EXPECT_EQ(st.peer_credit_us, 12.0);
  EXPECT_EQ(st.wire_us, 5.0);
  EXPECT_TRUE(std::isnan(st.flush_us));
  EXPECT_EQ(st.stop_ts_us, 1800000000400120u);

  // v4.3: flat only, steps carry their rank, no durations and no total_us.
  Stream t;
  ASSERT_TRUE(t.Next(Marker("v4.3", "0x5", "tp", 2, "gpu-b", 78, 0, 0, 2)).ok);
  Parsed v43 = t.Next(
      R"({"proxy_trace":{"record_type":"proxy_step","record_sn":1,"parent_type":"coll","parent_sn":8,"proxy_op_sn":1,"rank":3,"channel_id":2,"peer":0,"direction":"recv","timing_source":"proxy_cpu","proxy_step_sn":1,"step":0,"trans_size_bytes":4096,"event_trace_ts":{"proxy_step_start_ts":1800000000400000,"proxy_step_stop_ts":1800000000400009}}})");
  ASSERT_TRUE(v43.ok) << v43.reason;
  EXPECT_EQ(v43.line.proxy.rank, 3) << "the record's own rank over the marker's";
  ASSERT_EQ(v43.line.proxy_steps.size(), 1u);
  EXPECT_TRUE(std::isnan(v43.line.proxy_steps[0].total_us));
  EXPECT_TRUE(std::isnan(v43.line.proxy_steps[0].wire_us));
  EXPECT_EQ(v43.line.proxy_steps[0].trans_size_bytes, 4096u);
  Parsed op43 = t.Next(
      R"({"proxy_trace":{"record_type":"proxy_op","record_sn":2,"parent_type":"coll","parent_sn":8,"proxy_op_sn":1,"rank":3,"channel_id":2,"peer":0,"direction":"recv","n_steps":1,"chunk_size_bytes":4096,"n_steps_completed":1,"trans_size_bytes":4096}})");
  ASSERT_TRUE(op43.ok) << op43.reason;
  EXPECT_TRUE(std::isnan(op43.line.proxy.total_us));
  EXPECT_EQ(op43.line.proxy.n_steps_dropped, kNullU64);
  EXPECT_TRUE(op43.line.proxy_steps.empty()) << "flat mode: the op's steps are their own records";
  EXPECT_EQ(t.parser.EndFile(), 0u);
}

TEST(InspectorParser, ProxyRecordsKeepOnlyWhatIsWrittenAndSkipUnknownKeys) {
  Stream s;
  ASSERT_TRUE(s.Next(Marker("v4.4", "0x9b2", "dp", 2, "gpu-a", 77, 0, 0, 2)).ok);
  // A segment with nothing but its type and an empty step: every other field absent.
  Parsed bare = s.Next(R"({"proxy_trace":{"record_type":"proxy_op_segment","steps":[{}]}})");
  ASSERT_TRUE(bare.ok) << bare.reason;
  const ProxyRecord& b = bare.line.proxy;
  EXPECT_EQ(b.record_type, ProxyRecordType::kOpSegment);
  EXPECT_EQ(b.record_sn, kNullU64);
  EXPECT_EQ(b.parent_type, kNullEnum);
  EXPECT_EQ(b.parent_sn, kNullU64);
  EXPECT_EQ(b.proxy_op_sn, kNullU64);
  EXPECT_EQ(b.channel_id, kNullI32);
  EXPECT_EQ(b.peer, kNullI32);
  EXPECT_EQ(b.direction, kNullEnum);
  EXPECT_EQ(b.n_steps, kNullU64);
  EXPECT_EQ(b.trans_size_bytes, kNullU64);
  EXPECT_EQ(b.start_ts_us, kNullU64);
  ASSERT_EQ(bare.line.proxy_steps.size(), 1u);
  EXPECT_EQ(bare.line.proxy_steps[0].proxy_step_sn, kNullU64);
  EXPECT_EQ(bare.line.proxy_steps[0].step, kNullI32);
  EXPECT_TRUE(std::isnan(bare.line.proxy_steps[0].total_us));

  // Keys of a later format, at any depth, are skipped; what is known still reads.
  Parsed future = s.Next(
      R"({"proxy_trace":{"record_type":"proxy_op","future_key":{"a":[1,{"b":2}]},"proxy_op_sn":4,"nic":"mlx5_0","steps":[{"step":3,"rdma_us":[1,2],"wire_us":7}],"total_us":9}})");
  ASSERT_TRUE(future.ok) << future.reason;
  EXPECT_EQ(future.line.proxy.proxy_op_sn, 4u);
  EXPECT_EQ(future.line.proxy.total_us, 9.0);
  ASSERT_EQ(future.line.proxy_steps.size(), 1u);
  EXPECT_EQ(future.line.proxy_steps[0].step, 3);
  EXPECT_EQ(future.line.proxy_steps[0].wire_us, 7.0);

  // A marker without proxy fields (proxy tracking off) stores them as absent.
  Parsed off = s.Next(Marker("v4.4", "0x9b2", "dp", 2, "gpu-a", 77, 0, 0, -1));
  ASSERT_TRUE(off.ok) << off.reason;
  EXPECT_FALSE(off.line.has_proxy_records);
  EXPECT_EQ(off.line.proxy_dropped_total, kNullU64);
  EXPECT_EQ(off.line.proxy_dropped_since_last_dump, kNullU64);
}

TEST(InspectorParser, BadProxyValuesAreRefusedNamingTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {R"("record_type":"proxy_op","steps":[{"wire_us":-3}])",
       "proxy_trace.steps[].wire_us: impossible negative"},
      {R"("record_type":"proxy_op","total_us":1e15)",
       "proxy_trace.total_us: 1e+15 is out of range"},
      {R"("record_type":"proxy_op","chunk_size_bytes":2251799813685248)",
       "proxy_trace.chunk_size_bytes: 2251799813685248 is out of range"},
      {R"("record_type":"proxy_op","event_trace_ts":{"proxy_op_stop_ts":18446744073709551615})",
       "proxy_trace.event_trace_ts.proxy_op_stop_ts: 18446744073709551615 is out of range"},
      {R"("record_type":"proxy_step","event_trace_ts":{"proxy_step_stop_ts":9007199254740993})",
       "proxy_trace.event_trace_ts.proxy_step_stop_ts: 9007199254740993 is out of range"},
      {R"("record_type":"proxy_op","proxy_op_sn":-1)",
       "proxy_trace.proxy_op_sn: impossible negative"},
      {R"("record_type":"proxy_op","channel_id":70000)",
       "proxy_trace.channel_id: 70000 is out of range"},
      {R"("record_type":"proxy_op","steps":[{"step":"x"}])",
       "proxy_trace.steps[].step: expected an integer"},
      {R"("record_type":"proxy_op","peer":4)", "proxy_trace.peer: peer 4 outside 0..3"},
      {R"("record_type":"proxy_op","rank":4)", "proxy_trace.rank: rank 4 outside 0..3"},
      {R"("record_type":"proxy_op","direction":"sideways")",
       "proxy_trace.direction: expected \"send\" or \"recv\""},
      {R"("record_type":"proxy_flush")", "proxy_trace.record_type: unknown proxy record type"},
      {R"("record_sn":1)", "proxy_trace.record_type: missing field"},
      {R"("record_type":"proxy_op","steps":{})", "proxy_trace.steps: expected a list"},
  };
  for (const auto& [body, reason] : cases) {
    Stream s;
    ASSERT_TRUE(s.Next(Marker("v4.4", "0x9b2", "dp", 2, "gpu-a", 77, 0, 0, 1)).ok);
    Parsed p = s.Next(R"({"proxy_trace":{)" + body + "}}");
    EXPECT_FALSE(p.ok) << body;
    EXPECT_EQ(p.reason.rfind(reason, 0), 0u) << body << " -> " << p.reason;
  }
}

}  // namespace
}  // namespace collscope
