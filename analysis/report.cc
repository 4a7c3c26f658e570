#include "analysis/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include <simdjson.h>

#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "analysis/diagnose/diagnose.h"
#include "analysis/flame_graph.h"
#include "analysis/primitives.h"
#include "analysis/report_assets.h"
#include "capture/common/json_escape.h"
#include "core/readers/stacks.h"
#include "core/stack_profile.h"

namespace collscope {
namespace {

namespace dg = diagnose;

// A JSON string that cannot close the <script> element the report's data sits in.
std::string ScriptJson(std::string_view s) { return capture::JsonQuoted(s, /*html_safe=*/true); }

bool Numeric(duckdb_type t) {
  switch (t) {
    case DUCKDB_TYPE_TINYINT: case DUCKDB_TYPE_SMALLINT: case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_BIGINT: case DUCKDB_TYPE_UTINYINT: case DUCKDB_TYPE_USMALLINT:
    case DUCKDB_TYPE_UINTEGER: case DUCKDB_TYPE_UBIGINT: case DUCKDB_TYPE_FLOAT:
    case DUCKDB_TYPE_DOUBLE: case DUCKDB_TYPE_HUGEINT: case DUCKDB_TYPE_UHUGEINT:
    case DUCKDB_TYPE_DECIMAL:
      return true;
    default:
      return false;
  }
}

// {"columns":[...],"rows":[[...],...]}: compact, numbers unquoted, NULL/NaN/inf as null.
std::string TableJson(const QueryResult& r) {
  std::string out = "{\"columns\":[";
  for (size_t i = 0; i < r.columns.size(); ++i) {
    if (i) out += ',';
    out += ScriptJson(r.columns[i]);
  }
  out += "],\"rows\":[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    out += i ? ",[" : "[";
    for (size_t c = 0; c < r.columns.size(); ++c) {
      if (c) out += ",";
      const auto& v = r.rows[i][c];
      if (!v) {
        out += "null";
      } else if (Numeric(r.types[c])) {
        double d = std::strtod(v->c_str(), nullptr);
        if (!std::isfinite(d)) out += "null";
        else if (v->find_first_not_of("-0123456789") == std::string::npos) out += *v;
        else {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.6g", d);
          out += buf;
        }
      } else {
        out += ScriptJson(*v);
      }
    }
    out += "]";
  }
  return out + "]}";
}

Result<std::string> Primitive(Store& store, const std::string& name, const AnalysisOptions& o,
                              const std::string& where = "", const std::string& order = "") {
  Result<std::string> sql = PrimitiveSql(name, o);
  if (!sql.ok()) return sql.status();
  std::string q = "SELECT * FROM (" + *sql + ") p";
  if (!where.empty()) q += " WHERE " + where;
  if (!order.empty()) q += " ORDER BY " + order;
  Result<QueryResult> r = store.Query(q);
  if (!r.ok()) return r.status().WithPrefix(name + ": ");
  return TableJson(*r);
}

std::string ReadFile(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// A JSON value inside <script type="application/json">: "</" must not appear.
std::string ScriptSafe(std::string s) {
  size_t at = 0;
  while ((at = s.find("</", at)) != std::string::npos) s.replace(at, 2, "<\\/");
  return s;
}

// ---- findings: where they came from ----

struct FindingsSource {
  bool diagnosed = false;     // DiagnoseStore ran on the store
  std::string path;           // else: the findings document they were read from
  std::string error;          // the diagnosis failed: why (the rest of the report still renders)
  dg::InputSummary read;      // what the diagnosis read (diagnosed only)
  std::vector<dg::Finding> findings;
  std::vector<dg::Suppressed> suppressed;
};

// A findings document of `collscope diagnose --json`: its findings and its "suppressed" list.
Status ReadFindingsFile(const std::string& path, FindingsSource* out) {
  bool ok = false;
  const std::string text = ReadFile(path, &ok);
  if (!ok) return Status::IOError(path + ": cannot read the findings document");
  if (Status st = dg::FindingsFromJson(text, &out->findings); !st.ok())
    return st.WithPrefix(path + ": not a findings document (schema collscope.findings.v1): ");
  simdjson::dom::parser parser;
  simdjson::padded_string buf(text);
  simdjson::dom::element root;
  simdjson::dom::array arr;
  if (parser.parse(buf).get(root) || root["suppressed"].get_array().get(arr)) return Status::Ok();
  for (simdjson::dom::element e : arr) {
    std::string_view reason;
    simdjson::dom::element f;
    if (e["finding"].get(f)) continue;
    if (e["reason"].get_string().get(reason)) reason = "";
    // Each entry's finding through the same parser as the findings.
    std::vector<dg::Finding> one;
    const std::string doc = std::string("{\"schema\":\"") + dg::kFindingsSchema + "\",\"findings\":[" +
                            simdjson::minify(f) + "]}";
    Status st = dg::FindingsFromJson(doc, &one);
    if (st.ok() && one.size() != 1) st = Status::Corruption("not one finding");
    if (!st.ok()) return st.WithPrefix(path + ": a suppressed entry is not a finding: ");
    out->suppressed.push_back({std::move(one[0]), std::string(reason)});
  }
  return Status::Ok();
}

// ---- findings: in plain words ----

const char* KindTitle(dg::Kind k) {
  switch (k) {
    case dg::Kind::kSlowLink: return "Slow link (a host's NIC or network path)";
    case dg::Kind::kSlowCompute: return "Slow compute (a GPU or host straggler)";
    case dg::Kind::kHostStall: return "Host stall (CPU-side blocking)";
    case dg::Kind::kHang: return "Hang";
    case dg::Kind::kCollectiveMismatch: return "Collective mismatch";
    case dg::Kind::kStepRegression: return "Step-time regression (a symptom)";
    case dg::Kind::kStepJitter: return "Step-time jitter (a symptom)";
    case dg::Kind::kPipelineBubble: return "Pipeline bubble";
    case dg::Kind::kSlowNetwork: return "Slow network, not localised (a symptom)";
    default: return "Finding";
  }
}

const char* WhatToCheck(dg::Kind k) {
  switch (k) {
    case dg::Kind::kSlowLink:
      return "the host's NICs (link state and speed, error counters: ibstat, ethtool -S), cables and switch port; "
             "drain the host if it persists.";
    case dg::Kind::kSlowCompute:
      return "the GPU's clocks, temperature and throttle reasons (nvidia-smi -q -d PERFORMANCE,CLOCK), ECC errors, "
             "and other processes on the host.";
    case dg::Kind::kHostStall:
      return "CPU-side work on the host: data loader, garbage collection, JIT compilation, checkpoint I/O.";
    case dg::Kind::kHang:
      return "the named ranks' stacks (py-spy dump) and Flight Recorder dumps; the job does not progress until "
             "they are restarted.";
    case dg::Kind::kCollectiveMismatch:
      return "the code path of the named ranks: they issued a different operation, size or type than their peers.";
    case dg::Kind::kStepRegression:
    case dg::Kind::kStepJitter:
      return "the causes other findings name; without one, the data pipeline, checkpointing or a configuration "
             "change at that time.";
    case dg::Kind::kPipelineBubble:
      return "the stage's load (layers per stage) and its sends to the next stage.";
    case dg::Kind::kSlowNetwork:
      return "the suspects' NICs, cables and switch ports; point-to-point records (NCCL_INSPECTOR_ENABLE_P2P=1 or "
             "the collscope profiler plugin) would name the host.";
    default: return "";
  }
}

const char* TierMeaning(const std::string& tier) {
  if (tier == "A") return "NCCL communication records";
  if (tier == "B") return "NCCL records and collscope in-flight state";
  if (tier == "C") return "NCCL records, in-flight state and per-rank step/phase series";
  if (tier == "D") return "NCCL records, step series and GPU kernels";
  if (tier == "-") return "no NCCL records; step series, dumps or kernels only";
  return "nothing usable";
}

std::string Num(double v, int max_decimals = 2) {
  if (!std::isfinite(v)) return "n/a";
  char b[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(b, sizeof b, "%.0f", v);
  } else {
    int d = max_decimals;
    if (std::fabs(v) < 1) d = std::max(d, 3);
    std::snprintf(b, sizeof b, "%.*f", d, v);
  }
  return b;
}

std::string Duration(double us) {
  const double a = std::fabs(us);
  if (a < 1000) return Num(us, 1) + " \xC2\xB5s";
  if (a < 1e6) return Num(us / 1e3, 1) + " ms";
  if (a < 120e6) return Num(us / 1e6, 2) + " s";
  if (a < 7200e6) return Num(us / 60e6, 1) + " min";
  return Num(us / 3600e6, 2) + " h";
}

std::string Bytes(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int i = 0;
  while (std::fabs(b) >= 1024 && i < 5) b /= 1024, ++i;
  return (i ? Num(b, 1) : Num(b, 0)) + " " + u[i];
}

bool EndsWith(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// An evidence key as a name, and its value with its unit, from the key's naming convention
// (docs/findings.md): *_us durations, *share shares, *bytes sizes, growth/slowdown/ratio factors.
struct EvidenceRow {
  std::string name, value, unit;
};
EvidenceRow DescribeEvidence(const dg::Evidence& e) {
  EvidenceRow r;
  std::string key = e.key;
  auto strip = [&](const std::string& suffix) {
    if (EndsWith(key, suffix) && key.size() > suffix.size()) key.resize(key.size() - suffix.size());
  };
  const size_t us_in = key.find("_us_");
  if (!e.text.empty()) {
    r.value = e.text;
  } else if (EndsWith(key, "_us") || us_in != std::string::npos) {
    if (us_in != std::string::npos) key = key.substr(0, us_in) + key.substr(us_in + 3);  // step_us_before
    else strip("_us");
    r.value = Duration(e.value);
    r.unit = "time";
  } else if (EndsWith(key, "_s")) {
    strip("_s");
    r.value = Duration(e.value * 1e6);
    r.unit = "time";
  } else if (EndsWith(key, "share") || key == "comm_share_P" || key == "lowest_P") {
    r.value = Num(100 * e.value, 1) + " %";
    r.unit = "share";
  } else if (EndsWith(key, "bytes")) {
    strip("_bytes");
    r.value = Bytes(e.value);
    r.unit = "size";
  } else if (EndsWith(key, "_gbs")) {
    strip("_gbs");
    r.value = Num(e.value, 1) + " GB/s";
    r.unit = "bandwidth";
  } else if (EndsWith(key, "growth") || EndsWith(key, "slowdown") || EndsWith(key, "ratio") ||
             EndsWith(key, "factor")) {
    r.value = Num(e.value, 2) + "\xC3\x97";
    r.unit = "factor";
  } else if (key == "z_score" || EndsWith(key, "sigma")) {
    r.value = Num(e.value, 1) + " \xCF\x83";
    r.unit = "deviations";
  } else {
    r.value = Num(e.value, 3);
    r.unit = "count";
    if (key.find("rank") != std::string::npos || key.find("step") != std::string::npos ||
        key == "stage" || key == "sn" || key == "collective_seq_id")
      r.unit = "number";
  }
  for (char& c : key)
    if (c == '_') c = ' ';
  while (!key.empty() && key.back() == ' ') key.pop_back();
  r.name = key;
  return r;
}

std::string HostAnchor(const std::string& host) {
  std::string id = "host-";
  for (unsigned char c : host) id += std::isalnum(c) || c == '-' || c == '_' || c == '.' ? static_cast<char>(c) : '_';
  return id;
}

std::string HostLinks(const std::vector<std::string>& hosts, const char* cls, size_t max_items = 8) {
  std::string o;
  for (size_t i = 0; i < hosts.size() && i < max_items; ++i)
    o += (i ? ", " : "") + std::string("<a class=\"") + cls + "\" href=\"#" + HostAnchor(hosts[i]) + "\">" +
         HtmlEscape(hosts[i]) + "</a>";
  if (hosts.size() > max_items) o += " and " + std::to_string(hosts.size() - max_items) + " more";
  return o;
}

std::string Ranks(const std::vector<int>& ranks, size_t max_items = 8) {
  std::string list = dg::RankList(ranks, max_items), o;
  for (char c : list) {
    o += c;
    if (c == ',') o += ' ';
  }
  return o;
}

// "all 248 other ranks", "ranks 0-7, 16-23 (16 ranks)".
std::string VictimsText(const std::vector<int>& victims, const std::vector<int>& culprits, int world) {
  std::vector<int> v = victims, c = culprits;
  dg::SortUnique(&v);
  dg::SortUnique(&c);
  if (v.empty()) return "";
  const bool all_others = world > 0 && static_cast<int>(v.size() + c.size()) == world &&
                          std::none_of(v.begin(), v.end(), [&](int r) { return std::binary_search(c.begin(), c.end(), r); });
  if (all_others) return c.empty() ? "all " + std::to_string(v.size()) + " ranks" :
                                     "all " + std::to_string(v.size()) + " other ranks";
  if (v.size() == 1) return "rank " + std::to_string(v[0]);
  return std::to_string(v.size()) + " ranks: " + Ranks(v);
}

struct CommInfo {
  std::string name;  // comm_name (NCCL 2.30+)
  int n_ranks = 0, nnodes = 0;
};

// A communicator's readable label: the label the finding's summary gives it ("0x5eed (TP group 3
// of PP stage 1)"), else its comm_name, else its size and span ("" when the store lacks it).
std::string CommLabel(const std::string& id, const std::string& summary, const std::map<std::string, CommInfo>& comms) {
  const size_t at = summary.find(id + " (");
  if (at != std::string::npos) {
    const size_t open = at + id.size() + 1;
    int depth = 0;
    for (size_t i = open; i < summary.size(); ++i) {
      if (summary[i] == '(') ++depth;
      if (summary[i] == ')' && --depth == 0) return summary.substr(open + 1, i - open - 1);
    }
  }
  auto it = comms.find(id);
  if (it == comms.end()) return "";
  if (!it->second.name.empty() && it->second.name != "unknown") return it->second.name;
  return std::to_string(it->second.n_ranks) + " ranks on " + std::to_string(it->second.nnodes) +
         (it->second.nnodes == 1 ? " host" : " hosts");
}

// The communicators by label, most frequent first: "DP group 3 (0x5eed)", or "DATA_PARALLEL_GROUP
// (12 communicators)" with the ids in the tooltip.
std::string CommsText(const std::vector<std::string>& ids, const std::string& summary,
                      const std::map<std::string, CommInfo>& comms) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const std::string& id : ids) {
    const std::string label = CommLabel(id, summary, comms);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == label; });
    if (it == groups.end()) groups.push_back({label, {id}});
    else it->second.push_back(id);
  }
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::string o;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (g == 6) {
      o += "; and " + std::to_string(groups.size() - 6) + " more";
      break;
    }
    const auto& [label, members] = groups[g];
    if (g) o += "; ";
    if (members.size() == 1) {
      o += label.empty() ? HtmlEscape(members[0])
                         : HtmlEscape(label) + " <span class=\"muted\">" + HtmlEscape(members[0]) + "</span>";
    } else {
      std::string all;
      for (const std::string& id : members) all += (all.empty() ? "" : " ") + id;
      o += "<span title=\"" + HtmlEscape(all) + "\">" + HtmlEscape(label.empty() ? "unlabelled" : label) +
           " <span class=\"muted\">(" + std::to_string(members.size()) + " communicators)</span></span>";
    }
  }
  return o;
}

