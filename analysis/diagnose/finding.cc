#include "analysis/diagnose/finding.h"

#include "capture/common/json_escape.h"
#include "core/readers/text.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace collscope::diagnose {
namespace {

constexpr std::string_view kNames[] = {"slow_link",       "slow_compute",   "host_stall",
                                       "hang",            "collective_mismatch",
                                       "step_regression", "step_jitter",    "pipeline_bubble",
                                       "slow_network"};

void Num(std::string* o, double v) {
  if (!std::isfinite(v)) {
    *o += "null";
    return;
  }
  char b[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(b, sizeof b, "%.0f", v);
  else
    std::snprintf(b, sizeof b, "%.6g", v);
  *o += b;
}

}  // namespace

std::string_view KindName(Kind k) {
  const size_t i = static_cast<size_t>(k);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

bool ParseKind(std::string_view s, Kind* k) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (kNames[i] == s) {
      *k = static_cast<Kind>(i);
      return true;
    }
  return false;
}

void SortUnique(std::vector<int>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}
void SortUnique(std::vector<std::string>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

std::vector<std::string> SuspectHosts(const Finding& f) {
  if (f.kind == Kind::kSlowNetwork) return f.hosts;
  std::vector<std::string> out;
  for (const Evidence& e : f.evidence) {
    if (e.key != kSuspectHosts) continue;
    for (size_t at = 0; at <= e.text.size();) {
      size_t end = e.text.find(", ", at);
      if (end == std::string::npos) end = e.text.size();
      if (end > at) out.push_back(e.text.substr(at, end - at));
      at = end + 2;
    }
  }
  return out;
}

std::string RankList(const std::vector<int>& ranks, size_t max_items) {
  std::vector<int> r = ranks;
  SortUnique(&r);
  std::string o;
  size_t items = 0;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (items == max_items) {
      o += ",... (" + std::to_string(r.size()) + " ranks)";
      break;
    }
    if (!o.empty()) o += ",";
    o += std::to_string(r[i]);
    if (j > i) o += (j == i + 1 ? "," : "-") + std::to_string(r[j]);
    ++items;
    i = j + 1;
  }
  return o;
}

std::string Fmt(const char* format, double v) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

std::string FormatTimeUs(int64_t us) {
  const time_t s = static_cast<time_t>(us / 1000000);
  struct tm tm;
  gmtime_r(&s, &tm);
  char b[64];
  std::snprintf(b, sizeof b, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>((us % 1000000) / 1000));
  return b;
}

std::string FindingToJson(const Finding& f) {
  std::string o = "{\"kind\": ";
  capture::AppendEscapedJsonString(KindName(f.kind), &o);
  o += ", \"confidence\": ";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", std::clamp(f.confidence, 0.0, 1.0));
  o += b;
  o += ", \"hosts\": [";
  for (size_t i = 0; i < f.hosts.size(); ++i) {
    if (i) o += ", ";
    capture::AppendEscapedJsonString(f.hosts[i], &o);
  }
  auto ints = [&](const char* key, const std::vector<int>& v) {
    o += std::string("], \"") + key + "\": [";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) o += ", ";
      o += std::to_string(v[i]);
    }
  };
  ints("ranks", f.ranks);
  ints("victims", f.victims);
  o += "], \"comms\": [";
  for (size_t i = 0; i < f.comms.size(); ++i) {
    if (i) o += ", ";
    capture::AppendEscapedJsonString(f.comms[i], &o);
  }
  o += "], \"start_us\": " + std::to_string(f.start_us) + ", \"end_us\": " + std::to_string(f.end_us);
  o += ", \"summary\": ";
  capture::AppendEscapedJsonString(f.summary, &o);
  o += ", \"detector\": ";
  capture::AppendEscapedJsonString(f.detector, &o);
  o += ", \"evidence\": {";
  for (size_t i = 0; i < f.evidence.size(); ++i) {
    if (i) o += ", ";
    capture::AppendEscapedJsonString(f.evidence[i].key, &o);
    o += ": ";
    if (!f.evidence[i].text.empty())
      capture::AppendEscapedJsonString(f.evidence[i].text, &o);
    else
      Num(&o, f.evidence[i].value);
  }
  o += "}}";
  return o;
}

std::string FindingsToJson(const std::vector<Finding>& findings) {
  std::string o = "{\"schema\": \"";
  o += kFindingsSchema;
  o += "\", \"findings\": [";
  for (size_t i = 0; i < findings.size(); ++i) o += (i ? ",\n  " : "\n  ") + FindingToJson(findings[i]);
  o += findings.empty() ? "]}\n" : "\n]}\n";
  return o;
}

std::string FindingsToJson(const std::vector<Finding>& findings, const std::vector<Suppressed>& suppressed) {
  std::string o = FindingsToJson(findings);
  o.resize(o.size() - 2);  // "}\n"
  o += ", \"suppressed\": [";
  for (size_t i = 0; i < suppressed.size(); ++i) {
    o += i ? ",\n  {\"reason\": " : "\n  {\"reason\": ";
    capture::AppendEscapedJsonString(suppressed[i].reason, &o);
    o += ", \"finding\": " + FindingToJson(suppressed[i].finding) + "}";
  }
  o += suppressed.empty() ? "]}\n" : "\n]}\n";
  return o;
}

// What the logs put in a finding (host and communicator names, phase names, a reason quoting a
// value) reaches a terminal: printed through readers::Printable.
using readers::Printable;

