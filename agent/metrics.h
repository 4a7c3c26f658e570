// Metric families as the agent exposes them: Prometheus text exposition format 0.0.4 for
// /metrics, and the same samples as flat series for remote-write. Names and label names must be
// valid Prometheus identifiers (checked: a bad one is a programming error reported by Validate,
// never an output line that breaks a scrape); label values are escaped.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "agent/remote_write.h"
#include "core/status.h"

namespace collscope::agent {

using Labels = std::vector<std::pair<std::string, std::string>>;

struct MetricSeries {
  Labels labels;
  double value = 0;
};

struct MetricFamily {
  std::string name;  // collscope_..., base units, counters end in _total
  std::string help;
  std::string type;  // "gauge" or "counter"
  std::vector<MetricSeries> series;

  MetricFamily& Add(Labels labels, double value) {
    series.push_back({std::move(labels), value});
    return *this;
  }
};

// Every name, label name and type valid, and no family or (family, labels) repeated.
Status Validate(const std::vector<MetricFamily>& families);

// The text exposition format: # HELP, # TYPE, then one line per series; NaN and infinities as
// Prometheus spells them.
std::string ToPrometheusText(const std::vector<MetricFamily>& families);

// Every series as a remote-write series with one sample at `timestamp_ms`; `job` (when not
// empty) is added as the `job` label, as a scrape would.
std::vector<PromSeries> ToRemoteWriteBatch(const std::vector<MetricFamily>& families,
                                           const std::string& job, int64_t timestamp_ms);

// Number of series in all families (the cardinality budget is checked against it).
size_t SeriesCount(const std::vector<MetricFamily>& families);

}  // namespace collscope::agent
