// proxy.wire end to end: simulated jobs whose Inspector logs carry v4.4 proxy_trace records
// (NCCL_INSPECTOR_ENABLE_PROXY=1), diagnosed from the logs alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/diagnose.h"
#include "sim/sim.h"
#include "tests/test_util.h"

namespace collscope::diagnose {
namespace {

struct Job {
  int hosts = 4, gpus = 8, tp = 8, pp = 2, ep = 1;
  bool p2p = true;
  int steps = 30;
  double contention_prob = -1, contention_min = -1;
};

std::vector<Finding> Diagnose(const std::string& dir, const Job& j, const std::vector<std::string>& faults,
                              std::vector<Suppressed>* suppressed = nullptr) {
  sim::SimConfig c;
  c.seed = 5;
  c.cluster.hosts = j.hosts;
  c.cluster.gpus_per_host = c.cluster.nics_per_host = j.gpus;
  c.parallel.tp = j.tp;
  c.parallel.pp = j.pp;
  c.parallel.ep = j.ep;
  c.workload.layers = 4;
  c.workload.hidden = 4096;
  c.workload.seq_len = 2048;
  c.workload.steps = j.steps;
  c.inspector.dump_interval_us = 200000;
  c.inspector.p2p = j.p2p;
  c.inspector.proxy = true;
  c.noise.compute_sigma = 0.05;
  c.noise.comm_sigma = 0.1;
  c.noise.contention_prob = j.contention_prob;
  c.noise.contention_min = j.contention_min;
  c.output.dir = dir;
  c.output.kineto_max_ranks = 0;
  for (const std::string& f : faults) {
    sim::FaultSpec spec;
    std::string err;
    EXPECT_EQ(sim::ParseFaultSpec(f, &spec).message(), "");
    c.faults.push_back(spec);
  }
  sim::SimStats stats;
  std::string err;
  EXPECT_EQ(sim::Simulate(c, &stats).message(), "");
  std::vector<std::string> logs;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/nccl-inspector"))
    if (e.path().extension() == ".log") logs.push_back(e.path().string());
  DiagnoseOptions o;
  o.suppressed = suppressed;
  InputSummary read;
  auto f = DiagnosePaths(logs, o, nullptr, nullptr, &read);
  EXPECT_TRUE(f.ok()) << f.status().message();
  // What was read says so: the wire times are among the inputs.
  EXPECT_NE(read.ToText().find(" network sends (Inspector proxy_trace)"), std::string::npos) << read.ToText();
  return f.ok() ? *f : std::vector<Finding>{};
}

// Each simulated job takes about 25 s under the sanitizers: one runs there (with the hand-built
// cases, the same code), the others in release builds.
#ifdef COLLSCOPE_SANITIZED
#define SKIP_UNDER_SANITIZERS() GTEST_SKIP() << "a simulated job per test is a release-build check; ADegradedNicIsItsHostAndEveryRankOnIt runs the same code here"
#else
#define SKIP_UNDER_SANITIZERS() (void)0
#endif

bool DetectedBy(const Finding& f, const std::string& detector) {
  if (f.detector == detector) return true;
  for (const Evidence& e : f.evidence)
    if (e.key == "also_detected_by" && e.text.find(detector) != std::string::npos) return true;
  return false;
}

TEST(ProxyWire, ADegradedNicIsItsHostAndEveryRankOnIt) {
  testing::TempDir dir;
  auto f = Diagnose(dir / "job", Job{}, {"kind=nic_degrade,host=2,factor=0.3,start_step=0,end_step=30"});
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].kind, Kind::kSlowLink);
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"node-002"})) << FindingsToText(f);
  EXPECT_TRUE(DetectedBy(f[0], "proxy.wire")) << FindingsToText(f);
  EXPECT_EQ(f[0].ranks, std::vector<int>({16, 17, 18, 19, 20, 21, 22, 23})) << FindingsToText(f);
}

