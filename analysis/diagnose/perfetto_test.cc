// `collscope export --perfetto`: the output is one valid JSON object in Chrome trace-event form with
// the anomalous steps of the implicated ranks and their peers, and the findings as annotations.
#include "analysis/diagnose/perfetto.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "analysis/diagnose/perfetto_test_util.h"
#include "core/readers/kineto.h"
#include "tests/test_util.h"

namespace collscope::diagnose {
namespace {

using perfetto_test::Ev;
using perfetto_test::Parse;

TEST(Perfetto, HandBuiltStoreAndFinding) {
  testing::TempDir dir;
  // Three ranks, steps 0-9 of 1 ms, one kernel per step; rank 2 slow in steps 5-6.
  for (int r = 0; r < 3; ++r) {
    std::string ev;
    for (int s = 0; s < 10; ++s) {
      const double t = 1000.0 * s;
      const double d = (r == 2 && (s == 5 || s == 6)) ? 600 : 400;
      ev += "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#" + std::to_string(s) +
            "\", \"pid\": 9, \"tid\": 9, \"ts\": " + std::to_string(t) + ", \"dur\": 1000},\n";
      ev += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm \\\"x\\\"\", \"pid\": 0, \"tid\": 7, \"ts\": " +
            std::to_string(t + 10) + ", \"dur\": " + std::to_string(d) + ", \"args\": {\"stream\": 7}},\n";
    }
    ev += "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"tid\": 0, \"args\": {\"name\": \"x\"}}";
    testing::WriteFile(dir / ("t/h" + std::to_string(r) + "_9.1.pt.trace.json"),
                       "{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": " + std::to_string(r) +
                           ", \"world_size\": 3}, \"traceEvents\": [" + ev +
                           "], \"baseTimeNanoseconds\": 1700000000000000000}");
  }
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE(readers::IngestKineto(**store, {dir / "t"}, "run").ok());
  Finding f;
  f.kind = Kind::kSlowCompute;
  f.confidence = 0.9;
  f.ranks = {2};
  f.victims = {0};
  f.start_us = 1700000000005010;
  f.end_us = 1700000000006610;
  f.summary = "Rank 2 is slow \"here\"";
  f.Add("first_step", 5);
  f.Add("last_step", 6);
  f.AddText("worst_kernel", "gemm");
  PerfettoOptions o;
  std::string json;
  auto rep = ExportPerfetto(**store, {f}, o, &json);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  auto ev = Parse(json);
  EXPECT_EQ(rep->events, ev.size());
  EXPECT_EQ(rep->ranks, 2u);  // rank 2 and its victim 0; rank 1 is not implicated
  EXPECT_EQ(rep->windows, 1u);
  // Steps 4 (context), 5 and 6 of ranks 0 and 2, one kernel each.
  EXPECT_EQ(rep->steps, 6u);
  EXPECT_EQ(rep->kernels, 6u);
  std::set<std::string> step_names;
  size_t slow_kernels = 0, instants = 0, root = 0, victim = 0;
  for (const Ev& e : ev) {
    EXPECT_NE(e.pid, 1) << e.name;
    if (e.cat == "step") step_names.insert(e.name);
    if (e.cat == "compute" && e.pid == 2 && e.dur == 600) ++slow_kernels;
    if (e.cat == "compute") {
      EXPECT_EQ(e.name, "gemm \"x\"");
    }
    if (e.ph == "i") {
      ++instants;
      EXPECT_EQ(e.s, "g");
      EXPECT_EQ(e.name, "slow_compute: rank 2");
      EXPECT_DOUBLE_EQ(e.ts, 1700000000005010.0);
      EXPECT_NE(e.args.find("\"summary\":\"Rank 2 is slow \\\"here\\\"\""), std::string::npos) << e.args;
      EXPECT_NE(e.args.find("\"evidence.worst_kernel\":\"gemm\""), std::string::npos) << e.args;
    }
    if (e.name == "slow_compute (root cause)") { ++root; EXPECT_EQ(e.pid, 2); }
    if (e.name == "victim of slow_compute") { ++victim; EXPECT_EQ(e.pid, 0); }
  }
  EXPECT_EQ(step_names, (std::set<std::string>{"ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"}));
  EXPECT_EQ(slow_kernels, 2u);
  EXPECT_EQ(instants, 1u);
  EXPECT_EQ(root, 1u);
  EXPECT_EQ(victim, 1u);
}

}  // namespace
}  // namespace collscope::diagnose
