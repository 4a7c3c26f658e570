#include "core/readers/otlp_metrics.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/line_reader.h"
#include "core/readers/text.h"

namespace collscope::readers {

namespace {

using std::string_view;
namespace dom = simdjson::dom;

// An OTLP integer: JSON encodes 64-bit ones as decimal strings, some writers as numbers.
std::optional<uint64_t> OtlpUnsigned(dom::element e) {
  if (uint64_t u = 0; e.get_uint64().get(u) == simdjson::SUCCESS) return u;
  string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS || s.empty() || s.size() > 20) return std::nullopt;
  uint64_t u = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), u);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return u;
}

// An AnyValue as a label: strings as they are, numbers and booleans as JSON writes them, anything
// else (arrays, key-value lists, bytes) as its JSON.
std::string AnyValueText(dom::element v) {
  dom::object o;
  if (v.get_object().get(o) != simdjson::SUCCESS) return simdjson::minify(v);
  if (string_view s; o["stringValue"].get_string().get(s) == simdjson::SUCCESS)
    return std::string(s);
  if (dom::element i; o["intValue"].get(i) == simdjson::SUCCESS) {
    string_view s;
    return i.get_string().get(s) == simdjson::SUCCESS ? std::string(s) : simdjson::minify(i);
  }
  for (const char* key : {"doubleValue", "boolValue"})
    if (dom::element x; o[key].get(x) == simdjson::SUCCESS) return simdjson::minify(x);
  return simdjson::minify(v);
}

class Reader {
 public:
  Reader(const std::string& path, PromFile* f) : path_(path), f_(f) {}

  // One ExportMetricsServiceRequest, starting at `line`.
  void Document(dom::element doc, uint64_t line) {
    line_ = line;
    dom::array resources;
    if (doc["resourceMetrics"].get_array().get(resources) != simdjson::SUCCESS)
      return Bad("a JSON document with no resourceMetrics array");
    for (dom::element rm : resources) {
      PromLabels resource;
      dom::array attrs;
      if (rm["resource"]["attributes"].get_array().get(attrs) == simdjson::SUCCESS) {
        std::string why;
        if (!Attributes(attrs, &resource, &why)) {
          Bad("a resource whose attributes cannot be read (" + why + "): its points are not read");
          continue;
        }
      }
      dom::array scopes;
      if (rm["scopeMetrics"].get_array().get(scopes) != simdjson::SUCCESS) continue;
      for (dom::element sm : scopes) {
        dom::array metrics;
        if (sm["metrics"].get_array().get(metrics) != simdjson::SUCCESS) continue;
        for (dom::element m : metrics) Metric(m, resource);
      }
    }
  }

  void Bad(const std::string& why) {
    ++f_->unused;
    if (f_->unused_named.size() < kMaxPromUnusedNamed)
      f_->unused_named.push_back(path_ + ":" + std::to_string(line_) + ": " + why);
  }
  void SetLine(uint64_t line) { line_ = line; }

 private:
  void Metric(dom::element m, const PromLabels& resource) {
    string_view name;
    if (m["name"].get_string().get(name) != simdjson::SUCCESS) return Bad("a metric with no name");
    dom::array points;
    const char* kind = nullptr;
    for (const char* k : {"gauge", "sum"})
      if (m[k]["dataPoints"].get_array().get(points) == simdjson::SUCCESS) {
        kind = k;
        break;
      }
    if (!name.starts_with("nccl_")) {
      const size_t n = kind ? points.size() : 1;
      for (size_t i = 0; i < n; ++i)
        Bad("not an NCCL Inspector metric: " + Clip(name, 80) + " (only nccl_* metrics are read)");
      return;
    }
    if (!kind) {
      for (const char* k : {"histogram", "exponentialHistogram", "summary"})
        if (m[k].error() == simdjson::SUCCESS)
          return Bad(std::string(name) + ": a " + k + ", not read (Inspector sends gauges)");
      return Bad(std::string(name) + ": no gauge or sum data points");
    }
    for (dom::element p : points) Point(std::string(name), p, resource);
  }

