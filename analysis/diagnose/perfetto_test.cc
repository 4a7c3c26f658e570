// `collscope export --perfetto`: the output is one valid JSON object in Chrome trace-event form with
// the anomalous steps of the implicated ranks and their peers, and the findings as annotations.
#include "analysis/diagnose/perfetto.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <map>
#include <set>

#include "analysis/diagnose/diagnose.h"
#include "analysis/diagnose/kernel_detect.h"
#include "core/ingest.h"
#include "core/readers/kineto.h"
#include "sim/sim.h"
#include "tests/test_util.h"

namespace collscope::diagnose {
namespace {

struct Ev {
  std::string ph, name, cat, s;
  int64_t pid = -1, tid = -1;
  double ts = 0, dur = 0;
  std::string args;  // minified
};

// Parses the trace; fails the test when it is not valid JSON of the expected shape.
std::vector<Ev> Parse(const std::string& json) {
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
    if (x.ph == "X") {
      EXPECT_EQ(e["dur"].get_double().get(x.dur), simdjson::SUCCESS);
    }
    simdjson::dom::element a;
    if (e["args"].get(a) == simdjson::SUCCESS) x.args = simdjson::minify(a);
    out.push_back(std::move(x));
  }
  return out;
}

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

TEST(Perfetto, SimulatedStragglerWithCollectives) {
  testing::TempDir dir;
  sim::SimConfig c;
  c.seed = 5;
  c.cluster.hosts = 2;
  c.cluster.gpus_per_host = 4;
  c.cluster.nics_per_host = 4;
  c.parallel.tp = 2;
  c.parallel.pp = 2;
  c.workload.steps = 12;
  c.workload.layers = 4;
  c.inspector.verbose = true;  // start/stop times per collective
  c.output.dir = dir / "job";
  c.output.summary = false;
  c.faults.push_back({"gpu_straggler", {{"rank", "3"}, {"factor", "1.4"}, {"start_step", "5"},
                                        {"end_step", "8"}}});
  sim::SimStats stats;
  std::string err;
  ASSERT_EQ(sim::Simulate(c, &stats, &err), 0) << err;
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  IngestOptions io;
  io.run = "sim";
  io.threads = 1;
  auto ir = Ingest(**store, {dir / "job"}, io);
  ASSERT_TRUE(ir.ok()) << ir.status().message();
  ASSERT_TRUE(readers::IngestKineto(**store, {dir / "job"}, "sim").ok());
  auto f = DiagnoseKineto(**store, "sim", false);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->size(), 1u);
  ASSERT_EQ((*f)[0].ranks, (std::vector<int>{3}));
  std::string json;
  auto rep = ExportPerfetto(**store, *f, PerfettoOptions{}, &json);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  auto ev = Parse(json);
  EXPECT_GT(rep->kernels, 100u);
  EXPECT_GT(rep->collectives, 10u);
  // Context step 4 and steps 5-7, for rank 3 and its peers.
  std::set<std::string> steps;
  std::map<int64_t, size_t> colls;
  bool named = false, instant = false;
  for (const Ev& e : ev) {
    if (e.cat == "step" && e.pid == 3) steps.insert(e.name);
    if (e.cat == "nccl_record") ++colls[e.pid];
    if (e.ph == "M" && e.name == "process_name" && e.pid == 3)
      named = e.args.find("rank 3 (node-000)") != std::string::npos;
    if (e.ph == "i" && e.name == "slow_compute: rank 3") instant = true;
  }
  EXPECT_EQ(steps, (std::set<std::string>{"ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6",
                                          "ProfilerStep#7"}));
  EXPECT_TRUE(named);
  EXPECT_TRUE(instant);
  EXPECT_GT(colls[3], 0u);  // the straggler's own collectives, placed by its global rank
  EXPECT_GE(colls.size(), 2u);
}

}  // namespace
}  // namespace collscope::diagnose
