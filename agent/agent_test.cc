// The agent's parts (metrics text, finding tracker, folder watch, job metrics) and whole ticks of
// the agent on simulated jobs with a known fault.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <filesystem>

#include <fstream>
#include <limits>
#include <map>
#include <thread>

#include "agent/agent.h"
#include "agent/finding_tracker.h"
#include "agent/http.h"
#include "agent/job_metrics.h"
#include "agent/metrics.h"
#include "agent/scripted_peer.h"
#ifdef COLLSCOPE_HAVE_STACKS
#include "agent/stacks/stack_target_test_util.h"
#endif
#include "agent/watch.h"
#include "analysis/views.h"
#include "core/ingest.h"
#include "sim/sim.h"
#include "tests/servers.h"
#include "tests/sim_job.h"
#include "tests/test_util.h"

namespace collscope::agent {
namespace {

namespace fs = std::filesystem;

TEST(Metrics, TextFormatEscapesLabelValuesAndSpellsSpecialValues) {
  std::vector<MetricFamily> f{{"collscope_x_seconds", "Help with \\ and\nnewline.", "gauge", {}}};
  f[0].Add({{"host", "a\"b\\c\nd"}}, 1.5)
      .Add({{"host", "e"}}, std::numeric_limits<double>::quiet_NaN());
  f[0].Add({{"host", "f"}}, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(Validate(f).ok());
  EXPECT_EQ(ToPrometheusText(f),
            "# HELP collscope_x_seconds Help with \\\\ and\\nnewline.\n"
            "# TYPE collscope_x_seconds gauge\n"
            "collscope_x_seconds{host=\"a\\\"b\\\\c\\nd\"} 1.5\n"
            "collscope_x_seconds{host=\"e\"} NaN\n"
            "collscope_x_seconds{host=\"f\"} +Inf\n");
}

TEST(Metrics, ValidateRefusesWhatWouldBreakAScrape) {
  auto one = [](std::string name, std::string type, Labels labels) {
    std::vector<MetricFamily> f{{std::move(name), "h", std::move(type), {}}};
    f[0].Add(std::move(labels), 1);
    return Validate(f);
  };
  EXPECT_TRUE(one("collscope_ok_total", "counter", {{"host", "x"}}).ok());
  EXPECT_FALSE(one("collscope_ok", "counter", {}).ok()) << "a counter's name ends in _total";
  EXPECT_FALSE(one("9bad", "gauge", {}).ok());
  EXPECT_FALSE(one("collscope-bad", "gauge", {}).ok());
  EXPECT_FALSE(one("collscope_ok", "histogram", {}).ok());
  EXPECT_FALSE(one("collscope_ok", "gauge", {{"__name__", "x"}}).ok());
  EXPECT_FALSE(one("collscope_ok", "gauge", {{"a-b", "x"}}).ok());
  EXPECT_FALSE(one("collscope_ok", "gauge", {{"a", "x"}, {"a", "y"}}).ok());
  std::vector<MetricFamily> twice{{"collscope_a", "h", "gauge", {}}};
  twice[0].Add({{"a", "1"}, {"b", "2"}}, 1).Add({{"b", "2"}, {"a", "1"}}, 2);
  EXPECT_FALSE(Validate(twice).ok()) << "one label set in two orders is one series";
}

diagnose::Finding MakeFinding(diagnose::Kind kind, std::string host, int rank, double confidence) {
  diagnose::Finding f;
  f.kind = kind;
  f.hosts = {std::move(host)};
  f.ranks = {rank};
  f.confidence = confidence;
  f.summary = "s";
  f.detector = "d";
  return f;
}

TEST(FindingTracker, RaisesOnceAndResolvesOnlyAfterItWasGoneLongEnough) {
  FindingTracker t(2);
  const auto f = MakeFinding(diagnose::Kind::kSlowLink, "node-001", 8, 0.9);
  auto c = t.Update({f}, 1);
  ASSERT_EQ(c.raised.size(), 1u);
  EXPECT_EQ(c.raised[0].key, "slow_link:node-001:8");
  // The same root cause with other numbers is the same finding, not a new alert.
  auto g = f;
  g.confidence = 0.7;
  g.start_us = 99;
  c = t.Update({g}, 2);
  EXPECT_TRUE(c.raised.empty());
  EXPECT_EQ(t.active().at("slow_link:node-001:8").finding.confidence, 0.7);
  EXPECT_EQ(t.active().at("slow_link:node-001:8").first_seen_us, 1);
  // Gone one tick: still active (a fault at the detection limit must not page on and off).
  c = t.Update({}, 3);
  EXPECT_TRUE(c.resolved.empty());
  // Back: the miss count starts again.
  t.Update({f}, 4);
  t.Update({}, 5);
  EXPECT_EQ(t.active().size(), 1u);
  c = t.Update({}, 6);
  ASSERT_EQ(c.resolved.size(), 1u);
  EXPECT_EQ(c.resolved[0].resolved_us, 6);
  EXPECT_TRUE(t.active().empty());
  // Another rank on the same host is another finding.
  c = t.Update({f, MakeFinding(diagnose::Kind::kSlowLink, "node-001", 9, 0.9)}, 7);
  EXPECT_EQ(c.raised.size(), 2u);
}

TEST(FindingTracker, StateSurvivesARestart) {
  FindingTracker before(1);
  before.Update({MakeFinding(diagnose::Kind::kSlowCompute, "node-002", 17, 0.8)}, 1000);
  FindingTracker after(1);
  ASSERT_TRUE(after.Load(before.Save()).ok());
  ASSERT_EQ(after.active().size(), 1u);
  EXPECT_EQ(after.active().begin()->second.first_seen_us, 1000);
  // Found again after the restart: not raised twice; gone: resolved.
  EXPECT_TRUE(after.Update({MakeFinding(diagnose::Kind::kSlowCompute, "node-002", 17, 0.8)}, 2000)
                  .raised.empty());
  EXPECT_EQ(after.Update({}, 3000).resolved.size(), 1u);
  EXPECT_FALSE(after.Load("12 x\n").ok());
}

TEST(FolderWatch, SeesAppendsNewFilesAndNewFolders) {
  collscope::testing::TempDir dir;
  fs::create_directories(dir / "dumps");
  FolderWatch w({dir / "dumps"});
  if (w.polling()) GTEST_SKIP() << "inotify unavailable here: " << w.polling_reason();
  EXPECT_TRUE(w.Changed()) << "the first call";
  EXPECT_FALSE(w.Changed()) << "nothing happened";
  { std::ofstream(dir / "dumps/a.log") << "x\n"; }
  EXPECT_TRUE(w.Changed());
  EXPECT_FALSE(w.Changed());
  { std::ofstream(dir / "dumps/a.log", std::ios::app) << "y\n"; }
  EXPECT_TRUE(w.Changed());
  fs::create_directories(dir / "dumps/host2");
  EXPECT_TRUE(w.Changed());
  { std::ofstream(dir / "dumps/host2/b.log") << "z\n"; }
  EXPECT_TRUE(w.Changed()) << "a file in a folder created after the start";
  w.Requeue();
  EXPECT_TRUE(w.Changed()) << "a change handed back";
  EXPECT_FALSE(w.Changed());
}

using collscope::testing::FourHostJob;
using collscope::testing::RunSimulation;

std::map<Labels, double> SeriesOf(const std::vector<MetricFamily>& families,
                                  const std::string& name) {
  std::map<Labels, double> out;
  for (const MetricFamily& f : families)
    if (f.name == name)
      for (const MetricSeries& s : f.series) out[s.labels] = s.value;
  return out;
}

std::unique_ptr<Store> SimulateAndIngest(const collscope::testing::TempDir& dir, const std::string& fault) {
  RunSimulation(FourHostJob(dir / "job", fault));
  return collscope::testing::IngestSimulatedJob(dir / "job", dir / "s.duckdb", "live");
}

TEST(JobMetrics, ASlowNicMakesItsHostTheLowestBusBandwidthRatio) {
  collscope::testing::TempDir dir;
  auto store = SimulateAndIngest(dir, "kind=nic_degrade,host=1,factor=0.25");
  auto m = JobMetrics(*store, "live", {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(Validate(*m).ok());
  auto ratio = SeriesOf(*m, "collscope_host_busbw_ratio");
  ASSERT_EQ(ratio.size(), 4u);
  const double slow = ratio.at({{"host", "node-001"}});
  for (const auto& [labels, v] : ratio)
    if (labels[0].second != "node-001") {
      EXPECT_LT(slow, 0.85 * v) << labels[0].second;
    }
  auto reporting = SeriesOf(*m, "collscope_host_processes_reporting");
  for (const auto& [labels, v] : reporting) EXPECT_EQ(v, 8) << labels[0].second;
  EXPECT_FALSE(SeriesOf(*m, "collscope_kernel_busbw_bytes_per_second").empty());
}

TEST(JobMetrics, AStragglerRankArrivesLastAndOnlyInsideTheWindowItIsIn) {
  collscope::testing::TempDir dir;
  auto store = SimulateAndIngest(dir, "kind=gpu_straggler,rank=13,factor=2.0");
  auto m = JobMetrics(*store, "live", {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  auto delay = SeriesOf(*m, "collscope_rank_arrival_delay_seconds");
  ASSERT_EQ(delay.size(), 32u);
  std::string latest;
  double most = -1;
  for (const auto& [labels, v] : delay)
    if (v > most) most = v, latest = labels[1].second;
  EXPECT_EQ(latest, "13");
  EXPECT_EQ(SeriesOf(*m, "collscope_host_arrival_delay_seconds").size(), 4u);
  // With the layout known (TP 8, PP 2 of 32 ranks), each rank carries its grid coordinates.
  JobMetricsOptions layout;
  layout.tp = 8;
  layout.pp = 2;
  auto with_grid = JobMetrics(*store, "live", {}, layout);
  ASSERT_TRUE(with_grid.ok());
  const Labels rank13{
      {"host", "node-001"}, {"rank", "13"}, {"tp_rank", "5"}, {"dp_rank", "1"}, {"pp_stage", "0"}};
  EXPECT_TRUE(SeriesOf(*with_grid, "collscope_rank_arrival_delay_seconds").count(rank13));
  // A window before the job: nothing in it.
  auto none = JobMetrics(*store, "live", {1, 2});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(SeriesOf(*none, "collscope_window_collectives").at({}), 0);
  EXPECT_TRUE(SeriesOf(*none, "collscope_rank_arrival_delay_seconds").empty());
}

// An agent without a listener that watches dir/job and keeps its store as dir/agent.duckdb.
AgentOptions WatchingTheJob(const collscope::testing::TempDir& dir) {
  AgentOptions o;
  o.watch = {dir / "job"};
  o.db = dir / "agent.duckdb";
  o.listen = "";
  return o;
}

// The simulator's default model on 4 hosts (TP 4, PP 2, DP 4): steps of about 0.14 s, long
// enough for the link detector to tell a slow NIC's host from its partners.
sim::SimConfig DefaultJob(const std::string& out, const std::string& fault, int steps) {
  sim::SimConfig c;
  c.seed = 3;
  c.cluster.hosts = 4;
  c.workload.steps = steps;
  c.output.dir = out;
  c.output.kineto_max_ranks = 0;
  c.output.steps = false;
  sim::FaultSpec f;
  std::string err;
  EXPECT_EQ(sim::ParseFaultSpec(fault, &f).message(), "");
  c.faults.push_back(f);
  return c;
}

TEST(Agent, ATickOnASlowHostsJobRaisesItsFindingAndARestartResumesIt) {
  collscope::testing::TempDir dir;
  sim::SimConfig c = DefaultJob(dir / "job", "kind=nic_degrade,host=1,factor=0.25", 30);
  RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  AgentOptions o = WatchingTheJob(dir);
  o.window_s = 3600;
  o.resolve_after = 1;
  // No periodic walk (tested on its own below): under the sanitizers the first tick outlasts the
  // default 10 s, and the walk it would owe is not the change this test looks for.
  o.rescan_s = 0;
  {
    auto a = Agent::Create(o);
    ASSERT_TRUE(a.ok()) << a.status().message();
    TickReport r = (*a)->Tick();
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_TRUE(r.ingested);
    EXPECT_GT(r.records_stored, 1000u);
    ASSERT_TRUE(r.diagnosed);
    EXPECT_GE(r.raised, 1);
    const std::string metrics = (*a)->MetricsText();
    EXPECT_NE(metrics.find("collscope_finding_active{kind=\"slow_link\",host=\"node-001\"}"),
              std::string::npos)
        << metrics;
    EXPECT_NE((*a)->FindingsJson().find("node-001"), std::string::npos);
    EXPECT_NE(metrics.find("pp_stage=\""), std::string::npos)
        << "the diagnosis's layout reaches the rank series";
    EXPECT_EQ((*a)->Health().first, 200) << (*a)->Health().second;
    // Nothing changed: no ingest, the same findings, nothing raised again.
    r = (*a)->Tick();
    EXPECT_FALSE(r.ingested);
    EXPECT_EQ(r.raised, 0);
  }
  // A restart: the findings active before it are known, so nothing is raised twice.
  auto again = Agent::Create(o);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_NE((*again)->Describe().find("active before the restart"), std::string::npos);
  TickReport r = (*again)->Tick();
  EXPECT_EQ(r.raised, 0);
  EXPECT_FALSE(r.ingested && r.records_stored > 0) << "the ingest's progress survives the restart";
}

// Without a shared file system: each host's agent PUTs its summaries to the aggregator, which
// stores them where it watches and diagnoses the whole job from them; a host's spool empties as
// its files are stored. Uploads that are no summary, or would land outside the folder, are refused.
TEST(Agent, HostAgentsShipSummariesToAnAggregatorOverHttp) {
  collscope::testing::TempDir dir;
  sim::SimConfig c = DefaultJob(dir / "job", "kind=nic_degrade,host=1,factor=0.25", 30);
  RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  AgentOptions agg;
  agg.db = dir / "aggregator.duckdb";
  agg.listen = "127.0.0.1:0";
  agg.accept_summaries = dir / "incoming";
  agg.window_s = 3600;
  agg.rescan_s = 0.001;
  auto aggregator = Agent::Create(agg);
  ASSERT_TRUE(aggregator.ok()) << aggregator.status().message();
  const std::string url = "http://127.0.0.1:" + std::to_string((*aggregator)->port());
  EXPECT_NE((*aggregator)->Describe().find("accepting host agents' record summaries"), std::string::npos);
  for (int h = 0; h < 4; ++h) {
    AgentOptions host;
    host.watch = {dir / "job"};
    host.db = dir / ("host" + std::to_string(h) + ".duckdb");
    host.listen = "";
    host.hosts = {"node-00" + std::to_string(h)};
    host.export_summaries = dir / ("spool" + std::to_string(h));
    host.ship_summaries = url;
    host.diagnose = false;
    host.rescan_s = 0;
    auto a = Agent::Create(host);
    ASSERT_TRUE(a.ok()) << a.status().message();
    TickReport r = (*a)->Tick();
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_GE(r.summary_files, 1u);
    EXPECT_EQ(r.summaries_shipped, r.summary_files);
    std::error_code ec;
    int left = 0;
    for (auto it = std::filesystem::recursive_directory_iterator(host.export_summaries, ec);
         it != std::filesystem::recursive_directory_iterator(); ++it)
      left += it->is_regular_file() && it->path().extension() == ".parquet";
    EXPECT_EQ(left, 0) << "the spool empties as the aggregator stores its files";
    EXPECT_NE((*a)->MetricsText().find("collscope_agent_summaries_shipped_total"), std::string::npos);
  }
  TickReport r = (*aggregator)->Tick();
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.ingested);
  EXPECT_GT(r.records_stored, 1000u);
  ASSERT_TRUE(r.diagnosed);
  EXPECT_NE((*aggregator)->FindingsJson().find("node-001"), std::string::npos) << (*aggregator)->FindingsJson();
  const std::string metrics = (*aggregator)->MetricsText();
  EXPECT_NE(metrics.find("collscope_agent_summaries_accepted_total 4"), std::string::npos) << metrics;

  // Refused: a path that would leave the folder, a name that is no summary's, a body that is no
  // Parquet file; a file stored again is the same file (a retried PUT), other content a conflict.
  const std::string parquet = "PAR1" + std::string(16, '\0') + "PAR1";
  for (const char* bad : {"/summaries/host=x/../../evil.parquet", "/summaries/../evil.parquet",
                                 "/summaries/host=x/.hidden.parquet", "/summaries/other/1.parquet",
                                 "/summaries/host=x/1.csv"})
    EXPECT_EQ(HttpRequest("PUT", url + bad, {}, parquet, 5000)->status, 400) << bad;
  EXPECT_EQ(HttpRequest("PUT", url + "/summaries/host=x/1.parquet", {}, "not parquet", 5000)->status, 400);
  EXPECT_FALSE(std::filesystem::exists(dir / "evil.parquet"));
  EXPECT_EQ(HttpRequest("PUT", url + "/summaries/host=x/1.parquet", {}, parquet, 5000)->status, 201);
  EXPECT_EQ(HttpRequest("PUT", url + "/summaries/host=x/1.parquet", {}, parquet, 5000)->status, 200);
  EXPECT_EQ(HttpRequest("PUT", url + "/summaries/host=x/1.parquet", {}, "PAR1" + std::string(17, '\0') + "PAR1", 5000)->status, 409);
  // Other content of the same size is a conflict too: acknowledging it would make its sender
  // delete a file the aggregator never stored.
  EXPECT_EQ(HttpRequest("PUT", url + "/summaries/host=x/1.parquet", {}, "PAR1" + std::string(16, '\1') + "PAR1", 5000)->status, 409);
}

// An aggregator that is not there yet: the tick says the shipping failed, the spool keeps the
// file, and a later tick ships it once the aggregator listens.
TEST(Agent, UnshippedSummariesWaitInTheSpoolForTheAggregator) {
  collscope::testing::TempDir dir;
  sim::SimConfig c = DefaultJob(dir / "job", "kind=nic_degrade,host=1,factor=0.25", 6);
  RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  collscope::testing::ReservedLoopbackPort refused;
  AgentOptions host;
  host.watch = {dir / "job"};
  host.db = dir / "host.duckdb";
  host.listen = "";
  host.hosts = {"node-000"};
  host.export_summaries = dir / "spool";
  host.ship_summaries = "http://127.0.0.1:" + std::to_string(refused.port());
  host.diagnose = false;
  host.rescan_s = 0;
  auto a = Agent::Create(host);
  ASSERT_TRUE(a.ok()) << a.status().message();
  TickReport r = (*a)->Tick();
  EXPECT_EQ(r.summary_files, 1u);
  EXPECT_EQ(r.summaries_shipped, 0u);
  EXPECT_NE(r.error.find("ship: "), std::string::npos) << r.error;
  auto spooled = [&] {
    int n = 0;
    for (auto& e : std::filesystem::recursive_directory_iterator(host.export_summaries))
      n += e.is_regular_file() && e.path().extension() == ".parquet";
    return n;
  };
  EXPECT_EQ(spooled(), 1);

  refused.Release();
  AgentOptions agg;
  agg.db = dir / "aggregator.duckdb";
  agg.listen = "127.0.0.1:" + std::to_string(refused.port());
  agg.accept_summaries = dir / "incoming";
  agg.window_s = 3600;
  auto aggregator = Agent::Create(agg);
  ASSERT_TRUE(aggregator.ok()) << aggregator.status().message();
  // A file the aggregator will never take, first in the queue: it stays, and holds back no other.
  {
    std::filesystem::create_directories(host.export_summaries + "/host=node-000");
    std::ofstream(host.export_summaries + "/host=node-000/0000000000000000.parquet") << "not parquet";
  }
  r = (*a)->Tick();
  EXPECT_NE(r.error.find("HTTP 400"), std::string::npos) << r.error;
  EXPECT_EQ(r.summaries_shipped, 1u);
  EXPECT_EQ(spooled(), 1);
  r = (*aggregator)->Tick();
  EXPECT_GT(r.records_stored, 0u) << r.error;
}

TEST(Agent, EveryAlertmanagerOfAnHaPairAndEveryWebhookGetsTheFinding) {
  collscope::testing::TempDir dir;
  sim::SimConfig c = DefaultJob(dir / "job", "kind=nic_degrade,host=1,factor=0.25", 30);
  RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  // One member of the pair is down: the other still gets the alert, and the failure is counted.
  agent::testing::ScriptedPeer down({agent::testing::StatusReply(503)}), up({agent::testing::StatusReply(200)}),
      hook_a({agent::testing::StatusReply(200)}), hook_b({agent::testing::StatusReply(200)});
  AgentOptions o = WatchingTheJob(dir);
  o.window_s = 3600;
  o.alertmanager = {down.url("/"), up.url("/")};
  o.webhook = {hook_a.url("/a"), hook_b.url("/b")};
  auto a = Agent::Create(o);
  ASSERT_TRUE(a.ok()) << a.status().message();
  TickReport r = (*a)->Tick();
  ASSERT_GE(r.raised, 1) << r.error;
  for (const auto* peer : {&down, &up, &hook_a, &hook_b}) {
    ASSERT_EQ(peer->requests().size(), 1u);
    EXPECT_NE(peer->requests()[0].find("node-001"), std::string::npos) << peer->requests()[0];
  }
  EXPECT_EQ(up.requests()[0].rfind("POST /api/v2/alerts ", 0), 0u) << up.requests()[0];
  EXPECT_EQ(hook_b.requests()[0].rfind("POST /b ", 0), 0u) << hook_b.requests()[0];
  EXPECT_NE((*a)->MetricsText().find("collscope_agent_alert_post_errors_total 1\n"), std::string::npos)
      << (*a)->MetricsText();
}

// An agent's first tick over the simulated job `c`, with a scripted Alertmanager: the one alert it
// posted ("" when it posted none or another count, with the failure recorded) and the agent.
struct FirstAlert {
  std::string alert;
  std::unique_ptr<Agent> agent;
};

FirstAlert TickWithAnAlertmanager(const collscope::testing::TempDir& dir, const sim::SimConfig& c) {
  RunSimulation(c);
  agent::testing::ScriptedPeer am({agent::testing::StatusReply(200)});
  AgentOptions o = WatchingTheJob(dir);
  o.window_s = 3600;
  o.alertmanager = {am.url("/")};
  auto a = Agent::Create(o);
  if (!a.ok()) {
    ADD_FAILURE() << a.status().message();
    return {};
  }
  const TickReport r = (*a)->Tick();
  EXPECT_GE(r.raised, 1) << r.error;
  const std::vector<std::string> posted = am.requests();
  EXPECT_EQ(posted.size(), 1u);
  return {posted.size() == 1 ? posted[0] : "", std::move(*a)};
}

// A dead link leaves transfers stuck that both of its ends joined: the hang names no host, and its
// alert and its series point at the suspects as such, never at "job" or at a culprit.
TEST(Agent, AHangTheDataCannotPlaceIsAlertedWithItsSuspects) {
  collscope::testing::TempDir dir;
  FirstAlert t = TickWithAnAlertmanager(dir, DefaultJob(dir / "job", "kind=link_down,host=1,start_step=3", 8));
  ASSERT_TRUE(t.agent);
  EXPECT_NE(t.alert.find("\"kind\":\"hang\""), std::string::npos) << t.alert;
  EXPECT_NE(t.alert.find("node-001"), std::string::npos) << t.alert;
  EXPECT_NE(t.alert.find("\"culprit\":\"not named"), std::string::npos) << t.alert;
  const std::string metrics = t.agent->MetricsText();
  EXPECT_NE(metrics.find("collscope_finding_active{kind=\"hang\",host=\"node-001\"}"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("collscope_finding_active{kind=\"hang\",host=\"job\"}"), std::string::npos) << metrics;
}

// A NIC that 2.29 logs cannot tell from its partners' (no point-to-point record): a slow_network
// symptom whose hosts are suspects, and its alert says so.
TEST(Agent, ASlowNetworksAlertSaysItsHostsAreSuspects) {
  collscope::testing::TempDir dir;
  sim::SimConfig c = DefaultJob(dir / "job", "kind=nic_degrade,host=1,factor=0.1", 30);
  c.inspector.flavor = "2.29";
  FirstAlert t = TickWithAnAlertmanager(dir, c);
  ASSERT_TRUE(t.agent);
  EXPECT_NE(t.alert.find("\"kind\":\"slow_network\""), std::string::npos) << t.alert;
  EXPECT_NE(t.alert.find("\"culprit\":\"not named"), std::string::npos) << t.alert;
}

TEST(Agent, RetentionDeletesRecordsOlderThanItsJobTime) {
  collscope::testing::TempDir dir;
  sim::SimConfig c = FourHostJob(dir / "job", "", 8);
  const sim::SimStats stats = RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  AgentOptions o = WatchingTheJob(dir);
  o.retention_s = 0.1;
  {
    auto a = Agent::Create(o);
    ASSERT_TRUE(a.ok()) << a.status().message();
    const TickReport r = (*a)->Tick();
    ASSERT_TRUE(r.diagnosed) << r.error;
    EXPECT_EQ((*a)->MetricsText().find("collscope_agent_records_deleted_total 0\n"), std::string::npos)
        << "the deletion is counted";
  }
  auto store = Store::Open(o.db, Store::Options::ReadOnly());
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto kept = (*store)->QueryInt("SELECT count(*) FROM records");
  auto old = (*store)->QueryInt(
      "SELECT count(*) FROM records WHERE dump_ts_us < (SELECT max(dump_ts_us) FROM records) - 100000");
  ASSERT_TRUE(kept.ok() && old.ok());
  EXPECT_GT(*kept, 0) << "the newest 0.1 s stay";
  EXPECT_LT(static_cast<uint64_t>(*kept), stats.coll_records + stats.p2p_records) << "older records are gone";
  EXPECT_EQ(*old, 0);
}

TEST(Agent, FoldersAreWalkedEveryRescanEvenWithoutAnEvent) {
  // Files other hosts write to a network filesystem raise no inotify event; the rescan finds them.
  collscope::testing::TempDir dir;
  sim::SimConfig c = FourHostJob(dir / "job", "", 2);
  RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  for (double rescan : {0.0, 0.05}) {
    AgentOptions o;
    o.watch = {dir / "job"};
    o.db = dir / ("agent-" + std::to_string(rescan) + ".duckdb");
    o.listen = "";
    o.rescan_s = rescan;
    auto a = Agent::Create(o);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ASSERT_TRUE((*a)->Tick().ingested) << "the first tick walks the folders";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ((*a)->Tick().ingested, rescan > 0) << "rescan " << rescan;
  }
}

TEST(Agent, AWaitingReaderGetsTheStoreAndTheTickItBlocksIsMadeUpLater) {
  collscope::testing::TempDir dir;
  sim::SimConfig c = FourHostJob(dir / "job", "", 4);
  RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  AgentOptions o = WatchingTheJob(dir);
  // The reader is another process (DuckDB's lock is per process), forked before this process
  // opens the store so that it copies no DuckDB threads; it opens the store when told to.
  int go[2], ready[2], release[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char b = 0;
    if (read(go[0], &b, 1) != 1) _exit(3);
    Store::Options ro = Store::Options::ReadOnly();
    ro.lock_wait_s = 30;
    auto reader = Store::Open(o.db, ro);
    b = reader.ok() && reader->get()->QueryInt("SELECT count(*) FROM records").ok() ? 'y' : 'n';
    if (write(ready[1], &b, 1) != 1) _exit(4);
    if (read(release[0], &b, 1) != 1) _exit(5);
    _exit(reader.ok() ? 0 : 6);
  }
  auto a = Agent::Create(o);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE((*a)->Tick().error.empty());
  // The agent holds its store between ticks; a waiting reader asks for it, and gets it.
  EXPECT_FALSE((*a)->ReleaseStoreIfWanted()) << "nobody asked yet";
  ASSERT_EQ(write(go[1], "g", 1), 1);
  bool released = false;
  for (int i = 0; i < 200 && !released; ++i) {
    released = (*a)->ReleaseStoreIfWanted();
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(released) << "the reader never asked for the store";
  char b = 0;
  ASSERT_EQ(read(ready[0], &b, 1), 1);
  ASSERT_EQ(b, 'y') << "the reader could not read the store the agent let go of";
  // While the reader holds it, a tick is skipped (not failed), and its change waits.
  { std::ofstream(dir / "job/nccl-inspector/extra.log") << "\n"; }
  TickReport r = (*a)->Tick();
  EXPECT_FALSE(r.ran);
  EXPECT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(write(release[1], "x", 1), 1);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int fd : {go[0], go[1], ready[0], ready[1], release[0], release[1]}) close(fd);
  // The agent leaves the store to the reader for a second after letting go of it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  r = (*a)->Tick();
  EXPECT_TRUE(r.ran);
  EXPECT_TRUE(r.ingested) << "the change seen during the skipped tick is ingested now";
}

#ifdef COLLSCOPE_HAVE_STACKS
// A 2-host simulated job with `fault`, eight real Python processes standing in for its ranks
// (rank 5 busy compiling, the others waiting), and an agent watching it that samples them in
// bursts of 1 s.
struct BurstJob {
  collscope::testing::TempDir dir;
  std::vector<std::unique_ptr<stacks::stack_target::Target>> ranks;
  std::unique_ptr<Agent> agent;
};
void StartBurstJob(const std::string& fault, BurstJob* b) {
  sim::SimConfig c = DefaultJob(b->dir / "job", fault, 12);
  c.cluster.hosts = 2;
  RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string job = "agent-burst-" + std::to_string(getpid());
  for (int r = 0; r < 8; ++r) {
    b->ranks.push_back(std::make_unique<stacks::stack_target::Target>(r == 5 ? "compile" : "wait", r, job));
    ASSERT_GT(b->ranks.back()->pid(), 0);
  }
  AgentOptions o = WatchingTheJob(b->dir);
  o.window_s = 3600;
  o.rescan_s = 0;
  o.stacks_job = job;
  o.stacks_burst_s = 1;
  auto a = Agent::Create(o);
  ASSERT_TRUE(a.ok()) << a.status().message();
  b->agent = std::move(*a);
}

// A new hang: the agent samples the job's processes here (COLLSCOPE_JOB) before it raises the
// finding, and the finding says where the rank that never joined was. Eight real Python processes
// stand in for the simulated job's ranks; rank 5 is busy in its own work.
TEST(Agent, ANewHangIsRaisedWithItsRanksStack) {
  REQUIRE_PYTHON();
  BurstJob b;
  StartBurstJob("kind=hang,rank=5,comm=tp,start_step=6", &b);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  Agent* a = b.agent.get();
  TickReport r = a->Tick();
  EXPECT_TRUE(r.error.empty()) << r.error;
  ASSERT_TRUE(r.diagnosed);
  EXPECT_EQ(r.stack_processes, 8) << r.stacks_note;
  const std::string findings = a->FindingsJson();
  const std::string frame =
      "compile_graph (stack_target.py:" + std::to_string(stacks::stack_target::MarkedLine("compile")) + ")";
  EXPECT_NE(findings.find("\"stack_frame.rank5\": \"" + frame), std::string::npos) << findings;
  EXPECT_NE(findings.find("Its stack: in `" + frame), std::string::npos) << findings;
  // The hang is active now: the next tick samples nothing, and its stored stacks still join it.
  r = a->Tick();
  EXPECT_EQ(r.stack_processes, 0);
}

// Retention reaches every series the agent stores, and the stack files it wrote itself leave the
// disk once nothing of theirs is left; a stack file in a watched folder is the user's and stays.
TEST(Agent, RetentionTrimsEverySeriesAndTheAgentsOwnStackFiles) {
  collscope::testing::TempDir dir;
  sim::SimConfig c = FourHostJob(dir / "job", "", 40);
  c.output.steps = true;
  const sim::SimStats stats = RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  AgentOptions o = WatchingTheJob(dir);
  o.retention_s = 0.1;  // the job's steps take 7 ms, its last dump 0.2 s after its last step
  o.stacks_job = "no-such-job-" + std::to_string(getpid());  // samples nothing: files below only
  o.stacks_rate_hz = 1;
  // Stack files as agent/stacks/stack_session.cc writes them: one window long before the job's
  // end, one after it.
  auto stack_file = [](int64_t window_start_us) {
    return "{\"collscope_stacks\":1,\"type\":\"process\",\"host\":\"node-000\",\"pid\":77,\"rank\":0,"
           "\"exe\":\"/usr/bin/python3.11\",\"command\":\"python3 train.py\",\"python\":\"3.11.2\","
           "\"python_unread\":\"\",\"interval_us\":100000,\"native\":false}\n"
           "{\"type\":\"stacks\",\"tid\":77,\"thread\":\"python3\",\"window_start_us\":" +
           std::to_string(window_start_us) + ",\"window_end_us\":" + std::to_string(window_start_us + 500000) +
           ",\"first_us\":" + std::to_string(window_start_us) + ",\"last_us\":" + std::to_string(window_start_us) +
           ",\"count\":5,\"frames\":\"main (train.py:1);wait (train.py:9)\"}\n"
           "{\"type\":\"end\",\"samples\":5,\"failed\":0,\"dropped\":0,\"mean_sample_us\":800,"
           "\"mean_stopped_us\":0,\"max_stopped_us\":0,\"exited\":false}\n";
  };
  const int64_t end_us = c.start_time_us + static_cast<int64_t>(stats.job_duration_s * 1e6);
  const std::string own = o.db + ".stacks";
  std::filesystem::create_directories(own);
  collscope::testing::WriteFile(own + "/old.stacks.jsonl", stack_file(c.start_time_us - 3600000000));
  collscope::testing::WriteFile(own + "/new.stacks.jsonl", stack_file(end_us + 1000000));
  collscope::testing::WriteFile(dir / "job/user.stacks.jsonl", stack_file(c.start_time_us - 3600000000));
  {
    auto a = Agent::Create(o);
    ASSERT_TRUE(a.ok()) << a.status().message();
    const TickReport r = (*a)->Tick();
    ASSERT_TRUE(r.diagnosed) << r.error;
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_NE((*a)->MetricsText().find("collscope_agent_stack_files_deleted_total 1\n"), std::string::npos)
        << (*a)->MetricsText();
  }
  EXPECT_FALSE(std::filesystem::exists(own + "/old.stacks.jsonl")) << "its only window is past the retention";
  EXPECT_TRUE(std::filesystem::exists(own + "/new.stacks.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(dir / "job/user.stacks.jsonl")) << "not the agent's to delete";
  auto store = Store::Open(o.db, Store::Options::ReadOnly());
  ASSERT_TRUE(store.ok()) << store.status().message();
  const std::string horizon = "(SELECT max(dump_ts_us) FROM records) - 100000";
  for (const std::string& q :
       {"SELECT count(*) FROM stack_samples WHERE window_end_us < " + horizon,
        "SELECT count(*) FROM steps WHERE start_us + dur_us < " + horizon,
        "SELECT count(*) FROM step_phases WHERE start_us + wall_us < " + horizon,
        std::string("SELECT count(*) FROM stack_files WHERE path LIKE '%old.stacks.jsonl'")}) {
    auto n = (*store)->QueryInt(q);
    ASSERT_TRUE(n.ok()) << n.status().message();
    EXPECT_EQ(*n, 0) << q;
  }
  auto kept = (*store)->QueryInt("SELECT count(*) FROM stack_samples");
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  EXPECT_EQ(*kept, 1) << "the new file's window alone";
  auto steps = (*store)->QueryInt("SELECT count(*) FROM steps");
  ASSERT_TRUE(steps.ok());
  EXPECT_LT(*steps, 40 * 32) << "the older steps are gone";
}

// A slow phase fires a burst too: a rank slow in its compute, whose process is busy compiling
// while its peers wait, gets its stack as evidence the moment its finding appears.
TEST(Agent, ANewSlowComputeFindingIsRaisedWithWhatItsRanksStackDoes) {
  REQUIRE_PYTHON();
  BurstJob b;
  StartBurstJob("kind=gpu_straggler,rank=5,factor=2", &b);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  Agent* a = b.agent.get();
  TickReport r = a->Tick();
  EXPECT_TRUE(r.error.empty()) << r.error;
  ASSERT_TRUE(r.diagnosed);
  EXPECT_EQ(r.stack_processes, 8) << r.stacks_note;
  const std::string findings = a->FindingsJson();
  // The compiling loop spans two lines: under load a burst may find it on either.
  const size_t at = findings.find("\"stack_grew.rank5\": \"`compile_graph (stack_target.py:");
  ASSERT_NE(at, std::string::npos) << findings;
  const std::string said = findings.substr(at, findings.find("\"", at + 22) - at);
  EXPECT_NE(said.find("% of its samples during it, 0% of its peers' at the time"), std::string::npos) << said;
  r = a->Tick();
  EXPECT_EQ(r.stack_processes, 0) << "an active finding fires no second burst";
}

// Always on: the job's processes' Python stacks are sampled between ticks without stopping them,
// and stored by the ticks; the store keeps them after the agent stops.
TEST(Agent, AlwaysOnStacksAreSampledAndStored) {
  REQUIRE_PYTHON();
  collscope::testing::TempDir dir;
  sim::SimConfig c = DefaultJob(dir / "job", "kind=nic_degrade,host=1,factor=0.25", 8);
  RunSimulation(c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string job = "agent-always-" + std::to_string(getpid());
  stacks::stack_target::Target rank0("wait", 0, job), rank1("compile", 1, job);
  ASSERT_GT(rank0.pid(), 0);
  ASSERT_GT(rank1.pid(), 0);
  AgentOptions o = WatchingTheJob(dir);
  o.window_s = 3600;
  o.rescan_s = 0.5;
  o.stacks_job = job;
  o.stacks_rate_hz = 20;
  o.stacks_window_s = 0.5;
  // Rank 1 writes its step file (the annotation API's) into the watched folder as it trains:
  // its stacks are folded per step window; rank 0, without one, per time window.
  stacks::stack_target::StepFileWriter steps(dir / "job", rank1.pid(), 1, 200);
  {
    auto a = Agent::Create(o);
    ASSERT_TRUE(a.ok()) << a.status().message();
    (*a)->Tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(1800));  // windows close every 0.5 s
    TickReport r = (*a)->Tick();
    EXPECT_TRUE(r.error.empty()) << r.error;
  }
  steps.Stop();
  auto store = Store::Open(o.db);
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto rows = (*store)->Query(
      "SELECT rank, position, sum(count) FROM stack_samples WHERE tid = pid GROUP BY ALL ORDER BY rank");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->rows.size(), 2u);
  EXPECT_EQ(*rows->rows[0][1], "wait_for_peers (stack_target.py)");
  EXPECT_EQ(*rows->rows[1][1], "compile_graph (stack_target.py)");
  EXPECT_GE(std::stoll(*rows->rows[1][2]), 10);
  auto by_step = (*store)->Query(
      "SELECT rank, count(*) FILTER (step_first IS NOT NULL), count(*) FILTER (step_first IS NULL) "
      "FROM stack_samples GROUP BY ALL ORDER BY rank");
  ASSERT_TRUE(by_step.ok()) << by_step.status().message();
  ASSERT_EQ(by_step->rows.size(), 2u);
  EXPECT_EQ(*by_step->rows[0][1], "0");  // rank 0: no step file
  EXPECT_GT(std::stoll(*by_step->rows[1][1]), 0);
  auto native = (*store)->QueryInt("SELECT count(*) FROM stack_files WHERE native");
  ASSERT_TRUE(native.ok());
  EXPECT_EQ(*native, 0) << "always-on sampling stops nothing";
}
#endif

}  // namespace
}  // namespace collscope::agent
