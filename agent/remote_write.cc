#include "agent/remote_write.h"

#include <fcntl.h>
#include <snappy.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <system_error>
#include <utility>

#include "agent/http.h"
#include "capture/common/json_escape.h"

namespace collscope::agent {
namespace {

// Protobuf wire types (protobuf.dev/programming-guides/encoding).
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;

constexpr size_t kMaxErrorExcerptBytes = 200;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendTag(uint32_t field, uint32_t wire_type, std::string* out) {
  AppendVarint((field << 3) | wire_type, out);
}

void AppendBytesField(uint32_t field, std::string_view bytes, std::string* out) {
  AppendTag(field, kLengthDelimited, out);
  AppendVarint(bytes.size(), out);
  out->append(bytes);
}

void AppendDoubleField(uint32_t field, double value, std::string* out) {
  AppendTag(field, kFixed64, out);
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(bits >> (8 * i)));
}

void AppendInt64Field(uint32_t field, int64_t value, std::string* out) {
  AppendTag(field, kVarint, out);
  AppendVarint(static_cast<uint64_t>(value), out);  // negatives take ten bytes, as in protobuf
}

bool IsLabelName(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool IsMetricName(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  });
}

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
    } else if (const size_t len = capture::Utf8SequenceLength(s, i); len > 0) {
      i += len;
    } else {
      return false;
    }
  }
  return true;
}

std::string Describe(size_t index, std::string_view metric) {
  return "series " + std::to_string(index) +
         (metric.empty() ? std::string() : " (" + std::string(metric.substr(0, 100)) + ")");
}

Status EncodeSeries(size_t index, const PromSeries& series, std::string* out) {
  std::vector<const PromLabel*> labels;
  std::string_view metric;
  for (const PromLabel& label : series.labels) {
    if (label.name == "__name__") metric = label.value;
    if (!label.value.empty()) labels.push_back(&label);
  }
  const std::string what = Describe(index, IsUtf8(metric) ? metric : std::string_view());
  if (metric.empty()) return Status::InvalidArgument(what + ": no __name__ label");
  if (!IsMetricName(metric)) return Status::InvalidArgument(what + ": bad metric name");
  std::sort(labels.begin(), labels.end(),
            [](const PromLabel* a, const PromLabel* b) { return a->name < b->name; });
  std::string message;
  for (size_t i = 0; i < labels.size(); ++i) {
    const PromLabel& label = *labels[i];
    if (!IsLabelName(label.name)) {
      return Status::InvalidArgument(what + ": bad label name \"" + label.name.substr(0, 100) + "\"");
    }
    if (i > 0 && labels[i - 1]->name == label.name) {
      return Status::InvalidArgument(what + ": duplicate label name \"" + label.name + "\"");
    }
    if (!IsUtf8(label.value)) {
      return Status::InvalidArgument(what + ": value of label \"" + label.name + "\" is not UTF-8");
    }
    std::string encoded;
    AppendBytesField(1, label.name, &encoded);
    AppendBytesField(2, label.value, &encoded);
    AppendBytesField(1, encoded, &message);
  }
  std::vector<PromSample> samples = series.samples;
  std::stable_sort(samples.begin(), samples.end(), [](const PromSample& a, const PromSample& b) {
    return a.timestamp_ms < b.timestamp_ms;
  });
  for (const PromSample& sample : samples) {
    std::string encoded;
    AppendDoubleField(1, sample.value, &encoded);
    AppendInt64Field(2, sample.timestamp_ms, &encoded);
    AppendBytesField(2, encoded, &message);
  }
  AppendBytesField(1, message, out);
  return Status::Ok();
}