std::string ConfidenceWord(double c) { return c >= 0.8 ? "high" : c >= 0.6 ? "medium" : c >= 0.4 ? "low" : "very low"; }

std::string When(int64_t us) {  // "2026-01-01 00:00:12.345 UTC"
  std::string t = dg::FormatTimeUs(us);
  if (t.size() > 1 && t.back() == 'Z') t.pop_back();
  std::replace(t.begin(), t.end(), 'T', ' ');
  return t + " UTC";
}

// Since when and for how long, against the records' span [t0, t1].
std::string WindowText(const dg::Finding& f, int64_t t0, int64_t t1) {
  if (f.start_us <= 0 && f.end_us <= 0) return "not given";
  std::string o = "since " + When(f.start_us);
  if (t0 > 0 && f.start_us >= t0) o += " (+" + Duration(static_cast<double>(f.start_us - t0)) + " into the records)";
  if (f.end_us > f.start_us) {
    o += ", for " + Duration(static_cast<double>(f.end_us - f.start_us));
    // Within a dump interval's slack of the last record: it may still be going on. Past it: a hang
    // that in-flight state files or dumps written after the last record still show.
    const int64_t slack = (t1 - t0) / 100;
    if (t1 > t0 && f.end_us > t1 + slack)
      o += ", until the latest evidence read, past the end of the records";
    else if (t1 > t0 && f.end_us >= t1 - slack)
      o += ", until the end of the records";
  }
  return o;
}

