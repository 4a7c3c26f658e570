// Test helper: parses a Chrome trace-event JSON document (failing the test when it is not one).
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdint>
#include <string>
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

}  // namespace collscope::diagnose::perfetto_test