  void Point(const std::string& metric, dom::element p, const PromLabels& resource) {
    PromSample x;
    x.line = line_;
    x.metric = metric;
    PromLabels labels;
    dom::array attrs;
    if (p["attributes"].get_array().get(attrs) == simdjson::SUCCESS) {
      std::string why;
      if (!Attributes(attrs, &labels, &why)) return Bad(metric + ": " + why);
    }
    const auto label = [&](string_view key) -> const std::string* {
      for (const auto& [k, v] : labels)
        if (k == key) return &v;
      return nullptr;
    };
    const std::string* node = label("node");
    if (!node) return Bad(metric + ": a point with no node attribute");
    x.node = *node;
    const std::string* version = label("version");
    x.layout = version ? "otlp " + Clip(*version, 16) : "otlp";
    if (double d = 0; p["asDouble"].get_double().get(d) == simdjson::SUCCESS) {
      x.value = d;
    } else if (dom::element i; p["asInt"].get(i) == simdjson::SUCCESS) {
      int64_t v = 0;
      string_view s;
      if (i.get_int64().get(v) != simdjson::SUCCESS &&
          (i.get_string().get(s) != simdjson::SUCCESS ||
           std::from_chars(s.data(), s.data() + s.size(), v).ptr != s.data() + s.size() ||
           s.empty()))
        return Bad(metric + ": asInt \"" + Clip(simdjson::minify(i), 80) + "\" is no integer");
      x.value = static_cast<double>(v);
    } else {
      return Bad(metric + ": a point with no asDouble or asInt value");
    }
    for (const auto& kv : resource) {
      if (label(kv.first)) continue;
      if (labels.size() >= kMaxPromLabels)
        return Bad(metric + ": more than " + std::to_string(kMaxPromLabels) +
                   " attributes with the resource's");
      labels.push_back(kv);
    }
    std::string bad = FillPromColumns(labels, &x);
    if (!x.slurm_job_id)
      if (const std::string* job = label("slurm.job.id")) x.slurm_job_id = *job;
    if (dom::element t; p["timeUnixNano"].get(t) == simdjson::SUCCESS) {
      const std::optional<uint64_t> ns = OtlpUnsigned(t);
      if (ns && *ns / 1000 < static_cast<uint64_t>(kMaxPromTimestampUs))
        x.ts_us = static_cast<int64_t>(*ns / 1000);
      else
        bad += std::string(bad.empty() ? "" : "; ") + "timeUnixNano " +
               Clip(simdjson::minify(t), 80) + " is no nanosecond count below 2^53 us";
    }
    if (!bad.empty()) Bad(metric + ": " + bad + " (stored as NULL)");
    f_->samples.push_back(std::move(x));
  }

  // KeyValue list -> labels, under the textfile reader's bounds.
  static bool Attributes(dom::array attrs, PromLabels* out, std::string* why) {
    for (dom::element a : attrs) {
      string_view key;
      dom::element value;
      if (a["key"].get_string().get(key) != simdjson::SUCCESS)
        return *why = "an attribute with no key", false;
      if (key.size() > kMaxPromLabelBytes)
        return *why = "an attribute key of " + std::to_string(key.size()) + " bytes", false;
      std::string text =
          a["value"].get(value) == simdjson::SUCCESS ? AnyValueText(value) : std::string();
      if (text.size() > kMaxPromLabelBytes)
        return *why = "attribute " + Clip(key, 80) + "'s value is over " +
                      std::to_string(kMaxPromLabelBytes) + " bytes",
               false;
      for (const auto& kv : *out)
        if (kv.first == key) return *why = "attribute " + Clip(key, 80) + " twice", false;
      if (out->size() >= kMaxPromLabels)
        return *why = "more than " + std::to_string(kMaxPromLabels) + " attributes", false;
      out->emplace_back(std::string(key), std::move(text));
    }
    return true;
  }

