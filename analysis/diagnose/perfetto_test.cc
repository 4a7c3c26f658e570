// `collscope export --perfetto`: the output is one valid JSON object in Chrome trace-event form with
// the anomalous steps of the implicated ranks and their peers, and the findings as annotations.
#include "analysis/diagnose/perfetto.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "analysis/diagnose/perfetto_test_util.h"
#include "core/ingest.h"
#include "core/readers/ingest_inputs.h"
#include "core/readers/kineto.h"
#include "tests/test_util.h"

namespace collscope::diagnose {
namespace {

using perfetto_test::Ev;
using perfetto_test::Parse;
using perfetto_test::Problems;

// Three ranks' Kineto traces, steps 0-9 of 1 ms, one kernel per step; rank 2 slow in steps 5-6.
Result<std::unique_ptr<Store>> ThreeRankStore(const testing::TempDir& dir) {
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
  if (!store.ok()) return store.status();
  COLLSCOPE_RETURN_IF_ERROR(readers::IngestKineto(**store, {dir / "t"}, "run").status());
  return store;
}

TEST(Perfetto, HandBuiltStoreAndFinding) {
  testing::TempDir dir;
  auto store = ThreeRankStore(dir);
  ASSERT_TRUE(store.ok()) << store.status().message();
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
  EXPECT_EQ(Problems(ev), std::vector<std::string>{});
  EXPECT_EQ(rep->events, ev.size());
  EXPECT_EQ(rep->ranks, 2u);  // rank 2 and its victim 0; rank 1 is not implicated
  EXPECT_EQ(rep->windows, 1u);
  // Steps 4 (context), 5 and 6 of ranks 0 and 2, one kernel each.
  EXPECT_EQ(rep->steps, 6u);
  EXPECT_EQ(rep->kernels, 6u);
  std::set<std::string> step_names;
  size_t slow_kernels = 0, instants = 0, root = 0, victim = 0;
  double root_start = -1;
  std::map<int64_t, std::vector<Ev>> flows;  // by id
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
    if (e.name == "slow_compute (root cause)") { ++root; EXPECT_EQ(e.pid, 2); root_start = e.ts; }
    if (e.ph == "s" || e.ph == "f") flows[e.id].push_back(e);
    if (e.name == "victim of slow_compute") { ++victim; EXPECT_EQ(e.pid, 0); }
  }
  EXPECT_EQ(step_names, (std::set<std::string>{"ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"}));
  EXPECT_EQ(slow_kernels, 2u);
  EXPECT_EQ(instants, 1u);
  EXPECT_EQ(root, 1u);
  EXPECT_EQ(victim, 1u);
  // One arrow, from the root cause's findings slice to its victim's, where both begin.
  ASSERT_EQ(flows.size(), 1u);
  EXPECT_EQ(rep->flows, 1u);
  const std::vector<Ev>& arrow = flows.begin()->second;
  ASSERT_EQ(arrow.size(), 2u);
  EXPECT_EQ(arrow[0].ph, "s");
  EXPECT_EQ(arrow[0].pid, 2);
  EXPECT_EQ(arrow[1].ph, "f");
  EXPECT_EQ(arrow[1].pid, 0);
  for (const Ev& e : arrow) {
    EXPECT_EQ(e.tid, arrow[0].tid);  // the findings tracks
    EXPECT_DOUBLE_EQ(e.ts, root_start);
  }
  EXPECT_EQ(rep->stack_slices, 0u);  // no stacks in the store
}

// A rank that is one finding's root cause and, overlapping it, another's victim: on one track the
// second slice would half-overlap the first, which Perfetto drops; it goes to a second findings
// lane, and the arrows start and end in slices of their own lanes.
TEST(Perfetto, OverlappingFindingsOfARankTakeLanes) {
  testing::TempDir dir;
  auto store = ThreeRankStore(dir);
  ASSERT_TRUE(store.ok()) << store.status().message();
  Finding a, b, c;
  a.kind = b.kind = c.kind = Kind::kSlowCompute;
  a.ranks = {2};
  a.victims = {0};
  a.start_us = 1700000000005010;
  a.end_us = 1700000000006610;
  b.ranks = {0};
  b.victims = {2};
  b.start_us = 1700000000006000;
  b.end_us = 1700000000007500;
  // A microsecond before the first ends (times rounded by their writer): its slices start where
  // the first's end, on their lanes, and so does its arrow.
  c.ranks = {2};
  c.victims = {0};
  c.start_us = a.end_us - 1;
  c.end_us = 1700000000008000;
  std::string json;
  auto rep = ExportPerfetto(**store, {a, b, c}, PerfettoOptions{}, &json);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  auto ev = Parse(json);
  EXPECT_EQ(Problems(ev), std::vector<std::string>{});
  EXPECT_EQ(rep->flows, 3u);
  std::map<std::pair<int64_t, int64_t>, std::string> track_names;
  std::map<int64_t, std::set<int64_t>> finding_tids;  // rank -> tids of its findings slices
  std::set<std::tuple<int64_t, int64_t, double>> slice_starts;
  for (const Ev& e : ev) {
    if (e.ph == "M" && e.name == "thread_name") track_names[{e.pid, e.tid}] = e.args;
    if (e.ph == "X" && e.cat == "finding") {
      finding_tids[e.pid].insert(e.tid);
      slice_starts.insert({e.pid, e.tid, e.ts});
    }
  }
  // Each arrow's ends where its slices begin (inside an earlier slice of the lane, it would bind
  // to that one).
  for (const Ev& e : ev) {
    if (e.ph == "s" || e.ph == "f") {
      EXPECT_TRUE(slice_starts.count({e.pid, e.tid, e.ts}))
          << e.ph << " of flow " << e.id << " at " << e.ts;
    }
  }
  for (int64_t r : {0, 2}) {
    ASSERT_EQ(finding_tids[r].size(), 2u) << "rank " << r;
    EXPECT_NE(track_names[std::make_pair(r, *finding_tids[r].rbegin())].find("findings (2)"),
              std::string::npos);
  }
}

// Sampled call stacks (collscope stacks) on the ranks of the trace: a "main thread stacks" track
// per rank with one slice per stored stack of its main thread in the windows, joined by global
// rank, its overlapping stacks on lanes of their own; bounded by max_events.
TEST(Perfetto, MainThreadStacksOnTheirRanks) {
  testing::TempDir dir;
  constexpr int64_t kW = 1767225600000000, kS = 10000000;  // windows of 10 s
  auto line = [](int64_t tid, int64_t w, int64_t first, int64_t last, int count, const std::string& frames) {
    return "{\"type\":\"stacks\",\"tid\":" + std::to_string(tid) + ",\"thread\":\"t\",\"window_start_us\":" +
           std::to_string(w) + ",\"window_end_us\":" + std::to_string(w + kS) + ",\"first_us\":" +
           std::to_string(first) + ",\"last_us\":" + std::to_string(last) + ",\"count\":" + std::to_string(count) +
           ",\"frames\":\"" + frames + "\"}\n";
  };
  // Ranks 0-3 (pids 100-103), three windows each. Rank 2 compiles; the others wait in two stacks
  // sampled in turn (their [first, last] overlap); every process has a proxy thread too.
  for (int r = 0; r < 4; ++r) {
    const int pid = 100 + r;
    std::string f = "{\"collscope_stacks\":1,\"type\":\"process\",\"host\":\"node" + std::to_string(r) +
                    "\",\"pid\":" + std::to_string(pid) + ",\"rank\":" + std::to_string(r) +
                    ",\"exe\":\"python3\",\"command\":\"python3 train.py\",\"python\":\"3.11.2\","
                    "\"python_unread\":\"\",\"interval_us\":100000,\"native\":true}\n";
    for (int k = 0; k < 3; ++k) {
      const int64_t w = kW + k * kS;
      if (r == 2) {
        f += line(pid, w, w + 100000, w + 9900000, 99, "_start;step (train.py:41);compile_graph (train.py:39)");
      } else {
        f += line(pid, w, w + 100000, w + 9900000, 50, "_start;step (train.py:41);all_reduce (c10d.py:2050);poll");
        f += line(pid, w, w + 200000, w + 9800000, 49, "_start;step (train.py:41);all_reduce (c10d.py:2050);wait");
      }
      f += line(pid + 1, w, w, w + 9900000, 99, "start_thread;ncclProxyService;poll");
    }
    testing::WriteFile(dir / ("stacks/node" + std::to_string(r) + "-pid" + std::to_string(pid) + ".stacks.jsonl"), f);
  }
  auto store = Store::Open(":memory:");
  ASSERT_TRUE(store.ok());
  IngestOptions io;
  io.run = "run";
  io.threads = 1;
  auto in = readers::IngestInputs(**store, {dir / "stacks"}, io);
  ASSERT_TRUE(in.ok()) << in.status().message();
  ASSERT_EQ(in->stacks.stacks, 4u * 3 * 2 + 3 * 3);
  // A hang of rank 2 from the second window on, rank 0 and 1 its victims (rank 3 is not in the
  // trace); the window it gets, without steps: [its start, +15 s], so the second and third windows.
  Finding f;
  f.kind = Kind::kHang;
  f.confidence = 0.95;
  f.ranks = {2};
  f.victims = {0, 1};
  f.start_us = kW + kS;
  f.end_us = kW + 3 * kS;
  f.summary = "Rank 2 never joined";
  PerfettoOptions o;
  o.max_window_us = 15e6;
  std::string json;
  auto rep = ExportPerfetto(**store, {f}, o, &json);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  auto ev = Parse(json);
  EXPECT_EQ(Problems(ev), std::vector<std::string>{});
  EXPECT_EQ(rep->events, ev.size());
  EXPECT_EQ(rep->ranks, 3u);
  EXPECT_EQ(rep->stack_slices, 2u + 4 + 4);
  EXPECT_EQ(rep->stack_slices_left_out, 0u);
  EXPECT_FALSE(rep->truncated);
  std::map<int64_t, std::vector<const Ev*>> by_rank;  // the stack slices
  std::map<std::pair<int64_t, int64_t>, std::string> track_names;
  for (const Ev& e : ev) {
    if (e.ph == "M" && e.name == "thread_name" && e.tid >= 10 && e.tid < 100) track_names[{e.pid, e.tid}] = e.args;
    if (e.cat != "stacks") continue;
    by_rank[e.pid].push_back(&e);
    EXPECT_EQ(e.ph, "X");
    EXPECT_EQ(e.args.find("ncclProxyService"), std::string::npos) << e.args;  // main threads only
    EXPECT_GE(e.ts, static_cast<double>(kW + kS));  // the first window is outside the trace's
  }
  ASSERT_EQ(by_rank.size(), 3u);
  EXPECT_EQ(by_rank.count(3), 0u);
  // Rank 2: its own frame, one lane, each slice from the stack's first sample to its last.
  ASSERT_EQ(by_rank[2].size(), 2u);
  const Ev& c = *by_rank[2][0];
  EXPECT_EQ(c.name, "compile_graph (train.py:39)");
  EXPECT_EQ(c.tid, 10);
  EXPECT_DOUBLE_EQ(c.ts, static_cast<double>(kW + kS + 100000));
  EXPECT_DOUBLE_EQ(c.dur, 9800000.0);
  EXPECT_NE(c.args.find("\"frames\":\"_start;step (train.py:41);compile_graph (train.py:39)\""), std::string::npos)
      << c.args;
  EXPECT_NE(c.args.find("\"count\":99"), std::string::npos) << c.args;
  EXPECT_NE(c.args.find("\"window\":{\"start_us\":" + std::to_string(kW + kS) + ",\"end_us\":" +
                        std::to_string(kW + 2 * kS) + "}"),
            std::string::npos)
      << c.args;
  EXPECT_NE(c.args.find("\"pid\":102"), std::string::npos);
  EXPECT_EQ(by_rank[2][1]->tid, 10);
  EXPECT_NE(track_names[std::make_pair(int64_t{2}, int64_t{10})].find("main thread stacks"), std::string::npos);
  EXPECT_EQ(track_names.count(std::make_pair(int64_t{2}, int64_t{11})), 0u);
  // Ranks 0 and 1: their waits, on two lanes whose slices never overlap.
  for (int r : {0, 1}) {
    ASSERT_EQ(by_rank[r].size(), 4u) << r;
    std::map<int64_t, std::vector<std::pair<double, double>>> lanes;
    for (const Ev* e : by_rank[r]) {
      EXPECT_EQ(e->name.rfind("all_reduce (c10d.py:2050) -> ", 0), 0u) << e->name;
      lanes[e->tid].push_back({e->ts, e->ts + e->dur});
    }
    EXPECT_EQ(lanes.size(), 2u);
    for (auto& [tid, spans] : lanes) {
      std::sort(spans.begin(), spans.end());
      for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first) << r;
    }
    EXPECT_NE(track_names[std::make_pair(int64_t{r}, int64_t{11})].find("main thread stacks (2)"), std::string::npos);
  }
  // Bounded by max_events: the trace stops adding stacks there.
  const size_t stack_events = 10 + 2 * 5;  // slices, and two metadata events per lane
  size_t finding_events = 0;  // its slices, instant and arrows, written whatever the bound
  for (const Ev& e : Parse(json)) finding_events += e.cat == "finding";
  PerfettoOptions small = o;
  small.max_events = rep->events - finding_events - stack_events + 6;
  auto cut = ExportPerfetto(**store, {f}, small, &json);
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  EXPECT_TRUE(cut->truncated);
  EXPECT_GT(cut->stack_slices, 0u);
  EXPECT_LT(cut->stack_slices, 10u);
  size_t not_findings = 0, slices = 0;
  EXPECT_EQ(Problems(Parse(json)), std::vector<std::string>{});
  for (const Ev& e : Parse(json)) {
    not_findings += e.cat != "finding";
    slices += e.cat == "stacks";
  }
  EXPECT_LE(not_findings, small.max_events);
  EXPECT_EQ(slices, cut->stack_slices);
}

}  // namespace
}  // namespace collscope::diagnose