// What the fault cost, in words, from the finding's own evidence: the job's step time where the
// step series measured it, else what its peers or communicators lost. Empty when the evidence
// holds none of these.
std::string ImpactText(const dg::Finding& f) {
  std::vector<std::string> parts;
  const auto has = [&](const char* k) { return !std::isnan(f.Number(k, std::nan(""))); };
  const auto v = [&](const char* k) { return f.Number(k); };
  if (has("job_step_time_rise_pct"))
    parts.push_back("the job's step time rose " + dg::Fmt("%.0f", v("job_step_time_rise_pct")) + "% while it lasted");
  if (has("job_step_spikes"))
    parts.push_back(dg::Fmt("%.0f", v("job_step_spikes")) + " of the job's steps spiked while it lasted");
  if (has("peer_wait_share"))
    parts.push_back("its peers spent " + dg::Fmt("%.1f", 100 * v("peer_wait_share")) +
                    "% of their time waiting for it");
  if (has("bandwidth_share"))
    parts.push_back("its communicators ran at " + dg::Fmt("%.0f", 100 * v("bandwidth_share")) +
                    "% of their usual bandwidth");
  if (has("extra_idle_share"))
    parts.push_back("the receiving stage idled " + dg::Fmt("%.0f", 100 * v("extra_idle_share")) +
                    "% more of each step");
  if (f.kind == dg::Kind::kHostStall && (has("max_stall_us") || has("max_wait_us")))
    parts.push_back("the other ranks stood waiting for up to " +
                    Duration(has("max_stall_us") ? v("max_stall_us") : v("max_wait_us")));
  if (has("compute_growth"))
    parts.push_back("its compute took " + dg::Fmt("%.0f", 100 * v("compute_growth")) + "% longer than usual");
  std::string o;
  for (size_t i = 0; i < parts.size() && i < 2; ++i) o += (i ? "; " : "") + parts[i];
  return o;
}

// One card per (kind, culprit): the first finding in diagnose's order leads, later ones of the
// same kind naming the same hosts and ranks are its other occurrences (never repeated cards).
struct Card {
  std::vector<const dg::Finding*> occurrences;
  int number = 0;
};

std::vector<Card> Cards(const std::vector<dg::Finding>& findings) {
  std::vector<Card> cards;
  std::map<std::string, size_t> by_key;
  for (const dg::Finding& f : findings) {
    std::string key = std::string(dg::KindName(f.kind)) + "|" + dg::RankList(f.ranks, 1 << 20) + "|";
    std::vector<std::string> hosts = f.hosts;
    dg::SortUnique(&hosts);
    for (const auto& h : hosts) key += h + ",";
    // Culprit-less findings of one kind are one card only when they say the same thing.
    if (f.hosts.empty() && f.ranks.empty()) key += "|" + f.summary;
    auto [it, fresh] = by_key.emplace(key, cards.size());
    if (fresh) {
      cards.emplace_back();
      cards.back().number = static_cast<int>(cards.size());
    }
    cards[it->second].occurrences.push_back(&f);
  }
  return cards;
}

// no_chart (CardSeriesJson): null for a card that never has a mini chart (a symptom, a finding
// naming no culprit), empty for one that has it, else why it has none.
std::string CardHtml(const Card& card, int world, int64_t t0, int64_t t1, const std::map<std::string, CommInfo>& comms,
                     const std::string* no_chart) {
  const dg::Finding& f = *card.occurrences[0];
  const bool symptom = dg::IsSymptom(f.kind);
  const std::string n = std::to_string(card.number);
  double conf = 0;
  std::vector<int> victims;
  for (const dg::Finding* o : card.occurrences) {
    conf = std::max(conf, o->confidence);
    victims.insert(victims.end(), o->victims.begin(), o->victims.end());
  }
  std::string h = "<article class=\"finding" + std::string(symptom ? " symptom" : "") + "\" id=\"finding-" + n +
                  "\" data-kind=\"" + std::string(dg::KindName(f.kind)) + "\">";
  h += "<div class=\"head\"><span class=\"num\">#" + n + "</span><span class=\"kind\">" + KindTitle(f.kind) +
       "</span><span class=\"pill " + (conf >= 0.8 ? "bad" : conf >= 0.4 ? "warn" : "low") + "\">confidence " +
       dg::Fmt("%.2f", conf) + " \xC2\xB7 " + ConfidenceWord(conf) + "</span></div>";
  // The culprit, or why there is none.
  h += "<div class=\"culprit-line\">";
  if (symptom) {
    h += "<b>No culprit:</b> a symptom. ";
    if (f.kind == dg::Kind::kSlowNetwork && !f.hosts.empty())
      h += "Suspects (none named as the cause): " + HostLinks(f.hosts, "suspect-name") + ".";
    else
      h += "Look for a cause among the other findings.";
  } else if (!f.hosts.empty() || !f.ranks.empty()) {
    h += "<b>Culprit:</b> ";
    if (!f.hosts.empty()) h += HostLinks(f.hosts, "culprit-name");
    if (!f.ranks.empty())
      h += std::string(f.hosts.empty() ? "" : " ") + "<span class=\"ranks\">(" +
           (f.ranks.size() == 1 ? "rank " : "ranks ") + Ranks(f.ranks) + ")</span>";
  } else if (const std::vector<std::string> suspects = dg::SuspectHosts(f); !suspects.empty()) {
    h += "<b>Culprit:</b> not named: the data cannot tell these hosts apart. Suspects (none named as the cause): " +
         HostLinks(suspects, "suspect-name") + ".";
  } else {
    h += "<b>Culprit:</b> not named (the input cannot tell which rank; see the summary).";
  }
  h += "</div>";
  h += "<p class=\"summary\">" + HtmlEscape(f.summary) + "</p>";
  h += "<dl class=\"facts\">";
  h += "<dt>When</dt><dd>" + HtmlEscape(WindowText(f, t0, t1));
  if (card.occurrences.size() > 1) h += "; " + std::to_string(card.occurrences.size()) + " occurrences (below)";
  h += "</dd>";
  const std::string impact = ImpactText(f);
  if (!impact.empty()) h += "<dt>Impact</dt><dd>" + HtmlEscape(impact) + "</dd>";
  const std::string vt = VictimsText(victims, f.ranks, world);
  if (!vt.empty())
    h += "<dt>Victims</dt><dd>" + HtmlEscape(vt) + (symptom ? "" : " (they wait for it)") + "</dd>";
  if (!f.comms.empty()) {
    h += "<dt>Communicators</dt><dd>" + CommsText(f.comms, f.summary, comms) + "</dd>";
  }
  h += "<dt>What to check</dt><dd>" + HtmlEscape(WhatToCheck(f.kind)) + "</dd>";
  h += "</dl>";
  if (no_chart && no_chart->empty())
    h += "<div class=\"mini-chart\" id=\"card-chart-" + n + "\" data-card=\"" + n +
         "\"></div><p class=\"note\">Exec time of the communicators this finding names (red) against their "
         "sibling communicators (grey), over the siblings' usual time for the same op and size; shaded: the "
         "finding's window.</p>";
  else if (no_chart)
    h += "<p class=\"note\" id=\"card-chart-" + n + "-none\">No chart: " + HtmlEscape(*no_chart) + ".</p>";
  if (!f.evidence.empty()) {
    h += "<table class=\"t evidence\"><thead><tr><th>evidence</th><th>value</th><th>what</th></tr></thead><tbody>";
    for (const dg::Evidence& e : f.evidence) {
      const EvidenceRow r = DescribeEvidence(e);
      h += "<tr><td>" + HtmlEscape(r.name) + "</td><td" + (e.text.empty() ? " class=\"num\"" : "") + ">" +
           HtmlEscape(r.value) + "</td><td class=\"muted\">" +
           HtmlEscape(r.unit) + "</td></tr>";
    }
    h += "</tbody></table>";
  }
  if (card.occurrences.size() > 1) {
    h += "<ul class=\"occurrences\">";
    for (const dg::Finding* o : card.occurrences) {
      h += "<li>" + HtmlEscape(WindowText(*o, t0, t1)) + ", confidence " + dg::Fmt("%.2f", o->confidence);
      if (o->summary != f.summary) h += ": " + HtmlEscape(o->summary);
      h += "</li>";
    }
    h += "</ul>";
  }
  h += "<div class=\"detector muted\">detector " + HtmlEscape(f.detector) + "</div></article>";
  return h;
}

