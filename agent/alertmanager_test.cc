#include "agent/alertmanager.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <vector>

#include "agent/scripted_peer.h"

namespace collscope::agent {
namespace {

using testing::ScriptedPeer;
using testing::StatusReply;

std::string Body(const std::string& request) {
  return request.substr(request.find("\r\n\r\n") + 4);
}

TEST(FormatRfc3339, IsUtcWithMilliseconds) {
  EXPECT_EQ(FormatRfc3339(1'700'000'000'123'456), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339(-1), "1969-12-31T23:59:59.999Z");
}

TEST(AlertsToJson, WritesEveryFieldAndEscapesEveryString) {
  AlertmanagerAlert alert;
  alert.labels = {{"alertname", "CollscopeSlowLink"}, {"host", "a\"b\\c\n\x01\xff"}};
  alert.annotations = {{"summary", "tab\there"}};
  alert.starts_at_us = 1'700'000'000'000'000;
  alert.ends_at_us = 1'700'000'060'000'000;
  alert.generator_url = "http://collscope.local/r?x=\"1\"";
  AlertmanagerAlert bare;
  bare.labels = {{"alertname", "B"}};
  const std::vector<AlertmanagerAlert> alerts = {alert, bare};
  const std::string json = AlertsToJson(alerts);
  EXPECT_EQ(json,
            "[{\"labels\":{\"alertname\":\"CollscopeSlowLink\",\"host\":\"a\\\"b\\\\c\\n\\u0001"
            "\\\\xff\"},\"annotations\":{\"summary\":\"tab\\there\"},"
            "\"startsAt\":\"2023-11-14T22:13:20.000Z\",\"endsAt\":\"2023-11-14T22:14:20.000Z\","
            "\"generatorURL\":\"http://collscope.local/r?x=\\\"1\\\"\"},"
            "{\"labels\":{\"alertname\":\"B\"},\"annotations\":{}}]");
  // And a JSON parser reads the label back as the text it stands for.
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(simdjson::padded_string(json)).get(doc), simdjson::SUCCESS);
  std::string_view host;
  ASSERT_EQ(doc.at(0)["labels"]["host"].get(host), simdjson::SUCCESS);
  EXPECT_EQ(host, "a\"b\\c\n\x01\\xff");
}

TEST(PostAlerts, PostsTheArrayToTheApiUnderTheGivenPrefix) {
  ScriptedPeer peer({StatusReply(200)});
  AlertmanagerAlert alert;
  alert.labels = {{"alertname", "X"}};
  const std::vector<AlertmanagerAlert> alerts = {alert};
  Status st = PostAlerts(peer.url("/am/"), alerts, 5000);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(peer.requests().size(), 1u);
  const std::string request = peer.requests()[0];
  EXPECT_EQ(request.rfind("POST /am/api/v2/alerts HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_NE(request.find("\r\nContent-Type: application/json\r\n"), std::string::npos);
  EXPECT_EQ(Body(request), AlertsToJson(alerts));
}

TEST(PostAlerts, RefusesAnAlertWithoutLabelsAndSendsNothing) {
  ScriptedPeer peer({StatusReply(200)});
  AlertmanagerAlert named, unnamed;
  named.labels = {{"alertname", "X"}};
  const std::vector<AlertmanagerAlert> alerts = {named, unnamed};
  Status st = PostAlerts(peer.url(""), alerts, 5000);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("alert 1 has no labels"), std::string::npos) << st.message();
  EXPECT_EQ(peer.connections(), 0u);
}

TEST(PostAlerts, ANonSuccessStatusIsAnErrorWithTheReason) {
  ScriptedPeer peer({StatusReply(400, "{\"code\":400,\"message\":\"invalid label set\"}\n")});
  AlertmanagerAlert alert;
  alert.labels = {{"alertname", "X"}};
  const std::vector<AlertmanagerAlert> alerts = {alert};
  Status st = PostAlerts(peer.url(""), alerts, 5000);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("HTTP 400"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("invalid label set"), std::string::npos) << st.message();
}

TEST(ResolveAlerts, PostsTheSameLabelsEndingNow) {
  ScriptedPeer peer({StatusReply(200)});
  AlertmanagerAlert alert;
  alert.labels = {{"alertname", "X"}};
  alert.starts_at_us = 1'700'000'000'000'000;
  const std::vector<AlertmanagerAlert> alerts = {alert};
  Status st = ResolveAlerts(peer.url(""), alerts, 1'700'000'100'000'000, 5000);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(peer.requests().size(), 1u);
  EXPECT_EQ(Body(peer.requests()[0]),
            "[{\"labels\":{\"alertname\":\"X\"},\"annotations\":{},"
            "\"startsAt\":\"2023-11-14T22:13:20.000Z\",\"endsAt\":\"2023-11-14T22:15:00.000Z\"}]");
}

TEST(PostWebhook, PostsTheDocumentAsJson) {
  ScriptedPeer peer({StatusReply(204), StatusReply(500, "down")});
  const std::string json = "{\"raised\":[1]}";
  Status st = PostWebhook(peer.url("/hook"), json, 5000, {{"X-Token", "t"}});
  ASSERT_TRUE(st.ok()) << st.message();
  const std::string request = peer.requests()[0];
  EXPECT_EQ(request.rfind("POST /hook HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_NE(request.find("\r\nContent-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(request.find("\r\nX-Token: t\r\n"), std::string::npos);
  EXPECT_EQ(Body(request), json);
  st = PostWebhook(peer.url("/hook"), json, 5000);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("HTTP 500: down"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace collscope::agent