TEST(ProxyWire, OneRailOfAHostIsThatRanksNic) {
  SKIP_UNDER_SANITIZERS();
  testing::TempDir dir;
  // Rail 3 of node-001 only: rank 11's NIC. Its host's other NICs are healthy, so the host's
  // other ranks are not named, and the finding says which rank's NIC it is.
  auto f = Diagnose(dir / "job", Job{}, {"kind=nic_degrade,host=1,rail=3,factor=0.25,start_step=0,end_step=30"});
  bool named = false;
  for (const Finding& x : f) {
    if (x.detector != "proxy.wire") continue;
    EXPECT_EQ(x.hosts, std::vector<std::string>({"node-001"})) << FindingsToText(f);
    EXPECT_EQ(x.ranks, std::vector<int>({11})) << FindingsToText(f);
    named = true;
  }
  EXPECT_TRUE(named) << FindingsToText(f);
}

TEST(ProxyWire, WithoutP2pRecordsTheWireNamesTheHostTheRecordsCannotTellApart) {
  SKIP_UNDER_SANITIZERS();
  testing::TempDir dir;
  // No p2p records: the degraded host's only recorded cross-host traffic is its data-parallel
  // collectives, which span the same hosts as its partners'. The proxy wire times of those very
  // collectives tell which end is slow, and the records' finding about them is that end's.
  // (Its pipeline partner node-001, held by the unrecorded pipeline transfers, still arrives
  // late in its own data-parallel group: without p2p records nothing says why.)
  std::vector<Suppressed> dropped;
  auto f = Diagnose(dir / "job", Job{.hosts = 8, .tp = 8, .pp = 2, .p2p = false},
                    {"kind=nic_degrade,host=5,factor=0.3,start_step=10,end_step=25"}, &dropped);
  std::vector<const Finding*> links;
  for (const Finding& x : f)
    if (x.kind == Kind::kSlowLink || x.kind == Kind::kSlowNetwork) links.push_back(&x);
  ASSERT_EQ(links.size(), 1u) << FindingsToText(f) << SuppressedToText(dropped);
  EXPECT_EQ(links[0]->kind, Kind::kSlowLink);
  EXPECT_EQ(links[0]->hosts, std::vector<std::string>({"node-005"})) << FindingsToText(f);
  EXPECT_EQ(links[0]->detector, "proxy.wire") << FindingsToText(f);
  EXPECT_TRUE(DetectedBy(*links[0], "comm.slow_link")) << FindingsToText(f);
}

TEST(ProxyWire, AHealthyJobUnderHeavyContentionHasNoSlowWire) {
  SKIP_UNDER_SANITIZERS();
  testing::TempDir dir;
  auto f = Diagnose(dir / "job", Job{.contention_prob = 0.3, .contention_min = 0.5}, {});
  EXPECT_TRUE(f.empty()) << FindingsToText(f);
}

// Five processes on five hosts in one communicator; `sends` are (from, to, wire_us) of 1 MiB,
// four of each, in one time bin.
CommData Wires(const std::vector<std::tuple<int, int, double>>& sends) {
  CommData d;
  Comm c;
  c.id = "0xd0";
  c.n_ranks = 5;
  for (int p = 0; p < 5; ++p) {
    d.hosts.push_back("node-00" + std::to_string(p));
    d.procs.push_back({p, p});
    c.procs.push_back(p);
    c.hosts.push_back(p);
  }
  d.comms.push_back(c);
  int64_t t = 1'000'000;
  for (int k = 0; k < 4; ++k)
    for (auto [from, to, wire] : sends) d.proxy_sends.push_back({0, from, to, 1 << 20, wire, t += 100});
  return d;
}

TEST(ProxyWire, AnEndWhoseOnlyTransfersAreWithTheCulpritIsItsVictim) {
  // Rank 1 sends only to and from rank 0, whose every wire is slow: all of rank 1's transfers are
  // slow too, but rank 0 explains them (the fewest ends that explain every slow wire).
  CommData d = Wires({{0, 1, 80}, {1, 0, 80}, {0, 2, 80}, {2, 0, 80}, {0, 3, 80}, {3, 0, 80},
                      {2, 3, 20}, {3, 2, 20}, {2, 4, 20}, {4, 2, 20}, {3, 4, 20}, {4, 3, 20}});
  CommOptions o;
  o.window_us = 10e6;
  auto f = DetectSlowWire(d, o);
  ASSERT_EQ(f.size(), 1u) << FindingsToText(f);
  EXPECT_EQ(f[0].hosts, std::vector<std::string>({"node-000"}));
  EXPECT_EQ(f[0].victims, std::vector<int>({1, 2, 3}));
}

