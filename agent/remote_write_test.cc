#include "agent/remote_write.h"

#include <gtest/gtest.h>
#include <snappy.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "agent/scripted_peer.h"
#include "tests/servers.h"

namespace collscope::agent {
namespace {

using std::chrono::milliseconds;
using testing::ScriptedPeer;
using testing::StatusReply;

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

PromSeries OneSample(const std::string& metric, const std::string& batch, double value) {
  return PromSeries{{{"__name__", metric}, {"batch", batch}}, {{value, 1'700'000'000'000}}};
}

std::string Body(const std::string& request) {
  return request.substr(request.find("\r\n\r\n") + 4);
}

std::string Uncompressed(const std::string& compressed) {
  std::string out;
  EXPECT_TRUE(snappy::Uncompress(compressed.data(), compressed.size(), &out));
  return out;
}

TEST(EncodeWriteRequest, MatchesTheProtobufWireFormatByteForByte) {
  // Labels given out of order: the encoder must sort them by name.
  const std::vector<PromSeries> series = {{{{"job", "a"}, {"__name__", "up"}}, {{1.0, 1000}}}};
  // Derived by hand from the wire format (tag = field << 3 | wire type):
  //   Label{name="__name__", value="up"}: 0a 08 "__name__" 12 02 "up"            14 bytes
  //   Label{name="job", value="a"}:       0a 03 "job" 12 01 "a"                   8 bytes
  //   Sample{value=1.0, timestamp=1000}:  09 <1.0 as little-endian IEEE 754>
  //                                       10 e8 07 (1000 as a varint)            12 bytes
  //   TimeSeries: 0a 0e <label> 0a 08 <label> 12 0c <sample>                     40 bytes
  //   WriteRequest: 0a 28 <time series>                                          42 bytes
  const std::string expected =
      Bytes({0x0a, 0x28, 0x0a, 0x0e, 0x0a, 0x08}) + "__name__" + Bytes({0x12, 0x02}) + "up" +
      Bytes({0x0a, 0x08, 0x0a, 0x03}) + "job" + Bytes({0x12, 0x01}) + "a" +
      Bytes({0x12, 0x0c, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f, 0x10, 0xe8, 0x07});
  Result<std::string> encoded = EncodeWriteRequest(series);
  ASSERT_TRUE(encoded.ok()) << encoded.status().message();
  EXPECT_EQ(*encoded, expected);
}

TEST(EncodeWriteRequest, DropsEmptyLabelsAndSortsSamplesByTime) {
  const std::vector<PromSeries> messy = {
      {{{"host", ""}, {"__name__", "m"}}, {{2.0, 2000}, {1.0, 1000}}}};
  const std::vector<PromSeries> clean = {{{{"__name__", "m"}}, {{1.0, 1000}, {2.0, 2000}}}};
  EXPECT_EQ(*EncodeWriteRequest(messy), *EncodeWriteRequest(clean));
}

TEST(EncodeWriteRequest, RefusesWhatAReceiverWouldRejectNamingTheSeries) {
  const std::pair<PromSeries, std::string> cases[] = {
      {{{{"job", "a"}}, {{1, 1}}}, "no __name__"},
      {{{{"__name__", "m"}, {"a", "1"}, {"a", "2"}}, {{1, 1}}}, "duplicate label name \"a\""},
      {{{{"__name__", "m"}, {"1a", "x"}}, {{1, 1}}}, "bad label name \"1a\""},
      {{{{"__name__", "m"}, {"a-b", "x"}}, {{1, 1}}}, "bad label name \"a-b\""},
      {{{{"__name__", "bad-metric"}}, {{1, 1}}}, "bad metric name"},
      {{{{"__name__", "m"}, {"host", "h\xff"}}, {{1, 1}}}, "value of label \"host\" is not UTF-8"},
  };
  for (const auto& [series, reason] : cases) {
    const std::vector<PromSeries> batch = {PromSeries{{{"__name__", "fine"}}, {{1, 1}}}, series};
    Result<std::string> encoded = EncodeWriteRequest(batch);
    ASSERT_FALSE(encoded.ok()) << reason;
    EXPECT_NE(encoded.status().message().find("series 1"), std::string::npos)
        << encoded.status().message();
    EXPECT_NE(encoded.status().message().find(reason), std::string::npos)
        << encoded.status().message();
  }
}

TEST(EncodeRemoteWriteBody, IsSnappyBlockFormatOfTheWriteRequest) {
  PromSeries series{{{"__name__", "collscope_busbw"}, {"host", "node-17"}}, {}};
  for (int i = 0; i < 1000; ++i) series.samples.push_back({100.0, 1'700'000'000'000 + i * 1000});
  const std::vector<PromSeries> batch = {series};
  Result<std::string> body = EncodeRemoteWriteBody(batch);
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_TRUE(snappy::IsValidCompressedBuffer(body->data(), body->size()));
  EXPECT_EQ(Uncompressed(*body), *EncodeWriteRequest(batch));
  EXPECT_LT(body->size(), EncodeWriteRequest(batch)->size() / 2);  // repetitive data compresses
}

RemoteWriterOptions FastOptions(const std::string& url) {
  RemoteWriterOptions options;
  options.url = url;
  options.min_backoff_ms = 5;
  options.max_backoff_ms = 20;
  return options;
}

TEST(RemoteWriter, RetriesServerErrorsAndTooManyRequestsThenDelivers) {
  ScriptedPeer peer({StatusReply(503, "overloaded"), StatusReply(429), StatusReply(204)});
  RemoteWriterOptions options = FastOptions(peer.url("/api/v1/write"));
  options.extra_headers = {{"Authorization", "Bearer t"}};
  RemoteWriter writer(options);
  ASSERT_TRUE(writer.Start().ok());
  const std::vector<PromSeries> batch = {OneSample("m", "0", 1), OneSample("m", "1", 2)};
  ASSERT_TRUE(writer.Enqueue(batch).ok());
  writer.Stop(std::chrono::seconds(10));
  const RemoteWriterStats stats = writer.Stats();
  EXPECT_EQ(stats.batches_sent, 1u);
  EXPECT_EQ(stats.samples_sent, 2u);
  EXPECT_EQ(stats.retries, 2u);
  EXPECT_EQ(stats.batches_rejected + stats.batches_failed + stats.batches_dropped, 0u);
  EXPECT_EQ(stats.queued_batches, 0u);
  EXPECT_NE(stats.last_error.find("HTTP 429"), std::string::npos) << stats.last_error;

  const std::vector<std::string> requests = peer.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const std::string& r : requests) {
    EXPECT_EQ(r.rfind("POST /api/v1/write HTTP/1.1\r\n", 0), 0u) << r;
    EXPECT_NE(r.find("\r\nContent-Encoding: snappy\r\n"), std::string::npos);
    EXPECT_NE(r.find("\r\nContent-Type: application/x-protobuf\r\n"), std::string::npos);
    EXPECT_NE(r.find("\r\nX-Prometheus-Remote-Write-Version: 0.1.0\r\n"), std::string::npos);
    EXPECT_NE(r.find("\r\nUser-Agent: "), std::string::npos);
    EXPECT_NE(r.find("\r\nAuthorization: Bearer t\r\n"), std::string::npos);
    EXPECT_EQ(Uncompressed(Body(r)), *EncodeWriteRequest(batch));
  }
}

TEST(RemoteWriter, NeverRetriesAClientError) {
  ScriptedPeer peer({StatusReply(400, "out of bounds\n")});
  RemoteWriter writer(FastOptions(peer.url("/api/v1/write")));
  ASSERT_TRUE(writer.Start().ok());
  const std::vector<PromSeries> batch = {OneSample("m", "0", 1)};
  ASSERT_TRUE(writer.Enqueue(batch).ok());
  writer.Stop(std::chrono::seconds(10));
  const RemoteWriterStats stats = writer.Stats();
  EXPECT_EQ(stats.batches_rejected, 1u);
  EXPECT_EQ(stats.samples_rejected, 1u);
  EXPECT_EQ(stats.retries, 0u);
  EXPECT_EQ(stats.batches_sent, 0u);
  EXPECT_EQ(peer.requests().size(), 1u);
  EXPECT_NE(stats.last_error.find("HTTP 400"), std::string::npos) << stats.last_error;
  EXPECT_NE(stats.last_error.find("out of bounds"), std::string::npos) << stats.last_error;
}

TEST(RemoteWriter, GivesUpOnABatchAfterMaxAttempts) {
  ScriptedPeer peer({StatusReply(500, "label name \"a\" is not unique")});
  RemoteWriterOptions options = FastOptions(peer.url("/api/v1/write"));
  options.max_attempts = 3;
  RemoteWriter writer(options);
  ASSERT_TRUE(writer.Start().ok());
  const std::vector<PromSeries> first = {OneSample("m", "0", 1)};
  const std::vector<PromSeries> second = {OneSample("m", "1", 1)};
  ASSERT_TRUE(writer.Enqueue(first).ok());
  ASSERT_TRUE(writer.Enqueue(second).ok());
  writer.Stop(std::chrono::seconds(10));
  const RemoteWriterStats stats = writer.Stats();
  EXPECT_EQ(stats.batches_failed, 2u);  // the first did not hold up the second forever
  EXPECT_EQ(stats.retries, 4u);
  EXPECT_EQ(peer.requests().size(), 6u);
}

TEST(RemoteWriter, AFullQueueDropsTheOldestBatchesAndCountsThem) {
  ScriptedPeer peer({StatusReply(204)});
  RemoteWriterOptions options = FastOptions(peer.url("/api/v1/write"));
  options.max_queued_samples = 3;
  RemoteWriter writer(options);
  std::vector<std::vector<PromSeries>> batches;
  for (int i = 0; i < 5; ++i) batches.push_back({OneSample("m", std::to_string(i), i)});
  // Not started yet, so nothing leaves the queue while it fills.
  for (const auto& batch : batches) ASSERT_TRUE(writer.Enqueue(batch).ok());
  RemoteWriterStats stats = writer.Stats();
  EXPECT_EQ(stats.batches_dropped, 2u);
  EXPECT_EQ(stats.samples_dropped, 2u);
  EXPECT_EQ(stats.queued_batches, 3u);
  EXPECT_EQ(stats.queued_samples, 3u);
  const std::vector<PromSeries> too_big = {
      PromSeries{{{"__name__", "m"}}, {{1, 1}, {2, 2}, {3, 3}, {4, 4}}}};
  EXPECT_FALSE(writer.Enqueue(too_big).ok());

  ASSERT_TRUE(writer.Start().ok());
  writer.Stop(std::chrono::seconds(10));
  stats = writer.Stats();
  EXPECT_EQ(stats.batches_sent, 3u);
  EXPECT_EQ(stats.batches_dropped, 2u);
  const std::vector<std::string> requests = peer.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {  // the newest three, in order
    EXPECT_EQ(Uncompressed(Body(requests[i])), *EncodeWriteRequest(batches[i + 2])) << i;
  }
}

TEST(RemoteWriter, StopGivesUpAtItsDeadlineAndCountsWhatWasLeft) {
  const collscope::testing::ReservedLoopbackPort nobody_listens;
  ASSERT_NE(nobody_listens.port(), 0);
  RemoteWriterOptions options =
      FastOptions("http://127.0.0.1:" + std::to_string(nobody_listens.port()) + "/w");
  options.max_attempts = 1'000'000;
  RemoteWriter writer(options);
  ASSERT_TRUE(writer.Start().ok());
  const std::vector<PromSeries> first = {OneSample("m", "0", 1)};
  const std::vector<PromSeries> second = {OneSample("m", "1", 1), OneSample("m", "2", 1)};
  ASSERT_TRUE(writer.Enqueue(first).ok());
  ASSERT_TRUE(writer.Enqueue(second).ok());
  std::this_thread::sleep_for(milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  writer.Stop(milliseconds(300));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(250));
  EXPECT_LT(elapsed, milliseconds(2000));
  const RemoteWriterStats stats = writer.Stats();
  EXPECT_EQ(stats.batches_dropped, 2u);
  EXPECT_EQ(stats.samples_dropped, 3u);
  EXPECT_EQ(stats.batches_sent, 0u);
  EXPECT_GE(stats.retries, 2u);
  EXPECT_EQ(stats.last_error, "stopped with 1 unsent batches (2 samples)");
  EXPECT_FALSE(writer.Enqueue(first).ok());  // stopped
}

TEST(RemoteWriter, StartRefusesAnHttpsUrl) {
  RemoteWriter writer(FastOptions("https://prometheus:9090/api/v1/write"));
  Status st = writer.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("https is not supported"), std::string::npos);
}

TEST(RemoteWriter, EnqueueRefusesAnInvalidBatch) {
  RemoteWriter writer(FastOptions("http://127.0.0.1:1/w"));
  const std::vector<PromSeries> batch = {PromSeries{{{"job", "x"}}, {{1, 1}}}};
  EXPECT_FALSE(writer.Enqueue(batch).ok());
  EXPECT_EQ(writer.Stats().queued_batches, 0u);
}

}  // namespace
}  // namespace collscope::agent