std::string SuppressedHtml(const std::vector<dg::Suppressed>& suppressed) {
  if (suppressed.empty()) return "";
  std::string h = "<details id=\"suppressed\" class=\"suppressed\"><summary>" + std::to_string(suppressed.size()) +
                  " candidate finding" + (suppressed.size() > 1 ? "s" : "") +
                  " suppressed by cross-checks or merged into another, each with its reason</summary>"
                  "<table class=\"t\"><thead><tr><th>kind</th><th>named</th><th>when</th><th>why it is not a "
                  "finding</th></tr></thead><tbody>";
  for (const dg::Suppressed& s : suppressed) {
    const dg::Finding& f = s.finding;
    std::string named;
    if (!f.hosts.empty()) named = HtmlEscape(f.hosts[0]) + (f.hosts.size() > 1 ? " +" + std::to_string(f.hosts.size() - 1) : "");
    if (!f.ranks.empty()) named += (named.empty() ? "" : " ") + std::string("ranks ") + HtmlEscape(Ranks(f.ranks, 4));
    if (named.empty()) named = "no culprit";
    h += "<tr><td>" + std::string(dg::KindName(f.kind)) + "</td><td>" + named + "</td><td>" +
         HtmlEscape(f.start_us > 0 ? When(f.start_us) : "") + "</td><td class=\"wrap\">" + HtmlEscape(s.reason) + "</td></tr>";
  }
  return h + "</tbody></table></details>";
}

// ---- call stacks (collscope stacks) ----

struct StacksRead {
  std::vector<FoldedStack> stacks;  // the run's stored stacks, every thread
  size_t processes = 0, threads = 0;
  int64_t samples = 0, t0 = 0, t1 = 0;  // sum of counts; first and last sample
};

// "rank 5 (pid 4711 on node-001)", "pid 4711 on node-001".
std::string ProcessText(const ProcessStacks& p) {
  const std::string where = "pid " + std::to_string(p.pid) + (p.host.empty() ? "" : " on " + p.host);
  return p.rank >= 0 ? "rank " + std::to_string(p.rank) + " (" + where + ")" : where;
}

// Escaped text with `code` spans (CompareProcesses quotes frames in backticks), first letter up.
std::string SentenceHtml(std::string text) {
  if (!text.empty() && std::islower(static_cast<unsigned char>(text[0])))
    text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t open = text.find('`', at);
    const size_t close = open == std::string::npos ? open : text.find('`', open + 1);
    if (close == std::string::npos) break;
    out += HtmlEscape(text.substr(at, open - at)) + "<code>" +
           HtmlEscape(text.substr(open + 1, close - open - 1)) + "</code>";
    at = close + 1;
  }
  return out + HtmlEscape(text.substr(at));
}

std::string SamplesText(int64_t n) { return std::to_string(n) + (n == 1 ? " sample" : " samples"); }

// The main threads (tid == pid) of the processes in `processes` (inside) or of the others, their
// samples in *samples.
std::vector<FoldedStack> MainThreads(const std::vector<FoldedStack>& stacks,
                                     const std::set<std::pair<std::string, int64_t>>& processes, bool inside,
                                     int64_t* samples) {
  std::vector<FoldedStack> out;
  *samples = 0;
  for (const FoldedStack& s : stacks)
    if (s.tid == s.pid && s.count > 0 && processes.count({s.host, s.pid}) == (inside ? 1u : 0u)) {
      out.push_back(s);
      *samples += s.count;
    }
  return out;
}

// The "Call stacks" section: what was read, the processes compared (CompareProcesses, as
// `collscope stacks` and the hang findings say it), and flame graphs of the main threads: of the
// processes standing apart and of the others, or of all when none stands apart. Static HTML.
// "" when the run has no stacks.
std::string StacksSectionHtml(const StacksRead& sr) {
  if (sr.stacks.empty()) return "";
  std::string h = "<section id=\"stacks\" class=\"section\"><h2>Call stacks</h2>";
  h += "<p class=\"note\" id=\"stacks-read\">Read " + SamplesText(sr.samples) + " of " +
       std::to_string(sr.threads) + " thread" + (sr.threads == 1 ? "" : "s") + " in " +
       std::to_string(sr.processes) + " process" + (sr.processes == 1 ? "" : "es") +
       " (collscope stacks), " + HtmlEscape(When(sr.t0)) + " .. " + HtmlEscape(When(sr.t1)) + " (" +
       HtmlEscape(Duration(static_cast<double>(sr.t1 - sr.t0))) +
       "). The flame graphs show main threads (thread id = process id), callers on top, each frame as "
       "wide as its share of the samples (hover a frame for its samples); frames: "
       "<span class=\"fg-key fg-py\">Python</span> <span class=\"fg-key fg-nat\">native</span>.</p>";
  const StackComparison c = CompareProcesses(sr.stacks);
  h += "<p id=\"stacks-summary\" class=\"stacks-summary\" data-outliers=\"" + std::to_string(c.outliers.size()) +
       "\">" + SentenceHtml(c.summary) + "</p>";
  std::set<std::pair<std::string, int64_t>> apart;
  std::string names;
  for (size_t k = 0; k < c.outliers.size(); ++k) {
    const ProcessStacks& p = c.processes[c.outliers[k]];
    apart.insert({p.host, p.pid});
    if (k < 4) names += (k ? ", " : "") + ProcessText(p);
    else if (k == 4) names += " and " + std::to_string(c.outliers.size() - 4) + " more";
  }
  auto graph = [&h](const std::string& id, const std::string& title, const std::vector<FoldedStack>& stacks) {
    h += "<h3 id=\"" + id + "-title\">" + HtmlEscape(title) + "</h3><div id=\"" + id + "\" class=\"flame-box\">" +
         FlameGraphHtml(stacks) + "</div>";
  };
  int64_t samples = 0;
  if (!apart.empty()) {
    const std::vector<FoldedStack> out = MainThreads(sr.stacks, apart, true, &samples);
    graph("flame-apart",
          std::string(apart.size() == 1 ? "Standing apart: " : "Standing apart, merged: ") + names +
              ", main thread" + (apart.size() == 1 ? "" : "s") + ", " + SamplesText(samples),
          out);
    const std::vector<FoldedStack> others = MainThreads(sr.stacks, apart, false, &samples);
    const size_t n = c.processes.size() - apart.size();
    graph("flame-others",
          "The other " + std::to_string(n) + " process" + (n == 1 ? "" : "es") + ", main threads merged, " +
              SamplesText(samples),
          others);
  } else if (!c.processes.empty()) {
    const std::vector<FoldedStack> all = MainThreads(sr.stacks, apart, false, &samples);
    const size_t n = c.processes.size();
    graph("flame-all",
          n == 1 ? ProcessText(c.processes[0]) + ", main thread, " + SamplesText(samples)
                 : "All " + std::to_string(n) + " processes, main threads merged, " + SamplesText(samples),
          all);
  } else {
    h += "<p class=\"note\">No main thread was sampled: no flame graph.</p>";
  }
  return h + "</section>";
}
}  // namespace

