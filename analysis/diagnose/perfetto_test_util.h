// Test helpers: parse a Chrome trace-event JSON document (failing the test when it is not one),
// and check it as Perfetto's importer needs it (Problems).
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace collscope::diagnose::perfetto_test {

struct Ev {
  std::string ph, name, cat, s;
  int64_t pid = -1, tid = -1, id = -1;  // id: a flow event's
  double ts = 0, dur = 0;
  std::string args;  // minified
};

// Parses the trace; fails the test when it is not valid JSON of the expected shape.
inline std::vector<Ev> Parse(const std::string& json) {
  std::vector<Ev> out;
  simdjson::dom::parser p;
  simdjson::dom::element root;
  auto err = p.parse(json).get(root);
  EXPECT_EQ(err, simdjson::SUCCESS) << "not valid JSON";
  if (err) return out;
  simdjson::dom::array events;
  EXPECT_EQ(root["traceEvents"].get_array().get(events), simdjson::SUCCESS);
  for (simdjson::dom::element e : events) {
    Ev x;
    std::string_view sv;
    EXPECT_EQ(e["ph"].get_string().get(sv), simdjson::SUCCESS);
    x.ph = sv;
    EXPECT_EQ(e["name"].get_string().get(sv), simdjson::SUCCESS);
    x.name = sv;
    if (e["cat"].get_string().get(sv) == simdjson::SUCCESS) x.cat = sv;
    if (e["s"].get_string().get(sv) == simdjson::SUCCESS) x.s = sv;
    EXPECT_EQ(e["pid"].get_int64().get(x.pid), simdjson::SUCCESS);
    EXPECT_EQ(e["tid"].get_int64().get(x.tid), simdjson::SUCCESS);
    EXPECT_EQ(e["ts"].get_double().get(x.ts), simdjson::SUCCESS);
    if (x.ph == "s" || x.ph == "f") {
      EXPECT_EQ(e["id"].get_int64().get(x.id), simdjson::SUCCESS);
    }
    if (x.ph == "X") {
      EXPECT_EQ(e["dur"].get_double().get(x.dur), simdjson::SUCCESS);
    }
    simdjson::dom::element a;
    if (e["args"].get(a) == simdjson::SUCCESS) x.args = simdjson::minify(a);
    out.push_back(std::move(x));
  }
  return out;
}

// What a trace must be for Perfetto (and chrome://tracing) to show it as written, checked over
// every event; one line per problem. No trace processor can be installed here (Perfetto's ships
// from Google's storage, not a package registry), so this checks the format's rules itself:
// - a known phase, and finite, non-negative times;
// - complete slices ("X") of one thread nest: two either do not overlap or one holds the other
//   (Perfetto drops a slice that half-overlaps another and says so only in its import stats);
// - every flow has one start ("s") and one finish ("f"), the finish not before the start, each
//   inside a slice of its own thread at its time (a flow binds to the slice around it; without
//   one the arrow is lost);
// - instants ("i") scoped g, p or t;
// - every process and thread with events is named by metadata ("M"), so that no track is blank.
inline std::vector<std::string> Problems(const std::vector<Ev>& events) {
  std::vector<std::string> out;
  constexpr double kEps = 2e-3;  // microseconds: times and durations are each printed to 1e-3
  const std::set<std::string> phases = {"X", "i", "I", "M", "s", "f", "t", "B", "E", "C"};
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> slices;
  std::set<int64_t> named_processes;
  std::set<std::pair<int64_t, int64_t>> named_threads, used_threads;
  std::map<int64_t, std::vector<const Ev*>> flows;
  auto where = [](const Ev& e) {
    return "\"" + e.name + "\" (" + e.ph + ", pid " + std::to_string(e.pid) + ", tid " +
           std::to_string(e.tid) + ", ts " + std::to_string(e.ts) + ")";
  };
  for (const Ev& e : events) {
    if (!phases.count(e.ph)) out.push_back("unknown phase: " + where(e));
    if (e.ph == "M") {
      if (e.name == "process_name") named_processes.insert(e.pid);
      if (e.name == "thread_name") named_threads.insert({e.pid, e.tid});
      continue;
    }
    used_threads.insert({e.pid, e.tid});
    if (!std::isfinite(e.ts) || e.ts < 0) out.push_back("bad time: " + where(e));
    if (e.ph == "X") {
      if (!std::isfinite(e.dur) || e.dur < 0) out.push_back("bad duration: " + where(e));
      slices[{e.pid, e.tid}].push_back({e.ts, e.ts + e.dur});
    }
    if (e.ph == "i" && e.s != "g" && e.s != "p" && e.s != "t")
      out.push_back("instant without a scope: " + where(e));
    if (e.ph == "s" || e.ph == "f") flows[e.id].push_back(&e);
  }
  for (auto& [thread, v] : slices) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;  // holders first
    });
    std::vector<double> open;  // ends of the slices holding the current one
    for (const auto& [b, e] : v) {
      while (!open.empty() && open.back() <= b + kEps) open.pop_back();
      if (!open.empty() && e > open.back() + kEps)
        out.push_back("slices overlap without nesting on pid " + std::to_string(thread.first) +
                      " tid " + std::to_string(thread.second) + ": [" + std::to_string(b) + ", " +
                      std::to_string(e) + "] ends after the slice holding it, at " +
                      std::to_string(open.back()));
      open.push_back(e);
    }
  }
  auto inside_a_slice = [&](const Ev& e) {
    auto it = slices.find({e.pid, e.tid});
    if (it == slices.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(), [&](const auto& s) {
      return s.first <= e.ts + kEps && e.ts <= s.second + kEps;
    });
  };
  for (const auto& [id, v] : flows) {
    const Ev* start = nullptr;
    const Ev* finish = nullptr;
    for (const Ev* e : v) (e->ph == "s" ? start : finish) = e;
    if (v.size() != 2 || !start || !finish) {
      out.push_back("flow " + std::to_string(id) + " has " + std::to_string(v.size()) +
                    " events, not one start and one finish");
      continue;
    }
    if (finish->ts + kEps < start->ts)
      out.push_back("flow " + std::to_string(id) + " finishes before it starts");
    for (const Ev* e : {start, finish})
      if (!inside_a_slice(*e))
        out.push_back("flow " + std::to_string(id) + " is in no slice of its thread: " + where(*e));
  }
  for (const auto& [pid, tid] : used_threads) {
    if (!named_processes.count(pid))
      out.push_back("process " + std::to_string(pid) + " has events and no name");
    if (!named_threads.count({pid, tid}))
      out.push_back("thread " + std::to_string(tid) + " of process " + std::to_string(pid) +
                    " has events and no name");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace collscope::diagnose::perfetto_test