std::string SuppressedToText(const std::vector<Suppressed>& suppressed) {
  if (suppressed.empty()) return "suppressed or merged: none\n";
  std::string o = "suppressed or merged (" + std::to_string(suppressed.size()) + "):\n";
  for (const Suppressed& s : suppressed) {
    const Finding& f = s.finding;
    o += "  - [" + std::string(KindName(f.kind)) + ", " + f.detector + "] ";
    if (!f.ranks.empty()) o += "ranks " + RankList(f.ranks);
    else if (!f.hosts.empty()) o += "hosts " + Printable(f.hosts[0]) + (f.hosts.size() > 1 ? " +" + std::to_string(f.hosts.size() - 1) : "");
    else o += "no root cause named";
    o += ", " + FormatTimeUs(f.start_us) + " .. " + FormatTimeUs(f.end_us) + ": " + Printable(s.reason) + "\n";
  }
  return o;
}

Status FindingsFromJson(std::string_view json, std::vector<Finding>* out) {
  simdjson::dom::parser parser;
  simdjson::padded_string buf(json);
  simdjson::dom::element root;
  if (auto e = parser.parse(buf).get(root))
    return Status::Corruption(std::string("findings JSON: ") + simdjson::error_message(e));
  std::string_view schema;
  if (root["schema"].get_string().get(schema) || schema != kFindingsSchema)
    return Status::Corruption("findings JSON: schema is not collscope.findings.v1");
  simdjson::dom::array arr;
  if (root["findings"].get_array().get(arr))
    return Status::Corruption("findings JSON: no findings array");
  for (simdjson::dom::element e : arr) {
    Finding f;
    std::string_view s;
    if (e["kind"].get_string().get(s) || !ParseKind(s, &f.kind))
      return Status::Corruption("findings JSON: bad kind");
    double d;
    if (!e["confidence"].get_double().get(d)) f.confidence = d;
    simdjson::dom::array a;
    if (!e["hosts"].get_array().get(a))
      for (auto h : a)
        if (!h.get_string().get(s)) f.hosts.emplace_back(s);
    if (!e["comms"].get_array().get(a))
      for (auto h : a)
        if (!h.get_string().get(s)) f.comms.emplace_back(s);
    int64_t n;
    if (!e["ranks"].get_array().get(a))
      for (auto h : a)
        if (!h.get_int64().get(n)) f.ranks.push_back(static_cast<int>(n));
    if (!e["victims"].get_array().get(a))
      for (auto h : a)
        if (!h.get_int64().get(n)) f.victims.push_back(static_cast<int>(n));
    if (!e["start_us"].get_int64().get(n)) f.start_us = n;
    if (!e["end_us"].get_int64().get(n)) f.end_us = n;
    if (!e["summary"].get_string().get(s)) f.summary = std::string(s);
    if (!e["detector"].get_string().get(s)) f.detector = std::string(s);
    simdjson::dom::object ev;
    if (!e["evidence"].get_object().get(ev))
      for (auto kv : ev) {
        Evidence x;
        x.key = std::string(kv.key);
        if (kv.value.is_string()) x.text = std::string(kv.value.get_string().value_unsafe());
        else if (!kv.value.get_double().get(d)) x.value = d;
        f.evidence.push_back(std::move(x));
      }
    out->push_back(std::move(f));
  }
  return Status::Ok();
}

std::string FindingsToText(const std::vector<Finding>& findings) {
  if (findings.empty()) return "no findings: nothing abnormal found\n";
  std::string o;
  char b[64];
  for (size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    std::snprintf(b, sizeof b, "%zu. [%s, confidence %.2f] ", i + 1, std::string(KindName(f.kind)).c_str(),
                  f.confidence);
    o += b + Printable(f.summary) + "\n";
    // 0 is an unknown time (a RAS report's): never printed as 1970.
    if (f.start_us > 0 || f.end_us > 0)
      o += "   when: " + FormatTimeUs(f.start_us) + " .. " + FormatTimeUs(f.end_us) + "\n";
    else
      o += "   when: not given by its input\n";
    if (!f.hosts.empty()) {
      o += "   hosts:";
      for (size_t k = 0; k < f.hosts.size() && k < 16; ++k) o += " " + Printable(f.hosts[k]);
      if (f.hosts.size() > 16) o += " ... (" + std::to_string(f.hosts.size()) + ")";
      o += "\n";
    }
    if (!f.ranks.empty()) o += "   root-cause ranks: " + RankList(f.ranks) + "\n";
    if (!f.victims.empty()) o += "   victims: " + RankList(f.victims) + "\n";
    if (!f.comms.empty()) {
      o += "   comms:";
      for (size_t k = 0; k < f.comms.size() && k < 8; ++k) o += " " + Printable(f.comms[k]);
      if (f.comms.size() > 8) o += " ... (" + std::to_string(f.comms.size()) + ")";
      o += "\n";
    }
    if (!f.evidence.empty()) {
      o += "   evidence:";
      for (const Evidence& e : f.evidence) {
        o += " " + e.key + "=";
        if (!e.text.empty()) o += Printable(e.text);
        else if (e.value == std::floor(e.value) && std::abs(e.value) < 1e15) {
          // Counts, sizes and sequence numbers read as integers (sn=44791, not 4.479e+04).
          std::snprintf(b, sizeof b, "%lld", static_cast<long long>(e.value));
          o += b;
        } else {
          std::snprintf(b, sizeof b, "%.4g", e.value);
          o += b;
        }
      }
      o += "\n";
    }
  }
  return o;
}

}  // namespace collscope::diagnose