bool ReportHasCharts() { return ReportEchartsJs().size() > 1000; }

// The run to report and its baseline (the first other run holding nccl-tests results, unless
// given).
Status PickRuns(Store& store, const ReportOptions& ro, std::string* run_out, std::string* rid_out,
                std::string* baseline_out) {
  std::string run = ro.run;
  if (run.empty()) {
    Result<std::string> r = store.DefaultRun();
    if (!r.ok()) return r.status();
    run = *r;
  }
  Result<int32_t> run_id = store.RunId(run, false);
  if (!run_id.ok()) return run_id.status();
  std::string rid = std::to_string(*run_id);
  std::string baseline = ro.baseline;
  if (baseline.empty()) {
    Result<QueryResult> b = store.Query(
        "SELECT ru.name FROM runs ru WHERE ru.run_id IN (SELECT run_id FROM nccl_tests_results) "
        "AND ru.run_id <> " + rid + " ORDER BY ru.run_id LIMIT 1");
    if (!b.ok()) return b.status();
    if (!b->rows.empty()) baseline = *b->rows[0][0];
  } else {
    Result<int32_t> b = store.RunId(baseline, false);
    if (!b.ok()) return b.status();
  }

  *run_out = run;
  *rid_out = rid;
  *baseline_out = baseline;
  return Status::Ok();
}

// The time charts' bins: no plot has more than max_bins of them, and short jobs get fine ones.
// t0 and t1 are the run's span.
Status ChooseBins(Store& store, const std::string& rid, const ReportOptions& ro, AnalysisOptions* o, int64_t* t0_out,
                  int64_t* t1_out) {
  // Widen the time bins so no plot has more than max_bins of them.
  Result<QueryResult> span = store.Query(
      "SELECT first_ts_us, last_ts_us FROM run_span WHERE run_id = " + rid);
  if (!span.ok()) return span.status();
  int64_t t0 = 0, t1 = 0;
  if (!span->rows.empty() && span->rows[0][0] && span->rows[0][1]) {
    t0 = std::stoll(*span->rows[0][0]);
    t1 = std::stoll(*span->rows[0][1]);
  }
  double span_s = static_cast<double>(t1 - t0) / 1e6;
  o->bin_s = ro.bin_s;
  if (span_s / o->bin_s > ro.max_bins) {
    const double nice[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200};
    for (double n : nice)
      if (n >= span_s / ro.max_bins) { o->bin_s = std::max(o->bin_s, n); break; }
  }
  // Fine bins for short jobs (the example job lasts seconds).
  if (span_s > 0 && span_s / o->bin_s < 12) o->bin_s = std::max(0.05, span_s / 40);
  *t0_out = t0;
  *t1_out = t1;
  return Status::Ok();
}

// The findings: the report's own diagnosis of the store, unless a findings document is given.
Status LoadFindings(Store& store, const ReportOptions& ro, const std::string& run, FindingsSource* out) {
  FindingsSource& fs = *out;
  if (!ro.findings_path.empty()) {
    fs.path = ro.findings_path;
    COLLSCOPE_RETURN_IF_ERROR(ReadFindingsFile(ro.findings_path, &fs));
  } else {
    dg::DiagnoseOptions d;
    d.run = run;
    d.suppressed = &fs.suppressed;
    Result<std::vector<dg::Finding>> f = dg::DiagnoseStore(store, d, nullptr, &fs.read);
    fs.diagnosed = true;
    if (f.ok()) fs.findings = std::move(*f);
    else fs.error = f.status().message();
  }
  return Status::Ok();
}

// The run's sampled call stacks (collscope stacks), when the store has them.
Status LoadStacks(Store& store, const std::string& run, StacksRead* out) {
  if (!readers::HasStackTables(store)) return Status::Ok();
  Result<std::vector<FoldedStack>> stacks = readers::ReadStoredStacks(store, run);
  if (!stacks.ok()) return stacks.status().WithPrefix("stacks: ");
  std::set<std::pair<std::string, int64_t>> processes;
  std::set<std::tuple<std::string, int64_t, int64_t>> threads;
  for (const FoldedStack& s : *stacks) {
    if (s.count <= 0) continue;
    processes.insert({s.host, s.pid});
    threads.insert({s.host, s.pid, s.tid});
    out->samples += s.count;
    out->t0 = out->t0 == 0 ? s.first_us : std::min(out->t0, s.first_us);
    out->t1 = std::max(out->t1, s.last_us);
  }
  if (out->samples == 0) return Status::Ok();
  out->processes = processes.size();
  out->threads = threads.size();
  out->stacks = std::move(*stacks);
  return Status::Ok();
}

// The communicators the findings name, for their labels.
Status CommLabels(Store& store, const std::string& rid, const std::vector<dg::Finding>& findings,
                  std::map<std::string, CommInfo>* comm_info) {
  std::set<std::string> ids;
  for (const dg::Finding& f : findings) ids.insert(f.comms.begin(), f.comms.end());
  std::string list;
  for (const std::string& id : ids) list += (list.empty() ? "" : ", ") + SqlString(id);
  if (list.empty()) return Status::Ok();
  Result<QueryResult> cm = store.Query("SELECT id, comm_name, n_ranks, nnodes FROM communicators WHERE run_id = " +
                                       rid + " AND id IN (" + list + ")");
  if (!cm.ok()) return cm.status();
  for (const auto& row : cm->rows) {
    if (!row[0]) continue;
    CommInfo& c = (*comm_info)[*row[0]];
    if (row[1]) c.name = *row[1];
    if (row[2]) c.n_ranks = std::stoi(*row[2]);
    if (row[3]) c.nnodes = std::stoi(*row[3]);
  }
  return Status::Ok();
}

// Hosts the cards name: culprits (kinds that name one) and suspects (slow_network), with the
// cards that name them.
struct NamedHosts {
  std::map<std::string, std::vector<int>> culprit_cards, suspect_cards;
  std::vector<std::string> culprit_order;
  std::set<int> culprit_ranks;  // the ranks culprit findings name
};

NamedHosts HostsNamedBy(const std::vector<Card>& cards) {
  NamedHosts n;
  for (const Card& c : cards) {
    const dg::Finding& f = *c.occurrences[0];
    if (dg::IsSymptom(f.kind)) {
      for (const std::string& h : f.hosts) n.suspect_cards[h].push_back(c.number);
      continue;
    }
    n.culprit_ranks.insert(f.ranks.begin(), f.ranks.end());
    for (const std::string& h : f.hosts) {
      if (!n.culprit_cards.count(h)) n.culprit_order.push_back(h);
      n.culprit_cards[h].push_back(c.number);
    }
    for (const std::string& h : dg::SuspectHosts(f)) n.suspect_cards[h].push_back(c.number);
  }
  return n;
}

// The findings' windows (shaded on the time charts), and the hosts they name, as chart data.
std::string BandsJson(const std::vector<Card>& cards) {
  std::string bands = "[";
  for (const Card& c : cards)
    for (const dg::Finding* f : c.occurrences) {
      if (f->end_us <= f->start_us) continue;
      std::string who = f->hosts.empty() ? (f->ranks.empty() ? "" : "ranks " + Ranks(f->ranks, 3)) : f->hosts[0];
      if (f->hosts.size() > 1) who += " +" + std::to_string(f->hosts.size() - 1);
      bands += (bands.size() > 1 ? "," : "") + std::string("{\"card\":") + std::to_string(c.number) +
               ",\"kind\":" + ScriptJson(std::string(dg::KindName(f->kind))) + ",\"symptom\":" +
               (dg::IsSymptom(f->kind) ? "true" : "false") + ",\"label\":" +
               ScriptJson("#" + std::to_string(c.number) + " " + std::string(dg::KindName(f->kind)) +
                          (who.empty() ? "" : " " + who)) +
               ",\"start_us\":" + std::to_string(f->start_us) + ",\"end_us\":" + std::to_string(f->end_us) + "}";
    }
  return bands + "]";
}