// The start of a response body, fit for a log line or a metric's label.
std::string Excerpt(std::string_view body) {
  std::string out(body.substr(0, kMaxErrorExcerptBytes));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::chrono::milliseconds Backoff(const RemoteWriterOptions& options, int failed_attempts) {
  int64_t ms = std::max(1, options.min_backoff_ms);
  const int64_t cap = std::max<int64_t>(ms, options.max_backoff_ms);
  for (int i = 1; i < failed_attempts && ms < cap; ++i) ms *= 2;
  return std::chrono::milliseconds(std::min(ms, cap));
}

HttpHeaders Concat(HttpHeaders a, const HttpHeaders& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

Result<std::string> EncodeWriteRequest(std::span<const PromSeries> series) {
  std::string out;
  for (size_t i = 0; i < series.size(); ++i) {
    COLLSCOPE_RETURN_IF_ERROR(EncodeSeries(i, series[i], &out));
  }
  return out;
}

Result<std::string> EncodeRemoteWriteBody(std::span<const PromSeries> series) {
  Result<std::string> request = EncodeWriteRequest(series);
  if (!request.ok()) return request.status();
  std::string compressed;
  snappy::Compress(request->data(), request->size(), &compressed);
  return compressed;
}

HttpHeaders RemoteWriteHeaders() {
  return {{"Content-Encoding", "snappy"},
          {"Content-Type", "application/x-protobuf"},
          {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
}

RemoteWriter::RemoteWriter(RemoteWriterOptions options)
    : options_(std::move(options)),
      headers_(Concat(RemoteWriteHeaders(), options_.extra_headers)) {}

RemoteWriter::~RemoteWriter() { Stop(SteadyClock::now()); }

Status RemoteWriter::Start() {
  std::lock_guard stop_lock(stop_mu_);
  if (thread_.joinable()) return Status::Internal("remote writer already started");
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status::Internal("remote writer stopped");
  }
  if (Result<HttpUrl> url = ParseHttpUrl(options_.url); !url.ok()) return url.status();
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return SystemError("pipe", errno);
  cancel_read_.Reset(pipe_fds[0]);
  cancel_write_.Reset(pipe_fds[1]);
  try {
    thread_ = std::thread(&RemoteWriter::SendLoop, this);
  } catch (const std::system_error& e) {
    return Status::IOError(std::string("cannot start the remote write thread: ") + e.what());
  }
  return Status::Ok();
}

Status RemoteWriter::Enqueue(std::span<const PromSeries> batch) {
  uint64_t samples = 0;
  for (const PromSeries& s : batch) samples += s.samples.size();
  if (samples > options_.max_queued_samples) {
    return Status::InvalidArgument("a batch of " + std::to_string(samples) +
                         " samples is larger than the whole remote write queue (" +
                         std::to_string(options_.max_queued_samples) + ")");
  }
  Result<std::string> body = EncodeRemoteWriteBody(batch);
  if (!body.ok()) return body.status();
  if (samples == 0) return Status::Ok();  // a request without samples would tell nobody anything
  std::lock_guard lock(mu_);
  if (stopping_) return Status::Internal("remote writer stopped");
  while (!queue_.empty() && stats_.queued_samples + samples > options_.max_queued_samples) {
    const Batch& oldest = queue_.front();
    ++stats_.batches_dropped;
    stats_.samples_dropped += oldest.samples;
    --stats_.queued_batches;
    stats_.queued_samples -= oldest.samples;
    stats_.last_error = "remote write queue full: dropped the oldest batch (" +
                        std::to_string(oldest.samples) + " samples)";
    queue_.pop_front();
  }
  queue_.push_back(Batch{std::move(*body), samples});
  ++stats_.queued_batches;
  stats_.queued_samples += samples;
  wake_.notify_all();
  return Status::Ok();
}

void RemoteWriter::Stop(Deadline deadline) {
  std::lock_guard stop_lock(stop_mu_);
  std::unique_lock lock(mu_);
  stop_deadline_ = stopping_ ? std::min(stop_deadline_, deadline) : deadline;
  stopping_ = true;
  wake_.notify_all();
  if (!thread_.joinable()) {
    DropQueuedLocked();
    return;
  }
  if (!finished_cv_.wait_until(lock, deadline, [&] { return finished_; })) {
    const char byte = 1;
    while (write(cancel_write_.get(), &byte, 1) < 0 && errno == EINTR) {
    }
  }
  lock.unlock();
  thread_.join();
}

RemoteWriterStats RemoteWriter::Stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void RemoteWriter::DropQueuedLocked() {
  if (queue_.empty()) return;
  uint64_t samples = 0;
  for (const Batch& b : queue_) samples += b.samples;
  stats_.last_error = "stopped with " + std::to_string(queue_.size()) + " unsent batches (" +
                      std::to_string(samples) + " samples)";
  stats_.batches_dropped += queue_.size();
  stats_.samples_dropped += samples;
  queue_.clear();
  stats_.queued_batches = 0;
  stats_.queued_samples = 0;
}

void RemoteWriter::SendLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) break;
    if (stopping_ && SteadyClock::now() >= stop_deadline_) {
      DropQueuedLocked();
      break;
    }
    const Batch batch = std::move(queue_.front());
    queue_.pop_front();
    --stats_.queued_batches;
    stats_.queued_samples -= batch.samples;
    lock.unlock();
    const Outcome outcome = Deliver(batch);
    lock.lock();
    switch (outcome) {
      case Outcome::kSent:
        ++stats_.batches_sent;
        stats_.samples_sent += batch.samples;
        break;
      case Outcome::kRejected:
        ++stats_.batches_rejected;
        stats_.samples_rejected += batch.samples;
        break;
      case Outcome::kFailed:
        ++stats_.batches_failed;
        stats_.samples_failed += batch.samples;
        break;
      case Outcome::kAbandoned:
        ++stats_.batches_dropped;
        stats_.samples_dropped += batch.samples;
        break;
    }
  }
  finished_ = true;
  finished_cv_.notify_all();
}

RemoteWriter::Outcome RemoteWriter::Deliver(const Batch& batch) {
  const int max_attempts = std::max(1, options_.max_attempts);
  for (int attempt = 1;; ++attempt) {
    Deadline deadline = DeadlineAfter(options_.request_timeout_ms);
    {
      std::lock_guard lock(mu_);
      if (stopping_) deadline = std::min(deadline, stop_deadline_);
    }
    Result<HttpResponse> response =
        HttpRequestUntil("POST", options_.url, headers_, batch.body, deadline, cancel_read_.get());
    std::string error;
    bool retryable = true;
    if (response.ok()) {
      const int status = response->status;
      if (status >= 200 && status < 300) return Outcome::kSent;
      retryable = status == 429 || status >= 500;
      error = "HTTP " + std::to_string(status) + " from " + options_.url + ": " +
              Excerpt(response->body);
    } else {
      error = response.status().message();
    }
    std::unique_lock lock(mu_);
    stats_.last_error = std::move(error);
    if (!retryable) return Outcome::kRejected;
    if (attempt >= max_attempts) return Outcome::kFailed;
    const Deadline retry_at = SteadyClock::now() + Backoff(options_, attempt);
    for (;;) {
      const Deadline now = SteadyClock::now();
      if (stopping_ && now >= stop_deadline_) return Outcome::kAbandoned;
      if (now >= retry_at) break;
      wake_.wait_until(lock, stopping_ ? std::min(retry_at, stop_deadline_) : retry_at);
    }
    ++stats_.retries;
  }
}

}  // namespace collscope::agent
