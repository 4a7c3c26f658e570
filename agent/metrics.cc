#include "agent/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace collscope::agent {
namespace {

bool ValidName(const std::string& s, bool colon_allowed) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_allowed && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

Status Validate(const std::vector<MetricFamily>& families) {
  std::set<std::string> names;
  for (const MetricFamily& f : families) {
    if (!ValidName(f.name, true)) return Status::InvalidArgument("invalid metric name '" + f.name + "'");
    if (f.type != "gauge" && f.type != "counter")
      return Status::InvalidArgument(f.name + ": invalid type '" + f.type + "'");
    if (f.type == "counter" && !f.name.ends_with("_total"))
      return Status::Internal(f.name + ": a counter's name ends in _total");
    if (!names.insert(f.name).second) return Status::Internal(f.name + ": family given twice");
    std::set<Labels> seen;
    for (const MetricSeries& s : f.series) {
      std::set<std::string> label_names;
      for (const auto& [k, v] : s.labels) {
        if (!ValidName(k, false) || k.starts_with("__"))
          return Status::InvalidArgument(f.name + ": invalid label name '" + k + "'");
        if (!label_names.insert(k).second)
          return Status::Internal(f.name + ": label '" + k + "' given twice");
      }
      Labels sorted = s.labels;
      std::sort(sorted.begin(), sorted.end());
      if (!seen.insert(sorted).second) return Status::Internal(f.name + ": one label set given twice");
    }
  }
  return Status::Ok();
}

std::string ToPrometheusText(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& f : families) {
    out += "# HELP " + f.name + " " + EscapeHelp(f.help) + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    for (const MetricSeries& s : f.series) {
      out += f.name;
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i)
          out += (i ? "," : "") + s.labels[i].first + "=\"" + EscapeLabelValue(s.labels[i].second) +
                 "\"";
        out += '}';
      }
      out += ' ' + FormatValue(s.value) + '\n';
    }
  }
  return out;
}

std::vector<PromSeries> ToRemoteWriteBatch(const std::vector<MetricFamily>& families,
                                           const std::string& job, int64_t timestamp_ms) {
  std::vector<PromSeries> out;
  for (const MetricFamily& f : families)
    for (const MetricSeries& s : f.series) {
      PromSeries p;
      p.labels.push_back({"__name__", f.name});
      if (!job.empty()) p.labels.push_back({"job", job});
      for (const auto& [k, v] : s.labels)
        if (k != "job" || job.empty()) p.labels.push_back({k, v});
      p.samples.push_back({s.value, timestamp_ms});
      out.push_back(std::move(p));
    }
  return out;
}

size_t SeriesCount(const std::vector<MetricFamily>& families) {
  size_t n = 0;
  for (const MetricFamily& f : families) n += f.series.size();
  return n;
}

}  // namespace collscope::agent