// Each culprit card's mini chart (the culprit_series macro): the communicators it names against
// their siblings, in about 40 bins of the run. The first kMaxCardCharts culprit cards: each chart
// is a scan of the records.
constexpr int kMaxCardCharts = 8;

// Charts: card number -> "" when it has one, else why not; symptoms and culprit-less findings are
// not in it.
Result<std::string> CardSeriesJson(Store& store, const std::string& rid, const std::vector<Card>& cards, int64_t t0,
                                   int64_t t1, std::map<int, std::string>* charts) {
  std::string out = "[";
  int tried = 0;
  const int64_t bin_us = std::max<int64_t>(1, (t1 - t0) / 40);
  for (const Card& c : cards) {
    const dg::Finding& f = *c.occurrences[0];
    if (dg::IsSymptom(f.kind) || (f.ranks.empty() && f.hosts.empty())) continue;
    std::string& why_not = (*charts)[c.number];
    if (f.comms.empty()) {
      why_not = "the finding names no communicator to compare";
      continue;
    }
    if (tried++ >= kMaxCardCharts) {
      why_not = "only the first " + std::to_string(kMaxCardCharts) + " culprit cards have one";
      continue;
    }
    std::string comms;
    for (const std::string& id : f.comms) comms += (comms.empty() ? "" : ",") + SqlString(id);
    Result<QueryResult> q = store.Query("SELECT bin_start_us, culprit::INTEGER, ratio, records FROM culprit_series(" +
                                        rid + ", [" + comms + "]::VARCHAR[], " + std::to_string(t0) + ", " +
                                        std::to_string(bin_us) + ")");
    if (!q.ok()) return q.status().WithPrefix("culprit_series: ");
    bool has_culprit = false, has_peers = false;
    for (const auto& row : q->rows) (*row[1] == "1" ? has_culprit : has_peers) = true;
    if (!has_culprit || !has_peers) {
      // No row at all is either: the series needs both the named communicators and their siblings.
      auto named = store.QueryInt("SELECT count(*) FROM communicators WHERE run_id = " + rid + " AND list_contains([" +
                                  comms + "]::VARCHAR[], id)");
      if (!named.ok()) return named.status();
      why_not = *named == 0 ? "the records hold none of the communicators this finding names"
                            : "the communicators this finding names have no siblings in the records to compare "
                              "them with";
      continue;
    }
    out += (out.size() > 1 ? "," : "") + std::string("{\"card\":") + std::to_string(c.number) +
           ",\"start_us\":" + std::to_string(f.start_us) + ",\"end_us\":" + std::to_string(f.end_us) + ",\"rows\":[";
    for (size_t i = 0; i < q->rows.size(); ++i) {
      const auto& row = q->rows[i];
      out += (i ? ",[" : "[") + *row[0] + "," + *row[1] + "," + *row[2] + "," + *row[3] + "]";
    }
    out += "]}";
  }
  return out + "]";
}

std::string NamedHostsJson(const NamedHosts& n) {
  std::string named = "{\"culprits\":[", sep;
  for (const std::string& h : n.culprit_order) named += sep + ScriptJson(h), sep = ",";
  named += "],\"suspects\":[";
  sep.clear();
  for (const auto& [h, _] : n.suspect_cards)
    if (!n.culprit_cards.count(h)) named += sep + ScriptJson(h), sep = ",";
  named += "],\"culprit_ranks\":[";
  sep.clear();
  for (int r : n.culprit_ranks) named += sep + std::to_string(r), sep = ",";
  return named + "]}";
}

// The first screen: what was read, where the findings came from, the culprit.
std::string FirstScreenHtml(Store& store, const std::string& run, const FindingsSource& fs,
                            const std::vector<Card>& cards, int64_t t0, int64_t t1, const StacksRead& sr) {
  std::string summary = "<h1 id=\"title\">Run " + HtmlEscape(run) + "</h1><p id=\"provenance\" class=\"provenance\">";
  summary += "Read run <b>" + HtmlEscape(run) + "</b> of store <code>" + HtmlEscape(store.path()) + "</code>";
  if (fs.diagnosed) {
    const std::string tier = fs.read.Tier();
    if (fs.read.records > 0)
      summary += ": " + std::to_string(fs.read.records) + " NCCL records of " + std::to_string(fs.read.ranks) +
                 " ranks on " + std::to_string(fs.read.hosts) + " hosts, " + HtmlEscape(When(fs.read.t0)) + " .. " +
                 HtmlEscape(When(fs.read.t1));
    summary += ". <span id=\"tier\">Evidence tier <b>" + HtmlEscape(tier.empty() ? "none" : tier) + "</b> (" +
               TierMeaning(tier) + ")</span>. <span id=\"findings-source\">Findings: <b>diagnosed by this report</b> "
               "(collscope diagnose on the store)</span>.";
  } else {
    summary += ". <span id=\"tier\">Evidence tier: <b>not assessed</b> (the findings came from a file; without "
               "--findings the report diagnoses the store and says its tier)</span>. <span id=\"findings-source\">"
               "Findings: <b>read from " + HtmlEscape(fs.path) + "</b>, not diagnosed here</span>.";
  }
  if (!sr.stacks.empty())
    summary += " <span id=\"stacks-read-top\">Call stacks: <b>" + SamplesText(sr.samples) + " of " +
               std::to_string(sr.processes) + " process" + (sr.processes == 1 ? "" : "es") +
               "</b> read (collscope stacks; <a href=\"#stacks\">below</a>)</span>.";
  summary += "</p>";
  if (fs.diagnosed && !fs.read.unusable.empty()) {
    summary += "<details class=\"unusable\"><summary>" + std::to_string(fs.read.unusable.size()) +
               " input(s) the diagnosis could not use</summary><ul>";
    for (const std::string& u : fs.read.unusable) summary += "<li>" + HtmlEscape(u) + "</li>";
    summary += "</ul></details>";
  }
  // The headline: the first card that names a culprit.
  const Card* lead = nullptr;
  for (const Card& c : cards)
    if (!dg::IsSymptom(c.occurrences[0]->kind) && (!c.occurrences[0]->hosts.empty() || !c.occurrences[0]->ranks.empty())) {
      lead = &c;
      break;
    }
  summary += "<p id=\"headline\" class=\"headline\">";
  if (!fs.error.empty()) {
    summary += "The diagnosis failed: " + HtmlEscape(fs.error);
  } else if (lead) {
    const dg::Finding& f = *lead->occurrences[0];
    summary += "Culprit: <a href=\"#finding-" + std::to_string(lead->number) + "\">";
    summary += !f.hosts.empty() ? "<span class=\"culprit-name\">" + HtmlEscape(f.hosts[0]) + "</span>" +
                                      (f.hosts.size() > 1 ? " and " + std::to_string(f.hosts.size() - 1) + " more" : "")
                                : "ranks " + HtmlEscape(Ranks(f.ranks));
    summary += "</a>: " + std::string(KindTitle(f.kind)) + ", " + HtmlEscape(WindowText(f, t0, t1)) +
               ", confidence " + dg::Fmt("%.2f", f.confidence) + ".";
    if (cards.size() > 1) summary += " " + std::to_string(cards.size() - 1) + " more finding(s) below.";
  } else if (!cards.empty()) {
    size_t symptoms = 0;
    for (const Card& c : cards) symptoms += dg::IsSymptom(c.occurrences[0]->kind);
    summary += "No culprit named: " + std::to_string(cards.size()) + " finding(s) below" +
               (symptoms == cards.size() ? ", symptoms." : ", none of which the data can tie to one host or rank.");
  } else {
    summary += "No findings: the diagnosis found nothing wrong in this run.";
  }
  summary += "</p>";

  return summary;
}

