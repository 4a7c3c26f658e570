// End-to-end: what the agent pushes, read back from the real Debian servers (Prometheus,
// VictoriaMetrics, Alertmanager) run on loopback by tests/servers.h.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "agent/alertmanager.h"
#include "agent/http.h"
#include "agent/remote_write.h"
#include "tests/servers.h"

namespace collscope::agent {
namespace {

using collscope::testing::RealServer;
using collscope::testing::ReservedLoopbackPort;
using collscope::testing::ServerKind;
using std::chrono::milliseconds;
using std::chrono::seconds;

using Labels = std::map<std::string, std::string>;

int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Labels LabelsOf(simdjson::dom::object object) {
  Labels out;
  for (auto field : object) {
    std::string_view value;
    if (field.value.get(value) == simdjson::SUCCESS)
      out[std::string(field.key)] = std::string(value);
  }
  return out;
}

// One series of an instant-query result: its labels and its value.
struct QueriedSample {
  Labels labels;
  double value = 0;
};

// Prometheus' /api/v1/query at the current time.
std::vector<QueriedSample> InstantQuery(const std::string& base_url, const std::string& query) {
  std::vector<QueriedSample> out;
  Result<HttpResponse> r =
      HttpRequest("GET", base_url + "/api/v1/query?query=" + query, {}, "", 10'000);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return out;
  EXPECT_EQ(r->status, 200) << r->body;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  EXPECT_EQ(parser.parse(simdjson::padded_string(r->body)).get(doc), simdjson::SUCCESS) << r->body;
  simdjson::dom::array results;
  if (doc["data"]["result"].get(results) != simdjson::SUCCESS) return out;
  for (simdjson::dom::element item : results) {
    QueriedSample s;
    simdjson::dom::object metric;
    std::string_view value;
    EXPECT_EQ(item["metric"].get(metric), simdjson::SUCCESS);
    EXPECT_EQ(item["value"].at(1).get(value), simdjson::SUCCESS);  // [time, "value"]
    s.labels = LabelsOf(metric);
    s.value = std::stod(std::string(value));
    out.push_back(s);
  }
  return out;
}

std::vector<PromSeries> TwoHosts(int64_t ts_ms) {
  return {{{{"__name__", "collscope_e2e_busbw"}, {"host", "node-1"}, {"job", "train \"42\""}},
           {{42.5, ts_ms}}},
          {{{"job", "train \"42\""}, {"host", "node-2"}, {"__name__", "collscope_e2e_busbw"}},
           {{7.25, ts_ms}}}};
}

void ExpectTwoHosts(const std::map<std::string, QueriedSample>& by_host) {
  ASSERT_EQ(by_host.size(), 2u);
  const Labels node1 = {
      {"__name__", "collscope_e2e_busbw"}, {"host", "node-1"}, {"job", "train \"42\""}};
  EXPECT_EQ(by_host.at("node-1").labels, node1);
  EXPECT_DOUBLE_EQ(by_host.at("node-1").value, 42.5);
  EXPECT_DOUBLE_EQ(by_host.at("node-2").value, 7.25);
}

TEST(Receivers, PrometheusServesRemoteWrittenSamples) {
  RealServer prometheus(ServerKind::kPrometheus);
  COLLSCOPE_START_SERVER_OR_SKIP(prometheus);
  RemoteWriterOptions options;
  options.url = prometheus.url() + "/api/v1/write";
  RemoteWriter writer(options);
  ASSERT_TRUE(writer.Start().ok());
  ASSERT_TRUE(writer.Enqueue(TwoHosts(NowMs())).ok());
  writer.Stop(seconds(20));
  const RemoteWriterStats stats = writer.Stats();
  ASSERT_EQ(stats.samples_sent, 2u) << stats.last_error;

  std::map<std::string, QueriedSample> by_host;
  for (const QueriedSample& s : InstantQuery(prometheus.url(), "collscope_e2e_busbw")) {
    by_host[s.labels.at("host")] = s;
  }
  ExpectTwoHosts(by_host);
}

TEST(Receivers, VictoriaMetricsServesRemoteWrittenSamples) {
  RealServer victoria(ServerKind::kVictoriaMetrics);
  COLLSCOPE_START_SERVER_OR_SKIP(victoria);
  const int64_t ts = NowMs();
  RemoteWriterOptions options;
  options.url = victoria.url() + "/api/v1/write";
  RemoteWriter writer(options);
  ASSERT_TRUE(writer.Start().ok());
  ASSERT_TRUE(writer.Enqueue(TwoHosts(ts)).ok());
  writer.Stop(seconds(20));
  ASSERT_EQ(writer.Stats().samples_sent, 2u) << writer.Stats().last_error;

  // VictoriaMetrics buffers ingested rows for a few seconds; force_flush makes them searchable,
  // and the export reads them back exactly as stored (JSON lines, one per series).
  std::map<std::string, QueriedSample> by_host;
  std::map<std::string, int64_t> timestamps;
  const auto until = std::chrono::steady_clock::now() + seconds(15);
  while (by_host.size() < 2 && std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(HttpRequest("GET", victoria.url() + "/internal/force_flush", {}, "", 5000)->status,
              200);
    Result<HttpResponse> r = HttpRequest(
        "GET", victoria.url() + "/api/v1/export?match[]=collscope_e2e_busbw", {}, "", 5000);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->status, 200) << r->body;
    simdjson::dom::parser parser;
    const simdjson::padded_string body(r->body);  // the stream reads it lazily: keep it alive
    simdjson::dom::document_stream lines;
    ASSERT_EQ(parser.parse_many(body).get(lines), simdjson::SUCCESS);
    for (simdjson::dom::element line : lines) {
      QueriedSample s;
      simdjson::dom::object metric;
      double value = 0;
      int64_t timestamp = 0;
      ASSERT_EQ(line["metric"].get(metric), simdjson::SUCCESS);
      ASSERT_EQ(line["values"].at(0).get(value), simdjson::SUCCESS);
      ASSERT_EQ(line["timestamps"].at(0).get(timestamp), simdjson::SUCCESS);
      s.labels = LabelsOf(metric);
      s.value = value;
      timestamps[s.labels["host"]] = timestamp;
      by_host[s.labels["host"]] = s;
    }
    if (by_host.size() < 2) std::this_thread::sleep_for(milliseconds(500));
  }
  ExpectTwoHosts(by_host);
  EXPECT_EQ(timestamps["node-1"], ts);
}

TEST(Receivers, RemoteWriterRetriesUntilTheReceiverStartsAndKeepsTheNewestBatches) {
  ReservedLoopbackPort receiver_port;  // refused until the receiver starts there
  const uint16_t port = receiver_port.port();
  ASSERT_NE(port, 0);
  RemoteWriterOptions options;
  options.url = "http://127.0.0.1:" + std::to_string(port) + "/api/v1/write";
  options.max_queued_samples = 3;
  options.min_backoff_ms = 50;
  options.max_backoff_ms = 500;
  options.max_attempts = 1'000'000;
  RemoteWriter writer(options);
  const int64_t ts = NowMs();
  for (int i = 0; i < 5; ++i) {
    const std::vector<PromSeries> batch = {
        {{{"__name__", "collscope_e2e_batch"}, {"batch", std::to_string(i)}}, {{double(i), ts}}}};
    ASSERT_TRUE(writer.Enqueue(batch).ok());
  }
  EXPECT_EQ(writer.Stats().samples_dropped, 2u);
  ASSERT_TRUE(writer.Start().ok());
  const auto until = std::chrono::steady_clock::now() + seconds(10);
  while (writer.Stats().retries < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_GE(writer.Stats().retries, 2u) << "no retries while the receiver was down";
  EXPECT_EQ(writer.Stats().batches_sent, 0u);

  receiver_port.Release();
  RealServer prometheus(ServerKind::kPrometheus, port);
  COLLSCOPE_START_SERVER_OR_SKIP(prometheus);
  writer.Stop(seconds(30));
  const RemoteWriterStats stats = writer.Stats();
  EXPECT_EQ(stats.batches_sent, 3u) << stats.last_error;
  EXPECT_EQ(stats.samples_dropped, 2u);
  EXPECT_EQ(stats.batches_failed + stats.batches_rejected, 0u);

  std::map<std::string, double> by_batch;
  for (const QueriedSample& s : InstantQuery(prometheus.url(), "collscope_e2e_batch")) {
    by_batch[s.labels.at("batch")] = s.value;
  }
  const std::map<std::string, double> newest = {{"2", 2.0}, {"3", 3.0}, {"4", 4.0}};
  EXPECT_EQ(by_batch, newest);
}

TEST(Receivers, PrometheusRejectionOfAnOldSampleIsNotRetried) {
  RealServer prometheus(ServerKind::kPrometheus);
  COLLSCOPE_START_SERVER_OR_SKIP(prometheus);
  RemoteWriterOptions options;
  options.url = prometheus.url() + "/api/v1/write";
  options.min_backoff_ms = 10;
  RemoteWriter writer(options);
  ASSERT_TRUE(writer.Start().ok());
  const int64_t now = NowMs();
  const std::vector<PromSeries> fresh = {{{{"__name__", "collscope_e2e_age"}}, {{1, now}}}};
  const std::vector<PromSeries> stale = {
      {{{"__name__", "collscope_e2e_age"}}, {{2, now - 5 * 3600 * 1000}}}};
  ASSERT_TRUE(writer.Enqueue(fresh).ok());
  ASSERT_TRUE(writer.Enqueue(stale).ok());
  writer.Stop(seconds(20));
  const RemoteWriterStats stats = writer.Stats();
  EXPECT_EQ(stats.batches_sent, 1u) << stats.last_error;
  EXPECT_EQ(stats.batches_rejected, 1u);
  EXPECT_EQ(stats.retries, 0u);
  EXPECT_NE(stats.last_error.find("HTTP 400"), std::string::npos) << stats.last_error;
  EXPECT_NE(stats.last_error.find("out of bounds"), std::string::npos) << stats.last_error;
}

// The alerts Alertmanager lists, by alertname.
std::map<std::string, simdjson::dom::element> ListedAlerts(const std::string& base_url,
                                                           simdjson::dom::parser& parser) {
  std::map<std::string, simdjson::dom::element> out;
  Result<HttpResponse> r = HttpRequest("GET", base_url + "/api/v2/alerts", {}, "", 5000);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return out;
  EXPECT_EQ(r->status, 200) << r->body;
  simdjson::dom::array alerts;
  EXPECT_EQ(parser.parse(simdjson::padded_string(r->body)).get(alerts), simdjson::SUCCESS);
  for (simdjson::dom::element alert : alerts) {
    std::string_view name;
    if (alert["labels"]["alertname"].get(name) == simdjson::SUCCESS) out[std::string(name)] = alert;
  }
  return out;
}

TEST(Receivers, AlertmanagerListsAPostedAlertUntilItIsResolved) {
  RealServer alertmanager(ServerKind::kAlertmanager);
  COLLSCOPE_START_SERVER_OR_SKIP(alertmanager);
  AlertmanagerAlert alert;
  alert.labels = {{"alertname", "CollscopeE2E"}, {"host", "node \"7\"\n"}, {"kind", "slow_link"}};
  alert.annotations = {{"summary", "busbw 40% below its peers"}};
  const int64_t started_us = (NowMs() - 60'000) * 1000;
  alert.starts_at_us = started_us;
  alert.generator_url = "http://127.0.0.1/report";
  const std::vector<AlertmanagerAlert> alerts = {alert};
  Status st = PostAlerts(alertmanager.url(), alerts, 5000);
  ASSERT_TRUE(st.ok()) << st.message();

  simdjson::dom::parser parser;
  auto listed = ListedAlerts(alertmanager.url(), parser);
  ASSERT_EQ(listed.count("CollscopeE2E"), 1u);
  simdjson::dom::element got = listed["CollscopeE2E"];
  simdjson::dom::object labels, annotations;
  ASSERT_EQ(got["labels"].get(labels), simdjson::SUCCESS);
  ASSERT_EQ(got["annotations"].get(annotations), simdjson::SUCCESS);
  EXPECT_EQ(LabelsOf(labels), Labels(alert.labels.begin(), alert.labels.end()));
  EXPECT_EQ(LabelsOf(annotations), Labels(alert.annotations.begin(), alert.annotations.end()));
  std::string_view starts_at, generator_url;
  ASSERT_EQ(got["startsAt"].get(starts_at), simdjson::SUCCESS);
  EXPECT_EQ(starts_at, FormatRfc3339(started_us));
  ASSERT_EQ(got["generatorURL"].get(generator_url), simdjson::SUCCESS);
  EXPECT_EQ(generator_url, "http://127.0.0.1/report");

  st = ResolveAlerts(alertmanager.url(), alerts, NowMs() * 1000, 5000);
  ASSERT_TRUE(st.ok()) << st.message();
  std::this_thread::sleep_for(milliseconds(10));  // endsAt must be in the past when listed
  EXPECT_EQ(ListedAlerts(alertmanager.url(), parser).count("CollscopeE2E"), 0u);
}

TEST(Receivers, AlertmanagerRefusalComesBackAsAnError) {
  RealServer alertmanager(ServerKind::kAlertmanager);
  COLLSCOPE_START_SERVER_OR_SKIP(alertmanager);
  AlertmanagerAlert alert;
  alert.labels = {{"bad-name", "x"}};
  const std::vector<AlertmanagerAlert> alerts = {alert};
  Status st = PostAlerts(alertmanager.url(), alerts, 5000);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("HTTP 400"), std::string::npos) << st.message();
}

TEST(Receivers, AServerIsGoneOnceItsHarnessIsDestroyed) {
  pid_t pid = -1;
  {
    RealServer victoria(ServerKind::kVictoriaMetrics);
    COLLSCOPE_START_SERVER_OR_SKIP(victoria);
    pid = victoria.pid();
    ASSERT_GT(pid, 0);
    ASSERT_EQ(HttpRequest("GET", victoria.url() + "/health", {}, "", 5000)->status, 200);
  }
  // Killed and reaped: no such process is left. (Its port is no witness: once freed, a test
  // running beside this one may listen there.)
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

}  // namespace
}  // namespace collscope::agent
