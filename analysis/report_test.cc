#include "analysis/report.h"

#include <gtest/gtest.h>

#include "analysis/diagnose/diagnose.h"
#include "analysis/views.h"
#include "core/ingest.h"
#include "core/readers/ingest_inputs.h"
#include "tests/test_util.h"
#ifdef COLLSCOPE_REPORT_TEST_SIM
#include "tests/sim_job.h"
#endif

namespace collscope {
namespace {

using testing::CollLine;

// The text between `<section id="ID"` and its `</section>`.
std::string Section(const std::string& html, const std::string& id) {
  const size_t at = html.find("<section id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t end = html.find("</section>", at);
  return html.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

class Report : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string log;
    for (int sn = 0; sn < 20; ++sn)
      log += CollLine("h1", 1, "0xa", 0, 2, 2, "AllReduce", sn, 4194304, 400 + sn, "10.485760",
                      "10.485760", 1767225600000000 + sn * 1000000);
    testing::WriteFile(dir_ / "logs/h1-pid1.log", log);
    auto store = Store::Open(dir_ / "s.duckdb");
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
    IngestOptions o;
    o.run = "job";
    ASSERT_TRUE(Ingest(*store_, {dir_ / "logs"}, o).ok());
    ASSERT_TRUE(InstallAnalysisViews(*store_, false).ok());
  }
  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(Report, SelfContainedWithEverySectionAndNoNetwork) {
  ReportOptions o;
  auto html = RenderReport(*store_, o);
  ASSERT_TRUE(html.ok()) << html.status().message();
  for (const char* id : {"id=\"summary\"", "id=\"overview\"", "id=\"findings\"", "id=\"hot-kernels\"",
                         "id=\"ecdf\"", "id=\"temporal\"", "id=\"spatial\"", "id=\"ranges\"",
                         "id=\"baseline\"", "id=\"report-data\"", "id=\"findings-data\""})
    EXPECT_NE(html->find(id), std::string::npos) << id;
  // Findings first: the summary and the findings come before the overview.
  EXPECT_LT(html->find("<section id=\"findings\""), html->find("<section id=\"overview\""));
  // Nothing is fetched: no external scripts, styles or URLs to load.
  EXPECT_EQ(html->find("<script src"), std::string::npos);
  EXPECT_EQ(html->find("<link"), std::string::npos);
  EXPECT_EQ(html->find("src=\"http"), std::string::npos);
  EXPECT_EQ(html->find("href=\"http"), std::string::npos);
  if (ReportHasCharts()) {
    EXPECT_NE(html->find("echarts"), std::string::npos);
    EXPECT_GT(html->size(), 500000u);
  }
  EXPECT_NE(html->find("\"run\":\"job\""), std::string::npos);
}

// Without --findings the report diagnoses the store itself and says so at its top: the run, the
// evidence tier the diagnosis had, and that the findings are its own.
TEST_F(Report, DiagnosesTheStoreAndSaysWhatItRead) {
  ReportOptions o;
  auto html = RenderReport(*store_, o);
  ASSERT_TRUE(html.ok()) << html.status().message();
  const std::string top = Section(*html, "summary");
  EXPECT_NE(top.find("Read run <b>job</b>"), std::string::npos) << top;
  EXPECT_NE(top.find("20 NCCL records of 1 ranks on 1 hosts"), std::string::npos) << top;
  EXPECT_NE(top.find("Evidence tier <b>A</b> (NCCL communication records)"), std::string::npos) << top;
  EXPECT_NE(top.find("<b>diagnosed by this report</b>"), std::string::npos) << top;
  // One healthy process: nothing found, said as such, and the document for programs is the
  // diagnosis's own (an empty findings list, not null).
  EXPECT_NE(top.find("No findings"), std::string::npos) << top;
  EXPECT_NE(Section(*html, "findings").find("id=\"no-findings\""), std::string::npos);
  EXPECT_NE(html->find("id=\"findings-data\">{\"schema\": \"collscope.findings.v1\", \"findings\": []"),
            std::string::npos);
}

// A findings document: cards in plain words (culprit linked to its host row, victims and
// communicators summarised, evidence as a table with units, no raw JSON), duplicates as one card,
// the suppressed list behind a toggle, and the source said at the top.
TEST_F(Report, FindingsDocumentInPlainWords) {
  const std::string finding =
      "{\"kind\":\"slow_link\",\"confidence\":0.9,\"hosts\":[\"h1\"],\"ranks\":[0],\"victims\":[1,2,3,4,5,6,7,"
      "16,17,18,19,20,21,22,23],\"comms\":[\"0xa\"],\"start_us\":1767225602000000,\"end_us\":1767225606000000,"
      "\"summary\":\"</script><b>x slow on 0xa (DP group 3)\",\"detector\":\"comm.slow_link\","
      "\"evidence\":{\"bandwidth_share\":0.25,\"job_step_time_rise_pct\":44,\"max_wait_us\":12000,\"msg_size_bytes\":4194304,"
      "\"worst_kernel\":\"nic-only/2/AllReduce\"}}";
  testing::WriteFile(dir_ / "f.json",
                     "{\"schema\":\"collscope.findings.v1\",\"findings\":[" + finding + "," + finding +
                         "],\"suppressed\":[{\"reason\":\"propagated lateness: it waited on others\",\"finding\":"
                         "{\"kind\":\"slow_compute\",\"confidence\":0.5,\"hosts\":[\"h9\"],\"ranks\":[3],"
                         "\"victims\":[],\"comms\":[],\"start_us\":1,\"end_us\":2,\"summary\":\"s\","
                         "\"detector\":\"comm.late_arrival\",\"evidence\":{}}}]}");
  ReportOptions o;
  o.findings_path = dir_ / "f.json";
  auto html = RenderReport(*store_, o);
  ASSERT_TRUE(html.ok()) << html.status().message();
  EXPECT_EQ(html->find("</script><b>x"), std::string::npos);  // cannot close the data script
  const std::string top = Section(*html, "summary");
  EXPECT_NE(top.find("read from " + (dir_ / "f.json")), std::string::npos) << top;
  EXPECT_NE(top.find("Evidence tier: <b>not assessed</b>"), std::string::npos) << top;
  EXPECT_NE(top.find("Culprit: <a href=\"#finding-1\"><span class=\"culprit-name\">h1</span>"), std::string::npos)
      << top;
  const std::string cards = Section(*html, "findings");
  // One card for the two identical findings, saying it was seen twice.
  EXPECT_EQ(Count(cards, "<article class=\"finding"), 1u) << cards;
  EXPECT_NE(cards.find("2 occurrences"), std::string::npos);
  EXPECT_NE(cards.find("<b>Culprit:</b> <a class=\"culprit-name\" href=\"#host-h1\">h1</a>"), std::string::npos)
      << cards;
  EXPECT_NE(cards.find("&lt;/script&gt;&lt;b&gt;x slow"), std::string::npos);
  // What it cost, in words: the job's step time first, then what its communicators lost.
  EXPECT_NE(cards.find("<dt>Impact</dt><dd>the job's step time rose 44% while it lasted; its communicators ran at "
                       "25% of their usual bandwidth</dd>"),
            std::string::npos)
      << cards;
  // Victims as ranges, never an elided list; the communicator by the label the summary gives it.
  EXPECT_NE(cards.find("15 ranks: 1-7, 16-23 (they wait for it)"), std::string::npos) << cards;
  EXPECT_EQ(cards.find("..."), std::string::npos);
  EXPECT_NE(cards.find("DP group 3 <span class=\"muted\">0xa</span>"), std::string::npos) << cards;
  // Evidence: a table with names and units, never a JSON block.
  EXPECT_NE(cards.find("<table class=\"t evidence\">"), std::string::npos);
  EXPECT_NE(cards.find("<td>bandwidth share</td><td class=\"num\">25 %</td>"), std::string::npos) << cards;
  EXPECT_NE(cards.find("<td>max wait</td><td class=\"num\">12 ms</td>"), std::string::npos) << cards;
  EXPECT_NE(cards.find("<td>msg size</td><td class=\"num\">4 MiB</td>"), std::string::npos) << cards;
  EXPECT_EQ(cards.find("<pre"), std::string::npos);
  EXPECT_EQ(cards.find("{\""), std::string::npos);
  EXPECT_EQ(cards.find("\"bandwidth_share\""), std::string::npos);
  EXPECT_NE(cards.find("id=\"confidence-note\""), std::string::npos);
  EXPECT_NE(cards.find("confidence 0.90 \xC2\xB7 high"), std::string::npos);
  // 0xa is the store's only communicator of its size: no chart, and the card says why.
  EXPECT_EQ(cards.find("class=\"mini-chart\""), std::string::npos);
  EXPECT_NE(cards.find("No chart: the communicators this finding names have no siblings in the records"),
            std::string::npos)
      << cards;
  // The suppressed candidate, collapsed, with its reason.
  EXPECT_NE(cards.find("<details id=\"suppressed\""), std::string::npos);
  EXPECT_EQ(cards.find("<details id=\"suppressed\" open"), std::string::npos);
  EXPECT_NE(cards.find("propagated lateness: it waited on others"), std::string::npos);
  // The host table names the culprit first and links back to its card.
  const std::string hosts = html->substr(html->find("id=\"host-table\""));
  EXPECT_NE(hosts.find("<tbody><tr id=\"host-h1\" class=\"culprit\">"), std::string::npos) << hosts.substr(0, 600);
  EXPECT_NE(hosts.find("<a href=\"#finding-1\">#1 culprit</a>"), std::string::npos);
  // The windows go to the charts.
  EXPECT_NE(html->find("\"bands\":[{\"card\":1,\"kind\":\"slow_link\""), std::string::npos);

  testing::WriteFile(dir_ / "bad.json", "{\"findings\":[]}");
  o.findings_path = dir_ / "bad.json";
  EXPECT_FALSE(RenderReport(*store_, o).ok());
  o.findings_path = dir_ / "missing.json";
  EXPECT_FALSE(RenderReport(*store_, o).ok());
  o.findings_path.clear();
  o.run = "nope";
  EXPECT_FALSE(RenderReport(*store_, o).ok());
}

// The report with `findings` (a collscope.findings.v1 document) instead of its own diagnosis.
std::string RenderWithFindings(const testing::TempDir& dir, Store& store, const std::string& findings) {
  testing::WriteFile(dir / "f.json", findings);
  ReportOptions o;
  o.findings_path = dir / "f.json";
  auto html = RenderReport(store, o);
  EXPECT_TRUE(html.ok()) << html.status().message();
  return html.ok() ? *html : "";
}

// Hosts h1 and h2 are suspects and nothing is a culprit: in the card (`card_says`), the host table
// and the chart data.
void ExpectSuspectsNoCulprit(const std::string& html, const std::string& card_says) {
  const std::string cards = Section(html, "findings");
  EXPECT_NE(cards.find(card_says + "<a class=\"suspect-name\" href=\"#host-h1\">h1</a>"), std::string::npos) << cards;
  EXPECT_EQ(cards.find("culprit-name"), std::string::npos);
  EXPECT_NE(html.find("<tr id=\"host-h1\" class=\"suspect\">"), std::string::npos);
  EXPECT_EQ(html.find("class=\"culprit\""), std::string::npos);
  EXPECT_NE(html.find("\"named_hosts\":{\"culprits\":[],\"suspects\":[\"h1\",\"h2\"],\"culprit_ranks\":[]}"),
            std::string::npos);
}

// slow_network is a symptom: its hosts are suspects, never a culprit, in the card, the headline
// and the host table.
TEST_F(Report, SymptomNamesSuspectsNotACulprit) {
  const std::string html = RenderWithFindings(
      dir_, *store_,
      "{\"schema\":\"collscope.findings.v1\",\"findings\":[{\"kind\":\"slow_network\",\"confidence\":0.6,\"hosts\":"
      "[\"h1\",\"h2\"],\"ranks\":[],\"victims\":[],\"comms\":[],\"start_us\":1767225602000000,\"end_us\":"
      "1767225606000000,\"summary\":\"a network is slow\",\"detector\":\"comm.slow_link\",\"evidence\":{}}]}");
  ExpectSuspectsNoCulprit(html, "<b>No culprit:</b> a symptom. Suspects (none named as the cause): ");
  EXPECT_NE(Section(html, "summary").find("No culprit named"), std::string::npos);
}

// A hang whose stuck transfers both ends joined names no culprit: its hosts are suspects, as a
// symptom's are, and none is marked as the cause (a healthy end would be drained).
TEST_F(Report, AHangTheDataCannotPlaceNamesSuspectsNotACulprit) {
  const std::string html = RenderWithFindings(
      dir_, *store_,
      "{\"schema\":\"collscope.findings.v1\",\"findings\":[{\"kind\":\"hang\",\"confidence\":0.6,\"hosts\":[],"
      "\"ranks\":[],\"victims\":[0,1],\"comms\":[],\"start_us\":1767225602000000,\"end_us\":1767225606000000,"
      "\"summary\":\"stuck mid-transfer\",\"detector\":\"inflight.state\",\"evidence\":{\"suspect_hosts\":\"h1, h2\"}}]}");
  ExpectSuspectsNoCulprit(html, "<b>Culprit:</b> not named: the data cannot tell these hosts apart. Suspects (none "
                                "named as the cause): ");
  EXPECT_NE(Section(html, "summary").find("No culprit named: 1 finding(s) below, none of which the data can tie"),
            std::string::npos)
      << Section(html, "summary");
}

// A hang that the in-flight state still shows after the last NCCL record lasts past the records:
// its card says so, not that it ended with them (the records end at +19 s).
TEST_F(Report, AHangSeenAfterTheLastRecordLastsPastTheRecords) {
  const std::string html =
      RenderWithFindings(dir_, *store_,
                         "{\"schema\":\"collscope.findings.v1\",\"findings\":[{\"kind\":\"hang\","
                         "\"confidence\":0.9,\"hosts\":"
                         "[\"h1\"],\"ranks\":[0],\"victims\":[1],\"comms\":[],\"start_us\":"
                         "1767225610000000,\"end_us\":"
                         "1767226210000000,\"summary\":\"rank 0 never "
                         "joined\",\"detector\":\"inflight.state\",\"evidence\":{}}]}");
  EXPECT_NE(Section(html, "findings")
                .find("for 10 min, until the latest evidence read, past the end of the records"),
            std::string::npos)
      << Section(html, "findings");
  EXPECT_EQ(html.find("until the end of the records"), std::string::npos);
}

// A finding that lasts to the last record may still be going on, and says so (the records end at
// +19 s).
TEST_F(Report, AFindingToTheLastRecordLastsUntilTheEndOfTheRecords) {
  const std::string html = RenderWithFindings(
      dir_, *store_,
      "{\"schema\":\"collscope.findings.v1\",\"findings\":[{\"kind\":\"slow_link\",\"confidence\":"
      "0.9,"
      "\"hosts\":[\"h1\"],\"ranks\":[0],\"victims\":[1],\"comms\":[],\"start_us\":1767225610000000,"
      "\"end_us\":1767225619000000,\"summary\":\"slow\",\"detector\":\"comm.slow_link\","
      "\"evidence\":{}}]}");
  EXPECT_NE(Section(html, "findings").find("for 9 s, until the end of the records"),
            std::string::npos)
      << Section(html, "findings");
  EXPECT_EQ(html.find("past the end of the records"), std::string::npos);
}

// A stack file of `collscope stacks --out` (core/readers/stacks.h) for one process: its main
// thread (tid = pid) in `main_frames` for `samples` samples of one 10 s window, and a proxy thread.
std::string StackFile(int pid, int rank, const std::string& main_frames, int samples) {
  constexpr int64_t kW = 1767225600000000;
  auto stacks = [&](int64_t tid, const std::string& thread, const std::string& frames, int count) {
    return "{\"type\":\"stacks\",\"tid\":" + std::to_string(tid) + ",\"thread\":\"" + thread +
           "\",\"window_start_us\":" + std::to_string(kW) + ",\"window_end_us\":" + std::to_string(kW + 10000000) +
           ",\"first_us\":" + std::to_string(kW + 100000) + ",\"last_us\":" + std::to_string(kW + 9900000) +
           ",\"count\":" + std::to_string(count) + ",\"frames\":\"" + frames + "\"}\n";
  };
  return "{\"collscope_stacks\":1,\"type\":\"process\",\"host\":\"h1\",\"pid\":" + std::to_string(pid) +
         ",\"rank\":" + std::to_string(rank) +
         ",\"exe\":\"/usr/bin/python3.11\",\"command\":\"python3 train.py\",\"python\":\"3.11.2\","
         "\"python_unread\":\"\",\"interval_us\":100000,\"native\":true}\n" +
         stacks(pid, "python3", main_frames, samples) +
         stacks(pid + 1000, "nccl proxy", "start_thread;ncclProxyService;poll", samples) +
         "{\"type\":\"end\",\"samples\":" + std::to_string(samples) +
         ",\"failed\":0,\"dropped\":0,\"mean_sample_us\":800,\"mean_stopped_us\":400,\"max_stopped_us\":900,"
         "\"exited\":false}\n";
}

const char kWaiting[] =
    "_start;Py_RunMain;<module> (train.py:90);step (train.py:41);all_reduce "
    "(torch/distributed/distributed_c10d.py:2050);cudaStreamSynchronize";
const char kCompiling[] =
    "_start;Py_RunMain;<module> (train.py:90);step (train.py:41);compile_graph (train.py:39);"
    "std::vector<int>::push_back";

void IngestStacks(Store& store, const std::string& dir) {
  IngestOptions o;
  o.run = "job";
  o.threads = 1;
  auto in = readers::IngestInputs(store, {dir}, o);
  ASSERT_TRUE(in.ok()) << in.status().message();
  ASSERT_EQ(in->stacks.files_read, 4u);
  ASSERT_EQ(in->stacks.lines_rejected, 0u) << in->stacks.first_rejections.at(0);
}

// Stacks in the store: a "Call stacks" section, readable without JavaScript, that says what was
// read, names the process whose main thread stands apart, and draws a flame graph of its main
// thread and one of the others' merged.
TEST_F(Report, CallStacksSectionNamesTheProcessStandingApart) {
  for (int r = 0; r < 4; ++r)
    testing::WriteFile(dir_ / ("stacks/h1-pid" + std::to_string(11 + r) + ".stacks.jsonl"),
                       StackFile(11 + r, r, r == 2 ? kCompiling : kWaiting, 100));
  IngestStacks(*store_, dir_ / "stacks");
  ReportOptions o;
  auto html = RenderReport(*store_, o);
  ASSERT_TRUE(html.ok()) << html.status().message();
  const std::string top = Section(*html, "summary");
  EXPECT_NE(top.find("<span id=\"stacks-read-top\">Call stacks: <b>800 samples of 4 processes</b> read"),
            std::string::npos)
      << top;
  EXPECT_NE(html->find("<a href=\"#stacks\">Call stacks</a>"), std::string::npos);  // in the menu
  const std::string sec = Section(*html, "stacks");
  ASSERT_FALSE(sec.empty());
  // After the findings, before the overview.
  EXPECT_LT(html->find("<section id=\"findings\""), html->find("<section id=\"stacks\""));
  EXPECT_LT(html->find("<section id=\"stacks\""), html->find("<section id=\"overview\""));
  EXPECT_NE(sec.find("<h2>Call stacks</h2>"), std::string::npos);
  EXPECT_NE(sec.find("Read 800 samples of 8 threads in 4 processes (collscope stacks), 2026-01-01 00:00:00.100"),
            std::string::npos)
      << sec;
  // CompareProcesses's sentence: rank 2 stands apart, in its own frame.
  EXPECT_NE(sec.find("data-outliers=\"1\">Rank 2 (pid 13 on h1) has been in <code>compile_graph (train.py:39) -&gt; "
                     "std::vector&lt;int&gt;::push_back</code>"),
            std::string::npos)
      << sec;
  EXPECT_NE(sec.find("while the other 3 processes have been in <code>all_reduce"), std::string::npos) << sec;
  // Its flame graph holds its main thread alone; the others' holds theirs.
  const size_t apart = sec.find("<div id=\"flame-apart\""), others = sec.find("<div id=\"flame-others\"");
  ASSERT_NE(apart, std::string::npos) << sec;
  ASSERT_NE(others, std::string::npos) << sec;
  ASSERT_LT(apart, others);
  EXPECT_NE(sec.find("<h3 id=\"flame-apart-title\">Standing apart: rank 2 (pid 13 on h1), main thread, 100 samples</h3>"),
            std::string::npos)
      << sec;
  EXPECT_NE(sec.find("<h3 id=\"flame-others-title\">The other 3 processes, main threads merged, 300 samples</h3>"),
            std::string::npos);
  const std::string g_apart = sec.substr(apart, others - apart), g_others = sec.substr(others);
  EXPECT_NE(g_apart.find("<div class=\"flame\" data-samples=\"100\""), std::string::npos) << g_apart;
  EXPECT_NE(g_apart.find("<div class=\"fg-f fg-py\" title=\"compile_graph (train.py:39)&#10;100 samples, 100.0%\">"
                         "compile_graph (train.py:39)</div>"),
            std::string::npos)
      << g_apart;
  EXPECT_NE(g_apart.find(">std::vector&lt;int&gt;::push_back</div>"), std::string::npos);
  EXPECT_EQ(g_apart.find("cudaStreamSynchronize"), std::string::npos);
  EXPECT_EQ(g_apart.find("ncclProxyService"), std::string::npos);  // main threads only
  EXPECT_NE(g_others.find("<div class=\"flame\" data-samples=\"300\""), std::string::npos) << g_others;
  EXPECT_NE(g_others.find("class=\"fg-f fg-nat\" title=\"cudaStreamSynchronize&#10;300 samples, 100.0%\""),
            std::string::npos)
      << g_others;
  EXPECT_EQ(g_others.find("compile_graph"), std::string::npos);
  EXPECT_EQ(g_others.find("ncclProxyService"), std::string::npos);
  EXPECT_EQ(sec.find("<script"), std::string::npos);  // static HTML
  EXPECT_EQ(sec.find("std::vector<int>"), std::string::npos);  // escaped everywhere
}

// When no process stands apart: the sentence says so, and one flame graph of every main thread.
TEST_F(Report, CallStacksWithNoneApartDrawOneMergedGraph) {
  for (int r = 0; r < 4; ++r)
    testing::WriteFile(dir_ / ("stacks/h1-pid" + std::to_string(11 + r) + ".stacks.jsonl"),
                       StackFile(11 + r, r, kWaiting, 50));
  IngestStacks(*store_, dir_ / "stacks");
  auto html = RenderReport(*store_, ReportOptions());
  ASSERT_TRUE(html.ok()) << html.status().message();
  const std::string sec = Section(*html, "stacks");
  EXPECT_NE(sec.find("data-outliers=\"0\">All 4 processes have been in <code>"), std::string::npos) << sec;
  EXPECT_NE(sec.find("none stands apart"), std::string::npos);
  EXPECT_EQ(sec.find("flame-apart"), std::string::npos);
  EXPECT_EQ(sec.find("flame-others"), std::string::npos);
  EXPECT_NE(sec.find("<h3 id=\"flame-all-title\">All 4 processes, main threads merged, 200 samples</h3>"),
            std::string::npos)
      << sec;
  EXPECT_NE(sec.find("<div class=\"flame\" data-samples=\"200\""), std::string::npos);
}

// A store without stacks: no section, no menu entry, nothing said about stacks at the top.
TEST_F(Report, NoStacksNoSection) {
  auto html = RenderReport(*store_, ReportOptions());
  ASSERT_TRUE(html.ok()) << html.status().message();
  EXPECT_EQ(html->find("<section id=\"stacks\""), std::string::npos);
  EXPECT_EQ(html->find("href=\"#stacks\""), std::string::npos);
  EXPECT_EQ(html->find("stacks-read"), std::string::npos);
  EXPECT_EQ(html->find("class=\"flame\""), std::string::npos);
  EXPECT_EQ(html->find("{{STACKS"), std::string::npos);
}

#ifdef COLLSCOPE_REPORT_TEST_SIM
// A simulated job with one NIC-degraded host for steps 8-13 of 20 (4 hosts x 8 GPUs, TP 8 in a
// host, PP 2; the example job's shape, another host and seed, no step series or kernels): the
// report, with no findings given, diagnoses it and every view names that host.
TEST(ReportOfSimulatedJob, NamesTheDegradedHostEverywhere) {
  testing::TempDir dir;
  // The example job's model size, so that the NIC's share of a step is the example's.
  sim::SimConfig c =
      testing::FourHostJob(dir / "job", "kind=nic_degrade,host=2,factor=0.25,start_step=8,end_step=14", 20, 11);
  c.workload.hidden = 8192;
  c.workload.seq_len = 8192;
  c.workload.bucket_mparams = 250;
  testing::RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto store = testing::IngestSimulatedJob(dir / "job", dir / "s.duckdb", "sim");
  ASSERT_TRUE(store && !::testing::Test::HasFailure());

  ReportOptions o;
  auto html = RenderReport(*store, o);
  ASSERT_TRUE(html.ok()) << html.status().message();
  const std::string top = Section(*html, "summary"), cards = Section(*html, "findings");
  EXPECT_NE(top.find("Read run <b>sim</b>"), std::string::npos) << top;
  EXPECT_NE(top.find("of 32 ranks on 4 hosts"), std::string::npos) << top;
  EXPECT_NE(top.find("Evidence tier <b>"), std::string::npos) << top;
  EXPECT_NE(top.find("<b>diagnosed by this report</b>"), std::string::npos) << top;
  // The first screen names the host, and so does the card.
  EXPECT_NE(top.find("Culprit: <a href=\"#finding-1\"><span class=\"culprit-name\">node-002</span>"),
            std::string::npos)
      << top << cards;
  EXPECT_NE(cards.find("<a class=\"culprit-name\" href=\"#host-node-002\">node-002</a>"), std::string::npos)
      << cards;
  EXPECT_EQ(cards.find("<pre"), std::string::npos);
  EXPECT_EQ(cards.find("{\""), std::string::npos);
  EXPECT_NE(cards.find("<table class=\"t evidence\">"), std::string::npos);
  EXPECT_EQ(cards.find(", ... ("), std::string::npos);  // victims never as an elided list
  // The host table puts it first and highlights it; the charts get its window.
  const std::string hosts = html->substr(html->find("id=\"host-table\""));
  EXPECT_NE(hosts.find("<tbody><tr id=\"host-node-002\" class=\"culprit\">"), std::string::npos)
      << hosts.substr(0, 800);
  EXPECT_EQ(Count(hosts.substr(0, hosts.find("</table>")), "class=\"culprit\""), 1u);
  EXPECT_NE(html->find("\"named_hosts\":{\"culprits\":[\"node-002\"]"), std::string::npos);
  EXPECT_NE(html->find("\"bands\":[{\"card\":1,"), std::string::npos);
  // The card's mini chart: node-002's communicators against their siblings, its window shaded.
  EXPECT_NE(cards.find("<div class=\"mini-chart\" id=\"card-chart-1\""), std::string::npos) << cards;
  EXPECT_NE(html->find("\"card_series\":[{\"card\":1,"), std::string::npos);
  // What it plots: inside the fault's steps the communicators the finding names (node-002's) run
  // far above their siblings (their worst bin at least 1.5 times the siblings' worst); before the
  // fault both sit at the siblings' usual time.
  std::vector<diagnose::Suppressed> suppressed;
  diagnose::DiagnoseOptions d;
  d.run = "sim";
  d.suppressed = &suppressed;
  auto found = diagnose::DiagnoseStore(*store, d);
  ASSERT_TRUE(found.ok() && !found->empty());
  std::string comms;
  for (const std::string& id : (*found)[0].comms) comms += (comms.empty() ? "'" : ", '") + id + "'";
  auto span = store->Query("SELECT min(coalesce(start_ts_us, dump_ts_us)), max(coalesce(start_ts_us, dump_ts_us)) FROM records_v");
  ASSERT_TRUE(span.ok());
  const int64_t t0 = std::stoll(*span->rows[0][0]), bin = (std::stoll(*span->rows[0][1]) - t0) / 40;
  auto series = store->Query("SELECT culprit, max(ratio), median(ratio) FILTER (WHERE bin_start_us < " +
                             std::to_string(t0 + 10 * bin) + ") FROM culprit_series(1, [" + comms + "], " +
                             std::to_string(t0) + ", " + std::to_string(bin) + ") GROUP BY culprit ORDER BY culprit");
  ASSERT_TRUE(series.ok()) << series.status().message();
  ASSERT_EQ(series->rows.size(), 2u);
  EXPECT_GT(std::stod(*series->rows[1][1]), 1.5 * std::stod(*series->rows[0][1]));  // node-002's worst
  EXPECT_NEAR(std::stod(*series->rows[0][2]), 1.0, 0.15);  // siblings, before the fault
  EXPECT_NEAR(std::stod(*series->rows[1][2]), 1.0, 0.15);  // node-002's, before the fault
  // The suppressed list is there exactly when the diagnosis suppressed something.
  EXPECT_EQ(cards.find("<details id=\"suppressed\"") != std::string::npos, !suppressed.empty());
  if (!suppressed.empty()) {
    EXPECT_NE(cards.find(std::to_string(suppressed.size()) + " candidate finding"), std::string::npos);
  }
}
#endif

}  // namespace
}  // namespace collscope