// The findings' cards, and what was suppressed.
std::string FindingsHtml(const FindingsSource& fs, const std::vector<Card>& cards, int world, int64_t t0, int64_t t1,
                         const std::map<std::string, CommInfo>& comm_info, const std::map<int, std::string>& charts) {
  // ---- the findings ----
  std::string fhtml = "<p class=\"note\" id=\"confidence-note\">Confidence (0-1) is the detector's score; in the "
                      "evaluation's calibration on simulated faults (docs/diagnosis.md), findings at 0.8 or above "
                      "were almost always right and those below 0.4 mostly wrong.</p>";
  if (!fs.error.empty()) {
    fhtml += "<div class=\"empty\" id=\"no-findings\">The diagnosis failed, so nothing can be said here: " +
             HtmlEscape(fs.error) + "</div>";
  } else if (cards.empty()) {
    fhtml += "<div class=\"empty\" id=\"no-findings\">No findings: the diagnosis found nothing wrong in this run.</div>";
  }
  for (const Card& c : cards) {
    auto it = charts.find(c.number);
    fhtml += CardHtml(c, world, t0, t1, comm_info, it == charts.end() ? nullptr : &it->second);
  }
  fhtml += SuppressedHtml(fs.suppressed);

  return fhtml;
}

// The host table: culprits first and highlighted, each linked to its cards.
std::string HostTableHtml(const QueryResult& hosts_table, const NamedHosts& named) {
  const QueryResult* hosts = &hosts_table;
  const std::map<std::string, std::vector<int>>& culprit_cards = named.culprit_cards;
  const std::map<std::string, std::vector<int>>& suspect_cards = named.suspect_cards;
  const std::vector<std::string>& culprit_order = named.culprit_order;
  std::string htable;
  const int hc = ColumnOf(*hosts, "hostname");
  std::vector<size_t> order;
  for (const std::string& h : culprit_order)
    for (size_t i = 0; i < hosts->rows.size(); ++i)
      if (hosts->rows[i][hc] && *hosts->rows[i][hc] == h) order.push_back(i);
  size_t others = 0;
  for (size_t i = 0; i < hosts->rows.size(); ++i) {
    const std::string h = hosts->rows[i][hc] ? *hosts->rows[i][hc] : "";
    if (culprit_cards.count(h)) continue;
    if (others++ < 12 || suspect_cards.count(h)) order.push_back(i);
  }
  auto cell = [&](size_t i, const char* col) -> std::optional<std::string> {
    const int c = ColumnOf(*hosts, col);
    return c < 0 ? std::nullopt : hosts->rows[i][c];
  };
  auto pill = [](const std::optional<std::string>& v) -> std::string {
    if (!v) return "";
    const double x = std::stod(*v);
    return std::string("<span class=\"pill ") + (x < 0.85 ? "bad" : x < 0.95 ? "warn" : "good") + "\">" +
           Num(x, 3) + "</span>";
  };
  htable = "<table class=\"t hosts\"><thead><tr><th>#</th><th>host</th><th>named by</th><th>processes</th>"
           "<th>records</th><th>cross-host transfers</th><th>all records</th><th>worst kernel</th></tr></thead><tbody>";
  for (size_t i : order) {
    const std::string h = cell(i, "hostname").value_or("");
    std::string cls, by;
    auto links = [&](const std::vector<int>& ns, const char* what) {
      for (int n : ns)
        by += std::string(by.empty() ? "" : " ") + "<a href=\"#finding-" + std::to_string(n) + "\">#" +
              std::to_string(n) + " " + what + "</a>";
    };
    if (culprit_cards.count(h)) {
      cls = "culprit";
      links(culprit_cards.at(h), "culprit");
    }
    if (suspect_cards.count(h)) {
      if (cls.empty()) cls = "suspect";
      links(suspect_cards.at(h), "suspect");
    }
    std::string kernel = cell(i, "worst_transfer_kernel").value_or(cell(i, "worst_kernel").value_or(""));
    const size_t slash = kernel.rfind('/');
    if (slash != std::string::npos && slash + 1 < kernel.size() &&
        kernel.find_first_not_of("0123456789", slash + 1) == std::string::npos)
      kernel = kernel.substr(0, slash + 1) + Bytes(std::stod(kernel.substr(slash + 1)));
    htable += "<tr id=\"" + HostAnchor(h) + "\"" + (cls.empty() ? "" : " class=\"" + cls + "\"") + "><td class=\"num\">" +
              HtmlEscape(cell(i, "rank").value_or("")) + "</td><td><b>" + HtmlEscape(h) + "</b></td><td>" + by +
              "</td><td class=\"num\">" + HtmlEscape(cell(i, "processes").value_or("")) + "</td><td class=\"num\">" +
              HtmlEscape(cell(i, "records").value_or("")) + "</td><td>" + pill(cell(i, "transfer_norm_busbw")) +
              "</td><td>" + pill(cell(i, "norm_busbw")) + "</td><td>" + HtmlEscape(kernel) + "</td></tr>";
  }
  htable += "</tbody></table>";
  if (others > 12)
    htable += "<p class=\"note\">" + std::to_string(others - 12) + " more hosts, all closer to 1.0 and named by no finding.</p>";
  return htable;
}

// The template's {{NAME}} markers filled in one pass, so inserted text is never scanned again.
std::string FillTemplate(const std::string& run, const std::string& data, const std::string& findings,
                         const std::string& summary, const std::string& fhtml, const std::string& htable,
                         const std::string& stacks) {
  std::string tpl(ReportTemplateHtml());
  std::string html;
  html.reserve(tpl.size() + ReportEchartsJs().size() + data.size() + findings.size() + summary.size() +
               fhtml.size() + htable.size() + stacks.size() + 4096);
  size_t pos = 0;
  while (true) {
    size_t at = tpl.find("{{", pos);
    if (at == std::string::npos) break;
    size_t end = tpl.find("}}", at);
    if (end == std::string::npos) break;
    html.append(tpl, pos, at - pos);
    std::string key = tpl.substr(at + 2, end - at - 2);
    if (key == "CSS") html += ReportCss();
    else if (key == "TITLE") html += HtmlEscape("collscope report: " + run);
    else if (key == "ECHARTS") html += ReportEchartsJs();
    else if (key == "DATA") html += ScriptSafe(data);
    else if (key == "FINDINGS") html += ScriptSafe(findings);
    else if (key == "SUMMARY") html += summary;
    else if (key == "FINDINGS_HTML") html += fhtml;
    else if (key == "HOST_TABLE") html += htable;
    else if (key == "STACKS_SECTION") html += stacks;
    else if (key == "STACKS_NAV") html += stacks.empty() ? "" : "<a href=\"#stacks\">Call stacks</a>";
    else if (key == "JS") html += ReportJs();
    else html.append(tpl, at, end + 2 - at);
    pos = end + 2;
  }
  html.append(tpl, pos, std::string::npos);
  return html;
}