  std::string path_;
  PromFile* f_;
  uint64_t line_ = 0;
};

std::string TooBig(const std::string& path, uint64_t size) {
  return path + ": not read: " + std::to_string(size) + " bytes, over the " +
         std::to_string(kMaxPromBytes >> 20) + " MiB an OTLP metrics file may have";
}

bool Blank(string_view s) { return s.find_first_not_of(" \t\r\n") == string_view::npos; }

}  // namespace

Result<PromFile> ParseOtlpMetrics(string_view content, const std::string& path) {
  PromFile f;
  f.path = path;
  if (content.size() > kMaxPromBytes) return Status::Corruption(TooBig(path, content.size()));
  Reader r(path, &f);
  f.lines = static_cast<uint64_t>(std::count(content.begin(), content.end(), '\n'));
  bool tail = !content.empty() && content.back() != '\n';
  simdjson::dom::parser parser;
  dom::element doc;
  // A saved request body is one document, whatever its line breaks.
  if (parser.parse(content.data(), content.size()).get(doc) == simdjson::SUCCESS) {
    f.lines += tail;
    r.Document(doc, 1);
    f.layout = PromFileLayout(f.samples);
    return f;
  }
  // A collector's file exporter writes a document per line. A file that does not parse whole and
  // has no line that parses alone is one document that does not parse (a body cut short).
  auto for_each_line = [&](auto&& fn) {
    uint64_t n = 0;
    for (size_t b = 0; b < content.size();) {
      const size_t e = std::min(content.find('\n', b), content.size());
      const string_view line = content.substr(b, e - b);
      ++n;
      b = e + 1;
      if (!Blank(line) && !fn(line, n, e == content.size())) return;
    }
  };
  auto parse = [&](string_view line) {
    return line.size() > kMaxLineBytes ? simdjson::CAPACITY
                                       : parser.parse(line.data(), line.size()).get(doc);
  };
  bool any_line = false;
  int lines_with_text = 0;
  for_each_line([&](string_view line, uint64_t, bool) {
    ++lines_with_text;
    return !(any_line = parse(line) == simdjson::SUCCESS);
  });
  if (!any_line && lines_with_text == 1 && tail) {  // the first request, still being written
    f.incomplete_tail_bytes = content.size() - (content.find_last_of('\n') + 1);
    f.lines = static_cast<uint64_t>(std::count(content.begin(), content.end(), '\n'));
    return f;
  }
  if (!any_line) {
    r.SetLine(1);
    r.Bad(std::string("not a JSON document: ") +
          simdjson::error_message(parser.parse(content.data(), content.size()).error()));
    f.layout = PromFileLayout(f.samples);
    return f;
  }
  for_each_line([&](string_view line, uint64_t n, bool last_unended) {
    r.SetLine(n);
    const auto err = parse(line);
    if (err == simdjson::SUCCESS) {
      r.Document(doc, n);
    } else if (last_unended) {
      f.incomplete_tail_bytes = line.size();
      tail = false;  // not read
    } else if (err == simdjson::CAPACITY) {
      r.Bad("a line of " + std::to_string(line.size()) + " bytes, over the " +
            std::to_string(kMaxLineBytes >> 20) + " MiB a line may have");
    } else {
      r.Bad(std::string("a line that is no JSON document: ") + simdjson::error_message(err));
    }
    return true;
  });
  f.lines += tail;
  f.layout = PromFileLayout(f.samples);
  return f;
}

Result<PromFile> ReadOtlpMetrics(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status::IOError(path + ": cannot read: " + ec.message());
  if (size > kMaxPromBytes) return Status::Corruption(TooBig(path, size));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path + ": cannot open");
  std::string content(size, '\0');
  in.read(content.data(), static_cast<std::streamsize>(size));
  content.resize(static_cast<size_t>(in.gcount()));
  return ParseOtlpMetrics(content, path);
}

}  // namespace collscope::readers
