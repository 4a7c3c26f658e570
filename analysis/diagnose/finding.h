// Findings: what `collscope diagnose` reports. One Finding names a fault kind, where it is (root
// cause ranks and hosts, victims, communicators), when, how sure we are, one sentence a person can
// act on, and the numbers behind it. JSON form: docs/findings.md ("collscope.findings.v1").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace collscope::diagnose {

enum class Kind : uint8_t {
  kSlowLink,            // NIC / network degradation of a host or rail
  kSlowCompute,         // GPU or host compute straggler
  kHostStall,           // host-side blocking (JIT compilation, GC, data loader)
  kHang,                // ranks that never joined / got stuck; victims wait on them
  kCollectiveMismatch,  // ranks issued different op / size / dtype for the same collective
  kStepRegression,      // a lasting change point in step time
  kStepJitter,          // transient step-time spikes
  kPipelineBubble,      // a pipeline stage delays its sends; the next stages idle
  kSlowNetwork,         // a degraded network among hosts the data cannot tell apart: no culprit
  kCount
};
std::string_view KindName(Kind k);
bool ParseKind(std::string_view s, Kind* k);
// Kinds that name no culprit by design (docs/findings.md): the step time moved, or a network the
// data cannot localise.
inline bool IsSymptom(Kind k) {
  return k == Kind::kStepRegression || k == Kind::kStepJitter || k == Kind::kSlowNetwork;
}

struct Evidence {
  std::string key;
  double value = 0;
  std::string text;  // used instead of value when not empty
};

struct Finding {
  Kind kind = Kind::kSlowCompute;
  double confidence = 0;          // 0-1
  std::vector<std::string> hosts;
  std::vector<int> ranks;         // global ranks, root causes only
  std::vector<int> victims;       // global ranks affected but not at fault
  std::vector<std::string> comms; // communicator ids as the input prints them (0x...)
  int64_t start_us = 0, end_us = 0;  // wall clock, microseconds since the epoch
  std::string summary;            // one actionable sentence
  std::vector<Evidence> evidence;
  std::string detector;           // which detector produced it

  void Add(std::string key, double v) { evidence.push_back({std::move(key), v, {}}); }
  // The numeric evidence under `key`; `missing` when there is none.
  double Number(std::string_view key, double missing = 0) const {
    for (const Evidence& e : evidence)
      if (e.key == key && e.text.empty()) return e.value;
    return missing;
  }
  void AddText(std::string key, std::string t) { evidence.push_back({std::move(key), 0, std::move(t)}); }
};

// Evidence of a finding that names no culprit where the data cannot tell several hosts apart:
// "host, host, ...", each a suspect and none named as the cause.
inline constexpr const char* kSuspectHosts = "suspect_hosts";
// The hosts a finding names as suspects rather than causes: a slow_network's hosts, or its
// kSuspectHosts evidence.
std::vector<std::string> SuspectHosts(const Finding& f);

// A candidate finding that a cross-check dropped, or a finding folded into another by a merge,
// with the reason: what `diagnose --json` lists under "suppressed" and `--explain` prints.
struct Suppressed {
  Finding finding;
  std::string reason;
};

inline constexpr const char* kFindingsSchema = "collscope.findings.v1";

// {"schema": "collscope.findings.v1", "findings": [...]} with a trailing newline.
std::string FindingsToJson(const std::vector<Finding>& findings);
// The same with a "suppressed" list: [{"reason": ..., "finding": {...}}, ...].
std::string FindingsToJson(const std::vector<Finding>& findings, const std::vector<Suppressed>& suppressed);
// "suppressed or merged (N):" and one line per entry: its kind, ranks or hosts, reason.
std::string SuppressedToText(const std::vector<Suppressed>& suppressed);
std::string FindingToJson(const Finding& f);
// Parses the JSON above (as written by FindingsToJson); corruption when it is no such document.
Status FindingsFromJson(std::string_view json, std::vector<Finding>* out);
// Human-readable lines, one block per finding.
std::string FindingsToText(const std::vector<Finding>& findings);

// Sorted-unique helpers.
void SortUnique(std::vector<int>* v);
void SortUnique(std::vector<std::string>* v);
// "0-3,8,10-11": compact rank lists for sentences.
std::string RankList(const std::vector<int>& ranks, size_t max_items = 12);
std::string FormatTimeUs(int64_t us);  // 2026-01-01T00:00:12.345Z
// One number through a printf format ("%.1f"), for sentences.
std::string Fmt(const char* format, double v);

}  // namespace collscope::diagnose