Result<std::string> RenderReport(Store& store, const ReportOptions& ro) {
  std::string run, rid, baseline;
  COLLSCOPE_RETURN_IF_ERROR(PickRuns(store, ro, &run, &rid, &baseline));
  AnalysisOptions o;
  o.run = run;
  o.min_bytes = ro.min_bytes;
  int64_t t0 = 0, t1 = 0;
  COLLSCOPE_RETURN_IF_ERROR(ChooseBins(store, rid, ro, &o, &t0, &t1));
  FindingsSource fs;
  COLLSCOPE_RETURN_IF_ERROR(LoadFindings(store, ro, run, &fs));
  StacksRead stacks;
  COLLSCOPE_RETURN_IF_ERROR(LoadStacks(store, run, &stacks));
  const std::vector<Card> cards = Cards(fs.findings);
  std::map<std::string, CommInfo> comm_info;
  COLLSCOPE_RETURN_IF_ERROR(CommLabels(store, rid, fs.findings, &comm_info));
  const NamedHosts named = HostsNamedBy(cards);

  std::string data = "{";
  auto add = [&](const std::string& key, const Result<std::string>& value) -> Status {
    if (!value.ok()) return value.status();
    data += (data.size() > 1 ? ",\n" : "") + ScriptJson(key) + ":" + *value;
    return Status::Ok();
  };
  char meta[512];
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  std::snprintf(meta, sizeof meta,
                "{\"run\":%s,\"baseline\":%s,\"store\":%s,\"generated\":%s,\"bin_s\":%.6g,"
                "\"min_bytes\":%llu,\"top\":%d,\"charts\":%s}",
                ScriptJson(run).c_str(), baseline.empty() ? "null" : ScriptJson(baseline).c_str(),
                ScriptJson(store.path()).c_str(), ScriptJson(when).c_str(), o.bin_s,
                static_cast<unsigned long long>(o.min_bytes), ro.top_kernels,
                ReportHasCharts() ? "true" : "false");
  data += "\"meta\":" + std::string(meta);
  // The hot kernels once: the table shows the first 25, and their order picks the kernels that
  // the ECDF, temporal and range-bar plots show (as literal lists, not recomputed subqueries).
  Result<QueryResult> hot = store.Query(
      "SELECT h.rank, h.kernel_key, h.coll_type, h.n_ranks, h.nnodes, h.op, h.msg_size_bytes, "
      "h.records, h.bytes, h.time_us, h.time_share, h.cumulative_time_share, h.bytes_share, "
      "v.median_busbw_gbs, v.p5_busbw_gbs, v.p95_busbw_gbs, v.cv_busbw, v.mean_exec_time_us "
      "FROM hot_kernels h LEFT JOIN kernel_variation v USING (run_id, kernel_key) "
      "WHERE h.run_id = " + rid + " ORDER BY h.rank");
  if (!hot.ok()) return hot.status();
  std::string top, top_big, first_big;  // SQL lists of kernel keys: any size, and >= min_bytes
  int n_top = 0, n_big = 0;
  const int key_col = ColumnOf(*hot, "kernel_key"), size_col = ColumnOf(*hot, "msg_size_bytes");
  for (const auto& row : hot->rows) {
    if (!row[key_col]) continue;
    const std::string key = SqlString(*row[key_col]);
    if (n_top < ro.top_kernels) top += (n_top++ ? ", " : "") + key;
    if (n_big < ro.top_kernels && row[size_col] && std::stoull(*row[size_col]) >= o.min_bytes) {
      if (n_big == 0) first_big = key;
      top_big += (n_big++ ? ", " : "") + key;
    }
  }
  if (top.empty()) top = "NULL";
  if (top_big.empty()) top_big = first_big = "NULL";
  QueryResult hot25 = *hot;
  if (hot25.rows.size() > 25) hot25.rows.resize(25);

  Result<QueryResult> overview = store.Query(
      "SELECT o.*, k.kernels, k.bytes, k.time_us, "
      "(SELECT max(n_ranks) FROM op_dims d WHERE d.run_id = o.run_id) AS max_n_ranks, "
      "(SELECT count(*) FROM runs) AS runs_in_store, first_dump::VARCHAR AS first_dump_text, "
      "last_dump::VARCHAR AS last_dump_text FROM run_overview o, (SELECT count(DISTINCT "
      "kernel_key) AS kernels, sum(bytes) AS bytes, sum(time_us) AS time_us FROM kernel_stats "
      "WHERE run_id = " + rid + ") k WHERE o.run_id = " + rid);
  if (!overview.ok()) return overview.status();
  COLLSCOPE_RETURN_IF_ERROR(add("overview", TableJson(*overview)));
  int world = fs.read.ranks;  // global ranks, as the diagnosis knew them
  if (world == 0 && !overview->rows.empty()) {
    const int pc = ColumnOf(*overview, "processes");
    if (pc >= 0 && overview->rows[0][pc]) world = std::stoi(*overview->rows[0][pc]);
  }
  COLLSCOPE_RETURN_IF_ERROR(add("counts_by_op", Primitive(store, "counts_by_op", o)));
  COLLSCOPE_RETURN_IF_ERROR(add("counts_by_coll_type", Primitive(store, "counts_by_coll_type", o)));
  COLLSCOPE_RETURN_IF_ERROR(add("hot_kernels", TableJson(hot25)));
  COLLSCOPE_RETURN_IF_ERROR(add("ecdf", Primitive(store, "busbw_ecdf", o,
                                                  "kernel_key IN (" + top + ")",
                                                  "kernel_key, busbw_gbs")));
  COLLSCOPE_RETURN_IF_ERROR(add("temporal", Primitive(store, "temporal", o,
                                                      "kernel_key IN (" + top_big + ")",
                                                      "kernel_key, bin")));
  COLLSCOPE_RETURN_IF_ERROR(add("rank_cells", Primitive(store, "rank_cells", o)));
  COLLSCOPE_RETURN_IF_ERROR(add("kind_rank_cells", Primitive(store, "kind_rank_cells", o)));
  Result<std::string> host_sql = PrimitiveSql("host_table", o);
  if (!host_sql.ok()) return host_sql.status();
  Result<QueryResult> hosts = store.Query(*host_sql);
  if (!hosts.ok()) return hosts.status().WithPrefix("host_table: ");
  COLLSCOPE_RETURN_IF_ERROR(add("host_table", TableJson(*hosts)));
  COLLSCOPE_RETURN_IF_ERROR(add("host_heatmap", Primitive(store, "host_time_heatmap", o)));
  COLLSCOPE_RETURN_IF_ERROR(add("range_bars", Primitive(store, "range_bars", o,
      "kernel_key IN (" + first_big + ")")));
  COLLSCOPE_RETURN_IF_ERROR(add("resource", Primitive(store, "resource_usage", o)));
  // Steps, phases and kernels per rank, where the store has step/phase series, Kineto traces or
  // the CUPTI library's kernel summaries.
  for (const char* macro : {"step_cells", "phase_means", "parallel_grid", "kernel_mode_cells"}) {
    Result<QueryResult> t = store.Query(std::string("SELECT * FROM ") + macro + "(" + rid + ")");
    if (!t.ok()) return t.status().WithPrefix(std::string(macro) + ": ");
    COLLSCOPE_RETURN_IF_ERROR(add(macro, TableJson(*t)));
  }
  if (!baseline.empty()) {
    AnalysisOptions c = o;
    c.run.clear();
    c.prod_run = run;
    c.base_run = baseline;
    COLLSCOPE_RETURN_IF_ERROR(add("baseline", Primitive(store, "compare_runs", c)));
  }
  COLLSCOPE_RETURN_IF_ERROR(add("bands", BandsJson(cards)));
  COLLSCOPE_RETURN_IF_ERROR(add("named_hosts", NamedHostsJson(named)));
  std::map<int, std::string> charts;
  COLLSCOPE_RETURN_IF_ERROR(add("card_series", CardSeriesJson(store, rid, cards, t0, t1, &charts)));
  data += "}";

  // For programs: the findings the report shows, as `diagnose --json` writes them.
  const std::string findings = dg::FindingsToJson(fs.findings, fs.suppressed);
  return FillTemplate(run, data, findings, FirstScreenHtml(store, run, fs, cards, t0, t1, stacks),
                      FindingsHtml(fs, cards, world, t0, t1, comm_info, charts), HostTableHtml(*hosts, named),
                      StacksSectionHtml(stacks));
}

Status WriteReport(Store& store, const ReportOptions& options) {
  Result<std::string> html = RenderReport(store, options);
  if (!html.ok()) return html.status();
  std::ofstream out(options.output, std::ios::binary);
  if (!out) return Status::IOError(options.output + ": cannot write");
  out << *html;
  out.close();
  if (!out) return Status::IOError(options.output + ": write failed");
  return Status::Ok();
}

}  // namespace collscope
