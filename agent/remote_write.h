// Prometheus Remote Write 1.0 sender: the protobuf WriteRequest encoded by hand, compressed with
// snappy's block format, and POSTed from a background thread with a bounded queue.
//
// Contract:
// * EncodeWriteRequest writes each series' labels sorted by name, drops labels whose value is
//   empty (Prometheus treats them as absent), and sorts samples by timestamp. It refuses, naming
//   the series, what a receiver would reject or silently mangle: no `__name__`, a metric or label
//   name outside the Prometheus grammar, a duplicate label name, a value that is not UTF-8.
// * RemoteWriter::Enqueue never waits on the network: it encodes on the caller's thread and
//   queues; when the queue would exceed max_queued_samples, the oldest batches are dropped (and
//   counted) to make room, so the freshest data survives an outage.
// * The sender thread POSTs one batch at a time. 2xx is success. Connection errors, 5xx and 429
//   are retried with exponential backoff (min_backoff_ms doubling up to max_backoff_ms) until
//   max_attempts, then the batch counts as failed: a receiver that answers 500 to one bad batch
//   forever cannot wedge the queue. Any other status is a permanent rejection, never retried.
// * Stop(deadline) delivers what it can until the deadline, abandons the rest (counted as
//   dropped), and joins; an exchange still in flight at the deadline is cut short.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "agent/http_wire.h"
#include "agent/socket_io.h"
#include "core/status.h"

namespace collscope::agent {

struct PromLabel {
  std::string name;
  std::string value;
};

struct PromSample {
  double value = 0;
  int64_t timestamp_ms = 0;  // since the Unix epoch
};

struct PromSeries {
  std::vector<PromLabel> labels;  // `__name__` included, any order
  std::vector<PromSample> samples;
};

// The protobuf bytes of a WriteRequest holding `series`.
Result<std::string> EncodeWriteRequest(std::span<const PromSeries> series);

// The HTTP body: EncodeWriteRequest compressed with snappy's block format.
Result<std::string> EncodeRemoteWriteBody(std::span<const PromSeries> series);

// Content-Encoding, Content-Type and X-Prometheus-Remote-Write-Version, as the spec requires.
HttpHeaders RemoteWriteHeaders();

struct RemoteWriterOptions {
  std::string url;            // e.g. http://127.0.0.1:9090/api/v1/write
  HttpHeaders extra_headers;  // e.g. Authorization
  size_t max_queued_samples = 500'000;
  int request_timeout_ms = 10'000;
  int min_backoff_ms = 50;
  int max_backoff_ms = 5'000;
  int max_attempts = 10;  // per batch, the first try included
};

struct RemoteWriterStats {
  uint64_t batches_sent = 0;
  uint64_t samples_sent = 0;
  uint64_t retries = 0;          // sends repeated after a retryable failure
  uint64_t batches_dropped = 0;  // pushed out of a full queue, or left at Stop's deadline
  uint64_t samples_dropped = 0;
  uint64_t batches_rejected = 0;  // answered with a status that must not be retried
  uint64_t samples_rejected = 0;
  uint64_t batches_failed = 0;  // still failing after max_attempts
  uint64_t samples_failed = 0;
  uint64_t queued_batches = 0;  // waiting, the one in flight excluded
  uint64_t queued_samples = 0;
  std::string last_error;  // the latest failure of any kind, empty until one happens
};

class RemoteWriter {
 public:
  explicit RemoteWriter(RemoteWriterOptions options);
  ~RemoteWriter();  // Stop(now)
  RemoteWriter(const RemoteWriter&) = delete;
  RemoteWriter& operator=(const RemoteWriter&) = delete;

  // Checks the URL and starts the sender. Batches enqueued before wait for it.
  Status Start();

  // Queues `batch` as one request (a batch without samples is accepted and not sent). Fails for a
  // batch EncodeWriteRequest refuses, one larger than the whole queue, or after Stop.
  Status Enqueue(std::span<const PromSeries> batch);

  void Stop(Deadline deadline);
  void Stop(std::chrono::milliseconds grace) { Stop(SteadyClock::now() + grace); }

  RemoteWriterStats Stats() const;

 private:
  struct Batch {
    std::string body;
    uint64_t samples = 0;
  };
  enum class Outcome { kSent, kRejected, kFailed, kAbandoned };

  void SendLoop();
  Outcome Deliver(const Batch& batch);
  void DropQueuedLocked();

  const RemoteWriterOptions options_;
  const HttpHeaders headers_;
  std::thread thread_;
  UniqueFd cancel_read_, cancel_write_;
  std::mutex stop_mu_;  // serializes Start and Stop

  mutable std::mutex mu_;
  std::condition_variable wake_;  // queue or stop changed
  std::condition_variable finished_cv_;
  std::deque<Batch> queue_;
  bool stopping_ = false;
  bool finished_ = false;
  Deadline stop_deadline_{};
  RemoteWriterStats stats_;
};

}  // namespace collscope::agent