TEST(ProxyWire, ScatteredSlowTransfersOfAMostlyFastEndAreNoFinding) {
  // Rank 2's three slow sends among its many fast ones (a congested moment, contention): an end
  // is a culprit only when most of its transfers are slow.
  std::vector<std::tuple<int, int, double>> sends = {{2, 0, 80}};
  for (int k = 0; k < 3; ++k)
    for (auto [a, b] : {std::pair{2, 1}, {1, 2}, {2, 3}, {3, 2}, {2, 4}, {4, 2}, {0, 1}, {3, 4}})
      sends.push_back({a, b, 20});
  CommOptions o;
  o.window_us = 10e6;
  auto f = DetectSlowWire(Wires(sends), o);
  EXPECT_TRUE(f.empty()) << FindingsToText(f);
}

Finding Link(const std::string& detector, Kind kind, std::vector<std::string> hosts, std::vector<int> ranks,
             double confidence) {
  Finding f;
  f.kind = kind;
  f.detector = detector;
  f.hosts = std::move(hosts);
  f.ranks = std::move(ranks);
  f.comms = {"0xd0"};
  f.start_us = 1000;
  f.end_us = 9000;
  f.confidence = confidence;
  f.summary = detector;
  return f;
}

TEST(ProxyWire, TheWiresEndKeepsItsNicWhenTheRecordsNameItsWholeHost) {
  // The records saw node-001's communicators slow (every rank of the host); the wire times name
  // rank 11's NIC. One finding, the wire's, whichever is more confident.
  std::vector<Finding> fs = {Link("comm.slow_link", Kind::kSlowLink, {"node-001"}, {8, 9, 10, 11, 12, 13, 14, 15}, 0.95),
                             Link("proxy.wire", Kind::kSlowLink, {"node-001"}, {11}, 0.8)};
  std::vector<Suppressed> dropped;
  Consolidate(&fs, &dropped);
  ASSERT_EQ(fs.size(), 1u) << FindingsToText(fs);
  EXPECT_EQ(fs[0].detector, "proxy.wire");
  EXPECT_EQ(fs[0].ranks, std::vector<int>({11}));
  EXPECT_EQ(fs[0].confidence, 0.95);
  EXPECT_TRUE(DetectedBy(fs[0], "comm.slow_link"));
}

TEST(ProxyWire, ASlowNetworksSuspectThatTheWireNamesIsTheLink) {
  std::vector<Finding> fs = {
      Link("comm.slow_link", Kind::kSlowNetwork, {"node-001", "node-002", "node-003"}, {}, 0.9),
      Link("proxy.wire", Kind::kSlowLink, {"node-002"}, {16, 17}, 0.7)};
  std::vector<Suppressed> dropped;
  Consolidate(&fs, &dropped);
  ASSERT_EQ(fs.size(), 1u) << FindingsToText(fs);
  EXPECT_EQ(fs[0].kind, Kind::kSlowLink);
  EXPECT_EQ(fs[0].hosts, std::vector<std::string>({"node-002"}));
  EXPECT_EQ(fs[0].ranks, std::vector<int>({16, 17}));
  // Not without a communicator both saw slow: time overlap alone relates nothing.
  fs = {Link("comm.slow_link", Kind::kSlowNetwork, {"node-001", "node-002", "node-003"}, {}, 0.9),
        Link("proxy.wire", Kind::kSlowLink, {"node-002"}, {16, 17}, 0.7)};
  fs[1].comms = {"0xe0"};
  Consolidate(&fs, &dropped);
  EXPECT_EQ(fs.size(), 2u) << FindingsToText(fs);
}

}  // namespace
}  // namespace collscope::diagnose
